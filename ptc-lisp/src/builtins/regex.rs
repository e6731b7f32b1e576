//! Regular expressions (the `regex` crate: linear time, no backtracking blow-ups).

use std::sync::Arc;

use super::{Builtin, b, str_arg, type_err, vec_value};
use crate::error::{R, Reason, err};
use crate::eval::Ctx;
use crate::function::Traits;
use crate::value::Value;

pub(crate) const BUILTINS: &[Builtin] = &[
    b!(
        "re-pattern",
        1,
        1,
        re_pattern,
        "(re-pattern s): compile a regex",
        Traits::PURE_BUILDER
    ),
    b!(
        "re-find",
        2,
        2,
        re_find,
        "(re-find re s): first match (with groups: [whole g1 ...]) or nil"
    ),
    b!(
        "re-matches",
        2,
        2,
        re_matches,
        "(re-matches re s): match of the whole string or nil"
    ),
    b!("re-seq", 2, 2, re_seq, "(re-seq re s): every match"),
    b!(
        "re-split",
        2,
        2,
        |ctx, a| {
            let f = super::lookup("split")
                .map(|b| b.f)
                .unwrap_or(|_, _| Ok(Value::Nil));
            a.swap(0, 1);
            f(ctx, a)
        },
        "(re-split re s)"
    ),
    b!(
        "regex?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(a[0], Value::Regex(_)))),
        "(regex? x)"
    ),
];

fn regex_arg(v: &Value) -> R<Arc<regex::Regex>> {
    match v {
        Value::Regex(r) => Ok(r.clone()),
        Value::Str(s) => match regex::Regex::new(s) {
            Ok(r) => Ok(Arc::new(r)),
            Err(e) => err(Reason::TypeError, format!("invalid regex: {e}")),
        },
        other => type_err("re-find", "a regex", other),
    }
}

fn re_pattern(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    match &a[0] {
        Value::Regex(_) => Ok(a[0].clone()),
        Value::Str(s) => match regex::Regex::new(s) {
            Ok(r) => Ok(Value::Regex(Arc::new(r))),
            Err(e) => err(Reason::TypeError, format!("invalid regex {s:?}: {e}")),
        },
        other => type_err("re-pattern", "a string", other),
    }
}

/// The Clojure shape of a match: the string, or [whole g1 g2 ...] when there are groups;
/// charged as it is built.
pub(crate) fn match_value(ctx: &Ctx<'_>, caps: &regex::Captures<'_>) -> R<Value> {
    let group = |g: Option<regex::Match<'_>>| ctx.string_or_nil(g.map(|m| m.as_str()));
    if caps.len() == 1 {
        return group(caps.get(0));
    }
    ctx.vector(caps.iter().map(group).collect::<R<Vec<_>>>()?)
}

fn re_find(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let re = regex_arg(&a[0])?;
    let s = str_arg("re-find", &a[1])?;
    match re.captures(s) {
        Some(c) => match_value(ctx, &c),
        None => Ok(Value::Nil),
    }
}

fn re_matches(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let re = regex_arg(&a[0])?;
    let s = str_arg("re-matches", &a[1])?;
    let anchored = match regex::Regex::new(&format!("^(?:{})$", re.as_str())) {
        Ok(r) => r,
        Err(e) => return err(Reason::TypeError, format!("invalid regex: {e}")),
    };
    match anchored.captures(s) {
        // Re-run the original to keep group numbering (the wrapper group is non-capturing).
        Some(c) => match_value(ctx, &c),
        None => Ok(Value::Nil),
    }
}

fn re_seq(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let re = regex_arg(&a[0])?;
    let s = str_arg("re-seq", &a[1])?;
    let v = re
        .captures_iter(s)
        .map(|c| match_value(ctx, &c))
        .collect::<R<Vec<_>>>()?;
    if v.is_empty() {
        return Ok(Value::Nil);
    }
    vec_value(ctx, v)
}
