//! Writes to an MCP upstream, against the real Python peer (`fixtures/mcp/py_server.py`): a tool
//! not annotated `readOnlyHint: true` is a write, callable only when allow-listed and with the
//! write gate open, after a person's approval; its effect shows in a later read (`list-notes`).
//! `scripts/test` installs the peer; without it a test fails under `CI=true` and otherwise says it
//! was skipped.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ptc_core::call::approval::{ApprovalRequest, Approver, Decision, DecisionFuture};
use ptc_core::{Budgets, ProgramHost, StartOptions, Upstreams, WriteGate};
use ptc_lisp::{Interpreter, Limits};
use serde_json::{Value, json};

struct Bed {
    rt: tokio::runtime::Runtime,
    up: Arc<Upstreams>,
}

impl Drop for Bed {
    fn drop(&mut self) {
        self.rt.block_on(self.up.shutdown());
    }
}

/// The peer, unpinned, with `extra` fields on its entry and the write gate `gate`.
fn bed(python: &Path, extra: Value, gate: WriteGate) -> Bed {
    let mut peer = json!({
        "transport": "mcp_stdio",
        "command": python,
        "args": ["py_server.py", "stdio"],
        "cwd": Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/mcp"),
    });
    if let (Value::Object(p), Value::Object(e)) = (&mut peer, extra) {
        p.extend(e);
    }
    let config = json!({"upstreams": {"py": peer}});
    let loaded = ptc_plan::load_str(
        &config.to_string(),
        Path::new("/mcp-writes/upstreams.json"),
        &ptc_plan::FileSource,
    )
    .unwrap_or_else(|d| panic!("{d}"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let options = StartOptions {
        writes: gate,
        ..StartOptions::default()
    };
    let up = rt
        .block_on(Upstreams::start(loaded.plan, loaded.secrets, options))
        .expect("the peer starts");
    Bed {
        rt,
        up: Arc::new(up),
    }
}

/// A person who answers `answer` and counts the times they were asked.
struct Person {
    answer: Decision,
    asked: Mutex<Vec<ApprovalRequest>>,
}

impl Approver for Person {
    fn approve(&self, request: ApprovalRequest, _: Duration) -> DecisionFuture {
        self.asked.lock().unwrap().push(request);
        Box::pin(std::future::ready(self.answer.clone()))
    }
}

fn person(answer: Decision) -> Arc<Person> {
    Arc::new(Person {
        answer,
        asked: Mutex::new(Vec::new()),
    })
}

impl Bed {
    fn value(&self, src: &str, approver: Arc<dyn Approver>) -> String {
        let host = Arc::new(ProgramHost::with_approver(
            self.up.clone(),
            self.rt.handle().clone(),
            Budgets::default(),
            approver,
        ));
        let mut interp = Interpreter::with_host(Limits::default(), host);
        match self
            .rt
            .block_on(interp.eval_async(src, std::future::pending::<ptc_lisp::Reason>()))
        {
            Ok(v) => v.to_string(),
            Err(e) => panic!("{src}: {e}"),
        }
    }
}

const ADD: &str = "(let [r (tool/call 'py/add-note {:text \"deploy paused\"})]
  [(:ok r) (:reason r) (:mutation_state r) (:value r)])";
const NOTES: &str = "(-> (tool/call 'py/list-notes {}) :value :result)";

#[test]
fn an_approved_mcp_write_runs_and_a_declined_one_does_not() {
    let Some(python) = ptc_tests::mcp_python() else {
        return;
    };
    let b = bed(
        &python,
        json!({"include_tools": ["add-note", "list-notes"], "allow_writes": {"add-note": {}}}),
        WriteGate::Open,
    );
    let entry = b.up.catalog().server("py").unwrap();
    let add = entry.tool("add-note").unwrap();
    assert_eq!(add.classified.effect, ptc_plan::Effect::Write);
    assert_eq!(add.classified.approval, ptc_plan::Approval::Always);
    assert!(add.disabled.is_none());
    assert!(
        entry
            .tool("list-notes")
            .unwrap()
            .classified
            .effect
            .is_read()
    );

    let no = person(Decision::Declined("the person answered no".into()));
    assert_eq!(
        b.value(ADD, no.clone()),
        "[false :approval_declined nil nil]"
    );
    assert_eq!(b.value(NOTES, no.clone()), "[]", "nothing was written");
    let asked = no.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "reads are never asked about");
    assert_eq!(
        asked[0].preview,
        "MCP tools/call `add-note` on upstream `py`"
    );
    assert_eq!(asked[0].arguments, json!({"text": "deploy paused"}));

    let yes = person(Decision::Approved);
    assert_eq!(
        b.value(ADD, yes.clone()),
        "[true nil :applied \"note 1 added\"]"
    );
    assert_eq!(b.value(NOTES, yes), "[\"deploy paused\"]");
}

#[test]
fn an_mcp_write_needs_the_allow_list_and_the_gate() {
    let Some(python) = ptc_tests::mcp_python() else {
        return;
    };
    let yes = person(Decision::Approved);
    // Allow-listed, gate closed.
    let b = bed(
        &python,
        json!({"include_tools": ["add-note", "list-notes"], "allow_writes": {"add-note": {}}}),
        WriteGate::Closed,
    );
    assert_eq!(b.value(ADD, yes.clone()), "[false :write_disabled nil nil]");
    drop(b);
    // Gate open, not allow-listed: listed, disabled, and said why.
    let b = bed(
        &python,
        json!({"include_tools": ["add-note", "list-notes"]}),
        WriteGate::Open,
    );
    let add =
        b.up.catalog()
            .server("py")
            .unwrap()
            .tool("add-note")
            .unwrap()
            .clone();
    assert_eq!(
        add.disabled.as_deref(),
        Some("a write the config does not allow-list (add it to the upstream's allow_writes)")
    );
    assert_eq!(
        add.to_json()["_ptc"]["disabled"],
        json!("a write the config does not allow-list (add it to the upstream's allow_writes)")
    );
    assert_eq!(b.value(ADD, yes.clone()), "[false :write_disabled nil nil]");
    assert_eq!(b.value(NOTES, yes.clone()), "[]");
    assert!(
        yes.asked.lock().unwrap().is_empty(),
        "nobody is asked about a disabled write"
    );
}

#[test]
fn a_listed_read_the_operator_granted_as_a_write_is_treated_as_one() {
    let Some(python) = ptc_tests::mcp_python() else {
        return;
    };
    // Unpinned, the server's word is all there is; the operator's stricter reading wins.
    let b = bed(
        &python,
        json!({"include_tools": ["echo"], "allow_writes": {"echo": {"approval": "always"}}}),
        WriteGate::Open,
    );
    let no = person(Decision::Declined("no".into()));
    assert_eq!(
        b.value(
            "(:reason (tool/call 'py/echo {:message \"hi\"}))",
            no.clone()
        ),
        ":approval_declined"
    );
    assert_eq!(no.asked.lock().unwrap().len(), 1);
}
