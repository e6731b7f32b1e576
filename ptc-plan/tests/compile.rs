//! The compiler's output on valid configs: names, schemas, defaults, caps and provenance.

use std::path::{Path, PathBuf};

use ptc_plan::plan::{McpOAuthPlan, OAuthClient, OAuthGrant};
use ptc_plan::{CredentialSource, Loaded, OpenApiPlan, ParamLocation, ToolPlan, Transport};
use serde_json::json;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures")
        .join(rel)
}

fn load(rel: &str) -> Loaded {
    ptc_plan::load(&fixture(rel)).unwrap_or_else(|d| panic!("{rel} must load:\n{d}"))
}

fn api<'a>(loaded: &'a Loaded, upstream: &str) -> &'a OpenApiPlan {
    match &loaded.plan.upstream(upstream).expect("upstream").transport {
        Transport::Openapi(api) => api,
        other => panic!("{upstream} is {}", other.tag()),
    }
}

fn tools<'a>(loaded: &'a Loaded, upstream: &str) -> &'a [ToolPlan] {
    &api(loaded, upstream).tools
}

fn tool<'a>(loaded: &'a Loaded, upstream: &str, name: &str) -> &'a ToolPlan {
    tools(loaded, upstream)
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

#[test]
fn observatory_compiles_to_the_seed_shape() {
    let loaded = load("observatory/upstreams.json");
    let names: Vec<&str> = tools(&loaded, "observatory")
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "list-traces",
            "get-trace",
            "get-trace-steps",
            "get-trace-step",
            "search-traces",
            "costs",
            "list-errors",
            "annotate-trace"
        ]
    );
    // The one write: allow-listed, asking a person, its body an argument like the others.
    let annotate = tool(&loaded, "observatory", "annotate-trace");
    assert_eq!(annotate.classified.effect, ptc_plan::Effect::Write);
    assert_eq!(annotate.classified.approval, ptc_plan::Approval::Always);
    assert_eq!(annotate.ptc.method, "POST");
    assert_eq!(
        annotate.input_schema["required"],
        json!(["id", "org_id", "body"])
    );
    assert_eq!(
        annotate.input_schema["properties"]["body"],
        json!({"$ref": "#/$defs/AnnotationRequest"})
    );
    assert_eq!(
        api(&loaded, "observatory").idempotency_header.as_deref(),
        Some("Idempotency-Key")
    );
    let list = tool(&loaded, "observatory", "list-traces");
    let v = serde_json::to_value(list).unwrap();
    for key in [
        "name",
        "description",
        "inputSchema",
        "outputSchema",
        "annotations",
        "_ptc",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    assert_eq!(v["annotations"], json!({"readOnlyHint": true}));
    assert_eq!(v["_ptc"]["transport"], "openapi");
    assert_eq!(v["_ptc"]["operationId"], "list_traces");
    assert_eq!(v["_ptc"]["method"], "GET");
    assert_eq!(v["_ptc"]["path"], "/api/traces");
    assert_eq!(v["inputSchema"]["required"], json!(["org_id"]));
    assert_eq!(v["inputSchema"]["type"], "object");
    // $ref'd shared parameters bring their description; their schema is a named definition.
    let api = api(&loaded, "observatory");
    let environment = &v["inputSchema"]["properties"]["environment"];
    assert_eq!(
        *environment,
        json!({"$ref": "#/$defs/Environment", "description": "Only runs from this environment."})
    );
    assert_eq!(
        api.resolve(environment).unwrap()["enum"],
        json!(["production", "staging"])
    );
    // The output schema is what `x-ptc-result-path` (`$.traces`) selects in the 2xx JSON
    // schema (`TraceList`), pointing at its components by name.
    assert_eq!(
        v["outputSchema"],
        json!({"type": "array", "items": {"$ref": "#/$defs/TraceSummary"}})
    );
    let item = api.resolve(&list.output_schema["items"]).unwrap();
    assert!(item["properties"]["cost_usd"].is_object());
    // `get_trace` is not projected: its output is the whole response.
    let get = &api.tools[1];
    assert_eq!(get.output_schema, json!({"$ref": "#/$defs/TraceSummary"}));
    // Nothing points into the document any more, and every reference has its definition.
    let plan = serde_json::to_string(api).unwrap();
    assert!(
        !plan.contains("$ref\":\"#/components"),
        "no document refs left: {plan}"
    );
    for t in &api.tools {
        api.bundle(&t.input_schema).unwrap();
        api.bundle(&t.output_schema).unwrap();
    }
    // Only what the included operations reach is kept.
    let mut reached: Vec<&str> = api
        .tools
        .iter()
        .flat_map(|t| [&t.input_schema, &t.output_schema])
        .flat_map(|s| ptc_plan::schema::referenced(s, &api.definitions).unwrap())
        .collect();
    reached.sort_unstable();
    reached.dedup();
    assert_eq!(
        reached,
        api.definitions
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>()
    );
    assert_eq!(list.ptc.result_path.as_ref().unwrap().as_str(), "$.traces");
    assert_eq!(
        list.ptc.pagination.as_ref().unwrap().position_arg(),
        "cursor"
    );
}

#[test]
fn renames_come_from_overrides_and_keep_the_operation_id() {
    let loaded = load("observatory/upstreams.json");
    let costs = tool(&loaded, "observatory", "costs");
    assert_eq!(costs.ptc.operation_id, "aggregate_costs");
}

#[test]
fn default_args_apply_and_leave_required() {
    let loaded = load("observatory/upstreams.json");
    let steps = tool(&loaded, "observatory", "get-trace-steps");
    assert_eq!(steps.ptc.default_args["mode"], "summary");
    assert_eq!(
        steps.input_schema["properties"]["mode"]["default"],
        "summary"
    );
    let required = steps.input_schema["required"].as_array().unwrap();
    assert!(!required.contains(&json!("mode")));
    assert!(required.contains(&json!("id")) && required.contains(&json!("org_id")));
    assert_eq!(
        steps.description,
        "Fetch trace steps. Prefer mode=summary unless full payload is explicitly needed."
    );
}

#[test]
fn response_caps_take_the_smallest_grant() {
    let loaded = load("observatory/upstreams.json");
    // override 512 KiB < x-ptc 1 MiB < upstream 8 MiB
    assert_eq!(
        tool(&loaded, "observatory", "get-trace-steps")
            .ptc
            .max_response_bytes,
        524_288
    );
    // no schema cap: the upstream's
    assert_eq!(
        tool(&loaded, "observatory", "list-traces")
            .ptc
            .max_response_bytes,
        8_388_608
    );
    let rules = load("configs/valid/rules_ok.json");
    // upstream 4096, override 2000, x-ptc 1000: schema narrows further, never widens
    assert_eq!(
        tool(&rules, "api", "good-default").ptc.max_response_bytes,
        1000
    );
    assert_eq!(tool(&rules, "api", "get-item").ptc.max_response_bytes, 4096);
}

#[test]
fn path_params_come_first_and_are_required() {
    let loaded = load("observatory/upstreams.json");
    let step = tool(&loaded, "observatory", "get-trace-step");
    let params: Vec<(&str, ParamLocation, bool)> = step
        .ptc
        .params
        .iter()
        .map(|p| (p.name.as_str(), p.location, p.required))
        .collect();
    assert_eq!(
        params,
        [
            ("id", ParamLocation::Path, true),
            ("step_id", ParamLocation::Path, true),
            ("org_id", ParamLocation::Query, true)
        ]
    );
}

#[test]
fn rule_edge_cases_that_are_accepted() {
    let rules = load("configs/valid/rules_ok.json");
    // Collision separated by an override.
    assert_eq!(
        tool(&rules, "api", "list-items-legacy").ptc.operation_id,
        "list_items"
    );
    assert_eq!(
        tool(&rules, "api", "list-items").ptc.operation_id,
        "listItems"
    );
    // Deprecated, explicitly allowed.
    assert_eq!(
        tool(&rules, "api", "old-items").ptc.operation_id,
        "old_items"
    );
    // Same-origin operation server gives the operation its own base.
    assert_eq!(
        tool(&rules, "api", "same-origin-server")
            .ptc
            .base_url
            .as_deref(),
        Some("https://api.example.test/v2")
    );
    // 204-only success: no value.
    assert_eq!(
        tool(&rules, "api", "ping").output_schema,
        json!({"type": "null"})
    );
    // Path-item-level $ref parameter.
    assert_eq!(
        tool(&rules, "api", "get-item").input_schema["required"],
        json!(["item_id"])
    );
    // Exploded array query parameters are sent repeated.
    let array_query = tool(&rules, "api", "array-query");
    assert!(array_query.ptc.params[0].repeated);
    // Parameter schemas that v1 cannot validate are listed too.
    assert!(
        array_query
            .ptc
            .unvalidated
            .contains(&"param since: anyOf at /".to_string()),
        "{:?}",
        array_query.ptc.unvalidated
    );
    // Combinators are kept and listed as unvalidated.
    let union = tool(&rules, "api", "union-result");
    let rules_api = api(&rules, "api");
    assert!(
        rules_api
            .resolve(&union.output_schema)
            .unwrap()
            .get("oneOf")
            .is_some()
    );
    assert!(
        union
            .ptc
            .unvalidated
            .iter()
            .any(|n| n.starts_with("oneOf at /")),
        "{:?}",
        union.ptc.unvalidated
    );
    // A recursive schema is a definition like any other, and bundles into a standalone one.
    let item = tool(&rules, "api", "get-item");
    assert_eq!(item.output_schema, json!({"$ref": "#/$defs/Item"}));
    assert_eq!(
        rules_api.definitions["Item"]["properties"]["id"]["type"],
        "string"
    );
    let standalone = rules_api.bundle(&item.output_schema).unwrap();
    assert_eq!(standalone["$defs"]["Item"], rules_api.definitions["Item"]);
    // Operator notes are appended.
    assert_eq!(
        tool(&rules, "api", "good-default").ptc.notes.as_deref(),
        Some("Operator note.")
    );
}

#[test]
fn seed_003_get_health_compiles() {
    let loaded = load("configs/valid/seed003.json");
    let health = tool(&loaded, "resilient", "get-health");
    assert_eq!(health.ptc.operation_id, "getHealth");
    let output = api(&loaded, "resilient")
        .resolve(&health.output_schema)
        .unwrap();
    assert_eq!(
        output["required"],
        json!(["status", "service", "transport", "version"])
    );
    assert!(health.description.starts_with("Liveness check"));
}

/// The vendored tool list pins the included tools (sorted by name); the rest of the list is
/// known as left out, so the host does not take them for new ones.
#[test]
fn mcp_tools_are_pinned_from_the_vendored_list_and_the_rest_is_left_out() {
    let loaded = load("configs/peers/upstreams.json");
    let Transport::McpStdio(py) = &loaded.plan.upstream("py").unwrap().transport else {
        panic!("py is mcp_stdio")
    };
    let pinned: Vec<&str> = py
        .tools
        .pinned
        .as_ref()
        .unwrap()
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(
        pinned,
        [
            "change-tools",
            "echo",
            "get-structured-content",
            "get-sum",
            "json-text",
            "nothing"
        ]
    );
    assert_eq!(py.tools.policy, ptc_plan::PinPolicy::Refuse);
    assert_eq!(py.tools.left_out.len(), 26, "{:?}", py.tools.left_out);
    assert_eq!(
        py.tools.writes.get("change-tools"),
        Some(&ptc_plan::WriteGrant {
            effect: ptc_plan::Effect::Write,
            approval: ptc_plan::Approval::None
        }),
        "the allow-list is in the plan, for the run time"
    );
    assert!(py.tools.left_out.iter().any(|t| t == "big"));
    assert!(!py.tools.left_out.iter().any(|t| t == "echo"));
    assert!(
        loaded
            .files
            .iter()
            .any(|f| f.ends_with("vendored/py.tools.json")),
        "the build reruns when the list changes"
    );
}

#[test]
fn without_a_vendored_list_mcp_tools_are_not_pinned_and_the_policy_is_kept() {
    let dir = std::env::temp_dir().join(format!("ptc-unpinned-plan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("upstreams.json");
    std::fs::write(
        &config,
        r#"{"upstreams": {"peer": {"transport": "mcp_stdio", "command": "python3", "include_tools": ["echo"], "pin_policy": "warn"}}}"#,
    )
    .unwrap();
    let plan = ptc_plan::load(&config).unwrap().plan;
    let Transport::McpStdio(peer) = &plan.upstream("peer").unwrap().transport else {
        panic!()
    };
    assert_eq!(peer.tools.policy, ptc_plan::PinPolicy::Warn);
    assert_eq!(
        peer.tools.include.as_deref(),
        Some(&["echo".to_string()][..])
    );
    assert!(peer.tools.pinned.is_none() && peer.tools.left_out.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mcp_upstreams_and_credentials_are_carried_without_secrets() {
    let loaded = load("configs/valid/mixed.json");
    let plan = &loaded.plan;
    let Transport::McpStdio(files) = &plan.upstream("files").unwrap().transport else {
        panic!()
    };
    assert_eq!(files.command, "npx");
    assert_eq!(
        files.env,
        vec![("NODE_ENV".to_string(), "production".to_string())]
    );
    assert!(Path::new(files.cwd.as_deref().unwrap()).is_absolute());
    let Transport::McpHttp(tickets) = &plan.upstream("tickets").unwrap().transport else {
        panic!()
    };
    assert_eq!(tickets.url, "https://tickets.example/mcp");
    assert_eq!(tickets.http.backoff.max_retries, 2);
    assert_eq!(
        tickets.http.static_headers,
        vec![("x-client".to_string(), "ptc".to_string())]
    );
    // Relative credential paths resolve against the config's folder.
    let CredentialSource::File { path } = &plan.credential("observatory-token").unwrap().source
    else {
        panic!()
    };
    assert!(Path::new(path).is_file(), "{path}");
    // An exec binding names a program in the config's folder (never looked up on PATH), with
    // the defaults for what it leaves out.
    let CredentialSource::Exec(exec) = &plan.credential("cloud-token").unwrap().source else {
        panic!()
    };
    assert!(
        exec.command.ends_with("configs/valid/bin/get-token"),
        "{}",
        exec.command
    );
    assert!(Path::new(&exec.command).is_absolute());
    assert_eq!(exec.args, ["--audience", "observatory"]);
    assert_eq!(exec.env, ["HOME"]);
    assert_eq!(
        (exec.timeout_ms, exec.cache_ttl_ms),
        (
            ptc_plan::ExecSource::DEFAULT_TIMEOUT_MS,
            ptc_plan::ExecSource::DEFAULT_CACHE_TTL_MS
        )
    );
    // Literal values are in Secrets only, never in the plan or in debug output.
    assert_eq!(
        plan.credential("tickets-key").unwrap().source,
        CredentialSource::Literal
    );
    assert_eq!(
        loaded.secrets.literal("tickets-key"),
        Some("lit-secret-123")
    );
    let json = serde_json::to_string(plan).unwrap();
    assert!(!json.contains("lit-secret-123"));
    assert!(!format!("{:?}", loaded).contains("lit-secret-123"));
    // The plan round-trips through JSON (the run-time path loads it that way).
    let back: ptc_plan::Plan = serde_json::from_str(&json).unwrap();
    assert_eq!(&back, plan);
}

/// Each way of being an OAuth client, compiled into the plan; the plan reads back from the JSON a
/// compiled deployment embeds (`PLAN_JSON`), so `ptc_upstreams!` and the runtime carry the same
/// grants.
#[test]
fn mcp_oauth_grants_and_clients_are_compiled() {
    let loaded = load("configs/valid/mcp_oauth.json");
    let plan = &loaded.plan;
    let oauth = |name: &str| match &plan.upstream(name).expect("upstream").transport {
        Transport::McpHttp(mcp) => mcp.oauth.clone().expect("oauth"),
        other => panic!("{name} is {}", other.tag()),
    };
    let consent = |client, scopes: &[&str], redirect: &str| McpOAuthPlan {
        grant: OAuthGrant::AuthorizationCode,
        client,
        scopes: scopes.iter().map(|s| s.to_string()).collect(),
        redirect_uri: Some(redirect.into()),
    };
    let loopback = "http://127.0.0.1:8765/oauth/callback";
    assert_eq!(
        oauth("linear"),
        consent(
            OAuthClient::Dynamic {
                client_name: "Acme agents".into()
            },
            &["read", "issues:write"],
            loopback
        )
    );
    assert_eq!(
        oauth("notion"),
        consent(
            OAuthClient::MetadataDocument {
                url: "https://agents.acme.example/oauth/client.json".into(),
                client_name: McpOAuthPlan::DEFAULT_CLIENT_NAME.into()
            },
            &[],
            "http://localhost:8765/oauth/callback"
        )
    );
    assert_eq!(
        oauth("github"),
        consent(
            OAuthClient::Registered {
                client_id: "Iv1.acme-agents".into(),
                client_secret: None
            },
            &[],
            loopback
        )
    );
    assert_eq!(
        oauth("tickets"),
        McpOAuthPlan {
            grant: OAuthGrant::ClientCredentials,
            client: OAuthClient::Registered {
                client_id: "ptc-prod".into(),
                client_secret: Some("tickets-client".into())
            },
            scopes: vec!["tickets:read".into()],
            redirect_uri: None,
        }
    );
    // A custom header beside `oauth` stays.
    let Transport::McpHttp(tickets) = &plan.upstream("tickets").unwrap().transport else {
        panic!()
    };
    assert_eq!(tickets.http.auth.len(), 1);
    let text = serde_json::to_string(plan).expect("serialises");
    assert_eq!(
        &serde_json::from_str::<ptc_plan::Plan>(&text).expect("reads back"),
        plan
    );
}

#[test]
fn files_read_are_reported_for_rebuild_tracking() {
    let loaded = load("observatory/upstreams.json");
    // The config, its document, then its programs (by name).
    assert_eq!(loaded.files.len(), 2 + loaded.plan.programs.len());
    assert!(loaded.files[0].ends_with("upstreams.json"));
    assert!(loaded.files[1].ends_with("observatory.openapi.json"));
    for (file, program) in loaded.files[2..].iter().zip(&loaded.plan.programs) {
        assert!(
            file.ends_with(format!("programs/{}.clj", program.name)),
            "{file:?}"
        );
    }
}

/// An upstream the config leaves undescribed (or describes with blanks) is shown by its OpenAPI
/// document's `info.title`; a description the config gives wins.
#[test]
fn an_undescribed_upstream_takes_its_documents_title() {
    let doc = fixture("openapi/rules.openapi.json");
    let config = |description: Option<&str>| {
        let mut up = json!({
            "transport": "openapi",
            "schema_file": doc,
            "base_url": "https://rules.example.com",
            "include_operations": ["get_item"],
        });
        if let Some(d) = description {
            up["description"] = json!(d);
        }
        json!({"upstreams": {"rules": up}}).to_string()
    };
    let described = |description: Option<&str>| {
        let loaded = ptc_plan::load_str(
            &config(description),
            &fixture("configs/inline.json"),
            &ptc_plan::FileSource,
        )
        .unwrap_or_else(|d| panic!("{d}"));
        loaded.plan.upstreams[0].description.clone()
    };
    assert_eq!(described(None), "Compiler rules fixture");
    assert_eq!(described(Some("  \n")), "Compiler rules fixture");
    assert_eq!(
        described(Some("Rules, as the operator says")),
        "Rules, as the operator says"
    );
}
