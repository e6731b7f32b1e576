//! One audit line per evaluation (tracing target `ptc::audit`): the caller's subject, the tool
//! called (`lisp_eval`, or the declared program), the program's hash, the upstream
//! calls (names and outcomes only; for a write also its approval and what it did), the outcome,
//! durations and byte counts. Never program text, payloads, results or secrets.

use crate::program::run_report::UpstreamCall;
use crate::server::outcome::EvalOutcome;

/// Emits the audit line of one evaluation of `program`, whose [`program_hash`](crate::program::program_hash) is `hash`.
pub fn record(program: &str, hash: &str, outcome: &EvalOutcome) {
    let calls: Vec<String> = outcome
        .records
        .upstream_calls
        .iter()
        .map(call_text)
        .collect();
    let (outcome_name, reason) = match &outcome.result {
        Ok(_) => ("ok", ""),
        Err(e) => ("error", e.reason.as_str()),
    };
    let m = &outcome.records.ptc_metrics;
    tracing::info!(
        target: "ptc::audit",
        caller = %outcome.caller,
        tool = outcome.tool.as_deref().unwrap_or(crate::server::tool::NAME),
        program_sha256 = hash,
        program_bytes = program.len(),
        outcome = outcome_name,
        reason,
        duration_ms = outcome.duration.as_secs_f64() * 1e3,
        upstream_call_count = m.upstream_call_count,
        upstream_calls = %calls.join(","),
        upstream_result_bytes = m.upstream_result_bytes,
        result_bytes = m.final_result_bytes,
        prints_bytes = outcome.prints.len(),
        "eval"
    );
}

/// One call in the audit line: `server/tool:outcome:12ms`, for a write
/// `:write:approved:applied` (its effect, the approval when one was asked, what it did), and
/// `:drift=2` when fields of the answer did not match the tool's output schema.
fn call_text(c: &UpstreamCall) -> String {
    let outcome = c.reason.map_or("ok", |r| r.as_str());
    let mut text = format!("{}/{}:{outcome}:{}ms", c.server, c.tool, c.duration_ms);
    if let Some(w) = &c.write {
        text.push(':');
        text.push_str(w.effect.as_str());
        if let Some(a) = w.approval {
            text.push(':');
            text.push_str(a.as_str());
        }
        if let Some(m) = w.mutation_state {
            text.push(':');
            text.push_str(m.as_str());
        }
    }
    if !c.drift.is_empty() {
        text.push_str(&format!(":drift={}", c.drift.len()));
    }
    text
}

#[cfg(test)]
mod tests {
    use crate::call::contract::Reason;
    use crate::call::writes::MutationState;
    use crate::program::run_report::{ApprovalOutcome, UpstreamCall, WriteRecord};

    #[test]
    fn a_call_says_its_outcome_and_a_write_what_it_did() {
        let mut c = UpstreamCall {
            server: "obs".into(),
            tool: "annotate".into(),
            reason: None,
            duration_ms: 12,
            result_bytes: 3,
            write: None,
            drift: Vec::new(),
        };
        assert_eq!(super::call_text(&c), "obs/annotate:ok:12ms");
        c.write = Some(WriteRecord {
            effect: ptc_plan::Effect::Write,
            approval: Some(ApprovalOutcome::Approved),
            mutation_state: Some(MutationState::Applied),
        });
        assert_eq!(
            super::call_text(&c),
            "obs/annotate:ok:12ms:write:approved:applied"
        );
        c.reason = Some(Reason::ApprovalDeclined);
        c.write = Some(WriteRecord {
            effect: ptc_plan::Effect::SafeQuery,
            approval: Some(ApprovalOutcome::Declined),
            mutation_state: None,
        });
        assert_eq!(
            super::call_text(&c),
            "obs/annotate:approval_declined:12ms:safe_query:declined"
        );
        c.write = Some(WriteRecord {
            effect: ptc_plan::Effect::Write,
            approval: None,
            mutation_state: Some(MutationState::Indeterminate),
        });
        assert_eq!(
            super::call_text(&c),
            "obs/annotate:approval_declined:12ms:write:indeterminate"
        );
        c.write = None;
        c.reason = None;
        c.drift = vec!["/*/status: x".into(), "/*/id: y".into()];
        assert_eq!(super::call_text(&c), "obs/annotate:ok:12ms:drift=2");
    }
}
