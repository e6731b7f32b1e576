//! The serialised form of session state, format 1: JSON, so a stored session can be read by eye.
//!
//! ```text
//! {"ptc_session":1,"vars":[{"name":"rows","value":V},{"name":"f","source":"(defn f ...)","uses":["rows"]}]}
//! ```
//!
//! A value `V` is `null`, `true`/`false`, a JSON integer (an integer) or a number with a `.` or
//! an exponent (a float), a string, an array (a vector), or an object of one field, its tag:
//! `{"kw":"ns/a"}`, `{"sym":"x"}`, `{"var":"x"}`, `{"re":"\\d+"}`, `{"float":"NaN"}` (also
//! `"Infinity"`, `"-Infinity"`), `{"int":"-9223372036854775808"}` (an integer a JSON number
//! would not read back exactly), `{"map":[k1,v1,k2,v2,...]}`, `{"set":[x,...]}`. Map entries and
//! set members keep their order. Only kept definitions are written.
//!
//! Decoding reads the JSON with the runtime's own decoder (an explicit stack, a depth limit),
//! so no input can exhaust the stack; values nest at most [`MAX_DEPTH`] levels.

use super::scan::MAX_DEPTH;
use super::{Kept, SessionError, SessionVar};
use crate::value::{MapData, Value};

/// The format version this runtime writes and reads.
pub const FORMAT: i64 = 1;

/// Where encoded text goes: bytes, or only their count.
pub(crate) trait Sink {
    fn put(&mut self, s: &str);
}

impl Sink for Vec<u8> {
    fn put(&mut self, s: &str) {
        self.extend_from_slice(s.as_bytes());
    }
}

/// Counts the bytes it is given.
pub(crate) struct Count(pub usize);

impl Sink for Count {
    fn put(&mut self, s: &str) {
        self.0 += s.len();
    }
}

pub(crate) fn encode(vars: &[SessionVar], out: &mut impl Sink) {
    out.put(&format!("{{\"ptc_session\":{FORMAT},\"vars\":["));
    let mut first = true;
    for var in vars.iter().filter(|v| v.is_kept()) {
        if !first {
            out.put(",");
        }
        first = false;
        out.put("{\"name\":");
        string(&var.name, out);
        match &var.kept {
            Kept::Data(v) => {
                out.put(",\"value\":");
                value(v, out);
            }
            Kept::Source(src) => {
                out.put(",\"source\":");
                string(src, out);
                if !var.uses.is_empty() {
                    out.put(",\"uses\":[");
                    for (i, u) in var.uses.iter().enumerate() {
                        if i > 0 {
                            out.put(",");
                        }
                        string(u, out);
                    }
                    out.put("]");
                }
            }
            Kept::NotKept(_) => {}
        }
        out.put("}");
    }
    out.put("]}");
}

fn string(s: &str, out: &mut (impl Sink + ?Sized)) {
    out.put("\"");
    let mut run = 0;
    for (i, c) in s.char_indices() {
        let esc = match c {
            '"' => "\\\"",
            '\\' => "\\\\",
            '\n' => "\\n",
            '\r' => "\\r",
            '\t' => "\\t",
            c if (c as u32) < 0x20 => "",
            _ => continue,
        };
        out.put(&s[run..i]);
        if esc.is_empty() {
            out.put(&format!("\\u{:04x}", c as u32));
        } else {
            out.put(esc);
        }
        run = i + c.len_utf8();
    }
    out.put(&s[run..]);
    out.put("\"");
}

fn tagged(tag: &str, s: &str, out: &mut (impl Sink + ?Sized)) {
    out.put(&format!("{{\"{tag}\":"));
    string(s, out);
    out.put("}");
}

/// Writes a value kept as data: no functions, at most [`MAX_DEPTH`] deep (the snapshot
/// checked), so the recursion is bounded.
fn value(v: &Value, out: &mut (impl Sink + ?Sized)) {
    match v {
        Value::Nil => out.put("null"),
        Value::Bool(b) => out.put(if *b { "true" } else { "false" }),
        Value::Int(i) if *i == i64::MIN => tagged("int", &i.to_string(), out),
        Value::Int(i) => out.put(&i.to_string()),
        // `{:?}` is the shortest text that reads back to the same float, and always has a `.`
        // or an exponent, so it reads back as a float.
        Value::Float(f) if f.is_finite() => out.put(&format!("{f:?}")),
        Value::Float(f) if f.is_nan() => tagged("float", "NaN", out),
        Value::Float(f) if *f > 0.0 => tagged("float", "Infinity", out),
        Value::Float(_) => tagged("float", "-Infinity", out),
        Value::Str(s) => string(s, out),
        Value::Keyword(s) => tagged("kw", s, out),
        Value::Symbol(s) => tagged("sym", s, out),
        Value::Var(s) => tagged("var", s, out),
        Value::Regex(r) => tagged("re", r.as_str(), out),
        Value::Vector(items) => list(items.iter(), out),
        Value::Set(s) => {
            out.put("{\"set\":");
            list(s.0.iter(), out);
            out.put("}");
        }
        Value::Map(m) => {
            out.put("{\"map\":");
            list(m.iter().flat_map(|(k, x)| [k, x]), out);
            out.put("}");
        }
        // Never kept as data (the snapshot keeps such values as source, or not at all).
        Value::Func(_) => out.put("null"),
    }
}

fn list<'v>(items: impl Iterator<Item = &'v Value>, out: &mut (impl Sink + ?Sized)) {
    out.put("[");
    for (i, x) in items.enumerate() {
        if i > 0 {
            out.put(",");
        }
        value(x, out);
    }
    out.put("]");
}

/// JSON nesting of the deepest value: the document, the vars array and a var's object, then
/// two levels (a tag's object and its array) per level of the value.
const JSON_DEPTH: usize = 2 * MAX_DEPTH + 8;

pub(crate) fn decode(bytes: &[u8]) -> Result<Vec<SessionVar>, SessionError> {
    let doc = match crate::json::decode(bytes, JSON_DEPTH, u64::MAX, None) {
        Ok((doc, _)) => doc,
        // What this runtime writes starts so: cut short or damaged, not some other data.
        Err(e) if bytes.starts_with(b"{\"ptc_session\":") => {
            return Err(SessionError::Invalid(format!(
                "the JSON is cut short or damaged ({})",
                e.message()
            )));
        }
        Err(e) => {
            return Err(SessionError::NotSessionState(format!(
                "not JSON ({})",
                e.message()
            )));
        }
    };
    let Value::Map(doc) = &doc else {
        return Err(SessionError::NotSessionState(
            "JSON, but not an object".into(),
        ));
    };
    match field(doc, "ptc_session") {
        Some(Value::Int(FORMAT)) => {}
        Some(Value::Int(v)) => return Err(SessionError::Version(*v)),
        Some(_) => {
            return Err(SessionError::NotSessionState(
                "its ptc_session field is not a format number".into(),
            ));
        }
        None => {
            return Err(SessionError::NotSessionState(
                "a JSON object without a ptc_session field".into(),
            ));
        }
    }
    let Some(Value::Vector(items)) = field(doc, "vars") else {
        return Err(SessionError::Invalid("no vars array".into()));
    };
    let mut vars: Vec<SessionVar> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let var = decode_var(item).map_err(|e| SessionError::Invalid(format!("vars[{i}]: {e}")))?;
        if vars.iter().any(|v| v.name == var.name) {
            return Err(SessionError::Invalid(format!(
                "vars[{i}]: {} is defined twice",
                var.name
            )));
        }
        vars.push(var);
    }
    Ok(vars)
}

fn field<'m>(m: &'m MapData, key: &str) -> Option<&'m Value> {
    m.get(&Value::str(key))
}

fn decode_var(item: &Value) -> Result<SessionVar, String> {
    let Value::Map(m) = item else {
        return Err("not an object".into());
    };
    let name = match field(m, "name") {
        Some(Value::Str(s)) if valid_name(s) => s.to_string(),
        Some(Value::Str(s)) => return Err(format!("{s:?} is not a name a program can define")),
        _ => return Err("no name".into()),
    };
    let (kept, uses) = match (field(m, "value"), field(m, "source")) {
        (Some(v), None) => {
            let v = untag(v, 0).map_err(|e| format!("{name}: {e}"))?;
            (Kept::Data(v), Vec::new())
        }
        (None, Some(Value::Str(src))) => {
            let uses = match field(m, "uses") {
                None => Vec::new(),
                Some(Value::Vector(us)) => us
                    .iter()
                    .map(|u| match u {
                        Value::Str(s) => Ok(s.to_string()),
                        _ => Err(format!("{name}: uses holds a {}", u.type_name())),
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err(format!("{name}: uses is not an array")),
            };
            (Kept::Source(src.to_string()), uses)
        }
        _ => return Err(format!("{name}: needs either a value or a source string")),
    };
    Ok(SessionVar { name, kept, uses })
}

/// A name `def` could have made: a plain symbol's text, and none of the interpreter's own.
fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && crate::globals::is_user_name(s)
        && !s
            .chars()
            .any(|c| c.is_whitespace() || "()[]{}\",;/".contains(c))
}

/// The value a tagged JSON value stands for; `depth` is its nesting in the value.
fn untag(v: &Value, depth: usize) -> Result<Value, String> {
    let nested = || {
        if depth >= MAX_DEPTH {
            Err(format!("a value nested deeper than {MAX_DEPTH} levels"))
        } else {
            Ok(())
        }
    };
    let items = |xs: &[Value]| -> Result<Vec<Value>, String> {
        nested()?;
        xs.iter().map(|x| untag(x, depth + 1)).collect()
    };
    Ok(match v {
        Value::Nil | Value::Bool(_) | Value::Int(_) | Value::Float(_) | Value::Str(_) => v.clone(),
        Value::Vector(xs) => Value::vector(items(xs)?),
        Value::Map(m) if m.len() == 1 => {
            let Some((Value::Str(tag), payload)) = m.iter().next() else {
                return Err("a tag that is not a string".into());
            };
            match (&**tag, payload) {
                ("kw", Value::Str(s)) => Value::Keyword(s.clone()),
                ("sym", Value::Str(s)) => Value::Symbol(s.clone()),
                ("var", Value::Str(s)) => Value::Var(s.clone()),
                ("re", Value::Str(s)) => match regex::Regex::new(s) {
                    Ok(r) => Value::Regex(std::sync::Arc::new(r)),
                    Err(e) => return Err(format!("invalid regex {s:?}: {e}")),
                },
                ("float", Value::Str(s)) => Value::Float(match &**s {
                    "NaN" => f64::NAN,
                    "Infinity" => f64::INFINITY,
                    "-Infinity" => f64::NEG_INFINITY,
                    _ => return Err(format!("{s:?} is not a float tag")),
                }),
                ("int", Value::Str(s)) => match s.parse::<i64>() {
                    Ok(i) => Value::Int(i),
                    Err(_) => return Err(format!("{s:?} is not a 64-bit integer")),
                },
                ("map", Value::Vector(kv)) if kv.len() % 2 == 0 => {
                    let flat = items(kv)?;
                    let mut m = MapData::with_capacity(flat.len() / 2);
                    let mut it = flat.into_iter();
                    while let (Some(k), Some(x)) = (it.next(), it.next()) {
                        m.insert(k, x);
                    }
                    Value::Map(crate::value::CollArc::new(m.into()))
                }
                ("set", Value::Vector(xs)) => Value::set_from(items(xs)?),
                (tag, payload) => {
                    return Err(format!(
                        "unknown tagged value {{{tag:?}: {}}}",
                        payload.type_name()
                    ));
                }
            }
        }
        Value::Map(m) => {
            return Err(format!(
                "an object of {} fields, not a tagged value",
                m.len()
            ));
        }
        other => {
            return Err(format!(
                "a {} where a value was expected",
                other.type_name()
            ));
        }
    })
}
