//! The limits table: every limit's default, written once here. [`Budgets`] (what one program
//! may spend upstream), the host's evaluation, session and HTTP limits
//! (the MCP host's `EvalLimits`, `SessionOptions`, `HttpOptions`) and the flags of
//! `ptc serve` and `ptc eval` (their clap defaults) all read these constants.

use std::time::Duration;

/// Wall-clock time one program may run: the interpreter's own default.
pub const PROGRAM_TIMEOUT: Duration = ptc_lisp::Limits::DEFAULT_TIMEOUT;
/// Memory one program may allocate in a host shared with other programs.
pub const MEMORY_BYTES: u64 = 64 << 20;
/// Programs in flight at once across every client of a host.
pub const MAX_CONCURRENT: usize = 1024;
/// Programs in flight at once for one MCP session.
pub const MAX_PER_SESSION: usize = 4;
/// Requests that may wait for their turn (in the host's queue, and in each session's).
pub const MAX_QUEUE: usize = 1024;
/// Upstream calls (`tool/call`, each page of `tool/pages`) per program.
pub const MAX_CALLS: u64 = 50;
/// Discovery operations on upstreams (`tool/servers`, `dir`, `doc`, `meta`, `apropos`,
/// `tool/search`) per program.
pub const MAX_DISCOVERY: u64 = 25;
/// Bytes a program may fetch from upstreams, all calls together.
pub const MAX_UPSTREAM_BYTES: u64 = 64 << 20;
/// How long a person has to approve one call (the program's own timeout bounds it too).
pub const APPROVAL_WAIT: Duration = Duration::from_secs(120);
/// How long a person at the terminal has to give an upstream their OAuth consent (open the URL,
/// consent, and be sent back).
pub const CONSENT_WAIT: Duration = Duration::from_secs(300);
/// Sessions one MCP upstream called as the caller holds at once (one per caller); the least
/// recently used is closed to make room.
pub const MAX_CALLER_SESSIONS: usize = 256;
/// How long such a session is kept unused before it is closed.
pub const CALLER_SESSION_IDLE: Duration = Duration::from_secs(600);
/// Bytes of program text a client may send.
pub const MAX_PROGRAM_BYTES: usize = 64 << 10;
/// Bytes of rendered result text in a reply (beyond it, a truncation marker).
pub const MAX_OUTPUT_BYTES: usize = 64 << 10;
/// Bytes of `context` (as JSON) a request may carry.
pub const MAX_CONTEXT_BYTES: usize = 4 << 20;

/// How long an unused session's state is kept (`--sessions`).
pub const SESSION_TTL: Duration = Duration::from_secs(30 * 60);
/// Largest state one session keeps, in bytes.
pub const SESSION_MAX_BYTES: usize = 1 << 20;
/// Largest request body the HTTP host reads.
pub const HTTP_MAX_BODY_BYTES: usize = 4 << 20;
/// Time until the HTTP host's response starts.
pub const HTTP_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// What one program may spend upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
            max_calls: MAX_CALLS,
            max_discovery: MAX_DISCOVERY,
            max_bytes: MAX_UPSTREAM_BYTES,
            approval_wait: APPROVAL_WAIT,
        }
    }
}

/// A duration as the whole milliseconds a flag takes (`--timeout-ms`).
pub const fn millis(d: Duration) -> u64 {
    d.as_millis() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_is_the_whole_milliseconds_its_flag_takes() {
        assert_eq!(millis(Duration::from_micros(1_234_999)), 1234);
        assert_eq!(millis(Duration::ZERO), 0);
    }
}
