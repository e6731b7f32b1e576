//! Evaluation stacks, kept for reuse.
//!
//! Every evaluation runs on a stack of its own, [`Limits::stack_bytes`](crate::Limits) large
//! with a guard page below it, so a deep program can never overflow the caller's stack. The
//! evaluation stays on the calling thread: switching stacks costs nanoseconds, where handing
//! the work to another thread costs tens of microseconds of wake-up latency, more than a small
//! program takes. Mapping a fresh stack costs microseconds too, so finished stacks wait here
//! for the next evaluation. A stack that a deep evaluation used keeps the pages it touched
//! resident; it is unmapped instead of kept, which bounds what the idle stacks hold to
//! [`MAX_IDLE`] × [`RETIRE_AFTER_STACK`].

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;

use corosensei::stack::DefaultStack;

/// Idle stacks kept at most; more finishing at once are unmapped.
pub(crate) const MAX_IDLE: usize = 16;

/// A stack whose evaluation used more than this is unmapped, not kept.
pub(crate) const RETIRE_AFTER_STACK: usize = 1 << 20;

/// Idle stacks with their usable size.
static IDLE: Mutex<Vec<(usize, DefaultStack)>> = Mutex::new(Vec::new());

fn idle() -> std::sync::MutexGuard<'static, Vec<(usize, DefaultStack)>> {
    // The list stays consistent even if a holder panicked: entries are pushed and popped whole.
    IDLE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// An evaluation stack of `size` usable bytes: an idle one of that size, or a new one.
pub(crate) fn take(size: usize) -> Result<DefaultStack, String> {
    let reused = {
        let mut list = idle();
        list.iter()
            .rposition(|(s, _)| *s == size)
            .map(|i| list.swap_remove(i).1)
    };
    match reused {
        Some(stack) => Ok(stack),
        None => DefaultStack::new(size)
            .map_err(|e| format!("could not map a {size}-byte evaluation stack: {e}")),
    }
}

/// Gives back the stack of a finished evaluation that used `used` bytes of it: kept for the next
/// one unless it went deep or enough are idle, unmapped otherwise. (The stack of an evaluation
/// that panicked or was dropped midway is never given back: it is unmapped.)
pub(crate) fn keep(size: usize, stack: DefaultStack, used: usize) {
    if used <= RETIRE_AFTER_STACK {
        let mut list = idle();
        if list.len() < MAX_IDLE {
            list.push((size, stack));
        }
    }
}

/// Runs `work` on an evaluation stack of `size` usable bytes, on this thread (work that never
/// suspends, such as scanning a program). `work` returns its result and the native stack it used,
/// which decides whether the stack is kept. A panic in `work` is returned as `Err`, and that stack
/// is unmapped.
pub(crate) fn run<T>(size: usize, work: impl FnOnce() -> (T, usize)) -> Result<T, String> {
    let mut stack = take(size)?;
    let ran = catch_unwind(AssertUnwindSafe(|| corosensei::on_stack(&mut stack, work)));
    match ran {
        Ok((value, used)) => {
            keep(size, stack, used);
            Ok(value)
        }
        Err(_) => Err("the evaluator stopped unexpectedly".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corosensei::stack::Stack;
    /// These tests share the process's idle list; each holds this while it runs, and leaves
    /// no stack of its own size parked.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn parked(size: usize) -> Vec<usize> {
        idle()
            .iter()
            .filter(|(s, _)| *s == size)
            .map(|(_, st)| st.base().get())
            .collect()
    }

    fn drop_parked(size: usize) {
        idle().retain(|(s, _)| *s != size);
    }

    /// The base of the stack `work` ran on (the address of one of its locals, rounded to the
    /// stack: every evaluation stack is at least 8 MiB, so a local lies within 1 MiB of it).
    fn ran_on(size: usize, used: usize) -> usize {
        run(size, move || {
            let marker = 0u8;
            (std::hint::black_box(&marker) as *const u8 as usize, used)
        })
        .unwrap()
    }

    fn base_near(addr: usize, bases: &[usize]) -> bool {
        bases.iter().any(|b| b.abs_diff(addr) < 1 << 20)
    }

    #[test]
    fn stacks_are_reused_unless_their_evaluation_went_deep() {
        const SIZE: usize = 9 << 20;
        let _serial = serial();
        let first = ran_on(SIZE, 0);
        let kept = parked(SIZE);
        assert_eq!(kept.len(), 1, "a shallow evaluation's stack is kept");
        assert!(
            base_near(first, &kept),
            "and it is the one the evaluation ran on"
        );
        assert!(
            !base_near(&first as *const usize as usize, &kept),
            "which is not the caller's stack"
        );
        let second = ran_on(SIZE, RETIRE_AFTER_STACK);
        assert!(
            base_near(second, &kept),
            "the next evaluation runs on the kept stack"
        );
        assert_eq!(parked(SIZE), kept, "at the threshold the stack is kept");
        ran_on(SIZE, RETIRE_AFTER_STACK + 1);
        assert!(
            parked(SIZE).is_empty(),
            "one past the threshold, it is unmapped"
        );
        drop_parked(SIZE);
    }

    #[test]
    fn a_panic_is_an_error_and_its_stack_is_not_kept() {
        const SIZE: usize = 10 << 20;
        let _serial = serial();
        let r: Result<(), String> = run(SIZE, || panic!("boom"));
        assert_eq!(r.unwrap_err(), "the evaluator stopped unexpectedly");
        assert!(parked(SIZE).is_empty());
    }

    #[test]
    fn idle_stacks_are_capped() {
        const SIZE: usize = 12 << 20;
        let _serial = serial();
        // MAX_IDLE + 4 evaluations at once, each on its own thread and so its own stack: after
        // they all finish at most MAX_IDLE stacks are parked (of any size: other tests park too).
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(MAX_IDLE + 4));
        let handles: Vec<_> = (0..MAX_IDLE + 4)
            .map(|_| {
                let b = barrier.clone();
                std::thread::spawn(move || {
                    run(SIZE, move || {
                        b.wait();
                        ((), 0)
                    })
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap().unwrap();
        }
        let total = idle().len();
        assert!(total <= MAX_IDLE, "{total} parked");
        assert!(!parked(SIZE).is_empty());
        drop_parked(SIZE);
    }
}
