//! Suspension: a program whose host waits (`CallContext::wait`) is a pending future under
//! `eval_async`, not a blocked thread. Proven by polling evaluations by hand on one thread: a
//! thousand programs wait at once, each resumes with its own answer, `stop` ends a wait with its
//! reason, and a dropped evaluation drops what it waited on.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use ptc_lisp::{CallContext, Host, HostError, HostValue, Interpreter, Limits, Reason, Value};

/// Gates the host's futures wait on, opened by the test; counts the futures dropped.
#[derive(Default)]
struct Gates {
    open: Mutex<Vec<i64>>,
    wakers: Mutex<Vec<Waker>>,
    made: AtomicUsize,
    dropped: AtomicUsize,
}

impl Gates {
    fn open(&self, key: i64) {
        self.open.lock().unwrap().push(key);
        for w in self.wakers.lock().unwrap().drain(..) {
            w.wake();
        }
    }
}

/// Ready with `key * 10` once gate `key` is open.
struct Gate {
    gates: Arc<Gates>,
    key: i64,
}

impl Future for Gate {
    type Output = i64;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<i64> {
        if self.gates.open.lock().unwrap().contains(&self.key) {
            return Poll::Ready(self.key * 10);
        }
        self.gates.wakers.lock().unwrap().push(cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.gates.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

/// `(t/wait k)` waits for gate `k` and answers `k * 10`.
struct Waiting(Arc<Gates>);

impl Host for Waiting {
    fn namespaces(&self) -> Vec<String> {
        vec!["t".into()]
    }

    fn call(
        &self,
        cx: &mut CallContext<'_>,
        _ns: &str,
        name: &str,
        args: &[Value],
    ) -> Result<HostValue, HostError> {
        match (name, args) {
            ("wait", [Value::Int(key)]) => {
                self.0.made.fetch_add(1, Ordering::SeqCst);
                let gate = Gate {
                    gates: self.0.clone(),
                    key: *key,
                };
                Ok(HostValue::Value(Value::Int(cx.wait(gate)?)))
            }
            ("panic", _) => panic!("a host bug"),
            _ => Err(HostError::new(Reason::RuntimeError, "no such function")),
        }
    }
}

fn interpreter(gates: &Arc<Gates>) -> Interpreter {
    Interpreter::with_host(Limits::default(), Arc::new(Waiting(gates.clone())))
}

fn poll_once<F: Future + ?Sized>(fut: Pin<&mut F>) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(Waker::noop()))
}

/// A stop future that ends with `reason` once the switch is set, and the switch.
fn stop_switch(reason: Reason) -> (Arc<AtomicBool>, impl Future<Output = Reason>) {
    let switch = Arc::new(AtomicBool::new(false));
    let set = switch.clone();
    let stop = std::future::poll_fn(move |_| {
        if set.load(Ordering::SeqCst) {
            Poll::Ready(reason)
        } else {
            Poll::Pending
        }
    });
    (switch, stop)
}

/// The error an evaluation ended with when polled once more.
fn ended_with_error<F>(eval: Pin<&mut F>) -> ptc_lisp::LispError
where
    F: Future<Output = Result<Value, ptc_lisp::LispError>> + ?Sized,
{
    match poll_once(eval) {
        Poll::Ready(Err(e)) => e,
        other => panic!("{:?}", other.map(|r| r.map(|v| v.to_string()))),
    }
}

type Eval<'a> = Pin<Box<dyn Future<Output = Result<Value, ptc_lisp::LispError>> + 'a>>;

#[test]
fn a_thousand_programs_wait_on_one_thread_and_each_resumes_with_its_answer() {
    let gates = Arc::new(Gates::default());
    let mut interps: Vec<Interpreter> = (0..1000).map(|_| interpreter(&gates)).collect();
    let programs: Vec<String> = (0..1000)
        .map(|i| format!("(+ 1 (t/wait {i}) (t/wait {}))", i + 1000))
        .collect();
    let mut evals: Vec<Eval<'_>> = interps
        .iter_mut()
        .zip(&programs)
        .map(|(interp, src)| Box::pin(interp.eval_async(src, std::future::pending())) as Eval<'_>)
        .collect();
    for e in &mut evals {
        assert!(poll_once(e.as_mut()).is_pending(), "each waits on its gate");
    }
    for i in 0..1000 {
        gates.open(i);
    }
    for e in &mut evals {
        assert!(
            poll_once(e.as_mut()).is_pending(),
            "each resumed and now waits on its second gate"
        );
    }
    for i in 1000..2000 {
        gates.open(i);
    }
    for (i, e) in evals.iter_mut().enumerate() {
        let i = i as i64;
        match poll_once(e.as_mut()) {
            Poll::Ready(Ok(v)) => assert_eq!(v, Value::Int(1 + i * 10 + (i + 1000) * 10)),
            other => panic!("program {i}: {:?}", other.map(|r| r.map(|v| v.to_string()))),
        }
    }
}

#[test]
fn stop_ends_a_wait_with_its_reason_and_drops_what_was_awaited() {
    for reason in [Reason::Cancelled, Reason::Timeout] {
        let gates = Arc::new(Gates::default());
        let mut interp = Interpreter::with_host(
            Limits {
                timeout: Some(Duration::from_millis(1500)),
                ..Limits::default()
            },
            Arc::new(Waiting(gates.clone())),
        );
        let (stopped, stop) = stop_switch(reason);
        // The program goes on after the first wait ends: the later wait ends at once.
        let mut eval = Box::pin(interp.eval_async("(t/wait 1)", stop));
        assert!(poll_once(eval.as_mut()).is_pending());
        stopped.store(true, Ordering::SeqCst);
        let e = ended_with_error(eval.as_mut());
        assert_eq!(e.reason(), reason);
        let expected = match reason {
            Reason::Timeout => "program exceeded its 1500 ms deadline",
            _ => "the evaluation was cancelled by the host",
        };
        assert_eq!(e.message(), expected);
        assert_eq!(
            gates.dropped.load(Ordering::SeqCst),
            1,
            "the gate was dropped"
        );
    }
}

#[test]
fn a_dropped_evaluation_drops_its_wait_and_the_interpreter_runs_on() {
    let gates = Arc::new(Gates::default());
    let mut interp = interpreter(&gates);
    interp.eval_str("(def kept 1)").unwrap();
    {
        let mut eval = Box::pin(interp.eval_async("(t/wait 5)", std::future::pending()));
        assert!(poll_once(eval.as_mut()).is_pending());
    }
    assert_eq!(gates.dropped.load(Ordering::SeqCst), 1);
    // The suspended program was unwound with the definitions it held; the interpreter works.
    assert_eq!(interp.eval_str("(+ 1 2)").unwrap(), Value::Int(3));
}

#[test]
fn eval_str_blocks_its_thread_until_the_wait_is_over() {
    let gates = Arc::new(Gates::default());
    let opener = {
        let gates = gates.clone();
        std::thread::spawn(move || {
            // Opens the gate once the program waits on it (its waker is registered).
            while gates.wakers.lock().unwrap().is_empty() {
                std::thread::yield_now();
            }
            gates.open(4);
        })
    };
    assert_eq!(
        interpreter(&gates).eval_str("(t/wait 4)").unwrap(),
        Value::Int(40)
    );
    opener.join().unwrap();
}

/// Waits made so far and not yet dropped.
fn in_flight(gates: &Gates) -> usize {
    gates.made.load(Ordering::SeqCst) - gates.dropped.load(Ordering::SeqCst)
}

#[test]
fn pmap_branches_wait_together_and_resume_as_their_waits_end() {
    let gates = Arc::new(Gates::default());
    let mut interp = interpreter(&gates);
    // 20 branches, at most `max_workers` (8) waiting at once, all on this thread.
    let mut eval = Box::pin(interp.eval_async(
        "(pmap (fn [k] (t/wait k)) (range 20))",
        std::future::pending(),
    ));
    assert!(poll_once(eval.as_mut()).is_pending());
    assert_eq!(in_flight(&gates), 8, "max_workers branches wait at once");
    // Opened last to first: each branch resumes when its own gate opens, and takes the next key.
    for k in (0..20).rev() {
        gates.open(k);
        if let Poll::Ready(r) = poll_once(eval.as_mut()) {
            assert_eq!(k, 0, "it finished before the last gate opened");
            let want: Vec<String> = (0..20).map(|k| (k * 10).to_string()).collect();
            assert_eq!(r.unwrap().to_string(), format!("[{}]", want.join(" ")));
            assert_eq!(in_flight(&gates), 0);
            return;
        }
        assert!(in_flight(&gates) <= 8);
    }
    panic!("the pmap never finished");
}

#[test]
fn a_stop_reaches_every_waiting_branch_and_drops_their_waits() {
    let gates = Arc::new(Gates::default());
    gates.open(3);
    let mut interp = interpreter(&gates);
    let (stopped, stop) = stop_switch(Reason::Cancelled);
    let mut eval = Box::pin(interp.eval_async("(pmap (fn [k] (t/wait k)) (range 6))", stop));
    assert!(poll_once(eval.as_mut()).is_pending());
    assert_eq!(in_flight(&gates), 5, "the open gate answered; five wait");
    stopped.store(true, Ordering::SeqCst);
    let e = ended_with_error(eval.as_mut());
    assert_eq!(e.reason(), Reason::Cancelled);
    assert_eq!(
        e.message(),
        "parallel branch 0 failed: the evaluation was cancelled by the host"
    );
    assert_eq!(in_flight(&gates), 0, "every wait was dropped");
    drop(eval);
    assert_eq!(interp.eval_str("(+ 1 2)").unwrap(), Value::Int(3));
}

#[test]
fn parallel_regions_nested_past_two_run_their_branches_one_at_a_time() {
    let gates = Arc::new(Gates::default());
    let mut interp = interpreter(&gates);
    let mut eval = Box::pin(interp.eval_async(
        "(pmap (fn [a] (pmap (fn [b] (pmap (fn [c] (t/wait (+ (* 100 a) (* 10 b) c))) [1 2])) \
         [1 2])) [1 2])",
        std::future::pending(),
    ));
    assert!(poll_once(eval.as_mut()).is_pending());
    assert_eq!(
        in_flight(&gates),
        4,
        "2 x 2 branches, the third level's one at a time"
    );
    for k in [111, 112, 121, 122, 211, 212, 221, 222] {
        gates.open(k);
    }
    match poll_once(eval.as_mut()) {
        Poll::Ready(Ok(v)) => assert_eq!(
            v.to_string(),
            "[[[1110 1120] [1210 1220]] [[2110 2120] [2210 2220]]]"
        ),
        other => panic!("{:?}", other.map(|r| r.map(|v| v.to_string()))),
    }
}

#[test]
fn the_steps_of_parallel_branches_count_together() {
    // Each branch waits first, so each takes one item; each starts from the program's count, and
    // at the join the program is charged them all. The budget that one branch and the rest of
    // the program need is exhausted by four branches, after the join.
    let gates = Arc::new(Gates::default());
    for k in 0..4 {
        gates.open(k);
    }
    let run = |max: u64, branches: usize| {
        let limits = Limits {
            max_steps: Some(max),
            ..Limits::default()
        };
        Interpreter::with_host(limits, Arc::new(Waiting(gates.clone()))).eval_str(&format!(
            "(do (pmap (fn [k] (t/wait k) (loop [i 0] (if (< i 3000) (recur (inc i)) i))) \
             (range {branches})) (loop [i 0] (if (< i 3000) (recur (inc i)) i)))"
        ))
    };
    let (mut one, mut hi) = (0u64, 1_000_000u64);
    assert!(run(hi, 1).is_ok());
    while one < hi {
        let mid = (one + hi) / 2;
        if run(mid, 1).is_ok() {
            hi = mid;
        } else {
            one = mid + 1;
        }
    }
    let e = run(one, 4).unwrap_err();
    assert_eq!(e.reason(), Reason::Timeout);
    assert_eq!(
        e.message(),
        format!("step budget of {one} evaluation steps exhausted")
    );
    assert_eq!(run(4 * one, 4).unwrap(), Value::Int(3000));
}

#[test]
fn a_dropped_evaluation_unwinds_its_waiting_branches() {
    let gates = Arc::new(Gates::default());
    let mut interp = interpreter(&gates);
    {
        let mut eval = Box::pin(interp.eval_async(
            "(pcalls #(t/wait 1) #(t/wait 2) #(pmap (fn [k] (t/wait k)) [3 4]))",
            std::future::pending(),
        ));
        assert!(poll_once(eval.as_mut()).is_pending());
        assert_eq!(in_flight(&gates), 4, "nested branches wait too");
    }
    assert_eq!(in_flight(&gates), 0);
    assert_eq!(interp.eval_str("(* 6 7)").unwrap(), Value::Int(42));
}

#[test]
fn a_host_that_panics_ends_the_program_with_an_internal_error() {
    let gates = Arc::new(Gates::default());
    let mut interp = interpreter(&gates);
    let e = interp.eval_str("(t/panic)").unwrap_err();
    assert_eq!(e.reason(), Reason::InternalError);
    assert_eq!(e.message(), "the evaluator stopped unexpectedly");
    assert_eq!(interp.eval_str("(* 6 7)").unwrap(), Value::Int(42));
}

/// Polls an evaluation until it ends: its value, and how many times it yielded first.
fn to_the_end<F>(mut eval: Pin<&mut F>) -> (Value, usize)
where
    F: Future<Output = Result<Value, ptc_lisp::LispError>> + ?Sized,
{
    let mut pending = 0;
    loop {
        match poll_once(eval.as_mut()) {
            Poll::Pending => pending += 1,
            Poll::Ready(r) => return (r.unwrap(), pending),
        }
    }
}

#[test]
fn a_long_computation_lets_others_run_every_time_slice_and_a_short_one_does_not_stop() {
    let gates = Arc::new(Gates::default());
    let mut interp = interpreter(&gates);
    let mut short = Box::pin(interp.eval_async("(+ 1 2)", std::future::pending()));
    assert!(matches!(
        poll_once(short.as_mut()),
        Poll::Ready(Ok(Value::Int(3)))
    ));
    drop(short);
    // Seconds of work: it gives its thread back after each slice, then goes on where it was.
    let src = "(reduce + (for [j (range 50)] (loop [i 0] (if (< i 20000) (recur (inc i)) i))))";
    let mut long = Box::pin(interp.eval_async(src, std::future::pending()));
    let (answer, pending) = to_the_end(long.as_mut());
    assert_eq!(answer, Value::Int(1_000_000));
    assert!(pending >= 2, "it yielded {pending} times");
}

/// While its host wants the thread for another program (`yield_when`'s flag set), a computing
/// program yields at each safe point, a thousand steps or so, without waiting for its slice to
/// end; once the flag is down it computes its slice again. Counted in yields, not time: the
/// loop's million steps or more give a yield per 1,024 of them with the flag up.
#[test]
fn a_program_yields_at_its_next_safe_point_while_its_host_wants_the_thread() {
    let gates = Arc::new(Gates::default());
    let mut interp = interpreter(&gates);
    let wanted = Arc::new(AtomicBool::new(true));
    ptc_lisp::yield_when(wanted.clone());
    let src = "(loop [i 0] (if (< i 999999) (recur (inc i)) i))";
    let mut long = Box::pin(interp.eval_async(src, std::future::pending()));
    let (answer, pending) = to_the_end(long.as_mut());
    assert_eq!(answer, Value::Int(999_999));
    assert!(pending >= 999_999 / 1024, "it yielded {pending} times");
    drop(long);
    // Down: the same loop (tens of milliseconds, a few hundred unoptimised) yields once a
    // slice, far fewer times.
    wanted.store(false, Ordering::Relaxed);
    let mut long = Box::pin(interp.eval_async(src, std::future::pending()));
    let (_, slices) = to_the_end(long.as_mut());
    assert!(slices < pending / 2, "{slices} yields against {pending}");
}
