//! Evaluation threads, kept for reuse.
//!
//! Every evaluation runs on a thread with a large reserved stack, so a deep program can never
//! overflow the caller's. Starting such a thread costs tens of microseconds, more than a small
//! program takes, so finished threads wait here for the next evaluation. A thread that ran a
//! deep evaluation keeps the stack pages it touched resident; it is retired instead of kept,
//! which bounds what the idle threads hold to [`MAX_IDLE`] × [`RETIRE_AFTER_STACK`].

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, Sender, channel, sync_channel};

/// Idle threads kept at most; more finishing at once exit.
pub(crate) const MAX_IDLE: usize = 16;

/// A thread whose evaluation used more native stack than this is retired, not kept.
pub(crate) const RETIRE_AFTER_STACK: usize = 1 << 20;

type Job = Box<dyn FnOnce(&mut Option<Parked>) + Send>;

/// An idle thread: its stack size and where to send its next job.
struct Parked {
    stack: usize,
    next: Sender<Job>,
}

static IDLE: Mutex<Vec<Parked>> = Mutex::new(Vec::new());

fn idle() -> std::sync::MutexGuard<'static, Vec<Parked>> {
    // The list stays consistent even if a holder panicked: entries are pushed and popped whole.
    IDLE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs `work` on an evaluation thread with `stack` bytes of stack and waits for its result.
/// `work` returns its result and the native stack it used (which decides whether the thread is
/// kept). A panic in `work` is returned as `Err`, and that thread is not reused.
pub(crate) fn run<T: Send + 'static>(
    stack: usize,
    work: impl FnOnce() -> (T, usize) + Send + 'static,
) -> Result<T, String> {
    let (done, result) = sync_channel(1);
    let mut job: Job = Box::new(move |offer: &mut Option<Parked>| {
        let outcome = catch_unwind(AssertUnwindSafe(work));
        if let Ok((_, used)) = &outcome
            && *used <= RETIRE_AFTER_STACK
            && let Some(parked) = offer.take()
        {
            // Parked before the result is sent, so a caller that evaluates again at once finds
            // this thread idle instead of starting another.
            let mut list = idle();
            if list.len() < MAX_IDLE {
                list.push(parked);
            }
        }
        let _ = done.send(outcome.map(|(value, _)| value).map_err(|_| ()));
    });
    loop {
        let parked = {
            let mut list = idle();
            list.iter()
                .rposition(|p| p.stack == stack)
                .map(|i| list.swap_remove(i))
        };
        let Some(parked) = parked else {
            spawn(stack, job)?;
            break;
        };
        match parked.next.send(job) {
            Ok(()) => break,
            // The thread is gone (it cannot be, short of an abort); try the next one.
            Err(returned) => job = returned.0,
        }
    }
    match result.recv() {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(())) | Err(_) => Err("the evaluator stopped unexpectedly".into()),
    }
}

fn spawn(stack: usize, first: Job) -> Result<(), String> {
    std::thread::Builder::new()
        .name("ptc-lisp-eval".into())
        .stack_size(stack)
        .spawn(move || serve(stack, first))
        .map(drop)
        .map_err(|e| format!("could not start the evaluator: {e}"))
}

/// A thread's life: run a job, then wait for the next one while it is parked; end when it was
/// not parked (retired, or the idle list was full) or its entry was dropped.
fn serve(stack: usize, first: Job) {
    let mut job = first;
    loop {
        let (next, incoming): (Sender<Job>, Receiver<Job>) = channel();
        let mut offer = Some(Parked { stack, next });
        job(&mut offer);
        if offer.is_some() {
            return;
        }
        match incoming.recv() {
            Ok(j) => job = j,
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread::ThreadId;

    const STACK: usize = 9 << 20;

    /// These tests share the process's idle list; each holds this while it runs, and leaves
    /// no thread of its own stack size parked.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn drop_parked(stack: usize) {
        idle().retain(|p| p.stack != stack);
    }

    fn thread_of(used: usize) -> ThreadId {
        run(STACK, move || (std::thread::current().id(), used)).unwrap()
    }

    fn parked_count() -> usize {
        idle().iter().filter(|p| p.stack == STACK).count()
    }

    #[test]
    fn threads_are_reused_unless_their_evaluation_went_deep() {
        let _serial = serial();
        let first = thread_of(0);
        assert_eq!(
            thread_of(0),
            first,
            "a shallow evaluation's thread is reused"
        );
        assert_eq!(
            thread_of(RETIRE_AFTER_STACK),
            first,
            "at the threshold the thread is kept"
        );
        assert_eq!(parked_count(), 1);
        assert_eq!(thread_of(RETIRE_AFTER_STACK + 1), first);
        assert_eq!(
            parked_count(),
            0,
            "one past the threshold, the thread is retired"
        );
        assert_ne!(
            thread_of(0),
            first,
            "so the next evaluation gets a new thread"
        );
        drop_parked(STACK);
    }

    #[test]
    fn a_panic_is_an_error_and_its_thread_is_not_kept() {
        const OWN: usize = 10 << 20;
        let _serial = serial();
        let before = idle().iter().filter(|p| p.stack == OWN).count();
        let r: Result<(), String> = run(OWN, || panic!("boom"));
        assert_eq!(r.unwrap_err(), "the evaluator stopped unexpectedly");
        assert_eq!(idle().iter().filter(|p| p.stack == OWN).count(), before);
    }

    #[test]
    fn idle_threads_are_capped() {
        const OWN: usize = 12 << 20;
        let _serial = serial();
        // MAX_IDLE + 4 evaluations at once: each needs its own thread, and after they all
        // finish at most MAX_IDLE threads are parked (of any stack size: other tests park too).
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(MAX_IDLE + 4));
        let handles: Vec<_> = (0..MAX_IDLE + 4)
            .map(|_| {
                let b = barrier.clone();
                std::thread::spawn(move || {
                    run(OWN, move || {
                        b.wait();
                        ((), 0)
                    })
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap().unwrap();
        }
        assert!(idle().len() <= MAX_IDLE, "{} parked", idle().len());
        assert!(idle().iter().any(|p| p.stack == OWN));
        drop_parked(OWN);
    }
}
