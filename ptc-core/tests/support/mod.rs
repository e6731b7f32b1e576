//! A loopback HTTP fixture with one route per edge case, plus a deployment (config, OpenAPI
//! document, token file) pointing at it, compiled with ptc-plan like any other.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// What the fixture saw of one request.
#[derive(Clone, Debug)]
pub struct Seen {
    /// Path and query exactly as sent.
    pub target: String,
    /// Headers, names lowercased.
    pub headers: Vec<(String, String)>,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
pub struct FixtureState {
    pub seen: Mutex<Vec<Seen>>,
    /// The bearer token `/secure` accepts.
    pub expected_token: Mutex<String>,
    /// `/flaky` answers 503 this many more times.
    pub flaky_left: AtomicU32,
    /// Base URL of another origin, for `/redirect/cross`.
    pub other_origin: Mutex<String>,
    /// When set, a 401 from `/secure` also rotates the credential: the file gets this token and
    /// the fixture starts accepting it (a deployment rotating while a request is in flight).
    pub rotate_on_401: Mutex<Option<(PathBuf, String)>>,
    /// Requests currently being served (for concurrency checks).
    pub in_flight: AtomicU64,
    pub max_in_flight: AtomicU64,
}

pub struct Fixture {
    pub addr: SocketAddr,
    pub state: Arc<FixtureState>,
    _shutdown: tokio::sync::oneshot::Sender<()>,
}

impl Fixture {
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    pub fn last(&self) -> Seen {
        self.seen()
            .last()
            .cloned()
            .expect("a request reached the fixture")
    }
}

/// Starts the fixture on a free loopback port, on the current runtime.
pub async fn start() -> Fixture {
    let state = Arc::new(FixtureState::default());
    let app = axum::Router::new()
        .fallback(handle)
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = rx.await;
            })
            .await
            .unwrap();
    });
    Fixture {
        addr,
        state,
        _shutdown: tx,
    }
}

fn json_response(status: StatusCode, body: Value) -> Response {
    let mut r = (status, body.to_string()).into_response();
    r.headers_mut()
        .insert("content-type", HeaderValue::from_static("application/json"));
    r
}

fn header(headers: &HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

fn query_param(query: &str, name: &str) -> Option<String> {
    url::form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

async fn handle(State(st): State<Arc<FixtureState>>, req: Request) -> Response {
    let n = st.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    st.max_in_flight.fetch_max(n, Ordering::SeqCst);
    let r = route(&st, req).await;
    st.in_flight.fetch_sub(1, Ordering::SeqCst);
    r
}

async fn route(st: &Arc<FixtureState>, req: Request) -> Response {
    let target = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    let headers = req.headers().clone();
    st.seen.lock().unwrap().push(Seen {
        target: target.clone(),
        headers: headers
            .iter()
            .map(|(n, v)| (n.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
            .collect(),
    });
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let auth = header(&headers, "authorization");
    match path.as_str() {
        p if p.starts_with("/echo/") => json_response(
            StatusCode::OK,
            json!({"path": path, "query": query, "n": 1, "items": [{"id": 1}, {"id": 2}]}),
        ),
        p if p.starts_with("/status/") => {
            let code: u16 = p["/status/".len()..].parse().unwrap_or(500);
            let status = StatusCode::from_u16(code).unwrap();
            let detail = format!("detail for {code}");
            let mut body = json!({"type": "about:blank", "title": "fixture", "detail": detail});
            // `size`: the body padded to exactly that many bytes.
            if let Some(size) = query_param(&query, "size").and_then(|v| v.parse::<usize>().ok()) {
                let bare = json!({"detail": detail, "pad": ""}).to_string().len();
                body = json!({"detail": detail, "pad": "x".repeat(size.saturating_sub(bare))});
                assert_eq!(body.to_string().len(), size, "pad the fixture's body");
            }
            let mut r = json_response(status, body);
            if code == 429 {
                r.headers_mut()
                    .insert("retry-after", HeaderValue::from_static("7"));
            }
            r
        }
        "/empty" => StatusCode::NO_CONTENT.into_response(),
        "/empty200" => json_response(StatusCode::OK, Value::Null)
            .map(|_| Body::empty())
            .into_response(),
        "/text" => {
            let mut r = (StatusCode::OK, "<html>hi</html>").into_response();
            r.headers_mut()
                .insert("content-type", HeaderValue::from_static("text/html"));
            r
        }
        "/malformed" => {
            let mut r = (StatusCode::OK, "{\"a\": ").into_response();
            r.headers_mut()
                .insert("content-type", HeaderValue::from_static("application/json"));
            r
        }
        "/big" => {
            let n: usize = query_param(&query, "n")
                .and_then(|v| v.parse().ok())
                .unwrap_or(10);
            let with_length = query_param(&query, "cl").as_deref() == Some("true");
            // A JSON string of exactly n bytes.
            let mut body = vec![b'x'; n.max(2)];
            body[0] = b'"';
            let last = body.len() - 1;
            body[last] = b'"';
            let body = if with_length {
                Body::from(body)
            } else {
                let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
                    body.chunks(1024).map(|c| Ok(c.to_vec())).collect();
                Body::from_stream(futures_stream(chunks))
            };
            let mut r = Response::new(body);
            r.headers_mut()
                .insert("content-type", HeaderValue::from_static("application/json"));
            r
        }
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            json_response(StatusCode::OK, json!({"late": true}))
        }
        "/slow-body" => {
            let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(2);
            tokio::spawn(async move {
                let _ = tx.send(Ok(b"[1,".to_vec())).await;
                tokio::time::sleep(Duration::from_secs(3)).await;
                let _ = tx.send(Ok(b"2]".to_vec())).await;
            });
            let stream = tokio_stream(rx);
            let mut r = Response::new(Body::from_stream(stream));
            r.headers_mut()
                .insert("content-type", HeaderValue::from_static("application/json"));
            r
        }
        "/latency" => {
            let ms: u64 = query_param(&query, "ms")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            json_response(StatusCode::OK, json!({"ok": true}))
        }
        "/redirect/same" => redirect("/echo/after-redirect".to_string()),
        "/redirect/loop" => redirect("/redirect/loop".to_string()),
        "/redirect/cross" => {
            let other = st.other_origin.lock().unwrap().clone();
            redirect(format!("{other}/echo/stolen"))
        }
        "/whoami" => json_response(
            StatusCode::OK,
            json!({"authorization": auth, "note": format!("you sent {auth}")}),
        ),
        "/secure" => {
            let expected = format!("Bearer {}", st.expected_token.lock().unwrap());
            if auth == expected {
                json_response(StatusCode::OK, json!({"ok": true}))
            } else {
                if let Some((path, token)) = st.rotate_on_401.lock().unwrap().take() {
                    std::fs::write(&path, &token).unwrap();
                    *st.expected_token.lock().unwrap() = token;
                }
                json_response(
                    StatusCode::UNAUTHORIZED,
                    json!({"detail": format!("token {auth} is not valid")}),
                )
            }
        }
        "/flaky" => {
            let left = st.flaky_left.load(Ordering::SeqCst);
            if left > 0 {
                st.flaky_left.store(left - 1, Ordering::SeqCst);
                json_response(StatusCode::SERVICE_UNAVAILABLE, json!({"detail": "busy"}))
            } else {
                json_response(StatusCode::OK, json!({"ok": true}))
            }
        }
        "/echo-error" => json_response(
            StatusCode::BAD_REQUEST,
            json!({"detail": format!("bad credential {auth}")}),
        ),
        _ => json_response(StatusCode::NOT_FOUND, json!({"detail": "no such route"})),
    }
}

fn redirect(location: String) -> Response {
    let mut r = StatusCode::FOUND.into_response();
    r.headers_mut()
        .insert("location", HeaderValue::from_str(&location).unwrap());
    r
}

fn futures_stream(
    chunks: Vec<Result<Vec<u8>, std::io::Error>>,
) -> impl futures_util::Stream<Item = Result<Vec<u8>, std::io::Error>> {
    futures_util::stream::iter(chunks)
}

fn tokio_stream(
    mut rx: tokio::sync::mpsc::Receiver<Result<Vec<u8>, std::io::Error>>,
) -> impl futures_util::Stream<Item = Result<Vec<u8>, std::io::Error>> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// A GET operation for the fixture document.
fn op(id: &str, path: &str, params: Value) -> (String, Value) {
    (
        path.to_string(),
        json!({"get": {"operationId": id, "summary": format!("The {id} route"),
            "parameters": params,
            "responses": {"200": {"description": "ok",
                "content": {"application/json": {"schema": {}}}}}}}),
    )
}

fn query(name: &str, schema: Value) -> Value {
    json!({"name": name, "in": "query", "schema": schema})
}

/// The fixture's OpenAPI document.
pub fn document() -> Value {
    let id = json!({"name": "id", "in": "path", "required": true, "schema": {"type": "string"}});
    let code =
        json!({"name": "code", "in": "path", "required": true, "schema": {"type": "integer"}});
    let ops = [
        op(
            "echo",
            "/echo/{id}",
            json!([id,
                query("q", json!({"type": "string"})),
                {"name": "tags", "in": "query", "explode": true,
                 "schema": {"type": "array", "items": {"type": "string"}}},
                query("n", json!({"type": "integer", "minimum": 1, "maximum": 10})),
                query("mode", json!({"type": "string", "enum": ["a", "b"]})),
                query("org_id", json!({"type": "string"}))]),
        ),
        op(
            "status",
            "/status/{code}",
            json!([code, query("size", json!({"type": "integer"}))]),
        ),
        op("empty", "/empty", json!([])),
        op("empty200", "/empty200", json!([])),
        op("text", "/text", json!([])),
        op("malformed", "/malformed", json!([])),
        op(
            "big",
            "/big",
            json!([
                query("n", json!({"type": "integer"})),
                query("cl", json!({"type": "boolean"}))
            ]),
        ),
        op("slow", "/slow", json!([])),
        op("slow_body", "/slow-body", json!([])),
        op(
            "latency",
            "/latency",
            json!([
                query("ms", json!({"type": "integer"})),
                query("i", json!({"type": "integer"}))
            ]),
        ),
        op("redirect_same", "/redirect/same", json!([])),
        op("redirect_loop", "/redirect/loop", json!([])),
        op("truncated", "/truncated", json!([])),
        op("redirect_cross", "/redirect/cross", json!([])),
        op("whoami", "/whoami", json!([])),
        op("secure", "/secure", json!([])),
        op("flaky", "/flaky", json!([])),
        op("echo_error", "/echo-error", json!([])),
    ];
    let mut paths = serde_json::Map::new();
    for (p, v) in ops {
        paths.insert(p, v);
    }
    json!({"openapi": "3.0.3", "info": {"title": "fixture", "version": "1"}, "paths": paths})
}

/// A deployment on disk: config, document and token file in a fresh folder.
pub struct Deployment {
    pub dir: PathBuf,
    pub token_path: PathBuf,
}

impl Deployment {
    pub fn config_path(&self) -> PathBuf {
        self.dir.join("upstreams.json")
    }

    pub fn load(&self) -> ptc_plan::Loaded {
        ptc_plan::load(&self.config_path()).unwrap_or_else(|d| panic!("{d}"))
    }

    pub fn set_token(&self, token: &str) {
        // Replace atomically, as a deployment rotating a secret would.
        let tmp = self.dir.join("token.tmp");
        std::fs::write(&tmp, token).unwrap();
        std::fs::rename(&tmp, &self.token_path).unwrap();
    }
}

impl Drop for Deployment {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

static NEXT: AtomicU64 = AtomicU64::new(0);

/// Writes a deployment for the fixture at `base` with bearer token `token`; `extra` is merged
/// into the upstream's config entry.
pub fn deployment(base: &str, token: &str, extra: Value) -> Deployment {
    let dir = std::env::temp_dir().join(format!(
        "ptc-core-fixture-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("openapi.json"), document().to_string()).unwrap();
    let token_path = dir.join("token");
    std::fs::write(&token_path, token).unwrap();
    let ids: Vec<&str> = vec![
        "echo",
        "status",
        "empty",
        "empty200",
        "text",
        "malformed",
        "big",
        "slow",
        "slow_body",
        "latency",
        "redirect_same",
        "redirect_loop",
        "truncated",
        "redirect_cross",
        "whoami",
        "secure",
        "flaky",
        "echo_error",
    ];
    let mut up = json!({
        "transport": "openapi",
        "description": "loopback fixture",
        "base_url": base,
        "allow_insecure_http": true,
        "allow_insecure_auth": true,
        "schema_file": "openapi.json",
        "auth": [{"scheme": "bearer", "binding": "tok"}],
        "static_headers": {"X-Client": "ptc-test"},
        "include_operations": ids,
        "operation_overrides": {"big": {"max_response_bytes": 1000}},
        "request_timeout_ms": 1500,
        "connect_timeout_ms": 1000,
        "max_retries": 2,
        "backoff_initial_ms": 1,
        "backoff_max_ms": 5
    });
    if let (Value::Object(u), Value::Object(e)) = (&mut up, extra) {
        for (k, v) in e {
            u.insert(k, v);
        }
    }
    let config = json!({
        "credentials": {"tok": {"source": "file", "path": "token", "scheme_hint": "bearer"}},
        "upstreams": {"fx": up}
    });
    std::fs::write(dir.join("upstreams.json"), config.to_string()).unwrap();
    Deployment { dir, token_path }
}
