//! The house rules of `ptc-core/src` (README.md, "Module map"), checked on the source itself so
//! that a change that breaks one fails here, not in a reviewer's memory: the MCP host
//! (`server/`) is the top room and nothing below it imports it; the rooms stay few; no file
//! holds more than 1,000 lines of non-test code; folders use `mod.rs`, never `x.rs` beside `x/`.

use std::fs;
use std::path::{Path, PathBuf};

/// The rooms beside `lib.rs`, in the order of the data flow. A new room is a decision: add it
/// here and to the README's module map.
const ROOMS: &[&str] = &[
    "wire",
    "credentials",
    "catalog",
    "call",
    "program",
    "telemetry",
    "server",
];

/// Most lines of non-test code one file may hold.
const MAX_FILE_LINES: usize = 1000;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`, depth first, in name order.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    let mut out = Vec::new();
    for path in entries {
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
    out
}

fn relative(path: &Path) -> String {
    path.strip_prefix(src())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The file's code without its `#[cfg(test)]` module (by convention the file's tail).
fn non_test(text: &str) -> &str {
    text.find("\n#[cfg(test)]\nmod tests")
        .map_or(text, |at| &text[..at])
}

/// Whether `code` names the `server` room: a `crate::server` path (in a `use`, a call or a doc
/// link), or `super::server` from a room's own module.
fn imports_server(code: &str) -> bool {
    ["crate::server", "super::server", "super::super::server"]
        .iter()
        .any(|p| {
            code.match_indices(p)
                .any(|(at, _)| !is_ident(code[at + p.len()..].chars().next()))
        })
}

fn is_ident(c: Option<char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || c == '_')
}

#[test]
fn no_room_below_the_server_imports_it() {
    let offenders: Vec<String> = rust_files(&src())
        .into_iter()
        .filter(|p| !p.starts_with(src().join("server")) && !p.ends_with("lib.rs"))
        .filter(|p| imports_server(&fs::read_to_string(p).expect("readable source")))
        .map(|p| relative(&p))
        .collect();
    assert!(
        offenders.is_empty(),
        "these files reach up into server/, the MCP host: {offenders:?}; move what they need \
         down into the room that owns it (as `catalog::discovery::shown` and \
         `program::program_hash` were)"
    );
}

#[test]
fn the_server_check_sees_every_spelling_and_nothing_else() {
    assert!(imports_server("use crate::server::audit;"));
    assert!(imports_server("crate::server::tool::shown(s, g)"));
    assert!(imports_server("/// see [`x`](crate::server)\n"));
    assert!(imports_server("use super::server::x;"));
    assert!(!imports_server("use crate::servers::x;"));
    assert!(!imports_server("use crate::catalog::ServerEntry;"));
}

#[test]
fn the_crate_root_holds_only_the_rooms() {
    let mut found: Vec<String> = fs::read_dir(src())
        .expect("src/")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name != "lib.rs")
        .collect();
    found.sort();
    let mut rooms: Vec<String> = ROOMS.iter().map(|r| r.to_string()).collect();
    rooms.sort();
    assert_eq!(
        found, rooms,
        "ptc-core/src holds lib.rs and one folder per room; put a new module in the room of its \
         step (README.md, module map)"
    );
    let lib = fs::read_to_string(src().join("lib.rs")).expect("lib.rs");
    for room in ROOMS {
        assert!(
            lib.contains(&format!("pub mod {room};")),
            "lib.rs declares {room}"
        );
    }
}

#[test]
fn no_file_holds_more_than_a_thousand_lines_of_code() {
    let long: Vec<String> = rust_files(&src())
        .into_iter()
        .filter_map(|p| {
            let text = fs::read_to_string(&p).expect("readable source");
            let lines = non_test(&text).lines().count();
            (lines > MAX_FILE_LINES).then(|| format!("{} ({lines} lines)", relative(&p)))
        })
        .collect();
    assert!(long.is_empty(), "split by concern: {long:?}");
}

#[test]
fn the_line_count_leaves_out_the_tests_only() {
    let text = "fn a() {}\nfn b() {}\n#[cfg(test)]\nmod tests {\n    fn t() {}\n}\n";
    assert_eq!(non_test(text).lines().count(), 2);
    assert_eq!(non_test("fn a() {}\n").lines().count(), 1);
}

#[test]
fn folders_use_mod_rs_never_a_file_beside_them() {
    let mut beside = Vec::new();
    let mut dirs = vec![src()];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).expect("a folder") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                if path.with_extension("rs").exists() {
                    beside.push(relative(&path.with_extension("rs")));
                }
                if !path.join("mod.rs").exists() {
                    beside.push(format!("{}/ has no mod.rs", relative(&path)));
                }
                dirs.push(path);
            }
        }
    }
    assert!(
        beside.is_empty(),
        "one module-file style, `x/mod.rs`: {beside:?}"
    );
}
