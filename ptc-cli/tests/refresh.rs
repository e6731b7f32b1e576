//! `ptc serve` refreshes its catalog on SIGHUP: it re-reads the config, says what changed by
//! name, and keeps the catalog in force when the config no longer compiles. A compiled
//! deployment refuses (its catalog is its build) and says so.
#![cfg(unix)]

use std::path::Path;

use ptc_tests::HostProcess;
use serde_json::json;

fn write_config(dir: &Path, operations: &[&str]) {
    let op = |id: &str| {
        json!({"get": {"operationId": id, "summary": id,
            "responses": {"200": {"description": "ok",
                "content": {"application/json": {"schema": {"type": "object"}}}}}}})
    };
    let doc = json!({"openapi": "3.0.3", "info": {"title": "api", "version": "1"},
        "paths": {"/a": op("a"), "/b": op("b")}});
    std::fs::write(dir.join("api.json"), doc.to_string()).unwrap();
    let config = json!({"upstreams": {"api": {"transport": "openapi",
        "base_url": "http://127.0.0.1:9", "allow_insecure_http": true,
        "schema_file": "api.json", "include_operations": operations}}});
    std::fs::write(dir.join("upstreams.json"), config.to_string()).unwrap();
}

#[test]
fn sighup_refreshes_the_catalog_and_a_broken_config_keeps_it() {
    let dir = std::env::temp_dir().join(format!("ptc-cli-refresh-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    write_config(&dir, &["a"]);
    let config = dir.join("upstreams.json");
    let mut host = HostProcess::serve(
        env!("CARGO_BIN_EXE_ptc"),
        &["--config", config.to_str().unwrap()],
    );
    write_config(&dir, &["a", "b"]);
    host.hangup();
    let line = host.line_with("catalog refreshed: ");
    assert!(
        line.ends_with("catalog refreshed: 1 added (api/b), 0 removed, 0 changed, 1 unchanged"),
        "{line}"
    );
    std::fs::write(&config, "{").unwrap();
    host.hangup();
    let line = host.line_with("catalog not refreshed: ");
    assert!(line.contains("invalid config"), "{line}");
    drop(host);
    let _ = std::fs::remove_dir_all(&dir);
}
