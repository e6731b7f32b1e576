//! The host interface: how an embedding (ptc-core) plugs namespaced functions such as
//! `tool/call` and `tool/servers`, and upstream discovery, into the runtime. The runtime knows
//! nothing of HTTP or MCP; host functions are blocking calls (the host may `block_on` a tokio
//! handle), and `pmap`/`pcalls` run them on worker threads so calls that wait on I/O overlap.

use std::time::{Duration, Instant};

use crate::value::Value;

/// What a host function returns.
pub enum HostValue {
    /// A ready value.
    Value(Value),
    /// Raw JSON bytes; the runtime decodes them itself, with its depth limit and memory accounting.
    Json(Vec<u8>),
}

/// A program fault raised by the host (ends the program with this reason and message).
#[derive(Clone, Debug)]
pub struct HostError {
    /// Typed reason, e.g. `"runtime_error"` or `"type_error"`.
    pub reason: &'static str,
    /// Message shown to the program author.
    pub message: String,
}

impl HostError {
    /// A new host error.
    pub fn new(reason: &'static str, message: impl Into<String>) -> Self {
        HostError {
            reason,
            message: message.into(),
        }
    }
}

/// Discovery operations the runtime forwards for names it does not know locally.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Discovery {
    /// `(dir server)`: the names in an upstream.
    Dir,
    /// `(doc 'server/tool)`: print documentation (use [`CallContext::print`]).
    Doc,
    /// `(meta 'server/tool)`: metadata as data.
    Meta,
    /// `(apropos "text")`: matching names.
    Apropos,
}

/// Context handed to every host call.
pub struct CallContext<'a> {
    pub(crate) deadline: Option<Instant>,
    pub(crate) output: &'a mut String,
    pub(crate) max_output: usize,
}

impl<'a> CallContext<'a> {
    /// A context outside an evaluation (for testing a [`Host`] directly): output goes to `output`,
    /// capped at `max_output` bytes.
    pub fn new(deadline: Option<Instant>, output: &'a mut String, max_output: usize) -> Self {
        CallContext {
            deadline,
            output,
            max_output,
        }
    }

    /// Time left before the program's deadline (`None` when the program has no deadline).
    /// Hosts should cap their own timeouts with it.
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// Emits printed output into the program's captured output (as `println` would).
    pub fn print(&mut self, text: &str) {
        crate::builtins::io::append_output(self.output, text, self.max_output);
    }
}

/// A host that provides namespaced functions to programs. Must be `Send + Sync`: `pmap` calls it
/// from several worker threads at once.
pub trait Host: Send + Sync {
    /// The namespaces this host serves, e.g. `["tool"]`. `ns/name` symbols in these namespaces
    /// resolve to host functions (first-class values, so `(pmap tool/call reqs)` works).
    fn namespaces(&self) -> Vec<String>;

    /// Calls `ns/name` with evaluated arguments. Quoted symbols such as `'observatory/list-traces`
    /// arrive as [`Value::Symbol`]; maps arrive unchanged.
    fn call(
        &self,
        cx: &mut CallContext<'_>,
        ns: &str,
        name: &str,
        args: &[Value],
    ) -> Result<HostValue, HostError>;

    /// Discovery for names the runtime does not know locally (upstream refs). Return `Ok(None)`
    /// when the host does not know the name either.
    fn discover(
        &self,
        cx: &mut CallContext<'_>,
        op: Discovery,
        args: &[Value],
    ) -> Result<Option<HostValue>, HostError> {
        let _ = (cx, op, args);
        Ok(None)
    }
}
