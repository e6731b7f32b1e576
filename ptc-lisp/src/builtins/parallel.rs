//! `pmap` and `pcalls`: order-preserving, on a bounded pool of scoped worker threads so host
//! calls that block on I/O overlap. Each branch sees a snapshot of the definitions; `def` inside
//! a branch is discarded; `return`/`fail` inside a branch are errors; the first failing branch
//! (by position) fails the whole call.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::{Builtin, VARIADIC, b, into_items, take};
use crate::error::{Ctl, LispError, R, Reason, err};
use crate::eval::Ctx;
use crate::value::Value;

pub(crate) const BUILTINS: &[Builtin] = &[
    b!(
        "pmap",
        2,
        VARIADIC,
        pmap,
        "(pmap f coll & colls): like map, with calls run in parallel"
    ),
    b!(
        "pcalls",
        0,
        VARIADIC,
        pcalls,
        "(pcalls & fs): [(f1) (f2) ...] run in parallel"
    ),
];

type ItemResult = (usize, R<Value>, String);

/// Runs `job(ctx, i)` for i in 0..n on worker threads; results in index order.
fn par_run(
    ctx: &mut Ctx<'_>,
    n: usize,
    job: &(dyn Fn(&mut Ctx<'_>, usize) -> R<Value> + Sync),
) -> R<Vec<Value>> {
    let workers = ctx.limits().max_workers.max(1).min(n);
    if n == 0 {
        return Ok(vec![]);
    }
    // Parallel regions nested deeper than this run their branches in the current thread, so
    // recursion through pmap cannot multiply threads without bound.
    const MAX_PARALLEL_NESTING: usize = 2;
    if ctx.parallel_depth() >= MAX_PARALLEL_NESTING {
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            out.push(job(ctx, i)?);
        }
        return Ok(out);
    }
    let fork = ctx.fork();
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let stack_bytes = ctx.limits().thread_stack();
    let mut results: Vec<ItemResult> = Vec::with_capacity(n);
    let mut steps_used = 0u64;
    let mut spawn_error = None;
    std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for _ in 0..workers {
            let next = &next;
            let failed = &failed;
            let fork = &fork;
            let builder = std::thread::Builder::new()
                .name("ptc-pmap".into())
                .stack_size(stack_bytes);
            let h = builder.spawn_scoped(scope, move || {
                let mut wctx = fork.start();
                let mut local: Vec<ItemResult> = Vec::new();
                loop {
                    if failed.load(Ordering::Relaxed) {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let r = job(&mut wctx, i);
                    if r.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    let out = wctx.take_output();
                    local.push((i, r, out));
                }
                (local, fork.steps_taken(&wctx))
            });
            match h {
                Ok(h) => handles.push(h),
                Err(e) => spawn_error = Some(e.to_string()),
            }
        }
        for h in handles {
            match h.join() {
                Ok((local, steps)) => {
                    results.extend(local);
                    steps_used += steps;
                }
                Err(_) => spawn_error = Some("a parallel worker stopped unexpectedly".into()),
            }
        }
    });
    ctx.join(steps_used);
    if let Some(e) = spawn_error
        && results.len() < n
    {
        return err(
            Reason::ParallelCapacityExceeded,
            format!("could not run parallel workers: {e}"),
        );
    }
    results.sort_by_key(|(i, _, _)| *i);
    let mut out = Vec::with_capacity(n);
    for (i, r, printed) in results {
        ctx.print(&printed);
        match r {
            Ok(v) => out.push(v),
            Err(Ctl::Err(e)) => {
                let msg = format!("parallel branch {i} failed: {}", e.message());
                let mut ne = LispError::new(e.reason(), msg);
                if let Some(p) = e.pos() {
                    ne = ne.with_pos(p);
                }
                return Err(Ctl::from(ne));
            }
            Err(Ctl::Recur) => return err(Reason::InvalidForm, "recur escaped a parallel branch"),
            Err(Ctl::Return(_)) => {
                return err(
                    Reason::InvalidForm,
                    "return is not allowed inside pmap/pcalls",
                );
            }
        }
    }
    if out.len() < n {
        return err(Reason::Cancelled, "parallel call did not complete");
    }
    Ok(out)
}

fn pmap(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let f = take(a, 0);
    let colls: Vec<Vec<Value>> = a[1..]
        .iter_mut()
        .map(|c| into_items(std::mem::take(c)))
        .collect::<R<_>>()?;
    let n = colls.iter().map(Vec::len).min().unwrap_or(0);
    let out = par_run(ctx, n, &|wctx, i| {
        let mut args: Vec<Value> = colls.iter().map(|c| c[i].clone()).collect();
        wctx.apply(&f, &mut args)
    })?;
    super::vec_value(ctx, out)
}

fn pcalls(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let fs: Vec<Value> = a.to_vec();
    let out = par_run(ctx, fs.len(), &|wctx, i| wctx.apply(&fs[i], &mut []))?;
    super::vec_value(ctx, out)
}
