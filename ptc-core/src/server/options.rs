//! The host's limits, with safe defaults. Each is a flag of `ptc serve`.

use std::time::Duration;

use ptc_lisp::Limits;

use crate::host::Budgets;

/// Limits on evaluations served to clients.
#[derive(Clone, Debug)]
pub struct EvalLimits {
    /// Wall-clock limit of one program.
    pub program_timeout: Duration,
    /// Memory one program may allocate.
    pub memory_bytes: u64,
    /// Memory all running programs together may hold; an eval that would pass it is refused
    /// with `busy` (never an out-of-memory kill).
    pub memory_budget_bytes: u64,
    /// Evaluations running at once, across every client; past it, `busy`.
    pub max_concurrent: usize,
    /// Evaluations running at once for one MCP session (one client); past it, `busy`.
    pub max_per_session: usize,
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
}

impl Default for EvalLimits {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let max_concurrent = (cores * 2).clamp(2, 16);
        let memory_bytes = 64 << 20;
        EvalLimits {
            program_timeout: Duration::from_secs(10),
            memory_bytes,
            // Sized so every concurrent eval can use its full budget.
            memory_budget_bytes: memory_bytes * max_concurrent as u64,
            max_concurrent,
            max_per_session: 4,
            max_calls: 50,
            max_upstream_bytes: 64 << 20,
            max_program_bytes: 64 << 10,
            max_output_bytes: 64 << 10,
            max_context_bytes: 4 << 20,
        }
    }
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
