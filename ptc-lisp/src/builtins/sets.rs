//! Sets and `clojure.set`.

use super::{Builtin, VARIADIC, b, into_items, take, type_err};
use crate::error::R;
use crate::eval::Ctx;
use crate::value::{CollArc, MapData, SetData, Value};

pub(crate) const BUILTINS: &[Builtin] = &[
    b!("disj", 1, VARIADIC, disj, "(disj set & xs): set without xs"),
    b!("clojure.set/union", 0, VARIADIC, union, "(union & sets)"),
    b!("union", 0, VARIADIC, union, "(union & sets)"),
    b!(
        "clojure.set/intersection",
        1,
        VARIADIC,
        intersection,
        "(intersection s & sets)"
    ),
    b!(
        "intersection",
        1,
        VARIADIC,
        intersection,
        "(intersection s & sets)"
    ),
    b!(
        "clojure.set/difference",
        1,
        VARIADIC,
        difference,
        "(difference s & sets)"
    ),
    b!(
        "difference",
        1,
        VARIADIC,
        difference,
        "(difference s & sets)"
    ),
    b!(
        "clojure.set/subset?",
        2,
        2,
        |ctx, a| subset(ctx, &a[0], &a[1]),
        "(subset? a b): every element of a is in b"
    ),
    b!(
        "subset?",
        2,
        2,
        |ctx, a| subset(ctx, &a[0], &a[1]),
        "(subset? a b)"
    ),
    b!(
        "clojure.set/superset?",
        2,
        2,
        |ctx, a| subset(ctx, &a[1], &a[0]),
        "(superset? a b): every element of b is in a"
    ),
    b!(
        "superset?",
        2,
        2,
        |ctx, a| subset(ctx, &a[1], &a[0]),
        "(superset? a b)"
    ),
    b!("clojure.set/select", 2, 2, select, "(select pred set)"),
    b!(
        "clojure.set/map-invert",
        1,
        1,
        map_invert,
        "(map-invert m): values to keys"
    ),
    b!("map-invert", 1, 1, map_invert, "(map-invert m)"),
    b!(
        "clojure.set/rename-keys",
        2,
        2,
        rename_keys,
        "(rename-keys m kmap)"
    ),
    b!("rename-keys", 2, 2, rename_keys, "(rename-keys m kmap)"),
    b!(
        "clojure.set/project",
        2,
        2,
        project,
        "(project rel ks): select-keys over a set of maps"
    ),
    b!(
        "clojure.set/index",
        2,
        2,
        index,
        "(index rel ks): group a set of maps by their values at ks"
    ),
];

fn to_set(ctx: &Ctx<'_>, fname: &str, v: Value) -> R<SetData> {
    match v {
        Value::Set(s) => Ok(CollArc::try_unwrap(s)
            .map_or_else(|s| (**s).clone(), crate::value::Charged::into_inner)),
        Value::Nil => Ok(SetData::default()),
        Value::Vector(_) => {
            let mut s = SetData::default();
            for x in into_items(ctx, v)? {
                s.0.insert(x);
            }
            Ok(s)
        }
        other => type_err(fname, "a set", &other),
    }
}

fn disj(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let mut s = take(a, 0);
    match &mut s {
        Value::Nil => {}
        Value::Set(set) => {
            let set = ctx.grow_set(set, 0)?;
            for x in a[1..].iter() {
                set.0.shift_remove(x);
            }
        }
        other => return type_err("disj", "a set", other),
    }
    Ok(s)
}

fn union(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    if a.is_empty() {
        return Ok(Value::Set(CollArc::new(SetData::default().into())));
    }
    let mut acc = to_set(ctx, "union", take(a, 0))?;
    for s in a[1..].iter() {
        for x in ctx.seq(s)?.iter() {
            acc.0.insert(x.clone());
        }
    }
    ctx.set(acc)
}

fn intersection(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let mut acc = to_set(ctx, "intersection", take(a, 0))?;
    for s in a[1..].iter_mut() {
        let other = to_set(ctx, "intersection", std::mem::take(s))?;
        acc.0.retain(|x| other.0.contains(x));
    }
    ctx.set(acc)
}

fn difference(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let mut acc = to_set(ctx, "difference", take(a, 0))?;
    for s in a[1..].iter_mut() {
        let other = to_set(ctx, "difference", std::mem::take(s))?;
        acc.0.retain(|x| !other.0.contains(x));
    }
    ctx.set(acc)
}

fn subset(ctx: &Ctx<'_>, a: &Value, b: &Value) -> R<Value> {
    let sa = to_set(ctx, "subset?", a.clone())?;
    let sb = to_set(ctx, "subset?", b.clone())?;
    Ok(Value::Bool(sa.0.iter().all(|x| sb.0.contains(x))))
}

fn select(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let f = take(a, 0);
    let s = to_set(ctx, "select", take(a, 1))?;
    let mut out = SetData::default();
    for x in s.0.iter() {
        if ctx.call1(&f, x)?.truthy() {
            out.0.insert(x.clone());
        }
    }
    ctx.set(out)
}

fn map_invert(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    match &a[0] {
        Value::Nil => Ok(Value::map_from(vec![])),
        Value::Map(m) => {
            let mut out = MapData::with_capacity(m.len());
            for (k, v) in m.sorted() {
                out.insert(v.clone(), k.clone());
            }
            ctx.map(out)
        }
        other => type_err("map-invert", "a map", other),
    }
}

fn rename_keys(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let (m, kmap) = match (&a[0], &a[1]) {
        (Value::Map(m), Value::Map(k)) => (m.clone(), k.clone()),
        (Value::Nil, _) => return Ok(Value::Nil),
        (other, _) => return type_err("rename-keys", "a map", other),
    };
    let mut out = (**m).clone();
    for (old, _) in kmap.iter() {
        out.remove(old);
    }
    for (old, new) in kmap.iter() {
        if let Some(v) = m.get(old) {
            out.insert(new.clone(), v.clone());
        }
    }
    ctx.map(out)
}

fn project(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let rel = to_set(ctx, "project", take(a, 0))?;
    let ks = take(a, 1);
    let mut out = SetData::default();
    for x in rel.0.iter() {
        let mut args = [x.clone(), ks.clone()];
        let sel = (super::lookup("select-keys")
            .map(|b| b.f)
            .unwrap_or(|_, _| Ok(Value::Nil)))(ctx, &mut args)?;
        out.0.insert(sel);
    }
    ctx.set(out)
}

fn index(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let rel = to_set(ctx, "index", take(a, 0))?;
    let ks = take(a, 1);
    let mut groups: indexmap::IndexMap<Value, SetData, crate::value::FxBuild> = Default::default();
    for x in rel.0.iter() {
        let mut args = [x.clone(), ks.clone()];
        let sel = (super::lookup("select-keys")
            .map(|b| b.f)
            .unwrap_or(|_, _| Ok(Value::Nil)))(ctx, &mut args)?;
        groups.entry(sel).or_default().0.insert(x.clone());
    }
    let mut out = MapData::with_capacity(groups.len());
    for (k, v) in groups {
        out.insert(k, Value::Set(CollArc::new(v.into())));
    }
    ctx.map(out)
}
