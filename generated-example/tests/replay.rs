//! Record and replay with the real binary: the demo's questions recorded with `eval --record`
//! against the Observatory test bed, then replayed with `replay` after the test bed has stopped
//! (same bytes on stdout, no upstream reached); a changed program reports where it diverged; the
//! test bed's token never enters a run file; `serve --record-dir` writes one replayable file per
//! evaluation.

// The demo's questions, as the demo asks them (the rest of the demo is not used here).
#[allow(dead_code)]
#[path = "../src/demo.rs"]
mod demo;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use observatory_server::TokenSpec;
use ptc_tests::bed::FlaggedBed;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_generated-example");
/// The test bed's credential: the canary no run file may hold.
const TOKEN: &str = "obs_replay_canary_4f1e9b27c3d8a650";

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("the binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The Observatory test bed (its token may write) and the flags that point the binary at it.
fn bed(name: &str) -> FlaggedBed {
    let mut spec = TokenSpec::full_access("tok_replay", TOKEN);
    spec.scopes.push("traces:write".into());
    ptc_tests::bed::start(&format!("replay-{name}"), spec)
}

/// One recorded program: its run file and what `eval --json` printed.
struct Recorded {
    file: PathBuf,
    stdout: Vec<u8>,
}

/// Every demo question, then the canary program, recorded once (the test bed stopped after),
/// in a folder of their own.
struct Recordings {
    dir: PathBuf,
    questions: Vec<Recorded>,
    canary: Recorded,
}

fn recordings() -> &'static Recordings {
    static ONCE: OnceLock<Recordings> = OnceLock::new();
    ONCE.get_or_init(record_all)
}

fn record(
    bed: &FlaggedBed,
    dir: &Path,
    name: &str,
    program: &str,
    context: Option<&Value>,
) -> Recorded {
    let file = dir.join(format!("{name}.run.json"));
    let mut args: Vec<String> = vec![
        "eval".into(),
        "--json".into(),
        "--allow-writes".into(),
        "--record".into(),
        file.display().to_string(),
    ];
    args.extend(bed.flags.iter().cloned());
    if let Some(c) = context {
        let path = dir.join(format!("{name}.context.json"));
        std::fs::write(&path, c.to_string()).unwrap();
        args.extend(["--context".into(), path.display().to_string()]);
    }
    args.extend(["-e".into(), program.into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(&args);
    assert!(
        out.status.success(),
        "{name}: {}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(!text(&out.stdout).contains(TOKEN) && !text(&out.stderr).contains(TOKEN));
    Recorded {
        file,
        stdout: out.stdout,
    }
}

fn record_all() -> Recordings {
    let dir = ptc_tests::fresh_dir("replay-demo");
    let mut bed = bed("demo");
    assert!(!demo::QUESTIONS.is_empty());
    let questions = demo::QUESTIONS
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let context = (q.context)(bed.server().unwrap());
            let context = (!context.is_empty()).then_some(Value::Object(context));
            record(
                &bed,
                &dir,
                &format!("q{}", i + 1),
                q.program,
                context.as_ref(),
            )
        })
        .collect();
    // The token in the program, its context, a call's arguments, the printed output and the
    // answer: the run file masks every one.
    let canary_program = format!(
        r#"(let [r (tool/call 'observatory/search-traces {{:org-id "org_acme" :trace-id "{TOKEN}"}})]
  (println "the token:" data/secret)
  {{:found (count (:traces (:value r))) :token data/secret :written "{TOKEN}"}})"#
    );
    let canary = record(
        &bed,
        &dir,
        "canary",
        &canary_program,
        Some(&json!({"secret": TOKEN})),
    );
    bed.stop();
    Recordings {
        dir,
        questions,
        canary,
    }
}

fn run_file(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn demo_questions_replay_offline_with_byte_identical_answers() {
    let r = recordings();
    assert_eq!(r.questions.len(), demo::QUESTIONS.len());
    let mut calls_per_question = Vec::new();
    for (i, q) in r.questions.iter().enumerate() {
        let file = run_file(&q.file);
        assert_eq!(file["format"], 1);
        assert_eq!(file["program"], demo::QUESTIONS[i].program);
        let calls = file["calls"].as_array().unwrap();
        calls_per_question.push(calls.len());
        // The test bed is stopped: every answer comes from the run file.
        let out = run(&["replay", q.file.to_str().unwrap(), "--json"]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "question {}: {stderr}", i + 1);
        assert_eq!(
            text(&out.stdout),
            text(&q.stdout),
            "question {}: {stderr}",
            i + 1
        );
        assert_eq!(out.stdout, q.stdout);
        assert!(
            stderr.contains(&format!(
                "replay: the same answer as recorded; {} upstream calls answered from",
                calls.len()
            )),
            "{stderr}"
        );
    }
    // One call each, two for the failed step, 1 + 8 for the pmap fan-out (its order may differ
    // between runs), three for the write.
    assert_eq!(calls_per_question, [1, 1, 1, 2, 9, 3]);
    // The write needed approval; `eval` has nobody to ask, the recording says so, and the replay
    // gives the program the same refusal without asking anyone.
    let write = run_file(&r.questions[5].file);
    let annotate = &write["calls"][1];
    assert_eq!(annotate["tool"], "annotate-trace");
    assert_eq!(annotate["approval"], "unavailable");
    assert_eq!(annotate["outcome"]["kind"], "not_sent");
    assert_eq!(annotate["outcome"]["reason"], "approval_unavailable");
    assert!(text(&r.questions[5].stdout).contains("approval_unavailable"));
    // A recorded result is the JSON text the program decoded.
    let first = &run_file(&r.questions[0].file)["calls"][0];
    assert_eq!(first["server"], "observatory");
    assert_eq!(first["tool"], "list-errors");
    assert_eq!(first["args"], json!({"org_id": "org_acme", "limit": 200}));
    assert_eq!(first["outcome"]["kind"], "json");
    let errors: Value = serde_json::from_str(first["outcome"]["json"].as_str().unwrap()).unwrap();
    assert!(!errors["errors"].as_array().unwrap().is_empty());
}

#[test]
fn the_credential_never_enters_a_run_file() {
    let r = recordings();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&r.dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".run.json"))
        .collect();
    files.sort();
    assert_eq!(files.len(), demo::QUESTIONS.len() + 1, "{files:?}");
    for f in &files {
        let bytes = std::fs::read_to_string(f).unwrap();
        assert!(!bytes.contains(TOKEN), "{} holds the token", f.display());
    }
    // Where the canary went, the mask stands.
    let canary = run_file(&r.canary.file);
    assert!(canary["program"].as_str().unwrap().contains("[REDACTED]"));
    assert_eq!(canary["context"], json!(r#"{"secret":"[REDACTED]"}"#));
    assert_eq!(canary["calls"][0]["args"]["trace_id"], "[REDACTED]");
    assert_eq!(canary["prints"], "the token: [REDACTED]\n");
    assert_eq!(canary["answer"]["json"]["token"], "[REDACTED]");
    // The masked run still replays to the answer `eval` printed (masked there too).
    let out = run(&["replay", r.canary.file.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(out.stdout, r.canary.stdout);
    assert!(!text(&out.stdout).contains(TOKEN));
}

/// A copy of a recording with its program changed by `change`.
fn changed(from: &Path, name: &str, change: impl Fn(&str) -> String) -> PathBuf {
    let mut file = run_file(from);
    let program = change(file["program"].as_str().unwrap());
    file["program"] = Value::String(program);
    let path = recordings().dir.join(format!("{name}.run.json.changed"));
    std::fs::write(&path, serde_json::to_vec_pretty(&file).unwrap()).unwrap();
    path
}

fn replay_fails(path: &Path) -> String {
    let out = run(&["replay", path.to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    stderr
}

#[test]
fn a_changed_program_reports_its_first_divergence() {
    let r = recordings();
    let q1 = &r.questions[0].file;
    // Other arguments: the call, and the nearest recorded one with what differs.
    let other_args = changed(q1, "other-args", |p| p.replace(":limit 200", ":limit 150"));
    let stderr = replay_fails(&other_args);
    assert!(
        stderr.contains(
            "diverged from ",
        ) && stderr.contains(
            ": call 1: the program called observatory/list-errors {\"org_id\":\"org_acme\",\"limit\":150}, \
             which the recording does not have; the nearest recorded call not yet used is call 1: \
             observatory/list-errors {\"org_id\":\"org_acme\",\"limit\":200} (the arguments differ at limit)"
        ),
        "{stderr}"
    );
    // One call more than recorded.
    let one_more = changed(q1, "one-more", |p| {
        format!("(do (tool/call 'observatory/list-errors {{:org-id \"org_acme\" :limit 200}}) {p})")
    });
    let stderr = replay_fails(&one_more);
    assert!(
        stderr.contains(
            ": call 2: the program called observatory/list-errors \
             {\"org_id\":\"org_acme\",\"limit\":200}, one more than the 1 calls recorded"
        ),
        "{stderr}"
    );
    // Fewer calls than recorded: the pmap fan-out cut to its first four traces.
    let q5 = &r.questions[4].file;
    let fewer = changed(q5, "fewer", |p| p.replace("traces)]", "(take 4 traces))]"));
    let stderr = replay_fails(&fewer);
    assert!(
        stderr.contains(": the recording has 4 calls the program did not make: call "),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("observatory/get-trace-steps {").count(),
        4,
        "{stderr}"
    );
    // The same calls and another answer.
    let other_answer = changed(q1, "other-answer", |p| format!("(count {p})"));
    let stderr = replay_fails(&other_answer);
    assert!(
        stderr.contains(": the answer differs: the recording has the value [[\"timeout\" "),
        "{stderr}"
    );
    assert!(stderr.contains(", the replay gave the value "), "{stderr}");
}

#[test]
fn an_unreadable_or_other_format_run_file_exits_2() {
    let dir = ptc_tests::fresh_dir("replay-bad-files");
    let corrupt = dir.join("corrupt.json");
    std::fs::write(&corrupt, "{\"format\": 1, \"program\": ").unwrap();
    let out = run(&["replay", corrupt.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains(&format!(
            "generated-example replay: {} is not a run file: it is not JSON (EOF while parsing",
            corrupt.display()
        )),
        "{}",
        text(&out.stderr)
    );
    let future = dir.join("future.json");
    std::fs::write(
        &future,
        r#"{"format": 2, "ptc_version": "9.0.0", "program": "(+ 1 2)"}"#,
    )
    .unwrap();
    let out = run(&["replay", future.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains(&format!(
            "{} is a run file of format 2 (recorded by ptc 9.0.0); this ptc (",
            future.display()
        )) && text(&out.stderr).contains(") reads format 1 only"),
        "{}",
        text(&out.stderr)
    );
    let missing = dir.join("missing.json");
    let out = run(&["replay", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains(&format!("cannot read {}", missing.display())),
        "{}",
        text(&out.stderr)
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn a_record_dir_that_cannot_be_a_folder_fails_the_start() {
    let dir = ptc_tests::fresh_dir("replay-record-dir");
    let file = dir.join("a-file");
    std::fs::write(&file, "").unwrap();
    let out = run(&["serve", "--record-dir", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "generated-example serve: --record-dir {}: cannot create it: ",
            file.display()
        )),
        "{stderr}"
    );
}

#[test]
fn serve_with_a_record_dir_writes_one_replayable_file_per_evaluation() {
    let dir = ptc_tests::fresh_dir("replay-serve");
    let record_dir = dir.join("runs");
    let mut bed = bed("serve");
    let mut child = Command::new(BIN)
        .arg("serve")
        .args(&bed.flags)
        .args(["--record-dir", record_dir.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let programs = [
        "(count (:errors (:value (tool/call 'observatory/list-errors {:org-id \"org_acme\" :limit 7}))))",
        "(+ data/a 1)",
        "(fail {:why \"no data\"})",
    ];
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = vec![
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#.to_string(),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_string(),
    ];
    for (i, p) in programs.iter().enumerate() {
        let mut arguments = json!({"program": p});
        if p.contains("data/a") {
            arguments["context"] = json!({"a": 41});
        }
        lines.push(
            json!({"jsonrpc": "2.0", "id": i + 2, "method": "tools/call",
                "params": {"name": "lisp_eval", "arguments": arguments}})
            .to_string(),
        );
    }
    for l in &lines {
        writeln!(stdin, "{l}").unwrap();
    }
    let mut replies = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = 0;
    while seen < programs.len() + 1 {
        let l = replies.next().unwrap().unwrap();
        if l.contains("\"id\":") {
            seen += 1;
        }
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    bed.stop();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&record_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), programs.len(), "{files:?}");
    let mut recorded_programs = Vec::new();
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let file = run_file(f);
        let program = file["program"].as_str().unwrap().to_string();
        let hash = ptc::core::program::program_hash(&program);
        // `<13-digit unix ms>-<12 hex of the program's hash>.json`: the files sort by time.
        let (millis, rest) = name.split_once('-').unwrap();
        assert_eq!(millis.len(), 13, "{name}");
        assert!(millis.bytes().all(|b| b.is_ascii_digit()), "{name}");
        assert_eq!(rest, format!("{}.json", &hash[..12]), "{name}");
        assert!(!std::fs::read_to_string(f).unwrap().contains(TOKEN));
        // Each replays offline (the test bed is stopped) to its recorded answer.
        let out = run(&["replay", f.to_str().unwrap()]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{name}: {stderr}");
        assert!(
            stderr.contains("replay: the same answer as recorded;"),
            "{stderr}"
        );
        let expected = match program.as_str() {
            p if p.contains("list-errors") => "7\n",
            p if p.contains("data/a") => "42\n",
            _ => "",
        };
        assert_eq!(text(&out.stdout), expected, "{name}: {stderr}");
        recorded_programs.push(program);
    }
    recorded_programs.sort();
    let mut sent: Vec<String> = programs.iter().map(|p| p.to_string()).collect();
    sent.sort();
    assert_eq!(recorded_programs, sent);
}
