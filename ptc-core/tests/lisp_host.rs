//! `tool/call`, discovery, budgets, records and the static pre-check, through PTC-Lisp programs
//! against the loopback fixture.

mod support;

use std::sync::Arc;

use ptc_core::{Budgets, ProgramRun, Reason, StartOptions, Upstreams, run_program};
use ptc_lisp::Limits;
use serde_json::json;

struct Bed {
    rt: tokio::runtime::Runtime,
    fx: support::Fixture,
    _d: support::Deployment,
    up: Arc<Upstreams>,
}

fn bed(token: &str) -> Bed {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let fx = rt.block_on(support::start());
    let d = support::deployment(&fx.base(), token, json!({}));
    let loaded = d.load();
    let up = rt
        .block_on(Upstreams::start(
            loaded.plan,
            loaded.secrets,
            StartOptions::default(),
        ))
        .unwrap();
    Bed {
        rt,
        fx,
        _d: d,
        up: Arc::new(up),
    }
}

impl Bed {
    fn run_with(&self, src: &str, budgets: Budgets) -> ProgramRun {
        self.run_under(src, Limits::default(), budgets)
    }

    fn run_under(&self, src: &str, limits: Limits, budgets: Budgets) -> ProgramRun {
        run_program(
            self.up.clone(),
            self.rt.handle().clone(),
            src,
            limits,
            budgets,
            None,
        )
    }

    fn run(&self, src: &str) -> ProgramRun {
        self.run_with(src, Budgets::default())
    }

    fn value(&self, src: &str) -> String {
        let r = self.run(src);
        match r.result {
            Ok(v) => v.to_string(),
            Err(e) => panic!("{src}: {e}"),
        }
    }

    fn error(&self, src: &str) -> ptc_lisp::LispError {
        match self.run(src).result {
            Ok(v) => panic!("{src}: expected an error, got {v}"),
            Err(e) => e,
        }
    }
}

#[test]
fn both_call_forms_return_the_result_contract() {
    let b = bed("tok-1");
    assert_eq!(
        b.value("(let [r (tool/call 'fx/echo {:id \"a/b\" :org-id \"acme\"})] [(:ok r) (:value_kind r) (:path (:value r)) (get-in r [:value :items 1 :id])])"),
        "[true :json \"/echo/a%2Fb\" 2]"
    );
    assert_eq!(b.fx.last().target, "/echo/a%2Fb?org_id=acme");
    assert_eq!(
        b.value("(:path (:value (tool/call {:server \"fx\" :tool \"echo\" :args {:id \"x\" :mode :b}})))"),
        "\"/echo/x\""
    );
    assert_eq!(b.fx.last().target, "/echo/x?mode=b");
    // The operation id works as the tool name too.
    assert_eq!(
        b.value("(:ok (tool/call {:server \"fx\" :tool \"redirect_same\"}))"),
        "true"
    );
    assert_eq!(
        b.value("(tool/call 'fx/empty)"),
        "{:ok true :value nil :value_kind :none}"
    );
}

#[test]
fn world_faults_are_data_and_programmer_faults_raise() {
    let b = bed("tok-1");
    assert_eq!(
        b.value("(let [r (tool/call 'fx/status {:code 404})] [(:ok r) (:reason r)])"),
        "[false :not_found]"
    );
    assert_eq!(
        b.value("(:reason (tool/call 'fx/malformed))"),
        ":upstream_error"
    );
    assert_eq!(
        b.value("(:reason (tool/call 'fx/big {:n 5000}))"),
        ":response_too_large"
    );
    // Built at run time, so only the call-time check sees them.
    let e = b.error("(let [t (symbol \"fx/ecko\")] (tool/call t {:id \"1\"}))");
    assert_eq!(e.reason(), "unknown_tool");
    assert!(
        e.message()
            .starts_with("tool/call: no tool `ecko` in upstream `fx` (did you mean `fx/echo`?)"),
        "{}",
        e.message()
    );
    let e = b.error("(let [s (str \"f\" \"z\")] (tool/call {:server s :tool \"echo\"}))");
    assert_eq!(e.reason(), "unknown_server");
    assert!(
        e.message()
            .contains("no upstream `fz` (did you mean `fx`?)"),
        "{}",
        e.message()
    );
    let e = b.error("(let [n 11] (tool/call 'fx/echo {:id \"1\" :n n}))");
    assert_eq!(e.reason(), "invalid_args");
    assert!(
        e.message()
            .starts_with("tool/call: fx/echo: invalid arguments: :n must be at most 10, got 11"),
        "{}",
        e.message()
    );
    let e = b.error("(let [a [1 2]] (tool/call 'fx/echo a))");
    assert!(
        e.message().contains("args must be a map"),
        "{}",
        e.message()
    );
    let e = b.error("(tool/call 'fx/echo {:id \"1\" :q inc})");
    assert_eq!(
        e.message(),
        "tool/call 'fx/echo: argument q cannot be sent: a function is not data"
    );
    let e = b.error("(tool/call 'echo {})");
    assert!(
        e.message().contains("is not qualified with its upstream"),
        "{}",
        e.message()
    );
}

#[test]
fn results_are_charged_to_the_program_memory_budget() {
    let b = bed("tok-1");
    let limits = Limits {
        max_memory_bytes: 4_000,
        ..Limits::default()
    };
    let run = |src: &str| b.run_under(src, limits.clone(), Budgets::default());
    // 900 bytes of JSON fit; 20 such answers kept at once do not.
    let r = run("(:ok (tool/call 'fx/big {:n 900}))");
    assert_eq!(r.result.unwrap().to_string(), "true");
    let e = run("(mapv (fn [_] (tool/call 'fx/big {:n 900})) (range 20))")
        .result
        .unwrap_err();
    assert_eq!(e.reason(), "memory_exceeded", "{e}");
}

#[test]
fn an_answer_too_big_for_the_memory_budget_ends_the_program() {
    // The program's own limit, not the upstream's fault: an error, not an `{:ok false}` map.
    let b = bed("tok-1");
    let limits = Limits {
        max_memory_bytes: 600,
        ..Limits::default()
    };
    let r = b.run_under(
        "(:reason (tool/call 'fx/big {:n 900}))",
        limits,
        Budgets::default(),
    );
    let e = r.result.unwrap_err();
    assert_eq!(e.reason(), "memory_exceeded", "{e}");
    assert_eq!(r.records.upstream_calls.len(), 1);
}

#[test]
fn tool_call_is_a_value_and_pmap_overlaps_calls() {
    let b = bed("tok-1");
    assert_eq!(
        b.value("(mapv :ok (pmap #(tool/call 'fx/latency {:ms 150 :i %}) (range 8)))"),
        "[true true true true true true true true]"
    );
    let max =
        b.fx.state
            .max_in_flight
            .load(std::sync::atomic::Ordering::SeqCst);
    assert!(max >= 4, "at most {max} calls overlapped");
    assert_eq!(
        b.value("(count (map (fn [_] (tool/call 'fx/empty)) [1 2]))"),
        "2"
    );
}

#[test]
fn the_static_precheck_reports_every_literal_problem_and_calls_nothing() {
    let b = bed("tok-1");
    let src = "(tool/call 'fx/empty)\n(tool/call 'fx/ecko {:id \"1\"})\n  (tool/call 'fz/echo)\n(tool/call 'fx/echo {:n \"3\" :mode :c})\n(-> {:id \"1\"} (tool/call 'fx/echo))";
    let e = b.error(src);
    assert_eq!(e.pos().map(|p| (p.line, p.col)), Some((2, 1)));
    let msg = e.message();
    assert!(
        msg.starts_with("3 tool/call problems found before running (nothing was called):\n"),
        "{msg}"
    );
    assert!(
        msg.contains("\n2:1: no tool `ecko` in upstream `fx` (did you mean `fx/echo`?)"),
        "{msg}"
    );
    assert!(
        msg.contains("\n3:3: no upstream `fz` (did you mean `fx`?)"),
        "{msg}"
    );
    assert!(
        msg.contains("\n4:1: fx/echo: invalid arguments: :n must be an integer, got string \"3\"; :mode must be one of \"a\" \"b\", got \"c\"; missing required argument :id (string)"),
        "{msg}"
    );
    assert!(
        b.fx.seen().is_empty(),
        "an upstream was called: {:?}",
        b.fx.seen()
    );
    // Computed values and keys are left to the call-time check.
    assert_eq!(
        b.value("(let [id \"7\" k :id] [(:ok (tool/call 'fx/echo {:id id})) (:ok (tool/call 'fx/echo {k \"8\"}))])"),
        "[true true]"
    );
}

/// The pre-check reads both call forms (symbol and args, or one call map) and `nil` args, and
/// reports a malformed form with the message the call itself would give.
#[test]
fn the_precheck_reads_every_literal_call_form() {
    let b = bed("tok-1");
    let msg = |src: &str| b.error(src).message().to_string();
    let header = "1 tool/call problem found before running (nothing was called):\n";
    let m = msg("(tool/call {:server \"fx\" :tool \"ecko\"})");
    assert!(
        m.starts_with(&format!(
            "{header}1:1: no tool `ecko` in upstream `fx` (did you mean `fx/echo`?)"
        )),
        "{m}"
    );
    let m = msg("(tool/call {:server \"fz\" :tool \"echo\"})");
    assert!(
        m.starts_with(&format!(
            "{header}1:1: no upstream `fz` (did you mean `fx`?)"
        )),
        "{m}"
    );
    let m = msg("(tool/call {:server \"fx\" :tool \"echo\" :args {:id \"1\" :n 0}})");
    assert!(
        m.starts_with(&format!(
            "{header}1:1: fx/echo: invalid arguments: :n must be at least 1, got 0"
        )),
        "{m}"
    );
    // A quoted map is a constant the pre-check reads as well.
    let m = msg("(tool/call 'fx/echo '{:id \"1\" :n 0})");
    assert!(
        m.starts_with(&format!(
            "{header}1:1: fx/echo: invalid arguments: :n must be at least 1, got 0"
        )),
        "{m}"
    );
    let m = msg("(tool/call 'fx/echo nil)");
    assert!(
        m.starts_with(&format!(
            "{header}1:1: fx/echo: invalid arguments: missing required argument :id (string)"
        )),
        "{m}"
    );
    // A malformed form is found before running too, with the message the call itself gives.
    let usage = "use (tool/call 'server/tool {:arg value}) or (tool/call {:server \"server\" :tool \"tool\" :args {:arg value}})";
    assert_eq!(
        msg("(tool/call 'fx/ecko {} {})"),
        format!("{header}1:1: tool/call: takes 1 or 2 arguments, got 3; {usage}")
    );
    assert_eq!(
        msg("(if (= 1 2) (tool/call 'echo) (tool/call 'fx/echo [1]))"),
        "2 tool/call problems found before running (nothing was called):\n\
         1:13: tool/call: `echo` is not qualified with its upstream; write 'server/echo (list \
         upstreams with (tool/servers))\n\
         1:31: tool/call 'fx/echo: args must be a map like {:arg value}, got vector [1]"
    );
    // Run-time values that are wrong get the same message, without the pre-check's header.
    assert_eq!(
        msg("(let [n 3] (tool/call (symbol \"echo\") {:n n}))"),
        "tool/call: `echo` is not qualified with its upstream; write 'server/echo (list upstreams \
         with (tool/servers))"
    );
    assert!(b.fx.seen().is_empty(), "{:?}", b.fx.seen());
}

#[test]
fn budgets_pass_at_the_limit_and_refuse_one_past() {
    let b = bed("tok-1");
    let budgets = Budgets {
        max_calls: 3,
        ..Budgets::default()
    };
    let r = b.run_with(
        "(mapv #(:reason (tool/call 'fx/echo {:id (str %)})) (range 4))",
        budgets,
    );
    assert_eq!(
        r.result.unwrap().to_string(),
        "[nil nil nil :cap_exhausted]"
    );
    assert_eq!(b.fx.seen().len(), 3);
    let calls = &r.records.upstream_calls;
    assert_eq!(calls.len(), 4);
    assert_eq!(calls[3].reason, Some(Reason::CapExhausted));
    // Bytes: a budget of exactly two echo answers allows two calls.
    let one = r.records.upstream_calls[0].result_bytes;
    assert!(one > 0);
    let budgets = Budgets {
        max_bytes: one * 2,
        ..Budgets::default()
    };
    let r = b.run_with(
        "(mapv #(:reason (tool/call 'fx/echo {:id (str %)})) (range 3))",
        budgets,
    );
    assert_eq!(r.result.unwrap().to_string(), "[nil nil :cap_exhausted]");
    let budgets = Budgets {
        max_discovery: 2,
        ..Budgets::default()
    };
    let r = b.run_with(
        "[(count (tool/servers)) (count (dir 'fx)) (:reason (tool/servers))]",
        budgets,
    );
    assert_eq!(r.result.unwrap().to_string(), "[1 18 :cap_exhausted]");
}

#[test]
fn the_byte_budget_names_itself_only_when_it_is_below_the_tools_own_cap() {
    // fx/big's own cap is 1000 bytes. A budget left of exactly 1000 is no tighter, so an
    // oversized answer names the tool's cap; one byte less and the budget is what stops it.
    let b = bed("tok-1");
    let run = |max_bytes| {
        let budgets = Budgets {
            max_bytes,
            ..Budgets::default()
        };
        let r = b.run_with("(tool/call 'fx/big {:n 1001})", budgets);
        r.result.unwrap().to_string()
    };
    let at_cap = run(1000);
    assert!(at_cap.contains(":reason :response_too_large"), "{at_cap}");
    assert!(
        at_cap.contains("fx/big: the response is larger than the 1000-byte cap"),
        "{at_cap}"
    );
    let below = run(999);
    assert!(below.contains(":reason :cap_exhausted"), "{below}");
    assert!(
        below.contains("fx/big: the program's budget of 999 upstream bytes is spent"),
        "{below}"
    );
}

#[test]
fn doc_of_a_server_lists_its_description_and_tools() {
    let b = bed("tok-1");
    let r = b.run("(doc 'fx)");
    assert_eq!(r.result.unwrap().to_string(), "nil");
    assert!(
        r.output.starts_with(
            "-------------------------\nfx\n  loopback fixture\n  fx/echo - The echo route\n  fx/status - The status route\n"
        ),
        "{}",
        r.output
    );
}

/// The host's own functions are documented as built-ins are, even with the discovery budget
/// spent; an unknown one is refused naming those there are.
#[test]
fn doc_of_the_host_s_functions_works_outside_the_discovery_budget() {
    let b = bed("tok-1");
    let budgets = Budgets {
        max_discovery: 0,
        ..Budgets::default()
    };
    for (name, call) in [
        ("call", "(tool/call 'server/tool {:arg value})"),
        (
            "pages",
            "(tool/pages 'server/tool {:arg value} {:max-pages n",
        ),
        ("search", "(tool/search \"text\""),
        ("servers", "(tool/servers)"),
    ] {
        let r = b.run_with(&format!("(doc 'tool/{name})"), budgets);
        assert_eq!(r.result.unwrap().to_string(), "nil");
        assert!(
            r.output
                .starts_with(&format!("-------------------------\ntool/{name}\n  {call}")),
            "{}",
            r.output
        );
    }
    // `dir` lists them beside the discovery forms, also outside the budget.
    let r = b.run_with("(dir 'tool)", budgets);
    assert_eq!(
        r.result.unwrap().to_string(),
        "[dir doc source meta apropos call pages search servers]"
    );
    // Each function documented is one the host serves (called wrongly, it says how, never
    // that there is no such function).
    for name in ["call", "pages", "search", "servers"] {
        let r = b.run(&format!("(tool/{name} 1 2 3 4)"));
        let said = match r.result {
            Ok(v) => v.to_string(),
            Err(e) => e.message().to_string(),
        };
        assert!(!said.contains("no function"), "tool/{name}: {said}");
    }
    let e = b.error("(tool/paeges 'fx/echo {})");
    assert!(
        e.message()
            .contains("tool/ has call, pages, search and servers"),
        "{}",
        e.message()
    );
}

#[test]
fn apropos_takes_a_limit_of_1_to_200() {
    let b = bed("tok-1");
    assert_eq!(
        b.value("(apropos \"redirect\" {:limit 1})"),
        "[\"fx/redirect-cross - The redirect_cross route\"]"
    );
    assert_eq!(b.value("(count (apropos \"redirect\" {:limit 200}))"), "3");
    assert_eq!(b.value("(count (apropos \"redirect\" {}))"), "3");
    for bad in ["0", "201", "\"2\""] {
        let e = b.error(&format!("(apropos \"redirect\" {{:limit {bad}}})"));
        assert_eq!(
            e.message(),
            format!("apropos: :limit must be an integer 1..200, got {bad}"),
        );
    }
}

#[test]
fn discovery_past_its_budget_prints_or_returns_the_refusal() {
    let b = bed("tok-1");
    let budgets = Budgets {
        max_discovery: 1,
        ..Budgets::default()
    };
    let r = b.run_with("(do (tool/servers) (doc 'fx))", budgets);
    assert_eq!(r.result.unwrap().to_string(), "nil");
    assert_eq!(
        r.output,
        "the program's budget of 1 discovery operations is spent\n"
    );
    let r = b.run_with("(do (tool/servers) (meta 'fx/echo))", budgets);
    assert_eq!(
        r.result.unwrap().to_string(),
        "{:message \"the program's budget of 1 discovery operations is spent\" :ok false :reason :cap_exhausted}"
    );
}

#[test]
fn arguments_nest_256_deep_through_vectors_sets_and_maps() {
    let b = bed("tok-1");
    for wrap in ["[a]", "#{a}", "{:k a}"] {
        let call = |levels: usize| {
            format!(
                "(let [v (reduce (fn [a _] {wrap}) 1 (range {levels}))] \
                 (:reason (tool/call 'fx/echo {{:id \"1\" :q v}})))"
            )
        };
        // At the bound the value is converted, and the tool's own argument check answers.
        let at = b.error(&call(256));
        assert_eq!(at.reason(), "invalid_args", "{wrap}");
        assert!(
            at.message()
                .starts_with("tool/call: fx/echo: invalid arguments: :q must be a string, got "),
            "{wrap}: {}",
            at.message()
        );
        let e = b.error(&call(257));
        assert_eq!(
            e.message(),
            "tool/call 'fx/echo: argument q cannot be sent: it is nested more than 256 deep",
            "{wrap}"
        );
    }
}

#[test]
fn discovery_lists_documents_and_searches_upstream_tools() {
    let b = bed("tok-secret-123");
    assert_eq!(
        b.value("(tool/servers)"),
        "[{:description \"loopback fixture\" :loaded true :name \"fx\" :tool_count 18}]"
    );
    assert_eq!(
        b.value("(take 2 (dir 'fx))"),
        "[\"fx/big - The big route\" \"fx/echo - The echo route\"]"
    );
    assert_eq!(b.value("(= (dir 'fx) (tool/dir 'fx))"), "true");
    let r = b.run("(doc 'fx/echo)");
    assert_eq!(r.result.unwrap().to_string(), "nil");
    assert!(
        r.output
            .contains("fx/echo\n  The echo route\nArgs:\n  :id string (required)\n"),
        "{}",
        r.output
    );
    assert!(r.output.contains("  :n integer 1..10\n"), "{}", r.output);
    assert!(
        r.output
            .contains("Call:\n  (tool/call 'fx/echo {:id \"...\"})\n"),
        "{}",
        r.output
    );
    assert!(
        r.output
            .contains("Returns:\n  {:ok true :value any :value_kind :json}"),
        "{}",
        r.output
    );
    // An upstream's meta: its name, description and tool names.
    assert_eq!(
        b.value("[(get (meta 'fx) \"name\") (get (meta 'fx) \"description\") (count (get (meta 'fx) \"tools\")) (first (get (meta 'fx) \"tools\"))]"),
        "[\"fx\" \"loopback fixture\" 18 \"echo\"]"
    );
    let meta = b.value("(meta 'fx/echo)");
    assert!(meta.contains("\"operationId\" \"echo\""), "{meta}");
    assert!(meta.contains("\"path\" \"/echo/{id}\""), "{meta}");
    assert!(
        !meta.contains("tok-secret-123") && !meta.contains("token"),
        "{meta}"
    );
    assert_eq!(
        b.value("(apropos \"redirect\")"),
        "[\"fx/redirect-cross - The redirect_cross route\" \"fx/redirect-loop - The redirect_loop route\" \"fx/redirect-same - The redirect_same route\"]"
    );
    let e = b.error("(doc 'fx/ecko)");
    assert!(
        e.message().contains("did you mean `fx/echo`?"),
        "{}",
        e.message()
    );
    let e = b.error("(dir 'fz)");
    assert_eq!(e.reason(), "unbound_var");
    assert_eq!(e.message(), "no namespace or upstream named fz");
    // Upstreams are namespaces: unquoted names work too, `all-ns` lists them, a tool called
    // by its name is the same `tool/call`, and a tool used as a value says how to call it.
    assert_eq!(b.value("(= (dir fx) (dir 'fx))"), "true");
    assert_eq!(b.value("(contains? (set (all-ns)) 'fx)"), "true");
    assert_eq!(
        b.value("(= (fx/echo {:id \"1\"}) (tool/call 'fx/echo {:id \"1\"}))"),
        "true"
    );
    assert_eq!(
        b.value("(:ok (first (map #(fx/echo {:id %}) [\"1\"])))"),
        "true"
    );
    let e = b.error("(map fx/echo [{:id \"1\"}])");
    assert_eq!(e.reason(), "unbound_var");
    assert_eq!(
        e.message(),
        "fx/echo names a tool of upstream fx, not a function value"
    );
    assert!(
        e.hint()
            .is_some_and(|h| h.contains("call it as (fx/echo {...}), e.g. #(fx/echo {:id %})")),
        "{e:?}"
    );
    // The sugar meets the pre-check like the call it stands for: nothing runs.
    let e = b.error("(do (fx/echo {:id \"1\"}) (fx/ecko {}))");
    assert!(
        e.message()
            .contains("found before running (nothing was called)")
            && e.message()
                .contains("1:25: no tool `ecko` in upstream `fx`"),
        "{}",
        e.message()
    );
    // Nothing transport-specific in what a program sees.
    let all = b.value("[(tool/servers) (dir 'fx)]").to_lowercase();
    assert!(!all.contains("mcp") && !all.contains("openapi"), "{all}");
}

#[test]
fn records_count_calls_bytes_and_the_reduction() {
    let b = bed("tok-1");
    let r = b.run("(do (tool/call 'fx/status {:code 503}) (count (:items (:value (tool/call 'fx/echo {:id \"1\"})))))");
    assert_eq!(r.result.unwrap().to_string(), "2");
    let calls = &r.records.upstream_calls;
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (
            calls[0].server.as_str(),
            calls[0].tool.as_str(),
            calls[0].status()
        ),
        ("fx", "status", "error")
    );
    assert_eq!(calls[0].reason, Some(Reason::UpstreamUnavailable));
    assert_eq!(
        (calls[1].tool.as_str(), calls[1].status(), calls[1].reason),
        ("echo", "ok", None)
    );
    let m = &r.records.ptc_metrics;
    assert_eq!(
        (
            m.upstream_call_count,
            m.upstream_ok_count,
            m.upstream_error_count
        ),
        (2, 1, 1)
    );
    assert_eq!(m.upstream_result_bytes, calls[1].result_bytes);
    assert_eq!(m.final_result_bytes, 1);
    let want = (calls[1].result_bytes as f64 * 100.0).round() / 100.0;
    assert_eq!(m.payload_reduction_ratio, Some(want));
}

#[test]
fn a_canary_secret_reaches_no_program_output() {
    const CANARY: &str = "canary-5ecret-9931";
    let b = bed(CANARY);
    let r =
        b.run("(let [w (tool/call 'fx/whoami) e (tool/call 'fx/echo_error)] (println w e) [w e])");
    let value = r.result.unwrap().to_string();
    assert!(
        !value.contains(CANARY) && value.contains("[REDACTED]"),
        "{value}"
    );
    assert!(
        !r.output.contains(CANARY) && r.output.contains("[REDACTED]"),
        "{}",
        r.output
    );
    let records = serde_json::to_string(&r.records).unwrap();
    assert!(!records.contains(CANARY));
    // A program that spells the secret out itself prints it masked too.
    let r = b.run(&format!("(println \"token: {CANARY}\") 1"));
    assert_eq!(r.output, "token: [REDACTED]\n");
}
