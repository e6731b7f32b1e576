//! "Every problem is reported at once" holds across stages: a config problem does not hide the
//! document problems of what could still be compiled.

use std::path::{Path, PathBuf};

fn invalid(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/configs/invalid")
        .join(name)
}

#[test]
fn an_unknown_field_does_not_hide_a_missing_operation_in_another_upstream() {
    let diags = ptc_plan::load(&invalid("unknown_field_and_missing_operation.json")).unwrap_err();
    let found: Vec<(Option<&str>, &str)> = diags
        .iter()
        .map(|d| (d.upstream.as_deref(), d.pointer.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (Some("api"), "/upstreams/api/pool_sise"),
            (Some("other"), "/upstreams/other/include_operations/0"),
        ],
        "{diags}"
    );
    let text = diags.to_string();
    assert!(text.contains("did you mean `pool_size`?"), "{text}");
    assert!(text.contains("did you mean `get_item`?"), "{text}");
}

#[test]
fn an_unknown_field_does_not_hide_a_missing_operation_in_the_same_upstream() {
    let path = invalid("same_upstream.json");
    let config = r#"{"upstreams": {"api": {"transport": "openapi",
        "base_url": "https://api.example.test", "schema_file": "../../openapi/rules.openapi.json",
        "include_operations": ["get_itme"], "pool_sise": 4}}}"#;
    let diags = ptc_plan::load_str(config, &path, &ptc_plan::FileSource).unwrap_err();
    let pointers: Vec<&str> = diags.iter().map(|d| d.pointer.as_str()).collect();
    assert_eq!(
        pointers,
        [
            "/upstreams/api/pool_sise",
            "/upstreams/api/include_operations/0"
        ],
        "{diags}"
    );
}

#[test]
fn an_upstream_missing_a_required_field_is_not_compiled_but_the_others_are() {
    let path = invalid("partial.json");
    let config = r#"{"upstreams": {
        "api": {"transport": "openapi", "schema_file": "../../openapi/rules.openapi.json",
                "include_operations": ["get_item"]},
        "other": {"transport": "openapi", "base_url": "https://api.example.test",
                  "schema_file": "../../openapi/rules.openapi.json", "include_operations": ["nope"]}}}"#;
    let diags = ptc_plan::load_str(config, &path, &ptc_plan::FileSource).unwrap_err();
    let messages: Vec<&str> = diags.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(messages.len(), 2, "{diags}");
    assert!(
        messages[0].contains("missing required field `base_url`"),
        "{diags}"
    );
    assert!(
        messages[1].contains("include_operations names `nope`"),
        "{diags}"
    );
}
