//! The compiled Observatory plan and the Observatory service agree: every tool's request, built
//! only from the plan (method, path template, parameters, body, default args, auth and static
//! headers), succeeds against the running service and returns what the plan's output schema
//! promises.

use std::path::Path;

use ptc_plan::{AuthEmitter, CredentialSource, OpenApiPlan, ParamLocation, ToolPlan, Transport};
use serde_json::{Map, Value, json};

fn plan() -> (ptc_plan::Plan, OpenApiPlan) {
    let config =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/observatory/upstreams.json");
    let plan = ptc_plan::load(&config)
        .unwrap_or_else(|d| panic!("{d}"))
        .plan;
    let Transport::Openapi(api) = plan
        .upstream("observatory")
        .expect("observatory")
        .transport
        .clone()
    else {
        panic!("observatory is an OpenAPI upstream")
    };
    (plan, api)
}

/// The request the plan describes for `args` (default args applied under the caller's).
fn request(
    client: &reqwest::Client,
    base: &str,
    api: &OpenApiPlan,
    token: &str,
    tool: &ToolPlan,
    args: &Map<String, Value>,
) -> reqwest::RequestBuilder {
    let mut merged = tool.ptc.default_args.clone();
    merged.extend(args.clone());
    let mut path = tool.ptc.path.clone();
    let mut query = Vec::new();
    for p in &tool.ptc.params {
        let Some(v) = merged.get(&p.name) else {
            assert!(
                !p.required,
                "{}: no value for required {}",
                tool.name, p.name
            );
            continue;
        };
        let text = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        match p.location {
            ParamLocation::Path => {
                let segment: String =
                    url::form_urlencoded::byte_serialize(text.as_bytes()).collect();
                path = path.replace(&format!("{{{}}}", p.name), &segment);
            }
            ParamLocation::Query => query.push((p.name.clone(), text)),
        }
    }
    let method = reqwest::Method::from_bytes(tool.ptc.method.as_bytes()).expect("a method");
    let mut rb = client
        .request(method, format!("{base}{path}"))
        .query(&query);
    if tool.ptc.body.is_some()
        && let Some(body) = merged.get(ptc_plan::BODY_ARG)
    {
        rb = rb.json(body);
    }
    for (name, value) in &api.http.static_headers {
        rb = rb.header(name, value);
    }
    for emitter in &api.http.auth {
        match emitter {
            AuthEmitter::Bearer { .. } => rb = rb.bearer_auth(token),
            other => panic!("unexpected emitter {other:?}"),
        }
    }
    rb
}

fn args(pairs: &[(&str, &Value)]) -> Map<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), (*v).clone()))
        .collect()
}

#[tokio::test]
async fn every_compiled_tool_works_against_the_service() {
    let (plan, api) = plan();
    let CredentialSource::File { path } = &plan.credential("observatory-token").unwrap().source
    else {
        panic!("file credential")
    };
    let token = std::fs::read_to_string(path)
        .unwrap()
        .trim_end()
        .to_string();
    let tokens = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/observatory/tokens.json");
    let config =
        observatory_server::ServerConfig::new(observatory_server::TokenSource::File(tokens));
    let (addr, handle) = observatory_server::start(config)
        .await
        .expect("service starts");
    let base = format!("http://{addr}");
    let client = ptc_core::wire::http_client::builder()
        .build()
        .expect("an HTTP client");
    let tool = |name: &str| {
        api.tools
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("{name}"))
    };
    let call = |name: &str, a: Map<String, Value>| {
        let rb = request(&client, &base, &api, &token, tool(name), &a);
        let name = name.to_string();
        async move {
            let resp = rb.send().await.expect("request");
            let status = resp.status();
            let content_type = resp
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            let body = resp.text().await.expect("body");
            let expected = if tool(&name).ptc.body.is_some() {
                201
            } else {
                200
            };
            assert_eq!(status, expected, "{name}: {body}");
            assert!(
                content_type.starts_with("application/json"),
                "{name}: {content_type}"
            );
            serde_json::from_str::<Value>(&body).expect("JSON body")
        }
    };

    let org = json!("org_acme");
    let listed = call(
        "list-traces",
        args(&[("org_id", &org), ("limit", &json!(5))]),
    )
    .await;
    let first = &listed["traces"][0];
    let (id, external) = (first["id"].clone(), first["external_trace_id"].clone());
    let steps = call("get-trace-steps", args(&[("org_id", &org), ("id", &id)])).await;
    assert_eq!(
        steps["mode"], "summary",
        "the plan's default args ask for summaries"
    );
    let step_id = steps["steps"][0]["id"].clone();
    let results = [
        ("list-traces", listed.clone()),
        ("get-trace-steps", steps.clone()),
        (
            "get-trace",
            call("get-trace", args(&[("org_id", &org), ("id", &id)])).await,
        ),
        (
            "get-trace-step",
            call(
                "get-trace-step",
                args(&[("org_id", &org), ("id", &id), ("step_id", &step_id)]),
            )
            .await,
        ),
        (
            "search-traces",
            call(
                "search-traces",
                args(&[("org_id", &org), ("trace_id", &external)]),
            )
            .await,
        ),
        ("costs", call("costs", args(&[("org_id", &org)])).await),
        (
            "list-errors",
            call("list-errors", args(&[("org_id", &org)])).await,
        ),
        (
            "annotate-trace",
            call(
                "annotate-trace",
                args(&[
                    ("org_id", &org),
                    ("id", &id),
                    ("body", &json!({"label": "checked"})),
                ]),
            )
            .await,
        ),
    ];
    assert_eq!(
        results.len(),
        api.tools.len(),
        "every compiled tool is exercised"
    );
    let mut checked = 0;
    for (name, body) in &results {
        // Output schemas point at named definitions; the one in force holds `required`.
        let schema = api
            .resolve(&tool(name).output_schema)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        for key in schema["required"].as_array().into_iter().flatten() {
            let key = key.as_str().unwrap();
            assert!(
                body.get(key).is_some(),
                "{name}: response lacks `{key}` the output schema requires"
            );
            checked += 1;
        }
    }
    assert!(checked > 0, "no required key was checked");
    assert_eq!(
        results[4].1["traces"][0]["id"], id,
        "search by external id finds the trace"
    );
    handle.shutdown().await;
}
