//! An MCP upstream behind OAuth 2.1, end to end: the test issuer (`fixtures/auth-issuer`, on
//! joserfc) and an MCP server built on the Python SDK that accepts only its tokens
//! (`fixtures/mcp/oauth_server.py`), reached by ptc's MCP client as the config says. The person
//! who consents is played by an HTTP client that opens the authorization URL and follows the
//! issuer's redirect back to ptc's own loopback listener, as a browser would.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ptc_core::call::upstreams::{CallOptions, StartOptions, Upstreams};
use ptc_core::credentials::upstream_oauth::LoopbackConsent;
use ptc_core::{Reason, ToolOutput};
use ptc_tests::issuer::{self, Issuer};
use ptc_tests::oauth_mcp::OAuthMcp;
use serde_json::{Map, Value, json};

/// The issuer and the server behind it; `None` when their venvs are missing (after saying so).
fn peers(issuer_args: &[&str]) -> Option<(Issuer, OAuthMcp)> {
    let issuer = issuer::start(issuer_args)?;
    let server = OAuthMcp::start(&issuer.url, &[])?;
    Some((issuer, server))
}

/// The person: opens each authorization URL shown and follows the redirects (to the issuer's
/// consent, then back to ptc). Counts the URLs it was shown.
fn browser() -> (Arc<LoopbackConsent>, Arc<AtomicUsize>) {
    let shown = Arc::new(AtomicUsize::new(0));
    let count = shown.clone();
    let consent = LoopbackConsent::new(
        move |_upstream, url| {
            count.fetch_add(1, Ordering::SeqCst);
            let url = url.to_string();
            tokio::spawn(async move {
                let _ = issuer::http_client().get(url).send().await;
            });
        },
        Duration::from_secs(30),
    );
    (Arc::new(consent), shown)
}

/// Upstreams with one `mcp_http` upstream `hosted` at `server`, its `oauth` as given.
async fn start(
    server: &OAuthMcp,
    oauth: Value,
    credentials: Value,
    consent: Option<Arc<LoopbackConsent>>,
) -> Result<Upstreams, String> {
    start_with(server, oauth, credentials, consent, Arc::default()).await
}

/// [`start`] with its grants kept in `grants`.
async fn start_with(
    server: &OAuthMcp,
    oauth: Value,
    credentials: Value,
    consent: Option<Arc<LoopbackConsent>>,
    grants: Arc<ptc_core::credentials::upstream_oauth::Grants>,
) -> Result<Upstreams, String> {
    let config = json!({
        "credentials": credentials,
        "upstreams": {"hosted": {
            "transport": "mcp_http", "url": server.url,
            "allow_insecure_http": true, "allow_insecure_auth": true,
            "oauth": oauth,
        }},
    });
    let loaded = loaded(&config);
    let options = StartOptions {
        consent: consent.map(|c| c as Arc<dyn ptc_core::credentials::upstream_oauth::Consent>),
        grants,
        ..StartOptions::default()
    };
    Upstreams::start(loaded.plan, loaded.secrets, options)
        .await
        .map_err(|e| e.to_string())
}

/// `config` compiled as the host compiles a config file.
fn loaded(config: &Value) -> ptc_plan::Loaded {
    ptc_plan::load_str(
        &config.to_string(),
        std::path::Path::new("upstreams.json"),
        &ptc_plan::FileSource,
    )
    .unwrap_or_else(|d| panic!("{d}"))
}

/// Upstreams started from `config` with the default options.
async fn load(config: &Value) -> Upstreams {
    let loaded = loaded(config);
    Upstreams::start(loaded.plan, loaded.secrets, StartOptions::default())
        .await
        .unwrap()
}

/// The options of a call by `subject` holding their own `token` (as a host's identity check
/// accepted it).
fn holding(subject: &str, token: &str) -> CallOptions {
    let caller = ptc_core::credentials::identity::Caller {
        subject: subject.to_string(),
        token: Some(ptc_core::credentials::identity::CallerToken::new(token)),
        ..ptc_core::credentials::identity::Caller::local()
    };
    CallOptions {
        caller: Some(Arc::new(caller)),
        ..CallOptions::default()
    }
}

/// Calls `tool` for nobody in particular (the process) and reads its JSON answer.
async fn call(upstreams: &Upstreams, tool: &str) -> Result<Value, ptc_core::ToolError> {
    call_with(upstreams, CallOptions::default(), tool).await
}

/// Calls `tool` for caller `subject`.
async fn call_as(
    upstreams: &Upstreams,
    subject: &str,
    tool: &str,
) -> Result<Value, ptc_core::ToolError> {
    let caller = ptc_core::credentials::identity::Caller {
        subject: subject.to_string(),
        ..ptc_core::credentials::identity::Caller::local()
    };
    let options = CallOptions {
        caller: Some(Arc::new(caller)),
        ..CallOptions::default()
    };
    call_with(upstreams, options, tool).await
}

async fn call_with(
    upstreams: &Upstreams,
    options: CallOptions,
    tool: &str,
) -> Result<Value, ptc_core::ToolError> {
    let out = upstreams.call("hosted", tool, Map::new(), options).await?;
    Ok(match out {
        ToolOutput::Text(t) => serde_json::from_str(&t).unwrap_or(Value::String(t)),
        ToolOutput::Json(bytes) => serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        ToolOutput::Empty => Value::Null,
    })
}

/// Upstreams calling `server` as the deployment: the client credentials grant of the issuer's
/// default client.
async fn as_the_deployment(server: &OAuthMcp) -> Upstreams {
    let (id, secret) = issuer::client();
    start(
        server,
        json!({"grant": "client_credentials", "client_id": id, "client_secret": "client"}),
        json!({"client": {"source": "literal", "value": secret}}),
        None,
    )
    .await
    .unwrap()
}

/// The authorization code grant, its redirect URI on loopback port `port`.
fn code_grant(port: u16) -> Value {
    json!({"grant": "authorization_code",
           "redirect_uri": format!("http://127.0.0.1:{port}/oauth/callback")})
}

/// Upstreams whose one upstream takes a person's grant (authorization code), with [`browser`]
/// as the person, and the count of authorization URLs they were shown.
async fn with_a_person(server: &OAuthMcp) -> (Upstreams, Arc<AtomicUsize>) {
    let (consent, shown) = browser();
    let upstreams = start(
        server,
        code_grant(ptc_tests::free_port()),
        json!({}),
        Some(consent),
    )
    .await
    .unwrap();
    (upstreams, shown)
}

#[tokio::test]
async fn the_deployment_calls_as_itself_with_the_client_credentials_grant() {
    let Some((_issuer, server)) = peers(&[]) else {
        return;
    };
    let upstreams = as_the_deployment(&server).await;
    let me = call(&upstreams, "whoami").await.unwrap();
    assert_eq!(me["sub"], issuer::client().0, "{me}");
    assert_eq!(server.calls().await[0]["sub"], issuer::client().0);
}

/// A person consents once (the client registered itself, RFC 7591); their grant serves the
/// calls that follow, and a call that needs more scope asks them again for it (step-up).
#[tokio::test]
async fn a_person_consents_once_and_again_only_for_more_scope() {
    let Some((issuer, server)) = peers(&[]) else {
        return;
    };
    let (upstreams, shown) = with_a_person(&server).await;
    assert_eq!(
        shown.load(Ordering::SeqCst),
        1,
        "consent at the first listing"
    );
    assert_eq!(issuer.registrations().await, 1);
    let me = call(&upstreams, "whoami").await.unwrap();
    assert_eq!(me["sub"], "alice", "{me}");
    call(&upstreams, "whoami").await.unwrap();
    assert_eq!(shown.load(Ordering::SeqCst), 1, "the grant is kept");

    let note = call(&upstreams, "admin_note").await.unwrap();
    assert!(!note.is_null(), "{note}");
    assert_eq!(shown.load(Ordering::SeqCst), 2, "asked again, for admin");
    let scopes: Vec<String> = issuer
        .authorizations()
        .await
        .iter()
        .map(|a| a["scope"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(scopes[1].split(' ').any(|s| s == "admin"), "{scopes:?}");
    assert_eq!(issuer.registrations().await, 1, "registered once");
}

/// Scopes the config names are asked for at the first consent, beside what the server's
/// challenge names: a call that needs one of them is served without asking again.
#[tokio::test]
async fn configured_scopes_are_asked_for_at_the_first_consent() {
    let Some((issuer, server)) = peers(&[]) else {
        return;
    };
    let (consent, shown) = browser();
    let mut oauth = code_grant(ptc_tests::free_port());
    oauth["scopes"] = json!(["read", "admin"]);
    let upstreams = start(&server, oauth, json!({}), Some(consent))
        .await
        .unwrap();
    let note = call(&upstreams, "admin_note").await.unwrap();
    assert_eq!(note["sub"], "alice", "{note}");
    assert_eq!(shown.load(Ordering::SeqCst), 1, "one consent, no step-up");
    let authorized = issuer.authorizations().await;
    assert_eq!(authorized.len(), 1, "{authorized:?}");
    let mut asked: Vec<&str> = authorized[0]["scope"]
        .as_str()
        .unwrap()
        .split(' ')
        .collect();
    asked.sort();
    // offline_access: asked for as the issuer offers it, for a refresh token.
    assert_eq!(asked, ["admin", "offline_access", "read"], "{authorized:?}");
}

/// A client named by a metadata document registers itself instead (RFC 7591) where the
/// authorization server does not take such documents (the test issuer's metadata does not say
/// `client_id_metadata_document_supported`, and refuses the document's URL as a client id), and
/// once: the person's second consent, for more scope, is given to the same registration.
#[tokio::test]
async fn a_metadata_document_client_registers_where_the_server_takes_none() {
    let Some((issuer, server)) = peers(&[]) else {
        return;
    };
    let (consent, _) = browser();
    let document = "https://agents.acme.example/oauth/client.json";
    let mut oauth = code_grant(ptc_tests::free_port());
    oauth["client_metadata_url"] = json!(document);
    let upstreams = start(&server, oauth, json!({}), Some(consent))
        .await
        .unwrap();
    let me = call(&upstreams, "whoami").await.unwrap();
    assert_eq!(me["sub"], "alice", "{me}");
    call(&upstreams, "admin_note").await.unwrap();
    assert_eq!(issuer.registrations().await, 1);
    let authorized = issuer.authorizations().await;
    assert_eq!(authorized.len(), 2, "{authorized:?}");
    assert_ne!(authorized[0]["client_id"], document, "{authorized:?}");
    assert_eq!(authorized[0]["client_id"], authorized[1]["client_id"]);
}

/// A token that expired is refreshed without asking anyone; a grant the person revoked is asked
/// for again.
#[tokio::test]
async fn an_expired_token_is_refreshed_and_a_revoked_grant_asked_again() {
    let Some((issuer, server)) = peers(&["--token-ttl", "2"]) else {
        return;
    };
    let (upstreams, shown) = with_a_person(&server).await;
    call(&upstreams, "whoami").await.unwrap();
    // Expiry is the behaviour under test, in real time: each token lives 2 s (the issuer's
    // clock counts whole seconds), and revoking a grant leaves its access token valid until then.
    let expiry = Duration::from_millis(2200);
    tokio::time::sleep(expiry).await;
    // The refreshed token is masked too, should the upstream echo it.
    let echoed = call(&upstreams, "echo_token").await.unwrap();
    assert!(
        echoed
            .as_str()
            .is_some_and(|t| t.contains("[REDACTED]") && !t.contains("eyJ")),
        "{echoed}"
    );
    assert_eq!(issuer.refreshes().await, 1);
    assert_eq!(shown.load(Ordering::SeqCst), 1);

    assert_eq!(issuer.revoke("alice").await, 1);
    tokio::time::sleep(expiry).await;
    let me = call(&upstreams, "whoami").await.unwrap();
    assert_eq!(me["sub"], "alice");
    assert_eq!(
        shown.load(Ordering::SeqCst),
        2,
        "the revoked grant is asked for again"
    );
}

/// A person who says no, and a process with nobody to ask: both are `auth_required`, naming the
/// URL to open.
#[tokio::test]
async fn no_consent_is_auth_required() {
    let Some((issuer, server)) = peers(&[]) else {
        return;
    };
    issuer.set_user("alice", true).await;
    let (upstreams, _) = with_a_person(&server).await;
    let e = call(&upstreams, "whoami").await.unwrap_err();
    assert_eq!(e.reason, Reason::AuthRequired, "{}", e.message);
    assert!(e.message.contains("access_denied"), "{}", e.message);
    assert!(
        e.message
            .contains(&format!("open {}", issuer.authorization_endpoint())),
        "{}",
        e.message
    );

    let nobody = start(&server, code_grant(ptc_tests::free_port()), json!({}), None)
        .await
        .unwrap();
    let e = call(&nobody, "whoami").await.unwrap_err();
    assert_eq!(e.reason, Reason::AuthRequired, "{}", e.message);
    assert!(
        e.message
            .contains(&format!("open {}", issuer.authorization_endpoint())),
        "{}",
        e.message
    );
    assert!(server.calls().await.as_array().unwrap().is_empty());
}

/// Two people, each with their own grant: each call is served by its caller's token, never the
/// other's, and each person is asked once.
#[tokio::test]
async fn each_caller_is_served_by_their_own_grant() {
    let Some((issuer, server)) = peers(&[]) else {
        return;
    };
    let (upstreams, shown) = with_a_person(&server).await;
    // Start-up listed the tools with the process's own grant (the terminal's person, alice).
    let asked_at_start = shown.load(Ordering::SeqCst);
    issuer.set_user("bob", false).await;
    assert_eq!(
        call_as(&upstreams, "bob", "whoami").await.unwrap()["sub"],
        "bob"
    );
    issuer.set_user("alice", false).await;
    assert_eq!(
        call_as(&upstreams, "alice", "whoami").await.unwrap()["sub"],
        "alice"
    );
    // Whoever the issuer would ask now, each caller keeps their own grant.
    issuer.set_user("mallory", false).await;
    assert_eq!(
        call_as(&upstreams, "bob", "whoami").await.unwrap()["sub"],
        "bob"
    );
    assert_eq!(
        call_as(&upstreams, "alice", "whoami").await.unwrap()["sub"],
        "alice"
    );
    assert_eq!(shown.load(Ordering::SeqCst), asked_at_start + 2);
    let served: Vec<String> = server
        .calls()
        .await
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["sub"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(served, ["bob", "alice", "bob", "alice"]);
}

/// A host's caller consents through their own MCP client (the Python SDK's): asked to open the
/// link (URL elicitation on 2025-11-25, an `input_required` round on 2026-07-28), their browser
/// goes to the issuer and comes back to the host's own callback route, and the program goes on;
/// the grant then serves their next programs without asking. One who declines gets
/// `auth_required`, and nothing reaches the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_s_caller_consents_through_their_mcp_client() {
    let Some((_issuer, server)) = peers(&[]) else {
        return;
    };
    let Some(python) = ptc_tests::host_clients::python() else {
        return;
    };
    let mut served = 0;
    for mode in ["legacy", "2026-07-28"] {
        // The host's port is known before it starts: the redirect URI names it.
        let port = ptc_tests::free_port();
        let upstreams = start(&server, code_grant(port), json!({}), None)
            .await
            .unwrap();
        let evaluator = ptc_core::server::Evaluator::new(
            Arc::new(upstreams),
            tokio::runtime::Handle::current(),
            ptc_core::server::EvalLimits::default(),
        )
        .unwrap();
        let options = ptc_core::server::HttpOptions {
            addr: format!("127.0.0.1:{port}").parse().unwrap(),
            ..ptc_core::server::HttpOptions::default()
        };
        let host = support::serve_at(evaluator, options).await;
        let program = json!({"program": "(tool/call 'hosted/whoami {})"});
        // (the person's answer, whether the call went through, links shown)
        for (answer, through, asked) in [
            ("decline", false, 1),
            ("approve", true, 1),
            ("approve", true, 0),
        ] {
            let spec = json!({"transport": "http", "url": host.url, "mode": mode,
                              "elicitation": answer, "programs": [program]});
            let python = python.clone();
            let out =
                tokio::task::spawn_blocking(move || ptc_tests::host_clients::run(&python, &spec))
                    .await
                    .unwrap();
            let text = out["calls"][0]["text"].as_str().unwrap_or("").to_string();
            let seen = out["elicitations"].as_array().cloned().unwrap_or_default();
            assert_eq!(seen.len(), asked, "{mode} {answer}: {out}");
            for e in &seen {
                let url = e["url"].as_str().unwrap_or("");
                assert!(
                    url.contains("/authorize?") && url.contains("state="),
                    "{out}"
                );
                assert!(e["message"].as_str().unwrap().contains("`hosted`"), "{out}");
            }
            match through {
                true => {
                    served += 1;
                    assert!(text.contains("alice"), "{mode} {answer}: {text}");
                }
                false => assert!(
                    text.contains("auth_required") && text.contains("/authorize?"),
                    "{mode} {answer}: {text}"
                ),
            }
            let calls = server.calls().await.as_array().unwrap().len();
            assert_eq!(
                calls, served,
                "{mode} {answer}: only consented calls reach it"
            );
        }
        drop(host);
    }
}

/// Two replicas sharing a Redis: a person who consented through one is served through the other
/// without being asked again; the grant is sealed at rest (no token in Redis's memory), and a
/// replica with another key cannot use it (it asks again).
#[tokio::test]
async fn a_replica_continues_a_grant_kept_sealed_in_redis() {
    use ptc_core::credentials::upstream_oauth::Grants;
    use ptc_core::server::state::{RedisStore, grants::StoredGrants};
    let Some((_issuer, server)) = peers(&[]) else {
        return;
    };
    let Some(redis) = ptc_tests::redis::start() else {
        return;
    };
    let store = Arc::new(RedisStore::open(&redis.url).unwrap());
    let sealed = |key: u8| {
        Arc::new(Grants::sealed(Arc::new(StoredGrants(store.clone())), &[key; 32]).unwrap())
    };
    let (consent, shown) = browser();
    let one = start_with(
        &server,
        code_grant(ptc_tests::free_port()),
        json!({}),
        Some(consent.clone()),
        sealed(1),
    )
    .await
    .unwrap();
    assert_eq!(
        call_as(&one, "alice", "whoami").await.unwrap()["sub"],
        "alice"
    );
    let asked = shown.load(Ordering::SeqCst);

    let two = start_with(
        &server,
        code_grant(ptc_tests::free_port()),
        json!({}),
        Some(consent.clone()),
        sealed(1),
    )
    .await
    .unwrap();
    assert_eq!(
        call_as(&two, "alice", "whoami").await.unwrap()["sub"],
        "alice"
    );
    // Nobody was asked through replica two: its start-up listing (the process's own grant) and
    // alice's call both found their grants in Redis.
    assert_eq!(shown.load(Ordering::SeqCst), asked);

    // Nothing readable at rest: Redis's append-only file, every write it took, holds the
    // grant records and no token.
    let written = files_under(&redis.dir);
    assert!(written.contains("ptc:state:v1:"), "the grants were written");
    assert!(
        !written.contains("access_token") && !written.contains("eyJ"),
        "a token in Redis's files"
    );

    let stranger = start_with(
        &server,
        code_grant(ptc_tests::free_port()),
        json!({}),
        Some(consent),
        sealed(2),
    )
    .await
    .unwrap();
    let before = shown.load(Ordering::SeqCst);
    assert_eq!(
        call_as(&stranger, "alice", "whoami").await.unwrap()["sub"],
        "alice"
    );
    assert!(
        shown.load(Ordering::SeqCst) > before,
        "another key opens nothing: alice is asked"
    );
}

/// Everything in the files under `dir`, as text.
fn files_under(dir: &std::path::Path) -> String {
    let mut out = String::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.push_str(&files_under(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push_str(&String::from_utf8_lossy(&bytes));
        }
    }
    out
}

/// An MCP upstream called with each caller's own token exchanged for one meant for it (RFC 8693,
/// `caller_token_exchange`): each caller's calls carry a token with their subject and ptc as the
/// actor, over a session of their own; the caller's own token never reaches the upstream.
#[tokio::test]
async fn each_caller_s_token_is_exchanged_for_the_upstream() {
    let Some((issuer, server)) = peers(&[]) else {
        return;
    };
    // Listed at start as everything is: for nobody there is no token to exchange, so it waits
    // for its first caller rather than fail the start.
    let upstreams = load(&server.as_each_caller(&issuer)).await;
    let mut callers = Vec::new();
    for sub in ["alice", "bob"] {
        // The caller's own token, as the host's identity check accepted it (meant for the host).
        let own = issuer.caller_token(sub).await;
        callers.push((sub, own));
    }
    for (sub, own) in callers.iter().chain(callers.iter()) {
        let me = call_with(&upstreams, holding(sub, own), "whoami")
            .await
            .unwrap();
        assert_eq!(me["sub"], *sub, "{me}");
    }
    let served: Vec<String> = server
        .calls()
        .await
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["sub"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(served, ["alice", "bob", "alice", "bob"]);
    // One exchange per caller: the second call of each used the token exchanged for it.
    assert_eq!(upstreams.exchanges().made(), 2);

    // Alice comes back with a new token (hers was renewed): her session reads it from this
    // call on, so it is the one exchanged.
    let renewed = issuer.caller_token("alice").await;
    assert_ne!(renewed, callers[0].1);
    let me = call_with(&upstreams, holding("alice", &renewed), "whoami")
        .await
        .unwrap();
    assert_eq!(me["sub"], "alice", "{me}");
    assert_eq!(
        upstreams.exchanges().made(),
        3,
        "the renewed token exchanged"
    );
    let sessions = upstreams.caller_sessions();
    assert_eq!(sessions.len(), 1);
    assert_eq!(
        sessions[0]
            .1
            .opened
            .load(std::sync::atomic::Ordering::Relaxed),
        2
    );
}

/// A careless upstream that answers with the very token it was called with: the program sees it
/// masked, with a grant ptc obtained (client credentials) as with a person's.
#[tokio::test]
async fn a_token_an_upstream_echoes_is_masked() {
    let Some((_issuer, server)) = peers(&[]) else {
        return;
    };
    let deployment = as_the_deployment(&server).await;
    let (consent, _) = browser();
    let person = start(
        &server,
        code_grant(ptc_tests::free_port()),
        json!({}),
        Some(consent),
    )
    .await
    .unwrap();
    for upstreams in [&deployment, &person] {
        let echoed = call(upstreams, "echo_token").await.unwrap();
        let text = echoed.as_str().unwrap_or_default();
        assert!(text.starts_with("your token is "), "{text}");
        assert!(text.contains("[REDACTED]"), "{text}");
        // A JWT's header starts `eyJ` (`{"` in base64url): none got through.
        assert!(!text.contains("eyJ"), "{text}");
    }
}

/// A token the upstream stops taking before it says it expires (revoked at the server) is
/// refreshed on the 401, once, without asking anyone again.
#[tokio::test]
async fn a_token_refused_early_is_refreshed_without_asking_again() {
    let Some((issuer, server)) = peers(&[]) else {
        return;
    };
    let (upstreams, shown) = with_a_person(&server).await;
    call(&upstreams, "whoami").await.unwrap();
    server.refuse_seen().await;
    let me = call(&upstreams, "whoami").await.unwrap();
    assert_eq!(me["sub"], "alice");
    assert_eq!(issuer.refreshes().await, 1);
    assert_eq!(shown.load(Ordering::SeqCst), 1, "nobody asked again");
}

/// The sessions of an upstream called as the caller are bounded at their limit: one caller more
/// than it closes the least recently used caller's session, whose next call opens a new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caller_sessions_are_bounded_at_their_limit() {
    use ptc_core::program::limits::MAX_CALLER_SESSIONS;
    let Some((issuer, server)) = peers(&[]) else {
        return;
    };
    let upstreams = load(&server.as_each_caller(&issuer)).await;
    let as_caller = |n: usize, own: &str| holding(&format!("person-{n}"), own);
    let mut tokens = Vec::new();
    for n in 0..=MAX_CALLER_SESSIONS {
        let own = issuer.caller_token(&format!("person-{n}")).await;
        tokens.push(own);
    }
    // (open, opened, evicted)
    let counts = || {
        let c = upstreams.caller_sessions()[0].1;
        let read = |n: &std::sync::atomic::AtomicU64| n.load(Ordering::Relaxed);
        (read(&c.open), read(&c.opened), read(&c.evicted))
    };
    // Up to the limit, every caller keeps a session.
    for (n, own) in tokens.iter().enumerate().take(MAX_CALLER_SESSIONS) {
        let me = call_with(&upstreams, as_caller(n, own), "whoami")
            .await
            .unwrap();
        assert_eq!(me["sub"], format!("person-{n}"), "{me}");
    }
    let max = MAX_CALLER_SESSIONS as u64;
    assert_eq!(counts(), (max, max, 0));
    // One more: the first caller's session (the least recently used) is closed for it.
    let last = MAX_CALLER_SESSIONS;
    let me = call_with(&upstreams, as_caller(last, &tokens[last]), "whoami")
        .await
        .unwrap();
    assert_eq!(me["sub"], format!("person-{last}"), "{me}");
    assert_eq!(counts(), (max, max + 1, 1));
    // The second caller's is still there; the first caller's next call opens a new one.
    call_with(&upstreams, as_caller(1, &tokens[1]), "whoami")
        .await
        .unwrap();
    assert_eq!(counts(), (max, max + 1, 1), "kept");
    let me = call_with(&upstreams, as_caller(0, &tokens[0]), "whoami")
        .await
        .unwrap();
    assert_eq!(me["sub"], "person-0", "{me}");
    assert_eq!(counts(), (max, max + 2, 2));
}
