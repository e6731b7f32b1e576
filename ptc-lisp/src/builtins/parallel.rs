//! `pmap` and `pcalls`: order-preserving, with at most `max_workers` branches at once, as
//! coroutines on the program's own thread, so host calls that wait on I/O overlap without a
//! thread each (branches compute one at a time: the host bounds computing programs by its
//! evaluation threads). Each branch sees a snapshot of the definitions; `def` inside a branch is
//! discarded; `return`/`fail` inside a branch are errors; the first failing branch (by position)
//! fails the whole call.

use std::cell::Cell;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

use corosensei::stack::DefaultStack;
use corosensei::{CoroutineResult, ScopedCoroutine, ScopedCoroutineRef};

use super::{Builtin, VARIADIC, b, into_items, take};
use crate::error::{Ctl, LispError, R, Reason, err};
use crate::eval::{Ctx, Fork};
use crate::eval_stack;
use crate::suspend::{Output, Pending, Resume, Suspender};
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

/// What one branch coroutine hands back: its items, the steps it took, the native stack it used.
type Branch = (Vec<ItemResult>, u64, usize);

/// Runs `job(ctx, i)` for i in 0..n, up to `max_workers` at once; results in index order.
fn par_run(
    ctx: &mut Ctx<'_>,
    n: usize,
    job: &dyn Fn(&mut Ctx<'_>, usize) -> R<Value>,
) -> R<Vec<Value>> {
    let workers = ctx.limits().max_workers.max(1).min(n);
    if n == 0 {
        return Ok(vec![]);
    }
    // Parallel regions nested deeper than this run their branches one after another, so
    // recursion through pmap cannot multiply branches without bound.
    const MAX_PARALLEL_NESTING: usize = 2;
    if ctx.parallel_depth() >= MAX_PARALLEL_NESTING {
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            out.push(job(ctx, i)?);
        }
        return Ok(out);
    }
    let stack_bytes = ctx.limits().thread_stack();
    let fork = ctx.fork();
    let ran = interleave(&fork, ctx.suspender(), workers, n, job, stack_bytes);
    let (results, steps_used) = match ran {
        Ok(r) => r,
        Err(e) => {
            return err(
                Reason::ParallelCapacityExceeded,
                format!("could not run parallel branches: {e}"),
            );
        }
    };
    ctx.join(steps_used);
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
    Ok(out)
}

/// Runs the branches as `workers` coroutines on this thread, each taking the next index until
/// none is left or one failed. When every running branch waits on its host, the program
/// suspends once for all their waits (see [`AnyReady`]) and resumes the branches whose wait
/// ended, so a `pmap` over upstream calls overlaps them and holds no thread while they run. A
/// stop (cancel, timeout) reaches every waiting branch. Results are sorted by index; the steps
/// are the branches' total.
fn interleave(
    fork: &Fork<'_>,
    suspender: &Suspender,
    workers: usize,
    n: usize,
    job: &dyn Fn(&mut Ctx<'_>, usize) -> R<Value>,
    stack_bytes: usize,
) -> Result<(Vec<ItemResult>, u64), String> {
    let next = Cell::new(0);
    let failed = Cell::new(false);
    let body = || {
        let (next, failed) = (&next, &failed);
        move |yielder: &Suspender, _: Resume| -> Branch {
            let mut wctx = fork.start(yielder);
            let mut local: Vec<ItemResult> = Vec::new();
            while !failed.get() {
                let i = next.replace(next.get() + 1);
                if i >= n {
                    break;
                }
                let r = job(&mut wctx, i);
                if r.is_err() {
                    failed.set(true);
                }
                let out = wctx.take_output();
                local.push((i, r, out));
            }
            (local, fork.steps_taken(&wctx), wctx.stack_used())
        }
    };
    let mut stacks = (0..workers)
        .map(|_| eval_stack::take(stack_bytes))
        .collect::<Result<Vec<_>, _>>()?;
    let (mut results, steps, used) = nest(&mut stacks, &body, Vec::new(), &mut |branches| {
        drive(branches, suspender)
    })?;
    for stack in stacks {
        eval_stack::keep(stack_bytes, stack, used);
    }
    results.sort_by_key(|(i, _, _)| *i);
    Ok((results, steps))
}

/// A branch coroutine, whatever the scope that holds it.
trait Resumable {
    fn resume(&mut self, input: Resume) -> CoroutineResult<Pending, Branch>;
}

impl Resumable for ScopedCoroutineRef<'_, Resume, Pending, Branch, &mut DefaultStack> {
    fn resume(&mut self, input: Resume) -> CoroutineResult<Pending, Branch> {
        ScopedCoroutineRef::resume(self, input)
    }
}

/// Makes one branch coroutine per stack, each in a scope of its own (which keeps what their
/// bodies borrow alive until they are done or unwound), and hands them all to `drive`.
fn nest<B, T>(
    stacks: &mut [DefaultStack],
    body: &impl Fn() -> B,
    mut made: Vec<&mut dyn Resumable>,
    drive: &mut dyn FnMut(&mut [&mut dyn Resumable]) -> T,
) -> T
where
    B: FnOnce(&Suspender, Resume) -> Branch,
{
    let Some((stack, rest)) = stacks.split_first_mut() else {
        return drive(&mut made);
    };
    ScopedCoroutine::with_stack(stack, body()).scope(|mut branch| {
        let mut made: Vec<&mut dyn Resumable> = made
            .iter_mut()
            .map(|b| &mut **b as &mut dyn Resumable)
            .collect();
        made.push(&mut branch);
        nest(rest, body, made, drive)
    })
}

/// Resumes the branches until all have returned: their items, total steps and the most stack
/// one used.
fn drive(branches: &mut [&mut dyn Resumable], suspender: &Suspender) -> Result<Branch, String> {
    let mut inputs: Vec<Option<Resume>> = branches.iter().map(|_| Some(Resume::Start)).collect();
    let (mut results, mut steps, mut used) = (Vec::new(), 0u64, 0usize);
    let mut waits: Vec<(usize, Pending)> = Vec::new();
    let mut stopped: Option<Reason> = None;
    let mut done = vec![false; branches.len()];
    let mut running = branches.len();
    while running > 0 {
        for (k, branch) in branches.iter_mut().enumerate() {
            let Some(input) = inputs[k].take() else {
                continue;
            };
            match catch_unwind(AssertUnwindSafe(|| branch.resume(input))) {
                Ok(CoroutineResult::Yield(pending)) => match stopped {
                    Some(reason) => inputs[k] = Some(Resume::Stopped(reason)),
                    None => waits.push((k, pending)),
                },
                Ok(CoroutineResult::Return((local, taken, stack))) => {
                    results.extend(local);
                    steps += taken;
                    used = used.max(stack);
                    done[k] = true;
                    running -= 1;
                }
                Err(_) => return Err("a parallel branch stopped unexpectedly".into()),
            }
        }
        if waits.is_empty() {
            // Every branch still running was stopped (and has its input), or all returned. A
            // running branch with neither input nor wait would never be resumed: fail, not spin.
            if running > 0 && inputs.iter().all(Option::is_none) {
                return Err("a parallel branch was left without a wait".into());
            }
            continue;
        }
        match crate::suspend::suspend(suspender, Box::pin(AnyReady(std::mem::take(&mut waits)))) {
            Resume::Ready(out) => {
                let Ok(woken) = out.downcast::<Woken>() else {
                    return Err("a parallel wait ended with a value of another type".into());
                };
                let (ready, still) = *woken;
                for (k, value) in ready {
                    inputs[k] = Some(Resume::Ready(value));
                }
                waits = still;
            }
            Resume::Stopped(reason) => {
                // The waits were dropped with the suspension (their upstream calls with them);
                // every branch still running waited, and it and every later wait end with the
                // stop.
                stopped = Some(reason);
                for (input, _) in inputs.iter_mut().zip(&done).filter(|(_, done)| !**done) {
                    *input = Some(Resume::Stopped(reason));
                }
            }
            Resume::Start => return Err("the evaluation was restarted while it waited".into()),
        }
    }
    Ok((results, steps, used))
}

/// The branches whose waits ended, with their outputs, and the waits still pending.
type Woken = (Vec<(usize, Output)>, Vec<(usize, Pending)>);

/// The waits of a `pmap`'s branches as one: ready when at least one of them is, with every wait
/// that is ready then ([`Woken`]).
struct AnyReady(Vec<(usize, Pending)>);

impl Future for AnyReady {
    type Output = Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Output> {
        let mut ready = Vec::new();
        self.0.retain_mut(|(k, wait)| match wait.as_mut().poll(cx) {
            Poll::Ready(value) => {
                ready.push((*k, value));
                false
            }
            Poll::Pending => true,
        });
        if ready.is_empty() {
            return Poll::Pending;
        }
        let still = std::mem::take(&mut self.0);
        Poll::Ready(Box::new((ready, still)) as Output)
    }
}

fn pmap(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let f = take(a, 0);
    let colls: Vec<Vec<Value>> = a[1..]
        .iter_mut()
        .map(|c| into_items(ctx, std::mem::take(c)))
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
