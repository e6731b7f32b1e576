//! The host's limits, with safe defaults (written once, in [`crate::program::limits`]). Each is
//! a flag of `ptc serve`.

use std::time::Duration;

use ptc_lisp::Limits;

use crate::program::limits::{self, Budgets};

/// Limits on evaluations served to clients.
#[derive(Clone, Debug)]
pub struct EvalLimits {
    /// Wall-clock limit of one program.
    pub program_timeout: Duration,
    /// Memory one program may allocate.
    pub memory_bytes: u64,
    /// Memory all programs in flight together may hold; an eval that would pass it waits in the
    /// queue (never an out-of-memory kill).
    pub memory_budget_bytes: u64,
    /// Programs in flight at once (computing or waiting on upstreams), across every client; past
    /// it, a request waits in the queue.
    pub max_concurrent: usize,
    /// Programs in flight at once for one MCP session (one client); past it, the session's
    /// requests wait in its queue.
    pub max_per_session: usize,
    /// Requests that may wait for their turn (in the host's queue, and in each session's); one
    /// more is refused with `busy`.
    pub max_queue: usize,
    /// How long a request waits for its turn before `busy`.
    pub queue_wait: Duration,
    /// Threads programs compute on (a program waiting on an upstream holds none).
    pub eval_threads: usize,
    /// Upstream calls per program.
    pub max_calls: u64,
    /// Bytes fetched from upstreams per program.
    pub max_upstream_bytes: u64,
    /// Program text size.
    pub max_program_bytes: usize,
    /// Bytes of the rendered result text in the reply (beyond it, a truncation marker).
    pub max_output_bytes: usize,
    /// Bytes of `context` (as JSON) a request may carry.
    pub max_context_bytes: usize,
    /// How long a person has to approve one call; the program's own timeout bounds it too.
    pub approval_timeout: Duration,
}

impl Default for EvalLimits {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        EvalLimits {
            program_timeout: limits::PROGRAM_TIMEOUT,
            memory_bytes: limits::MEMORY_BYTES,
            memory_budget_bytes: default_memory_budget(
                limits::MEMORY_BYTES,
                limits::MAX_CONCURRENT,
            ),
            max_concurrent: limits::MAX_CONCURRENT,
            max_per_session: limits::MAX_PER_SESSION,
            max_queue: limits::MAX_QUEUE,
            queue_wait: limits::PROGRAM_TIMEOUT,
            eval_threads: cores,
            max_calls: limits::MAX_CALLS,
            max_upstream_bytes: limits::MAX_UPSTREAM_BYTES,
            approval_timeout: limits::APPROVAL_WAIT,
            max_program_bytes: limits::MAX_PROGRAM_BYTES,
            max_output_bytes: limits::MAX_OUTPUT_BYTES,
            max_context_bytes: limits::MAX_CONTEXT_BYTES,
        }
    }
}

/// Enough for every program in flight to use its whole `memory_bytes`, but never more than half
/// of the machine's memory: past that, programs wait for memory in the queue.
pub fn default_memory_budget(memory_bytes: u64, max_concurrent: usize) -> u64 {
    let wanted = memory_bytes.saturating_mul(max_concurrent as u64);
    match physical_memory() {
        Some(total) => wanted.min((total / 2).max(memory_bytes)),
        None => wanted,
    }
}

/// The machine's memory (`MemTotal` of /proc/meminfo), where the platform says.
fn physical_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib = info
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<u64>()
        .ok()?;
    kib.checked_mul(1024)
}

impl EvalLimits {
    /// The interpreter limits of one eval.
    pub fn lisp_limits(&self) -> Limits {
        Limits {
            timeout: Some(self.program_timeout),
            max_memory_bytes: self.memory_bytes,
            max_program_bytes: self.max_program_bytes,
            ..Limits::default()
        }
    }

    /// The upstream budgets of one eval.
    pub fn budgets(&self) -> Budgets {
        Budgets {
            max_calls: self.max_calls,
            max_bytes: self.max_upstream_bytes,
            approval_wait: self.approval_timeout,
            ..Budgets::default()
        }
    }

    /// Checks the limits make sense together, naming the one that does not.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_concurrent == 0 {
            return Err("--max-concurrent must be at least 1".into());
        }
        if self.max_per_session == 0 {
            return Err("--max-per-session must be at least 1".into());
        }
        if self.eval_threads == 0 {
            return Err("--eval-threads must be at least 1".into());
        }
        if self.memory_bytes == 0 {
            return Err("--memory-bytes must be at least 1".into());
        }
        if self.memory_budget_bytes < self.memory_bytes {
            return Err(format!(
                "--memory-budget-bytes ({}) is below --memory-bytes ({}): no eval could ever run",
                self.memory_budget_bytes, self.memory_bytes
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_memory_budget_is_every_program_at_full_use_within_half_the_machine() {
        let half = physical_memory().expect("/proc/meminfo has MemTotal") / 2;
        assert_eq!(
            default_memory_budget(1 << 20, 4),
            4 << 20,
            "small: all of it"
        );
        assert_eq!(
            default_memory_budget(half, 2),
            half,
            "large: half the machine"
        );
        assert_eq!(
            default_memory_budget(half + 1, 1),
            half + 1,
            "never below one program's share"
        );
        assert_eq!(
            default_memory_budget(half - 1, 1),
            half - 1,
            "below half, what the programs need"
        );
    }

    #[test]
    fn each_limit_reaches_the_interpreter_or_the_budgets() {
        let limits = EvalLimits {
            program_timeout: Duration::from_millis(1500),
            memory_bytes: 1234,
            memory_budget_bytes: 1234,
            max_program_bytes: 99,
            max_calls: 7,
            max_upstream_bytes: 55,
            ..EvalLimits::default()
        };
        let lisp = limits.lisp_limits();
        assert_eq!(lisp.timeout, Some(Duration::from_millis(1500)));
        assert_eq!(lisp.max_memory_bytes, 1234);
        assert_eq!(lisp.max_program_bytes, 99);
        // Everything else is the interpreter's own default.
        let d = Limits::default();
        assert_eq!(
            (
                lisp.max_loop_iterations,
                lisp.max_call_depth,
                lisp.max_output_bytes
            ),
            (d.max_loop_iterations, d.max_call_depth, d.max_output_bytes)
        );
        let b = limits.budgets();
        assert_eq!((b.max_calls, b.max_bytes), (7, 55));
        assert_eq!(b.max_discovery, Budgets::default().max_discovery);
    }

    /// The defaults fit together; each relation fails at its boundary with its flag's name.
    #[test]
    fn limits_are_validated_at_their_boundaries() {
        let d = EvalLimits::default();
        assert_eq!(d.validate(), Ok(()));
        assert_eq!(
            d.memory_budget_bytes,
            default_memory_budget(d.memory_bytes, d.max_concurrent)
        );
        let with = |f: fn(&mut EvalLimits)| {
            let mut l = EvalLimits::default();
            f(&mut l);
            l.validate()
        };
        assert_eq!(
            with(|l| l.max_concurrent = 0),
            Err("--max-concurrent must be at least 1".into())
        );
        assert_eq!(with(|l| l.max_concurrent = 1), Ok(()));
        assert_eq!(
            with(|l| l.max_per_session = 0),
            Err("--max-per-session must be at least 1".into())
        );
        assert_eq!(with(|l| l.max_per_session = 1), Ok(()));
        assert_eq!(
            with(|l| l.eval_threads = 0),
            Err("--eval-threads must be at least 1".into())
        );
        assert_eq!(with(|l| l.eval_threads = 1), Ok(()));
        assert_eq!(
            with(|l| l.memory_bytes = 0),
            Err("--memory-bytes must be at least 1".into())
        );
        assert_eq!(
            with(|l| {
                l.memory_bytes = 100;
                l.memory_budget_bytes = 100;
            }),
            Ok(())
        );
        assert_eq!(
            with(|l| {
                l.memory_bytes = 100;
                l.memory_budget_bytes = 99;
            }),
            Err(
                "--memory-budget-bytes (99) is below --memory-bytes (100): no eval could ever run"
                    .into()
            )
        );
    }
}
