//! Pinned MCP tools at run time, against the real Python peer (`fixtures/mcp/py_server.py`), which
//! plays a server that changes its tools after they were reviewed: restarted with a changed
//! description or schema, a tool removed or added, or changing them mid-session with
//! `tools/list_changed`. `scripts/test` installs the peer; without it a test fails under `CI=true`
//! and otherwise says it was skipped.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use ptc_core::credentials::redact::Redactor;
use ptc_core::{Budgets, ProgramRun, StartOptions, Upstreams, run_program};
use ptc_lisp::Limits;
use ptc_plan::pins::ToolList;
use serde_json::{Value, json};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/mcp")
}

const INCLUDED: [&str; 5] = [
    "change-tools",
    "crash",
    "echo",
    "get-structured-content",
    "get-sum",
];

/// A scratch folder with an `upstreams.json` for the peer (`extra` merged into its entry).
struct Deployment {
    dir: PathBuf,
    python: PathBuf,
}

impl Deployment {
    fn new(name: &str, python: PathBuf) -> Self {
        let dir = std::env::temp_dir().join(format!("ptc-pins-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch");
        Deployment { dir, python }
    }

    fn config(&self) -> PathBuf {
        self.dir.join("upstreams.json")
    }

    fn write_config(&self, extra: Value) {
        let mut peer = json!({
            "transport": "mcp_stdio",
            "command": self.python,
            "args": ["py_server.py", "stdio"],
            "cwd": fixtures(),
            "include_tools": INCLUDED,
            // The two tools that change the server run without asking anyone.
            "allow_writes": {"change-tools": {"approval": "none"}, "crash": {"approval": "none"}},
        });
        if let (Value::Object(p), Value::Object(e)) = (&mut peer, extra) {
            p.extend(e);
        }
        let config = json!({"upstreams": {"peer": peer}});
        std::fs::write(self.config(), config.to_string()).expect("config");
    }

    /// What `ptc vendor` does: list the live server and write the pins.
    fn vendor(&self, rt: &tokio::runtime::Runtime) -> ToolList {
        let loaded = ptc_plan::load_unpinned(&self.config(), &ptc_plan::FileSource)
            .unwrap_or_else(|d| panic!("{d}"));
        let tools = rt
            .block_on(ptc_core::list_live_tools(
                &loaded.plan,
                &loaded.secrets,
                "peer",
                &Redactor::default(),
                None,
            ))
            .expect("the peer lists its tools");
        let list = ToolList::new("peer", tools.iter().map(|t| t.pin()).collect());
        let path = ptc_plan::pins::path(&self.config(), "peer");
        std::fs::create_dir_all(path.parent().expect("folder")).expect("vendored/");
        std::fs::write(&path, list.render()).expect("pins");
        list
    }

    fn start(&self, rt: &tokio::runtime::Runtime) -> Arc<Upstreams> {
        let loaded = ptc_plan::load(&self.config()).unwrap_or_else(|d| panic!("{d}"));
        Arc::new(
            rt.block_on(Upstreams::start(
                loaded.plan,
                loaded.secrets,
                StartOptions {
                    writes: ptc_core::WriteGate::Open,
                    ..StartOptions::default()
                },
            ))
            .expect("starts"),
        )
    }
}

impl Drop for Deployment {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A deployment of the peer whose tool list was vendored from the unchanged server (`None`,
/// said, when the peer is missing).
fn vendored(name: &str) -> Option<(tokio::runtime::Runtime, Deployment, ToolList)> {
    let python = ptc_tests::mcp_python()?;
    let rt = runtime();
    let d = Deployment::new(name, python);
    d.write_config(json!({}));
    let pinned = d.vendor(&rt);
    Some((rt, d, pinned))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn run(rt: &tokio::runtime::Runtime, up: &Arc<Upstreams>, src: &str) -> ProgramRun {
    run_program(
        up.clone(),
        rt.handle().clone(),
        src,
        Limits::default(),
        Budgets::default(),
        None,
    )
}

fn value(rt: &tokio::runtime::Runtime, up: &Arc<Upstreams>, src: &str) -> String {
    match run(rt, up, src).result {
        Ok(v) => v.to_string(),
        Err(e) => panic!("{src}: {e}"),
    }
}

fn counts(up: &Upstreams) -> (u64, u64, u64) {
    let all = up.pin_counts();
    let (_, c) = all
        .iter()
        .find(|(n, _)| *n == "peer")
        .expect("peer is pinned");
    (
        c.changed.load(Ordering::Relaxed),
        c.removed.load(Ordering::Relaxed),
        c.unpinned.load(Ordering::Relaxed),
    )
}

/// The variant that rewrites echo's description and get-sum's schema, removes
/// get-structured-content and adds a tool nobody reviewed.
fn rug_pull() -> Value {
    json!({
        "describe": {"echo": "Echoes the input, and mails it to someone"},
        "input": {"get-sum": {"type": "object", "properties": {"a": {"type": "string"}}}},
        "remove": ["get-structured-content"],
        "extra": ["exfiltrate"],
    })
}

#[test]
fn a_server_restarted_with_changed_tools_has_them_refused_and_new_ones_hidden() {
    let Some((rt, d, pinned)) = vendored("restart") else {
        return;
    };
    assert!(pinned.tool("echo").is_some() && pinned.tool("filler-00").is_some());
    // The same upstream, restarted with its tools changed.
    d.write_config(json!({"env": {"PTC_TOOLS_VARIANT": rug_pull().to_string()}}));
    let up = d.start(&rt);
    assert_eq!(
        value(&rt, &up, "(tool/call 'peer/echo {:message \"hi\"})"),
        "{:message \"peer/echo changed on the server since it was pinned (changed: description), \
         so it is not callable until the change is reviewed: `ptc vendor --check` shows it, \
         `ptc vendor` pins it again\" :ok false :reason :tool_changed}"
    );
    let sum = value(&rt, &up, "(tool/call 'peer/get-sum {:a 1 :b 2})");
    assert!(
        sum.contains(":reason :tool_changed") && sum.contains("(changed: inputSchema)"),
        "{sum}"
    );
    let gone = value(
        &rt,
        &up,
        "(tool/call 'peer/get-structured-content {:location \"Oslo\"})",
    );
    assert!(
        gone.contains(":reason :not_found") && gone.contains("no longer lists it"),
        "{gone}"
    );
    // The tool nobody reviewed is not exposed, and discovery shows what was reviewed.
    let e = run(&rt, &up, "(tool/call 'peer/exfiltrate {})")
        .result
        .unwrap_err();
    assert!(
        e.message().contains("no tool `exfiltrate` in upstream `peer`; its tools: change-tools crash echo get-structured-content get-sum"),
        "{e}"
    );
    let dir = value(&rt, &up, "(dir 'peer)");
    assert!(
        dir.contains("peer/echo - Echoes back the input string [not callable: its description changed on the server since it was pinned]"),
        "{dir}"
    );
    assert!(
        !dir.contains("exfiltrate") && !dir.contains("filler"),
        "{dir}"
    );
    // A pinned tool the server did not change still works.
    assert_eq!(
        value(
            &rt,
            &up,
            "(:ok (tool/call 'peer/change-tools {:variant \"{}\"}))"
        ),
        "true"
    );
    // Each change counted once: two changed, one removed, one new (filler tools are vendored
    // but left out: known, not news).
    assert_eq!(counts(&up), (2, 1, 1));
    // That call restored the server's tools (and announced it): everything matches again.
    assert_eq!(
        value(
            &rt,
            &up,
            "(:value (tool/call 'peer/echo {:message \"hi\"}))"
        ),
        "\"Echo: hi\""
    );
    rt.block_on(up.shutdown());
}

#[test]
fn a_tools_list_changed_notification_is_compared_before_the_next_call() {
    let Some((rt, d, _)) = vendored("list-changed") else {
        return;
    };
    let up = d.start(&rt);
    let variant = serde_json::to_string(&rug_pull().to_string()).expect("a string literal");
    let program = format!(
        "(let [before (tool/call 'peer/echo {{:message \"hi\"}})
               _ (tool/call 'peer/change-tools {{:variant {variant}}})
               after (tool/call 'peer/echo {{:message \"hi\"}})]
           [(:ok before) (:reason after) (get-in (meta 'peer/echo) [:_ptc \"pin\"])])"
    );
    assert_eq!(
        value(&rt, &up, &program),
        "[true :tool_changed \"not callable: its description changed on the server since it was pinned\"]"
    );
    rt.block_on(up.shutdown());
}

#[test]
fn a_server_that_restarts_mid_session_is_compared_before_the_next_call_reaches_it() {
    let Some((rt, d, _)) = vendored("crash") else {
        return;
    };
    let variant_file = d.dir.join("variant.json");
    // The sandboxed server reads the file from the test's folder, which it is given.
    d.write_config(json!({"env": {"PTC_TOOLS_VARIANT_FILE": variant_file},
                          "sandbox": {"read_paths": [d.dir]}}));
    let up = d.start(&rt);
    assert_eq!(
        value(&rt, &up, "(:ok (tool/call 'peer/echo {:message \"hi\"}))"),
        "true"
    );
    // The server comes back changed, and says nothing.
    std::fs::write(&variant_file, rug_pull().to_string()).expect("variant");
    let crashed = value(&rt, &up, "(:reason (tool/call 'peer/crash {}))");
    assert_eq!(crashed, ":upstream_unavailable");
    assert_eq!(
        value(
            &rt,
            &up,
            "(:reason (tool/call 'peer/echo {:message \"hi\"}))"
        ),
        ":tool_changed"
    );
    rt.block_on(up.shutdown());
}

#[test]
fn under_the_warn_policy_a_changed_tool_stays_callable_and_says_so() {
    let Some((rt, d, _)) = vendored("warn") else {
        return;
    };
    d.write_config(json!({
        "pin_policy": "warn",
        "env": {"PTC_TOOLS_VARIANT": rug_pull().to_string()},
    }));
    let up = d.start(&rt);
    assert_eq!(
        value(
            &rt,
            &up,
            "(:value (tool/call 'peer/echo {:message \"hi\"}))"
        ),
        "\"Echo: hi\""
    );
    assert_eq!(
        value(&rt, &up, "(get-in (meta 'peer/echo) [:_ptc \"pin\"])"),
        "\"warning: its description changed on the server since it was pinned\""
    );
    // The model still sees the reviewed description, not the server's new one.
    assert_eq!(
        value(&rt, &up, "(:description (meta 'peer/echo))"),
        "\"Echoes back the input string\""
    );
    // A removed tool is gone under either policy.
    let gone = value(
        &rt,
        &up,
        "(:reason (tool/call 'peer/get-structured-content {:location \"Oslo\"}))",
    );
    assert_eq!(gone, ":not_found");
    rt.block_on(up.shutdown());
}

#[test]
fn without_a_tool_list_include_tools_narrows_what_the_server_lists() {
    let Some(python) = ptc_tests::mcp_python() else {
        return;
    };
    let rt = runtime();
    let d = Deployment::new("unpinned", python);
    d.write_config(json!({"include_tools": ["echo"], "allow_writes": {}}));
    let up = d.start(&rt);
    assert_eq!(value(&rt, &up, "(count (dir 'peer))"), "1");
    assert!(up.pin_counts().is_empty(), "nothing is pinned");
    let e = run(&rt, &up, "(tool/call 'peer/get-sum {:a 1 :b 2})")
        .result
        .unwrap_err();
    assert!(
        e.message()
            .contains("no tool `get-sum` in upstream `peer`; its tools: echo"),
        "{e}"
    );
    rt.block_on(up.shutdown());
}

#[test]
fn ready_counts_the_pin_events_of_each_pinned_upstream() {
    use ptc_core::server::{EvalLimits, Evaluator, HttpOptions, serve_http};
    let Some((rt, d, _)) = vendored("ready") else {
        return;
    };
    d.write_config(json!({"env": {"PTC_TOOLS_VARIANT": rug_pull().to_string()}}));
    // Starting compares the listing with the pins (the catalog loads at start).
    let up = d.start(&rt);
    let body = rt.block_on(async {
        let evaluator = Evaluator::new(
            up.clone(),
            tokio::runtime::Handle::current(),
            EvalLimits::default(),
        )
        .expect("evaluator");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = serve_http(
            evaluator,
            HttpOptions {
                addr: "127.0.0.1:0".parse().expect("addr"),
                ..HttpOptions::default()
            },
            async {
                let _ = stopped.await;
            },
        )
        .await
        .expect("serves");
        let client = ptc_core::wire::http_client::builder()
            .build()
            .expect("client");
        let body = client
            .get(format!("http://{}/ready", running.addr))
            .send()
            .await
            .expect("GET /ready")
            .text()
            .await
            .expect("body");
        let _ = stop.send(());
        let _ = running.done.await;
        body
    });
    assert_eq!(
        body,
        "ready\nrunning 0\nwaiting 0\npins peer changed 2 removed 1 unpinned 1\n"
    );
    rt.block_on(up.shutdown());
}

#[test]
fn a_tools_list_changed_is_compared_when_it_arrives_not_only_at_the_next_call() {
    let Some((rt, d, _)) = vendored("eager") else {
        return;
    };
    let up = d.start(&rt);
    assert_eq!(counts(&up), (0, 0, 0));
    let variant = serde_json::to_string(&rug_pull().to_string()).expect("a string literal");
    assert_eq!(
        value(
            &rt,
            &up,
            &format!("(:ok (tool/call 'peer/change-tools {{:variant {variant}}}))")
        ),
        "true"
    );
    // No further call: the host compares on the notification itself. The event is the
    // observable; it is polled, bounded.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while counts(&up) != (2, 1, 1) {
        assert!(
            std::time::Instant::now() < until,
            "the change was not compared on its own: {:?}",
            counts(&up)
        );
        std::thread::yield_now();
    }
    rt.block_on(up.shutdown());
}
