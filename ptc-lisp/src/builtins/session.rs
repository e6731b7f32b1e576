//! `session/vars` and `session/forget`: what a session keeps between evaluations, seen and
//! pruned from a program. They work only where the host keeps sessions
//! ([`Interpreter::enable_session`](crate::Interpreter::enable_session)).

use super::{Builtin, VARIADIC, b};
use crate::error::{Ctl, LispError, R, Reason, err};
use crate::eval::Ctx;
use crate::globals::is_user_name;
use crate::value::Value;

pub(crate) const BUILTINS: &[Builtin] = &[
    b!(
        "session/vars",
        0,
        0,
        vars,
        "(session/vars): the definitions this session keeps for its later evaluations, a map from \
         each name (a symbol) to {:type \"vector\" :count 120 :kept true}; a function kept as its \
         defining form is {:type \"function\" :kept true}; one that is not kept (it calls a tool, \
         or was defined inside another form) has :kept false and :why"
    ),
    b!(
        "session/forget",
        0,
        VARIADIC,
        forget,
        "(session/forget 'a 'b): removes these definitions from the session ((session/forget) \
         removes all); later uses are unknown symbols; returns the names removed"
    ),
];

/// The error when the host does not keep sessions, or inside `pmap`.
fn unavailable(ctx: &Ctx<'_>, fname: &str) -> Option<Ctl> {
    if !ctx.sessions_on() {
        let e = LispError::new(
            Reason::UnboundVar,
            format!(
                "{fname}: sessions are off in this deployment; definitions last one evaluation"
            ),
        )
        .with_hint("compute what you need in one program, or return it and pass it to the next");
        return Some(Ctl::from(e));
    }
    if ctx.globals_view().is_none() {
        let e = LispError::new(
            Reason::InvalidForm,
            format!("{fname} cannot run inside pmap/pcalls"),
        );
        return Some(Ctl::from(e));
    }
    None
}

fn vars(ctx: &mut Ctx<'_>, _: &mut [Value]) -> R<Value> {
    if let Some(e) = unavailable(ctx, "session/vars") {
        return Err(e);
    }
    let Some((table, values)) = ctx.globals_view() else {
        return Ok(Value::Nil);
    };
    let entries = crate::session::snapshot(table, values).entries;
    ctx.charge_items(entries.len() * 8)?;
    Ok(Value::map_from(
        entries
            .iter()
            .map(|e| (Value::symbol(&e.name), e.describe()))
            .collect(),
    ))
}

fn forget(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    if let Some(e) = unavailable(ctx, "session/forget") {
        return Err(e);
    }
    let names: Vec<String> = if a.is_empty() {
        let Some((table, values)) = ctx.globals_view() else {
            return Ok(Value::Nil);
        };
        let defined: Vec<String> = crate::session::snapshot(table, values)
            .entries
            .into_iter()
            .map(|e| e.name.to_string())
            .collect();
        // Names only declared go too, unlisted: nothing of the session is left.
        let declared: Vec<String> = table
            .names
            .keys()
            .filter(|n| is_user_name(n) && !defined.iter().any(|d| d == &***n))
            .map(|n| n.to_string())
            .collect();
        for n in declared {
            ctx.forget_global(&n);
        }
        defined
    } else {
        let mut names = Vec::with_capacity(a.len());
        for v in a.iter() {
            match v {
                Value::Symbol(s) | Value::Str(s) | Value::Var(s) => names.push(s.to_string()),
                other => {
                    return err(
                        Reason::TypeError,
                        format!(
                            "session/forget expects names ('x or \"x\"), got {} ({})",
                            crate::printer::short(other),
                            other.type_name()
                        ),
                    );
                }
            }
        }
        names
    };
    let removed: Vec<Value> = names
        .iter()
        .filter(|n| is_user_name(n) && ctx.forget_global(n))
        .map(|n| Value::symbol(n))
        .collect();
    super::vec_value(ctx, removed)
}
