//! `ptc vendor`: keep the checked-in copies of `schema_url` documents the build compiles from,
//! and (`--check`, for CI) report how the live documents drifted from them.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use ptc_codegen::vendored::{self, VendoredSource};
use ptc_core::documents::NetworkSource;
use ptc_plan::{DocumentRequest, DocumentSource, Loaded, SchemaLocation};

/// Arguments of `ptc vendor`.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  ptc vendor fixtures/observatory/upstreams.json
  ptc vendor --check fixtures/observatory/upstreams.json

Each schema_url document is written to vendored/<upstream>.openapi.json next to the config;
ptc_upstreams! compiles from those copies and never uses the network.

Exit codes:
  0  vendored (or, with --check, no included operation drifted)
  1  drift, a missing copy, or a problem; each with the message the build would give
  2  bad usage")]
pub struct VendorArgs {
    /// The upstreams.json whose `schema_url` documents to vendor.
    config: PathBuf,
    /// Change nothing: compare the vendored copies with the live documents and exit 1 on drift
    /// of an included operation.
    #[arg(long)]
    check: bool,
}

/// Fetches like the runtime does and remembers every `schema_url` document it fetched.
struct Recording {
    fetched: RefCell<Vec<(String, Vec<u8>)>>,
}

impl DocumentSource for Recording {
    fn fetch(&self, request: &DocumentRequest) -> Result<Vec<u8>, String> {
        let bytes = NetworkSource.fetch(request)?;
        if let SchemaLocation::Url(_) = request.location {
            self.fetched
                .borrow_mut()
                .push((request.upstream.to_string(), bytes.clone()));
        }
        Ok(bytes)
    }
}

/// Runs `ptc vendor`.
pub fn run(args: VendorArgs) -> ExitCode {
    let live = Recording {
        fetched: RefCell::new(Vec::new()),
    };
    let loaded = ptc_plan::load_with(&args.config, &live);
    let fetched = live.fetched.into_inner();
    if args.check {
        return check(&args.config, loaded, &fetched);
    }
    match loaded {
        Err(diags) => {
            eprintln!("{diags}");
            eprintln!("nothing was vendored: the build would fail with the live documents");
            ExitCode::FAILURE
        }
        Ok(_) if fetched.is_empty() => {
            println!("no upstream uses schema_url: nothing to vendor");
            ExitCode::SUCCESS
        }
        Ok(_) => write_all(&args.config, &fetched),
    }
}

fn write_all(config: &Path, fetched: &[(String, Vec<u8>)]) -> ExitCode {
    for (upstream, bytes) in fetched {
        let path = vendored::path(config, upstream);
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&path, bytes));
        match written {
            Ok(()) => println!(
                "vendored `{upstream}` into {} ({} bytes)",
                path.display(),
                bytes.len()
            ),
            Err(e) => {
                eprintln!("error: cannot write {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

/// Compares the vendored copies with the live documents; exit 1 when an included operation
/// drifted (or the build would fail after re-vendoring).
fn check(
    config: &Path,
    live: Result<Loaded, ptc_plan::Diagnostics>,
    fetched: &[(String, Vec<u8>)],
) -> ExitCode {
    let mut drifted = false;
    let mut changed = Vec::new();
    for (upstream, bytes) in fetched {
        let path = vendored::path(config, upstream);
        match std::fs::read(&path) {
            Ok(old) if old == *bytes => println!("`{upstream}`: vendored copy is up to date"),
            Ok(_) => changed.push(upstream.as_str()),
            Err(_) => {
                drifted = true;
                println!(
                    "`{upstream}`: no vendored copy at {}; run `ptc vendor {}`",
                    path.display(),
                    config.display()
                );
            }
        }
    }
    if changed.is_empty() {
        if let Err(diags) = &live {
            eprintln!("{diags}");
            return ExitCode::FAILURE;
        }
        return exit(drifted);
    }
    let live = match live {
        Ok(live) => live,
        Err(diags) => {
            println!("the live documents changed; after `ptc vendor` the build fails with:");
            println!("{diags}");
            return ExitCode::FAILURE;
        }
    };
    let vendored = match ptc_plan::load_with(config, &VendoredSource::new(config)) {
        Ok(vendored) => vendored,
        Err(diags) => {
            println!("the vendored documents do not compile; the build fails with:");
            println!("{diags}");
            return ExitCode::FAILURE;
        }
    };
    let drift = ptc_codegen::drift::compare(&vendored.plan, &live.plan);
    for upstream in &changed {
        let mine: Vec<_> = drift.iter().filter(|d| d.upstream == *upstream).collect();
        if mine.is_empty() {
            println!("`{upstream}`: the document changed, but none of its included operations did");
        }
        for d in mine {
            drifted = true;
            println!("drift: {d}");
        }
    }
    exit(drifted)
}

fn exit(drifted: bool) -> ExitCode {
    if drifted {
        println!("drift found: review it, then run `ptc vendor` and rebuild");
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
