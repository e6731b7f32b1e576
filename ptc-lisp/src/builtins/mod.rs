//! The core library. Each category lives in its own module with a static `BUILTINS` table;
//! to add functions, add a module with such a table and list it in [`TABLES`].
//!
//! A builtin receives its arguments as `&mut [Value]` so it may move them out: an accumulator
//! passed to `assoc`/`conj`/`update` is then uniquely owned and updated in place.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use crate::error::{Ctl, LispError, R};
use crate::eval::{Ctx, short};
use crate::value::{MapData, Value};

pub(crate) mod coll;
pub(crate) mod core;
pub(crate) mod io;
pub(crate) mod json;
pub(crate) mod maps;
pub(crate) mod math;
pub(crate) mod parallel;
pub(crate) mod ptc;
pub(crate) mod regex;
pub(crate) mod repl;
pub(crate) mod seqs;
pub(crate) mod sets;
pub(crate) mod strings;
pub(crate) mod time;

/// Signature of a builtin.
pub type BuiltinFn = fn(&mut Ctx<'_>, &mut [Value]) -> R<Value>;

/// Maximum arity marker for variadic builtins.
pub const VARIADIC: usize = usize::MAX;

/// A core library function.
pub struct Builtin {
    /// Name as written in programs (`"map"`, `"clojure.string/join"`, `"json/parse-string"`).
    pub name: &'static str,
    /// Minimum number of arguments.
    pub min: usize,
    /// Maximum number of arguments ([`VARIADIC`] when unbounded).
    pub max: usize,
    /// Implementation.
    pub f: BuiltinFn,
    /// One-line documentation, starting with the call signature.
    pub doc: &'static str,
}

/// Shorthand for table entries: `b!(name, min, max, fn, doc)`.
macro_rules! b {
    ($name:expr, $min:expr, $max:expr, $f:expr, $doc:expr) => {
        $crate::builtins::Builtin {
            name: $name,
            min: $min,
            max: $max,
            f: $f,
            doc: $doc,
        }
    };
}
pub(crate) use b;

/// Every builtin table, in registration order (later tables do not override earlier names).
const TABLES: &[&[Builtin]] = &[
    core::BUILTINS,
    math::BUILTINS,
    coll::BUILTINS,
    seqs::BUILTINS,
    maps::BUILTINS,
    sets::BUILTINS,
    strings::BUILTINS,
    regex::BUILTINS,
    json::BUILTINS,
    ptc::BUILTINS,
    parallel::BUILTINS,
    io::BUILTINS,
    repl::BUILTINS,
    time::BUILTINS,
];

static REGISTRY: LazyLock<HashMap<&'static str, &'static Builtin>> = LazyLock::new(|| {
    let mut m = HashMap::new();
    for table in TABLES {
        for b in table.iter() {
            m.entry(b.name).or_insert(b);
        }
    }
    m
});

/// Looks up a builtin by name (qualified names such as `clojure.string/join` included).
pub(crate) fn lookup(name: &str) -> Option<&'static Builtin> {
    REGISTRY.get(name).copied()
}

/// Every registered builtin name.
pub(crate) fn names() -> impl Iterator<Item = &'static str> {
    REGISTRY.keys().copied()
}

/// Every builtin, sorted by name.
pub fn all() -> Vec<&'static Builtin> {
    let mut v: Vec<&'static Builtin> = REGISTRY.values().copied().collect();
    v.sort_by_key(|b| b.name);
    v
}

pub(crate) fn arity_error(b: &Builtin, n: usize) -> LispError {
    let expect = if b.max == VARIADIC {
        format!("at least {}", b.min)
    } else if b.max == b.min {
        format!("{}", b.min)
    } else if b.max == b.min + 1 {
        format!("{} or {}", b.min, b.max)
    } else {
        format!("{} to {}", b.min, b.max)
    };
    LispError::new(
        "arity_error",
        format!(
            "arity error: {} expects {expect} argument(s), got {n}",
            b.name
        ),
    )
}

/// A type error naming the function and the offending value.
pub(crate) fn type_error(fname: &str, expected: &str, got: &Value) -> LispError {
    LispError::new(
        "type_error",
        format!(
            "{fname} expects {expected}, got {} ({})",
            short(got),
            got.type_name()
        ),
    )
}

/// [`type_error`] as a result.
pub(crate) fn type_err<T>(fname: &str, expected: &str, got: &Value) -> R<T> {
    Err(Ctl::from(type_error(fname, expected, got)))
}

// ---------------------------------------------------------------------------------------------
// Flexible key access (keyword ↔ string, then `-` → `_`).

fn alt_key(k: &Value) -> Option<(&str, bool)> {
    match k {
        Value::Keyword(s) => Some((s, true)),
        Value::Str(s) => Some((s, false)),
        _ => None,
    }
}

/// Map lookup with the PTC fallbacks: exact key, then the other of keyword/string, then with
/// `-` replaced by `_` in both forms.
pub(crate) fn map_get_flex<'m>(m: &'m MapData, k: &Value) -> Option<&'m Value> {
    let (name, is_kw) = match alt_key(k) {
        Some(x) => x,
        None => return m.get(k),
    };
    if let MapData::Small(entries) = m {
        // One pass over a small map: an exact match wins, the other key kind is the fallback.
        let mut other = None;
        for (kk, vv) in entries {
            match kk {
                Value::Keyword(s) if &**s == name => {
                    if is_kw {
                        return Some(vv);
                    }
                    other = Some(vv);
                }
                Value::Str(s) if &**s == name => {
                    if !is_kw {
                        return Some(vv);
                    }
                    other = Some(vv);
                }
                _ => {}
            }
        }
        if other.is_some() {
            return other;
        }
    } else {
        if let Some(v) = m.get(k) {
            return Some(v);
        }
        if let Some(v) = m.get_named(name, !is_kw) {
            return Some(v);
        }
    }
    if name.contains('-') {
        let alt = name.replace('-', "_");
        if let Some(v) = m
            .get_named(&alt, is_kw)
            .or_else(|| m.get_named(&alt, !is_kw))
        {
            return Some(v);
        }
    }
    None
}

/// `get` semantics on any value: maps (flexible), vectors by index, sets by membership,
/// strings by index; anything else gives `None`.
pub(crate) fn get_flex(target: &Value, k: &Value) -> Option<Value> {
    match target {
        Value::Map(m) => map_get_flex(m, k).cloned(),
        Value::Vector(v) => match k {
            Value::Int(i) if *i >= 0 => v.get(*i as usize).cloned(),
            _ => None,
        },
        Value::Set(s) => s.0.get(k).cloned(),
        Value::Str(s) => match k {
            Value::Int(i) if *i >= 0 => s
                .chars()
                .nth(*i as usize)
                .map(|c| Value::str(c.encode_utf8(&mut [0; 4]))),
            _ => None,
        },
        _ => None,
    }
}

/// True if `get_flex` would find the key (used by `contains?` and `:or` defaults).
pub(crate) fn has_key_flex(target: &Value, k: &Value) -> bool {
    match target {
        Value::Map(m) => map_get_flex(m, k).is_some(),
        Value::Vector(v) => matches!(k, Value::Int(i) if *i >= 0 && (*i as usize) < v.len()),
        Value::Set(s) => s.0.contains(k),
        Value::Str(s) => matches!(k, Value::Int(i) if *i >= 0 && (*i as usize) < s.chars().count()),
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------------
// Sequence views.

fn char_values(s: &str) -> Vec<Value> {
    s.chars()
        .map(|c| Value::str(c.encode_utf8(&mut [0; 4])))
        .collect()
}

/// The elements of a seqable value: vectors as they are, sets and maps sorted (maps as
/// `[k v]` entries), strings as one-character strings, `nil` as empty.
pub(crate) fn seq_items(v: &Value) -> R<Cow<'_, [Value]>> {
    Ok(match v {
        Value::Nil => Cow::Borrowed(&[]),
        Value::Vector(items) => Cow::Borrowed(&items[..]),
        Value::Set(s) => Cow::Owned(s.sorted().into_iter().cloned().collect()),
        Value::Map(m) => Cow::Owned(
            m.sorted()
                .into_iter()
                .map(|(k, v)| Value::vector(vec![k.clone(), v.clone()]))
                .collect(),
        ),
        Value::Str(s) => Cow::Owned(char_values(s)),
        other => {
            return Err(Ctl::from(LispError::new(
                "type_error",
                format!(
                    "don't know how to create a sequence from {} ({})",
                    short(other),
                    other.type_name()
                ),
            )));
        }
    })
}

/// Like [`seq_items`] but takes ownership, avoiding a copy when the vector is uniquely owned.
pub(crate) fn into_items(v: Value) -> R<Vec<Value>> {
    match v {
        Value::Vector(items) => Ok(match Arc::try_unwrap(items) {
            Ok(mut it) => std::mem::take(&mut it.0),
            Err(shared) => shared.0.clone(),
        }),
        other => Ok(seq_items(&other)?.into_owned()),
    }
}

/// Number of elements for `count`.
pub(crate) fn count_of(v: &Value) -> R<usize> {
    Ok(match v {
        Value::Nil => 0,
        Value::Vector(items) => items.len(),
        Value::Map(m) => m.len(),
        Value::Set(s) => s.0.len(),
        Value::Str(s) => s.chars().count(),
        other => return type_err("count", "a collection or string", other),
    })
}

// ---------------------------------------------------------------------------------------------
// Destructuring helpers.

pub(crate) fn destructure_nth(v: &Value, i: usize) -> R<Value> {
    match v {
        Value::Nil => Ok(Value::Nil),
        Value::Vector(items) => Ok(items.get(i).cloned().unwrap_or(Value::Nil)),
        Value::Str(s) => Ok(s
            .chars()
            .nth(i)
            .map(|c| Value::str(c.encode_utf8(&mut [0; 4])))
            .unwrap_or(Value::Nil)),
        Value::Map(_) | Value::Set(_) => Ok(seq_items(v)?.get(i).cloned().unwrap_or(Value::Nil)),
        other => Err(Ctl::from(LispError::new(
            "destructure_error",
            format!(
                "cannot destructure {} ({}) as a sequence",
                short(other),
                other.type_name()
            ),
        ))),
    }
}

pub(crate) fn destructure_rest(ctx: &mut Ctx<'_>, v: &Value, i: usize) -> R<Value> {
    let items = match v {
        Value::Nil => return Ok(Value::Nil),
        Value::Vector(_) | Value::Str(_) | Value::Map(_) | Value::Set(_) => seq_items(v)?,
        other => {
            return Err(Ctl::from(LispError::new(
                "destructure_error",
                format!(
                    "cannot destructure {} ({}) as a sequence",
                    short(other),
                    other.type_name()
                ),
            )));
        }
    };
    if i >= items.len() {
        return Ok(Value::Nil);
    }
    ctx.charge_items(items.len() - i)?;
    Ok(Value::vector(items[i..].to_vec()))
}

pub(crate) fn destructure_get(v: &Value, key: &Value) -> R<Option<Value>> {
    match v {
        Value::Nil => Ok(None),
        Value::Map(m) => Ok(map_get_flex(m, key).cloned()),
        // Keyword arguments (`& {:keys [..]}`) arrive as a flat vector of pairs.
        Value::Vector(items) => {
            if items.len() == 1
                && let Value::Map(m) = &items[0]
            {
                return Ok(map_get_flex(m, key).cloned());
            }
            for pair in items.chunks(2) {
                if pair.len() == 2 && pair[0] == *key {
                    return Ok(Some(pair[1].clone()));
                }
            }
            Ok(None)
        }
        other => Err(Ctl::from(LispError::new(
            "destructure_error",
            format!(
                "cannot destructure {} ({}) as a map",
                short(other),
                other.type_name()
            ),
        ))),
    }
}

// ---------------------------------------------------------------------------------------------
// Small shared helpers.

/// Takes argument `i` out of the argument slice.
#[inline]
pub(crate) fn take(args: &mut [Value], i: usize) -> Value {
    std::mem::take(&mut args[i])
}

/// An integer argument.
pub(crate) fn int_arg(fname: &str, v: &Value) -> R<i64> {
    match v {
        Value::Int(i) => Ok(*i),
        Value::Float(f) if f.fract() == 0.0 && f.is_finite() => Ok(*f as i64),
        other => type_err(fname, "an integer", other),
    }
}

/// A string argument.
pub(crate) fn str_arg<'v>(fname: &str, v: &'v Value) -> R<&'v str> {
    match v {
        Value::Str(s) => Ok(s),
        other => type_err(fname, "a string", other),
    }
}

/// Builds a vector value after charging the memory budget.
pub(crate) fn vec_value(ctx: &Ctx<'_>, v: Vec<Value>) -> R<Value> {
    ctx.charge_items(v.len())?;
    Ok(Value::vector(v))
}
