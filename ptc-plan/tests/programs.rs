//! Declared programs, compiled with the plan: each rule of `ptc_plan::programs` at its boundary,
//! a program that passes and what the plan then holds, and every problem at the program's
//! file:line:col with its fix.

use std::path::{Path, PathBuf};

use ptc_plan::pins::{ToolList, path as pins_path};
use ptc_plan::{Diagnostics, Loaded, PinnedTool};
use serde_json::{Map, Value, json};

/// A folder holding a config (an OpenAPI upstream `obs`, an MCP upstream `mcp` pinned, an MCP
/// upstream `live` not pinned) and its programs.
struct Deployment {
    dir: PathBuf,
    /// Adds an upstream `broken` whose document is missing.
    broken: bool,
}

fn ok_response() -> Value {
    json!({"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object"}}}}})
}

fn document() -> Value {
    let org =
        json!({"name": "org_id", "in": "query", "required": true, "schema": {"type": "string"}});
    json!({
        "openapi": "3.0.3",
        "info": {"title": "obs", "version": "1"},
        "paths": {
            "/traces": {"get": {
                "operationId": "list_traces",
                "parameters": [org, {"name": "limit", "in": "query", "schema": {"type": "integer"}},
                               {"name": "status", "in": "query",
                                "schema": {"type": "string", "enum": ["ok", "error"]}},
                               {"name": "cursor", "in": "query", "schema": {"type": "string"}}],
                "x-ptc-pagination": {"cursor_arg": "cursor", "next_cursor_path": "$.next"},
                "responses": ok_response()}},
            "/errors": {"get": {"operationId": "list_errors", "parameters": [org],
                                "responses": ok_response()}},
            "/traces/{id}": {
                "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
                "put": {"operationId": "replace_trace", "parameters": [org], "responses": ok_response(),
                        "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object"}}}}},
                "post": {"operationId": "annotate_trace", "parameters": [org], "responses": ok_response(),
                         "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object"}}}}}
            }
        }
    })
}

fn mcp_tool(name: &str, annotations: Value) -> PinnedTool {
    let Value::Object(annotations) = annotations else {
        panic!("annotations are an object")
    };
    PinnedTool::new(
        name,
        name,
        json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        None,
        annotations,
    )
}

impl Deployment {
    fn new(test: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("ptc-plan-programs-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("programs")).unwrap();
        std::fs::write(dir.join("obs.json"), document().to_string()).unwrap();
        let list = ToolList::new(
            "mcp",
            vec![
                mcp_tool("read_file", json!({"readOnlyHint": true})),
                mcp_tool(
                    "write_file",
                    json!({"destructiveHint": false, "idempotentHint": true}),
                ),
                mcp_tool("delete_file", json!({})),
                mcp_tool("unlisted_write", json!({})),
            ],
        );
        let pins = pins_path(&dir.join("upstreams.json"), "mcp");
        std::fs::create_dir_all(pins.parent().unwrap()).unwrap();
        std::fs::write(pins, list.render()).unwrap();
        Deployment { dir, broken: false }
    }

    /// Writes program `name` with `source` and declares it with `declaration` (its `file` added).
    fn program(&self, name: &str, source: &str, declaration: Value) -> &Self {
        std::fs::write(self.dir.join(format!("programs/{name}.clj")), source).unwrap();
        let mut d = declaration;
        d["file"] = json!(format!("programs/{name}.clj"));
        if d.get("description").is_none() {
            d["description"] = json!("a program");
        }
        let mut programs = self.programs();
        programs.insert(name.to_string(), d);
        std::fs::write(
            self.dir.join("programs.json"),
            Value::Object(programs).to_string(),
        )
        .unwrap();
        self
    }

    fn programs(&self) -> Map<String, Value> {
        std::fs::read_to_string(self.dir.join("programs.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }

    fn load(&self) -> Result<Loaded, Diagnostics> {
        let mut config = json!({
            "upstreams": {
                "obs": {"transport": "openapi", "base_url": "https://obs.example",
                        "schema_file": "obs.json",
                        "include_operations": ["list_traces", "list_errors", "replace_trace", "annotate_trace"],
                        "allow_writes": {"replace_trace": {}, "annotate_trace": {"approval": "none"}}},
                "mcp": {"transport": "mcp_stdio", "command": "server",
                        "allow_writes": {"write_file": {}, "delete_file": {}}},
                "live": {"transport": "mcp_stdio", "command": "server"}
            },
            "programs": Value::Object(self.programs()),
        });
        if self.broken {
            config["upstreams"]["broken"] = json!({"transport": "openapi",
                "base_url": "https://broken.example", "schema_file": "missing.json",
                "include_operations": ["x"]});
        }
        let path = self.dir.join("upstreams.json");
        std::fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
        ptc_plan::load(&path)
    }

    /// The problems, each as `file-name:line:col: message`.
    fn problems(&self) -> Vec<String> {
        let diags = self.load().expect_err("the programs have problems");
        diags
            .iter()
            .map(|d| {
                let file = Path::new(&d.file)
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                let (line, col) = d.position.unwrap_or((0, 0));
                assert!(d.help.is_some(), "every problem says how to fix it: {d}");
                assert!(d.program.is_some(), "each problem names its program: {d}");
                format!("{file}:{line}:{col}: {}", d.message)
            })
            .collect()
    }
}

impl Drop for Deployment {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn params(properties: Value, required: &[&str]) -> Value {
    json!({"parameters": {"type": "object", "properties": properties, "required": required}})
}

#[test]
fn a_program_that_passes_is_in_the_plan_with_its_calls_and_annotations() {
    let d = Deployment::new("passes");
    let source = "(let [r (tool/call 'obs/list-errors {:org-id data/org_id})\n      t (obs/list_traces {:org-id data/org_id :status \"error\"})\n      p (tool/pages 'obs/list-traces {:org-id \"acme\"} {:max-pages 2})\n      f (tool/call 'mcp/read_file {:path \"a\"})]\n  [r t p f])";
    d.program(
        "summary",
        source,
        params(json!({"org_id": {"type": "string"}}), &["org_id"]),
    );
    let loaded = d.load().unwrap_or_else(|e| panic!("{e}"));
    let p = loaded
        .plan
        .program("summary")
        .expect("the program is in the plan");
    assert_eq!(p.source, source);
    assert_eq!(
        p.calls,
        ["mcp/read_file", "obs/list-errors", "obs/list-traces"]
    );
    assert!(p.writes.is_empty());
    assert!(
        p.annotations.read_only_hint
            && !p.annotations.destructive_hint
            && p.annotations.idempotent_hint
    );
    assert!(
        loaded
            .files
            .iter()
            .any(|f| f.ends_with("programs/summary.clj")),
        "{:?}",
        loaded.files
    );
    // The plan a binary embeds holds the program and reads back the same.
    let text = serde_json::to_string(&loaded.plan).unwrap();
    assert_eq!(
        serde_json::from_str::<ptc_plan::Plan>(&text).unwrap(),
        loaded.plan
    );
}

#[test]
fn a_write_must_be_allowed_by_its_upstream_and_declared_by_the_program() {
    let d = Deployment::new("writes");
    d.program(
        "flag",
        "(tool/call 'obs/annotate-trace {:org-id \"a\" :id \"t\" :body {}})\n(mcp/write_file {:path \"x\"})",
        json!({"writes": ["obs/annotate-trace", "mcp/write_file"]}),
    );
    let loaded = d.load().unwrap_or_else(|e| panic!("{e}"));
    let p = loaded.plan.program("flag").unwrap();
    assert_eq!(p.writes, ["mcp/write_file", "obs/annotate-trace"]);
    // A POST adds; the MCP tool says it neither destroys nor differs when repeated; the POST does.
    assert!(!p.annotations.read_only_hint);
    assert!(!p.annotations.destructive_hint);
    assert!(!p.annotations.idempotent_hint);

    // One destructive write makes the program destructive; idempotent writes only keep it so.
    d.program(
        "flag",
        "(obs/replace-trace {:org-id \"a\" :id \"t\" :body {}})\n(mcp/write_file {:path \"x\"})",
        json!({"writes": ["obs/replace-trace", "mcp/write_file"]}),
    );
    let a = d.load().unwrap().plan.program("flag").unwrap().annotations;
    assert!(
        !a.read_only_hint && a.destructive_hint && a.idempotent_hint,
        "{a:?}"
    );
    // An MCP tool without hints is destructive and not idempotent, as MCP says.
    d.program(
        "flag",
        "(mcp/delete_file {:path \"x\"})",
        json!({"writes": ["mcp/delete_file"]}),
    );
    let a = d.load().unwrap().plan.program("flag").unwrap().annotations;
    assert!(a.destructive_hint && !a.idempotent_hint, "{a:?}");

    d.program(
        "flag",
        "(tool/call 'obs/annotate-trace {:org-id \"a\" :id \"t\" :body {}})\n  (mcp/unlisted_write {:path \"x\"})",
        json!({"writes": ["obs/list-errors"]}),
    );
    assert_eq!(
        d.problems(),
        [
            "flag.clj:1:1: calls obs/annotate-trace, a write, but the program's \"writes\" does not list it",
            "flag.clj:2:3: calls mcp/unlisted_write, a write its upstream does not allow",
            "upstreams.json:36:9: \"writes\" lists `obs/list-errors`, which the program does not call as a write",
        ]
    );
}

#[test]
fn every_call_is_named_literally_and_exists() {
    let d = Deployment::new("calls");
    d.program(
        "bad",
        "(tool/call 'obs/list-trace {:org-id \"a\"})
(tool/call 'nope/x {})
(map tool/call [])
(tool/call (symbol \"obs/list-errors\") {})
(tool/call 'live/anything {})
(tool/pages 'obs/list-errors {:org-id \"a\"})
(-> 'obs/list-errors (tool/call {:org-id \"a\"}))
(tool/call 'obs)
(obs/list-errors {:org-id \"a\"})",
        json!({}),
    );
    assert_eq!(
        d.problems(),
        [
            "bad.clj:1:1: calls `obs/list-trace`, but `obs` has no tool `list-trace` (did you mean `list-traces`?)",
            "bad.clj:2:1: calls `nope/x`, but there is no upstream `nope`",
            "bad.clj:3:6: `tool/call` is used here other than as a call's head, so what it calls is known only when the program runs",
            "bad.clj:4:1: the tool this calls is computed when the program runs",
            "bad.clj:5:1: calls `live/anything`, but the tools of `live` are listed only when it runs",
            "bad.clj:6:1: tool/pages: obs/list-errors has no pagination",
            "bad.clj:7:23: `tool/call` is used here other than as a call's head, so what it calls is known only when the program runs",
            "bad.clj:8:1: tool/call: `obs` is not qualified with its upstream; write 'server/obs (list upstreams with (tool/servers))",
        ]
    );
}

#[test]
fn literal_arguments_meet_the_tool_s_schema() {
    let d = Deployment::new("args");
    d.program(
        "bad",
        "(obs/list-traces {:org-id \"a\" :limit \"ten\"})
(obs/list-traces {:org-id \"a\" :status \"fine\"})
(obs/list-traces {:limit 3})
(obs/list-traces {:org-id \"a\" :colour 1})
(let [k :org-id] (obs/list-traces {k \"a\"}))
(obs/list-traces {:org-id \"a\" :limit 3 :status \"ok\"})",
        json!({}),
    );
    let problems = d.problems();
    assert_eq!(problems.len(), 4, "{problems:#?}");
    assert!(
        problems[0].starts_with(
            "bad.clj:1:1: obs/list-traces: invalid arguments: :limit must be an integer"
        ),
        "{problems:#?}"
    );
    assert!(problems[1].starts_with("bad.clj:2:1: obs/list-traces: invalid arguments: :status must be one of \"ok\" \"error\""), "{problems:#?}");
    assert!(
        problems[2].starts_with(
            "bad.clj:3:1: obs/list-traces: invalid arguments: missing required argument :org-id"
        ),
        "{problems:#?}"
    );
    assert!(
        problems[3].starts_with(
            "bad.clj:4:1: obs/list-traces: invalid arguments: unknown argument :colour"
        ),
        "{problems:#?}"
    );
}

#[test]
fn a_parameter_passed_as_an_argument_meets_it_by_its_declaration() {
    let d = Deployment::new("flows");
    let source = "(obs/list-traces {:org-id data/org :limit data/limit :status data/status})";
    let declared = |org: Value, required: &[&str]| {
        params(
            json!({"org": org, "limit": {"type": "integer"},
                   "status": {"type": "string", "enum": ["error"]}}),
            required,
        )
    };
    d.program("p", source, declared(json!({"type": "string"}), &["org"]));
    d.load().unwrap_or_else(|e| panic!("{e}"));
    d.program("p", source, declared(json!({"type": "string"}), &[]));
    assert_eq!(
        d.problems(),
        ["p.clj:1:1: `org_id` is required by obs/list-traces, but parameter `org` is optional"]
    );
    d.program("p", source, declared(json!({"type": "integer"}), &["org"]));
    assert_eq!(
        d.problems(),
        ["p.clj:1:1: parameter `org` is integer, but obs/list-traces's `org_id` takes string"]
    );
    d.program(
        "p",
        "(obs/list-traces {:org-id \"a\" :status data/status})",
        params(json!({"status": {"type": "string"}}), &[]),
    );
    assert_eq!(
        d.problems(),
        [
            "p.clj:1:1: obs/list-traces's `status` takes one of [\"ok\",\"error\"], but parameter `status` may hold other values"
        ]
    );
}

#[test]
fn only_declared_parameters_are_read() {
    let d = Deployment::new("data");
    d.program(
        "p",
        "(obs/list-errors {:org-id data/org_id})\n(str data/orgid '(data/quoted))",
        params(json!({"org_id": {"type": "string"}}), &["org_id"]),
    );
    assert_eq!(
        d.problems(),
        ["p.clj:2:6: reads data/orgid, which is not a parameter (did you mean `org_id`?)"]
    );
}

#[test]
fn a_program_that_does_not_read_or_cannot_be_read_is_reported_where_it_is() {
    let d = Deployment::new("read");
    d.program("p", "(obs/list-errors {:org-id \"a\"}\n  (", json!({}));
    let problems = d.problems();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("p.clj:2:4: the program does not read: unexpected end of input"),
        "{problems:?}"
    );

    let max = ptc_lisp::Limits::default().max_program_bytes;
    d.program("p", &" ".repeat(max), json!({}));
    d.load()
        .unwrap_or_else(|e| panic!("a program at the limit loads: {e}"));
    d.program("p", &" ".repeat(max + 1), json!({}));
    let problems = d.problems();
    assert!(
        problems[0].contains(&format!(
            "is {} bytes, over the {max}-byte program limit",
            max + 1
        )),
        "{problems:?}"
    );
    assert!(problems[0].starts_with("upstreams.json:"), "{problems:?}");

    std::fs::remove_file(d.dir.join("programs/p.clj")).unwrap();
    let problems = d.problems();
    assert!(problems[0].contains("cannot read program"), "{problems:?}");
}

#[test]
fn declarations_are_checked_like_the_rest_of_the_config() {
    let d = Deployment::new("declared");
    d.program("Bad_Name", "1", json!({}));
    d.program(
        "p",
        "1",
        json!({"parameters": {"type": "array"}, "description": " "}),
    );
    d.program(
        "q",
        "1",
        json!({"parameters": {"type": "object", "properties": {"a/b": {}, "c": 1}, "required": ["d"]},
               "result": [], "writes": "obs/x", "extra": true}),
    );
    let messages: Vec<String> = d
        .load()
        .unwrap_err()
        .iter()
        .map(|d| d.message.clone())
        .collect();
    for expected in [
        "program name `Bad_Name` is not a tool name",
        "`description` must not be empty",
        "`parameters` must be an object schema",
        "parameter name `a/b` cannot be read as data/a/b",
        "parameter `c` must be a JSON Schema object",
        "`required` names `d`, which is not a parameter",
        "`result` must be a JSON Schema object",
        "`writes` must be an array of server/tool names",
        "unknown field `extra`",
    ] {
        assert!(
            messages.iter().any(|m| m.contains(expected)),
            "{expected}\n{messages:#?}"
        );
    }
}

/// An upstream with problems of its own has its programs' calls left unchecked: its problems
/// are reported, and a call of it would only repeat them. Other calls are checked as ever.
#[test]
fn calls_of_an_upstream_that_did_not_compile_are_not_reported_again() {
    let mut d = Deployment::new("broken");
    d.broken = true;
    d.program(
        "p",
        "(broken/x {:anything 1})\n(str/join \",\" [])\n(obs/list-errors {})",
        json!({}),
    );
    let diags = d.load().expect_err("the broken upstream fails the load");
    let messages: Vec<String> = diags.iter().map(|d| d.to_string()).collect();
    assert_eq!(messages.len(), 2, "{messages:#?}");
    assert!(messages[0].contains("upstream 'broken'"), "{messages:#?}");
    assert!(
        messages[1].contains("p.clj:3:1")
            && messages[1].contains("missing required argument :org-id"),
        "{messages:#?}"
    );
}

/// `propose` drafts a declaration: a required argument written as one literal everywhere becomes
/// a parameter with the argument's schema; an optional one, or one written with two values,
/// stays; a `data/` key gets the schema of the argument it is passed to, else the type of the
/// value it had; the result is the answer's shape; the writes are listed. The draft passes.
#[test]
fn a_draft_lifts_required_literals_and_declares_what_the_program_reads() {
    use ptc_plan::programs::promote::propose;
    let d = Deployment::new("propose");
    let plan = d.load().unwrap().plan;
    let source = "(obs/list-traces {:org-id \"acme\" :limit 5 :status data/status})
(obs/list-errors {:org-id \"acme\"})
(obs/annotate-trace {:org-id \"acme\" :id \"t1\" :body {}})
(obs/annotate-trace {:org-id \"acme\" :id \"t2\" :body {}})
(str data/note)";
    let context = json!({"note": "n", "status": "ok"});
    let answer = json!({"count": 3});
    let p = propose(
        &plan,
        source,
        "about acme",
        context.as_object(),
        Some(&answer),
    )
    .unwrap();
    assert_eq!(p.lifted, [("org_id".to_string(), "\"acme\"".to_string())]);
    assert!(
        p.source
            .starts_with("(obs/list-traces {:org-id data/org_id :limit 5 :status data/status})"),
        "{}",
        p.source
    );
    assert!(
        p.source.contains(":id \"t1\"") && p.source.contains(":id \"t2\""),
        "{}",
        p.source
    );
    let declared = &p.declaration;
    assert_eq!(declared["description"], "about acme");
    assert_eq!(
        declared["parameters"]["properties"],
        json!({"note": {"type": "string"}, "org_id": {"type": "string"},
               "status": {"type": "string", "enum": ["ok", "error"]}})
    );
    assert_eq!(
        declared["parameters"]["required"],
        json!(["org_id", "status", "note"])
    );
    assert_eq!(
        declared["result"],
        json!({"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]})
    );
    assert_eq!(declared["writes"], json!(["obs/annotate-trace"]));
    // The draft, declared, passes the checks.
    let mut declaration = declared.clone();
    declaration["description"] = json!("about acme");
    d.program("drafted", &p.source, declaration);
    d.load().unwrap_or_else(|e| panic!("{e}"));
    // Each spelling of a call is read: `tool/call`, and `tool/pages` by its first two parts.
    for source in [
        "(tool/call 'obs/list-errors {:org-id \"acme\"})",
        "(tool/pages 'obs/list-traces {:org-id \"acme\"} {:max-pages 2})",
    ] {
        let p = propose(&plan, source, "x", None, None).unwrap();
        assert_eq!(
            p.lifted,
            [("org_id".to_string(), "\"acme\"".to_string())],
            "{source}"
        );
    }
    // A text that does not read has no draft.
    assert!(propose(&plan, "(obs/list-errors", "x", None, None).is_none());
}
