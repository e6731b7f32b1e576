//! One audit line per evaluation (tracing target `ptc::audit`): the program's hash, the upstream
//! calls (names and outcomes only), the outcome, durations and byte counts. Never program text,
//! payloads, results or secrets.

use sha2::{Digest, Sha256};

use crate::server::outcome::EvalOutcome;

/// The program's SHA-256, hex: identifies a program across logs without storing it.
pub fn program_hash(program: &str) -> String {
    let digest = Sha256::digest(program.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Emits the audit line of one evaluation.
pub fn record(program: &str, outcome: &EvalOutcome) {
    let calls: Vec<String> = outcome
        .records
        .upstream_calls
        .iter()
        .map(|c| match c.reason {
            Some(r) => format!("{}/{}:{r}:{}ms", c.server, c.tool, c.duration_ms),
            None => format!("{}/{}:ok:{}ms", c.server, c.tool, c.duration_ms),
        })
        .collect();
    let (outcome_name, reason) = match &outcome.result {
        Ok(_) => ("ok", ""),
        Err(e) => ("error", e.reason.as_str()),
    };
    let m = &outcome.records.ptc_metrics;
    tracing::info!(
        target: "ptc::audit",
        program_sha256 = %program_hash(program),
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

#[cfg(test)]
mod tests {
    #[test]
    fn the_program_hash_is_its_sha256_in_lower_hex() {
        assert_eq!(
            super::program_hash("(+ 1 2)"),
            "390e79ac6bb3f3b2240e1186fd2c94da4af3a66387965acbbfcf40853bd4a652"
        );
    }
}
