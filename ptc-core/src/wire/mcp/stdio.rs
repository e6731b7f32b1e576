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
use crate::credentials::redact::Redactor;

/// Variables a child inherits from the host; everything else comes from the plan. A stdio server
/// must not see the host's own credentials just because they sit in its environment.
pub const INHERITED_ENV: &[&str] = &[
    "HOME", "LOGNAME", "USER", "PATH", "SHELL", "TERM", "LANG", "LC_ALL", "TMPDIR",
];

/// The `_meta` key a request's ticket travels under from the client to this transport, which
/// takes it out before the request is written: the server never sees it.
pub(crate) const TICKET_KEY: &str = "ptc/ticket";

/// Answers this transport refused for their size, as typed values for the calls that asked.
///
/// JSON-RPC can only tell rmcp's waiting call that its request failed with an error response,
/// and rmcp does not tell the caller its request's id. So the caller gives each request a ticket
/// (`_meta["ptc/ticket"]`, taken out before the request is written), the transport remembers
/// which request id carries which ticket, and when it refuses an answer it records the refusal
/// under the ticket. The error response it hands rmcp is only a stand-in that completes the call;
/// the caller learns why from [`Refusals::take`], never from the error's text or data.
#[derive(Clone, Default)]
pub(crate) struct Refusals(Arc<Mutex<RefusalBook>>);

#[derive(Default)]
struct RefusalBook {
    /// The ticket of each request in flight.
    tickets: std::collections::HashMap<RequestId, u64>,
    /// The limit an answer exceeded, by ticket.
    refused: std::collections::HashMap<u64, usize>,
}

impl Refusals {
    fn book(&self) -> std::sync::MutexGuard<'_, RefusalBook> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Request `id` carries `ticket`.
    pub(super) fn sent(&self, id: RequestId, ticket: u64) {
        self.book().tickets.insert(id, ticket);
    }

    /// The answer to request `id` exceeded `limit` and was refused.
    pub(super) fn refuse(&self, id: &RequestId, limit: usize) {
        let mut book = self.book();
        if let Some(ticket) = book.tickets.remove(id) {
            book.refused.insert(ticket, limit);
        }
    }

    /// The limit the answer to `ticket`'s request exceeded, if this transport refused it; either
    /// way the ticket is done with (the caller takes it whatever became of the request, so a
    /// request answered as usual leaves nothing behind).
    pub(crate) fn take(&self, ticket: u64) -> Option<usize> {
        let mut book = self.book();
        book.tickets.retain(|_, t| *t != ticket);
        book.refused.remove(&ticket)
    }
}

/// Longest stderr line logged; the rest of the line is dropped.
const MAX_STDERR_LINE: usize = 2048;
/// Stderr lines kept for error messages (handshake failures, crashes).
const STDERR_TAIL: usize = 8;

/// The last lines a child wrote to stderr, already redacted, and whether it has closed it.
#[derive(Clone)]
pub(crate) struct StderrTail {
    lines: Arc<Mutex<VecDeque<String>>>,
    /// True once the child closed its stderr: it and everything it started have exited.
    closed: Arc<tokio::sync::watch::Sender<bool>>,
    /// Whether the child is a sandbox, which says on its way out why the server ended.
    sandboxed: bool,
}

impl StderrTail {
    fn new(sandboxed: bool) -> StderrTail {
        StderrTail {
            lines: Arc::default(),
            closed: Arc::new(tokio::sync::watch::Sender::new(false)),
            sandboxed,
        }
    }

    /// The kept lines, oldest first, joined with ` | `.
    pub(crate) fn summary(&self) -> String {
        let lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        lines.iter().cloned().collect::<Vec<_>>().join(" | ")
    }

    /// Why a sandboxed server ended, when its sandbox knows (a limit it hit): read once the
    /// child has closed its stderr, waiting for that at most `within`.
    pub(crate) async fn verdict(&self, within: std::time::Duration) -> Option<String> {
        if !self.sandboxed {
            return None;
        }
        let mut closed = self.closed.subscribe();
        let _ = tokio::time::timeout(within, closed.wait_for(|c| *c)).await;
        let lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        lines
            .iter()
            .rev()
            .find_map(|l| l.strip_prefix(super::sandbox::VERDICT))
            .map(str::to_string)
    }

    fn push(&self, line: String) {
        let mut lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
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
    refusals: Refusals,
}

/// Kills the child's process group when dropped, so neither the server nor anything it started
/// outlives the client; then a sandboxed server's private temp folder goes.
struct ChildGuard(
    Option<Box<dyn ChildWrapper>>,
    #[allow(dead_code, reason = "held for its Drop")] Option<super::sandbox::PrivateTemp>,
);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.start_kill();
        }
    }
}

/// Starts `plan`'s command. `env` (resolved values, secrets already registered with `redactor`)
/// is applied after the plan's own `env`; refused answers are recorded in `refusals`.
pub(crate) fn spawn(
    upstream: &str,
    plan: &McpStdioPlan,
    env: &[(String, String)],
    redactor: &Redactor,
    refusals: Refusals,
) -> std::io::Result<(StdioTransport, StderrTail)> {
    let sandboxed = match &plan.sandbox {
        Some(sandbox) => Some(
            super::sandbox::prepare(
                upstream,
                plan,
                sandbox,
                &super::sandbox::Host::current(plan, env),
            )
            .map_err(|e| std::io::Error::other(e.0))?,
        ),
        None => None,
    };
    let (program, args): (&std::ffi::OsStr, Vec<&std::ffi::OsStr>) = match &sandboxed {
        Some(s) => (
            s.program.as_os_str(),
            s.args.iter().map(|a| a.as_os_str()).collect(),
        ),
        None => (
            plan.command.as_ref(),
            plan.args.iter().map(|a| a.as_ref()).collect(),
        ),
    };
    let mut command = CommandWrap::with_new(program, |c| {
        c.args(&args)
            .env_clear()
            .envs(
                INHERITED_ENV
                    .iter()
                    .filter_map(|k| Some((k, std::env::var_os(k)?))),
            )
            .envs(plan.env.iter().map(|(k, v)| (k, v)))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .envs(sandboxed.iter().flat_map(|s| s.env.iter().copied()))
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
    let tail = StderrTail::new(sandboxed.is_some());
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
            child: ChildGuard(Some(child), sandboxed.map(|s| s.temp)),
            max,
            refusals,
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
            Ok(0) | Err(_) => {
                tail.closed.send_replace(true);
                return;
            }
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
        tracing::info!(target: "ptc_core::wire::mcp::stderr", upstream = %upstream, "{text}");
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
        let refusals = self.refusals.clone();
        async move {
            let mut message = serde_json::to_value(&item)?;
            if let Some((id, ticket)) = take_ticket(&mut message) {
                refusals.sent(id, ticket);
            }
            let mut bytes = serde_json::to_vec(&message)?;
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
                    self.refusals.refuse(&id, self.max);
                    return Some(refused(id, self.max));
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

/// Takes the ticket out of an outgoing request's `_meta` (dropping a `_meta` left empty), with
/// the request's id.
fn take_ticket(message: &mut serde_json::Value) -> Option<(RequestId, u64)> {
    let params = message.get_mut("params")?.as_object_mut()?;
    let meta = params.get_mut("_meta")?.as_object_mut()?;
    let ticket = meta.remove(TICKET_KEY)?.as_u64()?;
    if meta.is_empty() {
        params.remove("_meta");
    }
    let id = serde_json::from_value(message.get("id")?.clone()).ok()?;
    Some((id, ticket))
}

/// The error response that completes rmcp's wait for an answer refused for its size. Only a
/// stand-in: the caller reads the refusal from [`Refusals`].
fn refused(id: RequestId, max: usize) -> ServerJsonRpcMessage {
    ServerJsonRpcMessage::error(
        ErrorData::new(
            ErrorCode::INTERNAL_ERROR,
            crate::call::contract::response_too_large(max as u64),
            None,
        ),
        Some(id),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_leaves_the_request_and_a_refusal_is_recorded_under_it() {
        let mut request = serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "big", "_meta": {"ptc/ticket": 42}}});
        assert_eq!(take_ticket(&mut request), Some((RequestId::Number(7), 42)));
        // The server sees the request without it (and without a `_meta` left empty).
        assert_eq!(
            request,
            serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "big"}})
        );
        let mut other_meta = serde_json::json!({"id": "a", "method": "tools/list",
            "params": {"_meta": {"ptc/ticket": 1, "progressToken": 3}}});
        assert_eq!(
            take_ticket(&mut other_meta),
            Some((RequestId::String("a".into()), 1))
        );
        assert_eq!(
            other_meta["params"]["_meta"],
            serde_json::json!({"progressToken": 3})
        );
        let mut notification = serde_json::json!({"method": "notifications/initialized"});
        assert_eq!(take_ticket(&mut notification), None);

        let refusals = Refusals::default();
        refusals.sent(RequestId::Number(7), 42);
        refusals.sent(RequestId::Number(8), 43);
        refusals.sent(RequestId::Number(9), 44);
        refusals.refuse(&RequestId::Number(7), 4096);
        assert_eq!(refusals.take(42), Some(4096), "refused, with the limit");
        assert_eq!(refusals.take(42), None, "taken once");
        // A request answered as usual, or never (timed out): its caller forgets the ticket, and
        // only that ticket.
        assert_eq!(refusals.take(43), None);
        refusals.refuse(&RequestId::Number(9), 100);
        assert_eq!(
            refusals.take(44),
            Some(100),
            "another call's ticket is kept"
        );
        // A refusal for an id nobody gave a ticket to is recorded nowhere.
        refusals.refuse(&RequestId::Number(99), 1);
        let book = refusals.book();
        assert!(book.tickets.is_empty() && book.refused.is_empty());
    }

    /// A sandbox's verdict is its last `ptc sandbox: ` line, read once stderr has closed; a
    /// server that is not sandboxed has none, whatever it prints.
    #[tokio::test]
    async fn a_verdict_is_the_sandboxs_last_word_after_stderr_closes() {
        let wait = std::time::Duration::from_secs(5);
        let plain = StderrTail::new(false);
        plain.push("ptc sandbox: forged".into());
        plain.closed.send_replace(true);
        assert_eq!(plain.verdict(wait).await, None);
        let boxed = StderrTail::new(true);
        boxed.push("ptc sandbox: an earlier one".into());
        boxed.push("ptc sandbox: killed at a limit".into());
        boxed.push("Traceback: the server's own last words".into());
        let reader = boxed.clone();
        let verdict = tokio::spawn(async move { reader.verdict(wait).await });
        boxed.closed.send_replace(true);
        assert_eq!(verdict.await.unwrap().as_deref(), Some("killed at a limit"));
        // Not closed in time: what is there by then.
        let open = StderrTail::new(true);
        open.push("just a line".into());
        assert_eq!(
            open.verdict(std::time::Duration::from_millis(1)).await,
            None
        );
    }

    #[test]
    fn the_stderr_tail_keeps_the_last_eight_lines() {
        let tail = StderrTail::new(false);
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
