//! Map functions: assoc/dissoc/update (in place when the map is uniquely owned), merge,
//! select-keys, get-in/assoc-in/update-in, keys/vals (sorted by key), reduce-kv.

use super::{Builtin, VARIADIC, b, get_flex, into_items, map_get_flex, take, type_err, vec_value};
use crate::error::{R, Reason, err};
use crate::eval::Ctx;
use crate::value::{MapData, Value};

pub(crate) const BUILTINS: &[Builtin] = &[
    b!(
        "keys",
        1,
        1,
        keys,
        "(keys m): the keys, sorted; nil when empty"
    ),
    b!(
        "vals",
        1,
        1,
        vals,
        "(vals m): the values in key order; nil when empty"
    ),
    b!(
        "key",
        1,
        1,
        |_, a| crate::destructure::nth(&a[0], 0),
        "(key entry)"
    ),
    b!(
        "val",
        1,
        1,
        |_, a| crate::destructure::nth(&a[0], 1),
        "(val entry)"
    ),
    b!("find", 2, 2, find, "(find m k): [k v] or nil"),
    b!(
        "assoc",
        3,
        VARIADIC,
        assoc,
        "(assoc m k v & kvs): m with k set to v (vectors: index)"
    ),
    b!(
        "dissoc",
        1,
        VARIADIC,
        dissoc,
        "(dissoc m & ks): m without the keys"
    ),
    b!(
        "update",
        3,
        VARIADIC,
        update,
        "(update m k f & args): m with k set to (f (get m k) args...)"
    ),
    b!("get-in", 2, 3, get_in, "(get-in m ks [not-found])"),
    b!("assoc-in", 3, 3, assoc_in, "(assoc-in m ks v)"),
    b!(
        "update-in",
        3,
        VARIADIC,
        update_in,
        "(update-in m ks f & args)"
    ),
    b!(
        "merge",
        0,
        VARIADIC,
        merge,
        "(merge & maps): later keys win; nil maps are skipped"
    ),
    b!(
        "merge-with",
        1,
        VARIADIC,
        merge_with,
        "(merge-with f & maps): combine clashing values with f"
    ),
    b!("select-keys", 2, 2, select_keys, "(select-keys m ks)"),
    b!("zipmap", 2, 2, zipmap, "(zipmap ks vs)"),
    b!("update-keys", 2, 2, update_keys, "(update-keys m f)"),
    b!("update-vals", 2, 2, update_vals, "(update-vals m f)"),
    b!(
        "reduce-kv",
        3,
        3,
        reduce_kv,
        "(reduce-kv f init m): (f acc k v) over entries in key order"
    ),
    b!(
        "entries",
        1,
        1,
        |ctx, a| {
            let v = ctx.seq(&a[0])?.into_owned();
            vec_value(ctx, v)
        },
        "(entries m): [k v] pairs sorted by key"
    ),
];

fn map_arg<'v>(fname: &str, v: &'v Value) -> R<Option<&'v MapData>> {
    match v {
        Value::Nil => Ok(None),
        Value::Map(m) => Ok(Some(m)),
        other => type_err(fname, "a map", other),
    }
}

fn keys(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let Some(m) = map_arg("keys", &a[0])? else {
        return Ok(Value::Nil);
    };
    if m.is_empty() {
        return Ok(Value::Nil);
    }
    let v = m.sorted().into_iter().map(|(k, _)| k.clone()).collect();
    vec_value(ctx, v)
}

fn vals(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let Some(m) = map_arg("vals", &a[0])? else {
        return Ok(Value::Nil);
    };
    if m.is_empty() {
        return Ok(Value::Nil);
    }
    let v = m.sorted().into_iter().map(|(_, v)| v.clone()).collect();
    vec_value(ctx, v)
}

fn find(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    match &a[0] {
        Value::Map(m) => Ok(match m.get(&a[1]).or_else(|| map_get_flex(m, &a[1])) {
            Some(v) => Value::vector(vec![a[1].clone(), v.clone()]),
            None => Value::Nil,
        }),
        Value::Vector(_) => Ok(match get_flex(&a[0], &a[1]) {
            Some(v) => Value::vector(vec![a[1].clone(), v]),
            None => Value::Nil,
        }),
        Value::Nil => Ok(Value::Nil),
        other => type_err("find", "a map", other),
    }
}

/// Sets `k` to `v` in `coll` in place (a shared collection is copied first), its growth charged
/// before it grows.
pub(crate) fn assoc1(ctx: &Ctx<'_>, coll: &mut Value, k: Value, v: Value) -> R<()> {
    match coll {
        Value::Nil => {
            let mut m = MapData::with_capacity(1);
            m.insert(k, v);
            *coll = ctx.map(m)?;
            Ok(())
        }
        Value::Map(m) => {
            let extra = usize::from(!m.contains_key(&k));
            ctx.grow_map(m, extra)?.insert(k, v);
            Ok(())
        }
        Value::Vector(items) => {
            let i = match k {
                Value::Int(i) => i,
                other => return type_err("assoc", "an integer index for a vector", &other),
            };
            let len = items.len() as i64;
            if i < 0 || i > len {
                return err(
                    Reason::TypeError,
                    format!("assoc index {i} out of bounds for a vector of {len}"),
                );
            }
            let items = ctx.grow_vector(items, usize::from(i == len))?;
            if i == len {
                items.push(v);
            } else {
                items[i as usize] = v;
            }
            Ok(())
        }
        other => type_err("assoc", "a map or vector", other),
    }
}

fn assoc(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    if !(a.len() - 1).is_multiple_of(2) {
        return err(
            Reason::ArityError,
            "assoc expects a map followed by key/value pairs",
        );
    }
    let mut m = take(a, 0);
    for kv in a[1..].chunks_mut(2) {
        assoc1(
            ctx,
            &mut m,
            std::mem::take(&mut kv[0]),
            std::mem::take(&mut kv[1]),
        )?;
    }
    Ok(m)
}

fn dissoc(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let mut m = take(a, 0);
    match &mut m {
        Value::Nil => {}
        Value::Map(mm) => {
            for k in a[1..].iter() {
                if mm.contains_key(k) {
                    ctx.grow_map(mm, 0)?.remove(k);
                }
            }
        }
        other => return type_err("dissoc", "a map", other),
    }
    Ok(m)
}

/// Removes the value at `k` from a map (copied first when shared) so `f` can update it in place.
fn take_entry(ctx: &Ctx<'_>, m: &mut Value, k: &Value) -> R<Value> {
    Ok(match m {
        Value::Map(mm) => {
            // Exact key first (so we can take it out); flexible lookup as a read-only fallback.
            if mm.contains_key(k) {
                ctx.grow_map(mm, 0)?
                    .get_mut(k)
                    .map(std::mem::take)
                    .unwrap_or(Value::Nil)
            } else {
                map_get_flex(mm, k).cloned().unwrap_or(Value::Nil)
            }
        }
        other => get_flex(other, k).unwrap_or(Value::Nil),
    })
}

fn update(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let mut m = take(a, 0);
    let k = take(a, 1);
    let f = take(a, 2);
    // `(update m k f)` and `(update m k f x)` call `f` without a heap-allocated argument list.
    let call = |ctx: &mut Ctx<'_>, old: Value, a: &mut [Value]| match a.len() {
        3 => ctx.apply(&f, &mut [old]),
        4 => ctx.apply(&f, &mut [old, take(a, 3)]),
        _ => {
            let mut args = Vec::with_capacity(a.len() - 2);
            args.push(old);
            args.extend(a[3..].iter_mut().map(std::mem::take));
            ctx.apply(&f, &mut args)
        }
    };
    // An exact key is updated where it lies, and the map is copied at most once.
    if let Value::Map(mm) = &mut m
        && mm.contains_key(&k)
        && let Some(slot) = ctx.grow_map(mm, 0)?.get_mut(&k)
    {
        let old = std::mem::take(slot);
        *slot = call(ctx, old, a)?;
        return Ok(m);
    }
    let old = take_entry(ctx, &mut m, &k)?;
    let new = call(ctx, old, a)?;
    assoc1(ctx, &mut m, k, new)?;
    Ok(m)
}

fn path(fname: &str, v: &Value) -> R<Vec<Value>> {
    match v {
        Value::Nil => Ok(vec![]),
        Value::Vector(items) => Ok(items.to_vec()),
        other => type_err(fname, "a vector of keys", other),
    }
}

fn get_in(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let ks = path("get-in", &a[1])?;
    let mut cur = a[0].clone();
    for k in &ks {
        match get_flex(&cur, k) {
            Some(v) => cur = v,
            None => return Ok(if a.len() == 3 { take(a, 2) } else { Value::Nil }),
        }
    }
    Ok(cur)
}

fn assoc_in_rec(ctx: &mut Ctx<'_>, mut m: Value, ks: &[Value], v: Value) -> R<Value> {
    let Some((k, rest)) = ks.split_first() else {
        return Ok(v);
    };
    let inner = if rest.is_empty() {
        v
    } else {
        let child = take_entry(ctx, &mut m, k)?;
        assoc_in_rec(ctx, child, rest, v)?
    };
    assoc1(ctx, &mut m, k.clone(), inner)?;
    Ok(m)
}

fn assoc_in(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let ks = path("assoc-in", &a[1])?;
    if ks.len() > 1000 {
        return err(Reason::DepthExceeded, "assoc-in path longer than 1000 keys");
    }
    let v = take(a, 2);
    assoc_in_rec(ctx, take(a, 0), &ks, v)
}

fn update_in_rec(
    ctx: &mut Ctx<'_>,
    mut m: Value,
    ks: &[Value],
    f: &Value,
    extra: &[Value],
) -> R<Value> {
    let Some((k, rest)) = ks.split_first() else {
        let mut args = vec![m];
        args.extend(extra.iter().cloned());
        return ctx.apply(f, &mut args);
    };
    let child = take_entry(ctx, &mut m, k)?;
    let new = update_in_rec(ctx, child, rest, f, extra)?;
    assoc1(ctx, &mut m, k.clone(), new)?;
    Ok(m)
}

fn update_in(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let ks = path("update-in", &a[1])?;
    if ks.is_empty() {
        return err(Reason::TypeError, "update-in expects a non-empty key path");
    }
    if ks.len() > 1000 {
        return err(
            Reason::DepthExceeded,
            "update-in path longer than 1000 keys",
        );
    }
    let f = take(a, 2);
    let extra: Vec<Value> = a[3..].to_vec();
    update_in_rec(ctx, take(a, 0), &ks, &f, &extra)
}

fn merge(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let mut acc = Value::Nil;
    for m in a.iter_mut() {
        let m = std::mem::take(m);
        match m {
            Value::Nil => {}
            Value::Map(other) => {
                if acc.is_nil() {
                    acc = Value::Map(other);
                    continue;
                }
                if let Value::Map(t) = &mut acc {
                    let t = ctx.grow_map(t, other.len())?;
                    for (k, v) in other.iter() {
                        t.insert(k.clone(), v.clone());
                    }
                }
            }
            other => return type_err("merge", "maps", &other),
        }
    }
    Ok(acc)
}

fn merge_with(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let f = take(a, 0);
    let mut acc = Value::Nil;
    for m in a[1..].iter_mut() {
        let m = std::mem::take(m);
        match m {
            Value::Nil => {}
            Value::Map(other) => {
                if acc.is_nil() {
                    acc = Value::Map(other);
                    continue;
                }
                for (k, v) in other.sorted() {
                    let existing = match &acc {
                        Value::Map(t) => t.get(k).cloned(),
                        _ => None,
                    };
                    let nv = match existing {
                        Some(old) => ctx.apply(&f, &mut [old, v.clone()])?,
                        None => v.clone(),
                    };
                    assoc1(ctx, &mut acc, k.clone(), nv)?;
                }
            }
            other => return type_err("merge-with", "maps", &other),
        }
    }
    Ok(acc)
}

fn select_keys(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let ks = ctx.seq(&a[1])?;
    let mut out = MapData::with_capacity(ks.len());
    if let Value::Map(m) = &a[0] {
        for k in ks.iter() {
            if let Some(v) = map_get_flex(m, k) {
                out.insert(k.clone(), v.clone());
            }
        }
    } else if !a[0].is_nil() {
        for k in ks.iter() {
            if let Some(v) = get_flex(&a[0], k) {
                out.insert(k.clone(), v);
            }
        }
    }
    ctx.map(out)
}

fn zipmap(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let ks = into_items(ctx, take(a, 0))?;
    let vs = into_items(ctx, take(a, 1))?;
    let mut out = MapData::with_capacity(ks.len().min(vs.len()));
    for (k, v) in ks.into_iter().zip(vs) {
        out.insert(k, v);
    }
    ctx.map(out)
}

fn update_keys(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    update_entries(ctx, a, "update-keys", true)
}

fn update_vals(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    update_entries(ctx, a, "update-vals", false)
}

/// `update-keys` / `update-vals`: a new map with `f` applied to every key, or every value.
fn update_entries(ctx: &mut Ctx<'_>, a: &mut [Value], name: &str, keys: bool) -> R<Value> {
    let Some(m) = map_arg(name, &a[0])? else {
        return Ok(Value::Nil);
    };
    let entries: Vec<(Value, Value)> = m
        .sorted()
        .into_iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let f = take(a, 1);
    let mut out = MapData::with_capacity(entries.len());
    for (k, v) in entries {
        if keys {
            out.insert(ctx.apply(&f, &mut [k])?, v);
        } else {
            let nv = ctx.apply(&f, &mut [v])?;
            out.insert(k, nv);
        }
    }
    ctx.map(out)
}

fn reduce_kv(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let f = take(a, 0);
    let mut acc = take(a, 1);
    let entries: Vec<(Value, Value)> = match &a[2] {
        Value::Nil => vec![],
        Value::Map(m) => m
            .sorted()
            .into_iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        Value::Vector(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| (Value::Int(i as i64), v.clone()))
            .collect(),
        other => return type_err("reduce-kv", "a map", other),
    };
    for (k, v) in entries {
        acc = ctx.apply(&f, &mut [acc, k, v])?;
    }
    Ok(acc)
}
