//! Servers the suites run on loopback: their upstreams and an OTLP sink.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::header;
use axum::response::IntoResponse;

/// Serves `app` on a fresh loopback port, on the current runtime; its address.
pub async fn serve(app: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}

/// Serves `app` on a fresh loopback port from a thread and runtime of its own, as a service in
/// another process would be: its requests take no turn on the caller's runtime; its address.
pub fn serve_apart(app: axum::Router) -> Result<SocketAddr, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("no runtime for a loopback server: {e}"))?;
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .map_err(|e| format!("cannot bind loopback: {e}"))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("no loopback address: {e}"))?;
    // The thread serves until the process ends, as the runtime-bound servers above do.
    std::thread::Builder::new()
        .name("loopback-apart".into())
        .spawn(move || rt.block_on(async move { axum::serve(listener, app).await }))
        .map_err(|e| format!("cannot start a loopback server's thread: {e}"))?;
    Ok(addr)
}

/// What an [`otlp_sink`] received: exports and their bytes.
#[derive(Default)]
pub struct Exports {
    pub requests: AtomicU64,
    pub bytes: AtomicU64,
}

/// A collector's OTLP/HTTP traces route (`POST /v1/traces`) that reads each export, counts it in
/// `exports` and answers 200, as a collector does: the cost measured is the exporter's.
pub fn otlp_sink(exports: Arc<Exports>) -> axum::Router {
    axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let exports = exports.clone();
            async move {
                exports.requests.fetch_add(1, Ordering::Relaxed);
                exports
                    .bytes
                    .fetch_add(body.len() as u64, Ordering::Relaxed);
                ([(header::CONTENT_TYPE, "application/x-protobuf")], "").into_response()
            }
        }),
    )
}
