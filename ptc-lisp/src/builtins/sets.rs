//! Sets and `clojure.set`.

use std::sync::Arc;

use super::{Builtin, VARIADIC, b, into_items, seq_items, take, type_err};
use crate::error::R;
use crate::eval::Ctx;
use crate::value::{MapData, SetData, Value};

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
        |_, a| subset(&a[0], &a[1]),
        "(subset? a b): every element of a is in b"
    ),
    b!(
        "subset?",
        2,
        2,
        |_, a| subset(&a[0], &a[1]),
        "(subset? a b)"
    ),
    b!(
        "clojure.set/superset?",
        2,
        2,
        |_, a| subset(&a[1], &a[0]),
        "(superset? a b): every element of b is in a"
    ),
    b!(
        "superset?",
        2,
        2,
        |_, a| subset(&a[1], &a[0]),
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

fn to_set(fname: &str, v: Value) -> R<SetData> {
    match v {
        Value::Set(s) => Ok(Arc::try_unwrap(s).unwrap_or_else(|s| (*s).clone())),
        Value::Nil => Ok(SetData::default()),
        Value::Vector(_) => {
            let mut s = SetData::default();
            for x in into_items(v)? {
                s.0.insert(x);
            }
            Ok(s)
        }
        other => type_err(fname, "a set", &other),
    }
}

fn disj(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let mut s = take(a, 0);
    match &mut s {
        Value::Nil => {}
        Value::Set(set) => {
            let set = Arc::make_mut(set);
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
        return Ok(Value::Set(Arc::new(SetData::default())));
    }
    let mut acc = to_set("union", take(a, 0))?;
    for s in a[1..].iter() {
        for x in seq_items(s)?.iter() {
            acc.0.insert(x.clone());
        }
    }
    ctx.charge_items(acc.0.len())?;
    Ok(Value::Set(Arc::new(acc)))
}

fn intersection(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let mut acc = to_set("intersection", take(a, 0))?;
    for s in a[1..].iter_mut() {
        let other = to_set("intersection", std::mem::take(s))?;
        acc.0.retain(|x| other.0.contains(x));
    }
    Ok(Value::Set(Arc::new(acc)))
}

fn difference(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let mut acc = to_set("difference", take(a, 0))?;
    for s in a[1..].iter_mut() {
        let other = to_set("difference", std::mem::take(s))?;
        acc.0.retain(|x| !other.0.contains(x));
    }
    Ok(Value::Set(Arc::new(acc)))
}

fn subset(a: &Value, b: &Value) -> R<Value> {
    let sa = to_set("subset?", a.clone())?;
    let sb = to_set("subset?", b.clone())?;
    Ok(Value::Bool(sa.0.iter().all(|x| sb.0.contains(x))))
}

fn select(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let f = take(a, 0);
    let s = to_set("select", take(a, 1))?;
    let mut out = SetData::default();
    for x in s.0.iter() {
        if ctx.call1(&f, x)?.truthy() {
            out.0.insert(x.clone());
        }
    }
    Ok(Value::Set(Arc::new(out)))
}

fn map_invert(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    match &a[0] {
        Value::Nil => Ok(Value::map_from(vec![])),
        Value::Map(m) => {
            let mut out = MapData::with_capacity(m.len());
            for (k, v) in m.sorted() {
                out.insert(v.clone(), k.clone());
            }
            Ok(Value::Map(Arc::new(out)))
        }
        other => type_err("map-invert", "a map", other),
    }
}

fn rename_keys(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let (m, kmap) = match (&a[0], &a[1]) {
        (Value::Map(m), Value::Map(k)) => (m.clone(), k.clone()),
        (Value::Nil, _) => return Ok(Value::Nil),
        (other, _) => return type_err("rename-keys", "a map", other),
    };
    let mut out = (*m).clone();
    for (old, _) in kmap.iter() {
        out.remove(old);
    }
    for (old, new) in kmap.iter() {
        if let Some(v) = m.get(old) {
            out.insert(new.clone(), v.clone());
        }
    }
    Ok(Value::Map(Arc::new(out)))
}

fn project(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let rel = to_set("project", take(a, 0))?;
    let ks = take(a, 1);
    let mut out = SetData::default();
    for x in rel.0.iter() {
        let mut args = [x.clone(), ks.clone()];
        let sel = (super::lookup("select-keys")
            .map(|b| b.f)
            .unwrap_or(|_, _| Ok(Value::Nil)))(ctx, &mut args)?;
        out.0.insert(sel);
    }
    Ok(Value::Set(Arc::new(out)))
}

fn index(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let rel = to_set("index", take(a, 0))?;
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
        out.insert(k, Value::Set(Arc::new(v)));
    }
    Ok(Value::Map(Arc::new(out)))
}
