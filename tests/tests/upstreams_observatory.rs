//! The Observatory test bed end to end: the fixture config's plan, the real service started
//! in-process, PTC-Lisp programs calling it through `tool/call`, with its scopes, org
//! restrictions, rate limit, credential rotation and redaction.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use observatory_server::{RateLimit, ServerConfig, ServerHandle, TokenSource, TokenSpec};
use ptc_core::{Budgets, ProgramRun, StartOptions, Upstreams, run_program};
use ptc_lisp::Limits;
use ptc_plan::{CredentialSource, Transport};

const FULL: &str = "obs_e2e_full_8c1f0a3b";
const SCOPED: &str = "obs_e2e_scoped_5d2e9c7a";
const LIMITED: &str = "obs_e2e_limited_1b4a6f0e";

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

fn tokens() -> Vec<TokenSpec> {
    let mut scoped = TokenSpec::full_access("tok_scoped", SCOPED);
    scoped.scopes = vec!["traces:read".into()];
    scoped.orgs = vec!["org_acme".into()];
    let mut limited = TokenSpec::full_access("tok_limited", LIMITED);
    limited.rate_limit = Some(RateLimit {
        burst: 3,
        per_minute: 1.0,
    });
    vec![TokenSpec::full_access("tok_full", FULL), scoped, limited]
}

fn bed(name: &str) -> Bed {
    bed_with(name, |token_file| CredentialSource::File {
        path: token_file.to_string_lossy().into(),
    })
}

/// A bed whose credential comes from `source` (given the bed's token file, which holds `FULL`).
fn bed_with(name: &str, source: impl Fn(&Path) -> CredentialSource) -> Bed {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (addr, server) = rt
        .block_on(observatory_server::start(ServerConfig::new(
            TokenSource::Inline(tokens()),
        )))
        .expect("observatory starts");
    let config =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/observatory/upstreams.json");
    let mut loaded = ptc_plan::load(&config).unwrap_or_else(|d| panic!("{d}"));
    let token_file =
        std::env::temp_dir().join(format!("ptc-e2e-{name}-{}.token", std::process::id()));
    std::fs::write(&token_file, FULL).unwrap();
    for c in &mut loaded.plan.credentials {
        c.source = source(&token_file);
    }
    for u in &mut loaded.plan.upstreams {
        if let Transport::Openapi(api) = &mut u.transport {
            api.base_url = format!("http://{addr}");
        }
    }
    let up = rt
        .block_on(Upstreams::start(
            loaded.plan,
            loaded.secrets,
            StartOptions::default(),
        ))
        .unwrap();
    Bed {
        rt,
        server: Some(server),
        token_file,
        up: Arc::new(up),
    }
}

impl Bed {
    fn run(&self, src: &str) -> ProgramRun {
        run_program(
            self.up.clone(),
            self.rt.handle().clone(),
            src,
            Limits::default(),
            Budgets::default(),
            None,
        )
    }

    fn value(&self, src: &str) -> String {
        match self.run(src).result {
            Ok(v) => v.to_string(),
            Err(e) => panic!("{src}: {e}"),
        }
    }

    fn use_token(&self, token: &str) {
        let tmp = self.token_file.with_extension("tmp");
        std::fs::write(&tmp, token).unwrap();
        std::fs::rename(&tmp, &self.token_file).unwrap();
    }

    fn audit(&self) -> Vec<observatory_server::AuditRecord> {
        self.server.as_ref().unwrap().audit_records()
    }
}

#[test]
fn a_program_lists_filters_and_aggregates_traces_locally() {
    let b = bed("aggregate");
    let src = r#"
        (let [r (tool/call 'observatory/list-traces {:org-id "org_acme" :limit 50})
              traces (:value r)
              failed (filter #(= "error" (:status %)) traces)]
          {:ok (:ok r)
           :listed (count traces)
           :failed (count failed)
           :all-acme (every? #(= "org_acme" (:org_id %)) traces)})"#;
    let r = b.run(src);
    let v = r.result.unwrap().to_string();
    assert!(v.starts_with("{:all-acme true :failed "), "{v}");
    assert!(v.ends_with(":listed 50 :ok true}"), "{v}");
    let m = &r.records.ptc_metrics;
    assert_eq!(m.upstream_call_count, 1);
    assert!(
        m.payload_reduction_ratio.unwrap() > 100.0,
        "a page of traces collapses to a few numbers: {m:?}"
    );
    assert_eq!(r.records.upstream_calls[0].tool, "list-traces");
    // The default args of the plan reach the service: steps come as summaries.
    let v = b.value(
        r#"(let [t (first (:value (tool/call 'observatory/list-traces {:org-id "org_acme" :limit 1})))
                 s (tool/call 'observatory/get-trace-steps {:org-id "org_acme" :id (:id t)})]
             [(:ok s) (:mode (:value s))])"#,
    );
    assert_eq!(v, "[true \"summary\"]");
    let last = b.audit().last().cloned().unwrap();
    assert_eq!(last.operation.as_deref(), Some("get_trace_steps"));
    assert_eq!(last.token_id.as_deref(), Some("tok_full"));
}

#[test]
fn scopes_org_restrictions_and_unknown_tokens_come_back_as_reasons() {
    let b = bed("scopes");
    b.use_token(SCOPED);
    let v = b.value(
        r#"[(:ok (tool/call 'observatory/list-traces {:org-id "org_acme" :limit 1}))
            (:reason (tool/call 'observatory/costs {:org-id "org_acme"}))
            (:reason (tool/call 'observatory/list-traces {:org-id "org_globex"}))]"#,
    );
    assert_eq!(v, "[true :forbidden :forbidden]");
    let msg = b.value(r#"(:message (tool/call 'observatory/costs {:org-id "org_acme"}))"#);
    assert!(msg.contains("token lacks scope analytics:read"), "{msg}");
    b.use_token("obs_not_a_token_00000");
    let r = b.run(r#"(tool/call 'observatory/list-traces {:org-id "org_acme"})"#);
    let v = r.result.unwrap().to_string();
    assert!(v.contains(":reason :auth_failed"), "{v}");
    assert!(!v.contains("obs_not_a_token_00000"), "{v}");
}

#[test]
fn the_rate_limit_is_rate_limited_with_retry_after() {
    let b = bed("rate");
    b.use_token(LIMITED);
    let v = b.value(
        r#"(mapv (fn [_] (let [r (tool/call 'observatory/list-traces {:org-id "org_acme" :limit 1})]
                    (if (:ok r) :ok (:reason r))))
                 (range 4))"#,
    );
    assert_eq!(v, "[:ok :ok :ok :rate_limited]");
    let msg =
        b.value(r#"(:message (tool/call 'observatory/list-traces {:org-id "org_acme" :limit 1}))"#);
    assert!(msg.contains("Retry-After: "), "{msg}");
}

#[test]
fn bad_literal_calls_are_refused_before_the_service_sees_anything() {
    let b = bed("precheck");
    let before = b.audit().len();
    let r = b.run(
        r#"(tool/call 'observatory/list-traces {:org-id "acme" :limit 501 :environment :prod})"#,
    );
    let e = r.result.unwrap_err();
    let msg = e.message();
    assert!(
        msg.contains(":org-id must match the pattern ^org_[a-z0-9_]+$"),
        "{msg}"
    );
    assert!(msg.contains(":limit must be at most 500, got 501"), "{msg}");
    assert!(
        msg.contains(":environment must be one of \"production\" \"staging\", got \"prod\""),
        "{msg}"
    );
    assert_eq!(b.audit().len(), before);
}

#[test]
fn discovery_shows_the_observatory_tools_without_credentials() {
    let b = bed("discovery");
    let r = b.run(
        "(do (doc 'observatory/list-traces) [(count (dir 'observatory)) (first (apropos \"cost\")) (meta 'observatory/costs)])",
    );
    let v = r.result.unwrap().to_string();
    assert!(v.starts_with("[8 \"observatory/costs - "), "{v}");
    assert!(v.contains("\"operationId\" \"aggregate_costs\""), "{v}");
    for secret in [FULL, SCOPED, LIMITED] {
        assert!(!v.contains(secret) && !r.output.contains(secret));
    }
    assert!(
        r.output.contains(":org-id string (required)"),
        "{}",
        r.output
    );
    assert!(
        r.output
            .contains("(tool/call 'observatory/list-traces {:org-id \"...\"})"),
        "{}",
        r.output
    );
}

/// What `doc` says a tool returns is written as the program then prints it: each field of the
/// result shape appears, key and all, in a real answer (decoded JSON keeps string keys).
#[test]
fn doc_shows_the_result_as_the_program_gets_it() {
    let b = bed("doc-shape");
    let r = b.run("(doc 'observatory/list-traces)");
    let returns = r
        .output
        .lines()
        .skip_while(|l| *l != "Returns:")
        .nth(1)
        .unwrap_or_else(|| panic!("a Returns: line in\n{}", r.output));
    let answer = b.value(
        r#"(first (:value (tool/call 'observatory/list-traces {:org-id "org_acme" :limit 1})))"#,
    );
    // Each `"key"` of the shape, and whether it is marked as one that may be missing (`?`).
    let fields: Vec<(&str, bool)> = returns
        .match_indices('"')
        .collect::<Vec<_>>()
        .chunks(2)
        .filter_map(|q| {
            let [(open, _), (close, _)] = q else {
                return None;
            };
            let may_miss = returns[close + 1..].starts_with('?');
            Some((&returns[open + 1..*close], may_miss))
        })
        .collect();
    assert!(fields.len() > 10, "{returns}");
    let mut present = 0;
    for (key, may_miss) in &fields {
        let found = answer.contains(&format!("\"{key}\" "));
        assert!(
            found || *may_miss,
            "{key} of {returns} missing from {answer}"
        );
        present += usize::from(found);
    }
    assert!(present > 10, "{returns}\n{answer}");
    assert!(
        r.output.contains("(:k m) reads key \"k\" too"),
        "{}",
        r.output
    );
}

/// `tool/pages` over the Observatory's cursor (`next_cursor`): every trace once, in the order
/// one large page gives them, and each page one call in the run's records.
#[test]
fn tool_pages_follows_the_observatory_cursor() {
    let b = bed("pages");
    let out = b.value(
        r#"(let [all (:value (tool/call 'observatory/list-traces {:org-id "org_acme" :status "timeout" :limit 500}))
                 r (tool/pages 'observatory/list-traces {:org-id "org_acme" :status "timeout" :limit 9} {:max-pages 40})]
             [(:ok r) (:complete r) (:next r) (= (map :id all) (map :id (:value r)))
              (= (:pages r) (quot (+ (count all) 8) 9)) (count all)])"#,
    );
    // More than a few pages' worth, fewer than one large page holds.
    let n: usize = out
        .trim_end_matches(']')
        .rsplit(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        out.starts_with("[true true nil true true ") && n > 18 && n < 360,
        "{out}"
    );
    let run = b.run(
        r#"(tool/pages 'observatory/list-traces {:org-id "org_acme" :limit 5} {:max-pages 3})"#,
    );
    assert_eq!(run.records.upstream_calls.len(), 3);
    let v = run.result.unwrap().to_string();
    assert!(
        v.contains(":complete false") && v.contains(":pages 3"),
        "{v}"
    );
}

/// An `exec` credential against the real service: the command's output is the token, cached
/// for the TTL; a 401 runs it again once; a failing command is `auth_failed` naming it, never
/// what it printed.
#[cfg(unix)]
#[test]
fn an_exec_credential_is_cached_and_run_again_after_a_401() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("ptc-e2e-exec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let runs = dir.join("runs");
    let script = dir.join("token.sh");
    // Run 1 prints a token the service does not know; later runs print the bed's token file.
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nn=$(cat {runs} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {runs}\n\
             if [ $n = 1 ]; then echo obs_stale_token_0000; else cat \"$1\"; fi\n",
            runs = runs.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let exec = |token_file: &Path, command: &Path| {
        CredentialSource::Exec(ptc_plan::ExecSource {
            command: command.to_string_lossy().into(),
            args: vec![token_file.to_string_lossy().into()],
            env: vec![],
            timeout_ms: 5_000,
            cache_ttl_ms: 3_600_000,
        })
    };
    let command = script.clone();
    let b = bed_with("exec", move |token_file| exec(token_file, &command));
    let count = |src: &str| b.value(&format!("(count (:value {src}))"));
    let call = "(tool/call 'observatory/list-traces {:org-id \"org_acme\" :limit 2})";
    assert_eq!(count(call), "2");
    let ran = || std::fs::read_to_string(&runs).unwrap().trim().to_string();
    assert_eq!(
        ran(),
        "2",
        "the stale token's 401 ran the command once more"
    );
    assert_eq!(count(call), "2");
    assert_eq!(ran(), "2", "the second call used the cached token");

    let failing = dir.join("failing.sh");
    std::fs::write(&failing, format!("#!/bin/sh\necho {FULL}; exit 7\n")).unwrap();
    std::fs::set_permissions(&failing, std::fs::Permissions::from_mode(0o755)).unwrap();
    let command = failing.clone();
    let b = bed_with("exec-fails", move |token_file| exec(token_file, &command));
    let out = b.value(&format!("(select-keys {call} [:ok :reason :message])"));
    assert!(
        out.contains(":reason :auth_failed")
            && out.contains(&format!(
                "the command {} exited with status 7",
                failing.display()
            )),
        "{out}"
    );
    assert!(!out.contains(FULL), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
