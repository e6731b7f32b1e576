//! The core library. Each category lives in its own module with a static `BUILTINS` table;
//! to add functions, add a module with such a table and list it in [`TABLES`].
//!
//! A builtin receives its arguments as `&mut [Value]` so it may move them out: an accumulator
//! passed to `assoc`/`conj`/`update` is then uniquely owned and updated in place.

use std::collections::HashMap;
use std::sync::LazyLock;

use crate::error::{Ctl, LispError, R, Reason};
use crate::eval::Ctx;
pub use crate::function::{Builtin, BuiltinFn, VARIADIC};
use crate::names::{Namespace, NsKind, TOOL_DISCOVERY};
use crate::printer::short;
pub(crate) use crate::value::access::{get_flex, has_key_flex, map_get_flex};
use crate::value::{CollArc, Value};

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
pub(crate) mod session;
pub(crate) mod sets;
pub(crate) mod strings;
pub(crate) mod time;

/// Shorthand for table entries: `b!(name, min, max, fn, doc)`, optionally followed by the
/// entry's [`Traits`](crate::function::Traits).
macro_rules! b {
    ($name:expr, $min:expr, $max:expr, $f:expr, $doc:expr) => {
        $crate::builtins::b!($name, $min, $max, $f, $doc, $crate::function::Traits::NONE)
    };
    ($name:expr, $min:expr, $max:expr, $f:expr, $doc:expr, $traits:expr) => {
        $crate::function::Builtin {
            name: $name,
            min: $min,
            max: $max,
            f: $f,
            doc: $doc,
            traits: $traits,
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
    session::BUILTINS,
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

/// The builtin `name` means in a local namespace: the namespace's own builtin, else (for
/// builtin namespaces) the unqualified core one (`str/count` is `count`); `None` for names the
/// namespace does not serve (the rest of `tool/` is the host's).
pub(crate) fn lookup_in(space: &Namespace, name: &str) -> Option<&'static Builtin> {
    match space.kind {
        NsKind::Builtins { prefix } => lookup(&format!("{prefix}{name}")).or_else(|| lookup(name)),
        NsKind::Discovery => TOOL_DISCOVERY
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, target)| lookup(target)),
        NsKind::Data => None,
    }
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

/// A type error naming the function and the offending value.
pub(crate) fn type_error(fname: &str, expected: &str, got: &Value) -> LispError {
    LispError::new(
        Reason::TypeError,
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

/// Like [`Ctx::seq`] but takes ownership, avoiding a copy when the vector is uniquely owned.
/// The storage's charge comes back ([`Charged::into_inner`](crate::value::Charged::into_inner)):
/// a value built on it is charged ([`Ctx::vector`]).
pub(crate) fn into_items(ctx: &Ctx<'_>, v: Value) -> R<Vec<Value>> {
    match v {
        Value::Vector(items) => Ok(match CollArc::try_unwrap(items) {
            Ok(it) => std::mem::take(&mut it.into_inner().0),
            Err(shared) => shared.0.clone(),
        }),
        other => Ok(ctx.seq(&other)?.into_owned()),
    }
}

/// Builds a vector value after charging the memory budget ([`Ctx::vector`]).
pub(crate) fn vec_value(ctx: &Ctx<'_>, v: Vec<Value>) -> R<Value> {
    ctx.vector(v)
}
