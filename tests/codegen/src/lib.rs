//! Every insta snapshot of a `ptc_upstreams!` expansion, compiled: one module per snapshot
//! (`observatory_snapshot`, ...), so a generator change that breaks the code fails here.

#![allow(missing_docs)]

include!(concat!(env!("OUT_DIR"), "/snapshots.rs"));

/// The Observatory with typed code for `get_trace` only.
pub mod typed_only {
    ptc::upstreams!(
        "../../fixtures/observatory/upstreams.json",
        typed = ["observatory/get-trace"]
    );
}

/// Hosted MCP servers behind OAuth: every grant and kind of client, compiled in.
pub mod hosted_oauth {
    ptc::upstreams!("../../fixtures/configs/oauth/upstreams.json");
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_snapshot_embeds_its_plan() {
        let plan = super::observatory_snapshot::plan().expect("the embedded plan reads");
        let tools: Vec<String> = match &plan.upstreams[0].transport {
            ptc::plan::Transport::Openapi(api) => {
                api.tools.iter().map(|t| t.name.clone()).collect()
            }
            other => panic!("unexpected transport {}", other.tag()),
        };
        assert_eq!(tools.len(), 8, "{tools:?}");
        assert!(super::shapes_snapshot::plan().is_ok());
        assert!(super::rules_snapshot::plan().is_ok());
    }

    /// `typed = [...]` types the tools it names; the plan still holds every tool.
    #[test]
    fn a_typed_list_types_its_tools_and_keeps_the_whole_plan() {
        use super::typed_only::observatory::GetTraceArgs;
        use ptc::Operation;
        assert_eq!(GetTraceArgs::TOOL, "observatory/get-trace");
        let plan = super::typed_only::plan().expect("the embedded plan reads");
        let ptc::plan::Transport::Openapi(api) = &plan.upstreams[0].transport else {
            panic!("openapi")
        };
        assert_eq!(api.tools.len(), 8);
    }

    #[test]
    fn generated_args_serialize_to_the_wire_names() {
        use super::shapes_snapshot::shapes::{GetNodeArgs, Type};
        let args = GetNodeArgs {
            r#type: Some(Type::Plus1),
            ..GetNodeArgs::new("n1".into(), 2)
        };
        assert_eq!(
            ptc::serde_json::to_value(&args).expect("serializes"),
            ptc::serde_json::json!({"id": "n1", "type": "+1", "depth": 2})
        );
        // A `None` goes out as null, which the executor's validator leaves out (as it does a Lisp
        // `nil` for an optional argument): ptc-core's validate tests and the typed example.
        let none = GetNodeArgs::new("n1".into(), 0);
        assert_eq!(
            ptc::serde_json::to_value(&none).expect("serializes"),
            ptc::serde_json::json!({"id": "n1", "type": null, "depth": 0})
        );
    }

    #[test]
    fn every_args_struct_is_an_operation_naming_its_tool_and_response() {
        use super::observatory_snapshot::observatory as obs;
        use super::shapes_snapshot::shapes;
        use ptc::Operation;
        fn response<O: Operation>(_: &O) -> std::any::TypeId
        where
            O::Response: 'static,
        {
            std::any::TypeId::of::<O::Response>()
        }
        assert_eq!(shapes::GetNodeArgs::TOOL, "shapes/get-node");
        assert_eq!(obs::ListTracesArgs::TOOL, "observatory/list-traces");
        assert_eq!(obs::GetTraceStepArgs::TOOL, "observatory/get-trace-step");
        let args = obs::ListTracesArgs::new("org_acme".into());
        // Its result path (`$.traces`) selects the list: the response is the list's type.
        assert_eq!(
            response(&args),
            std::any::TypeId::of::<Vec<obs::TraceSummary>>()
        );
        // It pages, and says so by implementing `Paged`; `get_trace` does not page.
        fn paged<O: ptc::Paged>(_: &O) {}
        paged(&args);
        // Every argument optional: `Default` builds them.
        assert_eq!(shapes::GetStatsArgs::default(), shapes::GetStatsArgs {});
        assert_eq!(shapes::PingArgs::TOOL, "shapes/ping");
    }

    #[test]
    fn responses_decode_with_unknown_fields_and_recursion() {
        use super::shapes_snapshot::shapes::GetNodeResponse;
        let node: GetNodeResponse = ptc::serde_json::from_value(ptc::serde_json::json!({
            "name": "root", "added_later": true,
            "children": [{"name": "leaf", "children": []}],
            "parent": {"name": "up", "children": [], "parent": null}
        }))
        .expect("decodes");
        assert_eq!(node.children[0].name, "leaf");
        assert_eq!(node.parent.map(|p| p.name), Some("up".to_string()));
    }

    /// Response structs decode by wire name (the generated `Deserialize`, not serde's derive) and
    /// serialize back to the same names, `self` and `type` included.
    #[test]
    fn responses_round_trip_through_their_wire_names() {
        use super::shapes_snapshot::shapes::GetStatsResponse;
        let wire = ptc::serde_json::json!({
            "+1": 1, "-1": 2, "self": "s", "type": "t", "counts": {"a": 3}, "anything": [1],
            "free": null, "label": null, "labels": null, "mixed": null
        });
        let stats: GetStatsResponse = ptc::serde_json::from_value(wire.clone()).expect("decodes");
        assert_eq!((stats.plus_1, stats.self_.as_str()), (1, "s"));
        assert_eq!(ptc::serde_json::to_value(&stats).expect("serializes"), wire);
        let e = ptc::serde_json::from_str::<GetStatsResponse>(r#"{"+1": 1, "-1": 2}"#)
            .expect_err("`self` is required");
        assert_eq!(e.to_string(), "missing field `self` at line 1 column 18");
        let e = ptc::serde_json::from_str::<GetStatsResponse>(r#"{"+1": "one"}"#)
            .expect_err("`+1` is an integer");
        assert_eq!(
            e.to_string(),
            "invalid type: string \"one\", expected i64 at line 1 column 12"
        );
    }

    #[test]
    fn steps_of_either_shape_decode_into_the_untagged_enum() {
        use super::observatory_snapshot::observatory::TraceStepsStepsItem as Step;
        let summary = ptc::serde_json::json!({"id": "st_000000000001", "trace_id": "tr_1", "index": 0,
            "kind": "llm_call", "name": "m", "status": "ok", "started_at": "t", "duration_ms": 1,
            "input_tokens": 1, "output_tokens": 1, "cost_usd": 0.0, "payload_bytes": 3, "preview": "p"});
        let mut full = summary.clone();
        full["input"] = "i".into();
        full["output"] = "o".into();
        full["error"] = ptc::serde_json::Value::Null;
        let s: Step = ptc::serde_json::from_value(summary).expect("summary decodes");
        let f: Step = ptc::serde_json::from_value(full).expect("full decodes");
        assert!(matches!(s, Step::StepSummary(_)), "{s:?}");
        assert!(
            matches!(f, Step::StepFull(ref v) if v.input == "i"),
            "{f:?}"
        );
    }

    /// The peers' Python venv and npm packages, which `scripts/test` installs; without them the
    /// test says it was skipped (and fails under CI).
    fn peers_installed() -> bool {
        let mcp = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/mcp");
        let ok = mcp.join(".venv/bin/python").exists()
            && mcp
                .join("node_modules/@modelcontextprotocol/server-everything")
                .exists();
        if !ok {
            ptc_tests::skip(
                "the MCP peers in fixtures/mcp are missing (scripts/test installs them)",
            );
        }
        ok
    }

    /// The workspace's path, and `plan` with the snapshot's `$WORKSPACE` replaced by it (the
    /// snapshot writes the checkout's path that way so it is portable).
    fn located(plan: ptc::Plan) -> (std::path::PathBuf, ptc::Plan) {
        let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .canonicalize()
            .expect("the workspace");
        let text = ptc::serde_json::to_string(&plan)
            .expect("serialises")
            .replace("$WORKSPACE", &workspace.display().to_string());
        let plan = ptc::serde_json::from_str(&text).expect("the plan");
        (workspace, plan)
    }

    /// The OAuth of hosted MCP servers the macro compiled in is what the run-time loader reads
    /// from the same config (so `serve --config` and a compiled deployment act alike).
    #[test]
    fn the_compiled_oauth_is_the_runtime_load_of_the_same_config() {
        let (workspace, compiled) = located(super::hosted_oauth::plan().expect("the plan"));
        let loaded = ptc::plan::load(&workspace.join("fixtures/configs/oauth/upstreams.json"))
            .unwrap_or_else(|d| panic!("{d}"));
        assert_eq!(compiled, loaded.plan);
        let grants: Vec<_> = compiled
            .upstreams
            .iter()
            .filter_map(|u| match &u.transport {
                ptc::plan::Transport::McpHttp(p) => p.oauth.as_ref().map(|o| o.grant),
                _ => None,
            })
            .collect();
        assert!(grants.contains(&ptc::plan::OAuthGrant::AuthorizationCode));
        assert!(grants.contains(&ptc::plan::OAuthGrant::ClientCredentials));
    }

    /// The MCP pins the macro compiled in are what the run-time loader reads from the same
    /// config: one compiler for both paths.
    #[test]
    fn the_compiled_pins_are_the_runtime_load_of_the_same_config() {
        let (workspace, compiled) = located(super::peers_snapshot::plan().expect("the plan"));
        let loaded = ptc::plan::load(&workspace.join("fixtures/configs/peers/upstreams.json"))
            .unwrap_or_else(|d| panic!("{d}"));
        assert_eq!(compiled, loaded.plan);
        let pinned = |name: &str| match &compiled.upstream(name).expect("upstream").transport {
            ptc::plan::Transport::McpStdio(p) => p.tools.pinned.as_ref().map(Vec::len),
            other => panic!("{name} is {}", other.tag()),
        };
        assert_eq!((pinned("everything"), pinned("py")), (Some(3), Some(6)));
    }

    /// A pinned MCP tool is called exactly like an OpenAPI operation: typed arguments in, typed
    /// response out, through the one validator, against both real peers.
    #[test]
    fn typed_calls_reach_both_real_mcp_peers() {
        use super::peers_snapshot::{everything, plan, py};
        if !peers_installed() {
            return;
        }
        let runtime = ptc::__private::tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            // The peers' command and folder need the checkout's real path.
            let (_, plan) = located(plan().expect("the plan"));
            let upstreams =
                ptc::Upstreams::start(plan, ptc::Secrets::default(), ptc::StartOptions::default())
                    .await
                    .expect("both peers start and match their pins");
            let sum: py::GetSumResponse = upstreams
                .run(py::GetSumArgs::new(1.5, 2.0))
                .await
                .expect("py/get-sum");
            assert_eq!(sum.result, 3.5);
            let weather = upstreams
                .run(py::GetStructuredContentArgs::new("Oslo".into()))
                .await
                .expect("py/get-structured-content");
            assert_eq!(weather.location, "Oslo");
            assert_eq!(weather.temperature, 22.5);
            let echoed: everything::EchoResponse = upstreams
                .run(everything::EchoArgs::new("hi".into()))
                .await
                .expect("everything/echo");
            assert_eq!(echoed, ptc::serde_json::json!("Echo: hi"));
            let structured = upstreams
                .run(everything::GetStructuredContentArgs::new(
                    everything::Location::NewYork,
                ))
                .await
                .expect("everything/get-structured-content");
            assert!(!structured.conditions.is_empty(), "{structured:?}");
            // A typed write meets the write gate too (closed: nothing is sent).
            let refused = upstreams
                .run(py::ChangeToolsArgs::new("{}".into()))
                .await
                .expect_err("the gate is closed");
            assert_eq!(refused.reason, ptc::Reason::WriteDisabled, "{refused}");
            upstreams.shutdown().await;
        });
    }
}
