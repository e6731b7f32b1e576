//! Generated programs (complementing `eval`, which mutates raw text): the fuzzer's bytes choose forms from a grammar of special forms, core
//! functions and literals, so most inputs are well-formed programs that reach deep into the
//! evaluator. Every program must end with a value or a typed error within its limits; an
//! `internal_error` (a caught panic) is a bug.
#![no_main]

use std::sync::LazyLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use ptc_lisp::{Interpreter, Limits};

static NAMES: LazyLock<Vec<&'static str>> =
    LazyLock::new(|| ptc_lisp::builtins::all().iter().map(|b| b.name).filter(|n| !n.contains("sleep")).collect());

const FORMS: &[&str] = &[
    "let", "if", "when", "cond", "do", "fn", "loop", "->", "->>", "and", "or", "for", "doseq", "case",
    "if-let", "when-let", "some->", "cond->", "as->", "defn", "def",
];
const ATOMS: &[&str] = &[
    "nil", "true", "false", "0", "1", "-1", "2.5", "9223372036854775807", "-9223372036854775808", "##NaN",
    "##Inf", "\"\"", "\"a b\"", ":k", ":a/b", "x", "y", "%", "[]", "{}", "#{}", "\"total_cost\"", ":total-cost",
    "'o/t", "#\"a+\"", "(range 5)", "[1 2 3]", "{:a 1 \"b\" 2}", "#{1 2}",
];

struct Gen<'a> {
    bytes: &'a [u8],
    pos: usize,
    out: String,
}

impl Gen<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.bytes.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    fn pick<'s>(&mut self, from: &[&'s str]) -> &'s str {
        let i = (usize::from(self.byte()) << 8 | usize::from(self.byte())) % from.len();
        from[i]
    }

    fn form(&mut self, depth: usize) {
        if depth > 12 || self.pos >= self.bytes.len() {
            let atom = self.pick(ATOMS);
            self.out.push_str(atom);
            return;
        }
        match self.byte() % 8 {
            0 | 1 => {
                let atom = self.pick(ATOMS);
                self.out.push_str(atom);
            }
            2 => {
                let form = self.pick(FORMS);
                self.out.push('(');
                self.out.push_str(form);
                match form {
                    "let" | "loop" | "if-let" | "when-let" | "for" | "doseq" => self.out.push_str(" [x "),
                    "fn" | "defn" => self.out.push_str(if form == "defn" { " f [x] " } else { " [x] " }),
                    "def" => self.out.push_str(" x "),
                    "as->" => self.out.push_str(" 1 x "),
                    _ => self.out.push(' '),
                }
                if matches!(form, "let" | "loop" | "if-let" | "when-let" | "for" | "doseq") {
                    self.form(depth + 1);
                    self.out.push_str("] ");
                }
                for _ in 0..1 + self.byte() % 3 {
                    self.form(depth + 1);
                    self.out.push(' ');
                }
                if form == "loop" && self.byte() % 2 == 0 {
                    self.out.push_str("(recur (inc x))");
                }
                self.out.push(')');
            }
            3 => {
                self.out.push('[');
                for _ in 0..self.byte() % 4 {
                    self.form(depth + 1);
                    self.out.push(' ');
                }
                self.out.push(']');
            }
            4 => {
                self.out.push_str("#(");
                let name = self.pick(&NAMES);
                self.out.push_str(name);
                self.out.push_str(" % ");
                self.form(depth + 1);
                self.out.push(')');
            }
            _ => {
                self.out.push('(');
                let name = self.pick(&NAMES);
                self.out.push_str(name);
                for _ in 0..self.byte() % 4 {
                    self.out.push(' ');
                    self.form(depth + 1);
                }
                self.out.push(')');
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut g = Gen { bytes: data, pos: 0, out: String::new() };
    while g.pos < data.len() {
        g.form(0);
        g.out.push('\n');
    }
    let limits = Limits {
        timeout: Some(Duration::from_millis(500)),
        max_steps: Some(200_000),
        max_memory_bytes: 32 << 20,
        max_loop_iterations: 10_000,
        max_workers: 2,
        ..Limits::default()
    };
    if let Err(e) = Interpreter::new(limits).eval_str(&g.out) {
        assert_ne!(e.reason(), "internal_error", "program:\n{}\n{e}", g.out);
    }
});
