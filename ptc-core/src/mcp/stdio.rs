//! The stdio transport: a child process speaking newline-delimited JSON-RPC.
//!
//! The child runs in its own process group with a minimal inherited environment; its stderr is
//! drained line by line (bounded) into the log through the redactor, so a chatty server can never
//! block on a full pipe; the whole group is killed when the transport is dropped.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop, ProcessGroup};
use ptc_plan::McpStdioPlan;
use rmcp::RoleClient;
use rmcp::model::{ErrorCode, ErrorData, RequestId, ServerJsonRpcMessage};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};

use super::framing::{Frame, LineReader};
use crate::redact::Redactor;

/// Variables a child inherits from the host; everything else comes from the plan. A stdio server
/// must not see the host's own credentials just because they sit in its environment.
pub const INHERITED_ENV: &[&str] = &[
    "HOME", "LOGNAME", "USER", "PATH", "SHELL", "TERM", "LANG", "LC_ALL", "TMPDIR",
];

/// JSON-RPC error code the transport uses for a response it refused for its size.
pub(crate) const TOO_LARGE_CODE: i32 = -32_088;
/// Marker in that error's `data`, so a server's own -32088 is not mistaken for it.
pub(crate) const TOO_LARGE_MARKER: &str = "ptc:response_too_large";

/// Longest stderr line logged; the rest of the line is dropped.
const MAX_STDERR_LINE: usize = 2048;
/// Stderr lines kept for error messages (handshake failures, crashes).
const STDERR_TAIL: usize = 8;

/// The last lines a child wrote to stderr, already redacted.
#[derive(Clone, Default)]
pub(crate) struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    /// The kept lines, oldest first, joined with ` | `.
    pub(crate) fn summary(&self) -> String {
        let lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
        lines.iter().cloned().collect::<Vec<_>>().join(" | ")
    }

    fn push(&self, line: String) {
        let mut lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if lines.len() == STDERR_TAIL {
            lines.pop_front();
        }
        lines.push_back(line);
    }
}

/// A spawned stdio server.
pub(crate) struct StdioTransport {
    reader: LineReader<ChildStdout>,
    stdin: Arc<tokio::sync::Mutex<Option<ChildStdin>>>,
    child: ChildGuard,
    max: usize,
}

/// Kills the child's process group when dropped, so neither the server nor anything it started
/// outlives the client.
struct ChildGuard(Option<Box<dyn ChildWrapper>>);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.start_kill();
        }
    }
}

/// Starts `plan`'s command. `env` (resolved values, secrets already registered with `redactor`)
/// is applied after the plan's own `env`.
pub(crate) fn spawn(
    upstream: &str,
    plan: &McpStdioPlan,
    env: &[(String, String)],
    redactor: &Redactor,
) -> std::io::Result<(StdioTransport, StderrTail)> {
    let mut command = CommandWrap::with_new(&plan.command, |c| {
        c.args(&plan.args)
            .env_clear()
            .envs(
                INHERITED_ENV
                    .iter()
                    .filter_map(|k| Some((k, std::env::var_os(k)?))),
            )
            .envs(plan.env.iter().map(|(k, v)| (k, v)))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(cwd) = &plan.cwd {
            c.current_dir(cwd);
        }
    });
    command.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
    let mut child = command.spawn()?;
    let guard_missing = || std::io::Error::other("child stdio was not piped");
    let stdin = child.stdin().take().ok_or_else(guard_missing)?;
    let stdout = child.stdout().take().ok_or_else(guard_missing)?;
    let stderr = child.stderr().take().ok_or_else(guard_missing)?;
    let tail = StderrTail::default();
    tokio::spawn(drain_stderr(
        upstream.to_string(),
        stderr,
        redactor.clone(),
        tail.clone(),
    ));
    let max = usize::try_from(plan.max_response_bytes).unwrap_or(usize::MAX);
    Ok((
        StdioTransport {
            reader: LineReader::new(stdout, max),
            stdin: Arc::new(tokio::sync::Mutex::new(Some(stdin))),
            child: ChildGuard(Some(child)),
            max,
        },
        tail,
    ))
}

/// Logs every stderr line (bounded, redacted) until the child closes it.
async fn drain_stderr(upstream: String, stderr: ChildStderr, redactor: Redactor, tail: StderrTail) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        // `take` bounds what one line may occupy; the remainder is skipped below.
        let n = match (&mut reader)
            .take(MAX_STDERR_LINE as u64)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if n == MAX_STDERR_LINE && line.last() != Some(&b'\n') {
            let mut rest = Vec::new();
            loop {
                rest.clear();
                match (&mut reader)
                    .take(64 * 1024)
                    .read_until(b'\n', &mut rest)
                    .await
                {
                    Ok(0) | Err(_) => break,
                    Ok(_) if rest.last() == Some(&b'\n') => break,
                    Ok(_) => {}
                }
            }
        }
        let text = String::from_utf8_lossy(&line);
        let text = redactor.redact(text.trim_end()).into_owned();
        tracing::info!(target: "ptc_core::mcp::stderr", upstream = %upstream, "{text}");
        tail.push(text);
    }
}

impl Transport<RoleClient> for StdioTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let stdin = self.stdin.clone();
        async move {
            let mut bytes = serde_json::to_vec(&item)?;
            bytes.push(b'\n');
            let mut stdin = stdin.lock().await;
            let Some(stdin) = stdin.as_mut() else {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "the server's input is closed",
                ));
            };
            stdin.write_all(&bytes).await?;
            stdin.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            match self.reader.next().await {
                Frame::Message(bytes) => match serde_json::from_slice(&bytes) {
                    Ok(message) => return Some(message),
                    // A server may print a stray line; it is not a message and has no id.
                    Err(e) => tracing::debug!("ignoring a line that is not a message: {e}"),
                },
                Frame::Oversized { id } => {
                    let Some(id) = id.and_then(|v| serde_json::from_value::<RequestId>(v).ok())
                    else {
                        tracing::warn!(
                            max = self.max,
                            "dropped an oversized message that answers no request"
                        );
                        continue;
                    };
                    return Some(too_large(id, self.max));
                }
                Frame::Eof => return None,
                Frame::Io(e) => {
                    tracing::warn!("reading the server's output failed: {e}");
                    return None;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Closing stdin asks the server to exit (the stdio shutdown sequence); one that does not
        // is killed with its process group.
        drop(self.stdin.lock().await.take());
        if let Some(child) = &mut self.child.0 {
            if tokio::time::timeout(Duration::from_secs(2), child.wait())
                .await
                .is_err()
            {
                let _ = Box::into_pin(child.kill()).await;
            } else {
                // The server exited; what it left running in its process group goes too.
                let _ = child.start_kill();
            }
        }
        self.child.0 = None;
        Ok(())
    }
}

/// The error response that stands in for a response refused for its size.
fn too_large(id: RequestId, max: usize) -> ServerJsonRpcMessage {
    ServerJsonRpcMessage::error(
        ErrorData::new(
            ErrorCode(TOO_LARGE_CODE),
            format!("the response exceeds max_response_bytes ({max} bytes)"),
            Some(serde_json::Value::String(TOO_LARGE_MARKER.into())),
        ),
        Some(id),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stderr_tail_keeps_the_last_eight_lines() {
        let tail = StderrTail::default();
        assert_eq!(tail.summary(), "");
        for i in 1..=STDERR_TAIL {
            tail.push(format!("line{i}"));
        }
        assert_eq!(
            tail.summary(),
            "line1 | line2 | line3 | line4 | line5 | line6 | line7 | line8"
        );
        tail.push("line9".into());
        assert_eq!(
            tail.summary(),
            "line2 | line3 | line4 | line5 | line6 | line7 | line8 | line9"
        );
    }
}
