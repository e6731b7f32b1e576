//! `ptc_upstreams!` cost: expansion time (what the macro does: load, compile, generate) for the
//! Observatory fixture and for 50 operations of GitHub's REST description, beside `serde_json`
//! parsing the same document; the size of the generated code per operation; and incremental
//! `cargo check` of a crate invoking the macro on those 50 operations beside a crate invoking
//! progenitor's `generate_api!` on the same operations (a document cut down to them).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::plan_compile::{Memory, config, pick_operations};
use crate::measure::{Budget, median};
use crate::report::Row;

/// The expansion budget for 50 operations (issue 10).
const EXPANSION_BUDGET: Duration = Duration::from_millis(300);
/// The generated-size budget, lines per operation after prettyplease (issue 10).
const LINES_PER_OP_BUDGET: f64 = 60.0;

/// Runs the suite.
pub fn run(budget: Budget) -> Vec<Row> {
    let mut rows = observatory(budget);
    match crate::data::github_spec() {
        Ok(spec) => rows.extend(github(budget, &spec)),
        Err(e) => eprintln!("codegen: GitHub rows skipped ({e})"),
    }
    rows
}

fn observatory(budget: Budget) -> Vec<Row> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/observatory");
    let config = dir.join("upstreams.json");
    let doc = std::fs::read(dir.join("observatory.openapi.json")).expect("the fixture document");
    let parse = median(budget, || {
        serde_json::from_slice::<Value>(&doc).expect("json")
    });
    let expand = median(budget, || {
        ptc_codegen::expansion::expand(&config).expect("the fixture expands")
    });
    let code = ptc_codegen::pretty(
        ptc_codegen::expansion::expand(&config)
            .expect("the fixture expands")
            .tokens,
    )
    .expect("parses");
    vec![Row::time(
        "codegen",
        "macro expansion, Observatory (7 ops)",
        expand,
        "serde_json::Value parse of its document",
        parse,
        None,
        format!(
            "{} KB document, {} generated lines",
            doc.len() / 1000,
            code.lines().count()
        ),
    )]
}

fn github(budget: Budget, spec: &Path) -> Vec<Row> {
    let bytes = std::fs::read(spec).expect("read spec");
    let ops = pick_operations(spec, &bytes, 50);
    let cfg = config(spec, &ops);
    let source = Memory(&bytes);
    let expand = || {
        let loaded = ptc_plan::load_str(&cfg, Path::new("bench.json"), &source).expect("compiles");
        ptc_codegen::generate(&loaded.plan, Path::new("bench.json")).expect("generates")
    };
    let parse = median(budget, || {
        serde_json::from_slice::<Value>(&bytes).expect("json")
    });
    let expansion = median(budget, expand);
    let code = ptc_codegen::pretty(expand()).expect("parses");
    let lines = code.lines().count();
    let per_op = lines as f64 / ops.len() as f64;
    let note = format!(
        "{:.1} MB, {} ops, {lines} generated lines",
        bytes.len() as f64 / 1e6,
        ops.len()
    );
    let mut rows = vec![
        Row::time(
            "codegen",
            "macro expansion, 50 ops (GitHub REST spec)",
            expansion,
            "serde_json::Value parse of the same document",
            parse,
            None,
            note.clone(),
        ),
        Row::time(
            "codegen",
            "macro expansion, 50 ops (GitHub REST spec)",
            expansion,
            "the 0.3 s budget",
            EXPANSION_BUDGET,
            Some(1.0),
            note.clone(),
        ),
        Row {
            suite: "codegen".into(),
            name: "generated lines per operation (prettyplease), 50 GitHub ops".into(),
            unit: "lines",
            ours: per_op,
            baseline: "the 60-line budget".into(),
            base: LINES_PER_OP_BUDGET,
            ratio: per_op / LINES_PER_OP_BUDGET,
            target: Some(1.0),
            note,
            alloc: String::new(),
            spread: None,
        },
    ];
    // The 50-operation crate is built once and measured against progenitor's and against the
    // crate on every operation.
    let scratch = match Scratch::new(&bytes).and_then(|s| {
        let fifty = s.base.join("ptc");
        s.ptc_crate(&fifty, &ops).map(|()| (s, fifty))
    }) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("codegen: cargo check rows skipped: {e}");
            return rows;
        }
    };
    match incremental_check(budget, &scratch.0, &scratch.1, &ops) {
        Ok(row) => rows.push(row),
        Err(e) => eprintln!("codegen: incremental cargo check row skipped: {e}"),
    }
    let all = pick_operations(spec, &bytes, usize::MAX);
    match catalog_check(budget, &scratch.0, &scratch.1, ops.len(), &all) {
        Ok(more) => rows.extend(more),
        Err(e) => eprintln!("codegen: large-catalog cargo check rows skipped: {e}"),
    }
    rows
}

/// Where the scratch crates live (`target/codegen-check/`, one target folder for all) and the
/// GitHub document they are cut from, parsed once.
struct Scratch {
    root: PathBuf,
    base: PathBuf,
    target: PathBuf,
    doc: Value,
}

impl Scratch {
    fn new(bytes: &[u8]) -> Result<Self, String> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let root = root.canonicalize().map_err(|e| e.to_string())?;
        let base = root.join("target/codegen-check");
        Ok(Scratch {
            target: base.join("target"),
            doc: serde_json::from_slice(bytes).map_err(|e| e.to_string())?,
            root,
            base,
        })
    }

    /// The document cut down to `ops`, as written beside a scratch crate.
    fn document(&self, ops: &[String]) -> Result<Vec<u8>, String> {
        serde_json::to_vec_pretty(&cut_down(&self.doc, ops)).map_err(|e| e.to_string())
    }
}

/// The incremental `cargo check` budget for every supported GET operation of GitHub's
/// description (issue 26).
const LARGE_CHECK_BUDGET: Duration = Duration::from_secs(8);

/// Incremental `cargo check` of the crate on every supported GET operation beside the same
/// crate on 50: what a large catalog costs a deployment crate on each build.
fn catalog_check(
    budget: Budget,
    scratch: &Scratch,
    small: &Path,
    fifty: usize,
    all: &[String],
) -> Result<Vec<Row>, String> {
    let large = scratch.base.join("ptc-all");
    scratch.ptc_crate(&large, all)?;
    let programs = declared_programs(scratch, all, PROGRAMS)?;
    let with_programs = scratch.base.join("ptc-all-programs");
    scratch.ptc_crate_with(&with_programs, all, &programs)?;
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..budget.min_samples.clamp(3, 5) {
        a.push(cargo_check(&large, &scratch.target)?);
        b.push(cargo_check(small, &scratch.target)?);
        c.push(cargo_check(&with_programs, &scratch.target)?);
    }
    let c = crate::measure::Samples::new(c);
    let (a, b) = (
        crate::measure::Samples::new(a),
        crate::measure::Samples::new(b),
    );
    let name = format!("incremental cargo check, all {} GitHub GET ops", all.len());
    let note = "touch lib.rs, then `cargo check` (dev profile, with the profile `ptc new` writes)"
        .to_string();
    Ok(vec![
        Row::paired(
            "codegen",
            &name,
            &a,
            &format!("the same crate with {fifty} ops"),
            &b,
            None,
            note.clone(),
        ),
        Row::paired(
            "codegen",
            &format!("{name} + {PROGRAMS} declared programs"),
            &c,
            "the same crate without programs",
            &a,
            Some(1.2),
            format!(
                "{note}; each program calls one operation with its required arguments as parameters, checked and typed at build"
            ),
        ),
        Row::time(
            "codegen",
            &name,
            a.median(),
            "the 8 s budget",
            LARGE_CHECK_BUDGET,
            Some(1.0),
            note,
        ),
    ])
}

/// How many programs the large crate declares.
const PROGRAMS: usize = 50;

/// `n` programs over `ops`, spread across them: each calls one operation with its required
/// arguments given from parameters of the same schemas (what `ptc promote` drafts).
fn declared_programs(
    scratch: &Scratch,
    ops: &[String],
    n: usize,
) -> Result<Vec<(String, Value, String)>, String> {
    let doc = scratch.document(ops)?;
    let config = json!({"upstreams": {"github": {"transport": "openapi",
        "base_url": "https://api.github.com", "schema_file": "github.json",
        "include_operations": ops}}})
    .to_string();
    let loaded = ptc_plan::load_str(&config, Path::new("bench.json"), &Memory(&doc))
        .map_err(|d| d.to_string())?;
    let Some(ptc_plan::Transport::Openapi(api)) =
        loaded.plan.upstreams.first().map(|u| &u.transport)
    else {
        return Err("the GitHub upstream did not compile".into());
    };
    let step = (api.tools.len() / n).max(1);
    let mut out = Vec::new();
    for (i, tool) in api.tools.iter().step_by(step).take(n).enumerate() {
        let required: Vec<&str> = tool.input_schema["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let mut properties = Map::new();
        let mut args = Vec::new();
        for wire in &required {
            let prop = &tool.input_schema["properties"][wire];
            let resolved = api.resolve(prop).map_err(|e| e.to_string())?;
            let kept: Map<String, Value> = ["type", "enum", "pattern", "minimum", "maximum"]
                .iter()
                .filter_map(|k| resolved.get(*k).map(|v| (k.to_string(), v.clone())))
                .collect();
            properties.insert(wire.to_string(), Value::Object(kept));
            args.push(format!(":{} data/{wire}", wire.replace('_', "-")));
        }
        let name = format!("program-{i}");
        let text = format!(
            "(let [r (tool/call 'github/{} {{{}}})]\n  (if (:ok r) (count (str (:value r))) (fail r)))",
            tool.name,
            args.join(" ")
        );
        let declaration = json!({
            "description": format!("How long {}'s answer is", tool.name),
            "parameters": {"type": "object", "properties": properties, "required": required},
            "result": {"type": "integer"},
        });
        out.push((name, declaration, text));
    }
    Ok(out)
}

/// The incremental `cargo check` budget against progenitor's (issue 10).
const CHECK_RATIO_TARGET: f64 = 0.5;

/// `doc` with only the GET operations `ops` and the components they reach, so progenitor
/// (which generates every path and component of its input) sees what `ptc_upstreams!` does.
fn cut_down(doc: &Value, ops: &[String]) -> Value {
    let mut paths = Map::new();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        let Some(get) = item.get("get") else { continue };
        if !get["operationId"]
            .as_str()
            .is_some_and(|id| ops.iter().any(|o| o == id))
        {
            continue;
        }
        let mut kept = Map::new();
        kept.insert("get".into(), get.clone());
        if let Some(params) = item.get("parameters") {
            kept.insert("parameters".into(), params.clone());
        }
        paths.insert(path.clone(), Value::Object(kept));
    }
    let mut reached: BTreeSet<(String, String)> = BTreeSet::new();
    let mut work: Vec<&Value> = paths.values().collect();
    while let Some(v) = work.pop() {
        match v {
            Value::Object(m) => {
                if let Some(r) = m.get("$ref").and_then(Value::as_str)
                    && let Some(rest) = r.strip_prefix("#/components/")
                    && let Some((kind, name)) = rest.split_once('/')
                    && reached.insert((kind.to_string(), name.to_string()))
                    && let Some(target) = doc["components"][kind].get(name)
                {
                    work.push(target);
                }
                work.extend(m.values());
            }
            Value::Array(a) => work.extend(a),
            _ => {}
        }
    }
    let mut components = Map::new();
    for (kind, name) in &reached {
        if let Some(v) = doc["components"][kind.as_str()].get(name.as_str()) {
            let group = components
                .entry(kind.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(g) = group {
                g.insert(name.clone(), v.clone());
            }
        }
    }
    json!({
        "openapi": doc["openapi"],
        "info": doc["info"],
        "servers": doc["servers"],
        "paths": paths,
        "components": components,
    })
}

/// Writes a scratch crate (its own workspace) and checks it once, building its dependencies.
fn scratch_crate(dir: &Path, manifest: &str, lib: &str, target: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir.join("src")).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("Cargo.toml"), manifest).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("src/lib.rs"), lib).map_err(|e| e.to_string())?;
    cargo_check(dir, target).map(drop)
}

/// `cargo check` of the crate in `dir` after touching its `lib.rs`: the macro runs again and
/// rustc checks its output; the dependencies are already built.
fn cargo_check(dir: &Path, target: &Path) -> Result<Duration, String> {
    let lib = dir.join("src/lib.rs");
    let text = std::fs::read(&lib).map_err(|e| e.to_string())?;
    std::fs::write(&lib, text).map_err(|e| e.to_string())?;
    // The rustc beside this cargo: a dependency's own rust-toolchain file must not pick another
    // toolchain through rustup's proxy (cargo runs rustc in each package's directory).
    let rustc = Path::new(env!("CARGO")).with_file_name("rustc");
    let start = Instant::now();
    let out = Command::new(env!("CARGO"))
        .args(["check", "--quiet", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", target)
        .env("RUSTC", rustc)
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    let took = start.elapsed();
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        // The errors and a panicking macro's message, not the source excerpts between them.
        let first: Vec<&str> = err
            .lines()
            .filter(|l| l.starts_with("error") || l.contains("message:"))
            .take(6)
            .collect();
        return Err(format!(
            "`cargo check` of {} failed: {}",
            dir.display(),
            first.join(" / ")
        ));
    }
    Ok(took)
}

/// A scratch crate in `dir` invoking the macro on `ops` of the GitHub document (cut down to them),
/// with the profile `ptc new` writes; checked once. It is named after its folder: two crates of
/// one name, each its own workspace, share cargo's metadata hash in one target folder, and
/// checking one would throw away the other's incremental state.
impl Scratch {
    fn ptc_crate(&self, dir: &Path, ops: &[String]) -> Result<(), String> {
        self.ptc_crate_with(dir, ops, &[])
    }

    /// [`Scratch::ptc_crate`], with `programs` (name, declaration, text) declared too.
    fn ptc_crate_with(
        &self,
        dir: &Path,
        ops: &[String],
        programs: &[(String, Value, String)],
    ) -> Result<(), String> {
        let small = self.document(ops)?;
        std::fs::create_dir_all(dir.join("programs")).map_err(|e| e.to_string())?;
        std::fs::write(dir.join("github.json"), &small).map_err(|e| e.to_string())?;
        let mut declared = Map::new();
        for (name, declaration, text) in programs {
            let file = format!("programs/{name}.clj");
            std::fs::write(dir.join(&file), text).map_err(|e| e.to_string())?;
            let mut d = declaration.clone();
            d["file"] = json!(file);
            declared.insert(name.clone(), d);
        }
        let mut config = json!({"upstreams": {"github": {
            "transport": "openapi",
            "base_url": "https://api.github.com",
            "schema_file": "github.json",
            "include_operations": ops,
        }}});
        if !declared.is_empty() {
            config["programs"] = Value::Object(declared);
        }
        std::fs::write(dir.join("upstreams.json"), config.to_string())
            .map_err(|e| e.to_string())?;
        // The workspace's lockfile, so the scratch crate builds the versions ptc is tested with.
        std::fs::copy(self.root.join("Cargo.lock"), dir.join("Cargo.lock"))
            .map_err(|e| e.to_string())?;
        // The generated code names its runtime through the `ptc` facade: the one dependency a
        // deployment crate has.
        let name = dir
            .file_name()
            .map_or("ptc".into(), |n| n.to_string_lossy().into_owned());
        let manifest = format!(
            "[package]\nname = \"gh-{name}\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\n\
         [dependencies]\nptc = {{ path = {ptc:?} }}\n\n[workspace]\n\n{profile}",
            ptc = self.root.join("ptc"),
            profile = ptc_codegen::build_profile::macro_profile(),
        );
        scratch_crate(
            dir,
            &manifest,
            "ptc::upstreams!(\"upstreams.json\");\n",
            &self.target,
        )
    }
}

fn incremental_check(
    budget: Budget,
    scratch: &Scratch,
    ours: &Path,
    ops: &[String],
) -> Result<Row, String> {
    let (base, target) = (&scratch.base, &scratch.target);
    let small = scratch.document(ops)?;
    let theirs = base.join("progenitor");
    std::fs::create_dir_all(&theirs).map_err(|e| e.to_string())?;
    std::fs::write(theirs.join("github.json"), &small).map_err(|e| e.to_string())?;
    // The dependencies progenitor's README asks for (chrono, uuid and regress for the formats
    // and patterns GitHub's schemas use).
    let manifest = "[package]\nname = \"gh-progenitor\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n\
         [dependencies]\nprogenitor = \"0.15\"\nfutures = \"0.3\"\n\
         reqwest = { version = \"0.13\", default-features = false, features = [\"json\", \"stream\", \"query\"] }\n\
         serde = { version = \"1\", features = [\"derive\"] }\nserde_json = \"1\"\n\
         chrono = { version = \"0.4\", features = [\"serde\"] }\n\
         uuid = { version = \"1\", features = [\"serde\", \"v4\"] }\nregress = \"0.10\"\n\n[workspace]\n";
    let note = format!(
        "{} KB cut-down document; touch lib.rs, then `cargo check` (dev profile)",
        small.len() / 1000
    );
    let theirs_builds = scratch_crate(
        &theirs,
        manifest,
        "progenitor::generate_api!(\"github.json\");\n",
        target,
    );
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..budget.min_samples.clamp(3, 5) {
        a.push(cargo_check(ours, target)?);
        if theirs_builds.is_ok() {
            b.push(cargo_check(&theirs, target)?);
        }
    }
    let a = crate::measure::Samples::new(a);
    let name = "incremental cargo check, 50 GitHub ops: ptc_upstreams!";
    Ok(match theirs_builds {
        Ok(()) => Row::paired(
            "codegen",
            name,
            &a,
            "progenitor 0.15 generate_api! on the same operations",
            &crate::measure::Samples::new(b),
            Some(CHECK_RATIO_TARGET),
            note,
        ),
        // Said in the table, as issue 10 asks, with progenitor's own words (cargo_check keeps
        // only the error lines and a panicking macro's message).
        Err(refused) => {
            eprintln!("codegen: progenitor does not build the 50 operations: {refused}");
            let why = refused
                .split(" / ")
                .find(|l| l.contains("message:"))
                .unwrap_or(&refused)
                .trim();
            Row::time(
                "codegen",
                name,
                a.median(),
                "progenitor 0.15 on the same operations: does not build",
                Duration::ZERO,
                None,
                format!("{note}; progenitor: {why}"),
            )
        }
    })
}
