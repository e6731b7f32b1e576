//! JSON in and out. Decoding goes straight from bytes to [`Value`]s (no intermediate
//! `serde_json::Value`), interns object keys and short strings (tool results repeat them
//! millions of times), enforces a depth limit and charges the memory budget as it goes; it reads
//! a slice held whole or a reader a window at a time.

mod decode;
mod encode;
mod source;

use std::io::Read;

use crate::error::{LispError, Reason};
use crate::limits::Limits;
use crate::value::Value;

pub(crate) use decode::{decode, decode_for};
pub(crate) use encode::encode;

fn jerr(msg: impl Into<String>) -> LispError {
    LispError::new(Reason::ParseError, msg)
}

impl Value {
    /// Decodes JSON bytes straight into values, with `limits.max_json_depth` and
    /// `limits.max_memory_bytes` applied.
    pub fn from_json_bytes(bytes: &[u8], limits: &Limits) -> Result<Value, LispError> {
        decode(bytes, limits.max_json_depth, limits.max_memory_bytes, None).map(|(v, _)| v)
    }

    /// Decodes JSON read from `read` (a file, a pipe) a window at a time, so the input is never
    /// whole in memory; otherwise as [`Value::from_json_bytes`], positions in messages
    /// included. A read error is reported as a `parse_error` naming it.
    pub fn from_json_reader(read: impl Read, limits: &Limits) -> Result<Value, LispError> {
        decode::decode_from(
            source::Streamed::new(read, source::WINDOW),
            decode::MAX_INTERNED,
            limits.max_json_depth,
            limits.max_memory_bytes,
            None,
            None,
        )
        .map(|(v, _)| v)
    }

    /// Encodes as JSON: keywords and symbols become strings, sets become arrays, map keys are
    /// stringified, non-finite floats become `null`. Errors on functions and on nesting beyond
    /// the printer's bound.
    pub fn to_json_string(&self) -> Result<String, LispError> {
        let mut out = String::new();
        encode(self, &mut out, 0, usize::MAX)?;
        Ok(out)
    }
}
