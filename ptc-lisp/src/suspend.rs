//! Suspension: how a program waits on its host without holding a thread.
//!
//! Every evaluation runs as a coroutine on its own stack (see [`crate::eval_stack`]). When a host
//! function waits for something ([`CallContext::wait`](crate::CallContext::wait)), the coroutine
//! suspends and hands the future to its driver: [`Interpreter::eval_async`] awaits it on whatever
//! executor polls the evaluation and resumes the program with the output, so a thousand programs
//! waiting on upstreams are a thousand parked stacks, not a thousand threads.
//! [`Interpreter::eval_str`] drives the same coroutine and blocks its thread while it waits.
//! A `pmap` branch is a coroutine nested in its program's: its waits are gathered and the
//! program suspends once for all of them. A wait outside any coroutine blocks its thread.
//!
//! [`Interpreter::eval_async`]: crate::Interpreter::eval_async
//! [`Interpreter::eval_str`]: crate::Interpreter::eval_str

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use crate::error::Reason;

thread_local! {
    /// Set while this thread's host wants it for another program (see [`yield_when`]).
    static WANTED: std::cell::OnceCell<Arc<AtomicBool>> = const { std::cell::OnceCell::new() };
}

/// Makes a program computing on this thread yield at its next safe point (every thousand
/// evaluation steps or so) while `wanted` is set, as it does at the end of its time slice: a host
/// running many programs on one thread sets it when another of them becomes ready, so that one
/// does not wait for the slice to end. The first flag given to a thread is the one it keeps.
pub fn yield_when(wanted: Arc<AtomicBool>) {
    WANTED.with(|w| {
        let _ = w.set(wanted);
    });
}

/// Whether this thread's host wants it for another program.
pub(crate) fn wanted() -> bool {
    WANTED.with(|w| w.get().is_some_and(|f| f.load(Ordering::Relaxed)))
}

/// The output of a future a program waits on, type-erased for the trip through the driver.
pub(crate) type Output = Box<dyn Any + Send>;

/// What a suspended program waits on.
pub(crate) type Pending = Pin<Box<dyn Future<Output = Output> + Send>>;

/// What a suspended program is resumed with.
pub(crate) enum Resume {
    /// The first resume, which starts the program.
    Start,
    /// The output of the future it waited on.
    Ready(Output),
    /// The driver stopped waiting: the program was cancelled or ran out of time.
    Stopped(Reason),
}

/// The handle a running program suspends through.
pub(crate) type Suspender = corosensei::Yielder<Resume, Pending>;

/// Suspends the running program until `pending` is ready, and makes it what runs on its thread
/// again when resumed (its driver stepped it out meanwhile: whatever ran there did not free into
/// its meter). A `pmap` branch suspends to its program, which goes on running.
pub(crate) fn suspend(suspender: &Suspender, pending: Pending) -> Resume {
    let running = crate::meter::running();
    let resume = suspender.suspend(pending);
    crate::meter::step_in(running);
    resume
}

/// A wait for nothing: ready the second time it is polled, having asked to be polled again, so
/// the executor runs whatever else is ready first (how a long computation lets others run).
pub(crate) fn yield_now() -> Pending {
    let mut yielded = false;
    Box::pin(std::future::poll_fn(move |cx| {
        if yielded {
            return Poll::Ready(Box::new(()) as Output);
        }
        yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }))
}

/// Waits for `fut` on this thread (`eval_str`'s driver, or a host called outside a coroutine).
pub(crate) fn block_on<F: Future>(fut: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
        // A wake-up that came before the park makes it return at once; a spurious one polls again.
        std::thread::park();
    }
}

/// Waits for `pending` unless `stop` finishes first (its reason resumes the program instead).
pub(crate) async fn wait_or_stop<S: Future<Output = Reason>>(
    mut pending: Pending,
    mut stop: Pin<&mut S>,
) -> Resume {
    std::future::poll_fn(move |cx| {
        if let Poll::Ready(out) = pending.as_mut().poll(cx) {
            return Poll::Ready(Resume::Ready(out));
        }
        if let Poll::Ready(reason) = stop.as_mut().poll(cx) {
            return Poll::Ready(Resume::Stopped(reason));
        }
        Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_on_waits_for_a_wake_from_another_thread() {
        let (tx, rx) = std::sync::mpsc::channel::<u32>();
        let fut = {
            let rx = std::sync::Mutex::new(rx);
            let mut started = false;
            std::future::poll_fn(move |cx| {
                if !started {
                    started = true;
                    let waker = cx.waker().clone();
                    let tx = tx.clone();
                    std::thread::spawn(move || {
                        tx.send(7).unwrap();
                        waker.wake();
                    });
                    return Poll::Pending;
                }
                match rx.lock().unwrap().try_recv() {
                    Ok(v) => Poll::Ready(v),
                    Err(_) => Poll::Pending,
                }
            })
        };
        assert_eq!(block_on(fut), 7);
    }

    #[test]
    fn a_stop_that_finishes_first_resumes_with_its_reason() {
        let never: Pending = Box::pin(std::future::pending());
        let stop = std::pin::pin!(async { Reason::Cancelled });
        match block_on(wait_or_stop(never, stop)) {
            Resume::Stopped(r) => assert_eq!(r, Reason::Cancelled),
            _ => panic!("expected Stopped"),
        }
        let ready: Pending = Box::pin(async { Box::new(5u8) as Output });
        let stop = std::pin::pin!(std::future::pending::<Reason>());
        match block_on(wait_or_stop(ready, stop)) {
            Resume::Ready(out) => assert_eq!(*out.downcast::<u8>().unwrap(), 5),
            _ => panic!("expected Ready"),
        }
    }
}
