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
pub mod programs;
pub mod refresh;
pub mod repl;
mod rounds;
mod run_queue;
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

use crate::credentials::redact::Redactor;

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
/// (default `info`), every line through `redactor` (the upstreams' own, so a secret a library
/// logs at debug level, an OAuth code say, is masked too). Safe to call twice (the second call
/// does nothing).
pub fn init_logging(format: LogFormat, redactor: Redactor) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(RedactedStderr(redactor))
        .with_ansi(false);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

/// Standard error, each write passed through a redactor first.
#[derive(Clone)]
struct RedactedStderr(Redactor);

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for RedactedStderr {
    type Writer = RedactedLine;

    fn make_writer(&'a self) -> Self::Writer {
        RedactedLine {
            redactor: self.0.clone(),
            line: Vec::new(),
        }
    }
}

/// One log event's text, written masked to stderr when the event is done with it.
struct RedactedLine {
    redactor: Redactor,
    line: Vec<u8>,
}

impl std::io::Write for RedactedLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.line.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for RedactedLine {
    fn drop(&mut self) {
        let masked = masked(&self.redactor, &self.line);
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), masked.as_bytes());
    }
}

/// A log event's bytes as text, every registered secret masked.
fn masked(redactor: &Redactor, line: &[u8]) -> String {
    redactor.redact(&String::from_utf8_lossy(line)).into_owned()
}

#[cfg(test)]
mod log_tests {
    use super::*;
    use tracing_subscriber::fmt::MakeWriter;

    /// A secret a library logs (rmcp logs an authorization code at debug level) is masked in
    /// the line the host writes, whole events and pieces alike.
    #[test]
    fn a_log_line_is_written_masked() {
        let redactor = Redactor::new();
        redactor.register("code-7f3a9c1e5b");
        let line = masked(
            &redactor,
            b"DEBUG rmcp::transport::auth: start exchange code for token: \"code-7f3a9c1e5b\"\n",
        );
        assert!(!line.contains("code-7f3a9c1e5b"), "{line}");
        assert!(line.contains("[REDACTED]"), "{line}");
        let mut writer = RedactedStderr(redactor).make_writer();
        std::io::Write::write_all(&mut writer, b"pieces ").unwrap();
        std::io::Write::write_all(&mut writer, b"code-7f3a9c1e5b").unwrap();
        assert_eq!(masked(&writer.redactor, &writer.line), "pieces [REDACTED]");
    }
}
