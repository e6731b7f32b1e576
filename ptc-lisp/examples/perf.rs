//! Quick performance probe: decode a synthetic trace dataset and run the P1-P5 queries,
//! beside `serde_json::Value` parsing and hand-written Rust over it.
//! Run: `cargo run --release -p ptc-lisp --example perf -- [megabytes]`.

use std::time::Instant;

use ptc_lisp::{Interpreter, Limits, Value};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn traces(target_bytes: usize) -> String {
    let models = [
        "gpt-4o",
        "gpt-4o-mini",
        "claude-3",
        "claude-3.5",
        "gemini-1.5",
        "llama-3",
        "mistral",
        "o1",
    ];
    let tools = ["search", "fetch", "sql", "python", "browse", "calc"];
    let mut r = Rng(42);
    let mut s = String::from("[");
    let mut i = 0;
    while s.len() < target_bytes {
        if i > 0 {
            s.push(',');
        }
        let status = match r.below(10) {
            0 => "error",
            1 => "timeout",
            _ => "ok",
        };
        let mut steps = String::new();
        for j in 0..1 + r.below(6) {
            if j > 0 {
                steps.push(',');
            }
            steps.push_str(&format!(
                r#"{{"tool":"{}","ok":{},"ms":{},"args":{{"q":"query {}"}}}}"#,
                tools[r.below(6) as usize],
                r.below(5) != 0,
                r.below(2000),
                r.below(100000)
            ));
        }
        s.push_str(&format!(
            r#"{{"id":"t-{i}","status":"{status}","model":"{}","cost":{:.4},"org_id":"org-{}","latency_ms":{},"tokens":{{"input":{},"output":{}}},"steps":[{steps}]}}"#,
            models[r.below(8) as usize],
            r.below(100000) as f64 / 10000.0,
            r.below(50),
            r.below(30000),
            r.below(8000),
            r.below(2000)
        ));
        i += 1;
    }
    s.push(']');
    s
}

fn time<T>(label: &str, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let v = f();
    println!("{label:<40} {:>9.1} ms", t.elapsed().as_secs_f64() * 1000.0);
    v
}

fn main() {
    let mb: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(50);
    let text = traces(mb << 20);
    println!("dataset: {} bytes", text.len());
    if std::env::args().nth(2).as_deref() != Some("noserde") {
        let sv: serde_json::Value = time("serde_json::Value parse", || {
            serde_json::from_slice(text.as_bytes()).unwrap()
        });
        time("hand-written P1 over serde_json", || {
            sv.as_array()
                .unwrap()
                .iter()
                .filter(|t| t["status"] == "error")
                .count()
        });
        time("drop serde_json::Value", || drop(sv));
    }
    let limits = Limits::default();
    let v = time("ptc-lisp decode", || {
        Value::from_json_bytes(text.as_bytes(), &limits).unwrap()
    });
    let mut interp = Interpreter::new(Limits::default());
    interp.define("data", v);
    let programs = [
        (
            "P1 count errors",
            "(count (filter #(= \"error\" (:status %)) data))",
        ),
        (
            "P2 group-by model sum cost",
            "(reduce (fn [m t] (update m (:model t) (fnil + 0) (:cost t))) {} data)",
        ),
        (
            "P3 top-10 by cost",
            "(->> data (sort-by :cost >) (take 10) (mapv #(select-keys % [:id :cost])))",
        ),
        (
            "P4 nested steps frequencies",
            "(->> data (mapcat :steps) (remove :ok) (map :tool) frequencies)",
        ),
        ("P5 distinct orgs", "(count (into #{} (map :org_id) data))"),
        (
            "P5b distinct orgs (set)",
            "(count (set (map :org-id data)))",
        ),
        (
            "P6 project 1000 to JSON",
            "(json/generate-string (mapv #(select-keys % [:id :model :cost]) (take 1000 data)))",
        ),
        (
            "fib 25",
            "(defn fib [n] (if (< n 2) n (+ (fib (- n 1)) (fib (- n 2))))) (fib 25)",
        ),
        (
            "1M loop/recur",
            "(loop [i 0 acc 0] (if (< i 1000000) (recur (inc i) (+ acc i)) acc))",
        ),
        ("reduce over range 1M", "(reduce + (range 1000000))"),
        (
            "reduce conj 200k",
            "(count (reduce conj [] (range 200000)))",
        ),
    ];
    let only = std::env::args().nth(3);
    for (name, src) in programs {
        if only.as_deref().is_some_and(|o| !name.starts_with(o)) {
            continue;
        }
        let r = time(name, || interp.eval_str(src));
        match r {
            Ok(v) => println!(
                "    => {}",
                v.to_string().chars().take(100).collect::<String>()
            ),
            Err(e) => println!("    => error {e}"),
        }
    }
}
