//! The REPL's engine (the line editor lives in the binaries): one interpreter kept across lines
//! so definitions and `*1`/`*2`/`*3` persist, with fresh upstream budgets per line.

use std::sync::{Arc, Mutex};

use ptc_lisp::{CallContext, Discovery, Host, HostError, HostValue, Interpreter, Value};

use crate::call::upstreams::Upstreams;
use crate::program::host::ProgramHost;
use crate::server::options::EvalLimits;

/// Delegates to the current line's [`ProgramHost`] (the interpreter keeps one host for life).
/// Every method of [`Host`] is forwarded, the defaulted ones too: a default left in place would
/// silently answer for the upstreams (as `upstreams()` once did, hiding them from `all-ns`).
struct LineHost {
    current: Mutex<Arc<ProgramHost>>,
}

impl LineHost {
    fn get(&self) -> Arc<ProgramHost> {
        self.current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Host for LineHost {
    fn namespaces(&self) -> Vec<String> {
        self.get().namespaces()
    }

    fn upstreams(&self) -> Vec<String> {
        self.get().upstreams()
    }

    fn call(
        &self,
        cx: &mut CallContext<'_>,
        ns: &str,
        name: &str,
        args: &[Value],
    ) -> Result<HostValue, HostError> {
        self.get().call(cx, ns, name, args)
    }

    fn discover(
        &self,
        cx: &mut CallContext<'_>,
        op: Discovery,
        args: &[Value],
    ) -> Result<Option<HostValue>, HostError> {
        self.get().discover(cx, op, args)
    }
}

/// A REPL session over `upstreams`.
pub struct Repl {
    upstreams: Arc<Upstreams>,
    runtime: tokio::runtime::Handle,
    limits: EvalLimits,
    host: Arc<LineHost>,
    interp: Interpreter,
}

/// What one entry printed and produced.
pub struct ReplOutput {
    /// Printed output (redacted).
    pub prints: String,
    /// The value in Clojure syntax, or `reason: message (line:col)`.
    pub result: Result<String, String>,
}

impl Repl {
    /// A session; host calls block on `runtime` (so call [`Repl::eval`] off its workers).
    pub fn new(
        upstreams: Arc<Upstreams>,
        runtime: tokio::runtime::Handle,
        limits: EvalLimits,
    ) -> Self {
        let fresh = || {
            Arc::new(ProgramHost::new(
                upstreams.clone(),
                runtime.clone(),
                limits.budgets(),
            ))
        };
        let host = Arc::new(LineHost {
            current: Mutex::new(fresh()),
        });
        let interp = Interpreter::with_host(limits.lisp_limits(), host.clone());
        Repl {
            upstreams,
            runtime,
            limits,
            host,
            interp,
        }
    }

    /// Evaluates one entry (one or more complete forms).
    pub fn eval(&mut self, src: &str) -> ReplOutput {
        *self.host.current.lock().unwrap_or_else(|e| e.into_inner()) = Arc::new(ProgramHost::new(
            self.upstreams.clone(),
            self.runtime.clone(),
            self.limits.budgets(),
        ));
        let redactor = self.upstreams.redactor();
        let result = match crate::program::precheck::precheck(&self.upstreams, src) {
            Err(problems) => Err(crate::program::precheck::to_error(&problems)),
            Ok(()) => self.interp.eval_str(src),
        };
        let prints = redactor.redact(&self.interp.take_output()).into_owned();
        let result = match result {
            Ok(v) => Ok(redactor.redact(&v.to_string()).into_owned()),
            Err(e) => Err(redactor.redact(&e.to_string()).into_owned()),
        };
        ReplOutput { prints, result }
    }
}

/// Whether `src` holds only complete forms (brackets balanced outside strings and comments), so
/// the REPL knows to read another line.
pub fn is_complete(src: &str) -> bool {
    let mut depth: i64 = 0;
    let mut in_str = false;
    let mut escaped = false;
    let mut in_comment = false;
    for c in src.chars() {
        if in_comment {
            in_comment = c != '\n';
            continue;
        }
        if in_str {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            ';' => in_comment = true,
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            _ => {}
        }
    }
    // Extra closers are complete too: the reader then reports them with their position.
    !in_str && depth <= 0
}

#[cfg(test)]
mod tests {
    use super::is_complete;

    #[test]
    fn completeness_follows_brackets_outside_strings_and_comments() {
        assert!(is_complete("(+ 1 2)"));
        assert!(!is_complete("(let [x 1]"));
        assert!(is_complete("(str \"(\")"));
        assert!(!is_complete("(str \"a"));
        assert!(is_complete("(+ 1 ; (\n 2)"));
        assert!(!is_complete("{:a [1 2"));
        assert!(is_complete("(+ 1 2))"));
        // An escaped quote does not end the string, so the `(` after it is text.
        assert!(is_complete(r#"(str "a\"(" "b")"#));
        assert!(
            !is_complete(r#"(str "a\\" ("#),
            "an escaped backslash does not escape the quote"
        );
    }
}
