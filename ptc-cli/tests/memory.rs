//! Memory limits that hold: a program stopped by `memory_exceeded` never pushed the process far
//! past its budget. Each program doubles a vector, a string, a map or a set until the budget
//! stops it; the peak RSS of `ptc eval` running it (read by GNU time, which starts the command
//! from its own small memory) stays within the budget + 10 % above the resting size of
//! `ptc eval` running `(+ 1 2)`.

use std::path::Path;
use std::process::Command;

/// GNU time (Debian package `time`; `scripts/test` checks for it).
const GNU_TIME: &str = "/usr/bin/time";

/// The doubling programs, by what they grow.
const DOUBLING: [(&str, &str); 4] = [
    (
        "vector",
        "(loop [v [1] i 0] (if (< i 64) (recur (into v v) (inc i)) (count v)))",
    ),
    (
        "string",
        r#"(loop [s "x" i 0] (if (< i 64) (recur (str s s) (inc i)) (count s)))"#,
    ),
    (
        "map",
        "(loop [m {0 0} i 0] (if (< i 64) (recur (merge m (into {} (map (fn [[k v]] [(+ k (count m)) v]) m))) (inc i)) (count m)))",
    ),
    (
        "set",
        "(loop [s #{0} i 0] (if (< i 64) (recur (into s (map #(+ % (count s)) s)) (inc i)) (count s)))",
    ),
];

/// Runs `ptc eval` on `program` with `--memory-bytes budget`: its peak RSS in bytes and stdout.
fn peak_rss(program: &str, budget: u64, name: &str) -> (u64, String) {
    let out_file =
        std::env::temp_dir().join(format!("ptc-memory-{name}-{budget}-{}", std::process::id()));
    let out = Command::new(GNU_TIME)
        .args(["-f", "%M", "-o"])
        .arg(&out_file)
        .arg(env!("CARGO_BIN_EXE_ptc"))
        .args(["eval", "--timeout-ms", "120000", "--memory-bytes"])
        .arg(budget.to_string())
        .args(["-e", program])
        .output()
        .expect("GNU time runs");
    let kib = std::fs::read_to_string(&out_file)
        .expect("GNU time wrote the peak")
        .trim()
        .lines()
        .last()
        .and_then(|l| l.parse::<u64>().ok())
        .expect("a number of KiB");
    let _ = std::fs::remove_file(&out_file);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (kib * 1024, said)
}

#[test]
fn a_program_stopped_for_memory_never_held_much_more_than_its_budget() {
    if !Path::new(GNU_TIME).is_file() {
        ptc_tests::skip("GNU time (/usr/bin/time) is not installed");
        return;
    }
    let budget: u64 = 64 << 20;
    let (resting, _) = peak_rss("(+ 1 2)", budget, "resting");
    for (name, program) in DOUBLING {
        let (peak, said) = peak_rss(program, budget, name);
        assert!(
            said.contains("memory_exceeded"),
            "{name}: stopped by its budget: {said}"
        );
        let allowed = resting + budget + budget / 10;
        assert!(
            peak <= allowed,
            "{name}: peak RSS {peak} bytes, more than resting {resting} + budget {budget} + 10 %"
        );
    }
}
