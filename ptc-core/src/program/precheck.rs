//! The static pre-check: before a program runs, its literal `tool/call` and `tool/pages` forms
//! (and `(server/tool {...})`, the same call) are read the way the call reads them (`call::form`) and checked against the catalog
//! (a malformed form, unknown upstream or tool, missing required arguments, literal arguments of
//! the wrong type or outside an enum, pages of a tool that does not page). Every problem is
//! reported at once with its position, and no upstream is touched: upstreams whose tools are not
//! listed yet are not checked. Calls built at run time are still checked when they are made.

use ptc_lisp::{LispError, LiteralArg, Pos};

use crate::call::form::{self, FormError};

use crate::call::upstreams::{Upstreams, invalid_args_message};
use crate::call::validate::{LiteralArgs, check_literal_args};

/// One problem found in a literal call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Where the call starts.
    pub pos: Pos,
    /// What is wrong and how to fix it.
    pub message: String,
}

/// The program error for a failed pre-check: every problem, one per line, positioned at the
/// first.
pub fn to_error(problems: &[Problem]) -> LispError {
    let lines: Vec<String> = problems
        .iter()
        .map(|p| format!("{}: {}", p.pos, p.message))
        .collect();
    let mut e = LispError::new(
        ptc_lisp::Reason::RuntimeError,
        format!(
            "{} tool/call problem{} found before running (nothing was called):\n{}",
            problems.len(),
            if problems.len() == 1 { "" } else { "s" },
            lines.join("\n")
        ),
    );
    if let Some(p) = problems.first() {
        e = e.with_pos(p.pos);
    }
    e
}

/// Checks every literal `tool/call` in `src`. A program that does not read is left to the
/// evaluator to report.
pub fn precheck(upstreams: &Upstreams, src: &str) -> Result<(), Vec<Problem>> {
    let servers: Vec<&str> = upstreams
        .catalog()
        .servers()
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    // One reading of the text for every spelling of a call, in source order.
    let Ok(uses) = ptc_lisp::uses(src, &|s: &str| form::is_call_head(s, &servers)) else {
        return Ok(());
    };
    let sites = uses
        .calls
        .into_iter()
        .map(|(head, site)| (site.pos, form::site_args(&head, &site.args)));
    let problems: Vec<Problem> = sites
        .filter_map(|(pos, (paged, args))| {
            problem(upstreams, &args, paged).map(|message| Problem { pos, message })
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// A part computed at run time (`Ok(None)`) is the evaluator's to check when the call is made.
fn known<T>(r: Result<T, FormError>) -> Result<Option<T>, String> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(FormError::Computed) => Ok(None),
        Err(FormError::Wrong(message)) => Err(message),
    }
}

/// What is wrong with one literal call, as far as it can be known before the program runs.
fn problem(upstreams: &Upstreams, args: &[LiteralArg], paged: bool) -> Option<String> {
    let call = match known(form::read(args)) {
        Ok(call) => call?,
        Err(message) => return Some(message),
    };
    let server = match upstreams.catalog().server(&call.server) {
        Ok(s) => s,
        Err(e) => return Some(e.message),
    };
    // Tools not listed yet cannot be checked without connecting.
    server.tools()?;
    let tool = match server.tool(&call.tool) {
        Ok(t) => t,
        Err(e) => return Some(e.message),
    };
    if paged && tool.projection.pagination.is_none() {
        return Some(format!(
            "tool/pages: {} has no pagination; call it with tool/call",
            tool.qualified()
        ));
    }
    let entries = match known(call.arg_entries()) {
        Ok(entries) => entries?,
        Err(message) => return Some(message),
    };
    // A computed key may be any required argument; a value that cannot be sent is the
    // evaluator's to report, with the argument's name.
    let complete = entries.iter().all(|(k, _)| k.is_some());
    let args: LiteralArgs = entries
        .into_iter()
        .filter_map(|(k, v)| Some((k?, v.and_then(Result::ok))))
        .collect();
    let found = check_literal_args(server.schema(tool), upstreams.patterns(), args, complete);
    (!found.is_empty())
        .then(|| invalid_args_message(&tool.qualified(), server.schema(tool), tool, &found))
}
