//! Reading values the PTC way: flexible key lookup (keyword ↔ string, then `-` → `_`) and
//! sequence views of any seqable value. The evaluator and the standard library both read
//! values through these.

use std::borrow::Cow;

use crate::error::{Ctl, LispError, R, Reason};
use crate::meter::Charge;
use crate::printer::short;
use crate::value::{MapData, Value};

/// The elements of a seqable value as a slice (the evaluator's `seq`): a vector's own, or built for a
/// set, map or string and charged to the program's budget for as long as the view lives.
pub(crate) struct Seq<'v> {
    items: Cow<'v, [Value]>,
    _charge: Charge,
}

impl<'v> Seq<'v> {
    pub(crate) fn borrowed(items: &'v [Value]) -> Self {
        Seq {
            items: Cow::Borrowed(items),
            _charge: Charge::default(),
        }
    }

    pub(crate) fn built(items: Vec<Value>, charge: Charge) -> Self {
        Seq {
            items: Cow::Owned(items),
            _charge: charge,
        }
    }

    /// The elements as a vector of their own. A built view's charge comes back: a value made of
    /// them is charged (the evaluator's `vector`).
    pub(crate) fn into_owned(self) -> Vec<Value> {
        self.items.into_owned()
    }
}

impl std::ops::Deref for Seq<'_> {
    type Target = [Value];
    fn deref(&self) -> &[Value] {
        &self.items
    }
}

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
    if let Some(entries) = m.small_entries() {
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
        Value::Map(_) | Value::Set(_) => get_in_place(target, k).cloned(),
        Value::Vector(v) => match k {
            Value::Int(i) if *i >= 0 => v.get(*i as usize).cloned(),
            _ => None,
        },
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

/// What [`get_flex`] finds in a map or a set, where it lies: `None` for any other target. A
/// keyword's lookup (`(:k x)`) reads only these, so the evaluator can look without cloning.
pub(crate) fn get_in_place<'t>(target: &'t Value, k: &Value) -> Option<&'t Value> {
    match target {
        Value::Map(m) => map_get_flex(m, k),
        Value::Set(s) => s.0.get(k),
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

// Sequence views.

fn char_values(s: &str) -> Vec<Value> {
    // Exactly as many as there are characters: the vector is charged at that length.
    let mut chars = Vec::with_capacity(s.chars().count());
    chars.extend(s.chars().map(|c| Value::Str(c.into())));
    chars
}

/// The elements of a seqable value: vectors as they are, sets and maps sorted (maps as
/// `[k v]` entries), strings as one-character strings, `nil` as empty.
/// Element `i` of a sequence-like value (nil past the end, strings by character, maps and sets
/// in iteration order); `None` when `v` is not sequence-like, so each caller names its own error.
pub(crate) fn nth_item(v: &Value, i: usize) -> Option<R<Value>> {
    Some(match v {
        Value::Nil => Ok(Value::Nil),
        Value::Vector(items) => Ok(items.get(i).cloned().unwrap_or(Value::Nil)),
        Value::Str(s) => Ok(s
            .chars()
            .nth(i)
            .map(|c| Value::str(c.encode_utf8(&mut [0; 4])))
            .unwrap_or(Value::Nil)),
        Value::Map(_) | Value::Set(_) => {
            seq_items(v).map(|items| items.get(i).cloned().unwrap_or(Value::Nil))
        }
        _ => return None,
    })
}

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
                Reason::TypeError,
                format!(
                    "don't know how to create a sequence from {} ({})",
                    short(other),
                    other.type_name()
                ),
            )));
        }
    })
}
