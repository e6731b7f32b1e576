//! Writes at compile time: an operation's effect comes from its method, a write compiles only
//! when `allow_writes` lists it, the config can never make a write milder, request bodies are
//! compiled from the schema, and every misuse is reported where it can be fixed.

use std::path::Path;

use ptc_plan::{
    Approval, Diagnostics, DocumentRequest, DocumentSource, Effect, Loaded, ToolPlan, Transport,
};
use serde_json::{Value, json};

/// Serves the one inline document every test uses.
struct Inline;

impl DocumentSource for Inline {
    fn fetch(&self, _: &DocumentRequest) -> Result<Vec<u8>, String> {
        Ok(document().to_string().into_bytes())
    }
}

fn json_body(schema: Value, required: bool) -> Value {
    json!({"required": required, "content": {"application/json": {"schema": schema}}})
}

fn ok() -> Value {
    json!({"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object"}}}}})
}

fn document() -> Value {
    let label = json!({"type": "object", "required": ["label"],
        "properties": {"label": {"type": "string", "minLength": 1}}});
    json!({
        "openapi": "3.0.3",
        "info": {"title": "writes", "version": "1"},
        "paths": {
            "/items": {
                "get": {"operationId": "list_items", "responses": ok()},
                "post": {"operationId": "create_item", "requestBody": json_body(label.clone(), true),
                         "responses": {"201": {"description": "made", "content": {"application/json":
                             {"schema": {"type": "object", "properties": {"id": {"type": "string"}}}}}}}}
            },
            "/items/{id}": {
                "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
                "put": {"operationId": "replace_item", "requestBody": json_body(label, false), "responses": ok()},
                "delete": {"operationId": "delete_item", "responses": {"204": {"description": "gone"}}}
            },
            "/search": {
                "post": {"operationId": "search", "requestBody": json_body(json!({"type": "object"}), true),
                         "responses": ok()}
            },
            "/xml": {
                "post": {"operationId": "post_xml", "responses": ok(), "requestBody":
                    {"content": {"application/xml": {"schema": {"type": "string"}}}}}
            },
            "/clash": {
                "post": {"operationId": "clash", "responses": ok(),
                         "parameters": [{"name": "body", "in": "query", "schema": {"type": "string"}}],
                         "requestBody": json_body(json!({"type": "object"}), false)}
            },
            "/sneaky": {"get": {"operationId": "sneaky_get", "x-ptc-read-only": false, "responses": ok()}},
            "/ro": {"post": {"operationId": "ro_post", "x-ptc-read-only": true, "responses": ok()}}
        }
    })
}

/// Loads an upstream `api` exposing `operations`, with `extra` fields spliced into it.
fn load(operations: &[&str], extra: Value) -> Result<Loaded, Diagnostics> {
    let mut upstream = json!({"transport": "openapi", "base_url": "https://api.example.test",
        "schema_file": "writes.openapi.json", "include_operations": operations});
    if let (Value::Object(u), Value::Object(e)) = (&mut upstream, extra) {
        u.extend(e);
    }
    let config = json!({"upstreams": {"api": upstream}});
    ptc_plan::load_str(
        &config.to_string(),
        Path::new("/cfg/upstreams.json"),
        &Inline,
    )
}

fn tool<'a>(loaded: &'a Loaded, name: &str) -> &'a ToolPlan {
    match &loaded.plan.upstream("api").unwrap().transport {
        Transport::Openapi(api) => api.tool(name).unwrap_or_else(|| panic!("no {name}")),
        other => panic!("{}", other.tag()),
    }
}

/// The problems as `pointer: message` lines.
fn problems(operations: &[&str], extra: Value) -> Vec<String> {
    match load(operations, extra) {
        Ok(_) => panic!("{operations:?} must not load"),
        Err(d) => {
            d.0.iter()
                .map(|d| format!("{}: {}", d.pointer, d.message))
                .collect()
        }
    }
}

#[test]
fn a_write_compiles_only_when_allow_listed() {
    let refused = load(&["create_item"], json!({})).unwrap_err();
    assert_eq!(refused.0.len(), 1, "{refused}");
    let d = &refused.0[0];
    assert_eq!(d.pointer, "/paths/~1items/post");
    assert_eq!(
        d.message,
        "uses method POST, a write; writes are exposed \
         only when allow_writes lists them"
    );
    assert!(
        d.help
            .as_deref()
            .is_some_and(|h| h.contains(r#""allow_writes": {"create_item": {}}"#)),
        "{d:?}"
    );

    let loaded = load(
        &["create_item"],
        json!({"allow_writes": {"create_item": {}}}),
    )
    .unwrap();
    let t = tool(&loaded, "create-item");
    assert_eq!(t.classified.effect, Effect::Write);
    assert_eq!(
        t.classified.approval,
        Approval::Always,
        "writes ask by default"
    );
    assert!(!t.annotations.read_only_hint);
    assert_eq!(t.ptc.method, "POST");
}

#[test]
fn every_write_method_needs_the_allow_list_and_reads_do_not() {
    for (op, method) in [
        ("create_item", "POST"),
        ("replace_item", "PUT"),
        ("delete_item", "DELETE"),
    ] {
        let p = problems(&[op], json!({}));
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].contains(&format!("uses method {method}, a write")),
            "{p:?}"
        );
    }
    let loaded = load(&["list_items"], json!({})).unwrap();
    let t = tool(&loaded, "list-items");
    assert_eq!(t.classified.effect, Effect::Read);
    assert_eq!(t.classified.approval, Approval::None);
    assert!(t.annotations.read_only_hint);
    // A read's classification is the default, so a read-only plan serialises as before.
    assert!(serde_json::to_value(t).unwrap().get("classified").is_none());
}

#[test]
fn the_config_cannot_make_an_operation_milder_or_widen_a_read() {
    // `x-ptc-read-only: true` does not make a POST a read.
    assert_eq!(
        problems(&["ro_post"], json!({})),
        ["/paths/~1ro/post: uses method POST, a write \
          (x-ptc-read-only does not make it a read); writes are exposed only when allow_writes \
          lists them"]
    );
    // `x-ptc-read-only: false` makes a GET a write, which then needs the allow-list.
    assert_eq!(
        problems(&["sneaky_get"], json!({})),
        ["/paths/~1sneaky/get: is marked \
          x-ptc-read-only: false, so it is a write; writes are exposed only when allow_writes \
          lists them"]
    );
    let loaded = load(&["sneaky_get"], json!({"allow_writes": {"sneaky_get": {}}})).unwrap();
    assert_eq!(tool(&loaded, "sneaky-get").classified.effect, Effect::Write);
    // A read cannot be listed as a write, and overrides have no effect field.
    assert_eq!(
        problems(
            &["list_items"],
            json!({"allow_writes": {"list_items": {"approval": "none"}},
                   "operation_overrides": {"list_items": {"effect": "write"}}})
        ),
        [
            "/upstreams/api/operation_overrides/list_items/effect: unknown field \
             `effect` in an operation override",
            "/upstreams/api/allow_writes/list_items: allow_writes names `list_items`, a GET and so a read; the config cannot change an \
             operation's effect"
        ]
    );
}

#[test]
fn a_safe_query_is_a_post_and_asks_no_one_by_default() {
    let loaded = load(
        &["search"],
        json!({"allow_writes": {"search": {"effect": "safe_query"}}}),
    )
    .unwrap();
    let t = tool(&loaded, "search");
    assert_eq!(t.classified.effect, Effect::SafeQuery);
    assert_eq!(t.classified.approval, Approval::None);
    assert!(!t.annotations.read_only_hint);
    let loaded = load(
        &["search"],
        json!({"allow_writes": {"search": {"effect": "safe_query", "approval": "always"}}}),
    )
    .unwrap();
    assert_eq!(
        tool(&loaded, "search").classified.approval,
        Approval::Always
    );
    let loaded = load(
        &["create_item"],
        json!({"allow_writes": {"create_item": {"approval": "none"}}}),
    )
    .unwrap();
    assert_eq!(
        tool(&loaded, "create-item").classified.approval,
        Approval::None
    );
    assert_eq!(
        problems(
            &["replace_item"],
            json!({"allow_writes": {"replace_item": {"effect": "safe_query"}}})
        ),
        [
            "/upstreams/api/allow_writes/replace_item/effect: `replace_item` uses method PUT; only a POST can be a safe_query"
        ]
    );
}

#[test]
fn request_bodies_are_compiled_into_the_body_argument() {
    let loaded = load(
        &["create_item", "replace_item", "delete_item"],
        json!({"allow_writes": {"create_item": {}, "replace_item": {}, "delete_item": {}}}),
    )
    .unwrap();
    let create = tool(&loaded, "create-item");
    assert_eq!(create.ptc.body.map(|b| b.required), Some(true));
    assert_eq!(create.input_schema["required"], json!(["body"]));
    assert_eq!(
        create.input_schema["properties"]["body"]["required"],
        json!(["label"])
    );
    let replace = tool(&loaded, "replace-item");
    assert_eq!(replace.ptc.body.map(|b| b.required), Some(false));
    assert_eq!(replace.input_schema["required"], json!(["id"]));
    assert!(replace.input_schema["properties"].get("body").is_some());
    let delete = tool(&loaded, "delete-item");
    assert_eq!(delete.ptc.body, None);
    assert!(delete.input_schema["properties"].get("body").is_none());
}

#[test]
fn bodies_that_cannot_be_sent_are_refused() {
    let grant = |op: &str| json!({"allow_writes": {op: {}}});
    assert_eq!(
        problems(&["post_xml"], grant("post_xml")),
        ["/paths/~1xml/post/requestBody: the request body \
          is not JSON (application/xml); ptc sends JSON bodies only"]
    );
    assert_eq!(
        problems(&["clash"], grant("clash")),
        ["/paths/~1clash/post: has both a request body and a \
          parameter named `body`; programs give the body as the `body` argument"]
    );
}

#[test]
fn allow_writes_entries_are_checked() {
    assert_eq!(
        problems(
            &["create_item"],
            json!({"allow_writes": {"create_item": {"effect": "delete", "approval": "sometimes",
                                                    "when": "now"},
                                    "create_itme": {}}})
        ),
        [
            "/upstreams/api/allow_writes/create_item/effect: unknown effect `delete`",
            "/upstreams/api/allow_writes/create_item/approval: unknown approval \
             `sometimes`",
            "/upstreams/api/allow_writes/create_item/when: unknown field `when` in \
             an allow_writes entry",
            "/upstreams/api/allow_writes/create_itme: allow_writes names \
             `create_itme`, which is not in include_operations (did you mean `create_item`?)",
        ]
    );
    assert_eq!(
        problems(&["list_items"], json!({"allow_writes": ["create_item"]})),
        ["/upstreams/api/allow_writes: `allow_writes` must be an object, got an array"]
    );
}

#[test]
fn the_idempotency_header_is_a_plain_header_nobody_else_sets() {
    let loaded = load(
        &["list_items"],
        json!({"idempotency_header": "Idempotency-Key"}),
    )
    .unwrap();
    let Transport::Openapi(api) = &loaded.plan.upstream("api").unwrap().transport else {
        unreachable!()
    };
    assert_eq!(api.idempotency_header.as_deref(), Some("Idempotency-Key"));
    for (header, why) in [
        (
            "Authorization",
            "is a header ptc or `auth` sets; it cannot carry the key",
        ),
        (
            "Content-Type",
            "is a header ptc or `auth` sets; it cannot carry the key",
        ),
        ("Bad Header", "is not a valid header name"),
        ("X-Client", "is already set by `auth` or `static_headers`"),
    ] {
        assert_eq!(
            problems(
                &["list_items"],
                json!({"idempotency_header": header, "static_headers": {"X-Client": "ptc"}})
            ),
            [format!(
                "/upstreams/api/idempotency_header: idempotency_header `{header}` {why}"
            )],
        );
    }
}

/// Loads `{"credentials": ..., "approval_webhook": webhook, "upstreams": {"api": reads}}`.
fn load_webhook(webhook: Value) -> Result<Loaded, Diagnostics> {
    let config = json!({
        "credentials": {"approvals": {"source": "env", "var": "APPROVALS_TOKEN"}},
        "approval_webhook": webhook,
        "upstreams": {"api": {"transport": "openapi", "base_url": "https://api.example.test",
            "schema_file": "writes.openapi.json", "include_operations": ["list_items"]}}
    });
    ptc_plan::load_str(
        &config.to_string(),
        Path::new("/cfg/upstreams.json"),
        &Inline,
    )
}

#[test]
fn an_approval_webhook_is_an_https_endpoint_with_the_usual_auth() {
    let loaded = load_webhook(json!({"url": "https://approvals.example/hook",
        "auth": [{"scheme": "bearer", "binding": "approvals"}],
        "static_headers": {"X-Team": "platform"}}))
    .unwrap();
    let w = loaded.plan.approval_webhook.expect("the webhook");
    assert_eq!(w.url, "https://approvals.example/hook");
    assert_eq!(w.http.auth.len(), 1);
    assert_eq!(
        w.http.static_headers,
        [("x-team".to_string(), "platform".to_string())]
    );
    // Plans without one serialise as before.
    let plain = load(&["list_items"], json!({})).unwrap();
    assert!(plain.plan.approval_webhook.is_none());
    assert!(
        serde_json::to_value(&plain.plan)
            .unwrap()
            .get("approval_webhook")
            .is_none()
    );
    let problems = |webhook: Value| -> Vec<String> {
        load_webhook(webhook)
            .expect_err("refused")
            .0
            .iter()
            .map(|d| format!("{}: {}", d.pointer, d.message))
            .collect()
    };
    assert_eq!(
        problems(json!({"auth": []})),
        ["/approval_webhook: the approval webhook is missing required field `url`"]
    );
    let insecure = problems(json!({"url": "http://approvals.example/hook",
        "auth": [{"scheme": "bearer", "binding": "approvals"}]}));
    assert_eq!(insecure.len(), 1, "{insecure:?}");
    assert!(
        insecure[0].starts_with("/approval_webhook/url: "),
        "{insecure:?}"
    );
    // Its request waits as long as the approval may: no request timeout to set.
    assert_eq!(
        problems(json!({"url": "https://approvals.example/hook", "request_timeout_ms": 5})),
        [
            "/approval_webhook/request_timeout_ms: unknown field `request_timeout_ms` in the approval webhook"
        ]
    );
    assert_eq!(
        problems(json!({"url": "https://approvals.example/hook",
            "auth": [{"scheme": "bearer", "binding": "nope"}]}))
        .len(),
        1
    );
    assert_eq!(
        problems(json!("https://approvals.example/hook")),
        ["/approval_webhook: the approval webhook must be a JSON object, got a string"]
    );
}
