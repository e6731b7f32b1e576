//! Record and replay: a run file holds one program run (the program, its context, every upstream
//! call that passed validation with its capped, redacted result in the order made, and the
//! answer) so that `replay` can run the program again offline against the recorded results.
//!
//! The [`Tape`] is the one hook a run's host has: it records each call as it is made
//! ([`Tape::Record`]) or answers it from a recording ([`Tape::Replay`]). Everything before the
//! answer (validation against the catalog, the budgets) runs in a replay as it did when recorded,
//! so a replay is checked the same way; the policy's refusals and the approvals come from the
//! recording, and nobody is asked again.
//!
//! Results and the context are kept as JSON *text*, byte for byte as the program read them: a
//! replay decodes exactly what the recording did (a parsed and re-printed number could differ in
//! its last bit).

mod record_dir;
mod recorder;
mod replayer;
mod run_file;
mod tape;

pub use record_dir::{Evaluated, RecordDir};
pub use recorder::Recorder;
use replayer::Replayed;
pub use replayer::Replayer;
pub use run_file::{
    Answer, FORMAT, MAX_RECORDED_RESULT_BYTES, Outcome, RecordedCall, RunFile, Settings,
    answer_difference,
};
pub use tape::Tape;
pub(crate) use tape::TapeCall;

/// Characters of a call's arguments shown in a divergence message.
const SHOWN_ARGS_CHARS: usize = 300;

use serde_json::{Map, Value as Json};

use crate::credentials::redact::Redactor;

fn redact(r: &Redactor, text: &str) -> String {
    r.redact(text).into_owned()
}

fn redact_map(r: &Redactor, map: Map<String, Json>) -> Map<String, Json> {
    map.into_iter()
        .map(|(k, v)| (redact(r, &k), redact_json(r, v)))
        .collect()
}

fn redact_json(r: &Redactor, v: Json) -> Json {
    match v {
        Json::String(s) => Json::String(redact(r, &s)),
        Json::Array(a) => Json::Array(a.into_iter().map(|v| redact_json(r, v)).collect()),
        Json::Object(m) => Json::Object(redact_map(r, m)),
        other => other,
    }
}

/// Whether two argument maps are the same call. Numbers compare by value, and floats within a
/// rounding step: a float read back from a run file may differ from the one written in its last
/// bit.
fn same_args(a: &Map<String, Json>, b: &Map<String, Json>) -> bool {
    a.len() == b.len()
        && a.iter()
            .all(|(k, v)| b.get(k).is_some_and(|w| same_json(v, w)))
}

fn same_json(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => {
            match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
                (Some(x), Some(y), _, _) => x == y,
                (_, _, Some(x), Some(y)) => x == y,
                _ => match (x.as_f64(), y.as_f64()) {
                    (Some(x), Some(y)) => {
                        x == y || (x - y).abs() <= f64::EPSILON * x.abs().max(y.abs())
                    }
                    _ => false,
                },
            }
        }
        (Json::Array(x), Json::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Json::Object(x), Json::Object(y)) => same_args(x, y),
        _ => a == b,
    }
}

/// The argument names whose values differ between two calls, e.g. `id`.
fn differing_keys(a: &Map<String, Json>, b: &Map<String, Json>) -> String {
    let mut keys: Vec<&str> = a
        .keys()
        .chain(b.keys().filter(|k| !a.contains_key(*k)))
        .filter(|k| match (a.get(*k), b.get(*k)) {
            (Some(x), Some(y)) => !same_json(x, y),
            _ => true,
        })
        .map(String::as_str)
        .collect();
    keys.dedup();
    keys.join(", ")
}

/// `server/tool {args}`, the arguments cut to a readable length.
fn call_text(server: &str, tool: &str, args: &Map<String, Json>) -> String {
    let args = Json::Object(args.clone()).to_string();
    format!("{server}/{tool} {}", bounded(&args, SHOWN_ARGS_CHARS))
}

fn bounded(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Instant;

    use ptc_lisp::{Limits, Value};

    use super::record_dir::write_new;
    use super::tape::recorded_output;
    use super::*;
    use crate::call::contract::{Reason, ToolError, ToolOutput};
    use crate::call::response_check::ResponseCheck;
    use crate::call::upstreams::{CatalogLoad, Executed, StartOptions, StartSettings, Upstreams};
    use crate::call::writes::WriteGate;
    use crate::program::limits::Budgets;
    use crate::program::run_report::ApprovalOutcome;

    fn args(id: &str) -> Map<String, Json> {
        let mut m = Map::new();
        m.insert("org_id".into(), json!("org_acme"));
        m.insert("id".into(), json!(id));
        m
    }

    fn answered(tool: &str, id: &str, json: &str) -> RecordedCall {
        RecordedCall {
            server: "observatory".into(),
            tool: tool.into(),
            args: args(id),
            approval: None,
            outcome: Outcome::Json {
                json: json.into(),
                bytes: json.len() as u64,
            },
            duration_ms: 3,
        }
    }

    use serde_json::json;

    /// Two recorded calls: get-trace of `a`, then get-trace of `b`.
    fn two() -> Replayer {
        Replayer::new(&[
            answered("get-trace", "a", r#"{"id":"a"}"#),
            answered("get-trace", "b", r#"{"id":"b"}"#),
        ])
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    /// The JSON text the replay answers `r` with.
    fn answer_text(r: &Replayed) -> String {
        match block_on(r.answer(None)) {
            Ok(Executed {
                output: ToolOutput::Json(b),
                ..
            }) => String::from_utf8(b).unwrap(),
            Ok(_) => panic!("not a JSON answer"),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn calls_in_the_recorded_order_are_answered_in_order() {
        let r = two();
        let first = r.take("observatory", "get-trace", &args("a")).unwrap();
        let second = r.take("observatory", "get-trace", &args("b")).unwrap();
        assert_eq!((first.number, first.recorded), (1, 1));
        assert_eq!((second.number, second.recorded), (2, 2));
        assert_eq!(answer_text(&first), r#"{"id":"a"}"#);
        assert_eq!(answer_text(&second), r#"{"id":"b"}"#);
        assert_eq!(r.divergence(), None);
        assert_eq!(r.unused(), None);
        assert_eq!(r.calls_made(), 2);
    }

    #[test]
    fn calls_in_another_order_find_their_own_answers() {
        // `pmap` sends its branches' calls in whichever order they reach the host.
        let r = two();
        let b = r.take("observatory", "get-trace", &args("b")).unwrap();
        let a = r.take("observatory", "get-trace", &args("a")).unwrap();
        assert_eq!((b.number, b.recorded), (1, 2));
        assert_eq!((a.number, a.recorded), (2, 1));
        assert_eq!(answer_text(&b), r#"{"id":"b"}"#);
        assert_eq!(answer_text(&a), r#"{"id":"a"}"#);
        assert_eq!((r.divergence(), r.unused()), (None, None));
    }

    #[test]
    fn the_same_call_twice_takes_the_recorded_ones_in_turn() {
        let r = Replayer::new(&[
            answered("get-trace", "a", r#"{"n":1}"#),
            answered("get-trace", "a", r#"{"n":2}"#),
        ]);
        let one = r.take("observatory", "get-trace", &args("a")).unwrap();
        let two = r.take("observatory", "get-trace", &args("a")).unwrap();
        assert_eq!(answer_text(&one), r#"{"n":1}"#);
        assert_eq!(answer_text(&two), r#"{"n":2}"#);
    }

    #[test]
    fn changed_arguments_diverge_naming_the_call_and_the_nearest_recorded_one() {
        let r = two();
        r.take("observatory", "get-trace", &args("a")).unwrap();
        let Err(e) = r.take("observatory", "get-trace", &args("c")) else {
            panic!("matched");
        };
        let expected = "call 2: the program called observatory/get-trace \
                        {\"org_id\":\"org_acme\",\"id\":\"c\"}, which the recording does not have; \
                        the nearest recorded call not yet used is call 2: observatory/get-trace \
                        {\"org_id\":\"org_acme\",\"id\":\"b\"} (the arguments differ at id)";
        assert_eq!(r.divergence().as_deref(), Some(expected));
        // The program stops: the host raises a programmer fault's reason.
        assert_eq!(e.reason, Reason::InvalidArgs);
        assert_eq!(e.message, format!("replay diverged: {expected}"));
        // A later divergence does not replace the first.
        let _ = r.take("observatory", "costs", &Map::new());
        assert_eq!(r.divergence().as_deref(), Some(expected));
    }

    #[test]
    fn another_tool_is_compared_with_the_next_unused_call_after_its_own_tools_calls() {
        let r = two();
        let _ = r.take("observatory", "list-traces", &args("a"));
        assert_eq!(
            r.divergence().as_deref(),
            Some(
                "call 1: the program called observatory/list-traces \
                 {\"org_id\":\"org_acme\",\"id\":\"a\"}, which the recording does not have; the \
                 nearest recorded call not yet used is call 1: observatory/get-trace \
                 {\"org_id\":\"org_acme\",\"id\":\"a\"}"
            )
        );
        // ... after the recorded calls of the program's own tool.
        let r = Replayer::new(&[
            answered("get-trace", "a", r#"{"id":"a"}"#),
            answered("list-traces", "x", r#"[]"#),
        ]);
        let _ = r.take("observatory", "list-traces", &args("y"));
        assert_eq!(
            r.divergence().as_deref(),
            Some(
                "call 1: the program called observatory/list-traces \
                 {\"org_id\":\"org_acme\",\"id\":\"y\"}, which the recording does not have; the \
                 nearest recorded call not yet used is call 2: observatory/list-traces \
                 {\"org_id\":\"org_acme\",\"id\":\"x\"} (the arguments differ at id)"
            )
        );
    }

    #[test]
    fn one_call_more_than_recorded_diverges() {
        let r = two();
        r.take("observatory", "get-trace", &args("a")).unwrap();
        r.take("observatory", "get-trace", &args("b")).unwrap();
        assert!(r.take("observatory", "get-trace", &args("a")).is_err());
        assert_eq!(
            r.divergence().as_deref(),
            Some(
                "call 3: the program called observatory/get-trace \
                 {\"org_id\":\"org_acme\",\"id\":\"a\"}, one more than the 2 calls recorded"
            )
        );
    }

    #[test]
    fn recorded_calls_the_program_did_not_make_are_reported() {
        let r = two();
        assert_eq!(
            r.unused().as_deref(),
            Some(
                "the recording has 2 calls the program did not make: call 1: \
                 observatory/get-trace {\"org_id\":\"org_acme\",\"id\":\"a\"}; call 2: \
                 observatory/get-trace {\"org_id\":\"org_acme\",\"id\":\"b\"}"
            )
        );
        r.take("observatory", "get-trace", &args("b")).unwrap();
        assert_eq!(
            r.unused().as_deref(),
            Some(
                "the recording has 1 call the program did not make: call 1: \
                 observatory/get-trace {\"org_id\":\"org_acme\",\"id\":\"a\"}"
            )
        );
        assert_eq!(r.divergence(), None);
    }

    #[test]
    fn results_are_kept_whole_up_to_the_cap_and_marked_past_it() {
        let redactor = Redactor::new();
        let at_cap = format!("\"{}\"", "x".repeat(MAX_RECORDED_RESULT_BYTES - 2));
        let kept = recorded_output(&ToolOutput::Json(at_cap.clone().into_bytes()), 9, &redactor);
        assert_eq!(
            kept,
            Outcome::Json {
                json: at_cap,
                bytes: 9
            }
        );
        let past = format!("\"{}\"", "x".repeat(MAX_RECORDED_RESULT_BYTES - 1));
        let cut = recorded_output(&ToolOutput::Json(past.clone().into_bytes()), 9, &redactor);
        assert_eq!(
            cut,
            Outcome::Truncated {
                bytes: MAX_RECORDED_RESULT_BYTES as u64 + 1,
                start: past[..MAX_RECORDED_RESULT_BYTES].to_string()
            }
        );
        // Cut at a character boundary.
        let wide = "é".repeat(MAX_RECORDED_RESULT_BYTES / 2 + 1);
        let Outcome::Truncated { start, .. } =
            recorded_output(&ToolOutput::Text(wide), 0, &redactor)
        else {
            panic!("kept whole");
        };
        assert_eq!(start.len(), MAX_RECORDED_RESULT_BYTES);
        // ... the one before the cap when the cap falls inside a character.
        let odd = format!("x{}", "é".repeat(MAX_RECORDED_RESULT_BYTES / 2 + 1));
        let Outcome::Truncated { start, bytes } =
            recorded_output(&ToolOutput::Text(odd.clone()), 0, &redactor)
        else {
            panic!("kept whole");
        };
        assert_eq!(start.len(), MAX_RECORDED_RESULT_BYTES - 1);
        assert_eq!(bytes, odd.len() as u64);
        // A JSON answer that is not UTF-8 is not kept as JSON, and its size is the bytes'.
        let mut bad = b"{\"t\":\"".to_vec();
        bad.extend([0xff, 0xfe]);
        bad.extend(b"\"}");
        let cut = recorded_output(&ToolOutput::Json(bad.clone()), 9, &redactor);
        assert_eq!(
            cut,
            Outcome::Truncated {
                bytes: bad.len() as u64,
                start: String::from_utf8_lossy(&bad).into_owned(),
            }
        );
    }

    #[test]
    fn run_files_of_one_millisecond_get_their_own_names() {
        let dir = std::env::temp_dir().join(format!("ptc-record-names-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let hash = "0123456789abcdef0123";
        let names: Vec<String> = (0..3)
            .map(|n| {
                let path = write_new(&dir, 1234, hash, format!("run {n}").as_bytes()).unwrap();
                assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("run {n}"));
                path.file_name().unwrap().to_string_lossy().into_owned()
            })
            .collect();
        assert_eq!(
            names,
            [
                "0000000001234-0123456789ab.json",
                "0000000001234-0123456789ab-1.json",
                "0000000001234-0123456789ab-2.json"
            ]
        );
        // A hundred names of one millisecond, then no more.
        for n in 3..100 {
            write_new(&dir, 1234, hash, b"run").unwrap_or_else(|e| panic!("name {n}: {e}"));
        }
        let e = write_new(&dir, 1234, hash, b"run").unwrap_err();
        assert_eq!(
            e,
            format!(
                "cannot create a new file 0000000001234-0123456789ab*.json in {}: too many",
                dir.display()
            )
        );
        // Another failure than a taken name is said at once.
        let gone = dir.join("gone");
        let e = write_new(&gone, 1234, hash, b"run").unwrap_err();
        assert!(
            e.starts_with(&format!("cannot create {}", gone.join(&names[0]).display())),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_record_dir_saves_each_run_as_a_run_file() {
        let dir = std::env::temp_dir().join(format!("ptc-record-dir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        block_on(async {
            let up = Arc::new(no_upstreams().await);
            let record = RecordDir::new(dir.clone(), StartSettings::default()).unwrap();
            let rec = record.recorder(&Limits::default());
            let run = Evaluated {
                program: "(+ 1 2)",
                tool: None,
                context: None,
                prints: "",
                result: &Ok(Value::Int(3)),
            };
            let saved = record.save(up, rec, run).await.expect("saved");
            assert_eq!(saved.parent(), Some(dir.as_path()));
            let file = RunFile::parse(&std::fs::read(&saved).unwrap(), "run.json").unwrap();
            assert_eq!(file.program, "(+ 1 2)");
            assert_eq!(file.tool, None, "a lisp_eval run names no program");
        });
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_argument_only_one_call_has_differs() {
        let mut more = args("a");
        more.insert("limit".into(), json!(5));
        assert_eq!(differing_keys(&args("a"), &more), "limit");
        assert_eq!(differing_keys(&more, &args("a")), "limit");
        assert_eq!(differing_keys(&args("a"), &args("b")), "id");
    }

    #[test]
    fn nested_numbers_match_by_value_too() {
        let one = |v: Json| -> Map<String, Json> { [("n".to_string(), v)].into_iter().collect() };
        let next = |x: f64| f64::from_bits(x.to_bits() + 1);
        assert!(same_args(
            &one(json!([0.3, 1])),
            &one(json!([next(0.3), 1.0]))
        ));
        assert!(!same_args(&one(json!([0.3])), &one(json!([0.3, 0.3]))));
        assert!(same_args(
            &one(json!({"x": {"y": 0.3}})),
            &one(json!({"x": {"y": next(0.3)}}))
        ));
        // The rounding step scales with the numbers.
        assert!(same_args(
            &one(json!(3000000.1)),
            &one(json!(next(3000000.1)))
        ));
        // Integers compare exactly, past where floats would round them together.
        assert!(!same_args(
            &one(json!(-9_007_199_254_740_993_i64)),
            &one(json!(-9_007_199_254_740_992_i64))
        ));
    }

    #[test]
    fn a_replay_runs_under_the_recorded_settings() {
        let limits = Limits {
            timeout: Some(std::time::Duration::from_millis(1500)),
            max_memory_bytes: 12_345_678,
            ..Limits::default()
        };
        let start = StartSettings {
            writes: WriteGate::Open,
            response_check: ResponseCheck::Full,
            strict_responses: true,
            consent: Default::default(),
        };
        let settings = Settings::new(&limits, start);
        let again = settings.limits();
        assert_eq!(again.timeout, limits.timeout);
        assert_eq!(again.max_memory_bytes, 12_345_678);
        let options = settings.start_options();
        assert_eq!(options.writes, WriteGate::Open);
        assert!(options.strict_responses);
        assert_eq!(options.response_check, ResponseCheck::Full);
        // A replay contacts no upstream at start.
        assert!(matches!(options.catalog, CatalogLoad::OnFirstUse));
        let closed = Settings::new(&Limits::default(), StartSettings::default());
        let options = closed.start_options();
        assert_eq!(options.writes, WriteGate::Closed);
        assert!(!options.strict_responses);
    }

    #[test]
    fn the_host_notes_its_budgets_in_the_run_file() {
        block_on(async {
            let up = no_upstreams().await;
            let rec = Recorder::new(Settings::new(&Limits::default(), StartSettings::default()));
            rec.note_budgets(&Budgets {
                max_calls: 5,
                max_discovery: 6,
                max_bytes: 7,
                ..Budgets::default()
            });
            let file = rec.run_file(
                &up,
                "1",
                None,
                "",
                Answer::Value {
                    text: "1".into(),
                    json: None,
                },
            );
            let s = &file.settings;
            assert_eq!(
                (s.max_calls, s.max_discovery, s.max_upstream_bytes),
                (5, 6, 7)
            );
            // A replay runs under the budgets the recording noted.
            let replayed = s.budgets();
            assert_eq!(
                (
                    replayed.max_calls,
                    replayed.max_discovery,
                    replayed.max_bytes
                ),
                (5, 6, 7)
            );
        });
    }

    #[test]
    fn the_recorded_context_is_decoded_for_the_replay() {
        block_on(async {
            let up = no_upstreams().await;
            let rec = Recorder::new(Settings::new(&Limits::default(), StartSettings::default()));
            let answer = || Answer::Value {
                text: "1".into(),
                json: None,
            };
            let with = rec.run_file(&up, "1", Some(r#"{"orgs":["org_acme"]}"#), "", answer());
            let value = with
                .context_value(&Limits::default())
                .unwrap()
                .expect("a context");
            assert_eq!(value.to_json_string().unwrap(), r#"{"orgs":["org_acme"]}"#);
            let without = rec.run_file(&up, "1", None, "", answer());
            assert!(without.context_value(&Limits::default()).unwrap().is_none());
        });
    }

    /// A process without upstreams.
    async fn no_upstreams() -> Upstreams {
        Upstreams::start(
            ptc_plan::Plan::default(),
            Default::default(),
            StartOptions::default(),
        )
        .await
        .unwrap()
    }

    /// The upstreams of `config`, listed on first use; an OpenAPI upstream's document has one
    /// operation, `one`.
    async fn upstreams_of(config: Json) -> Upstreams {
        struct Document;
        impl ptc_plan::DocumentSource for Document {
            fn fetch(&self, _: &ptc_plan::DocumentRequest) -> Result<Vec<u8>, String> {
                Ok(
                    json!({"openapi": "3.0.3", "info": {"title": "t", "version": "1"},
                    "paths": {"/one": {"get": {"operationId": "one",
                        "responses": {"200": {"description": "ok"}}}}}})
                    .to_string()
                    .into_bytes(),
                )
            }
        }
        let loaded = ptc_plan::load_str(
            &config.to_string(),
            std::path::Path::new("/replay-test/upstreams.json"),
            &Document,
        )
        .unwrap_or_else(|d| panic!("{d}"));
        let options = StartOptions {
            catalog: CatalogLoad::OnFirstUse,
            ..StartOptions::default()
        };
        Upstreams::start(loaded.plan, loaded.secrets, options)
            .await
            .unwrap()
    }

    #[test]
    fn a_credential_no_call_used_is_masked_in_the_run_file() {
        let secret = "file-secret-never-recorded-7c1d";
        let path = std::env::temp_dir().join(format!("ptc-recording-{}.token", std::process::id()));
        std::fs::write(&path, secret).unwrap();
        block_on(async {
            let up = upstreams_of(json!({
                "credentials": {"tok": {"source": "file", "path": path}},
                "upstreams": {"api": {"transport": "openapi", "base_url": "http://127.0.0.1:9",
                    "allow_insecure_http": true, "allow_insecure_auth": true,
                    "schema_file": "/replay-test/openapi.json", "include_operations": ["one"],
                    "auth": [{"scheme": "bearer", "binding": "tok"}]}},
            }))
            .await;
            let rec = Recorder::new(Settings::new(&Limits::default(), StartSettings::default()));
            let answer = Answer::Value {
                text: "1".into(),
                json: None,
            };
            let file = rec.run_file(&up, &format!("(str \"{secret}\")"), None, "", answer);
            let text = String::from_utf8(file.to_json().unwrap()).unwrap();
            assert!(!text.contains(secret), "{text}");
            assert!(
                file.program.contains(crate::credentials::redact::MASK),
                "{}",
                file.program
            );
        });
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn only_an_mcp_upstream_that_cannot_be_listed_makes_a_replay_diverge() {
        block_on(async {
            let up = upstreams_of(json!({"upstreams": {
                "gone": {"transport": "mcp_stdio", "command": "/nonexistent/ptc-mcp-server"},
                "api": {"transport": "openapi", "base_url": "http://127.0.0.1:9",
                    "allow_insecure_http": true, "schema_file": "/replay-test/openapi.json",
                    "include_operations": ["one"]},
            }}))
            .await;
            let failed = |reason| ToolError {
                reason,
                message: "the upstream did not answer".into(),
            };
            let tape = Tape::Replay(two());
            let diverged = tape
                .unlisted(&up, "gone", &failed(Reason::UpstreamUnavailable))
                .expect("the replay cannot check the call");
            assert!(
                diverged
                    .message
                    .contains("MCP upstream `gone`, whose tools could not be listed"),
                "{diverged:?}"
            );
            // The program's own mistakes and refusals are the replay's answer as they were.
            for own in [
                Reason::InvalidArgs,
                Reason::WriteDisabled,
                Reason::ToolChanged,
            ] {
                assert!(
                    tape.unlisted(&up, "gone", &failed(own)).is_none(),
                    "{own:?}"
                );
            }
            // An OpenAPI upstream's tools are in the config.
            assert!(
                tape.unlisted(&up, "api", &failed(Reason::UpstreamUnavailable))
                    .is_none()
            );
            assert!(
                Tape::Off
                    .unlisted(&up, "gone", &failed(Reason::UpstreamUnavailable))
                    .is_none()
            );
            up.shutdown().await;
        });
    }

    #[test]
    fn only_a_call_out_of_the_programs_time_is_recorded_unfinished() {
        let rec = Recorder::new(Settings::new(&Limits::default(), StartSettings::default()));
        let timeout = || ToolError {
            reason: Reason::Timeout,
            message: "the upstream took too long".into(),
        };
        let passed = Some(Instant::now());
        let ahead = Some(Instant::now() + std::time::Duration::from_secs(60));
        let record = |e: ToolError, deadline: Option<Instant>| {
            let i = rec.begin("observatory", "get-trace", &args("a"));
            TapeCall::Record(rec.clone(), i).executed(&Err(e), deadline, &Redactor::new());
            rec.lock().calls[i].outcome.clone().unwrap()
        };
        assert_eq!(record(timeout(), passed), Outcome::Unfinished);
        // The call's own timeout, with time left for the program: an error the replay repeats.
        let own = Outcome::Error {
            reason: Reason::Timeout,
            message: "the upstream took too long".into(),
        };
        assert_eq!(record(timeout(), ahead), own);
        assert_eq!(record(timeout(), None), own);
        // Another error when the time is up is that error.
        let refused = ToolError {
            reason: Reason::UpstreamError,
            message: "500".into(),
        };
        assert_eq!(
            record(refused, passed),
            Outcome::Error {
                reason: Reason::UpstreamError,
                message: "500".into(),
            }
        );
    }

    #[test]
    fn replaying_a_truncated_result_is_an_error_naming_the_call() {
        let mut big = answered("get-trace-steps", "a", "");
        big.outcome = Outcome::Truncated {
            bytes: 2_000_000,
            start: "{\"steps\":[".into(),
        };
        let r = Replayer::new(&[big]);
        let call = r
            .take("observatory", "get-trace-steps", &args("a"))
            .unwrap();
        let Err(e) = block_on(call.answer(None)) else {
            panic!("answered");
        };
        let expected = "call 1 (observatory/get-trace-steps \
                        {\"org_id\":\"org_acme\",\"id\":\"a\"}, recorded as call 1) cannot be \
                        replayed: its result was 2000000 bytes, more than the 1048576 a run file \
                        keeps, so the recording has only its start";
        assert_eq!(r.divergence().as_deref(), Some(expected));
        assert_eq!(e.reason, Reason::InvalidArgs);
    }

    #[test]
    fn recorded_errors_refusals_and_approvals_are_replayed() {
        let mut failed = answered("get-trace", "a", "");
        failed.outcome = Outcome::Error {
            reason: Reason::NotFound,
            message: "observatory/get-trace: no trace a".into(),
        };
        let mut forbidden = answered("get-trace", "b", "");
        forbidden.outcome = Outcome::NotSent {
            reason: Reason::Forbidden,
            message: "policy rule `x` does not allow it".into(),
        };
        let mut declined = answered("annotate-trace", "a", "");
        declined.approval = Some(ApprovalOutcome::Declined);
        declined.outcome = Outcome::NotSent {
            reason: Reason::ApprovalDeclined,
            message: "not called: no".into(),
        };
        let approved = RecordedCall {
            approval: Some(ApprovalOutcome::Approved),
            ..answered("annotate-trace", "b", "{}")
        };
        let no_decision = answered("annotate-trace", "c", "{}");
        let r = Replayer::new(&[failed, forbidden, declined, approved, no_decision]);
        let TapeCall::Replay(c) = tape_call(&r, "get-trace", "a") else {
            unreachable!()
        };
        let e = block_on(c.answer(None)).err().unwrap();
        assert_eq!(
            (e.reason, e.message.as_str()),
            (Reason::NotFound, "observatory/get-trace: no trace a")
        );
        let refused = tape_call(&r, "get-trace", "b").policy_refusal().unwrap();
        assert_eq!(refused.reason, Reason::Forbidden);
        let declined = tape_call(&r, "annotate-trace", "a").recorded_approval();
        let Some(Err((e, outcome))) = declined else {
            panic!("not declined");
        };
        assert_eq!(outcome, ApprovalOutcome::Declined);
        assert_eq!(
            (e.reason, e.message.as_str()),
            (Reason::ApprovalDeclined, "not called: no")
        );
        let approved = tape_call(&r, "annotate-trace", "b");
        assert!(matches!(approved.recorded_approval(), Some(Ok(()))));
        assert!(approved.policy_refusal().is_none());
        assert_eq!(r.divergence(), None);
        let asked = tape_call(&r, "annotate-trace", "c").recorded_approval();
        assert!(matches!(
            asked,
            Some(Err((_, ApprovalOutcome::Unavailable)))
        ));
        assert!(r.divergence().unwrap().ends_with(
            "recorded as call 5) needs a person's approval, and the recording has no \
                 decision for it"
        ));
    }

    #[test]
    fn a_call_in_flight_when_the_time_ran_out_times_out_at_the_replays_deadline() {
        let mut waiting = answered("get-trace", "a", "");
        waiting.outcome = Outcome::Unfinished;
        let r = Replayer::new(&[waiting.clone(), waiting]);
        let call = r.take("observatory", "get-trace", &args("a")).unwrap();
        let deadline = Instant::now() + std::time::Duration::from_millis(20);
        let e = block_on(call.answer(Some(deadline))).err().unwrap();
        assert!(Instant::now() >= deadline);
        assert_eq!(
            (e.reason, e.message.as_str()),
            (
                Reason::Timeout,
                "observatory/get-trace: the program's time ran out during the call"
            )
        );
        assert_eq!(r.divergence(), None);
        // Without a time limit there is nothing to stop at.
        let call = r.take("observatory", "get-trace", &args("a")).unwrap();
        assert!(block_on(call.answer(None)).is_err());
        assert!(
            r.divergence()
                .unwrap()
                .ends_with("was still in flight when the recorded program stopped, and this replay has no time limit to stop at")
        );
    }

    fn tape_call(r: &Replayer, tool: &str, id: &str) -> TapeCall {
        Tape::Replay(r.clone())
            .begin("observatory", tool, &args(id), &Redactor::new())
            .unwrap()
    }

    #[test]
    fn numbers_match_by_value_and_floats_within_a_rounding_step() {
        let one = |v: Json| -> Map<String, Json> { [("n".to_string(), v)].into_iter().collect() };
        assert!(same_args(&one(json!(1)), &one(json!(1.0))));
        assert!(same_args(
            &one(json!(0.1 + 0.2)),
            &one(json!(0.30000000000000004))
        ));
        let next = f64::from_bits(0.3f64.to_bits() + 1);
        assert!(same_args(&one(json!(0.3)), &one(json!(next))));
        assert!(!same_args(&one(json!(0.3)), &one(json!(0.3001))));
        assert!(!same_args(&one(json!(u64::MAX)), &one(json!(u64::MAX - 1))));
        assert!(!same_args(&one(json!("1")), &one(json!(1))));
        assert!(!same_args(&one(json!([1, 2])), &one(json!([2, 1]))));
    }

    #[test]
    fn a_recorded_run_masks_every_secret_and_reads_back() {
        block_on(async {
            let redactor = Redactor::new();
            let options = StartOptions {
                redactor: Some(redactor.clone()),
                ..StartOptions::default()
            };
            let up = Upstreams::start(ptc_plan::Plan::default(), Default::default(), options)
                .await
                .unwrap();
            let secret = "s3cr3t-token-value";
            redactor.register(secret);
            let rec = Recorder::new(Settings::new(&Limits::default(), StartSettings::default()));
            let mut secret_args = args(secret);
            secret_args.insert(secret.into(), json!([secret]));
            let i = rec.begin("observatory", "get-trace", &secret_args);
            TapeCall::Record(rec.clone(), i).executed(
                &Ok(Executed {
                    output: ToolOutput::Json(format!("{{\"t\":\"{secret}\"}}").into_bytes()),
                    bytes: 30,
                }),
                None,
                &Redactor::new(),
            );
            let j = rec.begin("observatory", "get-trace", &args("b"));
            TapeCall::Record(rec.clone(), j).end::<()>(&Err(ToolError {
                reason: Reason::CapExhausted,
                message: format!("budget spent ({secret})"),
            }));
            // A call still in flight when the run ends.
            rec.begin("observatory", "get-trace", &args("c"));
            let answer = Answer::Value {
                text: format!("\"{secret}\""),
                json: Some(json!({ "k": secret })),
            };
            let file = rec.run_file(
                &up,
                &format!("(str \"{secret}\")"),
                Some(&format!("{{\"x\":\"{secret}\"}}")),
                &format!("{secret}\n"),
                answer,
            );
            let bytes = file.to_json().unwrap();
            let text = String::from_utf8(bytes.clone()).unwrap();
            assert!(!text.contains(secret), "{text}");
            assert_eq!(
                text.matches(crate::credentials::redact::MASK).count(),
                10,
                "{text}"
            );
            let back = RunFile::parse(&bytes, "run.json").unwrap();
            assert_eq!(back, file);
            assert_eq!(
                back.calls[1].outcome,
                Outcome::NotSent {
                    reason: Reason::CapExhausted,
                    message: "budget spent ([REDACTED])".into(),
                }
            );
            assert_eq!(back.calls[2].outcome, Outcome::Unfinished);
        });
    }

    #[test]
    fn run_files_of_another_format_or_malformed_are_refused_naming_what() {
        let err = |text: &str| RunFile::parse(text.as_bytes(), "run.json").unwrap_err();
        assert_eq!(
            err("{\"format\": 2}"),
            format!(
                "run.json is a run file of format 2; this ptc ({}) reads format 1 only: replay \
                 it with the ptc that recorded it, or record it again",
                env!("CARGO_PKG_VERSION")
            )
        );
        assert_eq!(
            err("[1]"),
            "run.json is not a run file: it has no \"format\" field"
        );
        assert!(err("{\"format\": 1").starts_with("run.json is not a run file: it is not JSON ("));
        assert!(
            err("{\"format\": 1}")
                .starts_with("run.json is not a valid run file of format 1: missing field")
        );
        let rec = Recorder::new(Settings::new(&Limits::default(), StartSettings::default()));
        let file = RunFile {
            format: FORMAT,
            ptc_version: "0".into(),
            program: "(+ 1 2)".into(),
            tool: None,
            context: None,
            settings: rec.lock().settings.clone(),
            calls: vec![answered("get-trace", "a", "{}")],
            prints: String::new(),
            answer: Answer::Error {
                reason: ptc_lisp::Reason::Fail,
                message: "fail: 1".into(),
            },
        };
        // A run file written by hand, or by a ptc with other names: each unknown name is an
        // error naming the field it is in.
        let good: Json = serde_json::from_slice(&file.to_json().unwrap()).unwrap();
        let parsed = |edit: &dyn Fn(&mut Json)| {
            let mut text = good.clone();
            edit(&mut text);
            RunFile::parse(&serde_json::to_vec(&text).unwrap(), "run.json")
        };
        assert_eq!(parsed(&|_| {}), Ok(file));
        let approval = |name: &'static str| {
            parsed(&move |f: &mut Json| f["calls"][0]["approval"] = json!(name))
        };
        assert_eq!(
            approval("declined").unwrap().calls[0].approval,
            Some(ApprovalOutcome::Declined)
        );
        assert_eq!(
            approval("maybe").unwrap_err(),
            "run.json is not a valid run file of format 1: calls[0].approval: unknown approval \
             `maybe` (approved, declined or unavailable)"
        );
        let outcome = |kind: &'static str, reason: &'static str| {
            parsed(&move |f: &mut Json| {
                f["calls"][0]["outcome"] = json!({"kind": kind, "reason": reason, "message": ""})
            })
        };
        assert_eq!(
            outcome("not_sent", "forbidden").unwrap().calls[0].outcome,
            Outcome::NotSent {
                reason: Reason::Forbidden,
                message: String::new()
            }
        );
        assert_eq!(
            outcome("error", "gone_fishing").unwrap_err(),
            "run.json is not a valid run file of format 1: calls[0].outcome: unknown reason \
             `gone_fishing`"
        );
        assert_eq!(
            outcome("not_sent", "Forbidden").unwrap_err(),
            "run.json is not a valid run file of format 1: calls[0].outcome: unknown reason \
             `Forbidden`",
            "spelled exactly"
        );
        assert_eq!(
            parsed(&|f| f["settings"]["response_check"] = json!("sometimes")).unwrap_err(),
            "run.json is not a valid run file of format 1: settings.response_check: response \
             check `sometimes`: use off, sampled or full"
        );
        assert_eq!(
            parsed(&|f| f["answer"]["reason"] = json!("gone_fishing")).unwrap_err(),
            "run.json is not a valid run file of format 1: answer: unknown reason \
             `gone_fishing` of a program's error"
        );
    }

    #[test]
    fn the_answer_and_the_prints_are_compared() {
        let file = RunFile {
            format: FORMAT,
            ptc_version: "0".into(),
            program: String::new(),
            tool: None,
            context: None,
            settings: Settings::new(&Limits::default(), StartSettings::default()),
            calls: Vec::new(),
            prints: "hi\n".into(),
            answer: Answer::Value {
                text: "3".into(),
                json: Some(json!(3)),
            },
        };
        let three = Answer::Value {
            text: "3".into(),
            json: Some(json!(3)),
        };
        assert_eq!(answer_difference(&file, &three, "hi\n"), None);
        let four = Answer::Value {
            text: "4".into(),
            json: Some(json!(4)),
        };
        assert_eq!(
            answer_difference(&file, &four, "hi\n").as_deref(),
            Some("the answer differs: the recording has the value 3, the replay gave the value 4")
        );
        let failed = Answer::Error {
            reason: ptc_lisp::Reason::Fail,
            message: "fail: 3".into(),
        };
        assert_eq!(
            answer_difference(&file, &failed, "hi\n").as_deref(),
            Some(
                "the answer differs: the recording has the value 3, the replay gave the error \
                 fail: 3"
            )
        );
        assert_eq!(
            answer_difference(&file, &three, "ho\n").as_deref(),
            Some(
                "the answer is the same, but the printed output differs: the recording printed \
                 \"hi\\n\", the replay \"ho\\n\""
            )
        );
    }
}
