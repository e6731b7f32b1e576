//! Collection access and construction: count, first/rest, nth, get, conj, into, vec, ...

use super::{
    Builtin, VARIADIC, b, count_of, get_flex, has_key_flex, into_items, take, type_err, vec_value,
};
use crate::error::{R, Reason, err};
use crate::eval::Ctx;
use crate::value::access::nth_item;
use crate::value::{CollArc, MapData, SetData, Value};

pub(crate) const BUILTINS: &[Builtin] = &[
    b!(
        "count",
        1,
        1,
        |_, a| Ok(Value::Int(count_of(&a[0])? as i64)),
        "(count coll): number of elements"
    ),
    b!(
        "first",
        1,
        1,
        first,
        "(first coll): the first element or nil"
    ),
    b!("second", 1, 1, |_, a| nth_or_nil(&a[0], 1), "(second coll)"),
    b!(
        "ffirst",
        1,
        1,
        |ctx, a| {
            let f = first(ctx, a)?;
            first(ctx, &mut [f])
        },
        "(ffirst coll)"
    ),
    b!("fnext", 1, 1, |_, a| nth_or_nil(&a[0], 1), "(fnext coll)"),
    b!(
        "nfirst",
        1,
        1,
        |ctx, a| {
            let f = first(ctx, a)?;
            next(ctx, &mut [f])
        },
        "(nfirst coll)"
    ),
    b!(
        "nnext",
        1,
        1,
        |ctx, a| {
            let n = next(ctx, a)?;
            next(ctx, &mut [n])
        },
        "(nnext coll)"
    ),
    b!("last", 1, 1, last, "(last coll): the last element or nil"),
    b!(
        "rest",
        1,
        1,
        rest,
        "(rest coll): all but the first, [] when none"
    ),
    b!(
        "next",
        1,
        1,
        next,
        "(next coll): all but the first, nil when none"
    ),
    b!(
        "butlast",
        1,
        1,
        butlast,
        "(butlast coll): all but the last, nil when none"
    ),
    b!(
        "nth",
        2,
        3,
        nth,
        "(nth coll i [not-found]): element i; nil when out of range"
    ),
    b!(
        "get",
        2,
        3,
        get,
        "(get m k [not-found]): value at key k (keyword/string keys match both ways)"
    ),
    b!(
        "contains?",
        2,
        2,
        |_, a| Ok(Value::Bool(has_key_flex(&a[0], &a[1]))),
        "(contains? coll k): true if key (or index) k is present"
    ),
    b!(
        "conj",
        0,
        VARIADIC,
        conj,
        "(conj coll & xs): adds to the end of a vector, or to a map/set"
    ),
    b!("cons", 2, 2, cons, "(cons x coll): x prepended to coll"),
    b!(
        "peek",
        1,
        1,
        |_, a| match &a[0] {
            Value::Nil => Ok(Value::Nil),
            Value::Vector(v) => Ok(v.last().cloned().unwrap_or(Value::Nil)),
            o => type_err("peek", "a vector", o),
        },
        "(peek v): the last element"
    ),
    b!("pop", 1, 1, pop, "(pop v): v without its last element"),
    b!(
        "empty",
        1,
        1,
        empty,
        "(empty coll): an empty collection of the same kind"
    ),
    b!(
        "vec",
        1,
        1,
        |ctx, a| {
            let v = into_items(ctx, take(a, 0))?;
            vec_value(ctx, v)
        },
        "(vec coll): a vector of the elements"
    ),
    b!(
        "vector",
        0,
        VARIADIC,
        |ctx, a| vec_value(ctx, a.to_vec()),
        "(vector & xs)"
    ),
    b!(
        "list",
        0,
        VARIADIC,
        |ctx, a| vec_value(ctx, a.to_vec()),
        "(list & xs): a vector (lists are vectors)"
    ),
    b!(
        "seq",
        1,
        1,
        |ctx, a| {
            let v = into_items(ctx, take(a, 0))?;
            if v.is_empty() {
                Ok(Value::Nil)
            } else {
                vec_value(ctx, v)
            }
        },
        "(seq coll): the elements as a vector, nil when empty"
    ),
    b!(
        "doall",
        1,
        1,
        |_, a| Ok(take(a, 0)),
        "(doall coll): coll (sequences are eager)"
    ),
    b!("dorun", 1, 1, |_, _| Ok(Value::Nil), "(dorun coll): nil"),
    b!("hash-map", 0, VARIADIC, hash_map, "(hash-map & kvs)"),
    b!("array-map", 0, VARIADIC, hash_map, "(array-map & kvs)"),
    b!(
        "hash-set",
        0,
        VARIADIC,
        |ctx, a| ctx.set(SetData::from_values(a.iter_mut().map(std::mem::take))),
        "(hash-set & xs)"
    ),
    b!(
        "set",
        1,
        1,
        |ctx, a| { ctx.set(SetData::from_values(into_items(ctx, take(a, 0))?)) },
        "(set coll): a set of the elements"
    ),
    b!(
        "into",
        1,
        3,
        into,
        "(into to from): conj every element of from onto to"
    ),
    b!("subvec", 2, 3, subvec, "(subvec v start [end])"),
];

fn first(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    nth_or_nil(&a[0], 0)
}

pub(crate) fn nth_or_nil(v: &Value, i: usize) -> R<Value> {
    nth_item(v, i).unwrap_or_else(|| type_err("first", "a collection", v))
}

fn last(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    match &a[0] {
        Value::Vector(items) => Ok(items.last().cloned().unwrap_or(Value::Nil)),
        other => Ok(ctx.seq(other)?.last().cloned().unwrap_or(Value::Nil)),
    }
}

fn rest(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let items = into_items(ctx, take(a, 0))?;
    if items.is_empty() {
        return Ok(Value::vector(vec![]));
    }
    let mut items = items;
    items.remove(0);
    vec_value(ctx, items)
}

fn next(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let items = into_items(ctx, take(a, 0))?;
    if items.len() <= 1 {
        return Ok(Value::Nil);
    }
    let mut items = items;
    items.remove(0);
    vec_value(ctx, items)
}

fn butlast(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let mut items = into_items(ctx, take(a, 0))?;
    if items.len() <= 1 {
        return Ok(Value::Nil);
    }
    items.pop();
    vec_value(ctx, items)
}

fn nth(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let i = match &a[1] {
        Value::Int(i) => *i,
        Value::Float(f) if f.fract() == 0.0 => *f as i64,
        other => return type_err("nth", "an integer index", other),
    };
    if matches!(a[0], Value::Map(_)) {
        return type_err("nth", "an indexed collection", &a[0]);
    }
    if matches!(a[0], Value::Set(_)) {
        return type_err("nth", "an indexed collection (sets are unordered)", &a[0]);
    }
    let v = if i < 0 {
        Value::Nil
    } else {
        nth_or_nil(&a[0], i as usize)?
    };
    let found = i >= 0 && (i as usize) < count_of(&a[0]).unwrap_or(0);
    if !found && a.len() == 3 {
        return Ok(take(a, 2));
    }
    Ok(v)
}

fn get(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    match get_flex(&a[0], &a[1]) {
        Some(v) => Ok(v),
        None => Ok(if a.len() == 3 { take(a, 2) } else { Value::Nil }),
    }
}

/// Adds one element to a collection in place (a shared collection is copied first), its growth
/// charged before it grows.
pub(crate) fn conj1(ctx: &Ctx<'_>, coll: &mut Value, x: Value) -> R<()> {
    match coll {
        Value::Nil => {
            *coll = ctx.vector(vec![x])?;
        }
        Value::Vector(items) => ctx.grow_vector(items, 1)?.push(x),
        Value::Set(s) => {
            let extra = usize::from(!s.0.contains(&x));
            ctx.grow_set(s, extra)?.0.insert(x);
        }
        Value::Map(m) => match x {
            Value::Vector(pair) if pair.len() == 2 => {
                let extra = usize::from(!m.contains_key(&pair[0]));
                ctx.grow_map(m, extra)?
                    .insert(pair[0].clone(), pair[1].clone());
            }
            Value::Map(other) => {
                let mm = ctx.grow_map(m, other.len())?;
                for (k, v) in other.iter() {
                    mm.insert(k.clone(), v.clone());
                }
            }
            Value::Nil => {}
            other => return type_err("conj", "a [key value] pair for a map", &other),
        },
        other => return type_err("conj", "a collection", other),
    }
    Ok(())
}

fn conj(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    if a.is_empty() {
        return Ok(Value::vector(vec![]));
    }
    let mut coll = take(a, 0);
    if let Value::Vector(items) = &mut coll {
        ctx.grow_vector(items, a.len() - 1)?;
    }
    for x in a[1..].iter_mut() {
        conj1(ctx, &mut coll, std::mem::take(x))?;
    }
    Ok(coll)
}

fn cons(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let x = take(a, 0);
    let items = into_items(ctx, take(a, 1))?;
    let mut v = Vec::with_capacity(items.len() + 1);
    v.push(x);
    v.extend(items);
    vec_value(ctx, v)
}

fn pop(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    match take(a, 0) {
        Value::Nil => Ok(Value::Nil),
        Value::Vector(mut items) => {
            if items.is_empty() {
                return err(Reason::TypeError, "pop of an empty vector");
            }
            ctx.grow_vector(&mut items, 0)?.pop();
            Ok(Value::Vector(items))
        }
        other => type_err("pop", "a vector", &other),
    }
}

fn empty(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    Ok(match &a[0] {
        Value::Vector(_) | Value::Str(_) => Value::vector(vec![]),
        Value::Map(_) => Value::Map(CollArc::new(MapData::default().into())),
        Value::Set(_) => Value::Set(CollArc::new(SetData::default().into())),
        _ => Value::Nil,
    })
}

fn hash_map(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    if !a.len().is_multiple_of(2) {
        return err(
            Reason::ArityError,
            "hash-map expects an even number of arguments",
        );
    }
    let mut m = MapData::with_capacity(a.len() / 2);
    for kv in a.chunks_mut(2) {
        m.insert(std::mem::take(&mut kv[0]), std::mem::take(&mut kv[1]));
    }
    ctx.map(m)
}

fn into(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    if a.len() == 1 {
        return Ok(take(a, 0));
    }
    let from_idx = a.len() - 1;
    let mut to = take(a, 0);
    let mut from = take(a, from_idx);
    if a.len() == 3 {
        // (into to xform from): the transducer transforms the whole collection.
        let f = take(a, 1);
        let items = ctx.vector(into_items(ctx, from)?)?;
        from = ctx.apply(&f, &mut [items])?;
    }
    // The target grows (or is copied, when shared) with room for every new element, charged
    // before anything is allocated.
    if let (Value::Map(t), Value::Map(m)) = (&mut to, &from) {
        // A map merged into a map keeps its entries without building pairs.
        let t = ctx.grow_map(t, m.len())?;
        for (k, v) in m.iter() {
            t.insert(k.clone(), v.clone());
        }
        return Ok(to);
    }
    let items = ctx.seq(&from)?;
    match &mut to {
        Value::Vector(v) => {
            ctx.grow_vector(v, items.len())?.extend_from_slice(&items);
            return Ok(to);
        }
        Value::Set(s) => {
            ctx.grow_set(s, items.len())?;
        }
        Value::Map(m) => {
            ctx.grow_map(m, items.len())?;
        }
        _ => {}
    }
    for x in items.iter() {
        conj1(ctx, &mut to, x.clone())?;
    }
    Ok(to)
}

fn subvec(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let items = match &a[0] {
        Value::Vector(v) => v.clone(),
        other => return type_err("subvec", "a vector", other),
    };
    let start = super::int_arg("subvec", &a[1])?;
    let end = if a.len() == 3 {
        super::int_arg("subvec", &a[2])?
    } else {
        items.len() as i64
    };
    if start < 0 || end < start || end as usize > items.len() {
        return err(
            Reason::TypeError,
            format!(
                "subvec index out of bounds: {start}..{end} of {}",
                items.len()
            ),
        );
    }
    vec_value(ctx, items[start as usize..end as usize].to_vec())
}
