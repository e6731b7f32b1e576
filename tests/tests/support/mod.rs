//! What several test files here share (`mod support;`). Each file uses some of it.
#![allow(dead_code)]

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

/// A multi-thread runtime with `workers` workers, for a test's servers and upstream I/O.
pub fn runtime(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// Runs `src` against `up` with the default limits and `budgets`.
pub fn run(
    rt: &tokio::runtime::Runtime,
    up: &std::sync::Arc<ptc_core::Upstreams>,
    src: &str,
    budgets: ptc_core::Budgets,
) -> ptc_core::ProgramRun {
    ptc_core::run_program(
        up.clone(),
        rt.handle().clone(),
        src,
        ptc_lisp::Limits::default(),
        budgets,
        None,
    )
}
