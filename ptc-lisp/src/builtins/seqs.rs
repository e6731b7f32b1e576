//! Sequence functions (all eager, returning vectors): map/filter/reduce, take/drop,
//! partition, sort/sort-by, group-by, frequencies, range, flatten, walk, ...

use std::cmp::Ordering;
use std::sync::Arc;

use super::{Builtin, VARIADIC, b, int_arg, into_items, take, type_err, vec_value};
use crate::error::{Ctl, R, Reason, err};
use crate::eval::Ctx;
use crate::footprint;
use crate::function::Order as BuiltinOrder;
use crate::value::{CollArc, FxBuild, MapData, Value, compare, stable_sort_by};

pub(crate) const BUILTINS: &[Builtin] = &[
    b!(
        "rseq",
        1,
        1,
        |ctx, a| {
            let mut v = into_items(ctx, take(a, 0))?;
            v.reverse();
            if v.is_empty() {
                Ok(Value::Nil)
            } else {
                vec_value(ctx, v)
            }
        },
        "(rseq v): the elements in reverse, nil when empty"
    ),
    b!(
        "sequence",
        1,
        2,
        sequence,
        "(sequence xform coll): apply a transducer such as (map f)"
    ),
    b!(
        "transduce",
        3,
        4,
        transduce,
        "(transduce xform f [init] coll): reduce f over (xform coll)"
    ),
    b!(
        "map",
        1,
        VARIADIC,
        |c, a| xf(c, a, map, "map"),
        "(map f coll & colls): [(f x) ...]; several colls stop at the shortest"
    ),
    b!("mapv", 2, VARIADIC, map, "(mapv f coll & colls)"),
    b!(
        "filter",
        1,
        2,
        |c, a| xf(c, a, filter, "filter"),
        "(filter pred coll)"
    ),
    b!("filterv", 2, 2, filter, "(filterv pred coll)"),
    b!(
        "remove",
        1,
        2,
        |c, a| xf(c, a, remove, "remove"),
        "(remove pred coll)"
    ),
    b!(
        "keep",
        1,
        2,
        |c, a| xf(c, a, keep, "keep"),
        "(keep f coll): non-nil results of f"
    ),
    b!(
        "keep-indexed",
        1,
        2,
        |c, a| xf(c, a, keep_indexed, "keep-indexed"),
        "(keep-indexed f coll): non-nil (f i x)"
    ),
    b!(
        "map-indexed",
        1,
        2,
        |c, a| xf(c, a, map_indexed, "map-indexed"),
        "(map-indexed f coll): [(f i x) ...]"
    ),
    b!(
        "mapcat",
        1,
        VARIADIC,
        |c, a| xf(c, a, mapcat, "mapcat"),
        "(mapcat f coll & colls): concatenated results"
    ),
    b!("reduce", 2, 3, reduce, "(reduce f [init] coll)"),
    b!(
        "reductions",
        2,
        3,
        reductions,
        "(reductions f [init] coll): intermediate reduce values"
    ),
    b!(
        "run!",
        2,
        2,
        run,
        "(run! f coll): calls f on each element, returns nil"
    ),
    b!("every?", 2, 2, every, "(every? pred coll)"),
    b!(
        "some",
        2,
        2,
        some,
        "(some pred coll): the first truthy (pred x)"
    ),
    b!(
        "not-any?",
        2,
        2,
        |ctx, a| Ok(Value::Bool(!some(ctx, a)?.truthy())),
        "(not-any? pred coll)"
    ),
    b!(
        "not-every?",
        2,
        2,
        |ctx, a| Ok(Value::Bool(!every(ctx, a)?.truthy())),
        "(not-every? pred coll)"
    ),
    b!("concat", 0, VARIADIC, concat, "(concat & colls)"),
    b!(
        "take",
        1,
        2,
        |c, a| xf(c, a, take_fn, "take"),
        "(take n coll)"
    ),
    b!(
        "drop",
        1,
        2,
        |c, a| xf(c, a, drop_fn, "drop"),
        "(drop n coll)"
    ),
    b!("take-last", 2, 2, take_last, "(take-last n coll)"),
    b!("drop-last", 1, 2, drop_last, "(drop-last [n] coll)"),
    b!(
        "take-while",
        1,
        2,
        |c, a| xf(c, a, take_while, "take-while"),
        "(take-while pred coll)"
    ),
    b!(
        "drop-while",
        1,
        2,
        |c, a| xf(c, a, drop_while, "drop-while"),
        "(drop-while pred coll)"
    ),
    b!("take-nth", 2, 2, take_nth, "(take-nth n coll)"),
    b!("nthrest", 2, 2, drop_fn_rev, "(nthrest coll n)"),
    b!("nthnext", 2, 2, nthnext, "(nthnext coll n)"),
    b!(
        "split-at",
        2,
        2,
        split_at,
        "(split-at n coll): [(take n coll) (drop n coll)]"
    ),
    b!("split-with", 2, 2, split_with, "(split-with pred coll)"),
    b!(
        "partition",
        2,
        4,
        partition,
        "(partition n [step [pad]] coll): complete groups only unless pad"
    ),
    b!(
        "partition-all",
        2,
        3,
        partition_all,
        "(partition-all n [step] coll)"
    ),
    b!(
        "partition-by",
        2,
        2,
        partition_by,
        "(partition-by f coll): split when (f x) changes"
    ),
    b!("sort", 1, 2, sort, "(sort [comp|:desc] coll): stable sort"),
    b!(
        "sort-by",
        2,
        3,
        sort_by,
        "(sort-by keyfn [comp|:desc] coll): stable sort by key"
    ),
    b!(
        "reverse",
        1,
        1,
        |ctx, a| {
            let mut v = into_items(ctx, take(a, 0))?;
            v.reverse();
            vec_value(ctx, v)
        },
        "(reverse coll)"
    ),
    b!(
        "distinct",
        1,
        1,
        distinct,
        "(distinct coll): first occurrences, in order"
    ),
    b!(
        "dedupe",
        1,
        1,
        dedupe,
        "(dedupe coll): drops consecutive duplicates"
    ),
    b!(
        "group-by",
        2,
        2,
        group_by,
        "(group-by f coll): {(f x) [x ...]}"
    ),
    b!(
        "frequencies",
        1,
        1,
        frequencies,
        "(frequencies coll): {x count}"
    ),
    b!(
        "interleave",
        0,
        VARIADIC,
        interleave,
        "(interleave c1 c2 & colls)"
    ),
    b!("interpose", 2, 2, interpose, "(interpose sep coll)"),
    b!(
        "flatten",
        1,
        1,
        flatten,
        "(flatten coll): nested sequential collections flattened"
    ),
    b!(
        "range",
        1,
        3,
        range,
        "(range end), (range start end [step]): finite ranges only"
    ),
    b!(
        "repeat",
        1,
        2,
        repeat,
        "(repeat n x): n copies of x (the infinite form is unsupported)"
    ),
    b!(
        "max-key",
        2,
        VARIADIC,
        |ctx, a| extreme_key(ctx, a, true),
        "(max-key k x & xs): the x with the greatest (k x)"
    ),
    b!(
        "min-key",
        2,
        VARIADIC,
        |ctx, a| extreme_key(ctx, a, false),
        "(min-key k x & xs): the x with the least (k x)"
    ),
    b!(
        "zip",
        2,
        VARIADIC,
        zip,
        "(zip c1 c2 & colls): [[a b] ...] up to the shortest"
    ),
    b!(
        "combinations",
        2,
        2,
        combinations,
        "(combinations coll n): all n-element combinations"
    ),
    b!(
        "tree-seq",
        3,
        3,
        tree_seq,
        "(tree-seq branch? children root): depth-first nodes"
    ),
    b!("walk", 3, 3, walk, "(walk inner outer form)"),
    b!(
        "clojure.walk/walk",
        3,
        3,
        walk,
        "(clojure.walk/walk inner outer form)"
    ),
    b!(
        "postwalk",
        2,
        2,
        postwalk,
        "(postwalk f form): f applied bottom-up"
    ),
    b!(
        "prewalk",
        2,
        2,
        prewalk,
        "(prewalk f form): f applied top-down"
    ),
    b!(
        "keywordize-keys",
        1,
        1,
        keywordize_keys,
        "(keywordize-keys m): string keys to keywords, recursively"
    ),
    b!(
        "stringify-keys",
        1,
        1,
        stringify_keys,
        "(stringify-keys m): keyword keys to strings, recursively"
    ),
];

/// A function of one collection standing in for a transducer: `(map f)`, `(filter p)`, ...
/// are collection-to-collection functions that `into`, `sequence`, `transduce` and `comp`
/// understand (sequences are eager, so a transducer is just a collection transform).
pub(crate) const TRANSDUCER: &str = "transducer";

fn xf(ctx: &mut Ctx<'_>, a: &mut [Value], f: super::BuiltinFn, name: &str) -> R<Value> {
    if a.len() > 1 {
        return f(ctx, a);
    }
    // The builtin travels as a value so the transducer holds only plain captured values.
    let Some(builtin) = super::lookup(name) else {
        return err(Reason::InternalError, "transducer builtin not registered");
    };
    let captured = vec![crate::function::builtin_value(builtin), take(a, 0)];
    Ok(Value::Func(Arc::new(crate::function::Function::Native(
        crate::function::Native {
            name: TRANSDUCER,
            captured,
            _charge: Default::default(),
            f: |c, ctx, args| {
                if args.len() != 1 {
                    return err(
                        Reason::ArityError,
                        format!(
                            "a transducer expects 1 collection, got {} argument(s)",
                            args.len()
                        ),
                    );
                }
                let coll = take(args, 0);
                ctx.apply(&c[0], &mut [c[1].clone(), coll])
            },
        },
    ))))
}

/// True if `v` is a transducer made by [`xf`].
pub(crate) fn is_transducer(v: &Value) -> bool {
    matches!(v, Value::Func(f) if matches!(&**f, crate::function::Function::Native(n) if n.name == TRANSDUCER))
}

fn sequence(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    if a.len() == 1 {
        let v = into_items(ctx, take(a, 0))?;
        return vec_value(ctx, v);
    }
    let xf = take(a, 0);
    let coll = take(a, 1);
    let r = ctx.apply(&xf, &mut [coll])?;
    vec_value(ctx, into_items(ctx, r)?)
}

fn transduce(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let xf = take(a, 0);
    let f = take(a, 1);
    let (init, coll) = if a.len() == 4 {
        (Some(take(a, 2)), take(a, 3))
    } else {
        (None, take(a, 2))
    };
    let items = ctx.apply(&xf, &mut [coll])?;
    let mut args = match init {
        Some(i) => vec![f, i, items],
        None => {
            let i = ctx.apply(&f, &mut [])?;
            vec![f, i, items]
        }
    };
    reduce(ctx, &mut args)
}

fn map(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let f = take(a, 0);
    if a.len() == 2 {
        let items = ctx.seq(&a[1])?;
        let bill = ctx.charge(footprint::vector(items.len()))?;
        let mut out = Vec::with_capacity(items.len());
        for x in items.iter() {
            out.push(ctx.call1(&f, x)?);
        }
        return Ok(ctx.paid_vector(out, bill));
    }
    let colls: Vec<Vec<Value>> = a[1..]
        .iter()
        .map(|c| ctx.seq(c).map(|c| c.into_owned()))
        .collect::<R<_>>()?;
    let n = colls.iter().map(Vec::len).min().unwrap_or(0);
    let bill = ctx.charge(footprint::vector(n))?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let mut args: Vec<Value> = colls.iter().map(|c| c[i].clone()).collect();
        out.push(ctx.apply(&f, &mut args)?);
    }
    Ok(ctx.paid_vector(out, bill))
}

fn filter_impl(ctx: &mut Ctx<'_>, a: &mut [Value], keep_if: bool) -> R<Value> {
    let f = take(a, 0);
    let items = ctx.seq(&a[1])?;
    let mut out = Vec::new();
    for x in items.iter() {
        if ctx.call1(&f, x)?.truthy() == keep_if {
            out.push(x.clone());
        }
    }
    vec_value(ctx, out)
}

fn filter(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    filter_impl(ctx, a, true)
}

fn remove(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    filter_impl(ctx, a, false)
}

fn keep(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let f = take(a, 0);
    let items = ctx.seq(&a[1])?;
    let mut out = Vec::new();
    for x in items.iter() {
        let r = ctx.call1(&f, x)?;
        if !r.is_nil() {
            out.push(r);
        }
    }
    vec_value(ctx, out)
}

fn keep_indexed(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let f = take(a, 0);
    let items = ctx.seq(&a[1])?;
    let mut out = Vec::new();
    for (i, x) in items.iter().enumerate() {
        let r = ctx.apply(&f, &mut [Value::Int(i as i64), x.clone()])?;
        if !r.is_nil() {
            out.push(r);
        }
    }
    vec_value(ctx, out)
}

fn map_indexed(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let f = take(a, 0);
    let items = ctx.seq(&a[1])?;
    let mut out = Vec::with_capacity(items.len());
    for (i, x) in items.iter().enumerate() {
        out.push(ctx.apply(&f, &mut [Value::Int(i as i64), x.clone()])?);
    }
    vec_value(ctx, out)
}

fn mapcat(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    if a.len() > 2 {
        let mapped = map(ctx, a)?;
        let mut out = Vec::new();
        for part in into_items(ctx, mapped)? {
            out.extend(into_items(ctx, part)?);
        }
        return vec_value(ctx, out);
    }
    // One collection: extend straight from each result without materialising the mapped vector.
    let f = take(a, 0);
    let items = ctx.seq(&a[1])?;
    let mut out = Vec::new();
    for x in items.iter() {
        let part = ctx.call1(&f, x)?;
        out.extend(ctx.seq(&part)?.iter().cloned());
    }
    vec_value(ctx, out)
}

fn reduce(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let f = take(a, 0);
    let (mut acc, coll) = if a.len() == 3 {
        (take(a, 1), take(a, 2))
    } else {
        let items = into_items(ctx, take(a, 1))?;
        let mut it = items.into_iter();
        let first = match it.next() {
            Some(x) => x,
            None => return ctx.apply(&f, &mut []),
        };
        let mut acc = first;
        for x in it {
            acc = ctx.apply(&f, &mut [acc, x])?;
        }
        return Ok(acc);
    };
    let items = ctx.seq(&coll)?;
    for x in items.iter() {
        acc = ctx.apply(&f, &mut [acc, x.clone()])?;
    }
    Ok(acc)
}

fn reductions(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let f = take(a, 0);
    let (init, items) = if a.len() == 3 {
        (Some(take(a, 1)), into_items(ctx, take(a, 2))?)
    } else {
        (None, into_items(ctx, take(a, 1))?)
    };
    let mut it = items.into_iter();
    let mut acc = match init.or_else(|| it.next()) {
        Some(x) => x,
        None => {
            let v = ctx.apply(&f, &mut [])?;
            return vec_value(ctx, vec![v]);
        }
    };
    let mut out = vec![acc.clone()];
    for x in it {
        acc = ctx.apply(&f, &mut [acc, x])?;
        out.push(acc.clone());
    }
    vec_value(ctx, out)
}

fn run(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let f = take(a, 0);
    for x in ctx.seq(&a[1])?.iter() {
        ctx.call1(&f, x)?;
    }
    Ok(Value::Nil)
}

fn every(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let f = take(a, 0);
    for x in ctx.seq(&a[1])?.iter() {
        if !ctx.call1(&f, x)?.truthy() {
            return Ok(Value::Bool(false));
        }
    }
    Ok(Value::Bool(true))
}

fn some(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let f = take(a, 0);
    for x in ctx.seq(&a[1])?.iter() {
        let r = ctx.call1(&f, x)?;
        if r.truthy() {
            return Ok(r);
        }
    }
    Ok(Value::Nil)
}

fn concat(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let mut out = Vec::new();
    for c in a.iter_mut() {
        out.extend(into_items(ctx, std::mem::take(c))?);
    }
    vec_value(ctx, out)
}

fn count_arg(fname: &str, v: &Value) -> R<usize> {
    match v {
        Value::Int(n) => Ok((*n).max(0) as usize),
        Value::Float(f) => Ok(f.max(0.0).ceil() as usize),
        other => type_err(fname, "a number", other),
    }
}

fn take_fn(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let n = count_arg("take", &a[0])?;
    let items = ctx.seq(&a[1])?;
    let v = items[..n.min(items.len())].to_vec();
    vec_value(ctx, v)
}

fn drop_fn(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let n = count_arg("drop", &a[0])?;
    let mut items = into_items(ctx, take(a, 1))?;
    let n = n.min(items.len());
    items.drain(..n);
    vec_value(ctx, items)
}

fn drop_fn_rev(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    a.swap(0, 1);
    drop_fn(ctx, a)
}

fn nthnext(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let r = drop_fn_rev(ctx, a)?;
    Ok(if matches!(&r, Value::Vector(v) if v.is_empty()) {
        Value::Nil
    } else {
        r
    })
}

fn take_last(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let n = count_arg("take-last", &a[0])?;
    let items = ctx.seq(&a[1])?;
    if n == 0 || items.is_empty() {
        return Ok(Value::Nil);
    }
    let start = items.len().saturating_sub(n);
    let v = items[start..].to_vec();
    vec_value(ctx, v)
}

fn drop_last(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let (n, coll) = if a.len() == 2 {
        (count_arg("drop-last", &a[0])?, take(a, 1))
    } else {
        (1, take(a, 0))
    };
    let mut items = into_items(ctx, coll)?;
    let keep = items.len().saturating_sub(n);
    items.truncate(keep);
    vec_value(ctx, items)
}

fn take_while(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let f = take(a, 0);
    let mut out = Vec::new();
    for x in ctx.seq(&a[1])?.iter() {
        if !ctx.call1(&f, x)?.truthy() {
            break;
        }
        out.push(x.clone());
    }
    vec_value(ctx, out)
}

fn drop_while(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let f = take(a, 0);
    let items = ctx.seq(&a[1])?;
    let mut i = 0;
    while i < items.len() && ctx.call1(&f, &items[i])?.truthy() {
        i += 1;
    }
    let v = items[i..].to_vec();
    vec_value(ctx, v)
}

fn take_nth(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let n = int_arg("take-nth", &a[0])?;
    if n <= 0 {
        return err(
            Reason::TypeError,
            "take-nth expects a positive step (an infinite result otherwise)",
        );
    }
    let v = ctx
        .seq(&a[1])?
        .iter()
        .step_by(n as usize)
        .cloned()
        .collect();
    vec_value(ctx, v)
}

fn split_at(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let n = count_arg("split-at", &a[0])?;
    let items = ctx.seq(&a[1])?;
    let n = n.min(items.len());
    let halves = vec![
        ctx.vector(items[..n].to_vec())?,
        ctx.vector(items[n..].to_vec())?,
    ];
    ctx.vector(halves)
}

fn split_with(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let f = take(a, 0);
    let items = ctx.seq(&a[1])?;
    let mut i = 0;
    while i < items.len() && ctx.call1(&f, &items[i])?.truthy() {
        i += 1;
    }
    let halves = vec![
        ctx.vector(items[..i].to_vec())?,
        ctx.vector(items[i..].to_vec())?,
    ];
    ctx.vector(halves)
}

fn partition(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let n = int_arg("partition", &a[0])?;
    let (step, pad, coll) = match a.len() {
        2 => (n, None, &a[1]),
        3 => (int_arg("partition", &a[1])?, None, &a[2]),
        _ => (int_arg("partition", &a[1])?, Some(&a[2]), &a[3]),
    };
    if n <= 0 || step <= 0 {
        return Ok(Value::vector(vec![]));
    }
    let (n, step) = (n as usize, step as usize);
    let items = ctx.seq(coll)?;
    let pad_items = match pad {
        Some(p) => Some(ctx.seq(p)?.into_owned()),
        None => None,
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < items.len() {
        let end = (i + n).min(items.len());
        let mut chunk = items[i..end].to_vec();
        if chunk.len() < n {
            if let Some(p) = &pad_items {
                chunk.extend(p.iter().take(n - chunk.len()).cloned());
                out.push(ctx.vector(chunk)?);
            }
            break;
        }
        out.push(ctx.vector(chunk)?);
        i += step;
    }
    ctx.vector(out)
}

fn partition_all(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let n = int_arg("partition-all", &a[0])?;
    let (step, coll) = if a.len() == 3 {
        (int_arg("partition-all", &a[1])?, &a[2])
    } else {
        (n, &a[1])
    };
    if n <= 0 || step <= 0 {
        return err(
            Reason::TypeError,
            "partition-all expects a positive size and step",
        );
    }
    let items = ctx.seq(coll)?;
    let mut out = Vec::new();
    let mut i = 0;
    while i < items.len() {
        let end = (i + n as usize).min(items.len());
        out.push(ctx.vector(items[i..end].to_vec())?);
        i += step as usize;
    }
    ctx.vector(out)
}

fn partition_by(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let f = take(a, 0);
    let items = ctx.seq(&a[1])?;
    let mut out = Vec::new();
    let mut cur: Vec<Value> = Vec::new();
    let mut last_key: Option<Value> = None;
    for x in items.iter() {
        let k = ctx.call1(&f, x)?;
        if let Some(lk) = &last_key
            && *lk != k
        {
            out.push(ctx.vector(std::mem::take(&mut cur))?);
        }
        cur.push(x.clone());
        last_key = Some(k);
    }
    if !cur.is_empty() {
        out.push(ctx.vector(cur)?);
    }
    ctx.vector(out)
}

/// The ordering a core comparison function (`<`, `>`, `compare`) gives, without calling it.
fn builtin_order(f: &Value) -> Option<fn(&Value, &Value) -> Ordering> {
    let Value::Func(func) = f else { return None };
    let crate::function::Function::Builtin(b) = &**func else {
        return None;
    };
    fn lt(x: &Value, y: &Value) -> Ordering {
        match crate::value::ordering_for_lt(x, y) {
            Some(Ordering::Less) => Ordering::Less,
            _ => match crate::value::ordering_for_lt(y, x) {
                Some(Ordering::Less) => Ordering::Greater,
                _ => Ordering::Equal,
            },
        }
    }
    fn gt(x: &Value, y: &Value) -> Ordering {
        lt(y, x)
    }
    match b.traits.order? {
        BuiltinOrder::Less => Some(lt),
        BuiltinOrder::Greater => Some(gt),
        BuiltinOrder::Compare => Some(compare),
    }
}

/// Turns a comparator function result into an ordering (booleans as "less than").
fn user_order(ctx: &mut Ctx<'_>, f: &Value, x: &Value, y: &Value) -> R<Ordering> {
    let r = ctx.apply(f, &mut [x.clone(), y.clone()])?;
    match r {
        Value::Int(i) => Ok(i.cmp(&0)),
        Value::Float(v) => Ok(v.partial_cmp(&0.0).unwrap_or(Ordering::Equal)),
        Value::Bool(true) => Ok(Ordering::Less),
        Value::Bool(false) | Value::Nil => {
            if ctx.apply(f, &mut [y.clone(), x.clone()])?.truthy() {
                Ok(Ordering::Greater)
            } else {
                Ok(Ordering::Equal)
            }
        }
        other => type_err("sort", "a comparator returning a number or boolean", &other),
    }
}

enum Order {
    Natural,
    Desc,
    Fn(Value),
}

fn order_arg(v: Value) -> R<Order> {
    match v {
        Value::Keyword(k) if &*k == "desc" => Ok(Order::Desc),
        Value::Keyword(k) if &*k == "asc" => Ok(Order::Natural),
        other => Ok(Order::Fn(other)),
    }
}

/// Whether keys sort ascending or descending under a comparison that is a plain total order.
fn simple_direction(order: &Order) -> Option<bool> {
    match order {
        Order::Natural => Some(false),
        Order::Desc => Some(true),
        Order::Fn(f) => match f {
            Value::Func(func) => match &**func {
                crate::function::Function::Builtin(b) => match b.traits.order? {
                    BuiltinOrder::Less | BuiltinOrder::Compare => Some(false),
                    BuiltinOrder::Greater => Some(true),
                },
                _ => None,
            },
            _ => None,
        },
    }
}

/// Sorts with `std`'s stable sort when every key is a number (no NaN) or every key is a string:
/// then the order is total, so the fast sort cannot panic. Gives the input back otherwise.
fn fast_sort(keyed: Vec<(Value, Value)>, desc: bool) -> Result<Vec<Value>, Vec<(Value, Value)>> {
    let all_num = keyed.iter().all(|(k, _)| match k {
        Value::Int(_) => true,
        Value::Float(f) => !f.is_nan(),
        _ => false,
    });
    if all_num {
        let mut v: Vec<(f64, i64, Value)> = keyed
            .into_iter()
            .map(|(k, x)| match k {
                Value::Int(i) => (i as f64, i, x),
                Value::Float(f) => (f, 0, x),
                _ => (0.0, 0, x),
            })
            .collect();
        // Ints compare exactly; mixed pairs compare as floats (a consistent total preorder).
        v.sort_by(|a, b| {
            let o =
                a.0.partial_cmp(&b.0)
                    .unwrap_or(Ordering::Equal)
                    .then(a.1.cmp(&b.1));
            if desc { o.reverse() } else { o }
        });
        return Ok(v.into_iter().map(|(_, _, x)| x).collect());
    }
    if keyed.iter().all(|(k, _)| matches!(k, Value::Str(_))) {
        let mut v = keyed;
        v.sort_by(|a, b| {
            let o = match (&a.0, &b.0) {
                (Value::Str(x), Value::Str(y)) => x.cmp(y),
                _ => Ordering::Equal,
            };
            if desc { o.reverse() } else { o }
        });
        return Ok(v.into_iter().map(|(_, x)| x).collect());
    }
    Err(keyed)
}

fn sort_values(ctx: &mut Ctx<'_>, keyed: Vec<(Value, Value)>, order: &Order) -> R<Vec<Value>> {
    // Large sorts take the interruptible merge sort so a deadline is honoured mid-sort.
    const LARGE: usize = 1 << 20;
    let keyed = match simple_direction(order) {
        Some(desc) if keyed.len() <= LARGE => match fast_sort(keyed, desc) {
            Ok(v) => return Ok(v),
            Err(k) => k,
        },
        _ => keyed,
    };
    let mut failure: Option<Ctl> = None;
    let mut comparisons: u32 = 0;
    let mut checked = |failure: &mut Option<Ctl>, ctx: &Ctx<'_>, o: Ordering| {
        comparisons = comparisons.wrapping_add(1);
        if comparisons.is_multiple_of(1 << 16)
            && failure.is_none()
            && let Err(e) = ctx.check_deadline()
        {
            *failure = Some(e);
        }
        if failure.is_some() {
            Ordering::Equal
        } else {
            o
        }
    };
    let sorted = match order {
        Order::Natural => stable_sort_by(keyed, |a, b| {
            checked(&mut failure, ctx, compare(&a.0, &b.0))
        }),
        Order::Desc => stable_sort_by(keyed, |a, b| {
            checked(&mut failure, ctx, compare(&b.0, &a.0))
        }),
        Order::Fn(f) if builtin_order(f).is_some() => {
            let cmp = builtin_order(f).unwrap_or(compare);
            stable_sort_by(keyed, |a, b| checked(&mut failure, ctx, cmp(&a.0, &b.0)))
        }
        Order::Fn(f) => stable_sort_by(keyed, |a, b| {
            if failure.is_some() {
                return Ordering::Equal;
            }
            match user_order(ctx, f, &a.0, &b.0) {
                Ok(o) => o,
                Err(e) => {
                    failure = Some(e);
                    Ordering::Equal
                }
            }
        }),
    };
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(sorted.into_iter().map(|(_, v)| v).collect())
}

fn sort(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let (order, coll) = if a.len() == 2 {
        (order_arg(take(a, 0))?, take(a, 1))
    } else {
        (Order::Natural, take(a, 0))
    };
    let items = into_items(ctx, coll)?;
    let keyed = items.into_iter().map(|x| (x.clone(), x)).collect();
    let v = sort_values(ctx, keyed, &order)?;
    vec_value(ctx, v)
}

fn sort_by(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let keyfn = take(a, 0);
    let (order, coll) = if a.len() == 3 {
        (order_arg(take(a, 1))?, take(a, 2))
    } else {
        (Order::Natural, take(a, 1))
    };
    let items = into_items(ctx, coll)?;
    let mut keyed = Vec::with_capacity(items.len());
    for x in items {
        let k = ctx.call1(&keyfn, &x)?;
        keyed.push((k, x));
    }
    let v = sort_values(ctx, keyed, &order)?;
    vec_value(ctx, v)
}

fn distinct(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let items = into_items(ctx, take(a, 0))?;
    let mut seen =
        std::collections::HashSet::with_capacity_and_hasher(items.len(), FxBuild::default());
    let mut out: Vec<Value> = Vec::new();
    for x in items {
        ctx.tick()?;
        if seen.insert(x.clone()) {
            out.push(x);
        }
    }
    vec_value(ctx, out)
}

fn dedupe(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let items = into_items(ctx, take(a, 0))?;
    let mut out: Vec<Value> = Vec::with_capacity(items.len());
    for x in items {
        if out.last() != Some(&x) {
            out.push(x);
        }
    }
    vec_value(ctx, out)
}

fn group_by(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let f = take(a, 0);
    let items = ctx.seq(&a[1])?;
    let mut groups: indexmap::IndexMap<Value, Vec<Value>, FxBuild> = indexmap::IndexMap::default();
    for x in items.iter() {
        let k = ctx.call1(&f, x)?;
        groups.entry(k).or_default().push(x.clone());
    }
    let mut m = MapData::with_capacity(groups.len());
    for (k, v) in groups {
        m.insert(k, ctx.vector(v)?);
    }
    ctx.map(m)
}

fn frequencies(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let items = ctx.seq(&a[0])?;
    let mut counts: indexmap::IndexMap<Value, i64, FxBuild> = indexmap::IndexMap::default();
    for x in items.iter() {
        ctx.tick()?;
        *counts.entry(x.clone()).or_insert(0) += 1;
    }
    let mut m = MapData::with_capacity(counts.len());
    for (k, n) in counts {
        m.insert(k, Value::Int(n));
    }
    ctx.map(m)
}

fn interleave(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let colls: Vec<Vec<Value>> = a
        .iter_mut()
        .map(|c| into_items(ctx, std::mem::take(c)))
        .collect::<R<_>>()?;
    let n = colls.iter().map(Vec::len).min().unwrap_or(0);
    let mut out = Vec::with_capacity(n * colls.len());
    for i in 0..n {
        for c in &colls {
            out.push(c[i].clone());
        }
    }
    vec_value(ctx, out)
}

fn interpose(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let sep = take(a, 0);
    let items = into_items(ctx, take(a, 1))?;
    let mut out = Vec::with_capacity(items.len() * 2);
    for (i, x) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(sep.clone());
        }
        out.push(x);
    }
    vec_value(ctx, out)
}

fn flatten(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let root = take(a, 0);
    if !matches!(root, Value::Vector(_)) {
        return Ok(Value::vector(vec![]));
    }
    let mut out = Vec::new();
    // Explicit stack of (vector, next index): no recursion, whatever the nesting.
    let mut stack: Vec<(Value, usize)> = vec![(root, 0)];
    // Shared structure can make the flattened result far larger than its source: bound it.
    let max_items = ctx.remaining_memory() / std::mem::size_of::<Value>();
    while let Some((v, i)) = stack.pop() {
        if out.len() > max_items {
            return err(
                Reason::MemoryExceeded,
                "flatten result would exceed the memory budget",
            );
        }
        if let Value::Vector(items) = &v
            && i < items.len()
        {
            let x = items[i].clone();
            stack.push((v, i + 1));
            if matches!(x, Value::Vector(_)) {
                stack.push((x, 0));
            } else {
                out.push(x);
            }
        }
    }
    vec_value(ctx, out)
}

fn range(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    if a.is_empty() {
        return err(
            Reason::TypeError,
            "(range) without arguments is infinite; lazy sequences are not supported",
        );
    }
    let (start, end, step) = match a.len() {
        1 => (Value::Int(0), a[0].clone(), Value::Int(1)),
        2 => (a[0].clone(), a[1].clone(), Value::Int(1)),
        _ => (a[0].clone(), a[1].clone(), a[2].clone()),
    };
    if let (Value::Int(s), Value::Int(e), Value::Int(st)) = (&start, &end, &step) {
        let (s, e, st) = (*s as i128, *e as i128, *st as i128);
        if st == 0 {
            return if s == e {
                Ok(Value::vector(vec![]))
            } else {
                err(
                    Reason::TypeError,
                    "(range start end 0) is infinite; lazy sequences are not supported",
                )
            };
        }
        let n = if (st > 0 && e > s) || (st < 0 && e < s) {
            ((e - s).abs() + st.abs() - 1) / st.abs()
        } else {
            0
        };
        ctx.precheck_items(n.min(u64::MAX as i128) as u64)?;
        let n = n as usize;
        let mut out = Vec::with_capacity(n);
        let mut x = s;
        for _ in 0..n {
            out.push(Value::Int(x as i64));
            x += st;
        }
        return vec_value(ctx, out);
    }
    let s = super::math::f(&start, "range")?;
    let e = super::math::f(&end, "range")?;
    let st = super::math::f(&step, "range")?;
    if st == 0.0 || !st.is_finite() || !s.is_finite() || !e.is_finite() {
        return err(
            Reason::TypeError,
            "range with a zero or non-finite step is infinite",
        );
    }
    let n = ((e - s) / st).ceil().max(0.0);
    ctx.precheck_items(n as u64)?;
    let mut out = Vec::with_capacity(n as usize);
    // Like Clojure, the first element is `start` itself and each next one is the previous plus step.
    let mut cur = start.clone();
    for _ in 0..n as u64 {
        let next = super::math::add2(&cur, &step)?;
        out.push(cur);
        cur = next;
    }
    vec_value(ctx, out)
}

fn repeat(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    if a.len() == 1 {
        return err(
            Reason::TypeError,
            "(repeat x) is infinite; use (repeat n x)",
        );
    }
    let n = count_arg("repeat", &a[0])?;
    ctx.precheck_items(n as u64)?;
    let v = vec![a[1].clone(); n];
    vec_value(ctx, v)
}

fn extreme_key(ctx: &mut Ctx<'_>, a: &mut [Value], greatest: bool) -> R<Value> {
    let k = take(a, 0);
    let mut best: Option<(f64, Value)> = None;
    for x in a[1..].iter() {
        let kv = ctx.call1(&k, x)?;
        let score = super::math::f(&kv, if greatest { "max-key" } else { "min-key" })?;
        let better = match &best {
            None => true,
            Some((b, _)) => {
                if greatest {
                    score >= *b
                } else {
                    score <= *b
                }
            }
        };
        if better {
            best = Some((score, x.clone()));
        }
    }
    Ok(best.map(|(_, v)| v).unwrap_or(Value::Nil))
}

fn zip(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let colls: Vec<Vec<Value>> = a
        .iter_mut()
        .map(|c| into_items(ctx, std::mem::take(c)))
        .collect::<R<_>>()?;
    let n = colls.iter().map(Vec::len).min().unwrap_or(0);
    let out: Vec<Value> = (0..n)
        .map(|i| ctx.vector(colls.iter().map(|c| c[i].clone()).collect()))
        .collect::<R<_>>()?;
    ctx.vector(out)
}

fn combinations(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let items = into_items(ctx, take(a, 0))?;
    let k = count_arg("combinations", &a[1])?;
    let n = items.len();
    if k > n {
        return Ok(Value::vector(vec![]));
    }
    let mut out = Vec::new();
    let mut idx: Vec<usize> = (0..k).collect();
    loop {
        ctx.tick()?;
        out.push(ctx.vector(idx.iter().map(|&i| items[i].clone()).collect())?);
        // Advance to the next combination in lexicographic order.
        let mut i = k;
        let mut advanced = false;
        while i > 0 {
            i -= 1;
            if idx[i] < n - k + i {
                idx[i] += 1;
                for j in i + 1..k {
                    idx[j] = idx[j - 1] + 1;
                }
                advanced = true;
                break;
            }
        }
        if !advanced {
            break;
        }
    }
    ctx.vector(out)
}

fn tree_seq(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let branch = take(a, 0);
    let children = take(a, 1);
    let mut out = Vec::new();
    let mut stack = vec![take(a, 2)];
    while let Some(node) = stack.pop() {
        ctx.tick()?;
        out.push(node.clone());
        if ctx.apply(&branch, &mut [node.clone()])?.truthy() {
            let kids = ctx.apply(&children, &mut [node])?;
            let kids = into_items(ctx, kids)?;
            stack.extend(kids.into_iter().rev());
        }
        ctx.charge_items(1)?;
    }
    Ok(Value::vector(out))
}

fn walk_children(
    ctx: &mut Ctx<'_>,
    inner: &mut dyn FnMut(&mut Ctx<'_>, Value) -> R<Value>,
    form: Value,
) -> R<Value> {
    Ok(match form {
        Value::Vector(items) => {
            let mut out = Vec::with_capacity(items.len());
            for x in items.iter() {
                out.push(inner(ctx, x.clone())?);
            }
            Value::vector(out)
        }
        Value::Map(m) => {
            let mut out = MapData::with_capacity(m.len());
            for (k, v) in m.sorted() {
                let e = inner(ctx, Value::vector(vec![k.clone(), v.clone()]))?;
                match &e {
                    Value::Vector(p) if p.len() == 2 => out.insert(p[0].clone(), p[1].clone()),
                    Value::Nil => {}
                    other => return type_err("walk", "[key value] entries for a map", other),
                }
            }
            Value::Map(CollArc::new(out.into()))
        }
        Value::Set(s) => {
            let mut out = Vec::with_capacity(s.0.len());
            for x in s.sorted() {
                out.push(inner(ctx, x.clone())?);
            }
            Value::set_from(out)
        }
        other => other,
    })
}

fn walk(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let inner = take(a, 0);
    let outer = take(a, 1);
    let r = walk_children(ctx, &mut |ctx, x| ctx.apply(&inner, &mut [x]), take(a, 2))?;
    ctx.apply(&outer, &mut [r])
}

const MAX_WALK_DEPTH: usize = 500;

fn postwalk_rec(ctx: &mut Ctx<'_>, f: &Value, form: Value, depth: usize) -> R<Value> {
    if depth > MAX_WALK_DEPTH {
        return err(Reason::DepthExceeded, "postwalk: value nested too deeply");
    }
    let r = walk_children(ctx, &mut |ctx, x| postwalk_rec(ctx, f, x, depth + 1), form)?;
    ctx.apply(f, &mut [r])
}

fn prewalk_rec(ctx: &mut Ctx<'_>, f: &Value, form: Value, depth: usize) -> R<Value> {
    if depth > MAX_WALK_DEPTH {
        return err(Reason::DepthExceeded, "prewalk: value nested too deeply");
    }
    let r = ctx.apply(f, &mut [form])?;
    walk_children(ctx, &mut |ctx, x| prewalk_rec(ctx, f, x, depth + 1), r)
}

fn postwalk(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let f = take(a, 0);
    postwalk_rec(ctx, &f, take(a, 1), 0)
}

fn prewalk(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let f = take(a, 0);
    prewalk_rec(ctx, &f, take(a, 1), 0)
}

fn rekey(v: Value, to_kw: bool, depth: usize) -> R<Value> {
    if depth > MAX_WALK_DEPTH {
        return err(Reason::DepthExceeded, "value nested too deeply");
    }
    Ok(match v {
        Value::Map(m) => {
            let mut out = MapData::with_capacity(m.len());
            for (k, x) in m.iter() {
                let nk = match k {
                    Value::Str(s) if to_kw => Value::Keyword(s.clone()),
                    Value::Keyword(s) if !to_kw => Value::Str(s.clone()),
                    other => other.clone(),
                };
                out.insert(nk, rekey(x.clone(), to_kw, depth + 1)?);
            }
            Value::Map(CollArc::new(out.into()))
        }
        Value::Vector(items) => Value::vector(
            items
                .iter()
                .map(|x| rekey(x.clone(), to_kw, depth + 1))
                .collect::<R<_>>()?,
        ),
        other => other,
    })
}

fn keywordize_keys(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    rekey(take(a, 0), true, 0)
}

fn stringify_keys(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    rekey(take(a, 0), false, 0)
}
