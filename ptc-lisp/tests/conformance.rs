//! Runs the Clojure conformance corpus (`tests/conformance/*.txt`) against the interpreter.
//!
//! The expected results in the corpus are verified against real Clojure by
//! `tests/conformance/check_with_clojure.sh`; this test checks that PTC-Lisp agrees with them.
//! Results are compared three ways: structurally with type tags (the computed value against the
//! expected text read with `read_value`: a set is not a map, `1` is not `1.0`); by canonical
//! printed form (the expected value printed, so `{:b 1 :a 2}` equals `{:a 2 :b 1}`); and the
//! printed result must read back as the same tagged value, so the printer is not judged only by
//! itself (printing a set as a map fails even though both sides would print alike).
//!
//! The runner's own rules: a line that looks like a marker but is not exactly one is an error
//! (a misspelt `;; case:` or `;; prints:` would otherwise make a case or a check vanish); a
//! result line outside a case is an error; the number of cases and of known gaps is pinned
//! ([`CASES`], [`KNOWN_GAPS`]) so growth is visible in review. Cases listed in
//! `tests/conformance/known_gaps.txt` may fail, but only exactly as recorded there (`  got:`), so
//! a gap that gets worse fails; a gap that starts passing fails too (remove it from the list). Set `CONFORMANCE_FILTER=substring` to run only matching case names, and
//! `CONFORMANCE_TRACE=1` to print each case name before it runs (to find a case that aborts
//! the process, e.g. by overflowing the stack, which no in-process check can report).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use ptc_lisp::{Interpreter, Limits, Value, read_value};

/// Minimum share of all corpus cases that must pass, known gaps included.
const MIN_PASS_RATE: f64 = 0.98;
/// Exactly how many cases the corpus holds: adding or removing one means editing this.
const CASES: usize = 1023;
/// Exactly how many known gaps `known_gaps.txt` lists.
const KNOWN_GAPS: usize = 12;

/// The marker words, for spotting near-misses.
const MARKER_WORDS: [&str; 7] = [
    "case",
    "prints",
    "data",
    "divergence",
    "unchecked",
    "ptc-only",
    "ptc_only",
];

/// Levenshtein distance, for near-miss markers.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Whether a comment line looks like a marker (`;;case:`, `; prints:`, `;; print:`, `;; =>1`,
/// `;; Data:` ...), so it must be exactly one.
fn looks_like_marker(line: &str) -> bool {
    let t = line.trim_start();
    if !t.starts_with(';') {
        return false;
    }
    let body = t.trim_start_matches(';').trim_start();
    if body.starts_with('=') || body.starts_with('!') {
        return true;
    }
    let word = body
        .split(|c: char| c.is_whitespace() || c == ':')
        .next()
        .unwrap_or_default()
        .to_lowercase();
    MARKER_WORDS.iter().any(|m| {
        let near = if m.len() >= 8 { 2 } else { 1 };
        distance(&word, m) <= near
    })
}

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
        if let Some(name) = line.strip_prefix(";; case: ") {
            if let Some(o) = open.take() {
                return Err(format!(
                    "{file}:{}: case `{}` has no result line",
                    o.line, o.name
                ));
            }
            let name = name.trim();
            if name.is_empty() || name.contains(char::is_whitespace) {
                return Err(format!(
                    "{file}:{lineno}: a case name is one word, got `{name}`"
                ));
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
        let result = if let Some(v) = line.strip_prefix(";; => ") {
            Some(Expect::Value(v.trim().to_string()))
        } else {
            line.strip_prefix(";; !! ")
                .map(|r| Expect::Error(r.trim().to_string()))
        };
        let marker = result.is_some()
            || [
                ";; divergence: ",
                ";; data: ",
                ";; prints: ",
                ";; unchecked: ",
            ]
            .iter()
            .any(|m| line.starts_with(m))
            || line == ";; ptc-only";
        if !marker && looks_like_marker(line) {
            return Err(format!(
                "{file}:{lineno}: `{line}` looks like a marker but is not exactly one \
                 (`;; case: `, `;; => `, `;; !! `, `;; divergence: `, `;; data: `, \
                 `;; prints: `, `;; unchecked: `, `;; ptc-only`)"
            ));
        }
        let Some(o) = open.as_mut() else {
            if marker {
                return Err(format!(
                    "{file}:{lineno}: marker `{line}` outside a case (no `;; case:` before it)"
                ));
            }
            // Text between cases (headers, blank lines) is commentary.
            continue;
        };
        if let Some(expect) = result {
            if expect == Expect::Value(String::new()) || expect == Expect::Error(String::new()) {
                return Err(format!("{file}:{lineno}: empty result line"));
            }
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
        } else if let Some(id) = line.strip_prefix(";; divergence: ") {
            o.divergence = Some(id.trim().to_string());
        } else if let Some(json) = line.strip_prefix(";; data: ") {
            o.data = Some(json.trim().to_string());
        } else if let Some(text) = line.strip_prefix(";; prints: ") {
            if o.prints.is_some() {
                return Err(format!("{file}:{lineno}: a second `;; prints:` line"));
            }
            o.prints = Some(text.trim().to_string());
        } else if marker {
            // `;; ptc-only` and `;; unchecked:` only matter to the Clojure check.
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

/// One entry of `known_gaps.txt`.
#[derive(Debug, Clone, PartialEq)]
struct Gap {
    /// Why PTC-Lisp differs.
    reason: String,
    /// What the case gives today ([`Outcome::summary`]); any change fails, so a gap that gets
    /// worse is seen (and one that gets better is recorded).
    got: String,
}

/// `known_gaps.txt`: `<case-name> <reason>` lines, each followed by `  got: <current outcome>`;
/// `#` starts a comment line.
fn parse_known_gaps(text: &str) -> Result<BTreeMap<String, Gap>, String> {
    let mut gaps: BTreeMap<String, Gap> = BTreeMap::new();
    let mut last: Option<String> = None;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim_end();
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(got) = line.strip_prefix("  got: ") {
            let gap = last
                .as_ref()
                .and_then(|name| gaps.get_mut(name))
                .ok_or_else(|| format!("known_gaps.txt:{n}: `got:` without a gap before it"))?;
            if !gap.got.is_empty() {
                return Err(format!("known_gaps.txt:{n}: a second `got:` line"));
            }
            gap.got = got.to_string();
            continue;
        }
        if line.starts_with(char::is_whitespace) {
            return Err(format!(
                "known_gaps.txt:{n}: indented line is not `  got: <outcome>`"
            ));
        }
        let (name, reason) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        if reason.trim().is_empty() {
            return Err(format!("known_gaps.txt:{n}: gap `{name}` needs a reason"));
        }
        let gap = Gap {
            reason: reason.trim().to_string(),
            got: String::new(),
        };
        if gaps.insert(name.to_string(), gap).is_some() {
            return Err(format!("known_gaps.txt:{n}: `{name}` listed twice"));
        }
        last = Some(name.to_string());
    }
    if let Some((name, _)) = gaps.iter().find(|(_, g)| g.got.is_empty()) {
        return Err(format!(
            "known_gaps.txt: gap `{name}` does not record what it gives today (`  got: ...`)"
        ));
    }
    Ok(gaps)
}

fn load_known_gaps() -> BTreeMap<String, Gap> {
    let path = corpus_dir().join("known_gaps.txt");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    parse_known_gaps(&text).unwrap_or_else(|e| panic!("{e}"))
}

/// A value with its type in every node: what "the same result" means structurally.
#[derive(Debug, Clone, PartialEq)]
enum Tagged {
    Nil,
    Bool(bool),
    Int(i64),
    /// Compared by bits, so `0.0` and `-0.0` differ and NaN equals NaN.
    Float(u64),
    Str(String),
    Keyword(String),
    Symbol(String),
    Vector(Vec<Tagged>),
    /// Entries in the canonical (sorted) order.
    Map(Vec<(Tagged, Tagged)>),
    /// Elements in the canonical (sorted) order.
    Set(Vec<Tagged>),
    Regex(String),
    Var(String),
    /// Functions have no readable form; only their kind is compared.
    Func,
}

fn tagged(v: &Value) -> Tagged {
    match v {
        Value::Nil => Tagged::Nil,
        Value::Bool(b) => Tagged::Bool(*b),
        Value::Int(i) => Tagged::Int(*i),
        Value::Float(f) => Tagged::Float(if f.is_nan() {
            f64::NAN.to_bits()
        } else {
            f.to_bits()
        }),
        Value::Str(s) => Tagged::Str(s.to_string()),
        Value::Keyword(k) => Tagged::Keyword(k.to_string()),
        Value::Symbol(s) => Tagged::Symbol(s.to_string()),
        Value::Vector(items) => Tagged::Vector(items.iter().map(tagged).collect()),
        Value::Map(m) => Tagged::Map(
            m.sorted()
                .into_iter()
                .map(|(k, v)| (tagged(k), tagged(v)))
                .collect(),
        ),
        Value::Set(s) => Tagged::Set(s.sorted().into_iter().map(tagged).collect()),
        Value::Regex(r) => Tagged::Regex(r.as_str().to_string()),
        Value::Var(name) => Tagged::Var(name.to_string()),
        Value::Func(_) => Tagged::Func,
    }
}

fn has_unreadable(t: &Tagged) -> bool {
    match t {
        Tagged::Func | Tagged::Var(_) => true,
        Tagged::Vector(items) | Tagged::Set(items) => items.iter().any(has_unreadable),
        Tagged::Map(entries) => entries
            .iter()
            .any(|(k, v)| has_unreadable(k) || has_unreadable(v)),
        _ => false,
    }
}

/// Checks the printer against the reader: `printed` (what the printer made of `value`) must
/// read back as the same tagged value. Values holding functions or vars have no readable form.
fn check_printed(value: &Value, printed: &str) -> Result<(), String> {
    let want = tagged(value);
    if has_unreadable(&want) {
        return Ok(());
    }
    let back = read_value(printed)
        .map_err(|e| format!("printed result `{printed}` does not read back: {e}"))?;
    let got = tagged(&back);
    if got == want {
        Ok(())
    } else {
        Err(format!(
            "printed result `{printed}` reads back as {got:?}, but the value is {want:?}"
        ))
    }
}

/// What one case gave.
#[derive(Debug)]
struct Outcome {
    /// The value (printed, and tagged) or the error (reason, message).
    result: Result<(String, Value), (String, String)>,
    /// Captured output, as a string literal.
    output: Option<String>,
}

impl Outcome {
    /// One line for `known_gaps.txt`: `=> <printed>` or `!! <reason>`, then the output when the
    /// case checks it.
    fn summary(&self, case: &Case) -> String {
        let mut s = match &self.result {
            Ok((printed, _)) => format!("=> {printed}"),
            Err((reason, _)) => format!("!! {reason}"),
        };
        if let (Some(_), Some(out)) = (&case.prints, &self.output) {
            let _ = write!(s, " prints {out}");
        }
        s
    }
}

/// Evaluates one case in a fresh interpreter.
fn evaluate(case: &Case) -> Result<Outcome, String> {
    catch_unwind(AssertUnwindSafe(|| {
        let limits = Limits::default();
        let context = match &case.data {
            Some(json) => Some(
                Value::from_json_bytes(json.as_bytes(), &limits)
                    .map_err(|e| format!("`;; data:` JSON does not decode: {e}"))?,
            ),
            None => None,
        };
        let mut interp = Interpreter::new(limits);
        if let Some(c) = context {
            interp.set_context(c);
        }
        let result = interp
            .eval_str(&case.src)
            .map(|v| (v.to_string(), v))
            .map_err(|e| (e.reason().to_string(), e.to_string()));
        // Printed output is compared in printed form too: as a string literal.
        Ok(Outcome {
            result,
            output: Some(Value::str(interp.output()).to_string()),
        })
    }))
    .unwrap_or_else(|_| Err("interpreter panicked".to_string()))
}

/// Judges an outcome: `Err(description)` when it disagrees with the case.
fn judge(case: &Case, outcome: &Outcome) -> Result<(), String> {
    if let (Some(text), Some(out)) = (&case.prints, &outcome.output) {
        let expected = read_value(text)
            .map_err(|e| format!("`;; prints:` text `{text}` does not read: {e}"))?
            .to_string();
        if *out != expected {
            return Err(format!("expected output {expected}, got output {out}"));
        }
    }
    match (&case.expect, &outcome.result) {
        (Expect::Value(text), Ok((printed, value))) => {
            let expected = read_value(text)
                .map_err(|e| format!("expected text `{text}` does not read: {e}"))?;
            let (want, got) = (tagged(&expected), tagged(value));
            if want != got {
                return Err(format!(
                    "expected {expected} ({want:?}), got {printed} ({got:?})"
                ));
            }
            let expected = expected.to_string();
            if *printed != expected {
                return Err(format!("expected {expected}, got {printed}"));
            }
            check_printed(value, printed)
        }
        (Expect::Value(text), Err((_, err))) => Err(format!("expected {text}, got error {err}")),
        (Expect::Error(reason), Err((got_reason, _))) if reason == got_reason => Ok(()),
        (Expect::Error(reason), Err((_, err))) => {
            Err(format!("expected error {reason}, got error {err}"))
        }
        (Expect::Error(reason), Ok((printed, _))) => {
            Err(format!("expected error {reason}, got value {printed}"))
        }
    }
}

/// Runs one case; `Err((description, summary))` when it disagrees.
fn run_case(case: &Case) -> Result<(), (String, String)> {
    let outcome = evaluate(case).map_err(|e| (e.clone(), format!("!! {e}")))?;
    judge(case, &outcome).map_err(|why| (why, outcome.summary(case)))
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
    assert_eq!(
        cases.len(),
        CASES,
        "the corpus has {} cases; update CASES in this file with the corpus",
        cases.len()
    );

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
    assert_eq!(
        gaps.len(),
        KNOWN_GAPS,
        "known_gaps.txt lists {} gaps; update KNOWN_GAPS in this file with it",
        gaps.len()
    );
    let stale: Vec<&String> = gaps
        .keys()
        .filter(|g| !names.contains(g.as_str()))
        .collect();
    assert!(
        stale.is_empty(),
        "known_gaps.txt names cases that do not exist: {stale:?}"
    );
}

#[test]
fn case_parser_rejects_a_case_without_result() {
    let err = parse_cases("t.txt", ";; case: a\n(+ 1 2)\n;; case: b\n1\n;; => 1\n")
        .expect_err("case `a` has no result line");
    assert_eq!(err, "t.txt:1: case `a` has no result line");
    let ok = parse_cases(
        "t.txt",
        ";; header\n;; case: c\n;; divergence: x\n;; data: {\"a\": 1}\n;; ptc-only\n;; unchecked: why\n(/ 1 2)\n;; => 0.5\n",
    )
    .expect("well-formed");
    assert_eq!(ok.len(), 1);
    assert_eq!(ok[0].src, "(/ 1 2)");
    assert_eq!(ok[0].divergence.as_deref(), Some("x"));
    assert_eq!(ok[0].data.as_deref(), Some("{\"a\": 1}"));
    assert_eq!(ok[0].expect, Expect::Value("0.5".to_string()));
}

#[test]
fn case_parser_rejects_near_miss_markers() {
    let near_misses = [
        ";;case: b",
        "; case: b",
        ";; Case: b",
        ";; cases: b",
        ";; print: \"x\"",
        ";;prints: \"x\"",
        ";; prints \"x\"",
        ";; =>1",
        ";;=> 1",
        ";; => ",
        ";; ! type_error",
        ";;!! type_error",
        ";; date: {}",
        ";; divergance: x",
        ";; ptc-only yes",
        ";; unchecked why",
    ];
    for bad in near_misses {
        let text = format!(";; case: a\n(println \"x\")\n{bad}\n;; => nil\n");
        let err = parse_cases("t.txt", &text).expect_err(bad);
        assert!(
            err.starts_with("t.txt:3: ") && err.contains("looks like a marker"),
            "{bad}: {err}"
        );
        // Between cases it is an error too: a misspelt `;; case:` must not turn a case into
        // commentary.
        let text = format!(";; case: a\n1\n;; => 1\n{bad}\n2\n;; => 2\n");
        let err = parse_cases("t.txt", &text).expect_err(bad);
        assert!(err.starts_with("t.txt:4: "), "{bad}: {err}");
    }
    // Commentary that merely mentions markers or other words is fine.
    let ok = parse_cases(
        "t.txt",
        ";; println and friends: compared with `;; prints:`.\n;; Sets and clojure.set.\n;; case: a\n1\n;; => 1\n",
    )
    .expect("commentary");
    assert_eq!(ok.len(), 1);
}

#[test]
fn case_parser_rejects_a_result_outside_a_case_and_a_second_prints() {
    let err = parse_cases("t.txt", ";; case: a\n1\n;; => 1\n;; => 2\n").unwrap_err();
    assert!(err.starts_with("t.txt:4: marker"), "{err}");
    let err = parse_cases("t.txt", ";; prints: \"x\"\n").unwrap_err();
    assert!(err.contains("outside a case"), "{err}");
    let err = parse_cases(
        "t.txt",
        ";; case: a\n;; prints: \"x\"\n;; prints: \"y\"\n;; => 1\n",
    )
    .unwrap_err();
    assert!(err.contains("a second `;; prints:`"), "{err}");
    let err = parse_cases("t.txt", ";; case: two words\n1\n;; => 1\n").unwrap_err();
    assert!(err.contains("one word"), "{err}");
}

#[test]
fn known_gaps_record_their_current_outcome() {
    let gaps = parse_known_gaps("# c\ngap-a why it fails\n  got: => 1\n").unwrap();
    assert_eq!(
        gaps["gap-a"],
        Gap {
            reason: "why it fails".into(),
            got: "=> 1".into()
        }
    );
    let e = parse_known_gaps("gap-a why\n").unwrap_err();
    assert!(e.contains("does not record what it gives today"), "{e}");
    let e = parse_known_gaps("gap-a\n  got: => 1\n").unwrap_err();
    assert!(e.contains("needs a reason"), "{e}");
    let e = parse_known_gaps("  got: => 1\n").unwrap_err();
    assert!(e.contains("without a gap"), "{e}");
    let e = parse_known_gaps("a why\n  got: => 1\na again\n  got: => 1\n").unwrap_err();
    assert!(e.contains("listed twice"), "{e}");
}

fn case(src: &str, expect: Expect, prints: Option<&str>) -> Case {
    Case {
        file: "t.txt".into(),
        line: 1,
        name: "t".into(),
        src: src.into(),
        expect,
        divergence: None,
        data: None,
        prints: prints.map(str::to_string),
    }
}

#[test]
fn results_are_compared_with_type_tags() {
    let value = |t: &str| Expect::Value(t.to_string());
    // Same printed text is not enough: the types must agree.
    for (src, expected) in [
        ("#{1 2}", "{1 2}"),
        ("{1 2}", "#{1 2}"),
        ("[1 2]", "#{1 2}"),
        ("1", "1.0"),
        ("1.0", "1"),
        ("\"a\"", ":a"),
        (":a", "a"),
    ] {
        let err = run_case(&case(src, value(expected), None)).expect_err(src);
        assert!(err.0.starts_with("expected "), "{src}: {err:?}");
    }
    for (src, expected) in [("#{2 1}", "#{1 2}"), ("{:b 1 :a 2}", "{:a 2 :b 1}")] {
        assert_eq!(run_case(&case(src, value(expected), None)), Ok(()), "{src}");
    }
    let set = read_value("#{1 2}").unwrap();
    assert_eq!(
        tagged(&set),
        Tagged::Set(vec![Tagged::Int(1), Tagged::Int(2)])
    );
}

#[test]
fn printer_is_checked_against_the_reader() {
    let set = read_value("#{1 2}").unwrap();
    assert_eq!(check_printed(&set, "#{1 2}"), Ok(()));
    // What a printer that printed sets as maps would produce.
    let err = check_printed(&set, "{1 2}").unwrap_err();
    assert!(err.contains("reads back as Map"), "{err}");
    let err = check_printed(&Value::Float(1.0), "1").unwrap_err();
    assert!(err.contains("reads back as Int(1)"), "{err}");
    let err = check_printed(&Value::str("a b"), "a b").unwrap_err();
    assert!(err.contains("does not read back"), "{err}");
}

#[test]
fn gap_summary_records_value_error_and_output() {
    let c = case(
        "(println \"hi\") 1",
        Expect::Value("2".into()),
        Some("\"hi\\n\""),
    );
    let outcome = evaluate(&c).unwrap();
    assert_eq!(outcome.summary(&c), "=> 1 prints \"hi\\n\"");
    let c = case("(+ 1 :a)", Expect::Value("2".into()), None);
    assert_eq!(evaluate(&c).unwrap().summary(&c), "!! type_error");
    assert_eq!(
        run_case(&c),
        Err((
            "expected 2, got error ".to_string()
                + &Interpreter::new(Limits::default())
                    .eval_str("(+ 1 :a)")
                    .unwrap_err()
                    .to_string(),
            "!! type_error".to_string()
        ))
    );
}

#[test]
fn conformance_corpus() {
    let filter = std::env::var("CONFORMANCE_FILTER").ok();
    let cases: Vec<Case> = load_corpus()
        .into_iter()
        .filter(|c| filter.as_deref().is_none_or(|f| c.name.contains(f)))
        .collect();
    assert!(!cases.is_empty(), "no case matches the filter");
    let gaps = load_known_gaps();
    let trace = std::env::var_os("CONFORMANCE_TRACE").is_some();

    let mut passed = 0usize;
    let mut unexpected = Vec::new();
    let mut gap_failures = 0usize;
    let mut gaps_now_passing = Vec::new();
    let mut gaps_changed = Vec::new();
    for case in &cases {
        if trace {
            eprintln!("running {}:{} {}", case.file, case.line, case.name);
        }
        let result = run_case(case);
        match (result, gaps.get(&case.name)) {
            (Ok(()), None) => passed += 1,
            (Ok(()), Some(_)) => {
                passed += 1;
                gaps_now_passing.push(case.name.clone());
            }
            (Err((_, summary)), Some(gap)) if summary == gap.got => gap_failures += 1,
            (Err((why, summary)), Some(gap)) => {
                gaps_changed.push(format!(
                    "KNOWN GAP CHANGED {}: recorded `got: {}`, now `got: {summary}` ({why}); \
                     it was allowed because: {}",
                    case.name, gap.got, gap.reason
                ));
            }
            (Err((why, _)), None) => unexpected.push((case, why)),
        }
    }

    let total = cases.len();
    let rate = passed as f64 / total as f64;
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
    for line in &gaps_changed {
        let _ = writeln!(report, "{line}");
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
        unexpected.is_empty() && gaps_now_passing.is_empty() && gaps_changed.is_empty(),
        "{} unexpected conformance failures, {} known gaps now passing, {} known gaps changed \
         (see the report above)",
        unexpected.len(),
        gaps_now_passing.len(),
        gaps_changed.len()
    );
    assert!(
        filter.is_some() || rate >= MIN_PASS_RATE,
        "pass rate {:.1}% is below {:.0}%",
        rate * 100.0,
        MIN_PASS_RATE * 100.0
    );
}
