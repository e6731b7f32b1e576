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

/// Why a program failed. A program either returns a value or fails with one of these.
#[derive(Clone, Debug)]
pub struct LispError {
    reason: &'static str,
    message: String,
    pos: Option<Pos>,
    hint: Option<String>,
    /// The value carried by `fail` (and internally by `return`).
    value: Option<Value>,
}

/// Internal reason used to carry `(return v)` to the top level.
pub(crate) const RETURN_REASON: &str = "__return";

impl LispError {
    /// A new error with a reason (e.g. `"type_error"`) and a message.
    pub fn new(reason: &'static str, message: impl Into<String>) -> Self {
        LispError {
            reason,
            message: message.into(),
            pos: None,
            hint: None,
            value: None,
        }
    }

    /// The typed reason, e.g. `"type_error"`, `"unbound_var"`, `"timeout"`.
    pub fn reason(&self) -> &'static str {
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

/// Control flow out of an evaluation step: an error, or a `recur` jump to the enclosing loop.
/// Builtins return it through [`R`].
pub enum Ctl {
    /// A program error.
    Err(Box<LispError>),
    /// A `recur` jump (only meaningful inside the evaluator).
    Recur,
}

impl From<LispError> for Ctl {
    fn from(e: LispError) -> Self {
        Ctl::Err(Box::new(e))
    }
}

/// Result type used inside the evaluator and builtins.
pub type R<T> = Result<T, Ctl>;

/// Shorthand for building an error result.
pub(crate) fn err<T>(reason: &'static str, message: impl Into<String>) -> R<T> {
    Err(Ctl::Err(Box::new(LispError::new(reason, message))))
}
