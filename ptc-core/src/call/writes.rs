//! Writes at run time: the process's write gate, whether a catalog entry may be called now, the
//! idempotency key a write carries, and what a write's failure leaves the world in. (What a tool
//! *is* — its effect and approval — was decided by `ptc_plan::effects`; how a person approves
//! is [`crate::call::approval`].)

use std::fmt;

use ptc_plan::effects::{Classified, Refusal};
use ptc_plan::{Approval, Effect};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::call::contract::Reason;

/// The environment variable that opens the write gate (`1` or `true`), as `--allow-writes` does.
pub const GATE_ENV: &str = "PTC_ALLOW_WRITES";

/// Whether this process lets allow-listed writes (and safe queries) run at all. Closed by
/// default: an allow-listed write is then visible in discovery, disabled, and `tool/call`
/// answers `write_disabled` without a request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WriteGate {
    /// Writes are refused.
    #[default]
    Closed,
    /// Allow-listed writes run (after approval where the config asks for it).
    Open,
}

impl WriteGate {
    /// The gate `flag` (`--allow-writes`) or the environment's [`GATE_ENV`] asks for: open when
    /// either says so. An unreadable value of the variable is an error naming it.
    pub fn from_flag_and_env(flag: bool) -> Result<WriteGate, String> {
        let env = match std::env::var(GATE_ENV) {
            Ok(v) => match v.trim() {
                "1" | "true" => true,
                "" | "0" | "false" => false,
                other => {
                    return Err(format!(
                        "{GATE_ENV} is `{other}`; set it to 1/true to allow writes, or 0/false"
                    ));
                }
            },
            Err(_) => false,
        };
        Ok(if flag || env {
            WriteGate::Open
        } else {
            WriteGate::Closed
        })
    }
}

/// Why a tool cannot be called in this process, or `None` when it can: a write the config does
/// not allow-list, or any non-read while the gate is closed.
pub(crate) fn disabled_reason(
    classified: &Result<Classified, Refusal>,
    gate: WriteGate,
) -> Option<String> {
    match classified {
        Ok(c) if c.effect.is_read() => None,
        Ok(c) if gate == WriteGate::Closed => Some(format!(
            "a {} and this process runs with writes off (start it with --allow-writes or \
             {GATE_ENV}=1)",
            effect_name(c.effect)
        )),
        Ok(_) => None,
        Err(_) => Some(
            "a write the config does not allow-list (add it to the upstream's allow_writes)"
                .to_string(),
        ),
    }
}

fn effect_name(effect: Effect) -> &'static str {
    match effect {
        Effect::Read => "read",
        Effect::SafeQuery => "safe query",
        Effect::Write => "write",
    }
}

/// What a write's call did to the world, as far as ptc can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MutationState {
    /// The upstream answered that it did it.
    Applied,
    /// It did not happen: refused before sending, or the upstream refused it.
    NotApplied,
    /// Unknown: the request may have arrived (a timeout, a connection lost after sending, a
    /// server or gateway error, an answer ptc could not read).
    Indeterminate,
}

impl MutationState {
    /// The contract name: `applied`, `not_applied`, `indeterminate`.
    pub fn as_str(self) -> &'static str {
        match self {
            MutationState::Applied => "applied",
            MutationState::NotApplied => "not_applied",
            MutationState::Indeterminate => "indeterminate",
        }
    }

    /// The state a write's outcome leaves: a success applied; a failure by its reason. When ptc
    /// cannot tell whether the request reached the upstream and was acted on, it says so.
    pub fn of(outcome: Result<(), Reason>) -> MutationState {
        match outcome {
            Ok(()) => MutationState::Applied,
            // The answer was too large to read, but the upstream answered success.
            Err(Reason::ResponseTooLarge) => MutationState::Applied,
            Err(Reason::Timeout | Reason::UpstreamUnavailable | Reason::UpstreamError) => {
                MutationState::Indeterminate
            }
            Err(_) => MutationState::NotApplied,
        }
    }
}

impl fmt::Display for MutationState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One program run's identity for its writes' idempotency keys: random, never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunId([u8; 16]);

impl RunId {
    /// A fresh random id.
    pub fn new() -> RunId {
        RunId(random_id())
    }
}

/// 16 bytes from the OS generator: run ids, approval handles. It does not fail on the platforms
/// ptc runs on; if it ever did, a time-derived value still differs between calls.
pub(crate) fn random_id() -> [u8; 16] {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        bytes = nanos.to_le_bytes();
    }
    bytes
}

impl Default for RunId {
    fn default() -> Self {
        RunId::new()
    }
}

/// A write's idempotency key: the same for the same call (upstream, tool, arguments) in one
/// run, so a repeat the upstream receives twice is one write; different across runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IdempotencyKey([u8; 16]);

impl IdempotencyKey {
    /// The key of calling `server/tool` with `args` in run `run`.
    pub fn of(run: RunId, server: &str, tool: &str, args: &Map<String, Value>) -> Self {
        let mut h = Sha256::new();
        h.update(run.0);
        for part in [server, tool] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
        // Keys in the order given: the program wrote them; the same call gives the same text.
        h.update(Value::Object(args.clone()).to_string().as_bytes());
        let digest = h.finalize();
        let mut key = [0u8; 16];
        key.copy_from_slice(&digest[..16]);
        IdempotencyKey(key)
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// What approval a call of this classification waits for: only non-reads the config marks
/// `always`.
pub(crate) fn needs_approval(classified: Classified) -> bool {
    !classified.effect.is_read() && classified.approval == Approval::Always
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn write(approval: Approval) -> Classified {
        Classified {
            effect: Effect::Write,
            approval,
        }
    }

    #[test]
    fn the_gate_and_the_allow_list_decide_what_is_callable() {
        let read = Ok(Classified::default());
        let query = Ok(Classified {
            effect: Effect::SafeQuery,
            approval: Approval::None,
        });
        assert_eq!(disabled_reason(&read, WriteGate::Closed), None);
        assert_eq!(disabled_reason(&read, WriteGate::Open), None);
        assert_eq!(
            disabled_reason(&Ok(write(Approval::Always)), WriteGate::Closed).as_deref(),
            Some(
                "a write and this process runs with writes off (start it with --allow-writes \
                 or PTC_ALLOW_WRITES=1)"
            )
        );
        assert!(
            disabled_reason(&query, WriteGate::Closed)
                .is_some_and(|r| r.starts_with("a safe query and"))
        );
        assert_eq!(
            disabled_reason(&Ok(write(Approval::None)), WriteGate::Open),
            None
        );
        assert_eq!(disabled_reason(&query, WriteGate::Open), None);
        for gate in [WriteGate::Closed, WriteGate::Open] {
            assert_eq!(
                disabled_reason(&Err(Refusal::NotAllowListed), gate).as_deref(),
                Some(
                    "a write the config does not allow-list (add it to the upstream's allow_writes)"
                )
            );
        }
    }

    #[test]
    fn approval_is_asked_for_non_reads_marked_always() {
        assert!(needs_approval(write(Approval::Always)));
        assert!(!needs_approval(write(Approval::None)));
        assert!(needs_approval(Classified {
            effect: Effect::SafeQuery,
            approval: Approval::Always
        }));
        assert!(!needs_approval(Classified {
            effect: Effect::Read,
            approval: Approval::Always
        }));
    }

    #[test]
    fn mutation_states() {
        assert_eq!(MutationState::of(Ok(())), MutationState::Applied);
        assert_eq!(
            MutationState::of(Err(Reason::ResponseTooLarge)),
            MutationState::Applied
        );
        for r in [
            Reason::Timeout,
            Reason::UpstreamUnavailable,
            Reason::UpstreamError,
        ] {
            assert_eq!(
                MutationState::of(Err(r)),
                MutationState::Indeterminate,
                "{r}"
            );
        }
        for r in Reason::ALL.into_iter().filter(|r| {
            !matches!(
                r,
                Reason::Timeout
                    | Reason::UpstreamUnavailable
                    | Reason::UpstreamError
                    | Reason::ResponseTooLarge
            )
        }) {
            assert_eq!(MutationState::of(Err(r)), MutationState::NotApplied, "{r}");
        }
        assert_eq!(MutationState::Indeterminate.to_string(), "indeterminate");
        assert_eq!(MutationState::NotApplied.as_str(), "not_applied");
        assert_eq!(MutationState::Applied.as_str(), "applied");
    }

    #[test]
    fn idempotency_keys_are_per_run_and_call() {
        let run = RunId::new();
        let args = json!({"id": "tr_1", "body": {"label": "x"}});
        let args = args.as_object().unwrap();
        let key = IdempotencyKey::of(run, "obs", "annotate", args);
        assert_eq!(key, IdempotencyKey::of(run, "obs", "annotate", args));
        assert_eq!(key.to_string().len(), 32);
        assert!(key.to_string().bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(
            key,
            IdempotencyKey::of(RunId::new(), "obs", "annotate", args)
        );
        assert_ne!(key, IdempotencyKey::of(run, "obs", "annotat", args));
        assert_ne!(key, IdempotencyKey::of(run, "ob", "sannotate", args));
        let other = json!({"id": "tr_2", "body": {"label": "x"}});
        assert_ne!(
            key,
            IdempotencyKey::of(run, "obs", "annotate", other.as_object().unwrap())
        );
    }

    #[test]
    fn the_gate_reads_its_flag() {
        // The environment is process-wide; only the flag is exercised here (the variable is
        // tested through the binary, which reads it once at start).
        if std::env::var(GATE_ENV).is_err() {
            assert_eq!(WriteGate::from_flag_and_env(false), Ok(WriteGate::Closed));
        }
        assert_eq!(WriteGate::from_flag_and_env(true), Ok(WriteGate::Open));
    }
}
