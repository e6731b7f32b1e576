//! `json/parse-string`, `json/generate-string`, `json/parse-lines`.

use super::{Builtin, b, str_arg, type_err};
use crate::error::{Ctl, R, Reason};
use crate::eval::Ctx;
use crate::value::Value;

pub(crate) const BUILTINS: &[Builtin] = &[
    b!(
        "json/parse-string",
        1,
        2,
        parse_string,
        "(json/parse-string s [keywordize?]): value, or nil on invalid JSON"
    ),
    b!(
        "json/generate-string",
        1,
        1,
        generate_string,
        "(json/generate-string x): JSON text"
    ),
    b!(
        "json/parse-lines",
        1,
        1,
        parse_lines,
        "(json/parse-lines s): one value per non-blank line; nil for invalid lines"
    ),
];

fn parse_one(ctx: &mut Ctx<'_>, s: &str, keywordize: bool) -> R<Value> {
    match ctx.decode_json(s.as_bytes()) {
        Ok(v) => {
            if keywordize {
                let f = super::lookup("keywordize-keys")
                    .map(|b| b.f)
                    .unwrap_or(|_, _| Ok(Value::Nil));
                f(ctx, &mut [v])
            } else {
                Ok(v)
            }
        }
        // Bad data signals nil; resource limits still raise.
        Err(Ctl::Err(e)) if e.reason() == Reason::ParseError => Ok(Value::Nil),
        Err(e) => Err(e),
    }
}

fn parse_string(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let s = match &a[0] {
        Value::Str(s) => s.clone(),
        Value::Nil => return Ok(Value::Nil),
        other => return type_err("json/parse-string", "a string", other),
    };
    let kw = a.get(1).is_some_and(Value::truthy);
    parse_one(ctx, &s, kw)
}

fn generate_string(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let mut s = String::new();
    crate::json::encode(&a[0], &mut s, 0, ctx.text_limit()).map_err(Ctl::from)?;
    ctx.string(&s)
}

fn parse_lines(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let s = str_arg("json/parse-lines", &a[0])?.to_string();
    let mut out = Vec::new();
    for line in s.lines() {
        if line.trim().is_empty() {
            continue;
        }
        out.push(parse_one(ctx, line, false)?);
    }
    super::vec_value(ctx, out)
}
