//! Per-run records: one [`UpstreamCall`] per `tool/call`, and the run's [`Metrics`], for the host
//! to report (`ptc eval --metrics` prints them).

use serde::Serialize;
use serde::ser::SerializeStruct;

use crate::call::contract::Reason;
use crate::call::writes::MutationState;

/// One upstream call a program made.
#[derive(Clone, Debug, PartialEq)]
pub struct UpstreamCall {
    /// Upstream name.
    pub server: String,
    /// Tool name.
    pub tool: String,
    /// Why the call failed; `None` when it produced a value.
    pub reason: Option<Reason>,
    /// Wall-clock time of the call.
    pub duration_ms: u64,
    /// Bytes the upstream answered with (0 for failures without a body).
    pub result_bytes: u64,
    /// For a call of a tool that is not a read: its effect, the approval and what it did.
    pub write: Option<WriteRecord>,
    /// Fields of the answer that did not match the tool's output schema (`path: what`).
    pub drift: Vec<String>,
}

/// What the records say of a write (or safe query) call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteRecord {
    /// `write` or `safe_query`.
    pub effect: ptc_plan::Effect,
    /// The person's answer, when one was asked for.
    pub approval: Option<ApprovalOutcome>,
    /// What a write did to the world (`None` for a safe query, or a call refused before it
    /// could be sent for a reason that says so: disabled, declined).
    pub mutation_state: Option<MutationState>,
}

/// How the approval of one call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApprovalOutcome {
    /// A person said yes.
    Approved,
    /// A person said no, or did not answer in time.
    Declined,
    /// Nobody could be asked.
    Unavailable,
}

impl ApprovalOutcome {
    /// Every outcome.
    pub const ALL: [ApprovalOutcome; 3] = [
        ApprovalOutcome::Approved,
        ApprovalOutcome::Declined,
        ApprovalOutcome::Unavailable,
    ];

    /// `approved`, `declined`, `unavailable`.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalOutcome::Approved => "approved",
            ApprovalOutcome::Declined => "declined",
            ApprovalOutcome::Unavailable => "unavailable",
        }
    }

    /// The outcome called `name` (its [`ApprovalOutcome::as_str`]).
    pub fn from_name(name: &str) -> Option<ApprovalOutcome> {
        ApprovalOutcome::ALL
            .into_iter()
            .find(|a| a.as_str() == name)
    }
}

/// As its name: how run files keep it.
impl Serialize for ApprovalOutcome {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for ApprovalOutcome {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = <String as serde::Deserialize>::deserialize(deserializer)?;
        ApprovalOutcome::from_name(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown approval `{name}` (approved, declined or unavailable)"
            ))
        })
    }
}

impl UpstreamCall {
    /// `ok` or `error`, as the records show it.
    pub fn status(&self) -> &'static str {
        if self.reason.is_none() { "ok" } else { "error" }
    }
}

/// The reply shape: `status` is derived from `reason`, so the two can never disagree.
impl Serialize for UpstreamCall {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("UpstreamCall", 10)?;
        s.serialize_field("server", &self.server)?;
        s.serialize_field("tool", &self.tool)?;
        s.serialize_field("status", self.status())?;
        match self.reason {
            Some(r) => s.serialize_field("reason", r.as_str())?,
            None => s.skip_field("reason")?,
        }
        s.serialize_field("duration_ms", &self.duration_ms)?;
        s.serialize_field("result_bytes", &self.result_bytes)?;
        match &self.write {
            Some(w) => {
                s.serialize_field("effect", w.effect.as_str())?;
                match w.approval {
                    Some(a) => s.serialize_field("approval", a.as_str())?,
                    None => s.skip_field("approval")?,
                }
                match w.mutation_state {
                    Some(m) => s.serialize_field("mutation_state", m.as_str())?,
                    None => s.skip_field("mutation_state")?,
                }
            }
            None => {
                s.skip_field("effect")?;
                s.skip_field("approval")?;
                s.skip_field("mutation_state")?;
            }
        }
        if self.drift.is_empty() {
            s.skip_field("drift")?;
        } else {
            s.serialize_field("drift", &self.drift)?;
        }
        s.end()
    }
}

/// Payload metrics of one run (`ptc_metrics`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Metrics {
    /// Calls made (budget refusals included).
    pub upstream_call_count: u64,
    /// Calls that produced a value.
    pub upstream_ok_count: u64,
    /// Calls that failed.
    pub upstream_error_count: u64,
    /// Bytes of successful upstream answers.
    pub upstream_result_bytes: u64,
    /// Bytes of the program's result as JSON.
    pub final_result_bytes: u64,
    /// `upstream_result_bytes / final_result_bytes`, rounded to 2 places; `None` when either is 0.
    pub payload_reduction_ratio: Option<f64>,
}

/// Everything a run recorded.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunRecords {
    /// The calls, in completion order.
    pub upstream_calls: Vec<UpstreamCall>,
    /// The metrics.
    pub ptc_metrics: Metrics,
}

impl RunRecords {
    /// Records for `calls` and a result of `final_result_bytes`.
    pub fn new(upstream_calls: Vec<UpstreamCall>, final_result_bytes: u64) -> Self {
        let ok: Vec<&UpstreamCall> = upstream_calls
            .iter()
            .filter(|c| c.reason.is_none())
            .collect();
        let upstream_result_bytes: u64 = ok.iter().map(|c| c.result_bytes).sum();
        let payload_reduction_ratio = if upstream_result_bytes == 0 || final_result_bytes == 0 {
            None
        } else {
            let r = upstream_result_bytes as f64 / final_result_bytes as f64;
            Some((r * 100.0).round() / 100.0)
        };
        let ptc_metrics = Metrics {
            upstream_call_count: upstream_calls.len() as u64,
            upstream_ok_count: ok.len() as u64,
            upstream_error_count: (upstream_calls.len() - ok.len()) as u64,
            upstream_result_bytes,
            final_result_bytes,
            payload_reduction_ratio,
        };
        RunRecords {
            upstream_calls,
            ptc_metrics,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(status: &'static str, bytes: u64) -> UpstreamCall {
        UpstreamCall {
            server: "s".into(),
            tool: "t".into(),
            reason: (status == "error").then_some(Reason::Timeout),
            duration_ms: 1,
            result_bytes: bytes,
            write: None,
            drift: Vec::new(),
        }
    }

    #[test]
    fn metrics_sum_successful_bytes_and_ratio() {
        let r = RunRecords::new(
            vec![call("ok", 1000), call("error", 50), call("ok", 234)],
            100,
        );
        assert_eq!(r.ptc_metrics.upstream_call_count, 3);
        assert_eq!(r.ptc_metrics.upstream_ok_count, 2);
        assert_eq!(r.ptc_metrics.upstream_error_count, 1);
        assert_eq!(r.ptc_metrics.upstream_result_bytes, 1234);
        assert_eq!(r.ptc_metrics.payload_reduction_ratio, Some(12.34));
        let shown = serde_json::to_value(&r.upstream_calls).expect("serializable");
        assert_eq!(
            shown,
            serde_json::json!([
                {"server": "s", "tool": "t", "status": "ok", "duration_ms": 1, "result_bytes": 1000},
                {"server": "s", "tool": "t", "status": "error", "reason": "timeout",
                 "duration_ms": 1, "result_bytes": 50},
                {"server": "s", "tool": "t", "status": "ok", "duration_ms": 1, "result_bytes": 234},
            ])
        );
        assert_eq!(
            RunRecords::new(vec![], 10)
                .ptc_metrics
                .payload_reduction_ratio,
            None
        );
    }

    #[test]
    fn a_write_shows_its_effect_approval_and_mutation_state() {
        let mut c = call("ok", 7);
        c.write = Some(WriteRecord {
            effect: ptc_plan::Effect::Write,
            approval: Some(ApprovalOutcome::Unavailable),
            mutation_state: Some(MutationState::NotApplied),
        });
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            serde_json::json!({"server": "s", "tool": "t", "status": "ok", "duration_ms": 1,
                "result_bytes": 7, "effect": "write", "approval": "unavailable",
                "mutation_state": "not_applied"})
        );
        c.write = Some(WriteRecord {
            effect: ptc_plan::Effect::SafeQuery,
            approval: None,
            mutation_state: None,
        });
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            serde_json::json!({"server": "s", "tool": "t", "status": "ok", "duration_ms": 1,
                "result_bytes": 7, "effect": "safe_query"})
        );
        assert_eq!(ApprovalOutcome::Approved.as_str(), "approved");
        assert_eq!(ApprovalOutcome::Declined.as_str(), "declined");
    }
}
