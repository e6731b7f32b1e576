//! Declared programs as tools of the host, beside `lisp_eval`: each listed with its parameters
//! as `inputSchema`, its result inside `lisp_eval`'s result contract as `outputSchema`, and the
//! annotations its calls earned at load ([`ptc_plan::ProgramPlan`]). A call runs the program's
//! text with the validated arguments as its `data/`, through the same evaluator, limits,
//! approvals and records as a `lisp_eval` program.
//!
//! A caller sees a program only when the policy lets them run it and call every tool it calls:
//! a program is never a way around the policy (and each call is checked again when it is
//! made).

use std::sync::Arc;

use ptc_plan::{Plan, ProgramPlan};
use rmcp::model::{Tool, ToolAnnotations};
use serde_json::{Map, Value, json};

use crate::call::validate::{Patterns, Schema, check_args};
use crate::catalog::Catalog;
use crate::catalog::policy::Grant;
use crate::credentials::identity::Caller;
use crate::server::eval::Evaluator;
use crate::server::outcome::EvalRequest;

/// Why a call of a tool by name is not a program run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No program of that name the caller may run: the tools they have.
    Unknown(Vec<String>),
    /// Its arguments do not meet its parameters (nothing ran).
    InvalidArguments(String),
}

/// The evaluation that runs declared program `name` for `caller` with `args`: what a
/// `tools/call` of the program runs (the MCP handler calls this; so may a host of its own).
pub fn request_for(
    evaluator: &Evaluator,
    caller: &Caller,
    name: &str,
    args: Option<Map<String, Value>>,
) -> Result<EvalRequest, Refusal> {
    let grant = evaluator.visible_to(caller);
    let upstreams = evaluator.upstreams();
    let visible: Vec<&ProgramPlan> =
        visible(upstreams.plan(), upstreams.catalog(), &grant).collect();
    let Some(program) = visible.iter().find(|p| p.name == name) else {
        let lisp_eval = grant
            .check_lisp_eval()
            .is_ok()
            .then(|| crate::server::tool::NAME.to_string());
        return Err(Refusal::Unknown(
            lisp_eval
                .into_iter()
                .chain(visible.iter().map(|p| p.name.clone()))
                .collect(),
        ));
    };
    request(program, upstreams.patterns(), args).map_err(Refusal::InvalidArguments)
}

/// The programs `grant` lets its caller run.
pub(crate) fn visible<'p>(
    plan: &'p Plan,
    catalog: &Catalog,
    grant: &Grant,
) -> impl Iterator<Item = &'p ProgramPlan> {
    plan.programs.iter().filter(move |p| {
        grant.runs_program(&p.name)
            && p.calls.iter().all(|call| {
                let Some((server, tool)) = call.split_once('/') else {
                    return false;
                };
                catalog
                    .server(server)
                    .ok()
                    .and_then(|s| s.tool(tool).ok())
                    .is_some_and(|t| grant.sees(t))
            })
    })
}

/// The MCP tool of `program`.
pub(crate) fn definition(program: &ProgramPlan) -> Tool {
    let object = |v: Value| match v {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let a = program.annotations;
    Tool::new(
        program.name.clone(),
        program.description.clone(),
        Arc::new(object(program.input_schema.clone())),
    )
    .with_raw_output_schema(Arc::new(object(output_schema(&program.output_schema))))
    .with_annotations(
        ToolAnnotations::with_title(program.name.clone())
            .read_only(a.read_only_hint)
            .destructive(a.destructive_hint)
            .idempotent(a.idempotent_hint)
            .open_world(true),
    )
}

/// `lisp_eval`'s result contract with the program's result in `result` (`null` when the reply
/// left it out for its size, which `result_truncated` says).
fn output_schema(result: &Value) -> Value {
    json!({
        "type": "object",
        "properties": {
            "result": {"anyOf": [result, {"type": "null"}]},
            "result_truncated": {"type": "boolean"},
            "prints": {"type": "array", "items": {"type": "string"}},
            "upstream_calls": {"type": "array", "items": {"type": "object"}},
            "ptc_metrics": {"type": "object"},
            "caller": {"type": "string"}
        },
        "required": ["result"]
    })
}

/// The evaluation of `program` called with `args`: its text, the arguments checked against its
/// parameters as its `data/`, its declared result as the result's schema. No session: a
/// program tool's answer depends on its arguments only.
fn request(
    program: &ProgramPlan,
    patterns: &Patterns,
    args: Option<Map<String, Value>>,
) -> Result<EvalRequest, String> {
    let schema = Schema {
        root: &program.input_schema,
        definitions: None,
    };
    let context = check_args(schema, patterns, args.unwrap_or_default()).map_err(|problems| {
        format!(
            "{}: invalid arguments: {}",
            program.name,
            problems.join("; ")
        )
    })?;
    let declared = program
        .output_schema
        .as_object()
        .is_some_and(|s| !s.is_empty());
    Ok(EvalRequest {
        program: program.source.clone(),
        context: Some(context),
        output_schema: declared.then(|| program.output_schema.clone()),
        tool: Some(program.name.clone()),
        ..EvalRequest::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ptc_plan::ProgramAnnotations;

    fn program(result: Value) -> ProgramPlan {
        ProgramPlan {
            name: "p".into(),
            description: "d".into(),
            file: "p.clj".into(),
            source: "data/n".into(),
            input_schema: json!({"type": "object", "properties": {"n": {"type": "integer"}},
                                 "required": ["n"]}),
            output_schema: result,
            calls: vec![],
            writes: vec![],
            annotations: ProgramAnnotations {
                read_only_hint: true,
                destructive_hint: false,
                idempotent_hint: true,
            },
        }
    }

    /// The evaluation a call runs: the program's text, its checked arguments as the context,
    /// its declared result as the schema the value must meet (none when it declares any value),
    /// named after the program and in no session.
    #[test]
    fn a_call_runs_the_text_with_its_arguments_and_the_declared_result() {
        let patterns = Patterns::default();
        let args = json!({"n": 2}).as_object().cloned();
        let declared = program(json!({"type": "integer"}));
        let req = request(&declared, &patterns, args.clone()).unwrap();
        assert_eq!(req.program, "data/n");
        assert_eq!(req.context, args);
        assert_eq!(req.output_schema, Some(json!({"type": "integer"})));
        assert_eq!(req.tool.as_deref(), Some("p"));
        assert_eq!(req.session, None);
        let any = program(json!({}));
        assert_eq!(request(&any, &patterns, args).unwrap().output_schema, None);
        assert_eq!(
            request(&any, &patterns, json!({"n": "x"}).as_object().cloned()).unwrap_err(),
            "p: invalid arguments: :n must be an integer, got string \"x\""
        );
    }
}
