//! Runs the Clojure conformance corpus (`tests/conformance/*.txt`) against the interpreter.
//!
//! The expected results in the corpus are verified against real Clojure by
//! `tests/conformance/check_with_clojure.sh`; this test checks that PTC-Lisp agrees with them.
//! Results are compared by their canonical printed form: the value we compute is printed, the
//! expected text is read with `read_value` and printed, so `{:b 1 :a 2}` equals `{:a 2 :b 1}`.
//!
//! Cases listed in `tests/conformance/known_gaps.txt` may fail; the test fails if any other case
//! fails, if a listed gap starts passing (so the list stays true), or if fewer than 98% of all
//! cases pass. Set `CONFORMANCE_FILTER=substring` to run only matching case names, and
//! `CONFORMANCE_TRACE=1` to print each case name before it runs (to find a case that aborts
//! the process, e.g. by overflowing the stack, which no in-process check can report).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use ptc_lisp::{Interpreter, Limits, Value, read_value};

/// Minimum share of all corpus cases that must pass, known gaps included.
const MIN_PASS_RATE: f64 = 0.98;

/// What a case expects.
#[derive(Debug, Clone, PartialEq)]
enum Expect {
    /// `;; => <clojure data literal>`
    Value(String),
    /// `;; !! <reason>`
    Error(String),
}

/// One corpus case, as written in a `.txt` file.
#[derive(Debug, Clone)]
struct Case {
    file: String,
    line: usize,
    name: String,
    src: String,
    expect: Expect,
    divergence: Option<String>,
    /// `;; data: <JSON object>`: the request context the program reads as `data/<key>`.
    data: Option<String>,
    /// `;; prints: <string literal>`: everything `println` and friends must have written.
    prints: Option<String>,
}

/// Parses one corpus file. The grammar is shared with `check_with_clojure.clj`:
/// a case starts at `;; case: <name>`, marker lines (`;; ptc-only`, `;; unchecked: ...`,
/// `;; divergence: <id>`, `;; data: <JSON object>`, `;; prints: <string literal>`) may appear
/// anywhere before the result line,
/// every other line is program text, and `;; => <value>` or `;; !! <reason>` ends the case.
fn parse_cases(file: &str, text: &str) -> Result<Vec<Case>, String> {
    struct Open {
        line: usize,
        name: String,
        src: Vec<String>,
        divergence: Option<String>,
        data: Option<String>,
        prints: Option<String>,
    }
    let mut cases = Vec::new();
    let mut open: Option<Open> = None;
    for (idx, raw) in text.lines().enumerate() {
        let lineno = idx + 1;
        let line = raw.trim_end();
        if let Some(name) = line.strip_prefix(";; case:") {
            if let Some(o) = open.take() {
                return Err(format!(
                    "{file}:{}: case `{}` has no result line",
                    o.line, o.name
                ));
            }
            let name = name.trim();
            if name.is_empty() {
                return Err(format!("{file}:{lineno}: empty case name"));
            }
            open = Some(Open {
                line: lineno,
                name: name.to_string(),
                src: Vec::new(),
                divergence: None,
                data: None,
                prints: None,
            });
            continue;
        }
        let Some(o) = open.as_mut() else {
            // Text between cases (headers, blank lines) is commentary.
            continue;
        };
        let result = if let Some(v) = line.strip_prefix(";; =>") {
            Some(Expect::Value(v.trim().to_string()))
        } else {
            line.strip_prefix(";; !!")
                .map(|r| Expect::Error(r.trim().to_string()))
        };
        if let Some(expect) = result {
            let o = open
                .take()
                .ok_or_else(|| format!("{file}:{lineno}: no open case"))?;
            cases.push(Case {
                file: file.to_string(),
                line: o.line,
                name: o.name,
                src: o.src.join("\n"),
                expect,
                divergence: o.divergence,
                data: o.data,
                prints: o.prints,
            });
        } else if let Some(id) = line.strip_prefix(";; divergence:") {
            o.divergence = Some(id.trim().to_string());
        } else if let Some(json) = line.strip_prefix(";; data:") {
            o.data = Some(json.trim().to_string());
        } else if let Some(text) = line.strip_prefix(";; prints:") {
            o.prints = Some(text.trim().to_string());
        } else if line == ";; ptc-only" || line.starts_with(";; unchecked:") {
            // Only meaningful to the Clojure check; PTC-Lisp runs every case.
        } else {
            o.src.push(raw.to_string());
        }
    }
    if let Some(o) = open {
        return Err(format!(
            "{file}:{}: case `{}` has no result line",
            o.line, o.name
        ));
    }
    Ok(cases)
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance")
}

fn load_corpus() -> Vec<Case> {
    let dir = corpus_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .filter(|p| p.file_name().is_some_and(|n| n != "known_gaps.txt"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match parse_cases(&name, &text) {
            Ok(mut cs) => cases.append(&mut cs),
            Err(e) => panic!("malformed corpus file: {e}"),
        }
    }
    cases
}

/// `known_gaps.txt`: one `<case-name> <reason>` per line; `#` starts a comment line.
fn load_known_gaps() -> BTreeMap<String, String> {
    let path = corpus_dir().join("known_gaps.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| match l.split_once(char::is_whitespace) {
            Some((name, reason)) => (name.to_string(), reason.trim().to_string()),
            None => (l.to_string(), String::new()),
        })
        .collect()
}

/// Evaluates one case in a fresh interpreter and returns `Err(description)` when it disagrees.
fn run_case(case: &Case) -> Result<(), String> {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let limits = Limits::default();
        let context = match &case.data {
            Some(json) => Some(
                Value::from_json_bytes(json.as_bytes(), &limits)
                    .map_err(|e| ("data".to_string(), format!("`;; data:` JSON: {e}")))?,
            ),
            None => None,
        };
        let mut interp = Interpreter::new(limits);
        if let Some(c) = context {
            interp.set_context(c);
        }
        let result = interp
            .eval_str(&case.src)
            .map(|v| v.to_string())
            .map_err(|e| (e.reason().to_string(), e.to_string()));
        // Printed output is compared in printed form too: as a string literal.
        Ok::<_, (String, String)>((result, Value::str(interp.output()).to_string()))
    }));
    let (got, printed_output) = match outcome {
        Ok(Ok((r, out))) => (r, Some(out)),
        Ok(Err(e)) => (Err(e), None),
        Err(_) => return Err("interpreter panicked".to_string()),
    };
    if let (Some(text), Some(out)) = (&case.prints, printed_output) {
        let expected = read_value(text)
            .map_err(|e| format!("`;; prints:` text `{text}` does not read: {e}"))?
            .to_string();
        if out != expected {
            return Err(format!("expected output {expected}, got output {out}"));
        }
    }
    match (&case.expect, got) {
        (Expect::Value(text), Ok(printed)) => {
            let expected = read_value(text)
                .map_err(|e| format!("expected text `{text}` does not read: {e}"))?
                .to_string();
            if printed == expected {
                Ok(())
            } else {
                Err(format!("expected {expected}, got {printed}"))
            }
        }
        (Expect::Value(text), Err((_, err))) => Err(format!("expected {text}, got error {err}")),
        (Expect::Error(reason), Err((got_reason, _))) if *reason == got_reason => Ok(()),
        (Expect::Error(reason), Err((_, err))) => {
            Err(format!("expected error {reason}, got error {err}"))
        }
        (Expect::Error(reason), Ok(printed)) => {
            Err(format!("expected error {reason}, got value {printed}"))
        }
    }
}

fn documented_divergences() -> BTreeSet<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/divergences.md");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(|h| h.trim().trim_matches('`').to_string())
        .collect()
}

#[test]
fn corpus_is_well_formed() {
    let cases = load_corpus();
    let mut seen = BTreeSet::new();
    let dups: Vec<&str> = cases
        .iter()
        .filter(|c| !seen.insert(c.name.as_str()))
        .map(|c| c.name.as_str())
        .collect();
    assert!(dups.is_empty(), "duplicate case names: {dups:?}");
    assert!(cases.len() >= 550, "corpus has only {} cases", cases.len());

    let documented = documented_divergences();
    let undocumented: Vec<String> = cases
        .iter()
        .filter_map(|c| c.divergence.as_ref().map(|d| (c, d)))
        .filter(|(_, d)| !documented.contains(*d))
        .map(|(c, d)| format!("{}:{} {} -> {d}", c.file, c.line, c.name))
        .collect();
    assert!(
        undocumented.is_empty(),
        "divergence ids missing from docs/divergences.md: {undocumented:?}"
    );

    let names: BTreeSet<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    let gaps = load_known_gaps();
    let stale: Vec<&String> = gaps
        .keys()
        .filter(|g| !names.contains(g.as_str()))
        .collect();
    assert!(
        stale.is_empty(),
        "known_gaps.txt names cases that do not exist: {stale:?}"
    );
    let unexplained: Vec<&String> = gaps
        .iter()
        .filter(|(_, reason)| reason.is_empty())
        .map(|(name, _)| name)
        .collect();
    assert!(
        unexplained.is_empty(),
        "known_gaps.txt entries need a reason: {unexplained:?}"
    );
}

#[test]
fn case_parser_rejects_a_case_without_result() {
    let err = parse_cases("t.txt", ";; case: a\n(+ 1 2)\n;; case: b\n1\n;; => 1\n")
        .expect_err("case `a` has no result line");
    assert!(err.contains("`a`"), "{err}");
    let ok = parse_cases(
        "t.txt",
        ";; header\n;; case: c\n;; divergence: x\n;; data: {\"a\": 1}\n(/ 1 2)\n;; => 0.5\n",
    )
    .expect("well-formed");
    assert_eq!(ok.len(), 1);
    assert_eq!(ok[0].src, "(/ 1 2)");
    assert_eq!(ok[0].divergence.as_deref(), Some("x"));
    assert_eq!(ok[0].data.as_deref(), Some("{\"a\": 1}"));
    assert_eq!(ok[0].expect, Expect::Value("0.5".to_string()));
}

#[test]
fn conformance_corpus() {
    let filter = std::env::var("CONFORMANCE_FILTER").ok();
    let cases: Vec<Case> = load_corpus()
        .into_iter()
        .filter(|c| filter.as_deref().is_none_or(|f| c.name.contains(f)))
        .collect();
    let gaps = load_known_gaps();
    let trace = std::env::var_os("CONFORMANCE_TRACE").is_some();

    let mut passed = 0usize;
    let mut unexpected = Vec::new();
    let mut gap_failures = 0usize;
    let mut gaps_now_passing = Vec::new();
    for case in &cases {
        if trace {
            eprintln!("running {}:{} {}", case.file, case.line, case.name);
        }
        let result = run_case(case);
        let is_gap = gaps.contains_key(&case.name);
        match (result, is_gap) {
            (Ok(()), false) => passed += 1,
            (Ok(()), true) => {
                passed += 1;
                gaps_now_passing.push(case.name.clone());
            }
            (Err(_), true) => gap_failures += 1,
            (Err(why), false) => unexpected.push((case, why)),
        }
    }

    let total = cases.len();
    let rate = if total == 0 {
        1.0
    } else {
        passed as f64 / total as f64
    };
    let mut report = String::new();
    for (case, why) in &unexpected {
        let _ = writeln!(
            report,
            "FAIL {}:{} {}\n     program: {}\n     {why}",
            case.file,
            case.line,
            case.name,
            case.src.replace('\n', " ")
        );
    }
    for name in &gaps_now_passing {
        let _ = writeln!(
            report,
            "PASSING KNOWN GAP {name}: remove it from known_gaps.txt"
        );
    }
    let _ = writeln!(
        report,
        "{total} cases: {passed} passed ({:.1}%), {} unexpected failures, {gap_failures} known gaps",
        rate * 100.0,
        unexpected.len()
    );
    println!("{report}");

    // The report above (test stdout) lists every failing case.
    assert!(
        unexpected.is_empty() && gaps_now_passing.is_empty(),
        "{} unexpected conformance failures, {} known gaps now passing (see the report above)",
        unexpected.len(),
        gaps_now_passing.len()
    );
    assert!(
        filter.is_some() || rate >= MIN_PASS_RATE,
        "pass rate {:.1}% is below {:.0}%",
        rate * 100.0,
        MIN_PASS_RATE * 100.0
    );
}
