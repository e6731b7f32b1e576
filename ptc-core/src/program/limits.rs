//! The limits of one program run.

use std::time::Duration;

/// Per-program budgets.
#[derive(Clone, Copy, Debug)]
pub struct Budgets {
    /// Upstream calls (`tool/call`) per program.
    pub max_calls: u64,
    /// Discovery operations (`tool/servers`, `dir`, `doc`, `meta`, `apropos` on upstreams).
    pub max_discovery: u64,
    /// Bytes fetched from upstreams per program.
    pub max_bytes: u64,
    /// How long a person has to approve one call (within the program's own time).
    pub approval_wait: Duration,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            max_calls: 50,
            max_discovery: 25,
            max_bytes: 64 << 20,
            approval_wait: Duration::from_secs(120),
        }
    }
}
