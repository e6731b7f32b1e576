//! The host interface: how an embedding (ptc-core) plugs namespaced functions such as
//! `tool/call` and `tool/servers`, and upstream discovery, into the runtime. The runtime knows
//! nothing of HTTP or MCP. A host function that waits on I/O hands the future to
//! [`CallContext::wait`]: the program suspends until it is done (see [`crate::suspend`]), holding
//! no thread when the evaluation is driven by [`Interpreter::eval_async`].
//!
//! [`Interpreter::eval_async`]: crate::Interpreter::eval_async

use std::future::Future;
use std::time::{Duration, Instant};

use crate::error::Reason;
use crate::limits::Limits;
use crate::meter::Meter;
use crate::suspend::{Output, Pending, Resume, Suspender, block_on};
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
    /// Typed reason, e.g. [`Reason::RuntimeError`] or [`Reason::TypeError`].
    pub reason: Reason,
    /// Message shown to the program author.
    pub message: String,
}

impl HostError {
    /// A new host error.
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
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

impl std::fmt::Display for HostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.reason, self.message)
    }
}

impl std::error::Error for HostError {}

/// Where the memory a host call decodes is charged.
enum Budget<'a> {
    /// The running program's meter, shared with its `pmap` branches.
    Program(&'a Meter<'a>),
    /// A context outside an evaluation: a meter of its own.
    Own(Meter<'static>),
}

impl Budget<'_> {
    fn meter(&self) -> &Meter<'_> {
        match self {
            Budget::Program(m) => m,
            Budget::Own(m) => m,
        }
    }
}

/// Context handed to every host call.
pub struct CallContext<'a> {
    timeout: Option<Duration>,
    suspend: Option<&'a Suspender>,
    deadline: Option<Instant>,
    output: &'a mut String,
    max_output: usize,
    max_json_depth: usize,
    budget: Budget<'a>,
}

impl<'a> CallContext<'a> {
    /// A context outside an evaluation (for testing a [`Host`] directly) with `limits`' output
    /// cap, JSON depth and memory budget: output goes to `output`, and what
    /// [`CallContext::decode_json`] decodes is charged to a budget of its own.
    pub fn new(limits: &Limits, deadline: Option<Instant>, output: &'a mut String) -> Self {
        CallContext {
            timeout: limits.timeout,
            suspend: None,
            deadline,
            output,
            max_output: limits.max_output_bytes,
            max_json_depth: limits.max_json_depth,
            budget: Budget::Own(Meter::new(limits.max_memory_bytes, None)),
        }
    }

    /// The context of a call made by a running program: its deadline, output and memory budget,
    /// and where it suspends (`None`: waits block the thread).
    pub(crate) fn in_program(
        limits: &Limits,
        deadline: Option<Instant>,
        output: &'a mut String,
        meter: &'a Meter<'a>,
        suspend: Option<&'a Suspender>,
    ) -> Self {
        CallContext {
            timeout: limits.timeout,
            suspend,
            deadline,
            output,
            max_output: limits.max_output_bytes,
            max_json_depth: limits.max_json_depth,
            budget: Budget::Program(meter),
        }
    }

    /// Decodes JSON bytes into a value with the running program's JSON depth limit, charging its
    /// memory budget (what a host uses to build `{:ok true :value v ...}` maps around a tool
    /// result). Invalid JSON is a `parse_error`, too deep `depth_exceeded`, too big
    /// `memory_exceeded`; a host returning the error ends the program with that reason.
    pub fn decode_json(&mut self, bytes: &[u8]) -> Result<Value, HostError> {
        crate::json::decode_for(
            self.budget.meter(),
            bytes,
            self.max_json_depth,
            self.deadline,
        )
        .map_err(|e| HostError::new(e.reason(), e.message()))
    }

    /// Time left before the program's deadline (`None` when the program has no deadline).
    /// Hosts should cap their own timeouts with it.
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// Waits for `fut`, the host's I/O (an upstream call, a page fetch, an approval). In an
    /// evaluation driven by [`Interpreter::eval_async`](crate::Interpreter::eval_async) the
    /// program suspends and holds no thread until its driver has the output; anywhere else this
    /// thread blocks until then. The future is polled by whatever drives the evaluation, so run
    /// I/O that needs a particular runtime there (spawn it, and wait on the handle).
    ///
    /// `Err` when the driver stopped waiting because the program was cancelled or its deadline
    /// passed (the future is dropped): return it, and the program ends with that reason.
    pub fn wait<T: Send + 'static>(
        &mut self,
        fut: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, HostError> {
        let Some(suspender) = self.suspend else {
            return Ok(block_on(fut));
        };
        let pending: Pending = Box::pin(async move { Box::new(fut.await) as Output });
        match crate::suspend::suspend(suspender, pending) {
            Resume::Ready(out) => out.downcast::<T>().map(|t| *t).map_err(|_| {
                HostError::new(
                    Reason::InternalError,
                    "the evaluation was resumed with a value of another type than it waited for",
                )
            }),
            Resume::Stopped(reason) => Err(HostError::new(
                reason,
                crate::limits::stop_message(reason, self.timeout),
            )),
            Resume::Start => Err(HostError::new(
                Reason::InternalError,
                "the evaluation was restarted while it waited",
            )),
        }
    }

    /// Emits printed output into the program's captured output (as `println` would).
    pub fn print(&mut self, text: &str) {
        crate::printer::append_output(self.output, text, self.max_output);
    }
}

/// A host that provides namespaced functions to programs. Must be `Send + Sync`: one host may
/// serve evaluations running on several threads.
pub trait Host: Send + Sync {
    /// The namespaces this host serves, e.g. `["tool"]`. `ns/name` symbols in these namespaces
    /// resolve to host functions (first-class values, so `(pmap tool/call reqs)` works).
    fn namespaces(&self) -> Vec<String>;

    /// The upstream names this host serves (e.g. `["observatory"]`). They join the runtime's
    /// namespace table: `(dir observatory)`, `(doc 'observatory/list-traces)`, `meta`, `apropos`,
    /// the unknown-namespace error and its "did you mean" hint all see them. Upstreams are not
    /// callable namespaces: tools are called through `tool/call`.
    fn upstreams(&self) -> Vec<String> {
        Vec::new()
    }

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
