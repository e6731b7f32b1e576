//! Values to JSON text, bounded in depth and length.

use crate::error::{LispError, Reason};
use crate::printer::format_float;
use crate::value::Value;

const MAX_ENCODE_DEPTH: usize = 1_000;

fn encode_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn key_string(k: &Value) -> String {
    match k {
        Value::Str(s) | Value::Keyword(s) | Value::Symbol(s) => s.to_string(),
        other => {
            let mut s = String::new();
            crate::printer::to_str(other, &mut s);
            s
        }
    }
}

/// Encodes `v`, failing with `memory_exceeded` once the text is longer than `limit`.
pub(crate) fn encode(
    v: &Value,
    out: &mut String,
    depth: usize,
    limit: usize,
) -> Result<(), LispError> {
    if out.len() > limit {
        return Err(LispError::new(
            Reason::MemoryExceeded,
            "JSON text would exceed the memory budget",
        ));
    }
    if depth > MAX_ENCODE_DEPTH {
        return Err(LispError::new(
            Reason::DepthExceeded,
            "value nested too deeply to encode as JSON",
        ));
    }
    match v {
        Value::Nil => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => out.push_str(&i.to_string()),
        Value::Float(f) => {
            if f.is_finite() {
                let mut s = String::new();
                format_float(*f, &mut s);
                out.push_str(&s.replace('E', "e"));
            } else {
                out.push_str("null");
            }
        }
        Value::Str(s) | Value::Keyword(s) | Value::Symbol(s) => encode_str(s, out),
        Value::Var(s) => encode_str(&format!("#'{s}"), out),
        Value::Regex(r) => encode_str(r.as_str(), out),
        Value::Func(f) => {
            return Err(LispError::new(
                Reason::TypeError,
                format!("cannot encode function {} as JSON", f.name()),
            ));
        }
        Value::Vector(items) => encode_array(items.iter(), out, depth, limit)?,
        Value::Set(s) => encode_array(s.sorted().into_iter(), out, depth, limit)?,
        Value::Map(m) => {
            out.push('{');
            let mut entries: Vec<(String, &Value)> =
                m.iter().map(|(k, v)| (key_string(k), v)).collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            for (i, (k, x)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                encode_str(&k, out);
                out.push(':');
                encode(x, out, depth + 1, limit)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

/// A vector's or set's elements as a JSON array.
fn encode_array<'v>(
    items: impl Iterator<Item = &'v Value>,
    out: &mut String,
    depth: usize,
    limit: usize,
) -> Result<(), LispError> {
    out.push('[');
    for (i, x) in items.enumerate() {
        if i > 0 {
            out.push(',');
        }
        encode(x, out, depth + 1, limit)?;
    }
    out.push(']');
    Ok(())
}
