//! Program errors: a typed reason, a message, a source position and an optional hint.

use std::fmt;

use crate::value::Value;

/// A source position (1-based line and column).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Pos {
    /// 1-based line.
    pub line: u32,
    /// 1-based column (in characters).
    pub col: u32,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// Why a program failed: the typed reason every error carries. [`Reason::as_str`] gives the
/// documented name (`type_error`, `unbound_var`, ...); hosts raise [`Reason::RuntimeError`] (or
/// one of the tool-call programmer faults) for faults of their own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// The program text cannot be read (or is too long, or a regex literal is invalid).
    ParseError,
    /// A special form used wrongly (`(if)`, `recur` outside a loop, `ns`, ...).
    InvalidForm,
    /// An unknown symbol, namespace, function or `data/` key.
    UnboundVar,
    /// A function called with the wrong number of arguments.
    ArityError,
    /// An argument of the wrong type.
    TypeError,
    /// Integer overflow, division by zero and the like.
    ArithmeticError,
    /// Calling something that is not a function.
    NotCallable,
    /// A value that does not fit its destructuring pattern.
    DestructureError,
    /// A `loop` (or `recur` into a fn) ran more iterations than allowed.
    LoopLimitExceeded,
    /// The wall-clock deadline or the step budget ran out.
    Timeout,
    /// The memory budget ran out.
    MemoryExceeded,
    /// Nesting too deep: calls, source, JSON or the native stack.
    DepthExceeded,
    /// `(fail v)`: the program ended itself with an error carrying `v`.
    Fail,
    /// The host cancelled the evaluation.
    Cancelled,
    /// Parallel worker threads could not be started.
    ParallelCapacityExceeded,
    /// A fault raised by the host (e.g. a tool call it cannot make).
    RuntimeError,
    /// A tool call naming an upstream the host does not know (raised by hosts).
    UnknownServer,
    /// A tool call naming a tool its upstream does not have (raised by hosts).
    UnknownTool,
    /// Tool arguments that do not match the tool's input schema (raised by hosts).
    InvalidArgs,
    /// A bug in the runtime: an invariant did not hold.
    InternalError,
}

impl Reason {
    /// Every reason, in documentation order.
    pub const ALL: [Reason; 20] = [
        Reason::ParseError,
        Reason::InvalidForm,
        Reason::UnboundVar,
        Reason::ArityError,
        Reason::TypeError,
        Reason::ArithmeticError,
        Reason::NotCallable,
        Reason::DestructureError,
        Reason::LoopLimitExceeded,
        Reason::Timeout,
        Reason::MemoryExceeded,
        Reason::DepthExceeded,
        Reason::Fail,
        Reason::Cancelled,
        Reason::ParallelCapacityExceeded,
        Reason::RuntimeError,
        Reason::UnknownServer,
        Reason::UnknownTool,
        Reason::InvalidArgs,
        Reason::InternalError,
    ];

    /// The documented name, e.g. `"type_error"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::ParseError => "parse_error",
            Reason::InvalidForm => "invalid_form",
            Reason::UnboundVar => "unbound_var",
            Reason::ArityError => "arity_error",
            Reason::TypeError => "type_error",
            Reason::ArithmeticError => "arithmetic_error",
            Reason::NotCallable => "not_callable",
            Reason::DestructureError => "destructure_error",
            Reason::LoopLimitExceeded => "loop_limit_exceeded",
            Reason::Timeout => "timeout",
            Reason::MemoryExceeded => "memory_exceeded",
            Reason::DepthExceeded => "depth_exceeded",
            Reason::Fail => "fail",
            Reason::Cancelled => "cancelled",
            Reason::ParallelCapacityExceeded => "parallel_capacity_exceeded",
            Reason::RuntimeError => "runtime_error",
            Reason::UnknownServer => "unknown_server",
            Reason::UnknownTool => "unknown_tool",
            Reason::InvalidArgs => "invalid_args",
            Reason::InternalError => "internal_error",
        }
    }

    /// The reason with this documented name.
    pub fn from_name(name: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| r.as_str() == name)
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for Reason {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Reason {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// Why a program failed. A program either returns a value or fails with one of these.
#[derive(Clone, Debug)]
pub struct LispError {
    reason: Reason,
    message: String,
    pos: Option<Pos>,
    hint: Option<String>,
    /// The value carried by `fail`.
    value: Option<Value>,
}

impl LispError {
    /// A new error with a reason and a message.
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        LispError {
            reason,
            message: message.into(),
            pos: None,
            hint: None,
            value: None,
        }
    }

    /// The typed reason; `reason().as_str()` is its documented name (`"type_error"`, ...).
    pub fn reason(&self) -> Reason {
        self.reason
    }

    /// The human-readable message (without position).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Where in the source the error arose, if known.
    pub fn pos(&self) -> Option<Pos> {
        self.pos
    }

    /// A hint such as "did you mean filter?".
    pub fn hint(&self) -> Option<&str> {
        self.hint.as_deref()
    }

    /// The value passed to `fail`, if this error came from `(fail v)`.
    pub fn value(&self) -> Option<&Value> {
        self.value.as_ref()
    }

    /// Attaches a position unless one is already set (the innermost position wins).
    pub fn with_pos(mut self, pos: Pos) -> Self {
        if self.pos.is_none() {
            self.pos = Some(pos);
        }
        self
    }

    /// Attaches a hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Attaches a carried value.
    pub fn with_value(mut self, v: Value) -> Self {
        self.value = Some(v);
        self
    }

    pub(crate) fn set_pos_if_none(&mut self, pos: Pos) {
        if self.pos.is_none() {
            self.pos = Some(pos);
        }
    }
}

impl fmt::Display for LispError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.reason, self.message)?;
        if let Some(h) = &self.hint {
            write!(f, " — {h}")?;
        }
        if let Some(p) = self.pos {
            write!(f, " ({p})")?;
        }
        Ok(())
    }
}

impl std::error::Error for LispError {}

/// Control flow out of an evaluation step: an error, a `recur` jump to the enclosing loop, or
/// `(return v)` ending the program. Builtins return it through [`R`].
pub enum Ctl {
    /// A program error.
    Err(Box<LispError>),
    /// A `recur` jump (only meaningful inside the evaluator).
    Recur,
    /// `(return v)`: the program ends early with this value.
    Return(Box<Value>),
}

impl From<LispError> for Ctl {
    fn from(e: LispError) -> Self {
        Ctl::Err(Box::new(e))
    }
}

/// Result type used inside the evaluator and builtins.
pub type R<T> = Result<T, Ctl>;

/// Shorthand for building an error result.
pub(crate) fn err<T>(reason: Reason, message: impl Into<String>) -> R<T> {
    Err(Ctl::Err(Box::new(LispError::new(reason, message))))
}
