//! Arithmetic, math and bit operations. Integers are 64-bit; overflow is an
//! `arithmetic_error` (Clojure throws too). `/` always returns a float (a PTC divergence).

use super::{Builtin, VARIADIC, b, type_err};
use crate::ast::BinOp;
use crate::error::{R, Reason, err};
use crate::eval::Ctx;
use crate::function::{Fast, Traits};
use crate::value::Value;

pub(crate) const BUILTINS: &[Builtin] = &[
    b!(
        "+",
        0,
        VARIADIC,
        add,
        "(+ & xs): sum; integer overflow is an arithmetic_error",
        Traits::binary(BinOp::Add)
    ),
    b!("+'", 0, VARIADIC, add, "(+' & xs): like +"),
    b!(
        "-",
        1,
        VARIADIC,
        sub,
        "(- x & ys): difference, or negation",
        Traits::binary(BinOp::Sub)
    ),
    b!("-'", 1, VARIADIC, sub, "(-' x & ys): like -"),
    b!(
        "*",
        0,
        VARIADIC,
        mul,
        "(* & xs): product",
        Traits::binary(BinOp::Mul)
    ),
    b!("*'", 0, VARIADIC, mul, "(*' & xs): like *"),
    b!(
        "/",
        1,
        VARIADIC,
        div,
        "(/ x & ys): division; always returns a float"
    ),
    b!(
        "inc",
        1,
        1,
        inc,
        "(inc x): x + 1",
        Traits {
            fast: Some(Fast::Unary(BinOp::Add)),
            ..Traits::NONE
        }
    ),
    b!("inc'", 1, 1, inc, "(inc' x): x + 1"),
    b!(
        "dec",
        1,
        1,
        dec,
        "(dec x): x - 1",
        Traits {
            fast: Some(Fast::Unary(BinOp::Sub)),
            ..Traits::NONE
        }
    ),
    b!("dec'", 1, 1, dec, "(dec' x): x - 1"),
    b!(
        "quot",
        2,
        2,
        quot,
        "(quot n d): integer quotient truncated toward zero"
    ),
    b!("rem", 2, 2, rem, "(rem n d): remainder with the sign of n"),
    b!("mod", 2, 2, modulo, "(mod n d): modulus with the sign of d"),
    b!(
        "max",
        1,
        VARIADIC,
        max,
        "(max x & more): the greatest number"
    ),
    b!("min", 1, VARIADIC, min, "(min x & more): the least number"),
    b!("abs", 1, 1, abs, "(abs x): absolute value"),
    b!("Math/abs", 1, 1, abs, "(Math/abs x): absolute value"),
    b!(
        "sqrt",
        1,
        1,
        |_, a| Ok(Value::Float(f(&a[0], "sqrt")?.sqrt())),
        "(sqrt x): square root (float)"
    ),
    b!(
        "Math/sqrt",
        1,
        1,
        |_, a| Ok(Value::Float(f(&a[0], "sqrt")?.sqrt())),
        "(Math/sqrt x)"
    ),
    b!("pow", 2, 2, pow, "(pow x y): x to the power y (float)"),
    b!("Math/pow", 2, 2, pow, "(Math/pow x y)"),
    b!(
        "Math/exp",
        1,
        1,
        |_, a| Ok(Value::Float(f(&a[0], "exp")?.exp())),
        "(Math/exp x)"
    ),
    b!(
        "Math/log",
        1,
        1,
        |_, a| Ok(Value::Float(f(&a[0], "log")?.ln())),
        "(Math/log x): natural logarithm"
    ),
    b!(
        "Math/log10",
        1,
        1,
        |_, a| Ok(Value::Float(f(&a[0], "log10")?.log10())),
        "(Math/log10 x)"
    ),
    b!(
        "Math/signum",
        1,
        1,
        |_, a| {
            let x = f(&a[0], "signum")?;
            Ok(Value::Float(if x == 0.0 || x.is_nan() {
                x
            } else {
                x.signum()
            }))
        },
        "(Math/signum x)"
    ),
    b!(
        "floor",
        1,
        1,
        |_, a| Ok(Value::Float(f(&a[0], "floor")?.floor())),
        "(floor x): largest integral float <= x"
    ),
    b!(
        "Math/floor",
        1,
        1,
        |_, a| Ok(Value::Float(f(&a[0], "floor")?.floor())),
        "(Math/floor x)"
    ),
    b!(
        "ceil",
        1,
        1,
        |_, a| Ok(Value::Float(f(&a[0], "ceil")?.ceil())),
        "(ceil x): smallest integral float >= x"
    ),
    b!(
        "Math/ceil",
        1,
        1,
        |_, a| Ok(Value::Float(f(&a[0], "ceil")?.ceil())),
        "(Math/ceil x)"
    ),
    b!(
        "round",
        1,
        1,
        round,
        "(round x): nearest integer, halves away from zero... up (Math/round)"
    ),
    b!(
        "Math/round",
        1,
        1,
        round,
        "(Math/round x): nearest integer (halves round up)"
    ),
    b!(
        "trunc",
        1,
        1,
        |_, a| Ok(Value::Float(f(&a[0], "trunc")?.trunc())),
        "(trunc x): x without its fraction"
    ),
    b!(
        "double",
        1,
        1,
        |_, a| Ok(Value::Float(f(&a[0], "double")?)),
        "(double x): x as a float"
    ),
    b!(
        "float",
        1,
        1,
        |_, a| Ok(Value::Float(f(&a[0], "float")?)),
        "(float x): x as a float"
    ),
    b!("int", 1, 1, to_int, "(int x): x truncated to an integer"),
    b!("long", 1, 1, to_int, "(long x): x truncated to an integer"),
    b!(
        "num",
        1,
        1,
        |_, a| {
            f(&a[0], "num")?;
            Ok(std::mem::take(&mut a[0]))
        },
        "(num x): x if it is a number"
    ),
    b!(
        "zero?",
        1,
        1,
        |_, a| Ok(Value::Bool(f(&a[0], "zero?")? == 0.0)),
        "(zero? x)"
    ),
    b!(
        "pos?",
        1,
        1,
        |_, a| Ok(Value::Bool(f(&a[0], "pos?")? > 0.0)),
        "(pos? x)"
    ),
    b!(
        "neg?",
        1,
        1,
        |_, a| Ok(Value::Bool(f(&a[0], "neg?")? < 0.0)),
        "(neg? x)"
    ),
    b!(
        "even?",
        1,
        1,
        |_, a| Ok(Value::Bool(i(&a[0], "even?")? % 2 == 0)),
        "(even? n)"
    ),
    b!(
        "odd?",
        1,
        1,
        |_, a| Ok(Value::Bool(i(&a[0], "odd?")? % 2 != 0)),
        "(odd? n)"
    ),
    b!(
        "NaN?",
        1,
        1,
        |_, a| Ok(Value::Bool(f(&a[0], "NaN?")?.is_nan())),
        "(NaN? x)"
    ),
    b!(
        "infinite?",
        1,
        1,
        |_, a| Ok(Value::Bool(f(&a[0], "infinite?")?.is_infinite())),
        "(infinite? x)"
    ),
    b!(
        "bit-and",
        2,
        VARIADIC,
        |_, a| bits(a, "bit-and", |x, y| x & y),
        "(bit-and x y & more)"
    ),
    b!(
        "bit-or",
        2,
        VARIADIC,
        |_, a| bits(a, "bit-or", |x, y| x | y),
        "(bit-or x y & more)"
    ),
    b!(
        "bit-xor",
        2,
        VARIADIC,
        |_, a| bits(a, "bit-xor", |x, y| x ^ y),
        "(bit-xor x y & more)"
    ),
    b!(
        "bit-and-not",
        2,
        VARIADIC,
        |_, a| bits(a, "bit-and-not", |x, y| x & !y),
        "(bit-and-not x y & more)"
    ),
    b!(
        "bit-not",
        1,
        1,
        |_, a| Ok(Value::Int(!i(&a[0], "bit-not")?)),
        "(bit-not x)"
    ),
    b!(
        "bit-shift-left",
        2,
        2,
        |_, a| Ok(Value::Int(
            i(&a[0], "bit-shift-left")?.wrapping_shl(i(&a[1], "bit-shift-left")? as u32 & 63)
        )),
        "(bit-shift-left x n)"
    ),
    b!(
        "bit-shift-right",
        2,
        2,
        |_, a| Ok(Value::Int(
            i(&a[0], "bit-shift-right")?.wrapping_shr(i(&a[1], "bit-shift-right")? as u32 & 63)
        )),
        "(bit-shift-right x n)"
    ),
    b!(
        "bit-set",
        2,
        2,
        |_, a| Ok(Value::Int(
            i(&a[0], "bit-set")? | (1i64.wrapping_shl(i(&a[1], "bit-set")? as u32 & 63))
        )),
        "(bit-set x n)"
    ),
    b!(
        "bit-clear",
        2,
        2,
        |_, a| Ok(Value::Int(
            i(&a[0], "bit-clear")? & !(1i64.wrapping_shl(i(&a[1], "bit-clear")? as u32 & 63))
        )),
        "(bit-clear x n)"
    ),
    b!(
        "bit-flip",
        2,
        2,
        |_, a| Ok(Value::Int(
            i(&a[0], "bit-flip")? ^ (1i64.wrapping_shl(i(&a[1], "bit-flip")? as u32 & 63))
        )),
        "(bit-flip x n)"
    ),
    b!(
        "bit-test",
        2,
        2,
        |_, a| Ok(Value::Bool(
            i(&a[0], "bit-test")? & (1i64.wrapping_shl(i(&a[1], "bit-test")? as u32 & 63)) != 0
        )),
        "(bit-test x n)"
    ),
];

#[derive(Clone, Copy)]
enum Num {
    I(i64),
    F(f64),
}

fn num(v: &Value, fname: &str) -> R<Num> {
    match v {
        Value::Int(i) => Ok(Num::I(*i)),
        Value::Float(x) => Ok(Num::F(*x)),
        other => Err(number_error(fname, "numbers", other)),
    }
}

/// A type error about a value that should have been a number, with a hint for the usual causes.
fn number_error(fname: &str, expected: &str, got: &Value) -> crate::error::Ctl {
    let e = super::type_error(fname, expected, got);
    let e = match got {
        Value::Str(_) => {
            e.with_hint("numbers from text need parsing: (parse-long s) or (parse-double s)")
        }
        Value::Nil => {
            e.with_hint("a missing key or empty result gives nil; use (or x 0) or (fnil f 0)")
        }
        _ => e,
    };
    crate::error::Ctl::from(e)
}

/// A numeric argument as f64.
pub(crate) fn f(v: &Value, fname: &str) -> R<f64> {
    match v {
        Value::Int(i) => Ok(*i as f64),
        Value::Float(x) => Ok(*x),
        other => Err(number_error(fname, "a number", other)),
    }
}

fn i(v: &Value, fname: &str) -> R<i64> {
    match v {
        Value::Int(i) => Ok(*i),
        other => type_err(fname, "an integer", other),
    }
}

fn overflow<T>(fname: &str) -> R<T> {
    err(
        Reason::ArithmeticError,
        format!("integer overflow in {fname}"),
    )
}

fn to_value(n: Num) -> Value {
    match n {
        Num::I(i) => Value::Int(i),
        Num::F(x) => Value::Float(x),
    }
}

fn fold(
    a: &[Value],
    fname: &str,
    init: Num,
    op_i: fn(i64, i64) -> Option<i64>,
    op_f: fn(f64, f64) -> f64,
) -> R<Value> {
    let mut acc = init;
    for v in a {
        let n = num(v, fname)?;
        acc = match (acc, n) {
            (Num::I(x), Num::I(y)) => match op_i(x, y) {
                Some(r) => Num::I(r),
                None => return overflow(fname),
            },
            (Num::I(x), Num::F(y)) => Num::F(op_f(x as f64, y)),
            (Num::F(x), Num::I(y)) => Num::F(op_f(x, y as f64)),
            (Num::F(x), Num::F(y)) => Num::F(op_f(x, y)),
        };
    }
    Ok(to_value(acc))
}

/// `(+ a b)` on two values; used by other builtins (sum, reduce fast paths).
pub(crate) fn add2(a: &Value, b: &Value) -> R<Value> {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => match x.checked_add(*y) {
            Some(r) => Ok(Value::Int(r)),
            None => overflow("+"),
        },
        _ => Ok(Value::Float(f(a, "+")? + f(b, "+")?)),
    }
}

fn add(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    if a.len() == 2 {
        return add2(&a[0], &a[1]);
    }
    fold(a, "+", Num::I(0), i64::checked_add, |x, y| x + y)
}

fn sub(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    if a.len() == 1 {
        return match num(&a[0], "-")? {
            Num::I(x) => x
                .checked_neg()
                .map(Value::Int)
                .map_or_else(|| overflow("-"), Ok),
            Num::F(x) => Ok(Value::Float(-x)),
        };
    }
    if let (Value::Int(x), Value::Int(y)) = (&a[0], &a[1])
        && a.len() == 2
    {
        return x
            .checked_sub(*y)
            .map(Value::Int)
            .map_or_else(|| overflow("-"), Ok);
    }
    let first = num(&a[0], "-")?;
    fold(&a[1..], "-", first, i64::checked_sub, |x, y| x - y)
}

fn mul(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    fold(a, "*", Num::I(1), i64::checked_mul, |x, y| x * y)
}

fn div(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    if a.len() == 1 {
        let x = num(&a[0], "/")?;
        return match x {
            Num::I(0) => err(Reason::ArithmeticError, "divide by zero in /"),
            _ => Ok(Value::Float(1.0 / f(&a[0], "/")?)),
        };
    }
    let mut all_int = matches!(a[0], Value::Int(_));
    let mut acc = f(&a[0], "/")?;
    for v in &a[1..] {
        let d = num(v, "/")?;
        match d {
            Num::I(0) if all_int => return err(Reason::ArithmeticError, "divide by zero in /"),
            Num::I(y) => acc /= y as f64,
            Num::F(y) => {
                all_int = false;
                acc /= y
            }
        }
    }
    Ok(Value::Float(acc))
}

fn inc(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    match num(&a[0], "inc")? {
        Num::I(x) => x
            .checked_add(1)
            .map(Value::Int)
            .map_or_else(|| overflow("inc"), Ok),
        Num::F(x) => Ok(Value::Float(x + 1.0)),
    }
}

fn dec(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    match num(&a[0], "dec")? {
        Num::I(x) => x
            .checked_sub(1)
            .map(Value::Int)
            .map_or_else(|| overflow("dec"), Ok),
        Num::F(x) => Ok(Value::Float(x - 1.0)),
    }
}

fn int_div(
    a: &[Value],
    fname: &str,
    op: fn(i64, i64) -> Option<i64>,
    opf: fn(f64, f64) -> f64,
) -> R<Value> {
    match (num(&a[0], fname)?, num(&a[1], fname)?) {
        (_, Num::I(0)) => err(
            Reason::ArithmeticError,
            format!("divide by zero in {fname}"),
        ),
        (Num::I(x), Num::I(y)) => op(x, y).map(Value::Int).map_or_else(|| overflow(fname), Ok),
        (x, y) => {
            let (x, y) = (f(&to_value(x), fname)?, f(&to_value(y), fname)?);
            if y == 0.0 {
                return err(
                    Reason::ArithmeticError,
                    format!("divide by zero in {fname}"),
                );
            }
            Ok(Value::Float(opf(x, y)))
        }
    }
}

fn quot(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    int_div(a, "quot", i64::checked_div, |x, y| (x / y).trunc())
}

fn rem(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    int_div(a, "rem", i64::checked_rem, |x, y| x % y)
}

fn modulo(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    int_div(
        a,
        "mod",
        |x, y| {
            let m = x.checked_rem(y)?;
            Some(if m != 0 && ((m < 0) != (y < 0)) {
                m + y
            } else {
                m
            })
        },
        |x, y| {
            let m = x % y;
            if m != 0.0 && ((m < 0.0) != (y < 0.0)) {
                m + y
            } else {
                m
            }
        },
    )
}

fn extreme(a: &[Value], fname: &str, want_greater: bool) -> R<Value> {
    let mut best = a[0].clone();
    let mut bf = f(&best, fname)?;
    if bf.is_nan() {
        return Ok(Value::Float(f64::NAN));
    }
    for v in &a[1..] {
        let x = f(v, fname)?;
        if x.is_nan() {
            return Ok(Value::Float(f64::NAN));
        }
        if (want_greater && x > bf)
            || (!want_greater && x < bf)
            || (x == bf && matches!(v, Value::Float(_)))
        {
            best = v.clone();
            bf = x;
        }
    }
    Ok(best)
}

fn max(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    extreme(a, "max", true)
}

fn min(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    extreme(a, "min", false)
}

fn abs(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    match num(&a[0], "abs")? {
        Num::I(x) => x
            .checked_abs()
            .map(Value::Int)
            .map_or_else(|| overflow("abs"), Ok),
        Num::F(x) => Ok(Value::Float(x.abs())),
    }
}

fn pow(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    Ok(Value::Float(f(&a[0], "pow")?.powf(f(&a[1], "pow")?)))
}

fn round(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    match num(&a[0], "round")? {
        Num::I(x) => Ok(Value::Int(x)),
        Num::F(x) => {
            if x.is_nan() {
                return Ok(Value::Int(0));
            }
            let r = (x + 0.5).floor();
            if r >= i64::MAX as f64 {
                Ok(Value::Int(i64::MAX))
            } else if r <= i64::MIN as f64 {
                Ok(Value::Int(i64::MIN))
            } else {
                Ok(Value::Int(r as i64))
            }
        }
    }
}

fn to_int(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    match &a[0] {
        Value::Int(x) => Ok(Value::Int(*x)),
        Value::Float(x) => {
            if !x.is_finite() || x.abs() >= 9.3e18 {
                return err(
                    Reason::ArithmeticError,
                    format!("value out of range for int: {}", a[0]),
                );
            }
            Ok(Value::Int(x.trunc() as i64))
        }
        Value::Str(s) if s.chars().count() == 1 => {
            Ok(Value::Int(s.chars().next().map(|c| c as i64).unwrap_or(0)))
        }
        other => type_err("int", "a number", other),
    }
}

fn bits(a: &[Value], fname: &str, op: fn(i64, i64) -> i64) -> R<Value> {
    let mut acc = i(&a[0], fname)?;
    for v in &a[1..] {
        acc = op(acc, i(v, fname)?);
    }
    Ok(Value::Int(acc))
}
