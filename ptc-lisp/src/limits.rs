//! Sandbox limits with safe defaults.

use std::time::Duration;

/// Every resource a program may use. `Default` gives safe defaults.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Wall-clock deadline for one evaluation (`timeout`).
    pub timeout: Option<Duration>,
    /// Evaluation steps (function calls and loop iterations) per evaluation (`timeout`).
    pub max_steps: Option<u64>,
    /// Bytes of values the program may hold at once, decoded tool results included
    /// (`memory_exceeded`). What it frees is given back.
    pub max_memory_bytes: u64,
    /// Iterations of one `loop`/`recur` (`loop_limit_exceeded`).
    pub max_loop_iterations: u64,
    /// Nested function calls (`depth_exceeded`).
    pub max_call_depth: usize,
    /// Nesting depth of source forms (`depth_exceeded`, reported as a parse error).
    pub max_reader_depth: usize,
    /// Nesting depth of decoded JSON (`depth_exceeded`).
    pub max_json_depth: usize,
    /// Program size in bytes (`parse_error`).
    pub max_program_bytes: usize,
    /// Bytes of captured `println` output; beyond it output is truncated.
    pub max_output_bytes: usize,
    /// Branches of one `pmap`/`pcalls` in flight at once (each on a stack of its own).
    pub max_workers: usize,
    /// Stack reserved for the evaluation thread; deep recursion errors before using it up.
    /// Values below 8 MiB are raised to 8 MiB.
    pub stack_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Some(Limits::DEFAULT_TIMEOUT),
            max_steps: Some(200_000_000),
            max_memory_bytes: 1 << 30,
            max_loop_iterations: 1_000_000,
            max_call_depth: 5_000,
            max_reader_depth: 256,
            max_json_depth: 512,
            max_program_bytes: 1 << 20,
            max_output_bytes: 64 * 1024,
            max_workers: 8,
            // The default call depth needs under 16 MiB in release builds; 32 MiB leaves room for
            // deep builtins and keeps thread start-up cheap (a 256 MiB stack costs ~45 µs more per
            // evaluation). Debug builds have frames several times larger, so they reserve more.
            stack_bytes: if cfg!(debug_assertions) {
                256 << 20
            } else {
                32 << 20
            },
        }
    }
}

impl Limits {
    /// Wall-clock time a program may run unless its host says otherwise (the MCP host and
    /// `ptc eval` default to it too).
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

    /// Why a program stopped early, in the words every place that stops one uses: a deadline
    /// that passed (while it computed or while it waited on its host) or the host's cancel.
    pub(crate) fn stop_message(&self, reason: crate::error::Reason) -> String {
        stop_message(reason, self.timeout)
    }

    /// The stack size actually used for evaluation threads.
    pub(crate) fn thread_stack(&self) -> usize {
        self.stack_bytes.max(8 << 20)
    }

    /// Limits with every bound switched off except the ones that protect the process
    /// (depths and stack), for benchmarking the cost of the sandbox.
    pub fn unlimited() -> Self {
        Limits {
            timeout: None,
            max_steps: None,
            max_memory_bytes: u64::MAX,
            max_loop_iterations: u64::MAX,
            max_output_bytes: usize::MAX,
            ..Limits::default()
        }
    }
}

/// [`Limits::stop_message`] for a program whose time limit is `timeout`.
pub(crate) fn stop_message(reason: crate::error::Reason, timeout: Option<Duration>) -> String {
    match reason {
        crate::error::Reason::Timeout => format!(
            "program exceeded its {} ms deadline",
            timeout.map_or(0, |t| t.as_millis())
        ),
        _ => "the evaluation was cancelled by the host".to_string(),
    }
}
