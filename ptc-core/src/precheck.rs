//! The static pre-check: before a program runs, its literal `tool/call` forms are checked
//! against the catalog (unknown upstream or tool, missing required arguments, literal arguments
//! of the wrong type or outside an enum). Every problem is reported at once with its position,
//! and no upstream is touched: upstreams whose tools are not listed yet are not checked. Calls
//! built at run time are still checked when they are made.

use ptc_lisp::{LispError, LiteralArg, Pos, Value};

use crate::executor::{Upstreams, invalid_args_message};
use crate::validate::{LiteralArgs, check_literal_args};

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

fn text_of(arg: &LiteralArg) -> Option<String> {
    match arg {
        LiteralArg::Const(Value::Str(s) | Value::Symbol(s) | Value::Keyword(s)) => {
            Some(s.to_string())
        }
        _ => None,
    }
}

/// What a literal call names and passes, when it can be known statically.
struct Literal {
    server: String,
    tool: String,
    /// `None`: the args are computed.
    args: Option<(LiteralArgs, bool)>,
}

fn literal_call(args: &[LiteralArg]) -> Option<Literal> {
    match args {
        [LiteralArg::Map(entries)] => {
            let mut server = None;
            let mut tool = None;
            let mut call_args = Some((Vec::new(), true));
            for (k, v) in entries {
                match text_of(k)?.as_str() {
                    "server" => server = Some(text_of(v)?),
                    "tool" => tool = Some(text_of(v)?),
                    "args" => call_args = map_args(v),
                    _ => return None,
                }
            }
            Some(Literal {
                server: server?,
                tool: tool?,
                args: call_args,
            })
        }
        [target, rest @ ..] if rest.len() <= 1 => {
            let name = text_of(target)?;
            let (server, tool) = name.split_once('/')?;
            let args = match rest.first() {
                None => Some((Vec::new(), true)),
                Some(a) => map_args(a),
            };
            Some(Literal {
                server: server.to_string(),
                tool: tool.to_string(),
                args,
            })
        }
        _ => None,
    }
}

/// The entries of a literal args map, and whether every key is known.
fn map_args(arg: &LiteralArg) -> Option<(LiteralArgs, bool)> {
    let entries: Vec<(LiteralArg, LiteralArg)> = match arg {
        LiteralArg::Map(e) => e.clone(),
        LiteralArg::Const(Value::Nil) => Vec::new(),
        LiteralArg::Const(Value::Map(m)) => m
            .iter()
            .map(|(k, v)| (LiteralArg::Const(k.clone()), LiteralArg::Const(v.clone())))
            .collect(),
        _ => return None,
    };
    let mut out = Vec::new();
    let mut complete = true;
    for (k, v) in &entries {
        let Some(name) = text_of(k) else {
            complete = false;
            continue;
        };
        let value = match v {
            LiteralArg::Const(c) => c
                .to_json_string()
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok()),
            _ => None,
        };
        out.push((name, value));
    }
    Some((out, complete))
}

/// Checks every literal `tool/call` in `src`. A program that does not read is left to the
/// evaluator to report.
pub fn precheck(upstreams: &Upstreams, src: &str) -> Result<(), Vec<Problem>> {
    let Ok(sites) = ptc_lisp::call_sites(src, "tool/call") else {
        return Ok(());
    };
    let catalog = upstreams.catalog();
    let mut problems = Vec::new();
    for site in sites {
        let Some(call) = literal_call(&site.args) else {
            continue;
        };
        let server = match catalog.server(&call.server) {
            Ok(s) => s,
            Err(e) => {
                problems.push(Problem {
                    pos: site.pos,
                    message: e.message,
                });
                continue;
            }
        };
        if server.tools().is_none() {
            continue;
        }
        let tool = match server.tool(&call.tool) {
            Ok(t) => t,
            Err(e) => {
                problems.push(Problem {
                    pos: site.pos,
                    message: e.message,
                });
                continue;
            }
        };
        let Some((args, complete)) = call.args else {
            continue;
        };
        let mut found = check_literal_args(server.schema(tool), upstreams.patterns(), args);
        if !complete {
            found.retain(|p| !p.starts_with("missing required"));
        }
        if !found.is_empty() {
            problems.push(Problem {
                pos: site.pos,
                message: invalid_args_message(&tool.qualified(), tool, &found),
            });
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}
