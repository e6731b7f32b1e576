//! What several test files here share.

use std::net::SocketAddr;

/// Serves `app` on a loopback port, on `rt`; its address.
pub fn loopback(rt: &tokio::runtime::Runtime, app: axum::Router) -> SocketAddr {
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("a loopback port");
    let addr = listener.local_addr().expect("its address");
    rt.spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}
