//! The OAuth client of an `mcp_http` upstream against authorization servers that misbehave: each
//! refusal is an `auth_failed` naming the upstream and the rule, nothing hangs, and no secret
//! reaches the message. (The well-behaved flows, and the suite's own hostile ones, such as an
//! issuer mismatch or a missing `iss`, run in the MCP conformance suite: see
//! ptc-cli/tests/conformance_client.rs.)
//!
//! The "upstream" here answers every request with a 401 challenge whose protected resource
//! metadata names an authorization server this test serves, lying as each test needs.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use ptc_core::credentials::redact::Redactor;
use ptc_core::wire::mcp::McpClient;
use ptc_core::{Reason, ToolError};
use serde_json::{Value, json};

const SECRET: &str = "client-secret-canary-51c0ffee";

/// What the lying authorization server answers.
#[derive(Clone)]
struct Lies {
    /// Its metadata document (the body, served as JSON).
    metadata: Arc<dyn Fn(&str) -> String + Send + Sync>,
    /// Its token endpoint's answer.
    token: (StatusCode, String),
    /// Where its token endpoint redirects (a `Location` header on its answer), if anywhere.
    token_location: Option<String>,
}

/// Serves the upstream and its authorization server on one loopback port; the URL of the MCP
/// endpoint, and how many requests reached the token endpoint.
async fn serve(lies: Lies) -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let tokens = Arc::new(AtomicUsize::new(0));
    let prm = {
        let base = base.clone();
        move || async move {
            axum::Json(json!({
                "resource": format!("{base}/mcp"),
                "authorization_servers": [format!("{base}/as")],
            }))
        }
    };
    let metadata = {
        let (base, lies) = (base.clone(), lies.clone());
        move || async move {
            (
                [(header::CONTENT_TYPE, "application/json")],
                (lies.metadata)(&base),
            )
        }
    };
    let token = {
        let (tokens, answer) = (tokens.clone(), lies.token.clone());
        let location = lies.token_location.clone().unwrap_or_default();
        move || async move {
            tokens.fetch_add(1, Ordering::SeqCst);
            (
                answer.0,
                [
                    (header::CONTENT_TYPE, "application/json".to_string()),
                    (header::LOCATION, location),
                ],
                answer.1,
            )
        }
    };
    let challenge = {
        let base = base.clone();
        move |_: HeaderMap| async move {
            let value = format!(
                "Bearer resource_metadata=\"{base}/.well-known/oauth-protected-resource/mcp\""
            );
            (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, value)],
                "",
            )
                .into_response()
        }
    };
    let app = axum::Router::new()
        .route("/mcp", post(challenge.clone()).get(challenge))
        .route("/.well-known/oauth-protected-resource/mcp", get(prm))
        .route(
            "/.well-known/oauth-authorization-server/as",
            get(metadata.clone()),
        )
        .route(
            "/.well-known/openid-configuration/as",
            get(metadata.clone()),
        )
        .route("/as/.well-known/openid-configuration", get(metadata))
        .route("/as/token", post(token));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("{base}/mcp"), tokens)
}

/// Honest metadata at `base`, with `edit` applied.
fn metadata(
    edit: impl Fn(&mut Value) + Send + Sync + 'static,
) -> Arc<dyn Fn(&str) -> String + Send + Sync> {
    Arc::new(move |base: &str| {
        let mut m = json!({
            "issuer": format!("{base}/as"),
            "authorization_endpoint": format!("{base}/as/authorize"),
            "token_endpoint": format!("{base}/as/token"),
            "grant_types_supported": ["client_credentials"],
            "token_endpoint_auth_methods_supported": ["client_secret_post"],
            "code_challenge_methods_supported": ["S256"],
            "response_types_supported": ["code"],
        });
        edit(&mut m);
        m.to_string()
    })
}

/// Connects to `url` as upstream `hosted` with the client credentials grant.
async fn connect(url: &str) -> Result<McpClient, ToolError> {
    let config = json!({
        "credentials": {"hosted-client": {"source": "literal", "value": SECRET}},
        "upstreams": {"hosted": {
            "transport": "mcp_http", "url": url,
            "allow_insecure_http": true, "allow_insecure_auth": true,
            "handshake_timeout_ms": 5000,
            "oauth": {"grant": "client_credentials", "client_id": "ptc",
                      "client_secret": "hosted-client"},
        }},
    });
    let loaded = ptc_plan::load_str(
        &config.to_string(),
        std::path::Path::new("upstreams.json"),
        &ptc_plan::FileSource,
    )
    .unwrap_or_else(|d| panic!("{d}"));
    let ptc_plan::Transport::McpHttp(plan) = &loaded.plan.upstream("hosted").unwrap().transport
    else {
        panic!("an mcp_http upstream");
    };
    let redactor = Redactor::new();
    redactor.register(SECRET);
    McpClient::connect_http(
        "hosted",
        plan,
        &loaded.plan.credentials,
        &loaded.secrets,
        redactor,
    )
    .await
}

fn refused(result: Result<McpClient, ToolError>) -> ToolError {
    let e = result.err().expect("the connection is refused");
    assert!(!e.message.contains(SECRET), "{}", e.message);
    assert!(e.message.starts_with("upstream `hosted`"), "{}", e.message);
    e
}

#[tokio::test]
async fn a_token_endpoint_off_loopback_over_plain_http_gets_no_secret() {
    let (url, tokens) = serve(Lies {
        metadata: metadata(|m| m["token_endpoint"] = json!("http://auth.example.com/token")),
        token: (StatusCode::OK, "{}".into()),
        token_location: None,
    })
    .await;
    let e = refused(connect(&url).await);
    assert_eq!(e.reason, Reason::AuthFailed, "{}", e.message);
    assert!(
        e.message
            .contains("token_endpoint `http://auth.example.com/token` is not https"),
        "{}",
        e.message
    );
    assert_eq!(tokens.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn metadata_that_is_not_json_or_too_large_is_refused_with_the_step() {
    for body in ["{\"issuer\": ", &"x".repeat(2 << 20)] {
        let body = body.to_string();
        let (url, tokens) = serve(Lies {
            metadata: Arc::new(move |_| body.clone()),
            token: (StatusCode::OK, "{}".into()),
            token_location: None,
        })
        .await;
        let e = refused(connect(&url).await);
        assert_eq!(e.reason, Reason::AuthFailed, "{}", e.message);
        assert!(
            e.message
                .contains("discovering the authorization server failed"),
            "{}",
            e.message
        );
        assert_eq!(tokens.load(Ordering::SeqCst), 0);
    }
}

#[tokio::test]
async fn a_refused_client_is_auth_failed_with_the_server_s_error_and_no_secret() {
    let (url, tokens) = serve(Lies {
        metadata: metadata(|_| {}),
        token: (
            StatusCode::UNAUTHORIZED,
            json!({"error": "invalid_client",
                   "error_description": format!("bad secret {SECRET}")})
            .to_string(),
        ),
        token_location: None,
    })
    .await;
    let e = refused(connect(&url).await);
    assert_eq!(e.reason, Reason::AuthFailed, "{}", e.message);
    assert!(
        e.message
            .contains("the client credentials grant was refused"),
        "{}",
        e.message
    );
    assert!(e.message.contains("invalid_client"), "{}", e.message);
    assert_eq!(tokens.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_issuer_that_names_another_server_is_refused() {
    let (url, tokens) = serve(Lies {
        metadata: metadata(|m| m["issuer"] = json!("https://elsewhere.example.com")),
        token: (StatusCode::OK, "{}".into()),
        token_location: None,
    })
    .await;
    let e = refused(connect(&url).await);
    assert_eq!(e.reason, Reason::AuthFailed, "{}", e.message);
    assert_eq!(tokens.load(Ordering::SeqCst), 0, "{}", e.message);
}

/// A server that keeps answering 401 after each new grant is not asked forever: the connection
/// fails after the bounded number of grants, with the refusal.
#[tokio::test]
async fn grants_the_server_keeps_refusing_are_bounded() {
    let (url, tokens) = serve(Lies {
        metadata: metadata(|_| {}),
        token: (
            StatusCode::OK,
            json!({"access_token": "at-refused-again", "token_type": "Bearer",
                   "expires_in": 3600})
            .to_string(),
        ),
        token_location: None,
    })
    .await;
    let e = refused(connect(&url).await);
    assert_eq!(e.reason, Reason::AuthFailed, "{}", e.message);
    assert!(!e.message.contains("at-refused-again"), "{}", e.message);
    // The first grant and the step-ups allowed after it; then the refusal stands.
    let grants = tokens.load(Ordering::SeqCst);
    assert_eq!(
        grants as u32,
        1 + ptc_plan::McpOAuthPlan::MAX_STEP_UPS,
        "{}",
        e.message
    );
}

/// A token endpoint that redirects elsewhere is not followed: the client secret is never sent to
/// the other host.
#[tokio::test]
async fn a_token_endpoint_that_redirects_elsewhere_is_not_followed() {
    let elsewhere = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let other = format!("http://{}/steal", elsewhere.local_addr().unwrap());
    let stolen = Arc::new(AtomicUsize::new(0));
    let count = stolen.clone();
    let app = axum::Router::new().route(
        "/steal",
        post(move || {
            count.fetch_add(1, Ordering::SeqCst);
            async { "{}" }
        }),
    );
    tokio::spawn(async move { axum::serve(elsewhere, app).await });
    let (url, tokens) = serve(Lies {
        metadata: metadata(|_| {}),
        token: (StatusCode::TEMPORARY_REDIRECT, String::new()),
        token_location: Some(other),
    })
    .await;
    let e = refused(connect(&url).await);
    assert_eq!(e.reason, Reason::AuthFailed, "{}", e.message);
    assert_eq!(tokens.load(Ordering::SeqCst), 1);
    assert_eq!(stolen.load(Ordering::SeqCst), 0, "{}", e.message);
}
