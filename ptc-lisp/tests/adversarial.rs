//! Hostile programs: each must end with the right error reason, without aborting the process.
//! (Deadlines are short so the suite stays fast; no assertion depends on timing.)

use std::time::Duration;

use ptc_lisp::{Interpreter, Limits, Value};

fn limits() -> Limits {
    Limits {
        timeout: Some(Duration::from_millis(2_000)),
        max_memory_bytes: 256 << 20,
        ..Limits::default()
    }
}

fn reason(src: &str) -> String {
    reason_with(src, limits())
}

fn reason_with(src: &str, limits: Limits) -> String {
    let mut i = Interpreter::new(limits);
    match i.eval_str(src) {
        Ok(v) => format!("ok: {}", truncate(&v.to_string())),
        Err(e) => e.reason().to_string(),
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(80).collect()
}

#[test]
fn infinite_loop_hits_the_loop_limit() {
    assert_eq!(
        reason("(loop [i 0] (recur (inc i)))"),
        "loop_limit_exceeded"
    );
}

#[test]
fn infinite_loop_without_loop_limit_hits_the_deadline_or_step_budget() {
    let l = Limits {
        max_loop_iterations: u64::MAX,
        timeout: Some(Duration::from_millis(200)),
        ..limits()
    };
    assert_eq!(
        reason_with("(loop [i 0] (recur (inc i)))", l.clone()),
        "timeout"
    );
    let l = Limits {
        max_steps: Some(100_000),
        timeout: None,
        ..l
    };
    assert_eq!(reason_with("(loop [] (recur))", l), "timeout");
}

#[test]
fn infinite_mutual_recursion_hits_the_depth_limit() {
    assert_eq!(
        reason("(declare g) (defn f [x] (g x)) (defn g [x] (f x)) (f 1)"),
        "depth_exceeded"
    );
    assert_eq!(reason("(defn f [x] (f x)) (f 1)"), "depth_exceeded");
}

#[test]
fn deep_non_tail_recursion_is_a_clean_error() {
    assert_eq!(
        reason("(defn f [n] (if (= n 0) 0 (+ 1 (f (dec n))))) (f 1000000)"),
        "depth_exceeded"
    );
    // Within the limit it works.
    assert_eq!(
        reason("(defn f [n] (if (= n 0) 0 (+ 1 (f (dec n))))) (f 1000)"),
        "ok: 1000"
    );
}

#[test]
fn exponential_recursion_hits_the_deadline() {
    let l = Limits {
        timeout: Some(Duration::from_millis(200)),
        ..limits()
    };
    assert_eq!(
        reason_with(
            "(defn g [n] (if (= n 0) 0 (+ (g (dec n)) (g (dec n))))) (g 60)",
            l
        ),
        "timeout"
    );
}

#[test]
fn runaway_allocation_hits_the_memory_budget() {
    // The budget, not the clock, must stop it: a debug build on a loaded machine needs more
    // than the usual 2 s to allocate 256 MiB.
    let l = Limits {
        timeout: Some(Duration::from_secs(60)),
        ..limits()
    };
    assert_eq!(
        reason_with("(loop [v []] (recur (conj v (range 1000))))", l.clone()),
        "memory_exceeded"
    );
    assert_eq!(
        reason_with(
            "(reduce (fn [acc i] (assoc acc i (vec (range 100)))) {} (range 10000000))",
            l
        ),
        "memory_exceeded"
    );
}

#[test]
fn building_millions_of_functions_hits_the_memory_budget() {
    let l = Limits {
        max_memory_bytes: 16 << 20,
        max_loop_iterations: u64::MAX,
        ..limits()
    };
    assert_eq!(
        reason_with("(loop [f identity] (recur (fn [] f)))", l.clone()),
        "memory_exceeded"
    );
    assert_eq!(
        reason_with("(loop [f identity] (recur (partial f)))", l),
        "memory_exceeded"
    );
}

#[test]
fn string_doubling_hits_the_memory_budget() {
    assert_eq!(
        reason("(loop [s \"ab\"] (recur (str s s)))"),
        "memory_exceeded"
    );
    assert_eq!(
        reason("(reduce (fn [s _] (str s s)) \"x\" (range 100))"),
        "memory_exceeded"
    );
}

#[test]
fn shared_structure_cannot_blow_up_text_or_flattening() {
    // A million references to one 1000-element vector: cheap to build, a billion leaves to print.
    let big = "(let [v (vec (range 1000)) w (repeat 1000 v) x (repeat 1000 w)] ";
    for body in [
        "(count (pr-str x))",
        "(count (str x))",
        "(count (json/generate-string x))",
        "(count (flatten x))",
    ] {
        let l = Limits {
            max_memory_bytes: 8 << 20,
            ..limits()
        };
        assert_eq!(
            reason_with(&format!("{big}{body})"), l),
            "memory_exceeded",
            "{body}"
        );
    }
}

#[test]
fn huge_ranges_are_refused_before_allocating() {
    assert_eq!(reason("(count (range 1000000000000))"), "memory_exceeded");
    assert_eq!(reason("(repeat 1000000000000 1)"), "memory_exceeded");
    assert_eq!(reason("(range)"), "arity_error");
}

#[test]
fn hundred_thousand_nested_parens_are_a_clean_error() {
    let src = format!("{}{}", "(".repeat(100_000), ")".repeat(100_000));
    assert_eq!(reason(&src), "depth_exceeded");
    let src = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
    assert_eq!(reason(&src), "depth_exceeded");
    let unclosed = "(".repeat(100_000);
    assert_eq!(reason(&unclosed), "depth_exceeded");
    assert_eq!(
        ptc_lisp::read_value(&"[".repeat(100_000))
            .unwrap_err()
            .reason(),
        "depth_exceeded"
    );
}

#[test]
fn deeply_nested_json_is_a_clean_error() {
    let deep = format!("{}{}", "[".repeat(1_000_000), "]".repeat(1_000_000));
    let e = Value::from_json_bytes(deep.as_bytes(), &limits()).unwrap_err();
    assert_eq!(e.reason(), "depth_exceeded");
    let src = "(json/parse-string (str (apply str (repeat 100000 \"{\\\"a\\\":\")) 1 (apply str (repeat 100000 \"}\"))))";
    assert_eq!(reason(src), "depth_exceeded");
}

#[test]
fn deeply_nested_values_print_compare_and_drop_without_overflow() {
    // Built one level per step: deeper than any recursion bound in the printer or equality.
    let src = "(let [a (reduce (fn [acc _] [acc]) [] (range 200000))
                     b (reduce (fn [acc _] [acc]) [] (range 200000))]
                 [(= a b) (count (pr-str a)) (count (flatten a))])";
    let out = reason(src);
    assert!(
        out.starts_with("ok: [true "),
        "deep equal values compare equal: {out}"
    );
    let src = "(= (reduce (fn [acc _] [acc]) 1 (range 200000)) (reduce (fn [acc _] [acc]) 2 (range 200000)))";
    assert_eq!(
        reason(src),
        "ok: false",
        "a difference at the bottom is found"
    );
    let src = "(json/generate-string (reduce (fn [acc _] {:a acc}) {} (range 200000)))";
    assert_eq!(reason(src), "depth_exceeded");
    // Sets and maps in each other, a set in a vector in a set: each level dropped in turn.
    for wrap in ["#{acc}", "{:a acc}", "{acc 1}", "#{[acc]}"] {
        let src = format!("(count (reduce (fn [acc _] {wrap}) #{{}} (range 300000)))");
        assert_eq!(reason(&src), "ok: 1", "{wrap}");
    }
}

#[test]
fn long_chains_of_closures_drop_and_call_without_overflow() {
    // Each step wraps the previous function: dropping or calling the chain must not recurse natively.
    for wrap in [
        "(fn [] f)",
        "(partial f)",
        "(comp f)",
        "[(fn [] f)]",
        "{:f (constantly f)}",
    ] {
        let src = format!("(count [(reduce (fn [f _] {wrap}) identity (range 300000))])");
        assert_eq!(reason(&src), "ok: 1", "{wrap}");
    }
    for wrap in ["(partial f)", "(comp f)", "(fn [x] (f x))", "(fnil f 0)"] {
        let src = format!("((reduce (fn [f _] {wrap}) inc (range 100000)) 1)");
        assert_eq!(reason(&src), "depth_exceeded", "{wrap}");
    }
    // The chain escaping to the caller's thread is dropped there, iteratively too.
    let mut i = Interpreter::new(limits());
    let v = i
        .eval_str("(reduce (fn [f _] (fn [] f)) identity (range 300000))")
        .unwrap();
    drop(i);
    drop(v);
}

#[test]
fn long_flat_forms_do_not_nest_the_evaluator() {
    let clauses: String = (0..40_000).map(|i| format!("(= x {i}) {i} ")).collect();
    assert_eq!(
        reason(&format!("(let [x 39999] (cond {clauses} :else :none))")),
        "ok: 39999"
    );
    let steps = "(inc)".repeat(100_000);
    assert_eq!(reason(&format!("(-> 0 {steps})")), "depth_exceeded");
}

#[test]
fn program_size_is_limited() {
    let l = Limits {
        max_program_bytes: 100,
        ..limits()
    };
    assert_eq!(reason_with(&"1 ".repeat(100), l), "parse_error");
}

#[test]
fn println_output_is_bounded() {
    let mut i = Interpreter::new(Limits {
        max_output_bytes: 1_000,
        ..limits()
    });
    i.eval_str("(dotimes [i 10000] (println \"line\" i))")
        .unwrap();
    let out = i.take_output();
    assert!(out.len() < 1_100, "{}", out.len());
    assert!(out.ends_with("[output truncated]\n"));
}

#[test]
fn bad_comparators_do_not_panic() {
    assert!(reason("(sort (fn [a b] true) (range 1000))").starts_with("ok: "));
    assert!(reason("(sort (fn [a b] (rand-nth [1 -1])) [1 2 3])").starts_with("unbound_var"));
    assert!(reason("(sort [##NaN 1 ##NaN 0 2])").starts_with("ok: "));
    assert_eq!(
        reason("(sort (fn [a b] (/ 1 0)) [1 2 3])"),
        "arithmetic_error"
    );
}

#[test]
fn recursion_through_pmap_does_not_multiply_threads() {
    assert_eq!(
        reason("(defn f [n] (if (= n 0) 0 (inc (first (pmap f [(dec n)]))))) (f 1000)"),
        "ok: 1000"
    );
    assert_eq!(
        reason("(defn f [n] (if (= n 0) 0 (inc (first (pmap f [(dec n)]))))) (f 100000)"),
        "depth_exceeded"
    );
}

#[test]
fn errors_inside_pmap_fail_the_call() {
    assert_eq!(reason("(pmap #(/ 1 %) [1 0 2])"), "arithmetic_error");
    assert_eq!(
        reason("(pmap (fn [x] (loop [] (recur))) [1 2])"),
        "loop_limit_exceeded"
    );
}

#[test]
fn garbage_input_never_panics() {
    let inputs = [
        "(",
        ")",
        "#",
        "#{",
        "\"",
        "\\",
        "#\"[\"",
        "(let [a] a)",
        "(let [1 2] 1)",
        "(fn)",
        "(fn [&] 1)",
        "(defn)",
        "(loop [a] a)",
        "{:a}",
        "(case)",
        "(cond 1)",
        "#(#(%))",
        "(.foo 1)",
        "(:a)",
        "(nth)",
        "(assoc [] 5 1)",
        "(subvec [1] 3)",
        "(range 0 10 0)",
        "(/ 0.0 0)",
        "(int ##NaN)",
        "(char -1)",
        "(re-pattern \"(\")",
        "(format \"%q\" 1)",
        "(format \"%d\" 1.5)",
        "(apply + 1)",
        "(update-in {} [] inc)",
        "(get-in 1 [1 2])",
        "(Math/nope 1)",
        "(str/nope 1)",
        "##Foo",
        "1/2",
        "99999999999999999999",
        ":",
        "(recur)",
        "(let [{:keys [a]} 5] a)",
        "(keys 5)",
        "(seq 5)",
    ];
    for src in inputs {
        let mut i = Interpreter::new(limits());
        let _ = i.eval_str(src);
    }
}
