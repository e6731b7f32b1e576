//! Destructuring at run time: the views the analyzer's patterns compile into (`Node::Nth`,
//! `Node::RestFrom`, `Node::MapGet`). The patterns themselves are analyzed in
//! `analyze/destructure.rs`.

use crate::error::{Ctl, LispError, R, Reason};
use crate::printer::short;
use crate::value::Value;
use crate::value::access::{map_get_flex, nth_item, seq_items};

/// Element `i` of a value destructured as a sequence.
pub(crate) fn nth(v: &Value, i: usize) -> R<Value> {
    nth_item(v, i).unwrap_or_else(|| {
        Err(Ctl::from(LispError::new(
            Reason::DestructureError,
            format!(
                "cannot destructure {} ({}) as a sequence",
                short(v),
                v.type_name()
            ),
        )))
    })
}

/// The elements from `i` on (`& rest`), or `None` (nil) when there are none. The caller
/// charges the memory budget for them.
pub(crate) fn rest(v: &Value, i: usize) -> R<Option<Vec<Value>>> {
    let items = match v {
        Value::Nil => return Ok(None),
        Value::Vector(_) | Value::Str(_) | Value::Map(_) | Value::Set(_) => seq_items(v)?,
        other => {
            return Err(Ctl::from(LispError::new(
                Reason::DestructureError,
                format!(
                    "cannot destructure {} ({}) as a sequence",
                    short(other),
                    other.type_name()
                ),
            )));
        }
    };
    if i >= items.len() {
        return Ok(None);
    }
    Ok(Some(items[i..].to_vec()))
}

/// The value under `key` of a value destructured as a map (keyword arguments included).
pub(crate) fn get(v: &Value, key: &Value) -> R<Option<Value>> {
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
            Reason::DestructureError,
            format!(
                "cannot destructure {} ({}) as a map",
                short(other),
                other.type_name()
            ),
        ))),
    }
}
