//! Printing. `println` and friends write to the program's captured output (never stdout),
//! bounded by `Limits::max_output_bytes`.

use super::{Builtin, VARIADIC, b};
use crate::error::R;
use crate::eval::Ctx;
use crate::printer::Style;
use crate::value::Value;

pub(crate) const BUILTINS: &[Builtin] = &[
    b!(
        "println",
        0,
        VARIADIC,
        |ctx, a| emit(ctx, a, false, true),
        "(println & xs): print to the captured output, then newline"
    ),
    b!(
        "print",
        0,
        VARIADIC,
        |ctx, a| emit(ctx, a, false, false),
        "(print & xs)"
    ),
    b!(
        "prn",
        0,
        VARIADIC,
        |ctx, a| emit(ctx, a, true, true),
        "(prn & xs): readable forms, then newline"
    ),
    b!(
        "pr",
        0,
        VARIADIC,
        |ctx, a| emit(ctx, a, true, false),
        "(pr & xs): readable forms"
    ),
    b!(
        "newline",
        0,
        0,
        |ctx, _| {
            ctx.print("\n");
            Ok(Value::Nil)
        },
        "(newline)"
    ),
    b!(
        "pr-str",
        0,
        VARIADIC,
        |ctx, a| render(ctx, a, true),
        "(pr-str & xs): readable forms joined by spaces"
    ),
    b!(
        "prn-str",
        0,
        VARIADIC,
        |ctx, a| {
            let s = join(ctx, a, true)? + "\n";
            ctx.string(&s)
        },
        "(prn-str & xs)"
    ),
    b!(
        "print-str",
        0,
        VARIADIC,
        |ctx, a| render(ctx, a, false),
        "(print-str & xs)"
    ),
    b!(
        "println-str",
        0,
        VARIADIC,
        |ctx, a| {
            let s = join(ctx, a, false)? + "\n";
            ctx.string(&s)
        },
        "(println-str & xs)"
    ),
];

fn join(ctx: &Ctx<'_>, a: &[Value], readable: bool) -> R<String> {
    let mut s = String::new();
    let style = if readable {
        Style::Readable
    } else {
        Style::Plain
    };
    for (i, v) in a.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        ctx.render(v, &mut s, style)?;
    }
    Ok(s)
}

fn emit(ctx: &mut Ctx<'_>, a: &mut [Value], readable: bool, newline: bool) -> R<Value> {
    let mut s = join(ctx, a, readable)?;
    if newline {
        s.push('\n');
    }
    ctx.print(&s);
    Ok(Value::Nil)
}

fn render(ctx: &mut Ctx<'_>, a: &mut [Value], readable: bool) -> R<Value> {
    let s = join(ctx, a, readable)?;
    ctx.string(&s)
}
