//! The rmcp server handler: `tools/list` answers `lisp_eval` and the declared programs the
//! caller may run (`programs.rs`); `tools/call` runs the program through the shared
//! [`Evaluator`], with this session's in-flight limit (a queue) and its
//! cancellation; the session is told when a refresh changes the tools (`listeners.rs`).

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, SubscriptionFilter,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value};

use crate::credentials::identity::Caller;
use crate::server::admission::Queue;
use crate::server::envelope;
use crate::server::eval::Evaluator;
use crate::server::outcome::{EvalError, EvalOutcome, EvalRequest, HostReason};
use crate::server::{elicit, rounds};
use crate::server::{programs, tool};
use tokio_util::sync::CancellationToken;

/// One MCP session's handler (rmcp makes one per session over HTTP; stdio has one).
#[derive(Clone)]
pub struct PtcServer {
    evaluator: Arc<Evaluator>,
    session_slots: Arc<Queue>,
}

impl PtcServer {
    /// A handler for a new session.
    pub fn new(evaluator: Arc<Evaluator>) -> Self {
        PtcServer {
            session_slots: Arc::new(Queue::new(
                evaluator.limits().max_per_session,
                evaluator.limits().max_queue,
            )),
            evaluator,
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
            ("session", Value::Null) => {}
            ("session", Value::String(s)) => {
                crate::server::session_run::check_name(&s)?;
                req.session = Some(s);
            }
            ("session", other) => {
                return Err(format!(
                    "`session` must be a string (its name), got {other}"
                ));
            }
            (other, _) => {
                return Err(format!(
                    "unknown argument `{other}`; lisp_eval takes program, context, \
                     output_schema and session"
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
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("ptc", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "Answer questions about the upstream services by sending one PTC-Lisp \
             program to lisp_eval; start with (tool/servers) or (apropos \"topic\").",
        )
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // An older-era session: told on the session when a refresh changes the tools.
        self.evaluator.listeners().add_session(context.peer);
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // The SDK keeps what was also requested: the tool list is the one list that changes.
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        // A newer-era session's stream: told on it while it is open.
        let listeners = self.evaluator.listeners();
        let key = (context.accepted().tools_list_changed == Some(true))
            .then(|| listeners.add_subscription(context.sink().clone()));
        // Until the client ends it, or the host stops: rmcp waits for open handlers before it
        // closes a session.
        tokio::select! {
            () = context.cancelled() => {}
            () = listeners.stopped() => {}
        }
        if let Some(key) = key {
            listeners.remove(key);
        }
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // From the current catalog: a session opened before a catalog refresh lists the new one.
        let grant = self.evaluator.visible_to(&caller(&context));
        let upstreams = self.evaluator.upstreams();
        let catalog = upstreams.catalog();
        // lisp_eval unless the caller's rule keeps them to the deployment's programs.
        let lisp_eval = grant
            .check_lisp_eval()
            .is_ok()
            .then(|| tool::definition(catalog, &grant));
        let tools = lisp_eval
            .into_iter()
            .chain(programs::visible(upstreams.plan(), catalog, &grant).map(programs::definition))
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = caller(&context);
        let is_program = request.name != tool::NAME;
        let parsed = if is_program {
            match programs::request_for(
                &self.evaluator,
                &caller,
                &request.name,
                request.arguments.clone(),
            ) {
                Err(programs::Refusal::Unknown(names)) => {
                    return Err(ErrorData::invalid_params(
                        format!(
                            "unknown tool `{}`; this server has {}",
                            request.name,
                            names.join(", ")
                        ),
                        None,
                    ));
                }
                Err(programs::Refusal::InvalidArguments(m)) => Err(m),
                Ok(r) => Ok(r),
            }
        } else {
            match self.evaluator.visible_to(&caller).check_lisp_eval() {
                Ok(()) => parse_request(request.arguments.clone()),
                Err(why) => {
                    let e = EvalError::host(HostReason::Forbidden, why);
                    self.evaluator.metrics().refused(&e, None);
                    return Ok(self.reply(&EvalOutcome::refused(e)));
                }
            }
        };
        let answer = |e: EvalError| self.reply(&EvalOutcome::refused(e));
        // A request refused before it reaches the evaluator counts here; an evaluation counts
        // itself when it ends.
        let refused = |e: EvalError| -> CallToolResponse {
            let program = is_program.then_some(request.name.as_ref());
            self.evaluator.metrics().refused(&e, program);
            answer(e)
        };
        let arguments = request.arguments.clone().unwrap_or_default();
        if let Some(state) = &request.request_state {
            // The next round of a program waiting for a person (MCP 2026-07-28).
            let parked = self.evaluator.parked();
            return Ok(
                match parked.resume(
                    state,
                    &caller.subject,
                    &arguments,
                    request.input_responses.as_ref(),
                ) {
                    Ok(conversation) => self.round(conversation).await,
                    Err(stale) => refused(EvalError::host(
                        HostReason::InvalidRequest,
                        stale.to_string(),
                    )),
                },
            );
        }
        let req = match parsed {
            Ok(r) => EvalRequest {
                caller: caller.clone(),
                // A program tool's answer depends on its arguments only: no session.
                session: if is_program {
                    None
                } else {
                    r.session.clone().or_else(|| self.default_session(&context))
                },
                trace: trace_parent(&context),
                party: mcp_session_id(&context).map(|id| format!("{}#{id}", caller.subject)),
                ..r
            },
            Err(m) => return Ok(refused(EvalError::host(HostReason::InvalidRequest, m))),
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
                return Ok(refused(self.evaluator.turned_away(turned, &what)));
            }
        };
        let approver = match elicit::channel(&context) {
            elicit::Channel::Approver(a) => a,
            elicit::Channel::Rounds => {
                // The evaluation outlives this request when it waits for a person: it runs as
                // a task, cancelled only while this first round still waits for it.
                let (approver, done, conversation) = rounds::start(&caller.subject, &arguments);
                let evaluator = self.evaluator.clone();
                let cancel = CancellationToken::new();
                let stop = cancel.clone();
                tokio::spawn(async move {
                    let outcome = evaluator
                        .eval_within(req, stop, until, Some(approver))
                        .await;
                    let _ = done.send(rounds::Event::Done(Box::new(outcome)));
                });
                // Cancels the evaluation if this round ends before its first answer.
                let guard = cancel.drop_guard();
                return Ok(tokio::select! {
                    round = self.round(conversation) => {
                        guard.disarm();
                        round
                    }
                    () = context.ct.cancelled() => answer(EvalError::host(
                        HostReason::Cancelled,
                        "the request was cancelled",
                    )),
                });
            }
        };
        let outcome = self
            .evaluator
            .eval_within(req, context.ct.clone(), until, Some(approver))
            .await;
        Ok(self.reply(&outcome))
    }
}

/// The caller the HTTP transport's authentication put into the request; over stdio, whoever
/// started the process.
fn caller(context: &RequestContext<RoleServer>) -> Arc<Caller> {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Arc<Caller>>())
        .cloned()
        .unwrap_or_default()
}

/// The caller's trace context, when traces are on: the request's `_meta.traceparent` (and
/// `tracestate`), else the HTTP request's `traceparent` header.
fn trace_parent(context: &RequestContext<RoleServer>) -> Option<crate::telemetry::TraceParent> {
    if !crate::telemetry::is_on() {
        return None;
    }
    crate::telemetry::TraceParent::from_meta(&context.meta).or_else(|| {
        context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| crate::telemetry::TraceParent::from_headers(&parts.headers))
    })
}

/// The client's MCP session over HTTP (none in stateless mode, nor over stdio).
fn mcp_session_id(context: &RequestContext<RoleServer>) -> Option<&str> {
    context
        .extensions
        .get::<axum::http::request::Parts>()?
        .headers
        .get("mcp-session-id")?
        .to_str()
        .ok()
}

impl PtcServer {
    /// The session a program runs in when it names none, where the deployment keeps sessions:
    /// the MCP session over HTTP (none in stateless mode), the process's over stdio.
    fn default_session(&self, context: &RequestContext<RoleServer>) -> Option<String> {
        if !self.evaluator.keeps_sessions() {
            return None;
        }
        match context.extensions.get::<axum::http::request::Parts>() {
            Some(_) => mcp_session_id(context).map(|id| format!("mcp-{id}")),
            None => Some("stdio".into()),
        }
    }

    /// The reply to a request that ended with `outcome`, cut at `--max-output-bytes` (counted).
    fn reply(&self, outcome: &EvalOutcome) -> CallToolResponse {
        let max = self.evaluator.limits().max_output_bytes;
        let (result, cut) = envelope::to_reply(outcome, max);
        if cut {
            self.evaluator.metrics().reply_cut();
        }
        result.into()
    }

    /// One request round of a conversation: the program's result, or the approval it waits for.
    async fn round(&self, conversation: rounds::Conversation) -> CallToolResponse {
        let keep = self.evaluator.limits().program_timeout + PARKED_GRACE;
        match self.evaluator.parked().next(conversation, keep).await {
            rounds::Round::Done(outcome) => self.reply(&outcome),
            rounds::Round::InputRequired(asked) => CallToolResponse::InputRequired(asked),
        }
    }
}

/// How long a conversation waits for its retry beyond the program's own time: a program waits
/// no longer than that for a person, so this only keeps a late outcome for a late retry.
const PARKED_GRACE: std::time::Duration = std::time::Duration::from_secs(60);
