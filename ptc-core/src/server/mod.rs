//! The MCP host: serves `lisp_eval` to client LLMs over stdio or Streamable HTTP (rmcp, server
//! side), running each program against the configured [`Upstreams`](crate::Upstreams).
//!
//! One [`Evaluator`] per process holds the upstreams, the limits and the global budgets; every
//! transport hands it [`EvalRequest`]s and turns the [`EvalOutcome`] into an MCP result
//! ([`envelope`]). Both `ptc serve` (config loaded at run time) and `generated-example serve`
//! (compiled-in plan) call [`serve_stdio`] or [`http::serve`].

pub mod admission;
pub mod audit;
mod elicit;
pub mod envelope;
pub mod eval;
pub mod handler;
pub mod http;
mod listeners;
pub mod metrics;
pub mod options;
pub mod outcome;
pub mod refresh;
pub mod repl;
mod rounds;
pub mod session_run;
pub mod sessions;
pub mod state;
mod stdio_input;
pub mod tool;
pub mod workers;

pub use eval::Evaluator;
pub use handler::PtcServer;
pub use http::{HttpOptions, serve as serve_http};
pub use options::EvalLimits;
pub use outcome::{EvalError, EvalOutcome, EvalReason, EvalRequest, EvalValue};
pub use refresh::{CatalogDiff, Reload};

use std::sync::Arc;

/// Serves MCP over this process's stdin/stdout until the client closes stdin.
///
/// Stdout carries only protocol messages; logs go to stderr.
pub async fn serve_stdio(evaluator: Arc<Evaluator>) -> Result<(), String> {
    use rmcp::ServiceExt;
    let server = PtcServer::new(evaluator.clone());
    let ev = evaluator.clone();
    let input = stdio_input::UntilEnd::new(tokio::io::stdin(), move || ev.listeners().stop());
    let running = server
        .serve((input, tokio::io::stdout()))
        .await
        .map_err(|e| format!("cannot start the MCP session on stdio: {e}"))?;
    let quit = running.waiting().await;
    // Finish evaluations still running (a client that closes stdin after a call gets no reply,
    // but the upstream side effects of an eval are never cut in half).
    evaluator.drain().await;
    quit.map(|_| ())
        .map_err(|e| format!("the MCP session ended abnormally: {e}"))
}

/// Log output format (`--log-format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Sends logs to stderr (stdout belongs to the protocol on stdio), filtered by `RUST_LOG`
/// (default `info`). Safe to call twice (the second call does nothing).
pub fn init_logging(format: LogFormat) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}
