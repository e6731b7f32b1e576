//! `serde-plain FILE`: parse baselines for ptc-bench, in their own process so that serde_json is
//! built without `preserve_order`. It reads FILE once, then answers one command per stdin line
//! with one stdout line:
//!
//! - `serde` / `sonic`: parse FILE into `serde_json::Value` / `sonic_rs::Value` once and print the
//!   parse time in nanoseconds, the clock stopped before the value is freed, then the free time:
//!   `PARSE_NS FREE_NS`.
//! - `check-serde` / `check-sonic`: parse and print the length of the top-level array (or of the
//!   `traces` array inside a top-level object), so the caller knows both parsers read the data.
//! - `alloc`: the allocator's name.

use std::io::{BufRead, Write};
use std::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn timed<T>(parse: impl FnOnce() -> T) -> String {
    let t = Instant::now();
    let v = std::hint::black_box(parse());
    let took = t.elapsed().as_nanos();
    let t = Instant::now();
    drop(v);
    format!("{took} {}", t.elapsed().as_nanos())
}

fn serde_len(v: &serde_json::Value) -> usize {
    let v = v.get("traces").unwrap_or(v);
    v.as_array().map_or(0, Vec::len)
}

fn sonic_len(v: &sonic_rs::Value) -> usize {
    use sonic_rs::{JsonContainerTrait, JsonValueTrait};
    let v = v.get("traces").unwrap_or(v);
    v.as_array().map_or(0, |a| a.len())
}

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: serde-plain FILE");
        std::process::exit(2);
    };
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("serde-plain: cannot read {path}: {e}");
            std::process::exit(2);
        }
    };
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let answer = match line.trim() {
            "serde" => timed(|| serde_json::from_slice::<serde_json::Value>(&bytes).expect("JSON")),
            "sonic" => timed(|| sonic_rs::from_slice::<sonic_rs::Value>(&bytes).expect("JSON")),
            "check-serde" => {
                serde_len(&serde_json::from_slice(&bytes).expect("JSON")).to_string()
            }
            "check-sonic" => {
                sonic_len(&sonic_rs::from_slice(&bytes).expect("JSON")).to_string()
            }
            "alloc" => "mimalloc".to_string(),
            other => format!("error: unknown command {other:?}"),
        };
        if writeln!(out, "{answer}").and_then(|()| out.flush()).is_err() {
            break;
        }
    }
}
