//! Rendering values in Clojure syntax (what the model sees): maps and sets sorted, strings
//! quoted, doubles like Clojure (`1.0`, `1.0E10`, `##Inf`).

use std::fmt::{self, Write};

use crate::value::Value;

/// Beyond this nesting the printer writes `...` instead of recursing further.
const MAX_PRINT_DEPTH: usize = 1_000;

/// Formats a double the way Clojure's `Double.toString` does.
pub fn format_float(f: f64, out: &mut String) {
    if f.is_nan() {
        out.push_str("##NaN");
    } else if f.is_infinite() {
        out.push_str(if f > 0.0 { "##Inf" } else { "##-Inf" });
    } else {
        let a = f.abs();
        if a == 0.0 || (1e-3..1e7).contains(&a) {
            let start = out.len();
            let _ = write!(out, "{f}");
            if !out[start..].contains('.') {
                out.push_str(".0");
            }
        } else {
            let s = format!("{f:e}");
            // Rust writes `1.5e10` / `1e-5`; Clojure writes `1.5E10` / `1.0E-5`.
            let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
            out.push_str(mant);
            if !mant.contains('.') {
                out.push_str(".0");
            }
            out.push('E');
            out.push_str(exp);
        }
    }
}

fn escape_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Appends the readable (`pr-str`) form of `v` to `out`.
pub fn pr(v: &Value, out: &mut String) {
    pr_depth(v, out, 0, true, usize::MAX);
}

/// Appends the `str` form: strings raw, `nil` empty, everything else readable.
pub fn to_str(v: &Value, out: &mut String) {
    match v {
        Value::Nil => {}
        Value::Str(s) => out.push_str(s),
        _ => pr_depth(v, out, 0, true, usize::MAX),
    }
}

/// Appends the `print`/`println` form: like `pr` but strings inside are not quoted.
pub fn print_plain(v: &Value, out: &mut String) {
    pr_depth(v, out, 0, false, usize::MAX);
}

/// How a value is rendered into text by the bounded printer.
#[derive(Clone, Copy)]
pub(crate) enum Style {
    /// `pr`: strings quoted.
    Readable,
    /// `str`: a top-level string raw, `nil` empty, the rest readable.
    Str,
    /// `print`: strings unquoted everywhere.
    Plain,
}

/// Renders `v` into `out`, stopping once `out` is longer than `limit`; returns false if it
/// stopped early. Every value prints at least one character, so the work is bounded by `limit`
/// even for values that share structure (a vector of a thousand copies of a big vector).
pub(crate) fn render_limited(v: &Value, out: &mut String, style: Style, limit: usize) -> bool {
    match (style, v) {
        (Style::Str, Value::Nil) => {}
        (Style::Str, Value::Str(s)) => out.push_str(s),
        (Style::Plain, _) => pr_depth(v, out, 0, false, limit),
        _ => pr_depth(v, out, 0, true, limit),
    }
    out.len() <= limit
}

fn pr_depth(v: &Value, out: &mut String, depth: usize, readable: bool, limit: usize) {
    if out.len() > limit {
        return;
    }
    if depth > MAX_PRINT_DEPTH {
        out.push_str("...");
        return;
    }
    match v {
        Value::Nil => out.push_str("nil"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Float(f) => format_float(*f, out),
        Value::Str(s) => {
            if readable {
                escape_str(s, out)
            } else {
                out.push_str(s)
            }
        }
        Value::Keyword(k) => {
            out.push(':');
            out.push_str(k);
        }
        Value::Symbol(s) => out.push_str(s),
        Value::Var(s) => {
            out.push_str("#'");
            out.push_str(s);
        }
        Value::Regex(r) => {
            out.push_str("#\"");
            out.push_str(r.as_str());
            out.push('"');
        }
        Value::Func(f) => {
            out.push_str("#function[");
            out.push_str(&f.name());
            out.push(']');
        }
        Value::Vector(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                pr_depth(x, out, depth + 1, readable, limit);
            }
            out.push(']');
        }
        Value::Map(m) => {
            out.push('{');
            for (i, (k, x)) in m.sorted().into_iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                pr_depth(k, out, depth + 1, readable, limit);
                out.push(' ');
                pr_depth(x, out, depth + 1, readable, limit);
            }
            out.push('}');
        }
        Value::Set(s) => {
            out.push_str("#{");
            for (i, x) in s.sorted().into_iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                pr_depth(x, out, depth + 1, readable, limit);
            }
            out.push('}');
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        pr(self, &mut s);
        f.write_str(&s)
    }
}

impl Value {
    /// The readable Clojure rendering (same as `Display`).
    pub fn to_clojure_string(&self) -> String {
        self.to_string()
    }
}

/// A short rendering of a value for error messages.
pub(crate) fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 {
        let mut t: String = s.chars().take(57).collect();
        t.push_str("...");
        t
    } else {
        s
    }
}

const TRUNCATED: &str = "\n[output truncated]\n";

/// Appends to captured output, truncating once the cap is reached.
pub(crate) fn append_output(out: &mut String, text: &str, max: usize) {
    if out.ends_with(TRUNCATED) {
        return;
    }
    if out.len() + text.len() <= max {
        out.push_str(text);
        return;
    }
    let cut = text.floor_char_boundary(max.saturating_sub(out.len()));
    out.push_str(&text[..cut]);
    out.push_str(TRUNCATED);
}
