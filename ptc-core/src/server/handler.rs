//! The rmcp server handler: `tools/list` answers `lisp_eval`; `tools/call` runs the program
//! through the shared [`Evaluator`], with this session's in-flight limit (a queue) and its
//! cancellation.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value};

use crate::server::admission::Queue;
use crate::server::envelope;
use crate::server::eval::Evaluator;
use crate::server::outcome::{EvalError, EvalOutcome, EvalRequest};
use crate::server::tool;

/// One MCP session's handler (rmcp makes one per session over HTTP; stdio has one).
#[derive(Clone)]
pub struct PtcServer {
    evaluator: Arc<Evaluator>,
    session_slots: Arc<Queue>,
    tool: Tool,
}

impl PtcServer {
    /// A handler for a new session.
    pub fn new(evaluator: Arc<Evaluator>) -> Self {
        let tool = tool::definition(evaluator.upstreams().catalog());
        PtcServer {
            session_slots: Arc::new(Queue::new(
                evaluator.limits().max_per_session,
                evaluator.limits().max_queue,
            )),
            evaluator,
            tool,
        }
    }
}

/// Reads `lisp_eval`'s arguments, naming the field at fault.
pub fn parse_request(args: Option<Map<String, Value>>) -> Result<EvalRequest, String> {
    let args = args.unwrap_or_default();
    let mut req = EvalRequest::default();
    let mut program = None;
    for (k, v) in args {
        match (k.as_str(), v) {
            ("program", Value::String(s)) => program = Some(s),
            ("program", other) => {
                return Err(format!("`program` must be a string, got {other}"));
            }
            ("context", Value::Object(m)) => req.context = Some(m),
            ("context", Value::Null) => {}
            ("context", _) => {
                return Err("`context` must be a JSON object; its keys become data/<key>".into());
            }
            ("output_schema", Value::Null) => {}
            ("output_schema", v) => req.output_schema = Some(v),
            (other, _) => {
                return Err(format!(
                    "unknown argument `{other}`; lisp_eval takes program, context and \
                     output_schema"
                ));
            }
        }
    }
    req.program = program
        .ok_or_else(|| "`program` is required: PTC-Lisp source such as (+ 1 2)".to_string())?;
    Ok(req)
}

impl ServerHandler for PtcServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("ptc", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Answer questions about the upstream services by sending one PTC-Lisp \
                 program to lisp_eval; start with (tool/servers) or (apropos \"topic\").",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![self.tool.clone()]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != tool::NAME {
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{}`; this server has lisp_eval", request.name),
                None,
            ));
        }
        let max = self.evaluator.limits().max_output_bytes;
        let req = match parse_request(request.arguments) {
            Ok(r) => r,
            Err(m) => {
                return Ok(envelope::to_result(
                    &EvalOutcome::refused(EvalError::host("invalid_request", m)),
                    max,
                )
                .into());
            }
        };
        // One wait for the whole admission: the session's turn, then the host's.
        let until = self.evaluator.wait_until();
        let _slot = match self.session_slots.enter(1, until, &context.ct).await {
            Ok(slot) => slot,
            Err(turned) => {
                let what = format!(
                    "this session already runs {} evaluations, its limit",
                    self.evaluator.limits().max_per_session
                );
                let e = self.evaluator.turned_away(turned, &what);
                return Ok(envelope::to_result(&EvalOutcome::refused(e), max).into());
            }
        };
        let approver = crate::server::elicit::approver_for(&context);
        let outcome = self
            .evaluator
            .eval_within(req, context.ct.clone(), until, Some(approver))
            .await;
        Ok(envelope::to_result(&outcome, max).into())
    }
}
