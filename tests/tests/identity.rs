//! Who is calling, over real HTTP: the host as an OAuth resource server against a real
//! authorization server (`fixtures/auth-issuer`: discovery, JWKS, key rotation, signed with
//! joserfc), and the policy that decides what each caller may reach, against the Observatory
//! test bed.

mod support;

use std::sync::Arc;

use observatory_server::TokenSpec;
use ptc_core::catalog::policy::Policy;
use ptc_core::credentials::identity::oauth::OAuthOptions;
use ptc_core::server::{EvalLimits, Evaluator, HttpOptions};
use ptc_core::{StartOptions, Upstreams};
use ptc_tests::issuer::Issuer;
use serde_json::{Value, json};
use support::{Bed, Host, Session, client};

/// This resource as tokens must name it.
const AUD: &str = "http://127.0.0.1/ptc-test/mcp";
const OBS_TOKEN: &str = "obs_identity_full_5b1e2d";

/// A host over `up` that accepts the issuer's tokens for [`AUD`] with `scopes` required, under
/// `policy` when given.
async fn host(issuer: &Issuer, scopes: &[&str], policy: Option<&str>, up: Arc<Upstreams>) -> Host {
    let evaluator =
        Evaluator::new(up, tokio::runtime::Handle::current(), EvalLimits::default()).unwrap();
    if let Some(p) = policy {
        evaluator.set_policy(Policy::parse(p).unwrap());
    }
    let mut oauth = OAuthOptions::new(vec![issuer.url.clone()], AUD.into());
    oauth.required_scopes = scopes.iter().map(|s| s.to_string()).collect();
    let options = HttpOptions {
        oauth: Some(oauth),
        ..HttpOptions::default()
    };
    support::serve(evaluator, options).await
}

/// A token for `sub` meant for this resource, with `scope`.
async fn token(issuer: &Issuer, sub: &str, scope: &str) -> String {
    issuer
        .mint(json!({"claims": {"sub": sub, "aud": AUD, "scope": scope}}))
        .await
}

/// The status and `WWW-Authenticate` of an `initialize` sent with `token`.
async fn refused(url: &str, token: Option<&str>) -> (u16, String, String) {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "identity-test", "version": "1"}}});
    let mut r = client()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(init.to_string());
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    let r = r.send().await.unwrap();
    let challenge = r
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (r.status().as_u16(), challenge, r.text().await.unwrap())
}

fn structured(reply: &Value) -> &Value {
    &reply["result"]["structuredContent"]
}

fn start_issuer() -> Option<Issuer> {
    ptc_tests::issuer::start(&[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metadata_names_the_issuer_and_a_request_without_a_token_is_told_where_to_go() {
    let Some(issuer) = start_issuer() else { return };
    let h = host(&issuer, &["ptc:eval"], None, support::no_upstreams().await).await;
    let metadata_url = format!(
        "{}/.well-known/oauth-protected-resource/ptc-test/mcp",
        "http://127.0.0.1"
    );
    for path in [
        "/.well-known/oauth-protected-resource/ptc-test/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let r = client()
            .get(format!("{}{path}", h.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let doc: Value = r.json().await.unwrap();
        assert_eq!(doc["resource"], AUD);
        assert_eq!(doc["authorization_servers"], json!([issuer.url]));
        assert_eq!(doc["scopes_supported"], json!(["ptc:eval"]));
    }
    let (status, challenge, body) = refused(&h.url, None).await;
    assert_eq!(status, 401);
    assert_eq!(
        challenge,
        format!("Bearer resource_metadata=\"{metadata_url}\", scope=\"ptc:eval\"")
    );
    assert!(body.contains("missing bearer token"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_token_runs_as_its_subject() {
    let Some(issuer) = start_issuer() else { return };
    let h = host(&issuer, &["ptc:eval"], None, support::no_upstreams().await).await;
    for alg in ["RS256", "ES256"] {
        let t = issuer
            .mint(json!({"alg": alg, "claims": {"sub": "alice", "aud": AUD,
                "scope": "ptc:read ptc:eval", "client_id": "cli"}}))
            .await;
        let s = Session::open(&h.url, Some(&t)).await;
        let reply = s.call(1, "(+ 1 2)").await;
        assert_eq!(structured(&reply)["result"], 3, "{alg}: {reply}");
        assert_eq!(structured(&reply)["caller"], "alice", "{alg}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_token_is_refused_with_the_reason() {
    let Some(issuer) = start_issuer() else { return };
    let h = host(&issuer, &["ptc:eval"], None, support::no_upstreams().await).await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let base = json!({"sub": "alice", "aud": AUD, "scope": "ptc:eval"});
    let with = |extra: Value| {
        let mut claims = base.clone();
        for (k, v) in extra.as_object().unwrap() {
            claims[k] = v.clone();
        }
        claims
    };
    // The leeway is 30 s: a token 20 s past its exp (or 20 s before its nbf) still passes,
    // one 40 s past does not.
    let cases: Vec<(Value, u16, &str)> = vec![
        (json!({"claims": with(json!({"exp": now - 20}))}), 200, ""),
        (
            json!({"claims": with(json!({"exp": now - 40}))}),
            401,
            "the token expired",
        ),
        (json!({"claims": with(json!({"nbf": now + 20}))}), 200, ""),
        (
            json!({"claims": with(json!({"nbf": now + 40}))}),
            401,
            "not valid yet",
        ),
        (
            json!({"claims": with(json!({"exp": null}))}),
            401,
            "has no `exp` claim",
        ),
        (
            json!({"claims": with(json!({"aud": "https://other.example.com/mcp"}))}),
            401,
            "audience is \"https://other.example.com/mcp\", not this resource",
        ),
        (
            json!({"claims": with(json!({"iss": "http://127.0.0.1:9"}))}),
            401,
            "issuer `http://127.0.0.1:9` is not trusted here",
        ),
        (
            json!({"alg": "none", "claims": base}),
            401,
            "algorithm `none` is not accepted",
        ),
        (
            json!({"alg": "HS256", "claims": base}),
            401,
            "algorithm `HS256` is not accepted",
        ),
        (
            json!({"key": "stranger", "claims": base}),
            401,
            "has no key with id",
        ),
        (
            json!({"claims": with(json!({"scope": "ptc:read"}))}),
            403,
            "lacks the scope ptc:eval",
        ),
    ];
    for (mint, status, says) in cases {
        let t = issuer.mint(mint.clone()).await;
        let (got, challenge, body) = refused(&h.url, Some(&t)).await;
        assert_eq!(got, status, "{mint}: {body}");
        assert!(body.contains(says), "{mint}: {body}");
        assert!(
            !body.contains(&t) && !challenge.contains(&t),
            "never the token"
        );
        match status {
            401 => assert!(challenge.contains("error=\"invalid_token\""), "{challenge}"),
            403 => assert!(
                challenge.contains("error=\"insufficient_scope\""),
                "{challenge}"
            ),
            _ => assert!(challenge.is_empty()),
        }
    }
    let (got, _, body) = refused(&h.url, Some("not-a-jwt")).await;
    assert_eq!(
        (got, body.as_str()),
        (401, "the bearer token is not a JWT\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_key_fetches_the_keys_once_and_a_rotated_key_is_found() {
    let Some(issuer) = start_issuer() else { return };
    let h = host(&issuer, &[], None, support::no_upstreams().await).await;
    let jwks = |stats: &Value| stats["jwks_requests"].as_u64().unwrap();
    let first = token(&issuer, "alice", "").await;
    assert_eq!(refused(&h.url, Some(&first)).await.0, 200);
    let fetched = jwks(&issuer.stats().await);
    assert_eq!(fetched, 1, "the keys are fetched on first use");
    // A token the host has seen is not checked again: no fetch.
    assert_eq!(refused(&h.url, Some(&first)).await.0, 200);
    assert_eq!(jwks(&issuer.stats().await), 1);
    // A key the issuer never published: one fetch, then refused; a second one right after
    // does not fetch again.
    let stranger = issuer
        .mint(json!({"key": "stranger", "claims": {"sub": "m", "aud": AUD}}))
        .await;
    assert_eq!(refused(&h.url, Some(&stranger)).await.0, 401);
    assert_eq!(jwks(&issuer.stats().await), 2);
    let stranger2 = issuer
        .mint(json!({"key": "stranger", "claims": {"sub": "n", "aud": AUD}}))
        .await;
    assert_eq!(refused(&h.url, Some(&stranger2)).await.0, 401);
    assert_eq!(
        jwks(&issuer.stats().await),
        2,
        "at most one fetch per interval"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotation_is_followed_and_a_dropped_key_no_longer_passes() {
    let Some(issuer) = start_issuer() else { return };
    let h = host(&issuer, &[], None, support::no_upstreams().await).await;
    let url = h.url.clone();
    let old = token(&issuer, "alice", "").await;
    assert_eq!(refused(&url, Some(&old)).await.0, 200);
    issuer.rotate(true).await;
    // A token with the new key names a kid the host has not seen: it fetches and finds it.
    let new = token(&issuer, "alice", "").await;
    assert_eq!(refused(&url, Some(&new)).await.0, 200);
    assert_eq!(issuer.stats().await["jwks_requests"], 2);
    // The old token was remembered as valid, but its key is gone from the set now.
    let (status, _, body) = refused(&url, Some(&old)).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("has no key with id"), "{body}");
}

// ---- policy, against the Observatory test bed ----

/// The Observatory test bed (its token may write) with the write gate open: the policy, not the
/// gate, decides who may write here.
async fn observatory(name: &str) -> Bed {
    let mut token = TokenSpec::full_access("tok_identity", OBS_TOKEN);
    token.scopes.push("traces:write".into());
    let options = StartOptions {
        writes: ptc_core::WriteGate::Open,
        ..StartOptions::default()
    };
    Bed::start(&format!("identity-{name}"), token, "", options).await
}

const POLICY: &str = r#"{"rules": [
    {"name": "sre", "callers": {"groups": ["sre"]}, "tools": ["*"], "writes": true},
    {"name": "readers", "callers": {"groups": ["readers"]}, "tools": ["observatory/*"]},
    {"name": "agents", "callers": {"scopes": ["ptc:eval"]},
     "tools": ["observatory/list-*", "observatory/get-trace"],
     "except": ["observatory/list-errors"],
     "limits": {"calls_per_program": 2, "programs_per_minute": 10}}
]}"#;

const LIST: &str = "(tool/call 'observatory/list-traces {:org-id \"org_acme\" :limit 1})";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policy_decides_what_each_caller_reaches_and_sees() {
    let Some(issuer) = start_issuer() else { return };
    let bed = observatory("policy").await;
    let h = host(&issuer, &[], Some(POLICY), bed.up.clone()).await;
    let agent = Session::open(&h.url, Some(&token(&issuer, "bot-1", "ptc:eval").await)).await;

    // Allowed: a listed tool answers.
    let reply = agent.call(1, &format!("(:ok {LIST})")).await;
    assert_eq!(structured(&reply)["result"], true, "{reply}");
    assert_eq!(structured(&reply)["caller"], "bot-1");

    // Denied by `except`, before any request: forbidden, naming the rule.
    let reply = agent
        .call(
            2,
            "(tool/call 'observatory/list-errors {:org-id \"org_acme\"})",
        )
        .await;
    let v = &structured(&reply)["result"];
    assert_eq!(v["reason"], "forbidden", "{reply}");
    let message = v["message"].as_str().unwrap();
    assert!(
        message.contains("policy rule `agents` does not allow this tool")
            && message.ends_with("nothing was sent"),
        "{message}"
    );
    let calls = &structured(&reply)["upstream_calls"];
    assert_eq!(calls[0]["reason"], "forbidden", "{calls}");

    // Discovery shows only what the caller may call.
    let reply = agent.call(3, "(dir 'observatory)").await;
    let lines: Vec<String> = structured(&reply)["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap().to_string())
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("observatory/list-traces"))
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("observatory/get-trace "))
    );
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("list-errors") || l.contains("costs"))
    );
    let reply = agent.call(4, "(mapv :name (tool/search \"errors\"))").await;
    assert!(
        !structured(&reply)["result"]
            .to_string()
            .contains("list-errors"),
        "{reply}"
    );
    let listed = agent
        .send(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}))
        .await
        .text()
        .await
        .unwrap();
    assert!(listed.contains("observatory/list-traces"), "{listed}");
    assert!(!listed.contains("observatory/costs"), "{listed}");

    // The rule's calls per program (2) replace the host's (50).
    let reply = agent
        .call(6, &format!("[(:ok {LIST}) (:ok {LIST}) (:reason {LIST})]"))
        .await;
    assert_eq!(
        structured(&reply)["result"],
        json!([true, true, "cap_exhausted"]),
        "{reply}"
    );

    // An SRE sees and may call everything.
    let sre_token = issuer
        .mint(json!({"claims": {"sub": "carol", "aud": AUD, "groups": ["sre"]}}))
        .await;
    let sre = Session::open(&h.url, Some(&sre_token)).await;
    let reply = sre
        .call(
            7,
            "(:ok (tool/call 'observatory/list-errors {:org-id \"org_acme\"}))",
        )
        .await;
    assert_eq!(structured(&reply)["result"], true, "{reply}");

    // A rule without `writes` lets its callers read everything and write nothing: refused
    // before any approval is asked or request sent.
    let annotate = "(tool/call 'observatory/annotate-trace {:org-id \"org_acme\" :id \"t\" \
                    :body {:label \"n\"}})";
    let reader_token = issuer
        .mint(json!({"claims": {"sub": "dave", "aud": AUD, "groups": ["readers"]}}))
        .await;
    let reader = Session::open(&h.url, Some(&reader_token)).await;
    let reply = reader.call(9, annotate).await;
    let v = &structured(&reply)["result"];
    assert_eq!(v["reason"], "forbidden", "{reply}");
    assert_eq!(
        v["message"],
        "observatory/annotate-trace: policy rule `readers` does not allow writes; nothing was sent"
    );
    // The SRE passes the policy; the write then needs a person (none can be asked here).
    let reply = sre.call(10, annotate).await;
    assert_eq!(
        structured(&reply)["result"]["reason"],
        "approval_unavailable",
        "{reply}"
    );

    // A caller no rule is for runs nothing.
    let stranger = Session::open(&h.url, Some(&token(&issuer, "eve", "other").await)).await;
    let reply = stranger.call(8, "(+ 1 2)").await;
    assert_eq!(structured(&reply)["reason"], "forbidden", "{reply}");
    assert!(
        structured(&reply)["message"]
            .as_str()
            .unwrap()
            .starts_with("no policy rule matches the caller `eve`"),
        "{reply}"
    );
    drop(h);
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_past_its_programs_per_minute_is_told_when_to_retry() {
    let Some(issuer) = start_issuer() else { return };
    let policy = POLICY.replace("\"programs_per_minute\": 10", "\"programs_per_minute\": 3");
    let h = host(&issuer, &[], Some(&policy), support::no_upstreams().await).await;
    let agent = Session::open(&h.url, Some(&token(&issuer, "bot-2", "ptc:eval").await)).await;
    for id in 1..=3 {
        let reply = agent.call(id, "(+ 1 2)").await;
        assert_eq!(structured(&reply)["result"], 3, "program {id}");
    }
    let reply = agent.call(4, "(+ 1 2)").await;
    assert_eq!(structured(&reply)["reason"], "rate_limited", "{reply}");
    assert!(
        structured(&reply)["message"]
            .as_str()
            .unwrap()
            .contains("started 3 programs in the last minute, the limit of policy rule `agents`"),
        "{reply}"
    );
    // Another caller of the same rule has its own count.
    let other = Session::open(&h.url, Some(&token(&issuer, "bot-3", "ptc:eval").await)).await;
    assert_eq!(structured(&other.call(1, "(+ 1 2)").await)["result"], 3);
    assert_eq!(h.evaluator.running(), 0);
}

// ---- per-caller upstream credentials ----

/// A loopback upstream that records the `Authorization` header of every request.
struct WhoAmI {
    base: String,
    seen: Arc<std::sync::Mutex<Vec<String>>>,
}

async fn who_am_i() -> WhoAmI {
    let seen = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let record = seen.clone();
    let app = axum::Router::new().route(
        "/whoami",
        axum::routing::get(move |headers: axum::http::HeaderMap| {
            let record = record.clone();
            async move {
                let auth = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                record.lock().unwrap().push(auth);
                axum::Json(json!({"ok": true}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    WhoAmI {
        base: format!("http://{addr}"),
        seen,
    }
}

const WHO_DOC: &str = r#"{"openapi": "3.0.3", "info": {"title": "who", "version": "1"},
  "paths": {"/whoami": {"get": {"operationId": "whoami", "summary": "Who the upstream sees",
    "responses": {"200": {"description": "ok", "content": {"application/json":
      {"schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}}}}}}}}"#;

/// The `who` upstream at `base`, authenticated with the binding `as-caller` defined by
/// `credential`; the config written to a fresh folder named `name`.
async fn who_upstreams(name: &str, base: &str, credential: Value) -> Arc<Upstreams> {
    let dir = std::env::temp_dir().join(format!("ptc-identity-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("who.openapi.json"), WHO_DOC).unwrap();
    let config = json!({
        "credentials": {
            "exchange-client": {"source": "literal", "value": ptc_tests::issuer::client().1},
            "as-caller": credential,
        },
        "upstreams": {"who": {
            "transport": "openapi",
            "base_url": base,
            "allow_insecure_http": true,
            "allow_insecure_auth": true,
            "schema_file": "who.openapi.json",
            "include_operations": ["whoami"],
            "auth": [{"scheme": "bearer", "binding": "as-caller"}],
        }},
    });
    std::fs::write(dir.join("upstreams.json"), config.to_string()).unwrap();
    let loaded = ptc_plan::load(&dir.join("upstreams.json")).unwrap_or_else(|d| panic!("{d}"));
    Arc::new(
        Upstreams::start(loaded.plan, loaded.secrets, StartOptions::default())
            .await
            .unwrap(),
    )
}

/// The claims of a JWT (its middle part), unverified.
fn claims(jwt: &str) -> Value {
    use base64::Engine;
    let payload = jwt.split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

const WHO: &str = "(:ok (tool/call 'who/whoami {}))";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_gets_a_token_exchanged_for_the_caller_never_the_callers_own() {
    let Some(issuer) = ptc_tests::issuer::start(&["--exchange-ttl", "2"]) else {
        return;
    };
    let who = who_am_i().await;
    let up = who_upstreams(
        "exchange",
        &who.base,
        json!({"source": "caller_token_exchange", "token_endpoint": issuer.token_endpoint(),
            "audience": "https://who.example.com", "scope": "who:read",
            "client_id": ptc_tests::issuer::client().0, "client_secret": "exchange-client"}),
    )
    .await;
    let h = host(&issuer, &[], None, up.clone()).await;
    // The canary: alice's own token, which must reach the token endpoint only.
    let alice_token = token(&issuer, "alice", "ptc:eval").await;
    let alice = Session::open(&h.url, Some(&alice_token)).await;
    let reply = alice.call(1, &format!("[{WHO} {WHO}]")).await;
    assert_eq!(structured(&reply)["result"], json!([true, true]), "{reply}");
    assert!(!reply.to_string().contains(&alice_token));
    let seen = who.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    for auth in &seen {
        assert!(
            !auth.contains(&alice_token),
            "the caller's token reached the upstream"
        );
        let exchanged = claims(auth.strip_prefix("Bearer ").unwrap());
        assert_eq!(exchanged["sub"], "alice");
        assert_eq!(exchanged["aud"], "https://who.example.com");
        assert_eq!(exchanged["act"]["sub"], ptc_tests::issuer::client().0);
        assert_eq!(exchanged["scope"], "who:read");
    }
    assert_eq!(seen[0], seen[1], "one exchange, cached");
    assert_eq!(up.exchanges().made(), 1);
    let exchanges = issuer.stats().await["exchanges"].clone();
    assert_eq!(exchanges.as_array().unwrap().len(), 1, "{exchanges}");

    // Bob gets a token of his own.
    let bob = Session::open(&h.url, Some(&token(&issuer, "bob", "ptc:eval").await)).await;
    let reply = bob.call(1, WHO).await;
    assert_eq!(structured(&reply)["result"], true, "{reply}");
    let last = who.seen.lock().unwrap().last().unwrap().clone();
    assert_eq!(claims(last.strip_prefix("Bearer ").unwrap())["sub"], "bob");
    assert_eq!(up.exchanges().made(), 2);

    // Exchanged tokens live 2 s here, and are used until 1 s before they expire: alice's is
    // exchanged again once it is that old (polled, bounded).
    let mut exchanged_again = false;
    for id in 2..200 {
        assert_eq!(structured(&alice.call(id, WHO).await)["result"], true);
        if up.exchanges().made() == 3 {
            exchanged_again = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        exchanged_again,
        "the cached token expired and was exchanged again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_without_a_token_to_exchange_is_told_so_and_nothing_is_sent() {
    let Some(issuer) = start_issuer() else { return };
    let who = who_am_i().await;
    let up = who_upstreams(
        "no-token",
        &who.base,
        json!({"source": "caller_token_exchange", "token_endpoint": issuer.token_endpoint(),
            "audience": "https://who.example.com",
            "client_id": ptc_tests::issuer::client().0, "client_secret": "exchange-client"}),
    )
    .await;
    // `eval` and stdio run as the local operator, who has no OAuth token.
    let ev = Evaluator::new(up, tokio::runtime::Handle::current(), EvalLimits::default()).unwrap();
    let outcome = ev
        .eval(
            ptc_core::server::EvalRequest {
                program: "(tool/call 'who/whoami {})".into(),
                ..Default::default()
            },
            Default::default(),
        )
        .await;
    let value = outcome.result.unwrap().json.unwrap();
    assert_eq!(value["reason"], "auth_failed", "{value}");
    assert_eq!(
        value["message"],
        "who/whoami: credential `as-caller` exchanges the caller's token, but the caller \
         `local` has none (it did not authenticate with OAuth)"
    );
    assert!(who.seen.lock().unwrap().is_empty(), "nothing was sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_caller_file_is_read_for_its_caller_and_star_for_the_rest() {
    let Some(issuer) = start_issuer() else { return };
    let who = who_am_i().await;
    let dir = std::env::temp_dir().join(format!("ptc-identity-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("alice.token"), "alice-upstream-token\n").unwrap();
    std::fs::write(dir.join("others.token"), "shared-upstream-token").unwrap();
    let up = who_upstreams(
        "files",
        &who.base,
        json!({"source": "per_caller", "files": {
            "alice": dir.join("alice.token"), "*": dir.join("others.token")}}),
    )
    .await;
    let h = host(&issuer, &[], None, up).await;
    for (who_calls, expected) in [
        ("alice", "Bearer alice-upstream-token"),
        ("bob", "Bearer shared-upstream-token"),
    ] {
        let s = Session::open(&h.url, Some(&token(&issuer, who_calls, "").await)).await;
        let reply = s.call(1, WHO).await;
        assert_eq!(structured(&reply)["result"], true, "{reply}");
        assert_eq!(who.seen.lock().unwrap().last().unwrap(), expected);
    }
    // The per-caller secret is masked like any other if an answer carries it.
    let s = Session::open(&h.url, Some(&token(&issuer, "alice", "").await)).await;
    let reply = s.call(2, "(str \"alice-upstream-token\")").await;
    assert_eq!(structured(&reply)["result"], "[REDACTED]", "{reply}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_several_issuers_the_token_names_whose_keys_check_it() {
    let Some(issuer) = start_issuer() else { return };
    let options = OAuthOptions::new(
        vec!["https://other.example.com".into(), issuer.url.clone()],
        AUD.into(),
    );
    let http = ptc_core::wire::http_client::builder().build().unwrap();
    let v = ptc_core::credentials::identity::oauth::TokenValidator::new(options, http).unwrap();
    let good = token(&issuer, "alice", "").await;
    assert_eq!(v.validate(&good).await.unwrap().subject, "alice");
    let stranger = issuer
        .mint(json!({"claims": {"sub": "m", "aud": AUD, "iss": "http://127.0.0.1:9"}}))
        .await;
    assert_eq!(
        v.validate(&stranger).await.unwrap_err().message(),
        "the token's issuer `http://127.0.0.1:9` is not trusted here (trusted: \
         https://other.example.com, "
            .to_string()
            + &issuer.url
            + ")"
    );
    let no_iss = issuer
        .mint(json!({"claims": {"sub": "m", "aud": AUD, "iss": null}}))
        .await;
    assert_eq!(
        v.validate(&no_iss).await.unwrap_err().message(),
        "the token has no `iss` claim"
    );
}
