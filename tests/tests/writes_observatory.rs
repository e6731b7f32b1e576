//! Writes against the real Observatory test bed: the write gate, approval (a person's answer
//! through the [`Approver`] a host plugs in; the MCP elicitation path is tested with a real
//! client in `host_approval.rs`), idempotency keys, never retrying a write, and the
//! indeterminate outcome of a write whose answer never came.

mod support;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use observatory_server::{ServerConfig, ServerHandle, TokenSource, TokenSpec};
use ptc_core::call::approval::{ApprovalRequest, Approver, Decision, DecisionFuture};
use ptc_core::{Budgets, ProgramHost, StartOptions, Upstreams, WriteGate};
use ptc_lisp::{Interpreter, Limits};
use ptc_plan::{Approval, CredentialSource, Plan, Transport};

const TOKEN: &str = "obs_writes_full_3e9d1c7a";
/// A trace of org_acme in the test bed's dataset.
const TRACE: &str =
    "(-> (tool/call 'observatory/list-traces {:org-id \"org_acme\" :limit 1}) :value first :id)";

struct Bed {
    rt: tokio::runtime::Runtime,
    server: Option<ServerHandle>,
    token_file: PathBuf,
    up: Arc<Upstreams>,
}

impl Drop for Bed {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            self.rt.block_on(s.shutdown());
        }
        let _ = std::fs::remove_file(&self.token_file);
    }
}

/// The test bed and the fixture config's upstreams, with `gate`; `tweak` may change the plan.
fn bed(name: &str, gate: WriteGate, tweak: impl FnOnce(&mut Plan)) -> Bed {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut token = TokenSpec::full_access("tok_writes", TOKEN);
    token.scopes.push("traces:write".into());
    let mut config = ServerConfig::new(TokenSource::Inline(vec![token]));
    config.test_mode = true;
    let (addr, server) = rt
        .block_on(observatory_server::start(config))
        .expect("observatory starts");
    let (mut loaded, token_file) =
        support::observatory_plan(addr, TOKEN, &format!("writes-{name}"));
    tweak(&mut loaded.plan);
    let options = StartOptions {
        writes: gate,
        ..StartOptions::default()
    };
    let up = rt
        .block_on(Upstreams::start(loaded.plan, loaded.secrets, options))
        .unwrap();
    Bed {
        rt,
        server: Some(server),
        token_file,
        up: Arc::new(up),
    }
}

fn observatory(plan: &mut Plan) -> &mut ptc_plan::OpenApiPlan {
    match &mut plan.upstreams[0].transport {
        Transport::Openapi(api) => api,
        _ => unreachable!(),
    }
}

/// A person who answers `answer` and remembers what they were asked.
struct Person {
    answer: Decision,
    asked: Mutex<Vec<(ApprovalRequest, Duration)>>,
}

impl Person {
    fn answering(answer: Decision) -> Arc<Person> {
        Arc::new(Person {
            answer,
            asked: Mutex::new(Vec::new()),
        })
    }

    fn asked(&self) -> Vec<(ApprovalRequest, Duration)> {
        self.asked.lock().unwrap().clone()
    }
}

impl Approver for Person {
    fn approve(&self, request: ApprovalRequest, wait: Duration) -> DecisionFuture {
        self.asked.lock().unwrap().push((request, wait));
        Box::pin(std::future::ready(self.answer.clone()))
    }
}

struct Run {
    value: String,
    calls: serde_json::Value,
}

impl Bed {
    /// Runs `src` (suspendable, as the server does) with `approver` answering for the person.
    fn run(&self, src: &str, approver: Option<Arc<dyn Approver>>) -> Run {
        self.run_with(src, approver, Duration::from_secs(30))
    }

    /// [`Bed::run`] with nobody but the deployment to ask, who has `wait` to answer.
    fn run_waiting(&self, src: &str, wait: Duration) -> Run {
        self.run_with(src, None, wait)
    }

    fn run_with(&self, src: &str, approver: Option<Arc<dyn Approver>>, wait: Duration) -> Run {
        let budgets = Budgets {
            approval_wait: wait,
            ..Budgets::default()
        };
        let host = Arc::new(match approver {
            Some(a) => {
                ProgramHost::with_approver(self.up.clone(), self.rt.handle().clone(), budgets, a)
            }
            None => ProgramHost::new(self.up.clone(), self.rt.handle().clone(), budgets),
        });
        let mut interp = Interpreter::with_host(Limits::default(), host.clone());
        let result = self
            .rt
            .block_on(interp.eval_async(src, std::future::pending::<ptc_lisp::Reason>()));
        let value = match &result {
            Ok(v) => v.to_string(),
            Err(e) => panic!("{src}: {e}"),
        };
        let records = host.records(result.as_ref().ok());
        Run {
            value,
            calls: serde_json::to_value(&records.upstream_calls).unwrap(),
        }
    }

    fn server(&self) -> &ServerHandle {
        self.server.as_ref().unwrap()
    }

    /// The POSTs the test bed received.
    fn posts(&self) -> Vec<observatory_server::AuditRecord> {
        self.server()
            .audit_records()
            .into_iter()
            .filter(|r| r.method == "POST")
            .collect()
    }
}

fn annotate(label: &str) -> String {
    format!(
        "(let [id {TRACE}
               r (tool/call 'observatory/annotate-trace
                            {{:id id :org-id \"org_acme\" :body {{:label \"{label}\" :note \"seen twice\"}}}})]
           [(:ok r) (:reason r) (:mutation_state r) (-> r :value :label) (:message r)])"
    )
}

#[test]
fn with_the_gate_closed_a_write_is_listed_disabled_and_never_sent() {
    let b = bed("closed", WriteGate::Closed, |_| {});
    let entry = b.up.catalog().server("observatory").unwrap();
    let tool = entry.tool("annotate-trace").unwrap();
    let why = tool.disabled.as_deref().expect("disabled");
    assert!(
        why.contains("writes off (start it with --allow-writes"),
        "{why}"
    );
    let meta = tool.to_json();
    assert_eq!(meta["annotations"]["readOnlyHint"], false);
    assert_eq!(meta["_ptc"]["effect"], "write");
    assert_eq!(meta["_ptc"]["approval"], "always");
    assert_eq!(meta["_ptc"]["disabled"], why);
    // Reads are untouched.
    assert!(entry.tool("list-traces").unwrap().disabled.is_none());

    let person = Person::answering(Decision::Approved);
    let run = b.run(&annotate("flaky"), Some(person.clone()));
    assert!(
        run.value.starts_with("[false :write_disabled nil nil \"observatory/annotate-trace: not called: it is a write and this process runs with writes off"),
        "{}",
        run.value
    );
    assert!(
        person.asked().is_empty(),
        "nobody is asked for a disabled write"
    );
    assert!(b.posts().is_empty(), "no request");
    assert!(b.server().annotations().is_empty());
    assert_eq!(
        run.calls[1],
        serde_json::json!({"server": "observatory", "tool": "annotate-trace", "status": "error",
            "reason": "write_disabled", "duration_ms": run.calls[1]["duration_ms"],
            "result_bytes": 0, "effect": "write"})
    );
}

#[test]
fn an_approved_write_runs_once_with_its_idempotency_key_and_is_visible_after() {
    let b = bed("approved", WriteGate::Open, |_| {});
    let person = Person::answering(Decision::Approved);
    let src = format!(
        "(let [w {}
               id {TRACE}
               t (tool/call 'observatory/get-trace {{:id id :org-id \"org_acme\"}})]
           [w (map :label (-> t :value :annotations))])",
        annotate("flaky")
    );
    let run = b.run(&src, Some(person.clone()));
    assert_eq!(
        run.value, "[[true nil :applied \"flaky\" nil] [\"flaky\"]]",
        "the write happened and a later read shows it"
    );
    let asked = person.asked();
    assert_eq!(asked.len(), 1);
    let (request, wait) = &asked[0];
    assert_eq!(request.tool, "observatory/annotate-trace");
    assert_eq!(request.effect, ptc_plan::Effect::Write);
    assert!(
        request.preview.starts_with("POST http://127.0.0.1:")
            && request.preview.ends_with("/annotations?org_id=org_acme"),
        "{}",
        request.preview
    );
    assert_eq!(request.arguments["body"]["label"], "flaky");
    // The approval wait (30 s) is bounded by the program's time (10 s by default).
    assert!(
        *wait <= Duration::from_secs(10) && *wait > Duration::from_secs(9),
        "{wait:?}"
    );
    let posts = b.posts();
    assert_eq!(posts.len(), 1, "{posts:?}");
    let key = posts[0].idempotency_key.clone().expect("the key is sent");
    assert_eq!(key.len(), 32);
    assert_eq!(posts[0].annotation_id.as_deref(), Some("an_000001"));
    assert_eq!(
        run.calls[1]["approval"], "approved",
        "records: {}",
        run.calls
    );
    assert_eq!(run.calls[1]["mutation_state"], "applied");
    assert_eq!(run.calls[1]["effect"], "write");
    assert!(
        run.calls[0].get("effect").is_none(),
        "a read has no write fields"
    );

    // The same write again in another run is another key: the server stores a second one.
    b.run(&annotate("flaky"), Some(person.clone()));
    let posts = b.posts();
    assert_eq!(posts.len(), 2);
    assert_ne!(posts[1].idempotency_key.as_deref(), Some(key.as_str()));
    assert_eq!(b.server().annotations().len(), 2);
}

#[test]
fn a_declined_or_unaskable_approval_sends_nothing() {
    let b = bed("declined", WriteGate::Open, |_| {});
    let person = Person::answering(Decision::Declined("the person answered no".into()));
    let run = b.run(&annotate("flaky"), Some(person.clone()));
    assert_eq!(
        run.value,
        "[false :approval_declined nil nil \"observatory/annotate-trace: not called: the person answered no\"]"
    );
    assert_eq!(person.asked().len(), 1);
    assert_eq!(run.calls[1]["approval"], "declined");
    assert!(run.calls[1].get("mutation_state").is_none());

    // A host with nobody to ask never takes that as a yes.
    let run = b.run(&annotate("flaky"), None);
    assert!(
        run.value.starts_with("[false :approval_unavailable nil nil \"observatory/annotate-trace: not called: it needs a person's approval and nobody can be asked here"),
        "{}",
        run.value
    );
    assert_eq!(run.calls[1]["approval"], "unavailable");
    assert!(b.posts().is_empty());
}

#[test]
fn a_write_without_approval_runs_without_asking() {
    let b = bed("no-approval", WriteGate::Open, |plan| {
        observatory(plan)
            .tools
            .last_mut()
            .unwrap()
            .classified
            .approval = Approval::None;
    });
    let person = Person::answering(Decision::Declined("must not be asked".into()));
    let run = b.run(&annotate("flaky"), Some(person.clone()));
    assert_eq!(run.value, "[true nil :applied \"flaky\" nil]");
    assert!(person.asked().is_empty());
    assert!(run.calls[1].get("approval").is_none());
}

#[test]
fn a_write_whose_answer_never_came_is_indeterminate_and_not_repeated() {
    let b = bed("indeterminate", WriteGate::Open, |plan| {
        let api = observatory(plan);
        // Retries are configured, and a write still never uses them.
        api.http.backoff.max_retries = 3;
        api.tools.last_mut().unwrap().ptc.request_timeout_ms = 1000;
    });
    let id = b.run(TRACE, None).value;
    // From now on the test bed stores the annotation, then answers after 5 s; the call gives up
    // after 1 s.
    b.server().set_faults(observatory_server::Faults {
        latency_after_ms: 5000,
        ..Default::default()
    });
    let person = Person::answering(Decision::Approved);
    let once = format!(
        "(let [r (tool/call 'observatory/annotate-trace {{:id {id} :org-id \"org_acme\" :body {{:label \"flaky\"}}}})]
           [(:ok r) (:reason r) (:mutation_state r) (-> r :value :label) (:message r)])"
    );
    let src = format!("[{once} {once}]");
    let run = b.run(&src, Some(person.clone()));
    assert!(
        run.value.starts_with("[[false :timeout :indeterminate nil \"observatory/annotate-trace: no complete answer within 1000 ms\"] [false :write_indeterminate :not_applied nil \"observatory/annotate-trace: not sent again"),
        "{}",
        run.value
    );
    assert_eq!(
        person.asked().len(),
        1,
        "the repeat is refused before anyone is asked"
    );
    assert_eq!(
        b.posts().len(),
        1,
        "sent once, never retried: {:?}",
        b.posts()
    );
    assert_eq!(
        b.server().annotations().len(),
        1,
        "the write did happen: that is why it is indeterminate"
    );
    assert_eq!(run.calls[0]["mutation_state"], "indeterminate");
    assert_eq!(run.calls[1]["reason"], "write_indeterminate");
    assert_eq!(run.calls[1]["mutation_state"], "not_applied");
}

#[test]
fn a_secret_in_the_arguments_never_reaches_the_person() {
    let b = bed("redacted", WriteGate::Open, |_| {});
    let person = Person::answering(Decision::Declined("no".into()));
    // The program knows the token only because the test wrote it in; the redactor knows it
    // because the host read it to authenticate.
    b.run(
        "(tool/call 'observatory/list-traces {:org-id \"org_acme\" :limit 1})",
        None,
    );
    b.run(&annotate(TOKEN), Some(person.clone()));
    let (request, _) = &person.asked()[0];
    let shown = format!("{} {}", request.message(), request.arguments);
    assert!(!shown.contains(TOKEN), "{shown}");
    assert!(shown.contains("[REDACTED]"), "{shown}");
}

/// The approval service a deployment names in `approval_webhook`, on a runtime of its own: it
/// answers every approval as `mode` says and keeps what it was asked (the body and the
/// Authorization header).
struct ApprovalService {
    url: String,
    asked: Arc<Mutex<Vec<(serde_json::Value, String)>>>,
    _rt: tokio::runtime::Runtime,
}

fn approval_service(mode: &'static str) -> ApprovalService {
    use axum::http::{HeaderMap, StatusCode};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let asked: Arc<Mutex<Vec<(serde_json::Value, String)>>> = Arc::default();
    let seen = asked.clone();
    let app = axum::Router::new().route(
        "/approve",
        axum::routing::post(
            move |headers: HeaderMap, axum::Json(body): axum::Json<serde_json::Value>| {
                let seen = seen.clone();
                async move {
                    let auth = headers
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_string();
                    seen.lock().unwrap().push((body, auth));
                    match mode {
                        "approve" => (StatusCode::OK, r#"{"approved": true}"#.to_string()),
                        "deny" => (
                            StatusCode::OK,
                            r#"{"approved": false, "reason": "change freeze"}"#.to_string(),
                        ),
                        "broken" => (StatusCode::INTERNAL_SERVER_ERROR, "oops".to_string()),
                        // A yes padded to exactly the cap on an answer's size, or one byte more.
                        "at-cap" => (StatusCode::OK, padded_yes(WEBHOOK_ANSWER_CAP)),
                        "past-cap" => (StatusCode::OK, padded_yes(WEBHOOK_ANSWER_CAP + 1)),
                        // A person who never answers: the request is held open.
                        _ => std::future::pending().await,
                    }
                }
            },
        ),
    );
    let addr = support::loopback(&rt, app);
    // "gone": a webhook whose port nobody listens on any more.
    let addr = if mode == "gone" {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        closed.local_addr().unwrap()
    } else {
        addr
    };
    ApprovalService {
        url: format!("http://{addr}/approve"),
        asked,
        _rt: rt,
    }
}

const APPROVALS_TOKEN: &str = "approvals_secret_61f0c2";

/// The most an approval webhook's answer may hold (docs/configuration.md, `approval_webhook`).
const WEBHOOK_ANSWER_CAP: usize = 64 * 1024;

/// `{"approved": true, "pad": "xx…"}` of exactly `len` bytes.
fn padded_yes(len: usize) -> String {
    let empty = r#"{"approved": true, "pad": ""}"#;
    let answer = format!(
        r#"{{"approved": true, "pad": "{}"}}"#,
        "x".repeat(len - empty.len())
    );
    assert_eq!(answer.len(), len);
    answer
}

/// A bed whose approval webhook is compiled from config by ptc-plan, as a deployment's is (its
/// limits are the config compiler's, not a test's), answering as `mode` says.
fn configured_webhook_bed(name: &str, mode: &'static str) -> (Bed, ApprovalService) {
    let service = approval_service(mode);
    let config = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/observatory/upstreams.json");
    let mut text: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    text["approval_webhook"] =
        serde_json::json!({ "url": service.url, "allow_insecure_http": true });
    let compiled = ptc_plan::load_str(&text.to_string(), &config, &ptc_plan::FileSource)
        .unwrap_or_else(|d| panic!("{d}"));
    let webhook = compiled
        .plan
        .approval_webhook
        .expect("the webhook compiles");
    let b = bed(name, WriteGate::Open, move |plan| {
        plan.approval_webhook = Some(webhook);
    });
    (b, service)
}

/// A bed whose deployment names an approval webhook (bearer `APPROVALS_TOKEN`) answering as
/// `mode` says.
fn webhook_bed(name: &str, mode: &'static str) -> (Bed, ApprovalService) {
    let service = approval_service(mode);
    let url = service.url.clone();
    let token_file =
        std::env::temp_dir().join(format!("ptc-approvals-{name}-{}.token", std::process::id()));
    std::fs::write(&token_file, APPROVALS_TOKEN).unwrap();
    let b = bed(name, WriteGate::Open, move |plan| {
        plan.credentials.push(ptc_plan::CredentialBinding {
            name: "approvals".into(),
            source: CredentialSource::File {
                path: token_file.to_string_lossy().into(),
            },
            scheme_hint: None,
        });
        let mut http = observatory(plan).http.clone();
        http.auth = vec![ptc_plan::AuthEmitter::Bearer {
            binding: "approvals".into(),
        }];
        http.static_headers.clear();
        plan.approval_webhook = Some(ptc_plan::ApprovalWebhook { url, http });
    });
    (b, service)
}

#[test]
fn a_deployments_approval_webhook_decides_instead_of_the_client() {
    let (b, service) = webhook_bed("webhook-approve", "approve");
    // The client would say no; the deployment's webhook is asked instead, and says yes.
    let person = Person::answering(Decision::Declined("the client must not be asked".into()));
    let run = b.run(&annotate(TOKEN), Some(person.clone()));
    // (The answer echoes the label, redacted like every output.)
    assert_eq!(run.value, "[true nil :applied \"[REDACTED]\" nil]");
    assert!(person.asked().is_empty());
    assert_eq!(run.calls[1]["approval"], "approved");
    let asked = service.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    let (body, auth) = &asked[0];
    assert_eq!(auth, &format!("Bearer {APPROVALS_TOKEN}"));
    assert_eq!(body["tool"], "observatory/annotate-trace");
    assert_eq!(body["effect"], "write");
    assert!(
        body["request"]
            .as_str()
            .unwrap()
            .starts_with("POST http://127.0.0.1:")
    );
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("Approve this call?")
    );
    assert!(body["wait_ms"].as_u64().unwrap() <= 10_000);
    // The upstream's token, in the arguments, reached the webhook redacted.
    assert_eq!(body["arguments"]["body"]["label"], "[REDACTED]");
    assert!(!body.to_string().contains(TOKEN), "{body}");
    // A program run without any client (ptc eval) is asked through the webhook too.
    let run = b.run(&annotate("flaky"), None);
    assert_eq!(run.value, "[true nil :applied \"flaky\" nil]");
}

#[test]
fn a_webhook_answer_is_read_up_to_its_cap_and_no_further() {
    let (b, service) = configured_webhook_bed("webhook-at-cap", "at-cap");
    let run = b.run(&annotate("flaky"), None);
    assert_eq!(run.value, "[true nil :applied \"flaky\" nil]");
    assert_eq!(service.asked.lock().unwrap().len(), 1);
    let (b, service) = configured_webhook_bed("webhook-past-cap", "past-cap");
    let run = b.run(&annotate("flaky"), None);
    assert_eq!(
        run.value,
        "[false :approval_unavailable nil nil \"observatory/annotate-trace: not called: it needs a person's approval and the approval webhook sent an answer that could not be read\"]"
    );
    assert_eq!(service.asked.lock().unwrap().len(), 1);
    assert!(
        b.posts().is_empty(),
        "nothing is written on an unreadable answer"
    );
}

#[test]
fn a_webhook_that_says_no_fails_or_never_answers_is_never_a_yes() {
    let (b, _service) = webhook_bed("webhook-deny", "deny");
    let run = b.run(&annotate("flaky"), None);
    assert_eq!(
        run.value,
        "[false :approval_declined nil nil \"observatory/annotate-trace: not called: the person said no: change freeze\"]"
    );
    let (b, _service) = webhook_bed("webhook-broken", "broken");
    let run = b.run(&annotate("flaky"), None);
    assert_eq!(
        run.value,
        "[false :approval_unavailable nil nil \"observatory/annotate-trace: not called: it needs a person's approval and the approval webhook answered HTTP 500\"]"
    );
    let (b, _service) = webhook_bed("webhook-gone", "gone");
    let run = b.run(&annotate("flaky"), None);
    assert!(
        run.value.starts_with(
            "[false :approval_unavailable nil nil \"observatory/annotate-trace: not called: it needs a person's approval and the approval webhook cannot be reached"
        ),
        "{}",
        run.value
    );
    let (b, _service) = webhook_bed("webhook-silent", "silent");
    let run = b.run_waiting(&annotate("flaky"), Duration::from_secs(1));
    assert_eq!(
        run.value,
        "[false :approval_declined nil nil \"observatory/annotate-trace: not called: nobody answered the approval request within 1 s\"]"
    );
    assert!(b.posts().is_empty(), "nothing was written");
}
