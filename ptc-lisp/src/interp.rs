//! The interpreter: reads, analyzes and evaluates programs on an evaluation stack of their own
//! (large, guarded, reused between evaluations: see [`eval_stack`]), under the configured limits.
//! Definitions persist across `eval_str` calls.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Instant;

use crate::analyze::{Analyzer, Globals};
use crate::error::{Ctl, LispError, Reason};
use crate::eval::{Ctx, Shared};
use crate::eval_stack;
use crate::host::Host;
use crate::limits::Limits;
use crate::reader::Reader;
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
        };
        for name in ["*1", "*2", "*3"] {
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

    /// Sets the request context read by `data/<key>` (a map).
    pub fn set_context(&mut self, data: Value) {
        self.data = data;
    }

    /// Defines a global, as `(def name value)` would (e.g. to hand a decoded tool result to a program).
    pub fn define(&mut self, name: &str, value: Value) {
        let idx = self.globals.declare(&Arc::from(name));
        if self.globals.values.len() <= idx {
            self.globals.values.resize(idx + 1, None);
        }
        self.globals.values[idx] = Some(value);
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

    /// Bytes charged to the memory budget by the last evaluation.
    pub fn last_memory_bytes(&self) -> u64 {
        self.last_memory
    }

    /// Evaluates a program (one or more top-level forms; the last value is the result).
    pub fn eval_str(&mut self, src: &str) -> Result<Value, LispError> {
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
        let env = RunEnv {
            limits: &self.limits,
            host: self.host.as_deref(),
            data: &self.data,
            cancel: &self.cancel,
        };
        let globals = &mut self.globals;
        let result = match eval_stack::run(self.limits.thread_stack(), || run(src, &env, globals)) {
            Ok(ran) => {
                self.output.push_str(&ran.printed);
                self.last_memory = ran.memory;
                ran.result
            }
            Err(message) => Err(LispError::new(Reason::InternalError, message)),
        };
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
            .names
            .get(name)
            .and_then(|i| self.globals.values.get(*i))
            .and_then(|v| v.clone())
            .unwrap_or(Value::Nil)
    }
}

/// What one evaluation reads from its interpreter.
struct RunEnv<'a> {
    limits: &'a Limits,
    host: Option<&'a dyn Host>,
    data: &'a Value,
    cancel: &'a AtomicBool,
}

/// What one evaluation gives back besides the globals.
struct Ran {
    result: Result<Value, LispError>,
    printed: String,
    memory: u64,
}

/// Runs a program on the current thread; also returns the native stack its calls used.
fn run(src: &str, env: &RunEnv<'_>, globals: &mut Globals) -> (Ran, usize) {
    let limits = env.limits;
    let host = env.host;
    let host_namespaces = host.map(|h| h.namespaces()).unwrap_or_default();
    let upstreams = host.map(|h| h.upstreams()).unwrap_or_default();
    let shared = Shared {
        limits,
        deadline: limits.timeout.map(|t| Instant::now() + t),
        mem_used: AtomicU64::new(0),
        cancel: env.cancel,
        host,
        data: env.data,
    };
    let forms = match Reader::new(src, limits.max_reader_depth).read_all() {
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
    let mut ctx = Ctx::new(&shared, std::mem::take(&mut globals.values));
    let result = (|| {
        let mut last = Value::Nil;
        for form in &forms {
            let (node, n_slots) = {
                let mut an = Analyzer::new(
                    globals,
                    &host_namespaces,
                    &upstreams,
                    limits.max_reader_depth * 4,
                );
                an.analyze_top(form)?
            };
            match ctx.eval_top(&node, n_slots, globals.names.len()) {
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
    let (values, printed, stack_used) = ctx.finish();
    globals.values = values;
    let ran = Ran {
        result,
        printed,
        memory: shared.mem_used.load(std::sync::atomic::Ordering::Relaxed),
    };
    (ran, stack_used)
}
