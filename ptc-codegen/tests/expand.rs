//! The generated code for the fixture configs (insta snapshots, compiled by the
//! `ptc-codegen-tests` crate (tests/codegen)), and the errors the macro gives being exactly ptc-plan's.

use std::path::{Path, PathBuf};

use ptc_plan::{OpenApiPlan, Plan, Transport};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate is inside the workspace")
        .to_path_buf()
}

/// The formatted expansion with the checkout's path replaced, so snapshots are portable.
fn expanded(config: &str) -> String {
    let expansion = ptc_codegen::expansion::expand(&workspace().join(config))
        .unwrap_or_else(|d| panic!("{}", ptc_plan::Diagnostics(d)));
    let code = ptc_codegen::pretty(expansion.tokens).expect("generated code parses");
    code.replace(&workspace().display().to_string(), "$WORKSPACE")
}

#[test]
fn observatory_expansion() {
    insta::assert_snapshot!(
        "observatory",
        expanded("fixtures/observatory/upstreams.json")
    );
}

#[test]
fn shapes_expansion() {
    let code = expanded("ptc-codegen/tests/fixtures/shapes.json");
    // The recursive definition is one named type, boxed where it contains itself directly.
    assert_eq!(code.matches("pub struct Node {").count(), 1, "{code}");
    assert!(code.contains("pub type GetNodeResponse = Node;"), "{code}");
    assert!(code.contains("pub parent: Option<Box<Node>>"), "{code}");
    assert!(code.contains("pub labels: Option<Vec<Label>>"), "{code}");
    assert!(code.contains("pub r#type: Option<Type>"), "{code}");
    assert!(
        code.contains("#[serde(rename = \"+1\")]\n        pub plus_1: i64"),
        "{code}"
    );
    assert!(
        code.contains("`oneOf` of 2 schemas: not typed by ptc-codegen"),
        "{code}"
    );
    assert!(code.contains("pub type PingResponse = ();"), "{code}");
    insta::assert_snapshot!("shapes", code);
}

/// A 0.4 MB document whose recursive node schema is shared by every response compiles (the
/// snapshot is built by tests/codegen), each reachable component becoming one named type.
#[test]
fn design_tool_expansion() {
    let config = workspace().join("fixtures/configs/valid/design_tool.json");
    let plan = ptc_plan::load(&config).expect("the fixture loads").plan;
    let Some(Transport::Openapi(api)) = plan.upstream("design").map(|u| &u.transport) else {
        panic!("design is OpenAPI");
    };
    assert!(api.definitions.len() > 20, "{}", api.definitions.len());
    let code = expanded("fixtures/configs/valid/design_tool.json");
    let mut items: Vec<&str> = code
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            ["pub struct ", "pub enum ", "pub type "]
                .iter()
                .find_map(|k| l.strip_prefix(k))
                .and_then(|rest| rest.split([' ', '<', '(', ';', '{']).next())
        })
        .collect();
    let total = items.len();
    items.sort_unstable();
    items.dedup();
    assert_eq!(items.len(), total, "a type was generated twice");
    for name in api.definitions.keys() {
        let rust = heck_pascal(name);
        assert_eq!(
            items.iter().filter(|i| **i == rust).count(),
            1,
            "definition {name} is not exactly one type `{rust}`"
        );
    }
    insta::assert_snapshot!("design_tool", code);
}

fn heck_pascal(name: &str) -> String {
    let mut out = String::new();
    let mut upper = true;
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            if upper {
                out.extend(c.to_uppercase());
            } else {
                out.push(c);
            }
            upper = false;
        } else {
            upper = true;
        }
    }
    out
}

#[test]
fn rules_expansion() {
    insta::assert_snapshot!("rules", expanded("fixtures/configs/valid/rules_ok.json"));
}

#[test]
fn only_included_operations_are_generated() {
    let code = expanded("fixtures/observatory/upstreams.json");
    let tools: Vec<&str> = code
        .lines()
        .filter_map(|l| l.trim().strip_prefix("const TOOL: &'static str = \""))
        .map(|l| l.trim_end_matches("\";"))
        .collect();
    assert_eq!(
        tools,
        [
            "observatory/list-traces",
            "observatory/get-trace",
            "observatory/get-trace-steps",
            "observatory/get-trace-step",
            "observatory/search-traces",
            "observatory/costs",
            "observatory/list-errors",
            "observatory/annotate-trace"
        ]
    );
    assert_eq!(
        code.matches("impl ::ptc::Operation for ").count(),
        tools.len(),
        "one Operation impl per included operation"
    );
    // Seed 003 includes getHealth only: nothing of postMcpCall is generated.
    let code = expanded("fixtures/configs/valid/seed003.json");
    assert_eq!(code.matches("impl ::ptc::Operation for ").count(), 1);
    assert!(code.contains("GetHealthArgs"), "{code}");
    assert!(
        !code.contains("McpCall"),
        "an excluded operation's schema leaked"
    );
}

#[test]
fn a_literal_credential_is_a_compile_error() {
    let config = workspace().join("fixtures/configs/valid/literal_credential.json");
    let Err(diags) = ptc_codegen::expansion::expand(&config) else {
        panic!("a literal credential compiled");
    };
    assert_eq!(diags.len(), 1);
    assert_eq!(diags[0].pointer, "/credentials/tickets-key");
    assert!(
        diags[0].to_string().contains(
            "credential `tickets-key` is a literal value; a compiled deployment never embeds a secret"
        ),
        "{}",
        diags[0]
    );
}

#[test]
fn generated_code_never_contains_a_secret_value() {
    let code = ptc_codegen::pretty(
        ptc_codegen::generate(&observatory_plan(), Path::new("upstreams.json")).expect("generates"),
    )
    .expect("parses");
    let token =
        std::fs::read_to_string(workspace().join("fixtures/observatory/secrets/observatory.token"))
            .expect("the fixture token");
    assert!(!token.trim().is_empty());
    assert!(!code.contains(token.trim()));
}

fn observatory_plan() -> Plan {
    ptc_plan::load(&workspace().join("fixtures/observatory/upstreams.json"))
        .expect("the fixture loads")
        .plan
}

#[test]
fn upstreams_that_share_a_module_name_are_rejected() {
    let mut plan = observatory_plan();
    let mut twin = plan.upstreams[0].clone();
    twin.name = "Observatory".into();
    plan.upstreams.push(twin);
    let Err(diags) = ptc_codegen::generate(&plan, Path::new("upstreams.json")) else {
        panic!("two upstreams generated one module");
    };
    assert_eq!(diags.len(), 1);
    assert_eq!(
        diags[0].message,
        "upstreams `observatory` and `Observatory` both become the Rust module `observatory`"
    );
}

/// The declared programs' types live in the module `programs`: an upstream that would become
/// that module is refused while there are programs, and is fine without them.
#[test]
fn an_upstream_named_like_the_programs_module_is_rejected_when_there_are_programs() {
    let mut plan = observatory_plan();
    assert!(!plan.programs.is_empty());
    plan.upstreams[0].name = "programs".into();
    let Err(diags) = ptc_codegen::generate(&plan, Path::new("upstreams.json")) else {
        panic!("an upstream and the programs generated one module");
    };
    assert_eq!(diags.len(), 1);
    assert_eq!(
        diags[0].message,
        "upstream `programs` becomes the Rust module `programs`, which holds the declared \
         programs' types"
    );
    plan.programs.clear();
    assert!(ptc_codegen::generate(&plan, Path::new("upstreams.json")).is_ok());
}

#[test]
fn the_macro_reports_exactly_what_the_plan_compiler_reports() {
    let dir = workspace().join("fixtures/configs/invalid");
    let mut configs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("fixtures")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    configs.sort();
    assert!(configs.len() > 20, "the invalid fixtures are missing");
    for config in configs {
        let from_plan = ptc_plan::load(&config).expect_err("an invalid fixture loads");
        let Err(from_macro) = ptc_codegen::expansion::expand(&config) else {
            panic!("{} expanded", config.display());
        };
        assert_eq!(from_macro, from_plan.0, "{}", config.display());
    }
}

/// Pinned MCP tools of both real peers get the same kind of items as OpenAPI operations: an
/// arguments struct that is an `Operation`, and a response type from `outputSchema` (or an
/// untyped `Value` when there is none).
#[test]
fn pinned_mcp_tools_are_typed_like_operations() {
    let code = expanded("fixtures/configs/peers/upstreams.json");
    for (module, tools) in [
        (
            "everything",
            &["echo", "get-sum", "get-structured-content"][..],
        ),
        (
            "py",
            &[
                "echo",
                "get-sum",
                "get-structured-content",
                "json-text",
                "nothing",
                "change-tools",
            ][..],
        ),
    ] {
        let body = code
            .split(&format!("pub mod {module} {{"))
            .nth(1)
            .expect("the module");
        for tool in tools {
            let name = heck_pascal(tool);
            assert!(
                body.contains(&format!("impl ::ptc::Operation for {name}Args {{\n        const TOOL: &'static str = \"{module}/{tool}\";")),
                "{module}/{tool}: {body}"
            );
        }
    }
    assert!(
        code.contains("pub struct GetSumArgs {\n        pub a: f64,\n        pub b: f64,\n    }"),
        "{code}"
    );
    // The Python peer declares an outputSchema for get-structured-content: a struct.
    assert!(code.contains("pub temperature: f64"), "{code}");
    // echo declares none: untyped, with a line saying why.
    assert!(
        code.contains("pub type EchoResponse = ::ptc::serde_json::Value;"),
        "{code}"
    );
    assert!(
        code.contains("The tool declares no `outputSchema`"),
        "{code}"
    );
    // Tools the config does not include are not generated.
    assert!(!code.contains("GetTinyImageArgs"), "{code}");
    insta::assert_snapshot!("peers", code);
}

#[test]
fn an_mcp_upstream_without_a_vendored_tool_list_does_not_build() {
    let dir = std::env::temp_dir().join(format!("ptc-unpinned-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch");
    let config = dir.join("upstreams.json");
    std::fs::write(
        &config,
        r#"{"upstreams": {"files": {"transport": "mcp_stdio", "command": "npx"}}}"#,
    )
    .expect("config");
    let Err(diags) = ptc_codegen::expansion::expand(&config) else {
        panic!("an unpinned MCP upstream built");
    };
    assert_eq!(diags.len(), 1);
    let text = diags[0].to_string();
    assert!(
        text.contains("MCP upstream `files` has no vendored tool list at")
            && text.contains("vendored/files.tools.json")
            && text.contains("run `ptc vendor"),
        "{text}"
    );
    assert_eq!(diags[0].pointer, "/upstreams/files");
    // The run-time path (`ptc`) takes it: pins are optional there.
    assert!(ptc_plan::load(&config).is_ok());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The shapes fixture's plan with `edit` applied to its `shapes` upstream, generated and printed.
fn shapes_edited(edit: impl FnOnce(&mut OpenApiPlan)) -> String {
    let mut plan = ptc_plan::load(&workspace().join("ptc-codegen/tests/fixtures/shapes.json"))
        .expect("the fixture loads")
        .plan;
    let Some(Transport::Openapi(api)) = plan
        .upstreams
        .iter_mut()
        .find(|u| u.name == "shapes")
        .map(|u| &mut u.transport)
    else {
        panic!("shapes is OpenAPI");
    };
    edit(api);
    ptc_codegen::pretty(ptc_codegen::generate(&plan, Path::new("shapes.json")).expect("generates"))
        .expect("parses")
}

/// Contract B's other form: a fully inlined schema that carries its own `$defs` (no plan
/// definitions). Its definitions are named types too.
#[test]
fn inlined_schemas_with_their_own_defs_get_named_types() {
    let code = shapes_edited(|api| {
        let node = api
            .definitions
            .get("Node")
            .cloned()
            .expect("Node is a definition");
        api.definitions.clear();
        api.tools.retain(|t| t.name == "get-node");
        api.tools[0].output_schema = serde_json::json!({
            "$ref": "#/$defs/Node",
            "$defs": {"Node": node, "Label": {"type": "object", "properties": {"name": {"type": "string"}}}}
        });
    });
    assert_eq!(code.matches("pub struct Node {").count(), 1, "{code}");
    assert!(code.contains("pub parent: Option<Box<Node>>"), "{code}");
    assert!(code.contains("pub label: Option<Label>"), "{code}");
    assert!(code.contains("pub type GetNodeResponse = Node;"), "{code}");
}

/// A reference to a definition that does not exist, or outside `#/$defs/`, is typed as
/// `serde_json::Value` with the reason in the doc comment rather than failing.
#[test]
fn unresolvable_references_fall_back_to_value_with_a_reason() {
    let code = shapes_edited(|api| {
        api.tools[0].output_schema = serde_json::json!({"type": "object", "properties": {
            "a": {"$ref": "#/$defs/Missing"},
            "b": {"$ref": "https://elsewhere.test/schema.json"}
        }});
    });
    assert!(code.contains("/// reference to the missing definition `Missing`: not typed by ptc-codegen\n        pub a: Option<::ptc::serde_json::Value>"), "{code}");
    assert!(
        code.contains("outside the plan's definitions: not typed by ptc-codegen"),
        "{code}"
    );
}

/// A component that is a nullable copy of another (GitHub's `nullable-simple-user`) is that type
/// in an `Option`, not a second struct; so is an inline copy, whichever is met first.
#[test]
fn nullable_copies_of_an_object_share_its_struct() {
    let code = shapes_edited(|api| {
        let label = serde_json::json!({"type": "object", "description": "A label.",
            "properties": {"name": {"type": "string"}}, "required": ["name"]});
        let mut nullable = label.clone();
        nullable["type"] = serde_json::json!(["object", "null"]);
        let mut nullable_30 = label.clone();
        nullable_30["nullable"] = true.into();
        api.definitions.clear();
        // Alphabetically the nullable ones come first: the non-nullable one still names the struct.
        api.definitions.insert("Label".into(), label.clone());
        api.definitions.insert("AnyLabel".into(), nullable);
        api.definitions.insert("MaybeLabel".into(), nullable_30);
        api.tools.retain(|t| t.name == "get-node");
        api.tools[0].output_schema = serde_json::json!({"type": "object", "properties": {
            "first": {"$ref": "#/$defs/AnyLabel"},
            "second": {"$ref": "#/$defs/MaybeLabel"},
            "third": {"$ref": "#/$defs/Label"},
            "inline": label,
        }});
    });
    // The arguments, the response and one `Label`.
    assert_eq!(code.matches("pub struct ").count(), 3, "{code}");
    assert_eq!(code.matches("pub struct Label {").count(), 1, "{code}");
    assert!(
        code.contains("pub type AnyLabel = Option<Label>;"),
        "{code}"
    );
    assert!(
        code.contains("pub type MaybeLabel = Option<Label>;"),
        "{code}"
    );
    assert!(code.contains("pub third: Option<Label>,"), "{code}");
    assert!(code.contains("pub inline: Option<Label>,"), "{code}");
}

/// An exec credential compiles (it is read at run time): the expansion neither runs the command
/// nor embeds more than its path, and the runtime is the one that runs it.
#[test]
fn an_exec_credential_compiles_and_does_not_run_at_build_time() {
    let dir = std::env::temp_dir().join(format!("ptc-codegen-exec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let marker = dir.join("ran");
    let config = dir.join("upstreams.json");
    let doc = workspace().join("fixtures/openapi/rules.openapi.json");
    std::fs::write(
        &config,
        serde_json::json!({
            "credentials": {"t": {"source": "exec", "command": "/bin/sh",
                "args": ["-c", format!("touch {}", marker.display())], "scheme_hint": "bearer"}},
            "upstreams": {"api": {"transport": "openapi", "base_url": "https://api.example.test",
                "schema_file": doc, "include_operations": ["get_item"],
                "auth": [{"scheme": "bearer", "binding": "t"}]}}})
        .to_string(),
    )
    .unwrap();
    let code = ptc_codegen::expansion::expand(&config)
        .unwrap_or_else(|d| panic!("{}", ptc_plan::Diagnostics(d)))
        .tokens
        .to_string();
    assert!(code.contains("GetItemArgs"), "{code}");
    assert!(!marker.exists(), "the expansion ran the credential command");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `typed` generates typed code for the tools it names only (the plan keeps every tool), and a
/// name that is no tool is an error with the closest name.
#[test]
fn typed_code_is_generated_only_for_the_named_tools() {
    let config = workspace().join("fixtures/observatory/upstreams.json");
    let typed: std::collections::BTreeSet<String> = ["observatory/get-trace".to_string()].into();
    let code = ptc_codegen::pretty(
        ptc_codegen::expansion::expand_typed(&config, Some(&typed))
            .unwrap_or_else(|d| panic!("{}", ptc_plan::Diagnostics(d)))
            .tokens,
    )
    .expect("parses");
    assert!(code.contains("pub struct GetTraceArgs"), "{code}");
    assert!(
        !code.contains("ListTracesArgs"),
        "an unnamed tool was typed"
    );
    assert!(
        !code.contains("pub struct StepFull"),
        "a type only unnamed tools reach was generated"
    );
    // Every tool is still in the plan, for programs.
    assert!(code.contains("\\\"name\\\":\\\"list-traces\\\""), "{code}");
    let typed: std::collections::BTreeSet<String> = ["observatory/get-trac".to_string()].into();
    let Err(diags) = ptc_codegen::expansion::expand_typed(&config, Some(&typed)) else {
        panic!("an unknown tool was accepted");
    };
    assert_eq!(diags.len(), 1);
    assert_eq!(
        diags[0].message,
        "`typed` names `observatory/get-trac`, which is not a tool of this config (did you mean \
         `observatory/get-trace`?)"
    );
}
