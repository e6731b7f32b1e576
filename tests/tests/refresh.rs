//! Catalog refresh on a running HTTP host: `POST /admin/refresh` behind its own token re-reads
//! the config, reports added, removed and changed tools by name, and swaps the catalog for new
//! evaluations while a running one finishes on the catalog it started with; a config that no
//! longer compiles is refused and the catalog in force stays.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ptc_core::server::http::Running;
use ptc_core::server::{EvalLimits, EvalRequest, Evaluator, HttpOptions, Reload, serve_http};
use ptc_core::{StartOptions, Upstreams};
use serde_json::{Value, json};
use tokio::sync::{Notify, oneshot};

mod support;
use support::{Session, message_with_id};

const CLIENT_TOKEN: &str = "client-token-0123456789abcdef0123456789";
const ADMIN_TOKEN: &str = "admin-token-fedcba9876543210fedcba98765";

/// The upstream: `/a`, `/b`, `/c` answer at once; `/slow` tells `reached` it was called and
/// answers when `release` is notified.
async fn upstream(reached: oneshot::Sender<()>, release: Arc<Notify>) -> String {
    let reached = Arc::new(Mutex::new(Some(reached)));
    let answer = || async { axum::Json(json!({"ok": true})) };
    let app = axum::Router::new()
        .route("/a", axum::routing::get(answer))
        .route("/b", axum::routing::get(answer))
        .route("/c", axum::routing::get(answer))
        .route(
            "/slow",
            axum::routing::get(move || {
                let (reached, release) = (reached.clone(), release.clone());
                async move {
                    let released = release.notified();
                    if let Some(tx) = reached.lock().unwrap().take() {
                        let _ = tx.send(());
                    }
                    released.await;
                    axum::Json(json!({"ok": true}))
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}")
}

fn document(b_summary: &str) -> Value {
    let op = |id: &str, summary: &str| {
        json!({"get": {"operationId": id, "summary": summary,
            "responses": {"200": {"description": "ok",
                "content": {"application/json": {"schema": {"type": "object"}}}}}}})
    };
    json!({"openapi": "3.0.3", "info": {"title": "api", "version": "1"}, "paths": {
        "/a": op("a", "A"), "/b": op("b", b_summary), "/c": op("c", "C"), "/slow": op("slow", "Slow")}})
}

/// Writes the config (and its document) with `operations` included.
fn write_config(dir: &Path, base: &str, operations: &[&str], b_summary: &str) -> PathBuf {
    std::fs::write(dir.join("api.json"), document(b_summary).to_string()).unwrap();
    let config = dir.join("upstreams.json");
    let text = json!({"upstreams": {"api": {"transport": "openapi", "base_url": base,
        "allow_insecure_http": true, "schema_file": "api.json",
        "include_operations": operations}}});
    std::fs::write(&config, text.to_string()).unwrap();
    config
}

async fn start(config: &Path) -> Result<Upstreams, String> {
    let loaded = ptc_plan::load(config).map_err(|d| d.to_string())?;
    Upstreams::start(loaded.plan, loaded.secrets, StartOptions::default())
        .await
        .map_err(|e| e.to_string())
}

async fn eval(ev: &Evaluator, program: &str) -> String {
    let out = ev
        .eval(
            EvalRequest {
                program: program.into(),
                context: None,
                output_schema: None,
                ..EvalRequest::default()
            },
            Default::default(),
        )
        .await;
    match out.result {
        Ok(v) => v.text,
        Err(e) => format!("error: {}", e.message),
    }
}

/// A host over `config` that refreshes from it, serving HTTP with the clients' token (and the
/// admin endpoint with `admin`, when given) until the sender is used.
async fn refreshable(
    config: &Path,
    admin: Option<&str>,
) -> (Arc<Evaluator>, Running, oneshot::Sender<()>) {
    let ev = Evaluator::new(
        Arc::new(start(config).await.unwrap()),
        tokio::runtime::Handle::current(),
        EvalLimits::default(),
    )
    .unwrap();
    let path = config.to_path_buf();
    let reload: Reload = Arc::new(move || {
        let path = path.clone();
        Box::pin(async move { start(&path).await })
    });
    ev.set_reload(reload);
    let (stop, stopped) = oneshot::channel::<()>();
    let running = serve_http(
        ev.clone(),
        HttpOptions {
            addr: "127.0.0.1:0".parse().unwrap(),
            token: Some(CLIENT_TOKEN.into()),
            admin_token: admin.map(str::to_string),
            ..HttpOptions::default()
        },
        async {
            let _ = stopped.await;
        },
    )
    .await
    .unwrap();
    (ev, running, stop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_refresh_swaps_the_catalog_for_new_evaluations_only() {
    let dir = std::env::temp_dir().join(format!("ptc-refresh-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (reached_tx, reached) = oneshot::channel();
    let release = Arc::new(Notify::new());
    let base = upstream(reached_tx, release.clone()).await;
    let config = write_config(&dir, &base, &["a", "b", "slow"], "B");
    let (ev, running, stop) = refreshable(&config, Some(ADMIN_TOKEN)).await;
    let refresh_url = format!("http://{}/admin/refresh", running.addr);
    let http = reqwest::Client::new();
    let refresh = |token: Option<&'static str>| {
        let mut rb = http.post(&refresh_url);
        if let Some(t) = token {
            rb = rb.bearer_auth(t);
        }
        async move {
            let r = rb.send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    // A client session opened on the first catalog, and what it lists.
    let session = Session::open(&format!("http://{}/mcp", running.addr), Some(CLIENT_TOKEN)).await;
    let listed = || async {
        let msg = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"});
        let body = session.send(&msg).await.text().await.unwrap();
        let reply = message_with_id(&body, 7).unwrap();
        reply["result"]["tools"][0]["description"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let first = listed().await;
    assert!(
        first.contains("api/a") && !first.contains("api/c"),
        "{first}"
    );

    // Its own token: none, or the clients', is refused.
    assert_eq!(refresh(None).await.0, 401);
    assert_eq!(refresh(Some(CLIENT_TOKEN)).await.0, 401);

    // A program starts on the first catalog and waits on the slow upstream.
    let ev2 = ev.clone();
    let before = tokio::spawn(async move {
        eval(
            &ev2,
            "(do (api/slow {}) [(:ok (api/a {})) (:ok (api/b {}))])",
        )
        .await
    });
    reached.await.unwrap();

    // The config drops `a`, adds `c` and changes `b`; the refresh says so by name.
    write_config(&dir, &base, &["b", "c", "slow"], "B, renamed");
    let (status, body) = refresh(Some(ADMIN_TOKEN)).await;
    assert_eq!(status, 200, "{body}");
    let diff: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(diff["added"], json!(["api/c"]));
    assert_eq!(diff["removed"], json!(["api/a"]));
    assert_eq!(
        diff["changed"],
        json!([{"tool": "api/b", "what": ["description"]}])
    );
    assert_eq!(diff["unchanged"], 1);

    // The running program finishes on the catalog it started with: `a` is still there for it.
    release.notify_one();
    assert_eq!(before.await.unwrap(), "[true true]");
    // New programs see the new catalog, and the session opened before lists it.
    assert_eq!(eval(&ev, "(:ok (api/c {}))").await, "true");
    let now = listed().await;
    assert!(now.contains("api/c") && !now.contains("api/a"), "{now}");
    let gone = eval(&ev, "(api/a {})").await;
    assert!(gone.contains("no tool `a` in upstream `api`"), "{gone}");

    // A config that no longer compiles is refused; the catalog in force stays.
    std::fs::write(
        &config,
        "{\"upstreams\": {\"api\": {\"transport\": \"openapi\"}}}",
    )
    .unwrap();
    let (status, body) = refresh(Some(ADMIN_TOKEN)).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body.starts_with("the catalog was not refreshed: ") && body.contains("base_url"),
        "{body}"
    );
    assert_eq!(eval(&ev, "(:ok (api/c {}))").await, "true");

    let _ = stop.send(());
    running.done.await.unwrap().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A client of the official Rust SDK that counts the `tools/list_changed` notifications its
/// session receives (an older-era session gets them here).
#[derive(Clone)]
struct Counting(tokio::sync::mpsc::UnboundedSender<()>);

impl rmcp::ClientHandler for Counting {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        rmcp::model::ClientConfig::new(
            rmcp::model::ClientCapabilities::default(),
            rmcp::model::Implementation::new("refresh-test", "1"),
        )
    }

    fn on_tool_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        let _ = self.0.send(());
        std::future::ready(())
    }
}

/// A session of `version`'s era with the host at `url`, and the notifications it is told of.
/// A newer-era session opens a `subscriptions/listen` stream for them, as its clients do.
async fn listening_session(
    url: &str,
    version: rmcp::model::ProtocolVersion,
) -> (
    rmcp::service::RunningService<rmcp::RoleClient, Counting>,
    tokio::sync::mpsc::UnboundedReceiver<()>,
) {
    use rmcp::service::ClientServiceExt;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let mut config =
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url);
    config.auth_header = Some(CLIENT_TOKEN.into());
    let transport = rmcp::transport::StreamableHttpClientTransport::from_config(config);
    let newer = version >= rmcp::model::ProtocolVersion::V_2026_07_28;
    let lifecycle = if newer {
        rmcp::service::ClientLifecycleMode::Discover {
            preferred_versions: vec![version],
        }
    } else {
        rmcp::service::ClientLifecycleMode::Initialize
    };
    let service = Counting(tx.clone())
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .unwrap();
    if newer {
        let filter = rmcp::model::SubscriptionFilter::builder()
            .tools_list_changed()
            .build();
        let mut subscription = service.peer().listen(filter).await.unwrap();
        assert_eq!(subscription.acknowledged().tools_list_changed, Some(true));
        tokio::spawn(async move {
            while let Ok(Some(n)) = subscription.next().await {
                if matches!(
                    n,
                    rmcp::model::ServerNotification::ToolListChangedNotification(_)
                ) {
                    let _ = tx.send(());
                }
            }
        });
    }
    (service, rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_that_changes_the_tools_tells_the_sessions_open_in_both_eras() {
    let dir = std::env::temp_dir().join(format!("ptc-refresh-told-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (reached_tx, _reached) = oneshot::channel();
    let base = upstream(reached_tx, Arc::new(Notify::new())).await;
    let config = write_config(&dir, &base, &["a", "b"], "B");
    let (ev, running, stop) = refreshable(&config, None).await;
    let url = format!("http://{}/mcp", running.addr);
    let (older, mut older_told) =
        listening_session(&url, rmcp::model::ProtocolVersion::V_2025_11_25).await;
    let (newer, mut newer_told) =
        listening_session(&url, rmcp::model::ProtocolVersion::V_2026_07_28).await;
    for session in [older.peer(), newer.peer()] {
        let caps = session.peer_info().unwrap().capabilities.clone();
        assert_eq!(caps.tools.unwrap().list_changed, Some(true), "advertised");
    }

    // A refresh that changes no tool tells nobody.
    let diff = ev.refresh().await.unwrap();
    assert!(!diff.changes_tools());
    assert_eq!(diff.told, 0);

    // One that adds a tool tells both sessions, each in its era's way; they list the new tool.
    write_config(&dir, &base, &["a", "b", "c"], "B");
    let diff = ev.refresh().await.unwrap();
    assert_eq!(diff.added, ["api/c"]);
    assert_eq!(diff.told, 2, "{}", diff.summary());
    assert!(
        diff.summary().ends_with("; 2 sessions told"),
        "{}",
        diff.summary()
    );
    older_told.recv().await.unwrap();
    newer_told.recv().await.unwrap();
    for session in [older.peer(), newer.peer()] {
        let tools = session.list_tools(None).await.unwrap();
        let description = tools.tools[0].description.as_deref().unwrap_or_default();
        assert!(description.contains("api/c"), "{description}");
    }

    // A session that ended is not told again; the one still open is.
    older.cancel().await.unwrap();
    write_config(&dir, &base, &["a", "b"], "B");
    let diff = ev.refresh().await.unwrap();
    assert_eq!(diff.removed, ["api/c"]);
    assert_eq!(diff.told, 1, "{}", diff.summary());
    newer_told.recv().await.unwrap();

    newer.cancel().await.unwrap();
    let _ = stop.send(());
    running.done.await.unwrap().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The admin token is a token of its own: too short, or the clients' own, is a start-up error.
#[test]
fn the_admin_token_is_long_and_not_the_clients() {
    let options = |admin: &str| HttpOptions {
        token: Some(CLIENT_TOKEN.into()),
        admin_token: Some(admin.into()),
        ..HttpOptions::default()
    };
    assert!(options(ADMIN_TOKEN).validate().is_ok());
    let e = options(&"x".repeat(31)).validate().unwrap_err();
    assert_eq!(
        e,
        "the admin token is 31 characters; use at least 32 (e.g. `openssl rand -hex 32`)"
    );
    assert!(options(&"x".repeat(32)).validate().is_ok());
    let e = options(CLIENT_TOKEN).validate().unwrap_err();
    assert!(
        e.contains("must differ from the clients' bearer token"),
        "{e}"
    );
}
