//! Every limit at exactly its maximum (passes) and one past it (fails with its reason and
//! message), through the public API only.

use ptc_lisp::{INLINE, Interpreter, Limits, LispError, Value};

fn run(limits: Limits, src: &str) -> Result<Value, LispError> {
    Interpreter::new(limits).eval_str(src)
}

fn ok(limits: Limits, src: &str) -> String {
    run(limits, src)
        .unwrap_or_else(|e| panic!("{src}: {e}"))
        .to_string()
}

fn fails(limits: Limits, src: &str) -> (String, String) {
    let e = run(limits, src).expect_err(src);
    (e.reason().to_string(), e.message().to_string())
}

#[test]
fn loop_recur_runs_exactly_max_iterations() {
    let limits = || Limits {
        max_loop_iterations: 100,
        ..Limits::default()
    };
    let lp = |n: u64| format!("(loop [i 0] (if (< i {n}) (recur (inc i)) i))");
    assert_eq!(ok(limits(), &lp(100)), "100");
    assert_eq!(
        fails(limits(), &lp(101)),
        (
            "loop_limit_exceeded".into(),
            "loop exceeded 100 iterations".into()
        )
    );
}

#[test]
fn fn_recur_runs_exactly_max_iterations() {
    let limits = || Limits {
        max_loop_iterations: 100,
        ..Limits::default()
    };
    let f = |n: u64| format!("(defn f [i] (if (< i {n}) (recur (inc i)) i)) (f 0)");
    assert_eq!(ok(limits(), &f(100)), "100");
    assert_eq!(
        fails(limits(), &f(101)),
        (
            "loop_limit_exceeded".into(),
            "recur exceeded 100 iterations".into()
        )
    );
}

#[test]
fn call_depth_allows_exactly_max_nested_calls() {
    for max in [1usize, 2, 50] {
        let limits = || Limits {
            max_call_depth: max,
            ..Limits::default()
        };
        // (f k) makes k + 1 nested calls of f.
        let nested = |calls: usize| {
            format!(
                "(defn f [n] (if (= n 0) 0 (+ 1 (f (dec n))))) (f {})",
                calls - 1
            )
        };
        assert_eq!(ok(limits(), &nested(max)), (max - 1).to_string());
        assert_eq!(
            fails(limits(), &nested(max + 1)),
            (
                "depth_exceeded".into(),
                format!("call depth exceeded {max} nested calls")
            ),
            "max_call_depth {max}"
        );
    }
    // Anonymous functions count the same way.
    let limits = || Limits {
        max_call_depth: 2,
        ..Limits::default()
    };
    assert_eq!(ok(limits(), "((fn [] ((fn [] 1))))"), "1");
    assert_eq!(
        fails(limits(), "((fn [] ((fn [] ((fn [] 1))))))").0,
        "depth_exceeded"
    );
}

#[test]
fn step_budget_holds_at_its_check_point() {
    // The budget is checked every 1024 steps, so the smallest budget a program runs under is the
    // check point at or below its step count: a multiple of 1024. One step less fails.
    let prog = "(loop [i 0] (if (< i 5000) (recur (inc i)) i))";
    let with = |max: u64| Limits {
        max_steps: Some(max),
        ..Limits::default()
    };
    let (mut lo, mut hi) = (0u64, 10_000_000u64);
    assert!(run(with(hi), prog).is_ok());
    while lo < hi {
        let mid = (lo + hi) / 2;
        if run(with(mid), prog).is_ok() {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    // 5000 iterations take at least 5000 steps, so the check point is 4096 or later.
    assert!(lo >= 4096, "each iteration takes at least a step: {lo}");
    assert_eq!(lo % 1024, 0, "smallest passing budget {lo}");
    assert_eq!(ok(with(lo), prog), "5000");
    assert_eq!(
        fails(with(lo - 1), prog),
        (
            "timeout".into(),
            format!("step budget of {} evaluation steps exhausted", lo - 1)
        )
    );
}

#[test]
fn memory_budget_holds_at_exactly_what_a_program_uses() {
    let prog = "(count (mapv inc (range 1000)))";
    let mut interp = Interpreter::new(Limits::default());
    assert_eq!(interp.eval_str(prog).unwrap().to_string(), "1000");
    let used = interp.last_memory_bytes();
    assert!(used >= 1000, "1000 values take at least 1000 bytes: {used}");
    let with = |max: u64| Limits {
        max_memory_bytes: max,
        ..Limits::default()
    };
    assert_eq!(ok(with(used), prog), "1000");
    assert_eq!(
        fails(with(used - 1), prog),
        (
            "memory_exceeded".into(),
            format!("program would hold more than {} bytes", used - 1)
        )
    );
}

/// The most `prog` held at once, as charged (the smallest budget it runs within).
fn peak(prog: &str) -> u64 {
    let mut interp = Interpreter::new(Limits::default());
    interp
        .eval_str(prog)
        .unwrap_or_else(|e| panic!("{prog}: {e}"));
    interp.last_memory_bytes()
}

fn memory(max: u64) -> Limits {
    Limits {
        max_memory_bytes: max,
        ..Limits::default()
    }
}

/// What a program frees comes back to its budget: a pipeline that builds and drops a 100-element
/// vector per element (3 KiB of temporaries each) holds only its outer vectors, so ten times the
/// elements cost ten times those, not ten times the temporaries; at the default 64 MiB it runs
/// 30,000 elements (the temporaries add up to about 100 MB), and at exactly its peak too.
#[test]
fn the_budget_bounds_what_a_program_holds_not_what_it_allocated() {
    let pipeline = |n: u64| {
        format!("(count (filter even? (map (fn [i] (count (vec (range 100)))) (range {n}))))")
    };
    let (small, large) = (peak(&pipeline(3_000)), peak(&pipeline(30_000)));
    let per_element = (large - small) / 27_000;
    assert!(
        per_element <= 4 * 24,
        "the outer vectors grow (at most four values per element), not the temporaries: \
         {per_element} bytes per element ({small} → {large})"
    );
    assert_eq!(ok(memory(64 << 20), &pipeline(30_000)), "30000");
    assert_eq!(ok(memory(large), &pipeline(30_000)), "30000");
    assert_eq!(
        fails(memory(large - 1), &pipeline(30_000)).0,
        "memory_exceeded"
    );
}

/// Strings a program builds or decodes and then drops are given back like collections: a loop
/// that makes a shared string (too long to be inline) each time, or decodes one, holds one at a
/// time however long it runs; one that keeps them holds them all.
#[test]
fn strings_a_program_frees_are_given_back() {
    let line = "a line too long to be stored inline";
    let built = |n: usize| {
        format!(
            "(loop [i 0 total 0] (if (< i {n}) \
             (recur (inc i) (+ total (count (str \"{line}\" (mod i 10))))) total))"
        )
    };
    let decoded = |n: usize| {
        format!(
            "(loop [i 0 total 0] (if (< i {n}) \
             (recur (inc i) (+ total (count (first (json/parse-string \"[\\\"{line}\\\"]\"))))) total))"
        )
    };
    let split = |n: usize| {
        format!(
            "(loop [i 0 total 0] (if (< i {n}) \
             (recur (inc i) (+ total (count (split-lines \"{line}\\n{line}\")))) total))"
        )
    };
    let programs: [&dyn Fn(usize) -> String; 3] = [&built, &decoded, &split];
    for prog in programs {
        assert_eq!(peak(&prog(1000)), peak(&prog(10)), "{}", prog(1000));
    }
    let kept = |n: usize| format!("(count (mapv (fn [i] (str \"{line}\" i)) (range {n})))");
    let each = 24 + line.len() as u64 + 3;
    assert!(
        peak(&kept(1100)) - peak(&kept(100)) >= 1000 * each,
        "kept strings stay charged"
    );
}

/// A vector that grows in place is charged its new room before it grows and gives back the old
/// room after: `conj`-ing 1,000 elements onto `[]` doubles its room 1, 2, 4, … 1,024 (40 bytes
/// and 16 per element each), so the most it holds is the last two rooms, at the last growth.
#[test]
fn a_growing_vector_holds_its_new_and_its_old_room_only_while_it_grows() {
    let room = |n: u64| 40 + 16 * n;
    assert_eq!(
        peak("(loop [v [] i 0] (if (< i 1000) (recur (conj v i) (inc i)) (count v)))"),
        room(1024) + room(512)
    );
    // Several at once onto a shared vector (the literal `[]`): one copy with room for them all.
    assert_eq!(peak("(count (conj [] 1 2 3))"), room(3));
}

/// Functions built by combinators are charged per value they capture (16 bytes each) with a
/// fixed part; the lines `split-lines` makes, per byte with a fixed part each when they are too
/// long to be stored inline, and nothing of their own when they are.
#[test]
fn combinators_and_split_lines_are_charged_by_what_they_hold() {
    assert_eq!(
        peak("(count [(partial + 1 2)])") - peak("(count [(partial + 1)])"),
        16
    );
    let lines = |line: &str| format!("(count (split-lines \"{}\"))", vec![line; 100].join("\\n"));
    let long = "x".repeat(INLINE + 1);
    assert_eq!(peak(&lines(&format!("{long}x"))) - peak(&lines(&long)), 100);
    let inline = "x".repeat(INLINE);
    assert_eq!(
        peak(&lines(&long)) - peak(&lines(&inline)),
        100 * (24 + INLINE as u64 + 1),
        "a line one byte too long for its value costs its shared form"
    );
}

/// Changing a collection within the room it has charges nothing: a new value for an existing key
/// of a full map or index of a full vector, an element a full set already has, an element popped
/// or a key removed.
#[test]
fn a_change_within_the_room_a_collection_has_is_not_charged() {
    for (base, prog) in [
        (
            "(count (hash-map 1 1 2 2))",
            "(count (assoc (hash-map 1 1 2 2) 1 3))",
        ),
        ("(count (hash-set 1 2))", "(count (conj (hash-set 1 2) 1))"),
        ("(count (vec (range 10)))", "(count (pop (vec (range 10))))"),
        (
            "(count (vec (range 10)))",
            "(count (assoc (vec (range 10)) 0 :x))",
        ),
        (
            "(count (zipmap [1 2] [3 4]))",
            "(count (dissoc (zipmap [1 2] [3 4]) 1))",
        ),
        (
            "(count (hash-map 1 1 2 2))",
            "(count (conj (hash-map 1 1 2 2) [1 3]))",
        ),
    ] {
        assert_eq!(peak(prog), peak(base), "{prog}");
    }
}

/// A sequence view of a string charges its vector while it lives (its one-character strings are
/// inline): `(map identity s)` holds it and its own result vector, 16 + 16 bytes per character
/// (the literal string is part of the program).
#[test]
fn a_string_seen_as_a_sequence_is_charged_per_character() {
    let prog = |n: usize| format!("(count (map identity \"{}\"))", "x".repeat(n));
    assert_eq!(peak(&prog(2000)) - peak(&prog(1000)), 1000 * (16 + 16));
}

/// What stays alive stays charged: copies kept of a shared vector, map or set (each `conj`,
/// `assoc` or `disj` of a value the program still holds) are each charged at their size, and
/// so are the parts a pipeline keeps while their container is freed.
#[test]
fn what_a_program_keeps_stays_charged() {
    let kept = [
        "(let [big (vec (range 10000))] (count (mapv (fn [i] (conj big i)) (range 50))))",
        "(let [big (zipmap (range 1000) (range 1000))] (count (mapv (fn [i] (assoc big -1 i)) (range 50))))",
        "(let [big (set (range 1000))] (count (mapv (fn [i] (disj big i)) (range 50))))",
        "(count (mapv (fn [i] (first (split-at 5000 (range 10000)))) (range 50)))",
    ];
    let size = [10_001 * 16, 1_001 * 64, 1_000 * 48, 5_000 * 16];
    for (prog, bytes) in kept.iter().zip(size) {
        assert!(
            peak(prog) >= 50 * bytes,
            "{prog}: 50 kept copies of {bytes} bytes, peak {}",
            peak(prog)
        );
    }
}

/// Bytes `prog` is charged beyond `base` (the same program without the growth).
fn charged(base: &str, prog: &str) -> u64 {
    let used = |src: &str| {
        let mut interp = Interpreter::new(Limits::default());
        interp.eval_str(src).unwrap();
        interp.last_memory_bytes()
    };
    used(prog) - used(base)
}

/// Growing a collection is charged at what it really allocates, before it allocates: the
/// element (a value is 16 bytes), a map entry (hash, key, value, index slots: 64), a set element
/// (48), each with its block (count, container, charge: 40 bytes for a vector or a map, 72 for
/// a set); a string built in a buffer and
/// then copied into its shared form (its count, charge and length: 24 bytes), both held for a
/// moment. A shared collection is copied whole with room for what is added (the vector here);
/// an own one that lacks the room doubles it (the map and the set, whose last use hands them
/// over). Peaks are measured, so each pair keeps alive what the
/// growth is built from.
#[test]
fn growth_is_charged_at_its_real_size_and_at_exactly_the_budget_it_fits() {
    let text = "x".repeat(1000);
    let cases: [(&str, &str, u64); 4] = [
        // (into v v): v is shared (the binding holds it), so the copy has room for both.
        (
            "(let [v (vec (range 1000))] (count v))",
            "(let [v (vec (range 1000))] (count (into v v)))",
            40 + 2000 * 16,
        ),
        // A literal is part of the program: only the joined string is charged.
        (
            &format!("(let [s \"{text}\"] (count s))"),
            &format!("(let [s \"{text}\"] (count (str s s)))"),
            2000 + 24 + 2000,
        ),
        (
            "(let [ks (range 100) m (zipmap ks ks)] [(count m) (count ks)])",
            "(let [ks (range 100) m (zipmap ks ks)] [(count (merge m {1000 1})) (count ks)])",
            40 + 200 * 64,
        ),
        (
            "(let [xs (range 100) s (set xs)] [(count s) (count xs)])",
            "(let [xs (range 100) s (set xs)] [(count (into s [1000])) (count xs)])",
            72 + 200 * 48,
        ),
    ];
    for (base, prog, footprint) in cases {
        assert_eq!(charged(base, prog), footprint, "{prog}");
        // The growth fails before it allocates: at exactly the budget the program uses it runs,
        // one byte less and the growth is refused.
        let mut interp = Interpreter::new(Limits::default());
        interp.eval_str(prog).unwrap();
        let used = interp.last_memory_bytes();
        let with = |max: u64| Limits {
            max_memory_bytes: max,
            ..Limits::default()
        };
        assert_eq!(ok(with(used), prog), ok(Limits::default(), prog), "{prog}");
        assert_eq!(fails(with(used - 1), prog).0, "memory_exceeded", "{prog}");
    }
}

#[test]
fn output_holds_exactly_max_bytes_then_is_truncated() {
    let with = |max: usize| {
        Interpreter::new(Limits {
            max_output_bytes: max,
            ..Limits::default()
        })
    };
    let mut at = with(10);
    assert_eq!(
        at.eval_str("(print \"0123456789\") 1").unwrap().to_string(),
        "1"
    );
    assert_eq!(at.output(), "0123456789");
    let mut past = with(10);
    assert_eq!(
        past.eval_str("(print \"0123456789X\") 1")
            .unwrap()
            .to_string(),
        "1"
    );
    assert_eq!(past.output(), "0123456789\n[output truncated]\n");
    // Across several writes the total is what counts.
    let mut parts = with(10);
    parts
        .eval_str("(print \"01234\") (print \"56789\")")
        .unwrap();
    assert_eq!(parts.output(), "0123456789");
    let mut parts = with(10);
    parts
        .eval_str("(println \"01234\") (print \"56789\")")
        .unwrap();
    assert_eq!(parts.output(), "01234\n5678\n[output truncated]\n");
    // A character the cap falls inside is left out whole.
    let mut inside = with(10);
    inside.eval_str("(print \"012345678é\")").unwrap();
    assert_eq!(inside.output(), "012345678\n[output truncated]\n");
}

#[test]
fn json_depth_holds_at_exactly_max_nesting() {
    let with = || Limits {
        max_json_depth: 8,
        ..Limits::default()
    };
    let nested = |d: usize| format!("{}{}", "[".repeat(d), "]".repeat(d));
    let prog = |d: usize| format!("(count (json/parse-string \"{}\"))", nested(d));
    assert_eq!(ok(with(), &prog(8)), "1");
    let (reason, message) = fails(with(), &prog(9));
    assert_eq!(reason, "depth_exceeded", "{message}");
    assert!(message.contains('8'), "names the limit: {message}");
    // The same limit applies to host-decoded JSON.
    assert!(
        Value::from_json_bytes(nested(8).as_bytes(), &with())
            .is_ok_and(|v| v.to_string() == "[[[[[[[[]]]]]]]]")
    );
    assert_eq!(
        Value::from_json_bytes(nested(9).as_bytes(), &with())
            .unwrap_err()
            .reason(),
        "depth_exceeded"
    );
}

#[test]
fn program_size_holds_at_exactly_max_bytes() {
    let with = || Limits {
        max_program_bytes: 10,
        ..Limits::default()
    };
    let at = "(+ 1 2 34)";
    assert_eq!(at.len(), 10);
    assert_eq!(ok(with(), at), "37");
    assert_eq!(
        fails(with(), "(+ 1 2 345)"),
        (
            "parse_error".into(),
            "program is 11 bytes, more than the limit of 10".into()
        )
    );
}

#[test]
fn reader_depth_holds_at_exactly_max_nesting() {
    let with = || Limits {
        max_reader_depth: 16,
        ..Limits::default()
    };
    let nested = |d: usize| format!("(count {}{})", "[".repeat(d - 1), "]".repeat(d - 1));
    assert_eq!(ok(with(), &nested(16)), "1");
    assert_eq!(
        fails(with(), &nested(17)),
        (
            "depth_exceeded".into(),
            "forms are nested deeper than 16 levels".into()
        )
    );
}

#[test]
fn native_stack_guard_stops_recursion_the_depth_limit_allows() {
    // With the call-depth limit out of the way, the smallest evaluation stack (8 MiB) runs out
    // first: that is a clean depth_exceeded error, never a stack overflow.
    let limits = Limits {
        max_call_depth: usize::MAX,
        max_loop_iterations: u64::MAX,
        stack_bytes: 8 << 20,
        ..Limits::default()
    };
    assert_eq!(
        fails(
            limits,
            "(defn f [n] (if (= n 0) 0 (+ 1 (f (dec n))))) (f 100000000)"
        ),
        (
            "depth_exceeded".into(),
            "native stack exhausted by nested evaluation".into()
        )
    );
}

#[test]
fn evaluation_stacks_below_8_mib_are_raised_to_8_mib() {
    // A tiny stack setting still gets the 8 MiB floor: ordinary recursion runs.
    for stack_bytes in [0, 1 << 20] {
        let limits = Limits {
            stack_bytes,
            ..Limits::default()
        };
        assert_eq!(
            ok(
                limits,
                "(defn f [n] (if (= n 0) 0 (+ 1 (f (dec n))))) (f 200)"
            ),
            "200",
            "stack_bytes {stack_bytes}"
        );
    }
}

#[test]
fn unlimited_switches_off_every_bound_except_depths_and_stack() {
    let u = Limits::unlimited();
    let d = Limits::default();
    assert_eq!(u.timeout, None);
    assert_eq!(u.max_steps, None);
    assert_eq!(u.max_memory_bytes, u64::MAX);
    assert_eq!(u.max_loop_iterations, u64::MAX);
    assert_eq!(u.max_output_bytes, usize::MAX);
    assert_eq!(
        (
            u.max_call_depth,
            u.max_reader_depth,
            u.max_json_depth,
            u.max_program_bytes,
            u.stack_bytes
        ),
        (
            d.max_call_depth,
            d.max_reader_depth,
            d.max_json_depth,
            d.max_program_bytes,
            d.stack_bytes
        )
    );
    assert_eq!(
        (d.max_call_depth, d.max_loop_iterations, d.max_output_bytes),
        (5_000, 1_000_000, 64 * 1024)
    );
}
