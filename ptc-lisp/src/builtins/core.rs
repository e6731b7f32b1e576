//! Equality, comparison, predicates and function combinators.

use std::cmp::Ordering;
use std::sync::Arc;

use super::{Builtin, VARIADIC, b, count_of, take};
use crate::ast::BinOp;
use crate::error::{R, Reason, err};
use crate::eval::Ctx;
use crate::function::Function;
use crate::function::{Order, Traits};
use crate::value::{Value, compare};

pub(crate) const BUILTINS: &[Builtin] = &[
    b!(
        "any?",
        1,
        1,
        |_, _| Ok(Value::Bool(true)),
        "(any? x): always true"
    ),
    b!(
        "memoize",
        1,
        1,
        |_, a| Ok(take(a, 0)),
        "(memoize f): f itself (functions are pure, so caching changes nothing)"
    ),
    b!(
        "trampoline",
        1,
        VARIADIC,
        trampoline,
        "(trampoline f & args): call f, then keep calling the function it returns"
    ),
    b!(
        "list*",
        1,
        VARIADIC,
        list_star,
        "(list* x ... coll): the xs followed by the elements of coll"
    ),
    b!(
        "java/isNaN",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(a[0], Value::Float(f) if f.is_nan()))),
        "(Double/isNaN x)"
    ),
    b!(
        "java/isInfinite",
        1,
        1,
        |_, a| Ok(Value::Bool(
            matches!(a[0], Value::Float(f) if f.is_infinite())
        )),
        "(Double/isInfinite x)"
    ),
    b!(
        "=",
        1,
        VARIADIC,
        eq,
        "(= x y & more): true if all arguments are equal; (= 1 1.0) is true",
        Traits::binary(BinOp::Eq)
    ),
    b!(
        "==",
        1,
        VARIADIC,
        eq,
        "(== x y & more): numeric equality",
        Traits::binary(BinOp::Eq)
    ),
    b!(
        "not=",
        1,
        VARIADIC,
        not_eq,
        "(not= x y & more): (not (= x y ...))"
    ),
    b!(
        "<",
        1,
        VARIADIC,
        lt,
        "(< x y & more): strictly increasing; never throws, NaN compares false",
        Traits::comparison(BinOp::Lt, Order::Less)
    ),
    b!(
        ">",
        1,
        VARIADIC,
        gt,
        "(> x y & more): strictly decreasing",
        Traits::comparison(BinOp::Gt, Order::Greater)
    ),
    b!(
        "<=",
        1,
        VARIADIC,
        le,
        "(<= x y & more): non-decreasing",
        Traits::binary(BinOp::Le)
    ),
    b!(
        ">=",
        1,
        VARIADIC,
        ge,
        "(>= x y & more): non-increasing",
        Traits::binary(BinOp::Ge)
    ),
    b!(
        "compare",
        2,
        2,
        compare_fn,
        "(compare x y): -1, 0 or 1",
        Traits {
            order: Some(Order::Compare),
            ..Traits::NONE
        }
    ),
    b!("not", 1, 1, not, "(not x): true if x is nil or false"),
    b!("identity", 1, 1, identity, "(identity x): x"),
    b!(
        "nil?",
        1,
        1,
        |_, a| Ok(Value::Bool(a[0].is_nil())),
        "(nil? x)"
    ),
    b!(
        "some?",
        1,
        1,
        |_, a| Ok(Value::Bool(!a[0].is_nil())),
        "(some? x): true unless x is nil"
    ),
    b!(
        "true?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(a[0], Value::Bool(true)))),
        "(true? x)"
    ),
    b!(
        "false?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(a[0], Value::Bool(false)))),
        "(false? x)"
    ),
    b!(
        "boolean?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(a[0], Value::Bool(_)))),
        "(boolean? x)"
    ),
    b!(
        "number?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(a[0], Value::Int(_) | Value::Float(_)))),
        "(number? x)"
    ),
    b!(
        "integer?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(a[0], Value::Int(_)))),
        "(integer? x)"
    ),
    b!(
        "int?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(a[0], Value::Int(_)))),
        "(int? x)"
    ),
    b!(
        "nat-int?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(a[0], Value::Int(i) if i >= 0))),
        "(nat-int? x)"
    ),
    b!(
        "pos-int?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(a[0], Value::Int(i) if i > 0))),
        "(pos-int? x)"
    ),
    b!(
        "neg-int?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(a[0], Value::Int(i) if i < 0))),
        "(neg-int? x)"
    ),
    b!(
        "float?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(a[0], Value::Float(_)))),
        "(float? x)"
    ),
    b!(
        "double?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(a[0], Value::Float(_)))),
        "(double? x)"
    ),
    b!(
        "decimal?",
        1,
        1,
        |_, _| Ok(Value::Bool(false)),
        "(decimal? x): always false (no BigDecimal)"
    ),
    b!(
        "ratio?",
        1,
        1,
        |_, _| Ok(Value::Bool(false)),
        "(ratio? x): always false (no ratios)"
    ),
    b!(
        "rational?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(a[0], Value::Int(_)))),
        "(rational? x)"
    ),
    b!(
        "string?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(a[0], Value::Str(_)))),
        "(string? x)"
    ),
    b!(
        "char?",
        1,
        1,
        |_, a| Ok(Value::Bool(
            matches!(&a[0], Value::Str(s) if s.chars().count() == 1)
        )),
        "(char? x): true for one-character strings"
    ),
    b!(
        "keyword?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(a[0], Value::Keyword(_)))),
        "(keyword? x)"
    ),
    b!(
        "symbol?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(a[0], Value::Symbol(_)))),
        "(symbol? x)"
    ),
    b!(
        "map?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(a[0], Value::Map(_)))),
        "(map? x)"
    ),
    b!(
        "vector?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(a[0], Value::Vector(_)))),
        "(vector? x)"
    ),
    b!(
        "set?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(a[0], Value::Set(_)))),
        "(set? x)"
    ),
    b!(
        "coll?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(
            a[0],
            Value::Vector(_) | Value::Map(_) | Value::Set(_)
        ))),
        "(coll? x)"
    ),
    b!(
        "seq?",
        1,
        1,
        |_, _| Ok(Value::Bool(false)),
        "(seq? x): false; sequences are vectors"
    ),
    b!(
        "list?",
        1,
        1,
        |_, _| Ok(Value::Bool(false)),
        "(list? x): false; lists are vectors"
    ),
    b!(
        "sequential?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(a[0], Value::Vector(_)))),
        "(sequential? x)"
    ),
    b!(
        "associative?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(
            a[0],
            Value::Vector(_) | Value::Map(_)
        ))),
        "(associative? x)"
    ),
    b!(
        "counted?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(
            a[0],
            Value::Vector(_) | Value::Map(_) | Value::Set(_)
        ))),
        "(counted? x)"
    ),
    b!(
        "indexed?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(a[0], Value::Vector(_)))),
        "(indexed? x)"
    ),
    b!(
        "reversible?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(a[0], Value::Vector(_)))),
        "(reversible? x)"
    ),
    b!(
        "sorted?",
        1,
        1,
        |_, _| Ok(Value::Bool(false)),
        "(sorted? x): false; no sorted collections"
    ),
    b!(
        "seqable?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(
            a[0],
            Value::Nil | Value::Vector(_) | Value::Map(_) | Value::Set(_) | Value::Str(_)
        ))),
        "(seqable? x)"
    ),
    b!(
        "fn?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(a[0], Value::Func(_)))),
        "(fn? x)"
    ),
    b!(
        "ifn?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(
            a[0],
            Value::Func(_)
                | Value::Keyword(_)
                | Value::Map(_)
                | Value::Set(_)
                | Value::Vector(_)
                | Value::Symbol(_)
        ))),
        "(ifn? x)"
    ),
    b!(
        "var?",
        1,
        1,
        |_, a| Ok(Value::Bool(matches!(a[0], Value::Var(_)))),
        "(var? x)"
    ),
    b!(
        "map-entry?",
        1,
        1,
        |_, a| Ok(Value::Bool(
            matches!(&a[0], Value::Vector(v) if v.len() == 2)
        )),
        "(map-entry? x): true for [k v] pairs (entries are vectors)"
    ),
    b!(
        "empty?",
        1,
        1,
        |_, a| Ok(Value::Bool(count_of(&a[0])? == 0)),
        "(empty? coll)"
    ),
    b!(
        "not-empty",
        1,
        1,
        |_, a| Ok(if count_of(&a[0])? == 0 {
            Value::Nil
        } else {
            take(a, 0)
        }),
        "(not-empty coll): coll, or nil when empty"
    ),
    b!(
        "distinct?",
        1,
        VARIADIC,
        distinct_p,
        "(distinct? x & more): true if no two arguments are equal"
    ),
    b!(
        "apply",
        2,
        VARIADIC,
        apply,
        "(apply f args* coll): calls f with args and the elements of coll"
    ),
    b!(
        "constantly",
        1,
        1,
        constantly,
        "(constantly x): a function that always returns x",
        Traits::PURE_BUILDER
    ),
    b!(
        "complement",
        1,
        1,
        complement,
        "(complement f): a function returning (not (f ...))",
        Traits::PURE_BUILDER
    ),
    b!(
        "partial",
        1,
        VARIADIC,
        partial,
        "(partial f & args): f with leading args fixed",
        Traits::PURE_BUILDER
    ),
    b!(
        "comp",
        0,
        VARIADIC,
        comp,
        "(comp f g ...): right-to-left composition",
        Traits::PURE_BUILDER
    ),
    b!(
        "juxt",
        1,
        VARIADIC,
        juxt,
        "(juxt f g ...): a function returning [(f x) (g x) ...]",
        Traits::PURE_BUILDER
    ),
    b!(
        "fnil",
        2,
        4,
        fnil,
        "(fnil f default ...): f with nil arguments replaced by defaults",
        Traits::PURE_BUILDER
    ),
    b!(
        "every-pred",
        1,
        VARIADIC,
        every_pred,
        "(every-pred p ...): true if every predicate holds for every argument",
        Traits::PURE_BUILDER
    ),
    b!(
        "some-fn",
        1,
        VARIADIC,
        some_fn,
        "(some-fn p ...): the first truthy predicate result",
        Traits::PURE_BUILDER
    ),
    b!("type", 1, 1, type_fn, "(type x): a keyword naming the type"),
    b!(
        "boolean",
        1,
        1,
        |_, a| Ok(Value::Bool(a[0].truthy())),
        "(boolean x)"
    ),
];

/// Whether `op` holds between every neighbouring pair.
fn chain(a: &[Value], op: BinOp) -> bool {
    a.windows(2).all(|w| op.compare(&w[0], &w[1]) == Some(true))
}

fn eq(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    Ok(Value::Bool(chain(a, BinOp::Eq)))
}

fn not_eq(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    Ok(Value::Bool(!chain(a, BinOp::Eq)))
}

fn lt(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    Ok(Value::Bool(chain(a, BinOp::Lt)))
}
fn gt(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    Ok(Value::Bool(chain(a, BinOp::Gt)))
}
fn le(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    Ok(Value::Bool(chain(a, BinOp::Le)))
}
fn ge(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    Ok(Value::Bool(chain(a, BinOp::Ge)))
}

fn compare_fn(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    // Like Clojure, strings (and unqualified keywords/symbols) compare to the code-unit difference.
    let same_ns =
        |x: &str, y: &str| x.split_once('/').map(|p| p.0) == y.split_once('/').map(|p| p.0);
    match (&a[0], &a[1]) {
        (Value::Str(x), Value::Str(y)) => {
            return Ok(Value::Int(crate::value::java_compare_str(x, y)));
        }
        (Value::Keyword(x), Value::Keyword(y)) | (Value::Symbol(x), Value::Symbol(y))
            if same_ns(x, y) =>
        {
            let name = |s: &str| {
                s.rsplit_once('/')
                    .map(|p| p.1.to_string())
                    .unwrap_or_else(|| s.to_string())
            };
            return Ok(Value::Int(crate::value::java_compare_str(
                &name(x),
                &name(y),
            )));
        }
        _ => {}
    }
    Ok(Value::Int(match compare(&a[0], &a[1]) {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    }))
}

fn not(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    Ok(Value::Bool(!a[0].truthy()))
}

fn identity(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    Ok(take(a, 0))
}

fn distinct_p(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let mut seen = std::collections::HashSet::with_capacity_and_hasher(
        a.len(),
        crate::value::FxBuild::default(),
    );
    Ok(Value::Bool(a.iter().all(|v| seen.insert(v.clone()))))
}

fn apply(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let n = a.len();
    let last = take(a, n - 1);
    let mut args: Vec<Value> = a[1..n - 1].iter_mut().map(std::mem::take).collect();
    args.extend(super::into_items(ctx, last)?);
    let f = take(a, 0);
    ctx.apply(&f, &mut args)
}

fn native(
    ctx: &Ctx<'_>,
    name: &'static str,
    captured: Vec<Value>,
    f: crate::function::NativeFn,
) -> R<Value> {
    let bill = ctx.charge_items(captured.len() + 4)?;
    Ok(Value::Func(Arc::new(Function::Native(
        crate::function::Native {
            name,
            captured,
            f,
            _charge: ctx.owned(bill),
        },
    ))))
}

fn constantly(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    native(ctx, "constantly", vec![take(a, 0)], |c, _, _| {
        Ok(c[0].clone())
    })
}

fn complement(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    native(ctx, "complement", vec![take(a, 0)], |c, ctx, args| {
        Ok(Value::Bool(!ctx.apply(&c[0], args)?.truthy()))
    })
}

fn partial(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    // captured = [f fixed-args...]
    native(ctx, "partial", a.to_vec(), |c, ctx, args| {
        let mut all = c[1..].to_vec();
        all.extend(args.iter_mut().map(std::mem::take));
        ctx.apply(&c[0], &mut all)
    })
}

fn comp(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let mut fs: Vec<Value> = a.to_vec();
    if fs.is_empty() {
        return native(ctx, "identity", vec![], |_, _, args| match args.len() {
            1 => Ok(take(args, 0)),
            n => err(
                Reason::ArityError,
                format!("arity error: (comp) expects 1 argument, got {n}"),
            ),
        });
    }
    let transducers = fs.iter().all(super::seqs::is_transducer);
    if transducers {
        // Composed transducers run left to right: (comp (map f) (filter p)) maps, then filters.
        fs.reverse();
    }
    let name = if transducers {
        super::seqs::TRANSDUCER
    } else {
        "comp"
    };
    native(ctx, name, fs, |fs, ctx, args| {
        let (last, rest) = match fs.split_last() {
            Some(x) => x,
            None => return Ok(Value::Nil),
        };
        let mut v = ctx.apply(last, args)?;
        for f in rest.iter().rev() {
            v = ctx.apply(f, &mut [v])?;
        }
        Ok(v)
    })
}

fn juxt(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    native(ctx, "juxt", a.to_vec(), |fs, ctx, args| {
        let mut out = Vec::with_capacity(fs.len());
        for f in fs {
            let mut copy = args.to_vec();
            out.push(ctx.apply(f, &mut copy)?);
        }
        Ok(Value::vector(out))
    })
}

fn fnil(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    // captured = [f defaults...]
    native(ctx, "fnil", a.to_vec(), |c, ctx, args| {
        for (i, d) in c[1..].iter().enumerate() {
            if let Some(x) = args.get_mut(i)
                && x.is_nil()
            {
                *x = d.clone();
            }
        }
        ctx.apply(&c[0], args)
    })
}

fn every_pred(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    native(ctx, "every-pred", a.to_vec(), |ps, ctx, args| {
        for p in ps {
            for x in args.iter() {
                if !ctx.apply(p, &mut [x.clone()])?.truthy() {
                    return Ok(Value::Bool(false));
                }
            }
        }
        Ok(Value::Bool(true))
    })
}

fn some_fn(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    native(ctx, "some-fn", a.to_vec(), |ps, ctx, args| {
        let mut last = Value::Nil;
        for p in ps {
            for x in args.iter() {
                let r = ctx.apply(p, &mut [x.clone()])?;
                if r.truthy() {
                    return Ok(r);
                }
                last = r;
            }
        }
        Ok(last)
    })
}

fn type_fn(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    Ok(Value::keyword(a[0].type_name()))
}

fn trampoline(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let f = take(a, 0);
    let mut args: Vec<Value> = a[1..].iter_mut().map(std::mem::take).collect();
    let mut v = ctx.apply(&f, &mut args)?;
    while matches!(v, Value::Func(_)) {
        ctx.tick()?;
        v = ctx.apply(&v.clone(), &mut [])?;
    }
    Ok(v)
}

fn list_star(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let n = a.len();
    let mut out: Vec<Value> = a[..n - 1].iter_mut().map(std::mem::take).collect();
    out.extend(super::into_items(ctx, take(a, n - 1))?);
    super::vec_value(ctx, out)
}
