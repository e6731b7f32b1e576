//! `generated-example demo`: the README's main job. Starts the Observatory test bed in-process
//! on loopback with a freshly generated token (written to a private file the upstream's
//! credential is pointed at), then answers representative agent questions with PTC-Lisp
//! programs through the same evaluator MCP clients use, printing each program, its answer, the
//! upstream calls and the payload reduction. The last question writes: the process runs with
//! its write gate open, a person approves the call, and the audit trail shows what happened.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use observatory_server::{ServerConfig, TokenSource, TokenSpec};
use ptc::PlanSource;
use ptc::app::args::OverrideArgs;
use ptc::core::call::approval::{ApprovalRequest, Approver, Decision, DecisionFuture};
use ptc::core::server::{EvalLimits, EvalRequest, Evaluator, envelope, programs};
use ptc::serde_json::{Map, Value};

/// One agent question: what it asks, the program, the context it gets.
pub struct Question {
    /// The question in words.
    pub title: &'static str,
    /// The declared program (a tool of the host) that answers it, when one does: its file is
    /// the program below.
    pub tool: Option<&'static str>,
    /// The PTC-Lisp program an agent would send.
    pub program: &'static str,
    /// `data/<key>` values: the program's arguments.
    pub context: fn(&observatory_server::ServerHandle) -> Map<String, Value>,
}

/// The org every question is about.
const ORG: &str = "org_acme";

fn org(_: &observatory_server::ServerHandle) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("org_id".into(), Value::String(ORG.into()));
    m
}

fn october(h: &observatory_server::ServerHandle) -> Map<String, Value> {
    let mut m = org(h);
    m.insert("since".into(), Value::String("2026-10-01T00:00:00Z".into()));
    m.insert("until".into(), Value::String("2026-11-01T00:00:00Z".into()));
    m
}

fn newest_eight(h: &observatory_server::ServerHandle) -> Map<String, Value> {
    let mut m = org(h);
    m.insert("limit".into(), Value::from(8));
    m
}

fn no_context(_: &observatory_server::ServerHandle) -> Map<String, Value> {
    Map::new()
}

/// A failed trace of org_acme with a few steps, and its external (W3C) id, from the data set.
fn a_failed_trace(h: &observatory_server::ServerHandle) -> Map<String, Value> {
    let mut m = org(h);
    if let Some(t) = h
        .dataset()
        .traces()
        .iter()
        .find(|t| t.org == ORG && t.status.as_str() == "error")
    {
        m.insert("trace_id".into(), Value::String(t.id.clone()));
        m.insert("external_id".into(), Value::String(t.external_id.clone()));
    }
    m
}

/// `a_failed_trace` without the trace id (the question that finds it by its external id).
fn an_external_id(h: &observatory_server::ServerHandle) -> Map<String, Value> {
    let mut m = a_failed_trace(h);
    m.remove("trace_id");
    m
}

/// `a_failed_trace` without the external id.
fn a_trace_id(h: &observatory_server::ServerHandle) -> Map<String, Value> {
    let mut m = a_failed_trace(h);
    m.remove("external_id");
    m
}

/// The questions, in the order the demo asks them. The read ones are the deployment's declared
/// programs (fixtures/observatory/programs), checked at build time against the Observatory's
/// operations.
pub const QUESTIONS: &[Question] = &[
    Question {
        title: "Which error classes caused org_acme's recent failures?",
        tool: Some("errors-by-class"),
        program: include_str!("../../fixtures/observatory/programs/errors-by-class.clj"),
        context: org,
    },
    Question {
        title: "What did org_acme spend per model in October 2026?",
        tool: Some("costs-by-model"),
        program: include_str!("../../fixtures/observatory/programs/costs-by-model.clj"),
        context: october,
    },
    Question {
        title: "Which run reported this external trace id?",
        tool: Some("trace-by-external-id"),
        program: include_str!("../../fixtures/observatory/programs/trace-by-external-id.clj"),
        context: an_external_id,
    },
    Question {
        title: "How did that failed run go, and what did its first failing step return?",
        tool: Some("failed-run"),
        program: include_str!("../../fixtures/observatory/programs/failed-run.clj"),
        context: a_trace_id,
    },
    Question {
        title: "Across org_acme's 8 newest failed runs, which steps failed? (pmap fan-out)",
        tool: Some("failed-steps"),
        program: include_str!("../../fixtures/observatory/programs/failed-steps.clj"),
        context: newest_eight,
    },
    Question {
        title: "Flag org_acme's newest failed run for review (a write: a person approves it)",
        tool: None,
        program: r#"(let [t (first (:value (tool/call 'observatory/list-traces
                                              {:org-id "org_acme" :status "error" :limit 1})))
      w (tool/call 'observatory/annotate-trace
                   {:org-id "org_acme" :id (:id t)
                    :body {:label "needs-review" :note (str "failed with " (:error_class t))}})
      after (tool/call 'observatory/get-trace {:org-id "org_acme" :id (:id t)})]
  {:trace (:id t)
   :write (select-keys w [:ok :reason :mutation_state])
   :labels-now (into [] (map :label (:annotations (:value after))))})"#,
        context: no_context,
    },
];

/// The person the demo asks: shows what they would see in their MCP client, then answers yes
/// (asked on the terminal when there is one).
struct DemoPerson;

impl Approver for DemoPerson {
    fn approve(&self, request: ApprovalRequest, wait: Duration) -> DecisionFuture {
        Box::pin(async move {
            println!(
                "approval asked (an MCP client shows this to its user, who has {} s):",
                wait.as_secs()
            );
            for line in request.message().lines() {
                println!("  | {line}");
            }
            if !std::io::stdin().is_terminal() {
                println!("  -> approved (the demo answers yes when it has no terminal)");
                return Decision::Approved;
            }
            print!("  approve? [y/N] ");
            let _ = std::io::stdout().flush();
            let line = tokio::task::spawn_blocking(|| {
                let mut line = String::new();
                std::io::stdin().read_line(&mut line).map(|_| line)
            })
            .await;
            match line {
                Ok(Ok(l)) if l.trim().eq_ignore_ascii_case("y") => Decision::Approved,
                _ => Decision::Declined("the person answered no".into()),
            }
        })
    }
}

/// A random 32-byte hex token from the OS-seeded hasher state (no extra dependency).
fn generate_token() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::from("obs_demo_");
    for i in 0..4u64 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(i);
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out
}

/// Writes `token` to a new file only this user can read.
fn write_token_file(token: &str) -> Result<PathBuf, String> {
    let path = std::env::temp_dir().join(format!("ptc-demo-{}.token", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut f = options
        .open(&path)
        .map_err(|e| format!("cannot write the token file {}: {e}", path.display()))?;
    f.write_all(token.as_bytes())
        .map_err(|e| format!("cannot write the token file {}: {e}", path.display()))?;
    Ok(path)
}

fn bytes(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / (1 << 20) as f64)
    } else if n >= 1 << 10 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} B")
    }
}

/// Runs the demo against `source` (the Observatory deployment).
pub fn run(source: PlanSource) -> ExitCode {
    match run_inner(source) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("generated-example demo: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_inner(source: PlanSource) -> Result<(), String> {
    let rt = ptc::app::start::runtime()?;
    let token = generate_token();
    let token_file = write_token_file(&token)?;
    let result = rt.block_on(async {
        // The demo's token may read everything and annotate traces (the one write).
        let mut spec = TokenSpec::full_access("tok_demo", &token);
        spec.scopes.push("traces:write".into());
        let config = ServerConfig::new(TokenSource::Inline(vec![spec]));
        let (addr, observatory) = observatory_server::start(config)
            .await
            .map_err(|e| format!("cannot start the Observatory test bed: {e}"))?;
        println!(
            "Observatory test bed listening on http://{addr} (token in {})",
            token_file.display()
        );
        let overrides = OverrideArgs {
            upstream_urls: vec![format!("observatory=http://{addr}")],
            credential_files: vec![format!("observatory-token={}", token_file.display())],
            allow_writes: true,
            ..OverrideArgs::default()
        };
        let upstreams =
            ptc::app::start::upstreams(&source, &overrides, overrides.start_settings()?).await?;
        // Time for a person at the terminal to read and answer the approval.
        let limits = EvalLimits {
            program_timeout: Duration::from_secs(60),
            ..EvalLimits::default()
        };
        let evaluator = Evaluator::new(
            upstreams.clone(),
            tokio::runtime::Handle::current(),
            limits,
        )?;
        let mut failures = 0;
        let mut audited: Vec<String> = Vec::new();
        let mut answers: Vec<Option<String>> = Vec::new();
        for (i, q) in QUESTIONS.iter().enumerate() {
            let context = (q.context)(&observatory);
            println!("\n── {}. {}", i + 1, q.title);
            if !context.is_empty() {
                println!("context: {}", Value::Object(context.clone()));
            }
            match q.tool {
                Some(tool) => println!("program (the deployment's tool `{tool}`):"),
                None => println!("program:"),
            }
            for line in q.program.lines() {
                println!("  {line}");
            }
            let req = EvalRequest {
                program: q.program.to_string(),
                context: (!context.is_empty()).then_some(context),
                output_schema: None,
                ..EvalRequest::default()
            };
            let outcome = evaluator
                .eval_within(
                    req,
                    Default::default(),
                    evaluator.wait_until(),
                    Some(Arc::new(DemoPerson)),
                )
                .await;
            answers.push(outcome.result.as_ref().ok().map(|v| v.text.clone()));
            match &outcome.result {
                Ok(v) => println!("answer:\n  {}", envelope::bounded(&v.text, 4096)),
                Err(e) => {
                    failures += 1;
                    println!("error: {}: {}", e.reason, e.message);
                }
            }
            println!("upstream calls:");
            for c in &outcome.records.upstream_calls {
                let write = c.write.map_or(String::new(), |w| {
                    format!(
                        " [{}, approval {}, {}]",
                        w.effect.as_str(),
                        w.approval.map_or("not asked", |a| a.as_str()),
                        w.mutation_state.map_or("not sent", |m| m.as_str())
                    )
                });
                println!(
                    "  {}/{} {} {} ms {}{write}",
                    c.server,
                    c.tool,
                    c.reason.map_or(c.status(), |r| r.as_str()),
                    c.duration_ms,
                    bytes(c.result_bytes)
                );
            }
            let writes: Vec<_> = observatory
                .audit_records()
                .into_iter()
                .filter(|r| r.method == "POST" && !audited.contains(&r.request_id))
                .collect();
            for r in &writes {
                println!(
                    "Observatory audit log: {} {} -> {} {}, annotation {}, token {}, idempotency key {}",
                    r.method,
                    r.path,
                    r.status,
                    r.outcome,
                    r.annotation_id.as_deref().unwrap_or("-"),
                    r.token_id.as_deref().unwrap_or("-"),
                    r.idempotency_key.as_deref().unwrap_or("-"),
                );
                audited.push(r.request_id.clone());
            }
            let m = &outcome.records.ptc_metrics;
            println!(
                "payload: {} from upstreams -> {} answer{}",
                bytes(m.upstream_result_bytes),
                bytes(m.final_result_bytes),
                m.payload_reduction_ratio
                    .map(|r| format!(" ({r}x smaller)"))
                    .unwrap_or_default()
            );
        }
        failures += as_a_tool(&evaluator, &observatory, &answers).await;
        upstreams.shutdown().await;
        observatory.shutdown().await;
        if failures > 0 {
            return Err(format!("{failures} question(s) failed"));
        }
        println!(
            "\nEvery answer came from one program run. Serve the same to an MCP client with \
             `cargo run -p generated-example -- serve` (see docs/getting-started.md): lisp_eval, \
             and each read question as a tool of its own."
        );
        Ok(())
    });
    let _ = std::fs::remove_file(&token_file);
    result
}

/// The first question again, as an MCP client calls the deployment's tool for it (`tools/call`
/// of `errors-by-class` with its arguments): the host's own path for a program tool. Counts a
/// failure when its answer is not question 1's.
async fn as_a_tool(
    evaluator: &Evaluator,
    observatory: &observatory_server::ServerHandle,
    answers: &[Option<String>],
) -> usize {
    let q = &QUESTIONS[0];
    let Some(tool) = q.tool else {
        return 0;
    };
    let args = (q.context)(observatory);
    println!(
        "\n── The first question again, called as the tool `{tool}` (tools/call with {})",
        Value::Object(args.clone())
    );
    let caller = ptc::core::credentials::identity::Caller::default();
    let req = match programs::request_for(evaluator, &caller, tool, Some(args)) {
        Ok(req) => req,
        Err(e) => {
            println!("error: {e:?}");
            return 1;
        }
    };
    let outcome = evaluator
        .eval_within(req, Default::default(), evaluator.wait_until(), None)
        .await;
    match &outcome.result {
        Ok(v) if answers.first().cloned().flatten().as_deref() == Some(v.text.as_str()) => {
            println!(
                "answer (the same as question 1's):\n  {}",
                envelope::bounded(&v.text, 4096)
            );
            0
        }
        Ok(v) => {
            println!(
                "answer, not question 1's:\n  {}",
                envelope::bounded(&v.text, 4096)
            );
            1
        }
        Err(e) => {
            println!("error: {}: {}", e.reason, e.message);
            1
        }
    }
}
