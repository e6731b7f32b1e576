//! `ptc new DIR --config upstreams.json`: a deployment crate that builds and passes its test as
//! written. Its only dependency is the `ptc` facade of the workspace this `ptc` was built from.

use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

use serde_json::Value;

/// Arguments of `ptc new`.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  ptc new my-deployment --config fixtures/observatory/upstreams.json

Writes Cargo.toml (depending on this workspace's ptc crate), Cargo.lock (this workspace's: the
versions ptc was tested with), src/main.rs, tests/tools_list.rs, README.md, the config and every
file its build reads: each schema_file, and what `ptc vendor` wrote beside the config (the copy of
each schema_url, the tool list of each MCP upstream). Secret files are never copied.

Exit codes:
  0  the crate is written; `cd DIR && cargo test` builds and tests it
  1  the config has problems (each printed as `ptc check` prints it), a document is missing, or
     an upstream is not vendored yet (run `ptc vendor CONFIG` first)
  2  bad usage: DIR exists and is not empty, or a file cannot be read or written")]
pub struct NewArgs {
    /// The folder to create (or an empty one); its name becomes the crate's and the binary's.
    dir: PathBuf,
    /// The upstreams.json the deployment compiles in.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
}

/// Runs `ptc new`.
pub fn run(args: NewArgs) -> ExitCode {
    let facade = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ptc");
    match scaffold(&args.dir, &args.config, &facade) {
        Ok(done) => {
            print!("{done}");
            ExitCode::SUCCESS
        }
        Err(refusal) => {
            eprintln!("error: {}", refusal.message);
            ExitCode::from(refusal.code)
        }
    }
}

/// Why nothing was written, and the exit code that says so.
#[derive(Debug)]
pub struct Refusal {
    code: u8,
    message: String,
}

fn usage(message: String) -> Refusal {
    Refusal { code: 2, message }
}

fn problem(message: String) -> Refusal {
    Refusal { code: 1, message }
}

/// One file the build reads, and where its copy goes (relative to the new crate).
struct Document {
    from: PathBuf,
    to: PathBuf,
}

/// Writes the deployment crate for `config` into `dir`, depending on the facade crate at
/// `facade` and pinned to the `Cargo.lock` of the workspace holding it; returns what to tell the
/// user. Nothing is written unless every check passes.
pub fn scaffold(dir: &Path, config: &Path, facade: &Path) -> Result<String, Refusal> {
    check_target(dir)?;
    let facade = facade.canonicalize().map_err(|e| {
        usage(format!(
            "the ptc crate this binary was built from is not at `{}` ({e}); run the `ptc` built from your ptc checkout",
            facade.display()
        ))
    })?;
    let lock = tested_lock(&facade)?;
    let text = std::fs::read_to_string(config).map_err(|e| {
        usage(format!(
            "cannot read the config `{}`: {e}; pass the upstreams.json with --config",
            config.display()
        ))
    })?;
    let config_name = config
        .file_name()
        .ok_or_else(|| usage(format!("`{}` names no file", config.display())))?;
    // A config that is not JSON has no files to look for: the compiler reports it.
    let parsed: Option<Value> = serde_json::from_str(&text).ok();
    let (moved, rewritten) = match &parsed {
        Some(json) => referenced(config, json)?,
        None => (Vec::new(), None),
    };
    let expansion = ptc_codegen::expansion::expand(config).map_err(|diags| {
        problem(format!(
            "the config `{}` does not compile, so the crate would not build:\n{}\nfix the config (`ptc check {}` shows the same problems) and run ptc new again",
            config.display(),
            ptc_plan::Diagnostics(diags),
            config.display()
        ))
    })?;
    let documents = placed(config, &expansion.files, &moved)?;
    let name = crate_name(dir);
    let config_file = Path::new(config_name);
    let vendored = documents
        .iter()
        .any(|d| d.to.starts_with(ptc_plan::pins::FOLDER));
    let mut files: Vec<(PathBuf, Vec<u8>)> = vec![
        ("Cargo.toml".into(), cargo_toml(&name, &facade).into_bytes()),
        ("Cargo.lock".into(), lock),
        (
            "rust-toolchain.toml".into(),
            include_str!("../../rust-toolchain.toml")
                .as_bytes()
                .to_vec(),
        ),
        (".gitignore".into(), b"/target\n".to_vec()),
        (
            "src/main.rs".into(),
            main_rs(&name, config_file).into_bytes(),
        ),
        (
            "tests/tools_list.rs".into(),
            tools_list_rs(&name).into_bytes(),
        ),
        (
            "README.md".into(),
            readme(&name, config_file, vendored).into_bytes(),
        ),
        (
            config_file.to_path_buf(),
            rewritten.unwrap_or(text).into_bytes(),
        ),
    ];
    for d in &documents {
        let bytes = std::fs::read(&d.from)
            .map_err(|e| usage(format!("cannot read `{}`: {e}", d.from.display())))?;
        files.push((d.to.clone(), bytes));
    }
    for (path, bytes) in &files {
        let target = dir.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| usage(format!("cannot create `{}`: {e}", parent.display())))?;
        }
        std::fs::write(&target, bytes)
            .map_err(|e| usage(format!("cannot write `{}`: {e}", target.display())))?;
    }
    let mut done = format!(
        "created the deployment crate `{name}` in {}:\n",
        dir.display()
    );
    for (path, _) in &files {
        let _ = writeln!(done, "  {}", path.display());
    }
    if let Some(json) = &parsed {
        for note in secret_notes(json) {
            let _ = writeln!(done, "note: {note}");
        }
    }
    for note in server_notes(&dir.join(config_file)) {
        let _ = writeln!(done, "note: {note}");
    }
    let _ = writeln!(
        done,
        "next: cd {} && cargo test (builds it and checks it serves lisp_eval)",
        dir.display()
    );
    Ok(done)
}

/// The `Cargo.lock` of the workspace holding `facade`: the versions ptc was tested with. Without
/// it a new crate would resolve the newest versions of ptc's dependencies, which nobody tested
/// (and whose deprecations would warn in ptc's own crates).
fn tested_lock(facade: &Path) -> Result<Vec<u8>, Refusal> {
    let lock = facade.parent().unwrap_or(Path::new("/")).join("Cargo.lock");
    std::fs::read(&lock).map_err(|e| {
        usage(format!(
            "cannot read `{}` ({e}), the versions ptc was tested with that the new crate is pinned to; restore it in your ptc checkout (`git checkout Cargo.lock`)",
            lock.display()
        ))
    })
}

/// `dir` may not exist yet, or be an empty folder.
fn check_target(dir: &Path) -> Result<(), Refusal> {
    if !dir.exists() {
        return Ok(());
    }
    if !dir.is_dir() {
        return Err(usage(format!(
            "`{}` exists and is not a folder; pass a new folder's path",
            dir.display()
        )));
    }
    let mut entries = std::fs::read_dir(dir)
        .map_err(|e| usage(format!("cannot read the folder `{}`: {e}", dir.display())))?;
    if let Some(entry) = entries.next() {
        let first = entry.map(|e| e.file_name().to_string_lossy().into_owned());
        return Err(usage(format!(
            "`{}` exists and is not empty (it holds `{}`); pass a new folder's path, or empty this one",
            dir.display(),
            first.unwrap_or_default()
        )));
    }
    Ok(())
}

/// Checks the files `config` names before it is compiled, naming every missing one at once
/// (a document, or what `ptc vendor` writes), and places each `schema_file` outside the config's
/// folder beside it (the documents returned), with the config rewritten to follow.
fn referenced(config: &Path, json: &Value) -> Result<(Vec<Document>, Option<String>), Refusal> {
    let base = config.parent().unwrap_or(Path::new(""));
    let mut moved: Vec<(String, Document)> = Vec::new();
    let mut missing = Vec::new();
    let mut unvendored = Vec::new();
    let upstreams = json.get("upstreams").and_then(Value::as_object);
    for (upstream, spec) in upstreams.into_iter().flatten() {
        if let Some(file) = spec.get("schema_file").and_then(Value::as_str) {
            let from = base.join(file);
            if !from.is_file() {
                missing.push(format!(
                    "upstream `{upstream}`: schema_file `{file}` is not a file at `{}`; fix the path in {} (it is relative to the config) or put the document there",
                    from.display(),
                    config.display()
                ));
                continue;
            }
            if inside(Path::new(file)).is_none() {
                // Resolved as the plan resolves it: the name the build reads it by.
                let from = PathBuf::from(ptc_plan::paths::resolve(
                    &ptc_plan::paths::base_dir(config),
                    file,
                ));
                let to = match moved.iter().find(|(_, m)| m.from == from) {
                    // Upstreams sharing a document share its copy.
                    Some((_, m)) => m.to.clone(),
                    None => {
                        let name = Path::new(file).file_name().map_or_else(
                            || format!("{upstream}.openapi.json"),
                            |n| n.to_string_lossy().into_owned(),
                        );
                        let to = PathBuf::from(&name);
                        // A copy overwrites neither a file beside the config (the config
                        // itself, a document) nor another document from outside.
                        if base.join(&to).exists() || moved.iter().any(|(_, m)| m.to == to) {
                            PathBuf::from(format!("{upstream}-{name}"))
                        } else {
                            to
                        }
                    }
                };
                moved.push((upstream.clone(), Document { from, to }));
            }
        } else if spec.get("schema_url").is_some_and(Value::is_string) {
            let copy = ptc_codegen::vendored::path(config, upstream);
            if !copy.is_file() {
                unvendored.push(format!(
                    "upstream `{upstream}`: the vendored copy of its schema_url is not at `{}`",
                    copy.display()
                ));
            }
        } else if let Some(transport @ ("mcp_stdio" | "mcp_http")) =
            spec.get("transport").and_then(Value::as_str)
        {
            let list = ptc_plan::pins::path(config, upstream);
            if !list.is_file() {
                unvendored.push(format!(
                    "upstream `{upstream}` ({transport}): its vendored tool list is not at `{}`",
                    list.display()
                ));
            }
        }
    }
    if !missing.is_empty() || !unvendored.is_empty() {
        let mut message = format!(
            "the config `{}` names files that are missing, so the crate would not build:",
            config.display()
        );
        for line in missing.iter().chain(&unvendored) {
            let _ = write!(message, "\n  {line}");
        }
        // Not vendored here: vendoring runs each MCP server's command and pins what it lists,
        // which a person reviews before a build trusts it.
        if !unvendored.is_empty() {
            let _ = write!(
                message,
                "\nrun `ptc vendor {}` first: it fetches each schema_url and asks each MCP server for its tools, and writes them to {}/ beside the config; review them (the build trusts them), then run ptc new again",
                config.display(),
                ptc_plan::pins::FOLDER
            );
        }
        return Err(problem(message));
    }
    if moved.is_empty() {
        return Ok((Vec::new(), None));
    }
    let mut json = json.clone();
    for (upstream, m) in &moved {
        json["upstreams"][upstream.as_str()]["schema_file"] =
            Value::String(m.to.display().to_string());
    }
    let text = serde_json::to_string_pretty(&json)
        .map_err(|e| usage(format!("cannot write the config: {e}")))?;
    Ok((
        moved.into_iter().map(|(_, m)| m).collect(),
        Some(text + "\n"),
    ))
}

/// Where each file the build of `config` read (`read`, the compiler's own list) goes in the
/// new crate, whose root is the config's folder: a file inside that folder keeps its place (a
/// `vendored/` copy or tool list, a `schema_file` beside the config), one outside goes where
/// `moved` put it.
fn placed(config: &Path, read: &[PathBuf], moved: &[Document]) -> Result<Vec<Document>, Refusal> {
    let normal = |p: &Path| ptc_plan::paths::normalize(&std::path::absolute(p).unwrap_or_default());
    let base = ptc_plan::paths::base_dir(config);
    let config = normal(config);
    let mut out: Vec<Document> = Vec::new();
    for file in read {
        let from = normal(file);
        if from == config || out.iter().any(|d| d.from == from) {
            continue;
        }
        let to = match from.strip_prefix(&base) {
            Ok(relative) => relative.to_path_buf(),
            Err(_) => match moved.iter().find(|m| m.from == from) {
                Some(m) => m.to.clone(),
                None => {
                    return Err(problem(format!(
                        "the build of `{}` reads `{}`, outside the config's folder, and ptc new does not know where its copy goes; move it beside the config",
                        config.display(),
                        from.display()
                    )));
                }
            },
        };
        out.push(Document { from, to });
    }
    Ok(out)
}

/// `path` as a relative path that stays inside its folder (`a/./b` → `a/b`), or `None` when it
/// is absolute or climbs out with `..`.
fn inside(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (!out.as_os_str().is_empty()).then_some(out)
}

/// Secret files are read at run time and never copied; a relative one is resolved against the
/// new crate's config when it is built.
fn secret_notes(json: &Value) -> Vec<String> {
    let credentials = json.get("credentials").and_then(Value::as_object);
    credentials
        .into_iter()
        .flatten()
        .filter(|(_, c)| c.get("source").and_then(Value::as_str) == Some("file"))
        .filter_map(|(name, c)| {
            let path = c.get("path").and_then(Value::as_str)?;
            (!Path::new(path).is_absolute()).then(|| {
                format!(
                    "credential `{name}` reads its secret from `{path}` relative to the config; it was not copied (secrets stay out of the crate): put it there, or use an absolute path such as /run/secrets/{name}"
                )
            })
        })
        .collect()
}

/// An MCP server the built crate could not start: a relative `command` or `cwd` resolves
/// against the config's folder, which is now the new crate's (read from its copy of the config,
/// resolved as the build resolves it).
fn server_notes(config: &Path) -> Vec<String> {
    let source = ptc_codegen::vendored::VendoredSource::new(config);
    let Ok(loaded) = ptc_plan::load_with(config, &source) else {
        return Vec::new();
    };
    let mut notes = Vec::new();
    for up in &loaded.plan.upstreams {
        let ptc_plan::Transport::McpStdio(server) = &up.transport else {
            continue;
        };
        let command = Path::new(&server.command);
        if command.is_absolute() && !command.exists() {
            notes.push(format!(
                "upstream `{}` starts `{}`, which is not there: a relative `command` is relative to the config, now in the new crate; make it absolute or put the server there",
                up.name, server.command
            ));
        }
        if let Some(cwd) = server.cwd.as_deref().filter(|c| !Path::new(c).is_dir()) {
            notes.push(format!(
                "upstream `{}` runs in `{cwd}`, which is not a folder: a relative `cwd` is relative to the config, now in the new crate; make it absolute or create it",
                up.name
            ));
        }
    }
    notes
}

/// The crate name for `dir`: its last component, lowercased, anything but letters, digits, `-`
/// and `_` made `-`; a name cargo or the dependency would refuse gets a suffix or prefix.
pub fn crate_name(dir: &Path) -> String {
    let last = std::path::absolute(dir)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let mut name = String::new();
    for c in last.chars().flat_map(char::to_lowercase) {
        let c = if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            c
        } else {
            '-'
        };
        if !(c == '-' && (name.is_empty() || name.ends_with('-'))) {
            name.push(c);
        }
    }
    let name = name.trim_end_matches('-').to_string();
    if name.is_empty() {
        return "deployment".into();
    }
    if name.starts_with(|c: char| c.is_ascii_digit() || c == '_') {
        return format!("deployment-{name}");
    }
    // `ptc` would depend on itself; the others are taken by the standard library or Rust itself.
    const TAKEN: [&str; 9] = [
        "ptc",
        "std",
        "core",
        "alloc",
        "proc_macro",
        "test",
        "self",
        "crate",
        "super",
    ];
    if TAKEN.contains(&name.as_str()) {
        return format!("{name}-deployment");
    }
    name
}

fn cargo_toml(name: &str, facade: &Path) -> String {
    format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"
publish = false

[dependencies]
# The ptc facade of the checkout `ptc new` ran from (ptc is not published): the upstreams!
# macro, the runtime and the host commands.
ptc = {{ path = "{facade}", version = "{version}" }}

# A workspace of its own, so the crate builds wherever it lives.
[workspace]

{profile}"#,
        facade = facade.display().to_string().replace('\\', "/"),
        version = env!("CARGO_PKG_VERSION"),
        profile = ptc_codegen::build_profile::macro_profile(),
    )
}

fn main_rs(name: &str, config: &Path) -> String {
    format!(
        r#"//! The {name} deployment: ptc's host commands (serve, eval, repl, catalog) over the upstreams
//! of {config}, compiled in: a config or document that no longer compiles fails the build.

ptc::upstreams!("{config}");

fn main() -> std::process::ExitCode {{
    ptc::Deployment::new(env!("CARGO_PKG_NAME"), plan)
        .version(env!("CARGO_PKG_VERSION"))
        .run()
}}
"#,
        config = config.display()
    )
}

fn tools_list_rs(name: &str) -> String {
    format!(
        r#"//! The built binary speaks MCP over stdio and offers `lisp_eval`.

use std::io::{{BufRead, BufReader, Write}};
use std::process::{{Command, Stdio}};

use ptc::serde_json::{{self, Value, json}};

#[test]
fn serve_lists_lisp_eval() {{
    let mut server = Command::new(env!("CARGO_BIN_EXE_{name}"))
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let mut stdin = server.stdin.take().expect("stdin");
    for message in [
        json!({{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {{
            "protocolVersion": "2025-11-25", "capabilities": {{}},
            "clientInfo": {{"name": "tools_list", "version": "1"}}}}}}),
        json!({{"jsonrpc": "2.0", "method": "notifications/initialized"}}),
        json!({{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}}),
    ] {{
        writeln!(stdin, "{{message}}").expect("the server reads");
    }}
    let mut replies = BufReader::new(server.stdout.take().expect("stdout")).lines();
    let listed = loop {{
        let line = replies.next().expect("a reply before the server exits").expect("reads");
        let reply: Value = serde_json::from_str(&line).expect("a JSON-RPC message");
        if reply["id"] == 2 {{
            break reply;
        }}
    }};
    // The client hangs up: a stdio server exits cleanly.
    drop(stdin);
    assert!(server.wait().expect("exits").success());
    let tools = listed["result"]["tools"].as_array().expect("a tool list");
    assert!(tools.iter().any(|t| t["name"] == "lisp_eval"), "{{listed}}");
}}
"#
    )
}

/// The crate's README; `vendored`: the config's build reads files `ptc vendor` wrote.
fn readme(name: &str, config: &Path, vendored: bool) -> String {
    let vendored = if vendored {
        format!(
            "\n`{folder}/` holds what `ptc vendor {config}` pinned (schema_url documents, MCP tool lists): the\n\
             build reads them and never the network. Run it again to take a server's changes, and review\n\
             the diff before committing it.\n",
            folder = ptc_plan::pins::FOLDER,
            config = config.display()
        )
    } else {
        String::new()
    };
    format!(
        r#"# {name}

A ptc deployment: it serves `lisp_eval` over MCP, with the upstreams of `{config}` compiled in
(`ptc::upstreams!` in `src/main.rs`; edit the config or a document and rebuild).

```sh
cargo run -- serve   # run it: MCP over stdio (`cargo run -- --help` lists eval, repl, catalog, serve --http)
cargo test           # test it: starts the binary and checks it lists lisp_eval
```
{vendored}
`Cargo.lock` holds the versions of ptc's dependencies ptc was tested with; `cargo update` moves
past them.

Release builds, a systemd unit, a container and staging/production URLs: `docs/deploying.md` in
the ptc repository.
"#,
        config = config.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    fn facade() -> PathBuf {
        workspace().join("ptc")
    }

    /// A fresh folder for one test (removed first, so a rerun starts clean).
    fn scratch(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ptc-new-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn observatory() -> PathBuf {
        workspace().join("fixtures/observatory/upstreams.json")
    }

    /// The Observatory config's programs, copied into `conf` (a config copied elsewhere needs
    /// them beside it).
    fn copy_programs(conf: &Path) {
        let from = workspace().join("fixtures/observatory/programs");
        std::fs::create_dir_all(conf.join("programs")).unwrap();
        for entry in std::fs::read_dir(&from).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), conf.join("programs").join(entry.file_name())).unwrap();
        }
    }

    #[test]
    fn an_empty_existing_folder_is_filled_with_the_crate_and_the_config_with_its_document() {
        let dir = scratch("empty").join("Obs Deploy");
        std::fs::create_dir_all(&dir).unwrap();
        let said = scaffold(&dir, &observatory(), &facade()).unwrap();
        assert!(said.contains("`obs-deploy`"), "{said}");
        assert!(said.contains("credential `observatory-token`"), "{said}");
        let cargo = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        assert!(cargo.contains("name = \"obs-deploy\""), "{cargo}");
        assert!(
            cargo.ends_with(&ptc_codegen::build_profile::macro_profile()),
            "{cargo}"
        );
        let pinned = format!("path = \"{}\"", facade().canonicalize().unwrap().display());
        assert!(cargo.contains(&pinned), "{cargo}");
        assert_eq!(
            std::fs::read(dir.join("Cargo.lock")).unwrap(),
            std::fs::read(workspace().join("Cargo.lock")).unwrap(),
            "the crate resolves to the versions the workspace was tested with"
        );
        assert_eq!(
            std::fs::read(dir.join("upstreams.json")).unwrap(),
            std::fs::read(observatory()).unwrap(),
            "a config with its documents beside it is copied as it is"
        );
        assert_eq!(
            std::fs::read(dir.join("observatory.openapi.json")).unwrap(),
            std::fs::read(workspace().join("fixtures/observatory/observatory.openapi.json"))
                .unwrap()
        );
        assert_eq!(
            std::fs::read(dir.join("programs/errors-by-class.clj")).unwrap(),
            std::fs::read(workspace().join("fixtures/observatory/programs/errors-by-class.clj"))
                .unwrap(),
            "the declared programs are copied where the config names them"
        );
        assert!(!dir.join("secrets").exists(), "secrets are never copied");
        let main = std::fs::read_to_string(dir.join("src/main.rs")).unwrap();
        assert!(
            main.contains("ptc::upstreams!(\"upstreams.json\");"),
            "{main}"
        );
        let test = std::fs::read_to_string(dir.join("tests/tools_list.rs")).unwrap();
        assert!(test.contains("CARGO_BIN_EXE_obs-deploy"), "{test}");
        let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
        let commands: Vec<&str> = readme.lines().filter(|l| l.starts_with("cargo ")).collect();
        assert_eq!(commands.len(), 2, "{readme}");
        // The crate is written where the user said, nothing else.
        assert_eq!(std::fs::read_dir(dir.parent().unwrap()).unwrap().count(), 1);
    }

    #[test]
    fn a_folder_holding_one_file_is_refused_naming_it_and_left_alone() {
        let dir = scratch("nonempty");
        std::fs::write(dir.join("keep.txt"), "mine").unwrap();
        let refusal = scaffold(&dir, &observatory(), &facade()).unwrap_err();
        assert_eq!(refusal.code, 2);
        assert!(
            refusal
                .message
                .contains(&format!("`{}` exists and is not empty", dir.display()))
                && refusal.message.contains("keep.txt")
                && refusal.message.contains("pass a new folder"),
            "{}",
            refusal.message
        );
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        let file = dir.join("keep.txt");
        let refusal = scaffold(&file, &observatory(), &facade()).unwrap_err();
        assert!(
            refusal.message.contains("is not a folder"),
            "{}",
            refusal.message
        );
    }

    #[test]
    fn a_missing_document_is_named_with_its_upstream_and_nothing_is_written() {
        let here = scratch("missing");
        let config = here.join("upstreams.json");
        let text = std::fs::read_to_string(observatory())
            .unwrap()
            .replace("\"observatory.openapi.json\"", "\"gone.openapi.json\"");
        std::fs::write(&config, text).unwrap();
        let dir = here.join("out");
        let refusal = scaffold(&dir, &config, &facade()).unwrap_err();
        assert_eq!(refusal.code, 1);
        assert!(
            refusal
                .message
                .contains("upstream `observatory`: schema_file `gone.openapi.json`")
                && refusal
                    .message
                    .contains(&here.join("gone.openapi.json").display().to_string()),
            "{}",
            refusal.message
        );
        assert!(!dir.exists());
    }

    #[test]
    fn an_invalid_config_is_refused_with_the_compilers_diagnostics() {
        let here = scratch("invalid");
        let config = workspace().join("fixtures/configs/invalid/op_header_param.json");
        let refusal = scaffold(&here.join("out"), &config, &facade()).unwrap_err();
        assert_eq!(refusal.code, 1);
        assert!(
            refusal.message.contains("has header parameter `X-Tenant`")
                && refusal.message.contains("ptc check"),
            "{}",
            refusal.message
        );
        assert!(!here.join("out").exists());
    }

    #[test]
    fn a_document_outside_the_configs_folder_is_copied_beside_it_and_the_config_follows() {
        let here = scratch("outside");
        std::fs::create_dir_all(here.join("conf")).unwrap();
        std::fs::create_dir_all(here.join("specs")).unwrap();
        std::fs::copy(
            workspace().join("fixtures/observatory/observatory.openapi.json"),
            here.join("specs/obs.json"),
        )
        .unwrap();
        let text = std::fs::read_to_string(observatory())
            .unwrap()
            .replace("\"observatory.openapi.json\"", "\"../specs/obs.json\"");
        std::fs::write(here.join("conf/upstreams.json"), text).unwrap();
        copy_programs(&here.join("conf"));
        let dir = here.join("out");
        scaffold(&dir, &here.join("conf/upstreams.json"), &facade()).unwrap();
        assert!(dir.join("obs.json").is_file());
        // The copy compiles: the rewritten schema_file points at it.
        let expanded = ptc_codegen::expansion::expand(&dir.join("upstreams.json"));
        assert!(expanded.is_ok(), "the copied config compiles");
    }

    #[test]
    fn upstreams_sharing_a_document_outside_share_its_copy() {
        let here = scratch("shared");
        std::fs::create_dir_all(here.join("conf")).unwrap();
        std::fs::create_dir_all(here.join("specs")).unwrap();
        std::fs::copy(
            workspace().join("fixtures/observatory/observatory.openapi.json"),
            here.join("specs/obs.json"),
        )
        .unwrap();
        let mut json: Value =
            serde_json::from_str(&std::fs::read_to_string(observatory()).unwrap()).unwrap();
        json["upstreams"]["observatory"]["schema_file"] = "../specs/obs.json".into();
        json["upstreams"]["mirror"] = json["upstreams"]["observatory"].clone();
        std::fs::write(here.join("conf/upstreams.json"), json.to_string()).unwrap();
        copy_programs(&here.join("conf"));
        let dir = here.join("out");
        scaffold(&dir, &here.join("conf/upstreams.json"), &facade()).unwrap();
        let copied: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("upstreams.json")).unwrap())
                .unwrap();
        for upstream in ["observatory", "mirror"] {
            assert_eq!(copied["upstreams"][upstream]["schema_file"], "obs.json");
        }
        let expanded = ptc_codegen::expansion::expand(&dir.join("upstreams.json"));
        assert!(expanded.is_ok(), "both upstreams read the one copy");
    }

    fn peers() -> PathBuf {
        workspace().join("fixtures/configs/peers/upstreams.json")
    }

    #[test]
    fn each_mcp_upstreams_vendored_tool_list_is_copied_where_the_build_reads_it() {
        // `../../mcp`, where the fixture names its servers, is then inside the scratch folder.
        let dir = scratch("mcp").join("deploy/out");
        let said = scaffold(&dir, &peers(), &facade()).unwrap();
        for upstream in ["everything", "py"] {
            let list = format!("vendored/{upstream}.tools.json");
            assert_eq!(
                std::fs::read(dir.join(&list)).unwrap(),
                std::fs::read(workspace().join("fixtures/configs/peers").join(&list)).unwrap()
            );
            assert!(said.contains(&format!("\n  {list}\n")), "{said}");
        }
        let expanded = ptc_codegen::expansion::expand(&dir.join("upstreams.json"));
        assert!(
            expanded.is_ok(),
            "the copy builds: its tool lists are beside it"
        );
        let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
        assert!(
            readme.contains("`vendored/` holds what `ptc vendor upstreams.json` pinned"),
            "{readme}"
        );
        // The fixture's servers are named relative to the config, which moved with it.
        let python = ptc_plan::paths::normalize(&dir.join("../../mcp/.venv/bin/python"));
        assert!(
            said.contains(&format!(
                "note: upstream `py` starts `{}`, which is not there",
                python.display()
            )) && said.contains("note: upstream `everything` runs in `"),
            "{said}"
        );
    }

    #[test]
    fn an_mcp_upstream_not_vendored_yet_is_refused_with_the_command_that_vendors_it() {
        let here = scratch("unvendored");
        let config = here.join("upstreams.json");
        std::fs::copy(peers(), &config).unwrap();
        let dir = here.join("out");
        let refusal = scaffold(&dir, &config, &facade()).unwrap_err();
        assert_eq!(refusal.code, 1);
        for upstream in ["everything", "py"] {
            let line = format!(
                "upstream `{upstream}` (mcp_stdio): its vendored tool list is not at `{}`",
                here.join(format!("vendored/{upstream}.tools.json"))
                    .display()
            );
            assert!(refusal.message.contains(&line), "{}", refusal.message);
        }
        assert!(
            refusal
                .message
                .contains(&format!("run `ptc vendor {}` first", config.display())),
            "{}",
            refusal.message
        );
        assert!(!dir.exists());
    }

    #[test]
    fn a_document_outside_named_like_the_config_does_not_overwrite_it() {
        let here = scratch("samename");
        std::fs::create_dir_all(here.join("conf")).unwrap();
        std::fs::create_dir_all(here.join("specs")).unwrap();
        std::fs::copy(
            workspace().join("fixtures/observatory/observatory.openapi.json"),
            here.join("specs/upstreams.json"),
        )
        .unwrap();
        let text = std::fs::read_to_string(observatory()).unwrap().replace(
            "\"observatory.openapi.json\"",
            "\"../specs/upstreams.json\"",
        );
        std::fs::write(here.join("conf/upstreams.json"), text).unwrap();
        copy_programs(&here.join("conf"));
        let dir = here.join("out");
        scaffold(&dir, &here.join("conf/upstreams.json"), &facade()).unwrap();
        assert!(dir.join("observatory-upstreams.json").is_file());
        let expanded = ptc_codegen::expansion::expand(&dir.join("upstreams.json"));
        assert!(
            expanded.is_ok(),
            "the config is the config, its document beside it"
        );
    }

    #[test]
    fn crate_names_come_from_the_folder_made_valid() {
        assert_eq!(crate_name(Path::new("a/My Deploy.v2")), "my-deploy-v2");
        assert_eq!(crate_name(Path::new("obs_api")), "obs_api");
        assert_eq!(crate_name(Path::new("2026")), "deployment-2026");
        assert_eq!(crate_name(Path::new("ptc")), "ptc-deployment");
        assert_eq!(crate_name(Path::new("--")), "deployment");
    }

    #[test]
    fn only_paths_that_stay_inside_are_kept() {
        assert_eq!(
            inside(Path::new("./a/b.json")),
            Some(PathBuf::from("a/b.json"))
        );
        assert_eq!(
            inside(Path::new("a/../b.json")),
            Some(PathBuf::from("b.json"))
        );
        assert_eq!(inside(Path::new("../b.json")), None);
        assert_eq!(inside(Path::new("/etc/b.json")), None);
    }
}
