//! `ptc eval --config`: programs calling the Observatory service started in-process, the
//! metrics, and the exit codes for program and config errors; and the warning the host logs at
//! start-up of a stdio upstream it runs unisolated.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

const TOKEN: &str = "obs_cli_token_4e7b2d91";

struct Bed {
    rt: tokio::runtime::Runtime,
    server: Option<observatory_server::ServerHandle>,
    dir: PathBuf,
}

impl Drop for Bed {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            self.rt.block_on(s.shutdown());
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn bed(name: &str) -> Bed {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let tokens =
        observatory_server::TokenSource::Inline(vec![observatory_server::TokenSpec::full_access(
            "tok_cli", TOKEN,
        )]);
    let (addr, server) = rt
        .block_on(observatory_server::start(
            observatory_server::ServerConfig::new(tokens),
        ))
        .unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/observatory");
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures.join("upstreams.json")).unwrap())
            .unwrap();
    let dir = std::env::temp_dir().join(format!("ptc-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("token"), TOKEN).unwrap();
    config["credentials"]["observatory-token"]["path"] = json!(dir.join("token"));
    let up = &mut config["upstreams"]["observatory"];
    up["base_url"] = json!(format!("http://{addr}"));
    up["schema_file"] = json!(fixtures.join("observatory.openapi.json"));
    for program in config["programs"].as_object_mut().unwrap().values_mut() {
        program["file"] = json!(fixtures.join(program["file"].as_str().unwrap()));
    }
    std::fs::write(dir.join("upstreams.json"), config.to_string()).unwrap();
    Bed {
        rt,
        server: Some(server),
        dir,
    }
}

impl Bed {
    fn config(&self) -> String {
        self.dir.join("upstreams.json").to_string_lossy().into()
    }

    fn ptc(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_ptc"))
            .args(args)
            .output()
            .expect("ptc runs")
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_program_calls_the_upstream_and_metrics_go_to_stderr() {
    let b = bed("ok");
    let program = "(let [r (tool/call 'observatory/list-traces {:org-id \"org_acme\" :limit 3})] [(:ok r) (count (:value r))])";
    let out = b.ptc(&["eval", "--config", &b.config(), "-e", program]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "[true 3]\n");
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    let out = b.ptc(&["eval", "--config", &b.config(), "--metrics", "-e", program]);
    assert_eq!(out.status.code(), Some(0));
    let records: Value = serde_json::from_slice(&out.stderr).expect("metrics are JSON");
    assert_eq!(records["upstream_calls"][0]["tool"], "list-traces");
    assert_eq!(records["upstream_calls"][0]["status"], "ok");
    assert_eq!(records["ptc_metrics"]["upstream_call_count"], 1);
    assert_eq!(records["ptc_metrics"]["final_result_bytes"], 8);
    assert!(!text(&out.stderr).contains(TOKEN) && !text(&out.stdout).contains(TOKEN));
}

#[test]
fn a_program_error_exits_1_and_a_config_error_exits_2() {
    let b = bed("errors");
    let out = b.ptc(&[
        "eval",
        "--config",
        &b.config(),
        "-e",
        "(tool/call 'observatory/list-trace {:org-id \"org_acme\"})",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with("runtime_error: 1 tool/call problem found before running"),
        "{stderr}"
    );
    assert!(
        stderr.contains("did you mean `observatory/list-traces`?"),
        "{stderr}"
    );
    let bad = b.dir.join("bad.json");
    std::fs::write(&bad, r#"{"upstreams": {"x": {"transport": "openapi"}}}"#).unwrap();
    let out = b.ptc(&["eval", "--config", &bad.to_string_lossy(), "-e", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("invalid config"),
        "{}",
        text(&out.stderr)
    );
    let out = b.ptc(&["eval", "--metrics", "-e", "1"]);
    assert_eq!(out.status.code(), Some(2), "--metrics needs --config");
}

#[test]
fn max_calls_bounds_the_programs_upstream_calls_at_its_value() {
    let b = bed("calls");
    let program =
        "(mapv #(:ok (tool/call 'observatory/list-traces {:org-id \"org_acme\" :limit %})) [1 2])";
    let run = |max: &str| {
        b.ptc(&[
            "eval",
            "--config",
            &b.config(),
            "--max-calls",
            max,
            "-e",
            program,
        ])
    };
    let at = run("2");
    assert_eq!(at.status.code(), Some(0), "{}", text(&at.stderr));
    assert_eq!(text(&at.stdout), "[true true]\n");
    let below = run("1");
    assert_eq!(below.status.code(), Some(0), "{}", text(&below.stderr));
    assert_eq!(text(&below.stdout), "[true false]\n");
}

/// `ptc promote` round-trips a recorded run: the draft lifts the org into a parameter, passes
/// the checks, and the program, declared as printed and run with the recorded org as its
/// argument, answers what the recording did.
#[test]
fn promote_turns_a_recorded_run_into_a_declared_program_that_answers_the_same() {
    let b = bed("promote");
    let program = "(let [r (tool/call 'observatory/list-errors {:org-id \"org_acme\" :limit 100})]\n  (->> (:errors (:value r)) (map :error_class) (frequencies) (sort-by (fn [[c n]] [(- n) c])) (into [])))";
    let run = b.dir.join("run.json");
    let out = b.ptc(&[
        "eval",
        "--config",
        &b.config(),
        "--record",
        run.to_str().unwrap(),
        "-e",
        program,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let recorded = text(&out.stdout);

    let config_path = b.config();
    let promote = |name: &str, input: &[&str]| {
        let mut args = vec!["promote", "--config", config_path.as_str(), "--name", name];
        args.extend([
            "--description",
            "The error classes of an org's recent failures",
        ]);
        args.extend(input);
        b.ptc(&args)
    };
    let out = promote("top-errors", &[run.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.contains("parameter `org_id`: was the literal \"org_acme\""),
        "{said}"
    );
    let written = std::fs::read_to_string(b.dir.join("programs/top-errors.clj")).unwrap();
    assert!(
        written.contains(":org-id data/org_id :limit 100"),
        "{written}"
    );
    assert!(!written.contains("org_acme"), "{written}");

    // The declaration as printed, added to the config: it checks, and answers as recorded.
    let snippet: String = said
        .lines()
        .skip(2)
        .take_while(|l| !l.starts_with("parameter "))
        .collect();
    let declared: Value = serde_json::from_str(&format!("{{{snippet}}}")).expect("a JSON member");
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(b.config()).unwrap()).unwrap();
    config["programs"]["top-errors"] = declared["top-errors"].clone();
    assert_eq!(
        config["programs"]["top-errors"]["file"],
        "programs/top-errors.clj"
    );
    std::fs::write(b.config(), config.to_string()).unwrap();
    let out = b.ptc(&["check", &b.config()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("top-errors"),
        "{}",
        text(&out.stdout)
    );
    let context = b.dir.join("context.json");
    std::fs::write(&context, r#"{"org_id": "org_acme"}"#).unwrap();
    let out = b.ptc(&[
        "eval",
        "--config",
        &b.config(),
        "--context",
        context.to_str().unwrap(),
        b.dir.join("programs/top-errors.clj").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), recorded);

    // A draft that does not pass is refused with its problems, and nothing is left behind.
    let out = promote(
        "bad-one",
        &["-e", "(observatory/list-error {:org-id \"org_acme\"})"],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("has no tool `list-error` (did you mean `list-errors`?)"),
        "{stderr}"
    );
    assert!(stderr.contains("bad-one.clj:1:1"), "{stderr}");
    assert!(!b.dir.join("programs/bad-one.clj").exists());
    // An existing file is never overwritten.
    let out = promote(
        "top-errors-2",
        &["--file", "programs/top-errors.clj", "-e", "1"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(b.dir.join("programs/top-errors.clj")).unwrap(),
        written
    );
}

/// A stdio upstream the config runs unisolated is warned of in the host's start-up log; an
/// isolated one is not.
#[test]
fn an_unisolated_stdio_upstream_is_warned_of_at_start_up() {
    let Some(python) = ptc_tests::mcp_python() else {
        return;
    };
    let dir = ptc_tests::fresh_dir("cli-unisolated");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/mcp/py_server.py");
    for (sandbox, warned) in [(json!(false), true), (json!(true), false)] {
        let config = dir.join("upstreams.json");
        let text_of = json!({"upstreams": {"py": {"transport": "mcp_stdio", "command": python,
            "args": [script, "stdio"], "sandbox": sandbox}}});
        std::fs::write(&config, text_of.to_string()).unwrap();
        let mut host = ptc_tests::HostProcess::serve(
            env!("CARGO_BIN_EXE_ptc"),
            &["--config", config.to_str().unwrap()],
        );
        let logged = host.kill().join("\n");
        assert_eq!(
            logged.contains("WARN")
                && logged.contains("upstream=py")
                && logged.contains(
                    "not isolated (\"sandbox\": false): it runs with the host's own rights"
                ),
            warned,
            "{logged}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
