//! PTC extensions for aggregation: sum, avg, sum-by, avg-by, min-by, max-by, distinct-by.
//! nil values (missing fields) are skipped; non-numeric values are an `arithmetic_error`.

use super::{Builtin, b, take, vec_value};
use crate::error::{R, Reason, err};
use crate::eval::Ctx;
use crate::printer::short;
use crate::value::{FxBuild, Value, ordering_for_lt};

pub(crate) const BUILTINS: &[Builtin] = &[
    b!(
        "sum",
        1,
        1,
        sum,
        "(sum coll): sum of the numbers (nil skipped); 0 when empty"
    ),
    b!(
        "avg",
        1,
        1,
        avg,
        "(avg coll): mean as a float (nil skipped); nil when empty"
    ),
    b!(
        "sum-by",
        2,
        2,
        sum_by,
        "(sum-by key coll): sum of (key x), skipping nil"
    ),
    b!(
        "avg-by",
        2,
        2,
        avg_by,
        "(avg-by key coll): mean of (key x), skipping nil; nil when none"
    ),
    b!(
        "min-by",
        2,
        2,
        |ctx, a| extreme_by(ctx, a, false),
        "(min-by key coll): the element with the least (key x)"
    ),
    b!(
        "max-by",
        2,
        2,
        |ctx, a| extreme_by(ctx, a, true),
        "(max-by key coll): the element with the greatest (key x)"
    ),
    b!(
        "distinct-by",
        2,
        2,
        distinct_by,
        "(distinct-by key coll): first element for each distinct (key x)"
    ),
];

struct Acc {
    int: i64,
    float: f64,
    is_float: bool,
    n: usize,
}

impl Acc {
    fn new() -> Self {
        Acc {
            int: 0,
            float: 0.0,
            is_float: false,
            n: 0,
        }
    }

    fn add(&mut self, v: &Value, fname: &str) -> R<()> {
        match v {
            Value::Nil => return Ok(()),
            Value::Int(i) => {
                if self.is_float {
                    self.float += *i as f64;
                } else {
                    match self.int.checked_add(*i) {
                        Some(r) => self.int = r,
                        None => {
                            return err(
                                Reason::ArithmeticError,
                                format!("integer overflow in {fname}"),
                            );
                        }
                    }
                }
            }
            Value::Float(f) => {
                if !self.is_float {
                    self.is_float = true;
                    self.float = self.int as f64;
                }
                self.float += f;
            }
            other => {
                return err(
                    Reason::ArithmeticError,
                    format!(
                        "{fname} expects numbers, got {} ({})",
                        short(other),
                        other.type_name()
                    ),
                );
            }
        }
        self.n += 1;
        Ok(())
    }

    fn total(&self) -> Value {
        if self.is_float {
            Value::Float(self.float)
        } else {
            Value::Int(self.int)
        }
    }

    fn mean(&self) -> Value {
        if self.n == 0 {
            return Value::Nil;
        }
        let t = if self.is_float {
            self.float
        } else {
            self.int as f64
        };
        Value::Float(t / self.n as f64)
    }
}

fn sum(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let mut acc = Acc::new();
    for x in ctx.seq(&a[0])?.iter() {
        acc.add(x, "sum")?;
    }
    Ok(acc.total())
}

fn avg(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let mut acc = Acc::new();
    for x in ctx.seq(&a[0])?.iter() {
        acc.add(x, "avg")?;
    }
    Ok(acc.mean())
}

fn by_acc(ctx: &mut Ctx<'_>, a: &mut [Value], fname: &str) -> R<Acc> {
    let key = take(a, 0);
    let mut acc = Acc::new();
    for x in ctx.seq(&a[1])?.iter() {
        let v = ctx.call1(&key, x)?;
        acc.add(&v, fname)?;
    }
    Ok(acc)
}

fn sum_by(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    Ok(by_acc(ctx, a, "sum-by")?.total())
}

fn avg_by(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    Ok(by_acc(ctx, a, "avg-by")?.mean())
}

fn extreme_by(ctx: &mut Ctx<'_>, a: &mut [Value], greatest: bool) -> R<Value> {
    let key = take(a, 0);
    let mut best: Option<(Value, Value)> = None;
    for x in ctx.seq(&a[1])?.iter() {
        let k = ctx.call1(&key, x)?;
        if k.is_nil() {
            continue;
        }
        let better = match &best {
            None => true,
            Some((bk, _)) => {
                let o = ordering_for_lt(&k, bk);
                if greatest {
                    o == Some(std::cmp::Ordering::Greater)
                } else {
                    o == Some(std::cmp::Ordering::Less)
                }
            }
        };
        if better {
            best = Some((k, x.clone()));
        }
    }
    Ok(best.map(|(_, x)| x).unwrap_or(Value::Nil))
}

fn distinct_by(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let key = take(a, 0);
    let mut seen = std::collections::HashSet::with_hasher(FxBuild::default());
    let mut out = Vec::new();
    for x in ctx.seq(&a[1])?.iter() {
        let k = ctx.call1(&key, x)?;
        if seen.insert(k) {
            out.push(x.clone());
        }
    }
    vec_value(ctx, out)
}
