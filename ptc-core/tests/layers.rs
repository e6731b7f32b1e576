//! ptc-core's modules depend one way: no import circle between its files. The result types every
//! transport returns live at the bottom (`outcome`), credentials and the call environment below
//! the transports, and the executor, the program host and the MCP server on top.

use std::collections::{BTreeMap, BTreeSet};
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
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
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
        deps["outcome"].is_empty(),
        "outcome uses {:?}",
        deps["outcome"]
    );
    // The walk sees the edges it should: the transports build on the result types.
    for m in [
        "executor",
        "openapi",
        "mcp",
        "mcp/result",
        "catalog",
        "records",
    ] {
        assert!(deps[m].contains("outcome"), "{m} uses {:?}", deps[m]);
    }
    // `super::` paths are followed too.
    assert!(
        deps["mcp/stdio"].contains("mcp/framing"),
        "{:?}",
        deps["mcp/stdio"]
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
