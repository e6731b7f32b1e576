//! The interpreter's modules depend one way (see the README's module map): the standard
//! library (`builtins/`) depends on the evaluation context, never the reverse, and nothing but
//! the interpreter reaches the analyzer.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module → the crate modules its non-test code names (`crate::x`, `use super::x` in
/// `builtins/` counts as `builtins`).
fn dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let mut dirs = vec![src.clone()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap().with_extension("");
        let first = rel.components().next().unwrap();
        let module = match first.as_os_str().to_str().unwrap() {
            "builtins" => "builtins".to_string(),
            m => m.to_string(),
        };
        if module == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        // Unit tests may use anything.
        let code = text.split("#[cfg(test)]").next().unwrap();
        let entry = deps.entry(module.clone()).or_default();
        for line in code.lines() {
            let line = line.split("//").next().unwrap();
            for (i, _) in line.match_indices("crate::") {
                let name: String = line[i + 7..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && name != module {
                    entry.insert(name);
                }
            }
        }
    }
    deps
}

#[test]
fn only_the_standard_library_depends_on_it_and_it_depends_on_no_front_end() {
    let deps = dependencies();
    assert!(deps.len() > 15, "found only {:?}", deps.keys());
    for (module, uses) in &deps {
        if module != "analyze" && module != "builtins" {
            // The analyzer looks builtins up by name; nothing else reaches the library.
            assert!(
                !uses.contains("builtins"),
                "{module} imports the standard library"
            );
        }
        if module != "interp" {
            assert!(!uses.contains("interp"), "{module} imports the interpreter");
            assert!(!uses.contains("analyze"), "{module} imports the analyzer");
        }
    }
    assert!(
        deps["builtins"].contains("eval"),
        "the library uses the evaluation context"
    );
    // Values and the evaluator do not reach up: values never import the evaluator, and the
    // evaluator never imports the library.
    assert!(!deps["eval"].contains("builtins"), "{:?}", deps["eval"]);
    // The one edge from below back into the evaluator is the builtin signature
    // `fn(&mut Ctx, &mut [Value])` in `function`.
    for module in [
        "value",
        "error",
        "printer",
        "json",
        "ast",
        "host",
        "destructure",
        "reader",
    ] {
        assert!(
            !deps[module].contains("eval"),
            "{module}: {:?}",
            deps[module]
        );
    }
    assert!(deps["function"].contains("eval"));
}
