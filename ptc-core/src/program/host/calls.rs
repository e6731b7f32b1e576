//! One upstream call of a program: resolved, validated, within the run's budgets and grant,
//! on the run's tape, approved where the tool needs it; its answer decoded, selected, checked
//! against the tool's output schema and recorded.

use std::sync::atomic::Ordering;
use std::time::Instant;

use ptc_lisp::{CallContext, HostError, Value};

use super::{ProgramHost, RunState, ValueKind, err_map, form_fault, ok_map, raised};
use crate::call::contract::{Reason, ResponseCap, ToolError, ToolOutput};
use crate::call::form;
use crate::call::upstreams::CallOptions;
use crate::call::writes::{IdempotencyKey, MutationState};
use crate::catalog::{ServerEntry, ToolEntry};
use crate::program::record_replay::{Tape, TapeCall};
use crate::program::run_report::{ApprovalOutcome, WriteRecord};
use ptc_plan::Effect;

/// The outcome of one upstream call, with the names it resolved to (when it got that far) and,
/// for a tool that is not a read, what the records say of it.
pub(super) struct CallOutcome {
    result: Result<crate::call::upstreams::Executed, ToolError>,
    names: Option<(String, String)>,
    write: Option<WriteRecord>,
    /// Where the tool is in the catalog (upstream, tool), once it resolved.
    at: Option<(usize, usize)>,
}

impl CallOutcome {
    pub(super) fn failed(
        e: ToolError,
        names: Option<(String, String)>,
        write: Option<WriteRecord>,
    ) -> Self {
        CallOutcome {
            result: Err(e),
            names,
            write,
            at: None,
        }
    }
}

/// A call the upstream answered, as the records need it once the program has read the answer.
pub(super) struct Done {
    names: (String, String),
    started: Instant,
    bytes: u64,
    write: Option<WriteRecord>,
    /// Where the tool is in the catalog: its result path and output schema are read there.
    at: Option<(usize, usize)>,
    /// The call's span (traces), ended with the call's record.
    span: crate::telemetry::TraceSpan,
}

impl Done {
    pub(super) fn mutation(&self) -> Option<MutationState> {
        self.write.and_then(|w| w.mutation_state)
    }

    pub(super) fn qualified(&self) -> String {
        format!("{}/{}", self.names.0, self.names.1)
    }
}

/// What [`ProgramHost::fetch`] gives the program: an answer (decoded, with its kind), or the
/// `{:ok false ...}` value of a refused or failed call (already recorded).
pub(super) enum Fetched {
    Answer(Value, ValueKind, Box<Done>),
    Refused(Value),
}

impl ProgramHost {
    pub(super) fn tool_call(
        &self,
        cx: &mut CallContext<'_>,
        args: &[Value],
    ) -> Result<Value, HostError> {
        let form = form::read(args).map_err(form_fault)?;
        let req_args = form.json_args().map_err(form_fault)?;
        let (value, kind, done) = match self.fetch(cx, &form.server, &form.tool, req_args, None)? {
            Fetched::Refused(v) => return Ok(v),
            Fetched::Answer(value, kind, done) => (value, kind, done),
        };
        let mutation = done.mutation();
        let v = match self.select(&done, kind, value) {
            Ok(v) => v,
            Err(why) => return Ok(self.bad_answer(&done, &why)),
        };
        let drift = if kind == ValueKind::Json {
            match self.check_answer(&done, &v) {
                Ok(drift) => drift,
                Err(refused) => return Ok(refused),
            }
        } else {
            Vec::new()
        };
        self.finish(&done, Ok(()), drift);
        Ok(ok_map(v, kind, mutation))
    }

    /// One upstream call for the program (`page` of a `tool/pages`): waits (suspended) for it,
    /// records a refusal, decodes an answer. The caller selects from the answer and records the
    /// call with [`Self::finish`].
    pub(super) fn fetch(
        &self,
        cx: &mut CallContext<'_>,
        server: &str,
        tool: &str,
        req_args: serde_json::Map<String, serde_json::Value>,
        page: Option<u64>,
    ) -> Result<Fetched, HostError> {
        let deadline = cx.remaining().map(|r| Instant::now() + r);
        let started = Instant::now();
        let run = self.run.clone();
        let (s, t) = (server.to_string(), tool.to_string());
        let transport = || {
            let catalog = self.upstreams().catalog();
            catalog
                .server(server)
                .map_or("unknown", |s| s.transport.as_str())
        };
        let span = crate::telemetry::call_span(self.trace.as_ref(), server, tool, transport, page);
        let call = async move { run.call(&s, &t, req_args, deadline).await };
        let outcome = match self.wait_io(cx, crate::telemetry::traced(call, &span)) {
            Ok(outcome) => outcome,
            Err(stopped) => {
                crate::telemetry::call_ended(&span, Some(stopped.reason.as_str()), 0, started);
                // The program stopped waiting and the call ends with it. A deadline is the call's
                // timeout too; a cancelled call has no outcome of the contract's to record.
                if stopped.reason == ptc_lisp::Reason::Timeout {
                    self.record(
                        server,
                        tool,
                        started,
                        Err(Reason::Timeout),
                        None,
                        Vec::new(),
                    );
                }
                return Err(stopped);
            }
        };
        let write = outcome.write;
        let mutation = write.and_then(|w| w.mutation_state);
        let names = outcome
            .names
            .unwrap_or_else(|| (server.to_string(), tool.to_string()));
        let executed = match outcome.result {
            Ok(done) => done,
            Err(e) => {
                crate::telemetry::call_ended(&span, Some(e.reason.as_str()), 0, started);
                if e.reason.is_programmer_fault() {
                    return Err(raised(&e));
                }
                self.record(
                    &names.0,
                    &names.1,
                    started,
                    Err(e.reason),
                    write,
                    Vec::new(),
                );
                return Ok(Fetched::Refused(err_map(e.reason, &e.message, mutation)));
            }
        };
        self.run.bytes.fetch_add(executed.bytes, Ordering::Relaxed);
        let done = Done {
            names,
            started,
            bytes: executed.bytes,
            write,
            at: outcome.at,
            span,
        };
        let (value, kind) = match executed.output {
            // The same decoder, depth limit and memory budget as `data/` context.
            ToolOutput::Json(bytes) => match cx.decode_json(&bytes) {
                Ok(v) => (v, ValueKind::Json),
                // The program's own limits (memory, time) end the program.
                Err(e)
                    if matches!(
                        e.reason,
                        ptc_lisp::Reason::MemoryExceeded | ptc_lisp::Reason::Timeout
                    ) =>
                {
                    self.finish(&done, Err(Reason::UpstreamError), Vec::new());
                    return Err(e);
                }
                // Malformed or absurdly deep JSON is the upstream's fault: data.
                Err(e) => {
                    let why = format!("the response is not usable JSON: {}", e.message);
                    return Ok(Fetched::Refused(self.bad_answer(&done, &why)));
                }
            },
            // Only JSON answers are selected from.
            ToolOutput::Text(t) => {
                if let Some((server, tool)) = self.entry(&done) {
                    let subject = &self.run.caller.subject;
                    self.upstreams()
                        .samples()
                        .keep(subject, &server.name, &tool.name, &t);
                }
                (Value::str(&t), ValueKind::Text)
            }
            ToolOutput::Empty => (Value::Nil, ValueKind::None),
        };
        Ok(Fetched::Answer(value, kind, Box::new(done)))
    }

    /// The upstream and tool of an answered call.
    pub(super) fn entry(&self, done: &Done) -> Option<(&ServerEntry, &ToolEntry)> {
        let (s, t) = done.at?;
        let server = self.upstreams().catalog().servers().get(s)?;
        Some((server, server.tools()?.get(t)?))
    }

    /// What a call returns: for a JSON answer, what its tool's result path selects.
    pub(super) fn select(
        &self,
        done: &Done,
        kind: ValueKind,
        answer: Value,
    ) -> Result<Value, String> {
        match self.entry(done) {
            Some((_, tool)) if kind == ValueKind::Json => tool.projection.select(answer),
            _ => Ok(answer),
        }
    }

    /// Records a call that was answered, with the fields of its answer that drifted.
    pub(super) fn finish(&self, done: &Done, outcome: Result<(), Reason>, drift: Vec<String>) {
        let (server, tool) = &done.names;
        let reason = outcome.err().map(Reason::as_str);
        crate::telemetry::call_ended(&done.span, reason, done.bytes, done.started);
        let bytes = outcome.map(|()| done.bytes);
        self.record(server, tool, done.started, bytes, done.write, drift);
    }

    /// Checks what a call returns against the tool's output schema: the fields that drifted,
    /// or (checking strictly) the `response_drift` value the program gets instead, recorded.
    pub(super) fn check_answer(&self, done: &Done, value: &Value) -> Result<Vec<String>, Value> {
        let up = self.upstreams();
        let Some((server, schema)) = self
            .entry(done)
            .and_then(|(s, t)| Some((s, t.output_schema.as_ref()?)))
        else {
            return Ok(Vec::new());
        };
        let schema = crate::call::validate::Schema {
            root: schema,
            definitions: Some(&server.definitions),
        };
        let found = up.drift().check(&done.qualified(), value, schema);
        if found.is_empty() || !up.drift().strict() {
            return Ok(found);
        }
        let message = self.redact(&format!(
            "{}: the response does not match its schema: {}",
            done.qualified(),
            found.join("; ")
        ));
        self.finish(done, Err(Reason::ResponseDrift), found);
        Err(err_map(Reason::ResponseDrift, &message, done.mutation()))
    }

    /// Records an answer the program cannot use (`why`) as the upstream's error, and the value
    /// the program gets for it.
    pub(super) fn bad_answer(&self, done: &Done, why: &str) -> Value {
        self.finish(done, Err(Reason::UpstreamError), Vec::new());
        let message = self.redact(&format!("{}: {why}", done.qualified()));
        err_map(Reason::UpstreamError, &message, done.mutation())
    }
}

impl RunState {
    /// The run's tape (off unless set).
    pub(super) fn tape(&self) -> &Tape {
        static OFF: Tape = Tape::Off;
        self.tape.get().unwrap_or(&OFF)
    }

    /// One upstream call within the run's budgets: resolve and validate, then [`Self::send`].
    /// Every call that passes validation is one entry of the run's tape: recorded, or matched
    /// to the recorded call that answers it.
    pub(super) async fn call(
        &self,
        server: &str,
        tool: &str,
        req_args: serde_json::Map<String, serde_json::Value>,
        deadline: Option<Instant>,
    ) -> CallOutcome {
        let up = &self.upstreams;
        let prepared = match up.prepare(server, tool, req_args, &self.on_behalf()).await {
            Ok(p) => p,
            Err(e) => {
                if let Some(unlisted) = self.tape().unlisted(up, server, &e) {
                    return CallOutcome::failed(unlisted, None, None);
                }
                // A disabled write is recorded as one: the records show every write attempt.
                let disabled = (e.reason == Reason::WriteDisabled)
                    .then(|| up.catalog().server(server).and_then(|s| s.tool(tool)).ok())
                    .flatten();
                let names = disabled.map(|t| (t.server.clone(), t.name.clone()));
                let write = disabled.map(|t| write_record(t.classified.effect, None, None));
                return CallOutcome::failed(e, names, write);
            }
        };
        let names = (prepared.tool.server.clone(), prepared.tool.name.clone());
        let taped = match self
            .tape()
            .begin(&names.0, &names.1, &prepared.args, up.redactor())
        {
            Ok(t) => t,
            Err(diverged) => return CallOutcome::failed(diverged, Some(names), None),
        };
        let outcome = self.send(prepared, names, deadline, &taped).await;
        taped.end(&outcome.result);
        outcome
    }

    /// A validated call: the grant, a call from the budget, a person's approval where the tool
    /// needs it, the request within the bytes left. Replaying, the recording answers in place of
    /// the request, and gives the policy's refusals and the approvals.
    pub(super) async fn send(
        &self,
        prepared: crate::call::upstreams::Prepared<'_>,
        names: (String, String),
        deadline: Option<Instant>,
        taped: &TapeCall,
    ) -> CallOutcome {
        let up = &self.upstreams;
        if let Err(message) = self.grant.check(prepared.tool) {
            let e = ToolError {
                reason: Reason::Forbidden,
                message: format!("{message}; nothing was sent"),
            };
            return CallOutcome::failed(e, Some(names), None);
        }
        if let Some(e) = taped.policy_refusal() {
            return CallOutcome::failed(e, Some(names), None);
        }
        let at = up.catalog().servers()[prepared.server]
            .tools()
            .and_then(|tools| tools.iter().position(|t| std::ptr::eq(t, prepared.tool)))
            .map(|i| (prepared.server, i));
        let classified = prepared.tool.classified;
        if self.calls.fetch_add(1, Ordering::Relaxed) >= self.budgets.max_calls {
            let e = ToolError {
                reason: Reason::CapExhausted,
                message: format!(
                    "{}/{}: the program's budget of {} upstream calls is spent; do more \
                     with fewer calls (filters, larger pages)",
                    names.0, names.1, self.budgets.max_calls
                ),
            };
            return CallOutcome::failed(e, Some(names), None);
        }
        let used = self.bytes.load(Ordering::Relaxed);
        let left = self.budgets.max_bytes.saturating_sub(used);
        if left == 0 {
            let e = byte_budget_spent(&names, self.budgets.max_bytes);
            return CallOutcome::failed(e, Some(names), None);
        }
        let mut options = CallOptions {
            deadline,
            ..self.on_behalf()
        };
        let mut write = None;
        if !classified.effect.is_read() {
            let key = IdempotencyKey::of(self.run_id, &names.0, &names.1, &prepared.args);
            let repeat = self
                .indeterminate
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(&key);
            if repeat {
                let e = ToolError {
                    reason: Reason::WriteIndeterminate,
                    message: format!(
                        "{}/{}: not sent again: the same write earlier in this program has an \
                         unknown outcome (it may have happened); read the upstream's state \
                         before writing again",
                        names.0, names.1
                    ),
                };
                let record = write_record(classified.effect, None, Some(MutationState::NotApplied));
                return CallOutcome::failed(e, Some(names), Some(record));
            }
            let approval = if crate::call::writes::needs_approval(classified) {
                let decided = match taped.recorded_approval() {
                    Some(recorded) => recorded,
                    None => self.approve(&prepared, deadline).await,
                };
                match decided {
                    Ok(()) => {
                        taped.approved(ApprovalOutcome::Approved);
                        Some(ApprovalOutcome::Approved)
                    }
                    Err((e, outcome)) => {
                        taped.approved(outcome);
                        let record = write_record(classified.effect, Some(outcome), None);
                        return CallOutcome::failed(e, Some(names), Some(record));
                    }
                }
            } else {
                None
            };
            if classified.effect == Effect::Write {
                options.idempotency_key = Some(key);
            }
            write = Some((key, approval));
        }
        // A too-large answer is the program's budget's fault only when the budget, not the
        // tool's own cap, was the smaller limit.
        let budget_binds =
            ResponseCap::of(prepared.tool.max_response_bytes, Some(left)).budget_binds;
        let result = match taped.replayed() {
            Some(recorded) => recorded.answer(deadline).await,
            None => up.execute(prepared, options, Some(left)).await,
        };
        taped.executed(&result, deadline, up.redactor());
        let result = match result {
            Err(e) if e.reason == Reason::ResponseTooLarge && budget_binds => {
                Err(byte_budget_spent(&names, self.budgets.max_bytes))
            }
            other => other,
        };
        let write = write.map(|(key, approval)| {
            let mutation = (classified.effect == Effect::Write)
                .then(|| MutationState::of(result.as_ref().map(|_| ()).map_err(|e| e.reason)));
            if mutation == Some(MutationState::Indeterminate) {
                self.indeterminate
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key);
            }
            write_record(classified.effect, approval, mutation)
        });
        CallOutcome {
            result,
            names: Some(names),
            write,
            at,
        }
    }
}

pub(super) fn write_record(
    effect: Effect,
    approval: Option<ApprovalOutcome>,
    mutation_state: Option<MutationState>,
) -> WriteRecord {
    WriteRecord {
        effect,
        approval,
        mutation_state,
    }
}

pub(super) fn byte_budget_spent(names: &(String, String), max: u64) -> ToolError {
    ToolError {
        reason: Reason::CapExhausted,
        message: format!(
            "{}/{}: the program's budget of {max} upstream bytes is spent; ask for less \
             (filters, summary modes, smaller pages)",
            names.0, names.1
        ),
    }
}
