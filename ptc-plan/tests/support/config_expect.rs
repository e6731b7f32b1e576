//! The invalid-config fixture format, shared by the ptc-plan runner and the `ptc check` test.
//!
//! Every `fixtures/configs/invalid/*.json` breaks one rule; its `.expect` sidecar lists every
//! problem the load reports, in order, one per line, exactly:
//!
//! ```text
//! # comment
//! #/upstreams/api/base_url: `base_url` embeds credentials in the URL
//!   help: remove user:password@ from the URL and use `auth` with a credential binding
//! rules.openapi.json#/paths/~1items/post: uses method POST, a write; writes are exposed only when allow_writes lists them
//! ```
//!
//! A problem line is `[file]#<JSON pointer>: <headline>`, the headline being what `ptc check`
//! prints after `error: ` (`upstream 'api': <full message>`; the file is left out for the
//! config itself); an indented `help:` line gives that problem's full fix and is required when
//! the problem has one. `$DIR` stands for the fixture folder. The list is complete, so it pins
//! the number of problems; an `.expect` with no problem line, a line without a pointer or a
//! message, or a stray `help:` line is rejected.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// Exactly how many invalid-config fixtures there are: adding one means raising this, so a
/// fixture that goes missing is noticed.
pub const FIXTURE_COUNT: usize = 122;

/// One expected problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// File name of the document the problem is in; empty for the config itself.
    pub file: String,
    /// JSON pointer inside that file.
    pub pointer: String,
    /// The full message, after the upstream and operation it names (`upstream 'u': ...`).
    pub message: String,
    /// The full fix, when there is one.
    pub help: Option<String>,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}#{}: {}", self.file, self.pointer, self.message)?;
        if let Some(h) = &self.help {
            write!(f, "\n  help: {h}")?;
        }
        Ok(())
    }
}

/// The invalid-config fixture folder.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/configs/invalid")
}

/// The repository's `fixtures/` folder, as the loader names files in it.
pub fn fixtures_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures")
        .canonicalize()
        .expect("fixtures folder")
}

/// The `.json` fixtures in `dir`, sorted.
pub fn configs(dir: &Path) -> Vec<PathBuf> {
    let mut configs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    configs.sort();
    configs
}

/// Parses an `.expect` file; `Err` says why it is malformed or too vague to pin anything.
pub fn parse(text: &str) -> Result<Vec<Problem>, String> {
    let root = fixtures_root();
    let root = root.to_string_lossy();
    let mut out: Vec<Problem> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim_end().replace("$FIXTURES", &root);
        if line.trim().is_empty() || line.starts_with("# ") || line == "#" {
            continue;
        }
        if let Some(help) = line.strip_prefix("  help: ") {
            let Some(last) = out.last_mut() else {
                return Err(format!("line {n}: `help:` before any problem line"));
            };
            if last.help.is_some() {
                return Err(format!("line {n}: a second `help:` for one problem"));
            }
            if help.trim().is_empty() {
                return Err(format!("line {n}: empty `help:`"));
            }
            last.help = Some(help.to_string());
            continue;
        }
        if line.starts_with(char::is_whitespace) {
            return Err(format!(
                "line {n}: indented line is not `  help: <fix>`: `{line}`"
            ));
        }
        let Some((file, rest)) = line.split_once('#') else {
            return Err(format!(
                "line {n}: names no JSON pointer (write `#/path/to/field: message`): `{line}`"
            ));
        };
        let Some((pointer, message)) = rest.split_once(": ") else {
            return Err(format!(
                "line {n}: has no message after the pointer (`#<pointer>: <message>`): `{line}`"
            ));
        };
        if !(pointer.is_empty() || pointer.starts_with('/')) {
            return Err(format!(
                "line {n}: `{pointer}` is not a JSON pointer (empty or starting with `/`)"
            ));
        }
        if message.trim().is_empty() {
            return Err(format!("line {n}: empty message"));
        }
        out.push(Problem {
            file: file.to_string(),
            pointer: pointer.to_string(),
            message: message.to_string(),
            help: None,
        });
    }
    if out.is_empty() {
        return Err("pins no problem: list every problem as `#<pointer>: <message>`".into());
    }
    Ok(out)
}

/// A diagnostic's first line as `ptc check` prints it, without `error: `: the upstream and
/// operation it belongs to, then the message.
pub fn headline(d: &ptc_plan::Diagnostic) -> String {
    let first = d.to_string();
    let first = first.lines().next().unwrap_or_default();
    first.strip_prefix("error: ").unwrap_or(first).to_string()
}

/// `text` with the fixture folder of `config` written as `$DIR`.
pub fn portable(text: &str, config: &Path) -> String {
    let dir = config
        .parent()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    text.replace(&dir, "$DIR")
}

/// What a load of `config` reported, in the `.expect` vocabulary.
pub fn actual(config: &Path) -> Result<Vec<Problem>, String> {
    match ptc_plan::load(config) {
        Ok(_) => Err("loaded, but must fail".into()),
        Err(diags) => {
            let dir = config
                .parent()
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            let portable = |text: String| text.replace(&dir, "$DIR");
            Ok(diags
                .iter()
                .map(|d| Problem {
                    file: if d.file == config {
                        String::new()
                    } else {
                        d.file
                            .file_name()
                            .map(|n| n.to_string_lossy().into_owned())
                            .unwrap_or_default()
                    },
                    pointer: d.pointer.clone(),
                    message: portable(headline(d)),
                    help: d.help.clone().map(portable),
                })
                .collect())
        }
    }
}

/// Checks every fixture in `dir` (there must be exactly `count`); returns one line per failure.
pub fn check_dir(dir: &Path, count: usize) -> Vec<String> {
    let configs = configs(dir);
    let mut failures = Vec::new();
    if configs.len() != count {
        failures.push(format!(
            "expected exactly {count} invalid configs in {}, found {}: update the pinned count \
             together with the fixtures",
            dir.display(),
            configs.len()
        ));
    }
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "expect") && !path.with_extension("json").exists()
        {
            failures.push(format!("orphan {}", path.display()));
        }
    }
    for config in &configs {
        let name = config.file_name().unwrap().to_string_lossy().into_owned();
        let Ok(text) = std::fs::read_to_string(config.with_extension("expect")) else {
            failures.push(format!("{name}: has no .expect sidecar"));
            continue;
        };
        let expected = match parse(&text) {
            Ok(e) => e,
            Err(why) => {
                failures.push(format!("{name}: malformed .expect: {why}"));
                continue;
            }
        };
        match actual(config) {
            Err(why) => failures.push(format!("{name}: {why}")),
            Ok(got) if got != expected => {
                let render = |ps: &[Problem]| {
                    ps.iter()
                        .map(|p| p.to_string())
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                failures.push(format!(
                    "{name}: expected {} problem(s):\n{}\ngot {}:\n{}",
                    expected.len(),
                    render(&expected),
                    got.len(),
                    render(&got)
                ));
            }
            Ok(_) => {}
        }
    }
    failures
}
