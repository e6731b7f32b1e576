//! MCP upstreams through the runtime: catalog loading (at start-up or on first use), `tool/call`
//! and discovery on `@modelcontextprotocol/server-everything` over stdio, with the same validator,
//! result contract and redaction as OpenAPI upstreams. `scripts/test` installs the peer into
//! `fixtures/mcp`; without it a test fails under `CI=true` and otherwise says it was skipped.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ptc_core::{Budgets, CatalogLoad, ProgramRun, StartOptions, Upstreams, run_program};
use ptc_lisp::Limits;
use serde_json::json;

const CANARY: &str = "canary-mcp-3d8e1f";

fn everything() -> Option<PathBuf> {
    let entry = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let why = if !node {
        "node is missing (install Node.js 20 or later)"
    } else if !entry.exists() {
        "server-everything is missing (scripts/test installs it)"
    } else {
        return Some(entry);
    };
    ptc_tests::skip(why);
    None
}

fn config(command: &str, args: &[String]) -> String {
    json!({
        "credentials": {"canary": {"source": "literal", "value": CANARY}},
        "upstreams": {"everything": {
            "transport": "mcp_stdio",
            "description": "the MCP reference server",
            "command": command,
            "args": args,
        }}
    })
    .to_string()
}

struct Bed {
    rt: tokio::runtime::Runtime,
    up: Arc<Upstreams>,
}

impl Drop for Bed {
    fn drop(&mut self) {
        self.rt.block_on(self.up.shutdown());
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn start(
    rt: &tokio::runtime::Runtime,
    command: &str,
    args: &[String],
    catalog: CatalogLoad,
) -> Result<Upstreams, ptc_core::StartError> {
    let loaded = ptc_plan::load_str(
        &config(command, args),
        Path::new("/mcp-test/upstreams.json"),
        &ptc_plan::FileSource,
    )
    .unwrap_or_else(|d| panic!("{d}"));
    rt.block_on(Upstreams::start(
        loaded.plan,
        loaded.secrets,
        StartOptions {
            catalog,
            ..StartOptions::default()
        },
    ))
}

fn bed(entry: &Path, catalog: CatalogLoad) -> Bed {
    let rt = runtime();
    let up = start(&rt, "node", &[entry.to_string_lossy().into()], catalog).unwrap();
    Bed {
        rt,
        up: Arc::new(up),
    }
}

impl Bed {
    fn run(&self, src: &str) -> ProgramRun {
        self.run_with(src, Budgets::default())
    }

    fn run_with(&self, src: &str, budgets: Budgets) -> ProgramRun {
        run_program(
            self.up.clone(),
            self.rt.handle().clone(),
            src,
            Limits::default(),
            budgets,
            None,
        )
    }

    fn value(&self, src: &str) -> String {
        match self.run(src).result {
            Ok(v) => v.to_string(),
            Err(e) => panic!("{src}: {e}"),
        }
    }
}

#[test]
fn mcp_tools_are_called_and_discovered_like_any_other() {
    let Some(entry) = everything() else { return };
    let b = bed(&entry, CatalogLoad::AtStart);
    let r = b.run("(doc 'everything/echo)");
    assert!(
        !r.output.contains("Your last text answer"),
        "no sample before a call: {}",
        r.output
    );
    assert_eq!(
        b.value("(tool/call 'everything/echo {:message \"hi\"})"),
        "{:ok true :value \"Echo: hi\" :value_kind :text}"
    );
    assert_eq!(
        b.value("(tool/call {:server \"everything\" :tool \"get-structured-content\" :args {:location \"Chicago\"}})"),
        "{:ok true :value {\"conditions\" \"Light rain / drizzle\" \"humidity\" 82 \"temperature\" 36} :value_kind :json}"
    );
    assert_eq!(
        b.value("(:temperature (:value (tool/call 'everything/get-structured-content {:location \"Chicago\"})))"),
        "36"
    );
    // The one validator checks MCP input schemas too, before the server sees the call.
    let e = b
        .run("(tool/call 'everything/get-sum {:a \"two\" :b 1})")
        .result
        .unwrap_err();
    assert!(
        e.message().contains(
            "everything/get-sum: invalid arguments: :a must be a number, got string \"two\""
        ),
        "{e}"
    );
    let e = b.run("(tool/call 'everything/ecko {})").result.unwrap_err();
    assert!(
        e.message().contains("did you mean `everything/echo`?"),
        "{e}"
    );
    let dir = b.value("(dir 'everything)");
    assert!(dir.contains("\"everything/echo - "), "{dir}");
    let r = b.run("(doc 'everything/get-sum)");
    assert!(r.output.contains(":a number (required)"), "{}", r.output);
    let meta = b.value("(meta 'everything/get-sum)");
    assert!(
        meta.contains(
            "\"_ptc\" {\"effect\" \"read\" \"name\" \"get-sum\" \"transport\" \"mcp_stdio\"}"
        ),
        "{meta}"
    );
    // Nothing transport-specific outside `_ptc` (the server's own descriptions aside).
    assert_eq!(
        b.value("(sort (keys (first (tool/servers))))"),
        "[:description :loaded :name :tool_count]"
    );
    // A registered secret an MCP server echoes is masked.
    let v = b.value(&format!(
        "(tool/call 'everything/echo {{:message \"{CANARY}\"}})"
    ));
    assert_eq!(
        v,
        "{:ok true :value \"Echo: [REDACTED]\" :value_kind :text}"
    );
    // A text answer's start is shown by `doc` from then on, redacted as the answer was.
    let r = b.run("(doc 'everything/echo)");
    assert!(
        r.output
            .ends_with("Your last text answer from it began:\n  | Echo: [REDACTED]\n"),
        "{}",
        r.output
    );
}

#[test]
fn the_catalog_loads_on_first_use_when_configured() {
    let Some(entry) = everything() else { return };
    let b = bed(&entry, CatalogLoad::OnFirstUse);
    assert_eq!(
        b.value("(mapv :loaded (tool/servers))"),
        "[false]",
        "nothing was listed at start-up"
    );
    // The pre-check cannot know the tools yet: the call-time check still applies.
    let e = b
        .run("(tool/call 'everything/get-sum {:a \"two\" :b 1})")
        .result
        .unwrap_err();
    assert_eq!(e.reason(), "invalid_args", "{e}");
    assert_eq!(b.value("(mapv :loaded (tool/servers))"), "[true]");
}

#[test]
fn an_upstream_that_cannot_start_fails_the_start_or_its_calls() {
    let rt = runtime();
    let missing = "/nonexistent/ptc-mcp-server".to_string();
    let e = start(&rt, &missing, &[], CatalogLoad::AtStart)
        .err()
        .unwrap();
    assert_eq!(e.upstream.as_deref(), Some("everything"));
    assert!(e.to_string().starts_with("upstream `everything`: "), "{e}");
    let up = Arc::new(start(&rt, &missing, &[], CatalogLoad::OnFirstUse).unwrap());
    let r = run_program(
        up.clone(),
        rt.handle().clone(),
        "[(:reason (tool/call 'everything/echo {:message \"x\"})) (dir 'everything)]",
        Limits::default(),
        Budgets::default(),
        None,
    );
    let v = r.result.unwrap().to_string();
    assert!(
        v.starts_with("[:upstream_unavailable {:message "),
        "world faults are data, in discovery too: {v}"
    );
    rt.block_on(up.shutdown());
}

/// An MCP result is charged to the program's byte budget once its size is known: a result of
/// exactly the bytes left passes, one byte more is refused.
#[test]
fn mcp_results_fit_the_byte_budget_exactly_or_are_refused() {
    let Some(entry) = everything() else { return };
    let b = bed(&entry, CatalogLoad::AtStart);
    let call = "(tool/call 'everything/echo {:message \"hi\"})";
    let size = "Echo: hi".len() as u64;
    let fits = b.run_with(
        call,
        Budgets {
            max_bytes: size,
            ..Budgets::default()
        },
    );
    assert_eq!(
        fits.result.expect("fits").to_string(),
        "{:ok true :value \"Echo: hi\" :value_kind :text}"
    );
    let over = b.run_with(
        call,
        Budgets {
            max_bytes: size - 1,
            ..Budgets::default()
        },
    );
    assert_eq!(
        over.result.expect("a world fault is data").to_string(),
        format!(
            "{{:message \"everything/echo: the program's budget of {} upstream bytes is spent; \
             ask for less (filters, summary modes, smaller pages)\" :ok false :reason :cap_exhausted}}",
            size - 1
        )
    );
}

/// After `shutdown` the child is gone and calls say so rather than start it again.
#[test]
fn calls_after_shutdown_are_refused() {
    let Some(entry) = everything() else { return };
    let b = bed(&entry, CatalogLoad::AtStart);
    assert_eq!(
        b.value("(:ok (tool/call 'everything/echo {:message \"hi\"}))"),
        "true"
    );
    b.rt.block_on(b.up.shutdown());
    let v = b.value("(tool/call 'everything/echo {:message \"hi\"})");
    assert_eq!(
        v,
        "{:message \"upstream `everything` tool `echo`: the client was shut down\" :ok false :reason :upstream_unavailable}"
    );
}

/// The Python peer (`fixtures/mcp/py_server.py`) over stdio, its upstream entry given `fields`.
fn python_with(fields: serde_json::Value) -> Option<Bed> {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/mcp");
    let python = fixtures.join(".venv/bin/python");
    if !python.exists() {
        ptc_tests::skip("the fixtures/mcp Python venv is missing (scripts/test installs it)");
        return None;
    }
    let mut upstream = json!({
        "transport": "mcp_stdio",
        "command": python,
        "args": [fixtures.join("py_server.py")],
    });
    if let (Some(up), Some(extra)) = (upstream.as_object_mut(), fields.as_object()) {
        up.extend(extra.clone());
    }
    let config = json!({"upstreams": {"py": upstream}});
    let loaded = ptc_plan::load_str(
        &config.to_string(),
        Path::new("/mcp-test/upstreams.json"),
        &ptc_plan::FileSource,
    )
    .unwrap_or_else(|d| panic!("{d}"));
    let rt = runtime();
    let up = rt
        .block_on(Upstreams::start(
            loaded.plan,
            loaded.secrets,
            StartOptions::default(),
        ))
        .expect("the Python peer starts");
    Some(Bed {
        rt,
        up: Arc::new(up),
    })
}

/// An MCP upstream's own `max_response_bytes` is named when it is the limit that stopped an
/// answer; the program's byte budget only when the budget was the smaller of the two.
#[test]
fn the_limit_named_is_the_one_that_was_smaller() {
    let Some(b) = python_with(json!({"max_response_bytes": 20_000})) else {
        return;
    };
    let call = "(tool/call 'py/big {:n 30000})";
    let reply = |budget: u64| {
        let run = b.run_with(
            call,
            Budgets {
                max_bytes: budget,
                ..Budgets::default()
            },
        );
        let v = run.result.expect("a world fault is data");
        let reason = match &v {
            ptc_lisp::Value::Map(m) => m.get(&ptc_lisp::Value::keyword("reason")).cloned(),
            _ => None,
        };
        (reason.map(|r| r.to_string()), v.to_string())
    };
    // The default budget (64 MiB) is far above the upstream's cap: the upstream's cap is named.
    let (reason, text) = reply(Budgets::default().max_bytes);
    assert_eq!(reason.as_deref(), Some(":response_too_large"), "{text}");
    assert!(text.contains("20000"), "{text}");
    assert!(!text.contains("budget"), "{text}");
    // At exactly the cap the cap still binds (the budget is not the smaller limit).
    let (reason, text) = reply(20_000);
    assert_eq!(reason.as_deref(), Some(":response_too_large"), "{text}");
    // One byte less and the program's budget is what stopped it.
    let (reason, text) = reply(19_999);
    assert_eq!(reason.as_deref(), Some(":cap_exhausted"), "{text}");
    assert!(
        text.contains("the program's budget of 19999 upstream bytes is spent"),
        "{text}"
    );
    // Under both limits the answer arrives.
    assert_eq!(
        b.value("(count (:value (tool/call 'py/big {:n 1000})))"),
        "1000"
    );
}

/// An MCP upstream the config leaves undescribed is shown by what the server says of itself
/// (`serverInfo`); a configured description wins.
#[test]
fn an_undescribed_mcp_upstream_is_shown_by_its_server_info() {
    let Some(b) = python_with(json!({})) else {
        return;
    };
    assert_eq!(
        b.value("(:description (first (tool/servers)))")
            .trim_matches('"')
            .split(' ')
            .next(),
        Some("ptc-py-peer"),
        "the server's name and version"
    );
    let Some(b) = python_with(json!({"description": "records, as the operator says"})) else {
        return;
    };
    assert_eq!(
        b.value("(:description (first (tool/servers)))"),
        "\"records, as the operator says\""
    );
}
