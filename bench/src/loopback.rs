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
