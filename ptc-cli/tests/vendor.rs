//! `ptc vendor` and `ptc vendor --check` against a live document served over loopback HTTP that
//! changes between runs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::routing::get;

type Doc = Arc<Mutex<Vec<u8>>>;

fn drift_doc(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/codegen/ui/drift")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

async fn serve(doc: Doc) -> String {
    let app = Router::new()
        .route(
            "/openapi.json",
            get(|State(doc): State<Doc>| async move {
                let body = doc.lock().expect("doc lock").clone();
                ([("content-type", "application/json")], body)
            }),
        )
        .with_state(doc);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ptc-vendor-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

async fn ptc(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_ptc"))
            .args(&args)
            .output()
            .expect("ptc runs")
    })
    .await
    .expect("join")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vendor_writes_the_copy_and_check_reports_each_drift_with_the_build_message() {
    let doc: Doc = Arc::new(Mutex::new(drift_doc("widgets.v1.openapi.json")));
    let base = serve(doc.clone()).await;
    let dir = scratch("check");
    let config = dir.join("upstreams.json");
    std::fs::write(
        &config,
        serde_json::json!({"upstreams": {"widgets": {
            "transport": "openapi",
            "base_url": base,
            "allow_insecure_http": true,
            "schema_url": format!("{base}/openapi.json"),
            "include_operations": ["get_widget", "list_widgets"]
        }}})
        .to_string(),
    )
    .expect("config");
    let config_arg = config.display().to_string();
    let vendor = || vec!["vendor".to_string(), config_arg.clone()];
    let check = || vec!["vendor".to_string(), "--check".into(), config_arg.clone()];
    let copy = dir.join("vendored/widgets.openapi.json");

    // Before vendoring, the check says what to run.
    let out = ptc(check()).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("no vendored copy"), "{}", text(&out));

    let out = ptc(vendor()).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        std::fs::read(&copy).expect("vendored copy"),
        drift_doc("widgets.v1.openapi.json")
    );
    // The vendored copy compiles the same plan the macro would build.
    assert!(
        ptc_codegen_expands(&config),
        "the vendored config does not expand"
    );

    let out = ptc(check()).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("`widgets`: vendored copy is up to date"),
        "{}",
        text(&out)
    );

    *doc.lock().expect("doc lock") = drift_doc("widgets.required-param.openapi.json");
    let out = ptc(check()).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains(
            "drift: upstream 'widgets', operation 'get_widget': required parameter `region` added"
        ),
        "{said}"
    );
    assert!(
        said.contains("`widgets::GetWidgetArgs` gains the required field `region`: code that builds it fails with E0063"),
        "{said}"
    );

    *doc.lock().expect("doc lock") = drift_doc("widgets.size-string.openapi.json");
    let out = ptc(check()).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains(
            "operation 'get_widget': response type changed at #/$defs/Widget/properties/size/type"
        ),
        "{said}"
    );
    assert!(
        said.contains(
            "operation 'list_widgets': response type changed at #/$defs/Widget/properties/size/type"
        ),
        "{said}"
    );

    *doc.lock().expect("doc lock") = drift_doc("widgets.removed.openapi.json");
    let out = ptc(check()).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("after `ptc vendor` the build fails with"),
        "{said}"
    );
    assert!(
        said.contains("include_operations names `get_widget`, which is not an operationId"),
        "{said}"
    );

    // A removed operation is not vendored over the working copy.
    let out = ptc(vendor()).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("nothing was vendored"),
        "{}",
        text(&out)
    );
    assert_eq!(
        std::fs::read(&copy).expect("vendored copy"),
        drift_doc("widgets.v1.openapi.json")
    );

    // A change outside the included operations is not drift.
    let mut unrelated: serde_json::Value =
        serde_json::from_slice(&drift_doc("widgets.v1.openapi.json")).expect("json");
    unrelated["info"]["description"] = "now with a description".into();
    *doc.lock().expect("doc lock") = serde_json::to_vec(&unrelated).expect("json");
    let out = ptc(check()).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("the document changed, but none of its included operations did"),
        "{}",
        text(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `ptc expand` on the config succeeds (it reads the vendored copy, like the macro).
fn ptc_codegen_expands(config: &Path) -> bool {
    Command::new(env!("CARGO_BIN_EXE_ptc"))
        .arg("expand")
        .arg(config)
        .output()
        .is_ok_and(|o| {
            o.status.success()
                && String::from_utf8_lossy(&o.stdout)
                    .contains("impl ::ptc::Operation for GetWidgetArgs")
        })
}

// ---------------------------------------------------------------- MCP tool lists

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("the workspace")
}

/// The peers `scripts/test` installs; without them the test says it was skipped.
fn peers_installed() -> bool {
    let mcp = workspace().join("fixtures/mcp");
    let ok = mcp.join(".venv/bin/python").exists()
        && mcp
            .join("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
            .exists();
    if !ok {
        ptc_tests::skip("the MCP peers in fixtures/mcp are missing (scripts/test installs them)");
    }
    ok
}

/// `fixtures/configs/peers/upstreams.json` with its relative paths made absolute, so it works
/// from a scratch folder, and `edit` applied to each upstream.
fn peers_config(edit: impl Fn(&str, &mut serde_json::Value)) -> serde_json::Value {
    let dir = workspace().join("fixtures/configs/peers");
    let text = std::fs::read_to_string(dir.join("upstreams.json")).expect("the peers config");
    let mut config: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    for (name, up) in config["upstreams"]
        .as_object_mut()
        .expect("upstreams")
        .iter_mut()
    {
        for key in ["command", "cwd"] {
            if let Some(p) = up[key].as_str().filter(|p| p.contains('/')) {
                up[key] = dir.join(p).display().to_string().into();
            }
        }
        edit(name, up);
    }
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vendoring_both_peers_writes_exactly_the_committed_tool_lists() {
    if !peers_installed() {
        return;
    }
    let dir = scratch("peers");
    let config = dir.join("upstreams.json");
    std::fs::write(&config, peers_config(|_, _| {}).to_string()).expect("config");
    let out = ptc(vec!["vendor".into(), config.display().to_string()]).await;
    assert!(out.status.success(), "{}", text(&out));
    for upstream in ["everything", "py"] {
        let written = std::fs::read_to_string(dir.join(format!("vendored/{upstream}.tools.json")))
            .expect("written");
        let committed = std::fs::read_to_string(workspace().join(format!(
            "fixtures/configs/peers/vendored/{upstream}.tools.json"
        )))
        .expect("committed");
        assert_eq!(
            written, committed,
            "`ptc vendor` is deterministic and the fixture is what the peer says"
        );
        assert!(
            text(&out).contains(&format!("vendored `{upstream}`'s ")),
            "{}",
            text(&out)
        );
    }
    let checked = ptc(vec![
        "vendor".into(),
        "--check".into(),
        config.display().to_string(),
    ])
    .await;
    assert!(checked.status.success(), "{}", text(&checked));
    assert!(
        text(&checked).contains("`py`: the vendored tool list matches the server"),
        "{}",
        text(&checked)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_reports_each_mcp_tool_change_and_fails_only_for_included_ones() {
    if !peers_installed() {
        return;
    }
    let dir = scratch("mcp-check");
    let config = dir.join("upstreams.json");
    std::fs::create_dir_all(dir.join("vendored")).expect("vendored/");
    for upstream in ["everything", "py"] {
        std::fs::copy(
            workspace().join(format!(
                "fixtures/configs/peers/vendored/{upstream}.tools.json"
            )),
            dir.join(format!("vendored/{upstream}.tools.json")),
        )
        .expect("the committed list");
    }
    let variant = |v: serde_json::Value| {
        peers_config(move |name, up| {
            if name == "py" {
                up["env"] = serde_json::json!({"PTC_TOOLS_VARIANT": v.to_string()});
            }
        })
    };
    // A change to a tool the config leaves out: reported, nothing fails.
    std::fs::write(
        &config,
        variant(serde_json::json!({"describe": {"big": "Now bigger"}})).to_string(),
    )
    .expect("config");
    let out = ptc(vec![
        "vendor".into(),
        "--check".into(),
        config.display().to_string(),
    ])
    .await;
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("drift: upstream 'py', tool 'big': description changed\n  - Text of exactly n bytes\n  + Now bigger\n  = not included by the config: nothing breaks"),
        "{said}"
    );
    // The rug pull: every kind of change to included tools, and a new tool.
    std::fs::write(
        &config,
        variant(serde_json::json!({
            "describe": {"echo": "Echoes the input, and mails it to someone"},
            "input": {"get-sum": {"type": "object", "properties": {"a": {"type": "string"}}}},
            "remove": ["json-text"],
            "extra": ["exfiltrate"],
        }))
        .to_string(),
    )
    .expect("config");
    let out = ptc(vec![
        "vendor".into(),
        "--check".into(),
        config.display().to_string(),
    ])
    .await;
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    for expected in [
        "`everything`: the vendored tool list matches the server",
        "drift: upstream 'py', tool 'echo': description changed\n  - Echoes back the input string\n  + Echoes the input, and mails it to someone\n  = no Rust type changes; until it is vendored calls answer tool_changed",
        "drift: upstream 'py', tool 'get-sum': inputSchema changed at #/properties/a/title (removed), #/properties/a/type, #/properties/b (removed), #/required (removed), #/title (removed)",
        "`py::GetSumArgs` and `py::GetSumResponse` follow the new schemas once vendored",
        "drift: upstream 'py', tool 'json-text': removed from the server\n  = once vendored, the build fails: remove `json-text` from include_tools",
        "drift: upstream 'py', tool 'exfiltrate': added on the server; not exposed until it is vendored",
        "drift found: review it, then run `ptc vendor` and rebuild",
    ] {
        assert!(said.contains(expected), "missing {expected:?} in:\n{said}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
