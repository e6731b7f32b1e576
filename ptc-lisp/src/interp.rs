//! The interpreter: reads, analyzes and evaluates programs as coroutines on an evaluation stack
//! of their own (large, guarded, reused between evaluations: see [`eval_stack`]), under the
//! configured limits. A program suspends while its host waits (see [`crate::suspend`]).
//! Definitions persist across evaluations; a host keeps them across interpreters with
//! [`Interpreter::session_state`] and [`Interpreter::restore_session`] (see [`crate::session`]).

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use corosensei::{Coroutine, CoroutineResult};

use crate::analyze::Analyzer;
use crate::ast::Node;
use crate::error::{Ctl, LispError, Reason};
use crate::eval::{Ctx, Shared};
use crate::eval_stack;
use crate::globals::{Globals, HISTORY};
use crate::host::Host;
use crate::limits::Limits;
use crate::meter::{MemoryPool, Meter};
use crate::reader::Reader;
use crate::session::{Kept, SessionState};
use crate::suspend::{Resume, Suspender, block_on, wait_or_stop};
use crate::value::Value;

/// A PTC-Lisp interpreter.
pub struct Interpreter {
    limits: Limits,
    host: Option<Arc<dyn Host>>,
    globals: Globals,
    data: Value,
    output: String,
    last_memory: u64,
    cancel: Arc<AtomicBool>,
    pool: Option<Arc<dyn MemoryPool>>,
    sessions: bool,
}

/// What an evaluation is for.
#[derive(Clone)]
enum Mode {
    /// A program: its result joins the REPL history, its output is kept.
    Program,
    /// Restoring the kept definition of this global: the source must be one form defining it,
    /// calling no host function; nothing else of the run is kept.
    Restore(Arc<str>),
}

impl Interpreter {
    /// An interpreter without a host (no `tool/...` functions).
    pub fn new(limits: Limits) -> Self {
        let mut i = Interpreter {
            limits,
            host: None,
            globals: Globals::default(),
            data: Value::Nil,
            output: String::new(),
            last_memory: 0,
            cancel: Arc::new(AtomicBool::new(false)),
            pool: None,
            sessions: false,
        };
        for name in HISTORY {
            i.define(name, Value::Nil);
        }
        i
    }

    /// An interpreter whose namespaced functions (e.g. `tool/call`) are served by `host`.
    pub fn with_host(limits: Limits, host: Arc<dyn Host>) -> Self {
        let mut i = Interpreter::new(limits);
        i.host = Some(host);
        i
    }

    /// Shares a host-wide memory budget: each evaluation reserves from `pool` what it is
    /// charged, a chunk at a time, and gives it all back when it ends (see [`MemoryPool`]).
    pub fn set_memory_pool(&mut self, pool: Arc<dyn MemoryPool>) {
        self.pool = Some(pool);
    }

    /// Sets the request context read by `data/<key>` (a map).
    pub fn set_context(&mut self, data: Value) {
        self.data = data;
    }

    /// Defines a global, as `(def name value)` would (e.g. to hand a decoded tool result to a program).
    /// It is part of [`Interpreter::session_state`] like a program's own definition.
    pub fn define(&mut self, name: &str, value: Value) {
        let idx = self.globals.table.declare(&Arc::from(name));
        if self.globals.values.len() <= idx {
            self.globals.values.resize(idx + 1, None);
        }
        self.globals.values[idx] = Some(value);
        self.globals.table.mark(idx, None);
    }

    /// Turns on the `session/vars` and `session/forget` builtins, for a host that keeps
    /// definitions between evaluations ([`Interpreter::session_state`],
    /// [`Interpreter::restore_session`]). Off by default: they then fail, saying that
    /// definitions last one evaluation.
    pub fn enable_session(&mut self, on: bool) {
        self.sessions = on;
    }

    /// The program's definitions after the evaluations so far, in the order they were last
    /// defined: data values as they are, functions as the source text of the top-level form
    /// that defined them, and the ones that cannot be kept with why (see [`crate::session`]).
    /// Neither the REPL history (`*1` ...) nor `letfn`'s hidden globals nor names declared
    /// without a value are included.
    pub fn session_state(&self) -> SessionState {
        crate::session::snapshot(&self.globals.table, &self.globals.values).into_state()
    }

    /// Defines the kept definitions of `state` (from [`Interpreter::session_state`] or
    /// [`SessionState::decode`]) in this interpreter, in their order: data values as
    /// [`Interpreter::define`] does, functions by evaluating their source forms again (under
    /// this interpreter's limits; their output is dropped). Call it on a fresh interpreter,
    /// before the program. Every kept name is declared first, so functions that call each
    /// other restore in any order. An error names the definition that failed; what was restored
    /// before it stays defined.
    pub fn restore_session(&mut self, state: &SessionState) -> Result<(), LispError> {
        for var in state.vars() {
            if !matches!(var.kept(), Kept::NotKept(_)) {
                self.globals.table.declare(&Arc::from(var.name()));
            }
        }
        for var in state.vars() {
            match var.kept() {
                Kept::Data(v) => self.define(var.name(), v.clone()),
                Kept::Source(src) => {
                    let mode = Mode::Restore(Arc::from(var.name()));
                    block_on(self.run_program(src, std::future::pending(), mode)).map_err(|e| {
                        let mut msg = format!(
                            "could not restore the session's definition of {}: {}",
                            var.name(),
                            e.message()
                        );
                        if let Some(p) = e.pos() {
                            msg.push_str(&format!(" (at {p} of its source)"));
                        }
                        LispError::new(e.reason(), msg)
                    })?;
                }
                Kept::NotKept(_) => {}
            }
        }
        Ok(())
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Output captured from `println` and friends so far.
    pub fn output(&self) -> &str {
        &self.output
    }

    /// Takes the captured output, leaving it empty.
    pub fn take_output(&mut self) -> String {
        std::mem::take(&mut self.output)
    }

    /// A flag another thread may set to stop the running evaluation: it then fails with reason
    /// `cancelled` at its next check (every few thousand steps). Each `eval_str` clears it first.
    pub fn cancel_handle(&self) -> Arc<AtomicBool> {
        self.cancel.clone()
    }

    /// The most the last evaluation held at once, as charged to its memory budget: the smallest
    /// budget it runs within.
    pub fn last_memory_bytes(&self) -> u64 {
        self.last_memory
    }

    /// Evaluates a program (one or more top-level forms; the last value is the result). A host
    /// wait blocks this thread; [`Interpreter::eval_async`] suspends instead.
    pub fn eval_str(&mut self, src: &str) -> Result<Value, LispError> {
        block_on(self.eval_async(src, std::future::pending()))
    }

    /// Evaluates a program as [`Interpreter::eval_str`] does, suspending while its host waits
    /// ([`CallContext::wait`](crate::CallContext::wait)): the future is ready to poll again when
    /// the host's future is, and holds no thread meanwhile. The program computes inside `poll`,
    /// so poll it off an async runtime's I/O threads. When `stop` finishes during a wait, the
    /// wait ends with its reason (`cancelled`, `timeout`) and the program with it; a program that
    /// computes notices its deadline and [`Interpreter::cancel_handle`] itself.
    ///
    /// The future is not `Send` (the program's stack is tied to its thread). Dropping it before
    /// it finishes unwinds the program and frees what it held, definitions included.
    pub async fn eval_async(
        &mut self,
        src: &str,
        stop: impl Future<Output = Reason>,
    ) -> Result<Value, LispError> {
        self.run_program(src, stop, Mode::Program).await
    }

    async fn run_program(
        &mut self,
        src: &str,
        stop: impl Future<Output = Reason>,
        mode: Mode,
    ) -> Result<Value, LispError> {
        if src.len() > self.limits.max_program_bytes {
            return Err(LispError::new(
                Reason::ParseError,
                format!(
                    "program is {} bytes, more than the limit of {}",
                    src.len(),
                    self.limits.max_program_bytes
                ),
            ));
        }
        self.cancel
            .store(false, std::sync::atomic::Ordering::Relaxed);
        let size = self.limits.thread_stack();
        let stack = eval_stack::take(size)
            .map_err(|message| LispError::new(Reason::InternalError, message))?;
        let mut job = Job {
            src: src.to_string(),
            limits: self.limits.clone(),
            host: self.host.clone(),
            data: self.data.clone(),
            cancel: self.cancel.clone(),
            pool: self.pool.clone(),
            globals: std::mem::take(&mut self.globals),
            sessions: self.sessions,
            mode: mode.clone(),
        };
        let mut program = Coroutine::with_stack(stack, move |suspender: &Suspender, _: Resume| {
            let (ran, used) = run(&mut job, suspender);
            (ran, std::mem::take(&mut job.globals), used)
        });
        let mut stop = std::pin::pin!(stop);
        let mut stopped = None;
        let mut input = Resume::Start;
        let finished = loop {
            // What ran on this thread before steps out while the program runs, and back in when
            // it suspends or ends.
            let outer = crate::meter::step_out();
            let resumed = catch_unwind(AssertUnwindSafe(|| program.resume(input)));
            crate::meter::step_in(outer);
            match resumed {
                Ok(CoroutineResult::Yield(pending)) => {
                    input = match stopped {
                        // `stop` finished already: every later wait ends at once.
                        Some(reason) => Resume::Stopped(reason),
                        None => wait_or_stop(pending, stop.as_mut()).await,
                    };
                    if let Resume::Stopped(reason) = &input {
                        stopped = Some(*reason);
                    }
                }
                Ok(CoroutineResult::Return(done)) => break Some(done),
                Err(_) => break None,
            }
        };
        let Some((ran, globals, used)) = finished else {
            return Err(LispError::new(
                Reason::InternalError,
                "the evaluator stopped unexpectedly",
            ));
        };
        eval_stack::keep(size, program.into_stack(), used);
        self.globals = globals;
        self.last_memory = ran.memory;
        let result = ran.result;
        if let Mode::Restore(_) = mode {
            return result;
        }
        self.output.push_str(&ran.printed);
        if let Ok(v) = &result {
            // REPL history, as in Clojure: *1 is the last result, *2 the one before, *3 before that.
            let prev1 = self.global("*1");
            let prev2 = self.global("*2");
            self.define("*3", prev2);
            self.define("*2", prev1);
            self.define("*1", v.clone());
        }
        result
    }

    fn global(&self, name: &str) -> Value {
        self.globals
            .table
            .names
            .get(name)
            .and_then(|i| self.globals.values.get(*i))
            .and_then(|v| v.clone())
            .unwrap_or(Value::Nil)
    }
}

/// What one evaluation takes from its interpreter into its coroutine (which must own what it
/// uses: it may outlive any borrow while it is suspended); the globals come back at the end.
struct Job {
    src: String,
    limits: Limits,
    host: Option<Arc<dyn Host>>,
    data: Value,
    cancel: Arc<AtomicBool>,
    pool: Option<Arc<dyn MemoryPool>>,
    globals: Globals,
    sessions: bool,
    mode: Mode,
}

/// What one evaluation gives back besides the globals.
struct Ran {
    result: Result<Value, LispError>,
    printed: String,
    memory: u64,
}

/// Runs a program in its coroutine; also returns the native stack its calls used.
fn run(job: &mut Job, suspender: &Suspender) -> (Ran, usize) {
    let Job {
        src,
        limits,
        host,
        data,
        cancel,
        pool,
        globals,
        sessions,
        mode,
    } = job;
    let limits = &*limits;
    let host = host.as_deref();
    let host_namespaces = host.map(|h| h.namespaces()).unwrap_or_default();
    let upstreams = host.map(|h| h.upstreams()).unwrap_or_default();
    let shared = Shared {
        limits,
        deadline: limits.timeout.map(|t| Instant::now() + t),
        meter: Meter::new(limits.max_memory_bytes, pool.as_deref()),
        cancel,
        host,
        data,
        sessions: *sessions,
    };
    let _running = shared.meter.enter();
    let forms = match Reader::new(src, limits.max_reader_depth).read_all_with_text() {
        Ok(forms) => forms,
        Err(e) => {
            let ran = Ran {
                result: Err(e),
                printed: String::new(),
                memory: 0,
            };
            return (ran, 0);
        }
    };
    let Globals { table, values } = std::mem::take(globals);
    let mut ctx = Ctx::new(&shared, values, table, suspender);
    let result = (|| {
        if let Mode::Restore(name) = &*mode
            && forms.len() != 1
        {
            return Err(not_a_definition(name));
        }
        let mut last = Value::Nil;
        for (form, text) in &forms {
            let (mut node, n_slots, record) = {
                let mut an = Analyzer::new(
                    ctx.table_mut(),
                    &host_namespaces,
                    &upstreams,
                    limits.max_reader_depth * 4,
                );
                let (node, n_slots) = an.analyze_top(form)?;
                (node, n_slots, an.take_record())
            };
            // A top-level definition notes its form, so a session can keep it as source.
            match (&mut node, &*mode) {
                (Node::Def { name, origin, .. }, mode) => {
                    let source = record.into_source(Arc::from(*text));
                    if let Mode::Restore(want) = mode
                        && (name != want || source.blocker.is_some())
                    {
                        return Err(not_a_definition(want));
                    }
                    *origin = Some(Arc::new(source));
                }
                (_, Mode::Restore(want)) => return Err(not_a_definition(want)),
                (_, Mode::Program) => {}
            }
            match ctx.eval_top(&node, n_slots) {
                Ok(v) => last = v,
                Err(Ctl::Return(v)) => return Ok(*v),
                Err(Ctl::Err(e)) => return Err(*e),
                Err(Ctl::Recur) => {
                    return Err(LispError::new(
                        Reason::InvalidForm,
                        "recur outside of loop or fn",
                    ));
                }
            }
        }
        Ok(last)
    })();
    let (back, printed, stack_used) = ctx.finish();
    *globals = back;
    let ran = Ran {
        result,
        printed,
        memory: shared.meter.peak(),
    };
    (ran, stack_used)
}

/// The error of a session's source that is not what a kept definition must be.
fn not_a_definition(name: &str) -> LispError {
    LispError::new(
        Reason::InvalidForm,
        format!(
            "the session's source for {name} is not one top-level form defining {name} \
             without host calls"
        ),
    )
}
