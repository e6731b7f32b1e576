//! A seeded synthetic trace dataset: the kind of JSON a trace API returns, at any size.
//!
//! Each trace: `{id, status, model, org_id, cost, latency_ms, tokens:{input,output},
//! steps:[1..6 × {tool, ok, ms, args:{q}}]}`; ~80% ok, ~10% error, ~10% timeout.

use std::fmt::Write as _;

/// SplitMix64: tiny, seeded, the same sequence on every machine.
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// Models in the dataset.
pub const MODELS: [&str; 8] = [
    "claude-sonnet-4",
    "claude-opus-4",
    "claude-haiku-4",
    "gpt-5",
    "gpt-5-mini",
    "gemini-2.5-pro",
    "gemini-2.5-flash",
    "llama-4-maverick",
];
const TOOLS: [&str; 12] = [
    "read_file",
    "write_file",
    "grep",
    "bash",
    "list_dir",
    "edit",
    "search_web",
    "fetch_url",
    "run_tests",
    "git_diff",
    "lint",
    "format",
];
const WORDS: [&str; 16] = [
    "error", "config", "timeout", "parser", "cache", "retry", "auth", "token", "schema", "query",
    "index", "metrics", "trace", "deploy", "build", "test",
];

/// A JSON array of traces of at least `target_bytes` bytes, the same for the same seed.
pub fn traces_json(target_bytes: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut out = String::with_capacity(target_bytes + 1024);
    out.push('[');
    let mut i = 0u64;
    while out.len() < target_bytes {
        if i > 0 {
            out.push(',');
        }
        let status = match rng.below(10) {
            0 => "error",
            1 => "timeout",
            _ => "ok",
        };
        let model = MODELS[rng.below(MODELS.len() as u64) as usize];
        let org = rng.below(40);
        let cost = rng.below(2_000_000) as f64 / 10_000.0;
        let _ = write!(
            out,
            r#"{{"id":"tr_{i:08}","status":"{status}","model":"{model}","org_id":"org_{org:02}","cost":{cost},"latency_ms":{},"tokens":{{"input":{},"output":{}}},"steps":["#,
            rng.below(120_000),
            rng.below(200_000),
            rng.below(20_000),
        );
        for s in 0..1 + rng.below(6) {
            if s > 0 {
                out.push(',');
            }
            let tool = TOOLS[rng.below(TOOLS.len() as u64) as usize];
            let ok = rng.below(8) != 0;
            let q = format!(
                "{} {} {}",
                WORDS[rng.below(16) as usize],
                WORDS[rng.below(16) as usize],
                rng.below(1000)
            );
            let _ = write!(
                out,
                r#"{{"tool":"{tool}","ok":{ok},"ms":{},"args":{{"q":"{q}"}}}}"#,
                rng.below(30_000)
            );
        }
        out.push_str("]}");
        i += 1;
    }
    out.push(']');
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_valid_json_of_the_requested_size() {
        let a = traces_json(100_000, 7);
        assert_eq!(a, traces_json(100_000, 7));
        assert_ne!(a, traces_json(100_000, 8));
        assert!(a.len() >= 100_000 && a.len() < 101_000);
        let v: serde_json::Value = serde_json::from_slice(&a).unwrap();
        let traces = v.as_array().unwrap();
        assert!(
            traces
                .iter()
                .all(|t| !t["steps"].as_array().unwrap().is_empty())
        );
        let errors = traces.iter().filter(|t| t["status"] == "error").count();
        let share = errors as f64 / traces.len() as f64;
        assert!((0.05..0.15).contains(&share), "{share}");
    }
}
