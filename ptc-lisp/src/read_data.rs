//! Reading data literals without evaluating them (`quote`, `case` constants, `read_value`).

use std::sync::Arc;

use crate::error::{LispError, Reason};
use crate::limits::Limits;
use crate::reader::{Form, FormKind, Reader};
use crate::value::Value;

/// Converts a form to the value it denotes as data. Bounded by the reader's depth limit.
pub(crate) fn form_to_value(form: &Form) -> Result<Value, LispError> {
    Ok(match &form.kind {
        FormKind::Nil => Value::Nil,
        FormKind::Bool(b) => Value::Bool(*b),
        FormKind::Int(i) => Value::Int(*i),
        FormKind::Float(f) => Value::Float(*f),
        FormKind::Str(s) => Value::Str(s.into()),
        FormKind::Keyword(k) => Value::Keyword(k.into()),
        FormKind::Symbol(s) => Value::Symbol(s.into()),
        FormKind::List(items)
            if items.len() == 2
                && items[0].sym_name() == Some("var")
                && let Some(name) = items[1].sym_name() =>
        {
            Value::Var(name.into())
        }
        FormKind::List(items) | FormKind::Vector(items) => {
            Value::vector(items.iter().map(form_to_value).collect::<Result<_, _>>()?)
        }
        FormKind::Map(items) => {
            let mut entries = Vec::with_capacity(items.len() / 2);
            for kv in items.chunks(2) {
                entries.push((form_to_value(&kv[0])?, form_to_value(&kv[1])?));
            }
            Value::map_from(entries)
        }
        FormKind::Set(items) => {
            Value::set_from(items.iter().map(form_to_value).collect::<Result<_, _>>()?)
        }
        FormKind::Regex(r) => match regex::Regex::new(r) {
            Ok(re) => Value::Regex(Arc::new(re)),
            Err(e) => {
                return Err(
                    LispError::new(Reason::ParseError, format!("invalid regex: {e}"))
                        .with_pos(form.pos),
                );
            }
        },
        FormKind::AnonFn(_) => {
            return Err(
                LispError::new(Reason::InvalidForm, "a function literal is not data")
                    .with_pos(form.pos),
            );
        }
    })
}

/// Reads one data literal (e.g. an expected result) without evaluating it.
/// Lists read as vectors, since PTC-Lisp sequences are vectors.
pub fn read_value(src: &str) -> Result<Value, LispError> {
    let limits = Limits::default();
    // The reader recurses (bounded by its depth limit); give it the same roomy stack as eval.
    std::thread::scope(|s| {
        let h = std::thread::Builder::new()
            .name("ptc-lisp-read".into())
            .stack_size(limits.thread_stack())
            .spawn_scoped(s, || read_value_here(src, &limits));
        match h {
            Ok(h) => h.join().unwrap_or_else(|_| {
                Err(LispError::new(
                    Reason::InternalError,
                    "the reader stopped unexpectedly",
                ))
            }),
            Err(e) => Err(LispError::new(
                Reason::InternalError,
                format!("could not start the reader: {e}"),
            )),
        }
    })
}

fn read_value_here(src: &str, limits: &Limits) -> Result<Value, LispError> {
    let mut r = Reader::new(src, limits.max_reader_depth);
    let form = match r.read_next(0)? {
        Some(f) => f,
        None => return Err(LispError::new(Reason::ParseError, "no data to read")),
    };
    if r.read_next(0)?.is_some() {
        return Err(LispError::new(
            Reason::ParseError,
            "expected exactly one data literal",
        ));
    }
    form_to_value(&form)
}
