//! The house rules of `ptc-core/src` (README.md, "Module map"), checked on the source itself so
//! that a change that breaks one fails here, not in a reviewer's memory: no import circle between
//! its files (the result contract, `call/contract.rs`, is the bottom); the MCP host (`server/`)
//! is the top room and nothing below it imports it; the rooms stay few; no file holds more than
//! 1,000 lines of non-test code; folders use `mod.rs`, never `x.rs` beside `x/`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("readable src") {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The module a file holds, as a path: `mcp/result.rs` is `mcp/result`, `mcp/mod.rs` is `mcp`.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file
        .strip_prefix(src)
        .expect("under src")
        .with_extension("");
    let name = rel.to_string_lossy().replace('\\', "/");
    name.strip_suffix("/mod").unwrap_or(&name).to_string()
}

/// The longest known module a `::`-separated path starting at `base` names.
fn target(modules: &BTreeSet<String>, base: &str, path: &str) -> Option<String> {
    let mut best = None;
    let mut current = base.to_string();
    for segment in path.split("::") {
        let segment: String = segment
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if segment.is_empty() {
            break;
        }
        current = if current.is_empty() {
            segment
        } else {
            format!("{current}/{segment}")
        };
        if modules.contains(&current) {
            best = Some(current.clone());
        } else {
            break;
        }
    }
    best
}

/// Module → the crate modules its non-test code names (`crate::a::b`, `super::x`).
fn dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = files(&src);
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(&src, f)).collect();
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let module = module_of(&src, f);
        if module == "lib" {
            continue;
        }
        // `super` of `mcp/result` is `mcp`; of `mcp` (mod.rs) it is the crate root.
        let parent = module
            .rsplit_once('/')
            .map_or(String::new(), |(p, _)| p.to_string());
        let text = std::fs::read_to_string(f).expect("readable file");
        // Unit tests may use anything.
        let code = non_test(&text);
        let entry = deps.entry(module.clone()).or_default();
        for line in code.lines() {
            let line = line.split("//").next().unwrap_or_default();
            for (prefix, base) in [("crate::", ""), ("super::", parent.as_str())] {
                for (i, _) in line.match_indices(prefix) {
                    // `crate::` inside a longer identifier (`my_crate::`) is not ours.
                    if i > 0 && line[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                        continue;
                    }
                    let rest = &line[i + prefix.len()..];
                    // `use super::{a, b}` names several modules.
                    let paths: Vec<&str> = match rest.strip_prefix('{') {
                        Some(list) => list.split('}').next().unwrap_or("").split(',').collect(),
                        None => vec![rest],
                    };
                    for p in paths {
                        if let Some(t) = target(&modules, base, p.trim())
                            && t != module
                            && !module.starts_with(&format!("{t}/"))
                        {
                            entry.insert(t);
                        }
                    }
                }
            }
        }
    }
    deps
}

/// A cycle in `deps`, as the modules along it, when there is one.
fn find_cycle(deps: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        deps: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in deps.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, deps, done, path) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for node in deps.keys() {
        if let Some(c) = visit(node, deps, &mut done, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

#[test]
fn no_module_imports_itself_through_others() {
    let deps = dependencies();
    assert!(deps.len() > 20, "found only {:?}", deps.keys());
    if let Some(cycle) = find_cycle(&deps) {
        panic!("import circle: {}", cycle.join(" -> "));
    }
}

#[test]
fn the_result_types_are_the_bottom_room() {
    let deps = dependencies();
    assert!(
        deps["call/contract"].is_empty(),
        "call/contract uses {:?}",
        deps["call/contract"]
    );
    // The walk sees the edges it should: the transports build on the result types.
    for m in [
        "call/upstreams",
        "wire/openapi",
        "wire/mcp",
        "wire/mcp/result",
        "catalog",
        "program/run_report",
    ] {
        assert!(deps[m].contains("call/contract"), "{m} uses {:?}", deps[m]);
    }
    // `super::` paths are followed too.
    assert!(
        deps["wire/mcp/stdio"].contains("wire/mcp/framing"),
        "{:?}",
        deps["wire/mcp/stdio"]
    );
}

#[test]
fn the_cycle_finder_finds_a_circle_and_only_a_circle() {
    let edges = |list: &[(&str, &[&str])]| -> BTreeMap<String, BTreeSet<String>> {
        list.iter()
            .map(|(k, vs)| (k.to_string(), vs.iter().map(|v| v.to_string()).collect()))
            .collect()
    };
    let chain = edges(&[("a", &["b"]), ("b", &["c"]), ("c", &[])]);
    assert_eq!(find_cycle(&chain), None);
    let diamond = edges(&[("a", &["b", "c"]), ("b", &["d"]), ("c", &["d"]), ("d", &[])]);
    assert_eq!(find_cycle(&diamond), None);
    let circle = edges(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"])]);
    assert_eq!(
        find_cycle(&circle),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
}

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

fn relative(path: &Path) -> String {
    path.strip_prefix(src())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The file's code before its first `#[cfg(test)]` item (by convention its tests, at the end).
fn non_test(text: &str) -> &str {
    text.split("#[cfg(test)]").next().unwrap_or_default()
}

#[test]
fn no_room_below_the_server_imports_it() {
    let deps = dependencies();
    let in_server = |m: &str| m == "server" || m.starts_with("server/");
    let offenders: Vec<String> = deps
        .iter()
        .filter(|(m, uses)| !in_server(m) && uses.iter().any(|u| in_server(u)))
        .map(|(m, uses)| format!("{m} uses {uses:?}"))
        .collect();
    assert!(
        offenders.is_empty(),
        "these modules reach up into server/, the MCP host: {offenders:?}; move what they need \
         down into the room that owns it (as `catalog::discovery::shown` and \
         `program::program_hash` were)"
    );
    // The walk sees the server's own edges down, so an edge up would be seen too.
    assert!(
        deps["server/eval"].contains("program/host"),
        "{:?}",
        deps["server/eval"]
    );
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
    let long: Vec<String> = files(&src())
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
