//! Whether a value can be kept as data: no function anywhere in it, nested within
//! [`MAX_DEPTH`] (so encoding and decoding it recurse a bounded depth), and of a bounded size
//! (structure shared many times over is small in memory but not once written out).

use crate::value::Value;

/// The deepest nesting kept as data: a tool result's JSON (at most `max_json_depth`, 512 by
/// default) fits.
pub(crate) const MAX_DEPTH: usize = 512;

/// The most a value kept as data may take written out (about; strings by their length).
pub(crate) const MAX_BYTES: u64 = 256 << 20;

/// What [`scan`] found.
pub(crate) enum Scan {
    Data,
    Function,
    TooDeep,
    TooLarge,
}

impl Scan {
    /// Why a value that is not [`Scan::Data`] and has no kept source is not kept.
    pub(crate) fn why(&self, value: &Value) -> String {
        match self {
            Scan::Data => String::new(),
            Scan::Function if matches!(value, Value::Func(_)) => {
                "a function defined inside another form; only a top-level def or defn is kept"
                    .into()
            }
            Scan::Function => "holds functions, and was not defined by a top-level def form".into(),
            Scan::TooDeep => format!("nested deeper than {MAX_DEPTH} levels"),
            Scan::TooLarge => format!("larger than {} MiB written out", MAX_BYTES >> 20),
        }
    }
}

/// Walks `v` with an explicit stack of iterators (any depth, little memory however wide;
/// stops past [`MAX_DEPTH`] and [`MAX_BYTES`]).
pub(crate) fn scan(v: &Value) -> Scan {
    type Items<'v> = Box<dyn Iterator<Item = &'v Value> + 'v>;
    let mut bytes = 0u64;
    let mut stack: Vec<Items<'_>> = vec![Box::new(std::iter::once(v))];
    while let Some(top) = stack.last_mut() {
        if bytes > MAX_BYTES {
            return Scan::TooLarge;
        }
        let Some(v) = top.next() else {
            stack.pop();
            continue;
        };
        // `stack.len()` is the depth of `v`'s children.
        let deep = stack.len() > MAX_DEPTH;
        bytes += 8;
        let children: Items<'_> = match v {
            Value::Func(_) => return Scan::Function,
            Value::Str(s) | Value::Keyword(s) | Value::Symbol(s) | Value::Var(s) => {
                bytes += s.len() as u64;
                continue;
            }
            Value::Regex(r) => {
                bytes += r.as_str().len() as u64;
                continue;
            }
            Value::Nil | Value::Bool(_) | Value::Int(_) | Value::Float(_) => continue,
            Value::Vector(items) => Box::new(items.iter()),
            Value::Set(s) => Box::new(s.0.iter()),
            Value::Map(m) => Box::new(m.iter().flat_map(|(k, x)| [k, x])),
        };
        if deep {
            return Scan::TooDeep;
        }
        stack.push(children);
    }
    if bytes > MAX_BYTES {
        return Scan::TooLarge;
    }
    Scan::Data
}
