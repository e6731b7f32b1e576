//! `ptc vendor`: keep the checked-in copies the build compiles from (each `schema_url` document,
//! each MCP upstream's tool list), and (`--check`, for CI) report how the live documents and
//! servers drifted from them.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use ptc_codegen::vendored::{self, VendoredSource};
use ptc_core::wire::documents::NetworkSource;
use ptc_plan::pins::ToolList;
use ptc_plan::{DocumentRequest, DocumentSource, Loaded, SchemaLocation};

/// Arguments of `ptc vendor`.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  ptc vendor fixtures/observatory/upstreams.json
  ptc vendor --check fixtures/observatory/upstreams.json

Each schema_url document is written to vendored/<upstream>.openapi.json next to the config, and
each MCP upstream's tool list (connecting with its configured command or URL and credentials)
to vendored/<upstream>.tools.json: the pins. ptc_upstreams! compiles from those copies and never
uses the network; a host refuses an MCP tool that no longer matches its pin.

Exit codes:
  0  vendored (or, with --check, no included operation or tool drifted)
  1  drift, a missing copy, or a problem; each with the message the build would give
  2  bad usage")]
pub struct VendorArgs {
    /// The upstreams.json whose `schema_url` documents to vendor.
    config: PathBuf,
    /// Change nothing: compare the vendored copies with the live documents and servers and exit
    /// 1 on drift of an included operation or tool.
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
    // The vendored tool lists are what this replaces: a stale or damaged one must not stop it.
    let loaded = ptc_plan::load_unpinned(&args.config, &live);
    let fetched = live.fetched.into_inner();
    let mcp = match &loaded {
        Ok(loaded) => mcp_upstreams(&loaded.plan),
        Err(_) => Vec::new(),
    };
    if args.check {
        let documents = if fetched.is_empty() && loaded.is_ok() {
            ExitCode::SUCCESS
        } else {
            check(&args.config, loaded.clone(), &fetched)
        };
        let tools = match &loaded {
            Ok(loaded) => check_tools(&args.config, loaded, &mcp),
            Err(_) => ExitCode::SUCCESS,
        };
        return worst(documents, tools);
    }
    let loaded = match loaded {
        Err(diags) => {
            eprintln!("{diags}");
            eprintln!("nothing was vendored: the build would fail with the live documents");
            return ExitCode::FAILURE;
        }
        Ok(loaded) => loaded,
    };
    if fetched.is_empty() && mcp.is_empty() {
        println!("no upstream uses schema_url or MCP: nothing to vendor");
        return ExitCode::SUCCESS;
    }
    let documents = write_all(&args.config, &fetched);
    let tools = write_tools(&args.config, &loaded, &mcp);
    worst(documents, tools)
}

fn worst(a: ExitCode, b: ExitCode) -> ExitCode {
    if a == ExitCode::SUCCESS { b } else { a }
}

/// The MCP upstreams of `plan`, by name.
fn mcp_upstreams(plan: &ptc_plan::Plan) -> Vec<String> {
    plan.upstreams
        .iter()
        .filter(|u| !matches!(u.transport, ptc_plan::Transport::Openapi(_)))
        .map(|u| u.name.clone())
        .collect()
}

/// Lists every MCP upstream's tools live, unfiltered, as pins (an error names the upstream).
fn list_live(loaded: &Loaded, upstreams: &[String]) -> Vec<(String, Result<ToolList, String>)> {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return upstreams
                .iter()
                .map(|u| {
                    (
                        u.clone(),
                        Err(format!("cannot start the async runtime: {e}")),
                    )
                })
                .collect();
        }
    };
    let redactor = ptc_core::credentials::redact::Redactor::default();
    // Vendoring an upstream behind OAuth asks the person at the terminal, as `eval` does.
    let consent = ptc_core::call::upstreams::StartSettings {
        consent: ptc_core::call::upstreams::ConsentAt::Terminal,
        ..Default::default()
    }
    .options()
    .consent;
    runtime.block_on(async {
        let mut out = Vec::new();
        for name in upstreams {
            let listed = ptc_core::list_live_tools(
                &loaded.plan,
                &loaded.secrets,
                name,
                &redactor,
                consent.as_ref(),
            )
            .await;
            out.push((
                name.clone(),
                listed
                    .map(|tools| ToolList::new(name, tools.iter().map(|t| t.pin()).collect()))
                    .map_err(|e| e.to_string()),
            ));
        }
        out
    })
}

/// Writes each MCP upstream's live tool list, then checks that the config's `include_tools`
/// still name listed tools (what the build will check).
fn write_tools(config: &Path, loaded: &Loaded, upstreams: &[String]) -> ExitCode {
    if upstreams.is_empty() {
        return ExitCode::SUCCESS;
    }
    let mut code = ExitCode::SUCCESS;
    for (upstream, listed) in list_live(loaded, upstreams) {
        let list = match listed {
            Ok(list) => list,
            Err(e) => {
                eprintln!("error: `{upstream}`: cannot list its tools: {e}");
                code = ExitCode::FAILURE;
                continue;
            }
        };
        let path = ptc_plan::pins::path(config, &upstream);
        let text = list.render();
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&path, &text));
        match written {
            Ok(()) => println!(
                "vendored `{upstream}`'s {} tool(s) into {}",
                list.tools.len(),
                path.display()
            ),
            Err(e) => {
                eprintln!("error: cannot write {}: {e}", path.display());
                code = ExitCode::FAILURE;
            }
        }
    }
    if code == ExitCode::SUCCESS
        && let Err(diags) = ptc_plan::load_with(config, &VendoredSource::new(config))
    {
        eprintln!("{diags}");
        eprintln!("the tool lists were vendored, but the build fails with them as shown");
        code = ExitCode::FAILURE;
    }
    code
}

/// Compares each MCP upstream's vendored tool list with its live server; exit 1 when an
/// included tool changed or went away, or a list is missing.
fn check_tools(config: &Path, loaded: &Loaded, upstreams: &[String]) -> ExitCode {
    let mut drifted = false;
    for (upstream, listed) in list_live(loaded, upstreams) {
        let live = match listed {
            Ok(list) => list,
            Err(e) => {
                println!("`{upstream}`: cannot list its tools: {e}");
                drifted = true;
                continue;
            }
        };
        let path = ptc_plan::pins::path(config, &upstream);
        let vendored: ToolList = match std::fs::read_to_string(&path)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        {
            Ok(list) => list,
            Err(e) => {
                drifted = true;
                println!(
                    "`{upstream}`: no readable tool list at {} ({e}); run `ptc vendor {}`",
                    path.display(),
                    config.display()
                );
                continue;
            }
        };
        let include = loaded
            .plan
            .upstream(&upstream)
            .and_then(|u| match &u.transport {
                ptc_plan::Transport::McpStdio(p) => p.tools.include.clone(),
                ptc_plan::Transport::McpHttp(p) => p.tools.include.clone(),
                ptc_plan::Transport::Openapi(_) => None,
            });
        let included = |tool: &str| match &include {
            Some(names) => names.iter().any(|n| n == tool),
            None => vendored.tool(tool).is_some(),
        };
        for pin in vendored.tools.iter().filter(|p| p.digest() != p.sha256) {
            drifted = true;
            println!(
                "`{upstream}`: the pin of tool `{}` was edited by hand (its sha256 does not match); run `ptc vendor {}`",
                pin.name,
                config.display()
            );
        }
        let drift = ptc_codegen::drift::compare_tools(&vendored, &live, included);
        if drift.is_empty() {
            println!("`{upstream}`: the vendored tool list matches the server");
        }
        for d in drift {
            if d.included && d.change != ptc_codegen::drift::ToolChange::Added {
                drifted = true;
            }
            println!("drift: {d}");
        }
    }
    exit(drifted)
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
    let vendored = match ptc_plan::load_unpinned(config, &VendoredSource::new(config)) {
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
