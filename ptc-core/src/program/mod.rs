//! One program run: its [`limits`], the PTC-Lisp [`host`] that serves `tool/call`, `tool/pages` and upstream
//! discovery to a program within its budgets, the static [`precheck`] of its literal calls, what
//! the run reports ([`run_report`]: its upstream calls and metrics), and [`record_replay`] (a
//! run written to a file and run again offline). [`run`] runs a program to its end outside the MCP host;
//! [`declared`] runs a deployment's declared program with typed arguments.

pub mod declared;
pub mod host;
pub mod limits;
pub mod precheck;
pub mod record_replay;
pub mod run;
pub mod run_report;

use sha2::{Digest, Sha256};

/// The program's SHA-256, hex: identifies a program across logs without storing it.
pub fn program_hash(program: &str) -> String {
    use std::fmt::Write;
    let digest = Sha256::digest(program.as_bytes());
    let mut hex = String::with_capacity(2 * digest.len());
    for b in digest {
        let _ = write!(hex, "{b:02x}");
    }
    hex
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
