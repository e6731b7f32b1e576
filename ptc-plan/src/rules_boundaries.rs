//! Config rules at their boundaries: each relation and cap holds at exactly its limit and fails
//! one past it with its own message; `$ref` pointers are percent-decoded.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::{HttpSettings, ToolPlan, Transport};
use serde_json::json;

mod oauth;
mod sandbox;

/// A fresh folder for one test.
fn temp_dir() -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "ptc-plan-rules-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Loads an upstream `api` over the OpenAPI document `doc` (written to a fresh folder) with
/// `include_operations`.
fn load_doc(doc: &str, operations: &[&str]) -> Result<crate::Loaded, crate::Diagnostics> {
    load_doc_with(doc, operations, serde_json::json!({}))
}

/// [`load_doc`] with the upstream's `operation_overrides`.
fn load_doc_with(
    doc: &str,
    operations: &[&str],
    overrides: serde_json::Value,
) -> Result<crate::Loaded, crate::Diagnostics> {
    let dir = temp_dir();
    std::fs::write(dir.join("doc.openapi.json"), doc).unwrap();
    let path = dir.join("upstreams.json");
    let config = serde_json::json!({"upstreams": {"api": {"transport": "openapi",
        "base_url": "https://api.example.test", "schema_file": "doc.openapi.json",
        "include_operations": operations, "operation_overrides": overrides}}});
    std::fs::write(&path, config.to_string()).unwrap();
    let loaded = crate::load(&path);
    std::fs::remove_dir_all(&dir).ok();
    loaded
}

fn rules_doc() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/openapi/rules.openapi.json")
        .canonicalize()
        .unwrap()
}

/// An OpenAPI upstream `api` over rules.openapi.json with `extra` fields spliced in.
fn config(extra: &str) -> String {
    format!(
        r#"{{"upstreams": {{"api": {{"transport": "openapi", "base_url": "https://api.example.test",
            "schema_file": "{}", "include_operations": ["get_item"]{extra}}}}}}}"#,
        rules_doc().display()
    )
}

fn parse(text: &str) -> Result<crate::config::Config, Vec<(String, String)>> {
    let mut d = crate::Diagnostics::default();
    match crate::config::parse(text, Path::new("upstreams.json"), Path::new("."), &mut d) {
        Some((c, _)) if d.is_empty() => Ok(c),
        _ => Err(d
            .0
            .iter()
            .map(|d| (d.pointer.clone(), d.message.clone()))
            .collect()),
    }
}

fn http(extra: &str) -> HttpSettings {
    let config = parse(&config(extra)).unwrap_or_else(|e| panic!("{extra}: {e:?}"));
    match &config.upstreams[0].kind {
        crate::config::UpstreamKind::Openapi(api) => api.http.clone(),
        other => panic!("{other:?}"),
    }
}

fn one_problem(extra: &str) -> (String, String) {
    let mut problems = parse(&config(extra)).expect_err(extra);
    assert_eq!(problems.len(), 1, "{extra}: {problems:?}");
    problems.remove(0)
}

#[test]
fn connect_timeout_may_equal_the_request_timeout_but_not_exceed_it() {
    let h = http(r#", "request_timeout_ms": 1000, "connect_timeout_ms": 1000"#);
    assert_eq!((h.connect_timeout_ms, h.request_timeout_ms), (1000, 1000));
    assert_eq!(
        one_problem(r#", "request_timeout_ms": 1000, "connect_timeout_ms": 1001"#),
        (
            "/upstreams/api/connect_timeout_ms".into(),
            "`connect_timeout_ms` (1001) is longer than `request_timeout_ms` (1000)".into()
        )
    );
    // The defaults are consistent: only lowering the request timeout below them fails.
    let h = http(r#", "request_timeout_ms": 5000"#);
    assert_eq!(h.connect_timeout_ms, 5000);
    assert_eq!(
        one_problem(r#", "request_timeout_ms": 4999"#).1,
        "`connect_timeout_ms` (5000) is longer than `request_timeout_ms` (4999)"
    );
}

#[test]
fn backoff_max_may_equal_the_initial_delay_but_not_be_smaller() {
    let h = http(r#", "backoff_initial_ms": 500, "backoff_max_ms": 500"#);
    assert_eq!((h.backoff.initial_ms, h.backoff.max_ms), (500, 500));
    assert_eq!(
        one_problem(r#", "backoff_initial_ms": 500, "backoff_max_ms": 499"#),
        (
            "/upstreams/api/backoff_max_ms".into(),
            "`backoff_max_ms` (499) is smaller than `backoff_initial_ms` (500)".into()
        )
    );
    // Without backoff_max_ms, the default is raised to the initial delay.
    let h = http(r#", "backoff_initial_ms": 5000"#);
    assert_eq!((h.backoff.initial_ms, h.backoff.max_ms), (5000, 5000));
    let h = http("");
    assert_eq!((h.backoff.initial_ms, h.backoff.max_ms), (100, 2000));
}

#[test]
fn integer_fields_at_their_limits() {
    let h =
        http(r#", "pool_size": 4294967295, "max_retries": 4294967295, "request_timeout_ms": 5000"#);
    assert_eq!((h.pool_size, h.backoff.max_retries), (u32::MAX, u32::MAX));
    assert_eq!(
        one_problem(r#", "pool_size": 4294967296"#),
        (
            "/upstreams/api/pool_size".into(),
            "`pool_size` is too large".into()
        )
    );
    assert_eq!(
        one_problem(r#", "max_retries": 4294967296"#).1,
        "`max_retries` must be a non-negative integer, got 4294967296"
    );
    let h = http(r#", "max_retries": 0, "max_response_bytes": 1"#);
    assert_eq!((h.backoff.max_retries, h.max_response_bytes), (0, 1));
    assert_eq!(
        one_problem(r#", "max_retries": -1"#).1,
        "`max_retries` must be a non-negative integer, got -1"
    );
    assert_eq!(
        one_problem(r#", "max_response_bytes": 0"#).1,
        "`max_response_bytes` must be a positive integer, got 0"
    );
    let defaults = http("");
    assert_eq!(
        (
            defaults.request_timeout_ms,
            defaults.connect_timeout_ms,
            defaults.max_response_bytes,
            defaults.pool_size,
            defaults.backoff.max_retries
        ),
        (30_000, 5_000, 2 * 1024 * 1024, 8, 0)
    );
}

#[test]
fn insecure_opt_ins_are_both_needed_for_auth_over_http() {
    let creds = r#""credentials": {"t": {"source": "env", "var": "T"}}, "#;
    let with = |fields: &str| {
        format!(
            r#"{{{creds}"upstreams": {{"api": {{"transport": "openapi",
            "base_url": "http://127.0.0.1:1", "schema_file": "{}", "include_operations": ["get_item"],
            "auth": [{{"scheme": "bearer", "binding": "t"}}]{fields}}}}}}}"#,
            rules_doc().display()
        )
    };
    let ok = parse(&with(
        r#", "allow_insecure_http": true, "allow_insecure_auth": true"#,
    ))
    .expect("both opt-ins");
    assert_eq!(ok.upstreams.len(), 1);
    let e = parse(&with(r#", "allow_insecure_http": true"#)).unwrap_err();
    assert_eq!(
        e,
        [(
            "/upstreams/api/base_url".to_string(),
            "`base_url` uses http:// with auth but allow_insecure_auth is not true".to_string()
        )]
    );
    let e = parse(&with(r#", "allow_insecure_auth": true"#)).unwrap_err();
    assert_eq!(
        e[0].1,
        "`base_url` uses http:// without allow_insecure_http"
    );
}

#[test]
fn schema_file_cap_holds_at_exactly_the_document_size() {
    let size = std::fs::metadata(rules_doc()).unwrap().len();
    let dir = temp_dir();
    let path = dir.join("upstreams.json");
    std::fs::write(&path, config(&format!(r#", "schema_max_bytes": {size}"#))).unwrap();
    let loaded = crate::load(&path).unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(loaded.plan.upstreams.len(), 1);
    std::fs::write(
        &path,
        config(&format!(r#", "schema_max_bytes": {}"#, size - 1)),
    )
    .unwrap();
    let diags = crate::load(&path).unwrap_err();
    assert_eq!(diags.len(), 1, "{diags}");
    let d = diags.iter().next().unwrap();
    assert_eq!(d.pointer, "/upstreams/api/schema_file");
    assert_eq!(
        d.message,
        format!(
            "`{}` is {size} bytes, over the {}-byte cap (schema_max_bytes)",
            rules_doc().display(),
            size - 1
        )
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A document whose references use percent-encoded pointer segments (`%20`, `%7B`/`%7D`), as a
/// URI fragment may.
const PERCENT_DOC: &str = r##"{
  "openapi": "3.1.0",
  "info": {"title": "pct", "version": "1"},
  "paths": {
    "/items/{id}": {
      "get": {
        "operationId": "get_item",
        "parameters": [{"$ref": "#/components/parameters/Item%20Id"}],
        "responses": {"200": {"description": "ok", "content": {"application/json": {
          "schema": {"$ref": "#/components/schemas/Item%20Detail"}}}}}
      }
    },
    "/copy/{id}": {
      "get": {
        "operationId": "get_copy",
        "parameters": [{"$ref": "#/paths/~1items~1%7Bid%7D/get/parameters/0"}],
        "responses": {"200": {"description": "ok", "content": {"application/json": {
          "schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}}}}
      }
    }
  },
  "components": {
    "parameters": {
      "Item Id": {"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}
    },
    "schemas": {
      "Item Detail": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}
    }
  }
}"##;

#[test]
fn ref_pointer_segments_are_percent_decoded() {
    let loaded = load_doc(PERCENT_DOC, &["get_item", "get_copy"]).unwrap_or_else(|d| panic!("{d}"));
    let Transport::Openapi(api) = &loaded.plan.upstreams[0].transport else {
        panic!("openapi upstream")
    };
    assert_eq!(api.tools.len(), 2);
    for tool in &api.tools {
        let params: Vec<(&str, bool)> = tool
            .ptc
            .params
            .iter()
            .map(|p| (p.name.as_str(), p.required))
            .collect();
        assert_eq!(params, [("id", true)], "{}", tool.name);
        assert_eq!(
            tool.input_schema["properties"]["id"]["type"], "string",
            "{}",
            tool.name
        );
    }
    let item = api.tools.iter().find(|t| t.name == "get-item").unwrap();
    // `#/components/schemas/Item%20Detail` found its component, kept once as a definition.
    let resolved = api.resolve(&item.output_schema).unwrap();
    assert_eq!(
        resolved["properties"]["title"]["type"], "string",
        "{resolved}"
    );
}

/// The problems of a config with these credentials and upstreams, as (pointer, message).
fn problems(credentials: &str, upstreams: &str) -> Vec<(String, String)> {
    let text = format!(r#"{{"credentials": {credentials}, "upstreams": {upstreams}}}"#);
    match parse(&text) {
        Ok(_) => Vec::new(),
        Err(p) => p,
    }
}

#[test]
fn credential_binding_names_are_a_letter_then_letters_digits_underscores_dashes() {
    let valid = ["a", "Z", "a1", "api_token-2", "a-", "a_"];
    let invalid = [
        "1token",
        "_token",
        "-token",
        "api.token",
        "api token",
        "tök",
        "a/b",
    ];
    for name in valid {
        let creds = format!(r#"{{"{name}": {{"source": "env", "var": "T"}}}}"#);
        assert_eq!(problems(&creds, "{}"), [], "{name}");
    }
    for name in invalid {
        let creds = format!(r#"{{"{name}": {{"source": "env", "var": "T"}}}}"#);
        assert_eq!(
            problems(&creds, "{}"),
            [(
                format!("/credentials/{}", name.replace('/', "~1")),
                format!("credential binding name `{name}` is invalid")
            )],
            "{name}"
        );
    }
}

#[test]
fn env_variable_names_are_letters_digits_and_underscores_not_starting_with_a_digit() {
    let valid = ["T", "_T", "API_TOKEN_2", "a", "__"];
    let invalid = ["1T", "API-TOKEN", "API.TOKEN", "A B", "Ä"];
    for var in valid {
        let creds = format!(r#"{{"t": {{"source": "env", "var": "{var}"}}}}"#);
        assert_eq!(problems(&creds, "{}"), [], "{var}");
    }
    for var in invalid {
        let creds = format!(r#"{{"t": {{"source": "env", "var": "{var}"}}}}"#);
        assert_eq!(
            problems(&creds, "{}"),
            [(
                "/credentials/t/var".to_string(),
                format!("`{var}` is not a valid environment variable name")
            )],
            "{var}"
        );
    }
}

/// An upstream `name` (an MCP server over stdio), as the `upstreams` object.
fn upstream_named(name: &str) -> String {
    format!(r#"{{"{name}": {{"transport": "mcp_stdio", "command": "server"}}}}"#)
}

/// The identifier rule at each boundary: nothing, the first character (a digit, `-`, `_`, a
/// letter outside ASCII) and a later one.
#[test]
fn upstream_names_are_a_letter_then_letters_digits_dashes_underscores() {
    let upstream = upstream_named;
    let valid = ["a", "api", "my-api_2", "A", "a-", "a_", "a9"];
    let invalid = [
        "", "1api", "9", "_api", "-api", "my api", "my.api", "a/b", "äpi", "é", "apé",
    ];
    for name in valid {
        assert_eq!(problems("{}", &upstream(name)), [], "{name}");
    }
    for name in invalid {
        assert_eq!(
            problems("{}", &upstream(name)),
            [(
                format!("/upstreams/{}", name.replace('/', "~1")),
                format!("upstream name `{name}` cannot be a PTC-Lisp namespace")
            )],
            "{name}"
        );
    }
}

/// Every name PTC-Lisp reads as its own qualifier is refused, saying what the language reads it
/// as; the hint says to rename and lists what is reserved.
#[test]
fn upstream_names_the_language_reads_as_its_own_are_refused_with_why() {
    let root = |name: &str| {
        ptc_names::namespaces::ROOTS
            .iter()
            .find(|r| r.name == name)
            .unwrap()
            .why
            .to_string()
    };
    let then = |name: &str| {
        format!(
            ", so `{name}/...` in a program means the language's names, never an upstream's tools"
        )
    };
    for (name, why) in [
        ("s", "`s` is PTC-Lisp's alias for clojure.string"),
        ("str", "`str` is PTC-Lisp's alias for clojure.string"),
        ("repl", "`repl` is PTC-Lisp's alias for clojure.repl"),
        ("core", "`core` is PTC-Lisp's alias for clojure.core"),
        ("String", "`String` is a PTC-Lisp namespace"),
        ("Math", "`Math` is a PTC-Lisp namespace"),
        ("json", "`json` is a PTC-Lisp namespace"),
        ("tool", "`tool` is a PTC-Lisp namespace"),
        ("data", "`data` is a PTC-Lisp namespace"),
        ("session", "`session` is a PTC-Lisp namespace"),
    ]
    .map(|(name, why)| (name, format!("{why}{}", then(name))))
    .into_iter()
    .chain(["clojure", "java"].map(|name| (name, root(name))))
    {
        let text = format!(r#"{{"upstreams": {}}}"#, upstream_named(name));
        let mut d = crate::Diagnostics::default();
        crate::config::parse(&text, Path::new("upstreams.json"), Path::new("."), &mut d);
        assert_eq!(d.0.len(), 1, "{name}: {:?}", d.0);
        let problem = &d.0[0];
        assert_eq!(problem.pointer, format!("/upstreams/{name}"));
        assert_eq!(
            problem.message,
            format!("upstream name `{name}` is reserved by PTC-Lisp: {why}")
        );
        let help = problem.help.as_deref().unwrap();
        let listed: Vec<&str> = help
            .strip_prefix("rename the upstream; PTC-Lisp reserves ")
            .unwrap_or_else(|| panic!("{help}"))
            .split(", ")
            .collect();
        // Every reserved name an upstream could take, once; those with a `.` are refused as
        // identifiers before being reserved, so they are not listed.
        let takeable: Vec<&str> = ptc_names::namespaces::reserved()
            .filter(|n| !n.contains('.'))
            .collect();
        assert_eq!(listed, takeable);
        for name in ["s", "repl", "String", "clojure", "java", "tool", "data"] {
            assert!(listed.contains(&name), "{name}: {help}");
        }
    }
}

/// Only the whole name, in its case, is reserved: a name that begins with or extends a reserved
/// one is an upstream's. `user` and `math` are no namespaces of PTC-Lisp (see
/// `ptc_names::namespaces`), so they are free too.
#[test]
fn upstream_names_next_to_reserved_ones_are_accepted() {
    for name in [
        "sx", "S", "string2", "strings", "repl_", "tool-box", "Tool", "json2", "clojurex", "javax",
        "user", "math", "Strings",
    ] {
        assert_eq!(problems("{}", &upstream_named(name)), [], "{name}");
    }
}

/// docs/configuration.md lists exactly the names an upstream could otherwise take, in the
/// table's order.
#[test]
fn the_configuration_docs_list_the_reserved_names() {
    let docs = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/configuration.md"),
    )
    .unwrap();
    let start = docs
        .find("every namespace and alias of the language (")
        .expect("the paragraph on reserved names");
    let end = start + docs[start..].find("Only the whole name counts").unwrap();
    let listed: Vec<&str> = docs[start..end].split('`').skip(1).step_by(2).collect();
    let takeable: Vec<&str> = ptc_names::namespaces::reserved()
        .filter(|n| ptc_names::is_identifier(n))
        .collect();
    assert_eq!(listed, takeable);
}

#[test]
fn header_names_follow_the_token_grammar() {
    let upstream = |headers: &str| {
        format!(
            r#"{{"api": {{"transport": "openapi", "base_url": "https://api.example.test",
                "schema_file": "{}", "include_operations": ["get_item"],
                "static_headers": {headers}}}}}"#,
            rules_doc().display()
        )
    };
    // Every token punctuation character is allowed, alone or with letters and digits.
    let specials = "!#$%&'*+-.^_`|~";
    let name = format!("X{specials}9");
    let headers = serde_json::json!({ name.clone(): "v" }).to_string();
    assert_eq!(problems("{}", &upstream(&headers)), [], "{name}");
    for c in specials.chars() {
        let headers = serde_json::json!({ c.to_string(): "v" }).to_string();
        assert_eq!(problems("{}", &upstream(&headers)), [], "{c}");
    }
    for bad in [
        "X Team", "X:Team", "X\"Team", "X(Team)", "Tëam", "X/Team", "X@Team", "",
    ] {
        let headers = serde_json::json!({ bad: "v" }).to_string();
        assert_eq!(
            problems("{}", &upstream(&headers)),
            [(
                format!("/upstreams/api/static_headers/{}", bad.replace('/', "~1")),
                format!("static header name `{bad}` is not a valid HTTP header name")
            )],
            "{bad:?}"
        );
    }
}

#[test]
fn secret_bearing_and_protocol_headers_are_classified_ignoring_case() {
    use crate::headers::{
        PROTOCOL_CONTROLLED, SECRET_BEARING, is_protocol_controlled, is_secret_bearing,
    };
    assert!(!SECRET_BEARING.is_empty() && !PROTOCOL_CONTROLLED.is_empty());
    for h in SECRET_BEARING {
        assert!(
            is_secret_bearing(h) && is_secret_bearing(&h.to_ascii_uppercase()),
            "{h}"
        );
        assert!(!is_protocol_controlled(h), "{h} is in one list only");
    }
    for h in PROTOCOL_CONTROLLED {
        assert!(
            is_protocol_controlled(h) && is_protocol_controlled(&h.to_ascii_uppercase()),
            "{h}"
        );
        assert!(!is_secret_bearing(h), "{h} is in one list only");
    }
    for h in ["x-team", "authorization-hint", "cookies", "x-request-id"] {
        assert!(!is_secret_bearing(h) && !is_protocol_controlled(h), "{h}");
    }
}

#[test]
fn distinct_auth_and_static_headers_combine() {
    let text = format!(
        r#"{{"credentials": {{"tok": {{"source": "env", "var": "TOK", "scheme_hint": "bearer"}},
                              "key": {{"source": "env", "var": "KEY", "scheme_hint": "raw"}},
                              "pair": {{"source": "env", "var": "PAIR", "scheme_hint": "basic"}}}},
            "upstreams": {{
              "api": {{"transport": "openapi", "base_url": "https://api.example.test",
                "schema_file": "{doc}", "include_operations": ["get_item"],
                "auth": [{{"scheme": "bearer", "binding": "tok"}},
                         {{"scheme": "custom_header", "binding": "key", "header": "X-Api-Token"}}],
                "static_headers": {{"X-Team": "a", "X-Client": "ptc"}}}},
              "other": {{"transport": "openapi", "base_url": "https://api.example.test",
                "schema_file": "{doc}", "include_operations": ["get_item"],
                "auth": [{{"scheme": "basic", "binding": "pair"}}]}}}}}}"#,
        doc = rules_doc().display()
    );
    let config = parse(&text).unwrap_or_else(|e| panic!("{e:?}"));
    let http_of = |name: &str| match &config
        .upstreams
        .iter()
        .find(|u| u.name == name)
        .expect("upstream")
        .kind
    {
        crate::config::UpstreamKind::Openapi(api) => api.http.clone(),
        other => panic!("{other:?}"),
    };
    let api = http_of("api");
    let headers: Vec<String> = api.auth.iter().map(|e| e.header()).collect();
    assert_eq!(headers, ["authorization", "x-api-token"]);
    assert_eq!(
        api.static_headers,
        [
            ("x-client".to_string(), "ptc".to_string()),
            ("x-team".to_string(), "a".to_string())
        ]
    );
    assert_eq!(http_of("other").auth.len(), 1);
}

#[test]
fn every_config_field_is_carried_with_its_default() {
    use crate::config::UpstreamKind;
    let text = format!(
        r#"{{"credentials": {{"lit": {{"source": "literal", "value": "v-s3cret"}}}},
            "upstreams": {{
              "api": {{"transport": "openapi", "base_url": "https://api.example.test/v1/",
                "description": "The API.", "schema_file": "{doc}",
                "include_operations": ["get_item", "list_items"],
                "operation_overrides": {{"get_item": {{"name": "fetch-item", "description": "Fetch.",
                  "default_args": {{"mode": "x"}}, "max_response_bytes": 10,
                  "request_timeout_ms": 20, "allow_deprecated": true, "notes": "N."}}}}}},
              "fs": {{"transport": "mcp_stdio", "command": "server", "args": ["-v", "x"],
                "env": {{"B": "2", "A": "1"}}}},
              "fs2": {{"transport": "mcp_stdio", "command": "./bin/server", "handshake_timeout_ms": 7,
                "request_timeout_ms": 8, "max_response_bytes": 9}},
              "mcp": {{"transport": "mcp_http", "url": "https://mcp.example.test/mcp",
                "handshake_timeout_ms": 11}}}}}}"#,
        doc = rules_doc().display()
    );
    let mut d = crate::Diagnostics::default();
    let (config, secrets) = crate::config::parse(
        &text,
        Path::new("/cfg/upstreams.json"),
        Path::new("/cfg"),
        &mut d,
    )
    .filter(|_| d.is_empty())
    .unwrap_or_else(|| panic!("{d}"));
    assert_eq!(secrets.literal("lit"), Some("v-s3cret"));
    assert_eq!(secrets.literal("other"), None);
    assert_eq!(format!("{secrets:?}"), r#"{"lit": "[REDACTED]"}"#);
    let names: Vec<&str> = config.upstreams.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["api", "fs", "fs2", "mcp"]);
    let by = |name: &str| {
        &config
            .upstreams
            .iter()
            .find(|u| u.name == name)
            .unwrap()
            .kind
    };

    let UpstreamKind::Openapi(api) = by("api") else {
        panic!()
    };
    assert_eq!(config.upstreams[0].description, "The API.");
    assert_eq!(config.upstreams[0].pointer, "/upstreams/api");
    assert_eq!(api.base_url, "https://api.example.test/v1");
    assert_eq!(api.schema_max_bytes, 16 * 1024 * 1024);
    assert_eq!(api.include_operations, ["get_item", "list_items"]);
    let o = &api.overrides["get_item"];
    assert_eq!(o.name.as_deref(), Some("fetch-item"));
    assert_eq!(o.description.as_deref(), Some("Fetch."));
    assert_eq!(
        o.default_args
            .as_ref()
            .map(|m| serde_json::Value::Object(m.clone())),
        Some(serde_json::json!({"mode": "x"}))
    );
    assert_eq!(
        (o.max_response_bytes, o.request_timeout_ms),
        (Some(10), Some(20))
    );
    assert!(o.allow_deprecated);
    assert_eq!(o.notes.as_deref(), Some("N."));

    let UpstreamKind::McpStdio(fs) = by("fs") else {
        panic!()
    };
    assert_eq!(fs.command, "server", "a bare name is looked up on PATH");
    assert_eq!(fs.args, ["-v", "x"]);
    assert_eq!(
        fs.env,
        [
            ("A".to_string(), "1".to_string()),
            ("B".to_string(), "2".to_string())
        ]
    );
    assert_eq!(fs.cwd, None);
    assert_eq!(
        (
            fs.handshake_timeout_ms,
            fs.request_timeout_ms,
            fs.max_response_bytes
        ),
        (10_000, 30_000, 2 * 1024 * 1024)
    );
    let UpstreamKind::McpStdio(fs2) = by("fs2") else {
        panic!()
    };
    assert_eq!(
        fs2.command, "/cfg/bin/server",
        "a path resolves against the config"
    );
    assert_eq!(
        (
            fs2.handshake_timeout_ms,
            fs2.request_timeout_ms,
            fs2.max_response_bytes
        ),
        (7, 8, 9)
    );
    let UpstreamKind::McpHttp(mcp) = by("mcp") else {
        panic!()
    };
    assert_eq!(mcp.url, "https://mcp.example.test/mcp");
    assert_eq!(mcp.handshake_timeout_ms, 11);
}

/// A document whose one operation answers with `schema`, plus `components`.
fn doc_with(schema: serde_json::Value, components: serde_json::Value) -> String {
    serde_json::json!({
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "paths": {"/x": {"get": {"operationId": "op", "responses": {"200": {
            "description": "ok", "content": {"application/json": {"schema": schema}}}}}}},
        "components": {"schemas": components}
    })
    .to_string()
}

/// Loads `doc` as the only upstream's document, including its operation `op`: the problems'
/// messages, or none.
fn op_problems(doc: &str) -> Vec<String> {
    messages(load_doc(doc, &["op"]))
}

/// The problems' messages of a load, or none.
fn messages(loaded: Result<crate::Loaded, crate::Diagnostics>) -> Vec<String> {
    match loaded {
        Ok(_) => Vec::new(),
        Err(d) => d.iter().map(|d| d.message.clone()).collect(),
    }
}

#[test]
fn schemas_may_expand_to_exactly_200000_nodes() {
    // The object schema itself plus one node per property.
    let props = |n: usize| {
        let properties: serde_json::Map<String, serde_json::Value> = (0..n)
            .map(|i| (format!("p{i}"), serde_json::json!({})))
            .collect();
        doc_with(
            serde_json::json!({"type": "object", "properties": properties}),
            serde_json::json!({}),
        )
    };
    assert_eq!(op_problems(&props(199_999)), Vec::<String>::new());
    assert_eq!(
        op_problems(&props(200_000)),
        [
            "schema has more than 200000 nodes (each named component counted once); it is too large to compile"
        ]
    );
}

#[test]
fn truncated_and_invalid_percent_escapes_stay_literal() {
    // Component names that look like broken escapes are found under their literal name.
    for name in ["A%2", "A%", "A%zz", "A%4g"] {
        let escaped = name.replace('%', "%25");
        for reference in [name.to_string(), escaped] {
            let doc = doc_with(
                serde_json::json!({"$ref": format!("#/components/schemas/{reference}")}),
                serde_json::json!({ name: {"type": "object", "properties": {"n": {"type": "integer"}}} }),
            );
            assert_eq!(op_problems(&doc), Vec::<String>::new(), "{reference}");
        }
    }
    let doc = doc_with(
        serde_json::json!({"$ref": "#/components/schemas/Missing%20One"}),
        serde_json::json!({}),
    );
    assert_eq!(
        op_problems(&doc),
        ["$ref `#/components/schemas/Missing%20One` points at nothing in this document"]
    );
}

/// A document with one operation `/things/{cursor}` taking a path `cursor`, a query `page` and a
/// header `token`, paginated by `cursor_arg`.
fn paginated_doc(cursor_arg: &str) -> String {
    format!(
        r##"{{"openapi": "3.1.0", "info": {{"title": "p", "version": "1"}}, "paths": {{
  "/things/{{cursor}}": {{"get": {{"operationId": "list_things",
    "parameters": [
      {{"name": "cursor", "in": "path", "required": true, "schema": {{"type": "string"}}}},
      {{"name": "page", "in": "query", "schema": {{"type": "string"}}}}],
    "x-ptc-pagination": {{"cursor_arg": "{cursor_arg}", "next_cursor_path": "$.next"}},
    "responses": {{"200": {{"description": "ok", "content": {{"application/json": {{
      "schema": {{"type": "object", "properties": {{"next": {{"type": "string"}}}}}}}}}}}}}}}}}}}}}}"##
    )
}

fn load_paginated(cursor_arg: &str) -> Result<crate::Loaded, crate::Diagnostics> {
    load_doc(&paginated_doc(cursor_arg), &["list_things"])
}

/// `x-ptc-pagination.cursor_arg` must name a query parameter: a path parameter of that name or
/// no parameter at all is refused at the extension's pointer.
#[test]
fn the_pagination_cursor_is_a_query_parameter() {
    let loaded = load_paginated("page").unwrap_or_else(|d| panic!("{d}"));
    let Transport::Openapi(api) = &loaded.plan.upstreams[0].transport else {
        panic!("openapi upstream")
    };
    let pagination = api.tools[0].ptc.pagination.as_ref().expect("pagination");
    assert_eq!(pagination.position_arg(), "page");
    for bad in ["cursor", "nope"] {
        let diags = load_paginated(bad).expect_err(bad);
        assert_eq!(diags.len(), 1, "{diags}");
        let d = diags.iter().next().unwrap();
        assert_eq!(
            d.message,
            format!(
                "x-ptc-pagination.cursor_arg `{bad}` is not a query parameter of this operation"
            )
        );
        assert!(
            d.pointer.ends_with("/get/x-ptc-pagination"),
            "{}",
            d.pointer
        );
    }
}

const OVERRIDE_DOC: &str = r##"{
  "openapi": "3.1.0",
  "info": {"title": "o", "version": "1"},
  "paths": {
    "/things/{id}": {
      "parameters": [
        {"name": "id", "in": "path", "required": true, "schema": {"type": "string"}},
        {"name": "limit", "in": "query", "schema": {"type": "integer"}}
      ],
      "get": {
        "operationId": "list_things",
        "summary": "List things",
        "description": "List things, newest first.",
        "parameters": [
          {"name": "limit", "in": "query", "schema": {"type": "string"}},
          {"name": "q", "in": "query", "schema": {"type": "string"}},
          {"name": "mode", "in": "query", "required": true, "schema": {"type": "string"}}
        ],
        "x-ptc-default-args": {"mode": "brief"},
        "responses": {"200": {"description": "ok", "content": {"application/json": {
          "schema": {"type": "object"}}}}}
      }
    }
  }
}"##;

/// An operation's own parameter replaces the path item's of the same name and location; a
/// parameter is required in the binding only when the document requires it and no default
/// fills it; a description that already starts with the summary is not prefixed with it again.
#[test]
fn operation_parameters_override_and_bind_their_requiredness() {
    let loaded = load_doc(OVERRIDE_DOC, &["list_things"]).unwrap_or_else(|d| panic!("{d}"));
    let Transport::Openapi(api) = &loaded.plan.upstreams[0].transport else {
        panic!("openapi upstream")
    };
    let tool = &api.tools[0];
    let params: Vec<(&str, bool)> = tool
        .ptc
        .params
        .iter()
        .map(|p| (p.name.as_str(), p.required))
        .collect();
    assert_eq!(
        params,
        [
            ("id", true),
            ("limit", false),
            ("q", false),
            ("mode", false)
        ]
    );
    assert_eq!(
        tool.input_schema["properties"]["limit"]["type"], "string",
        "the operation's `limit` wins: {}",
        tool.input_schema
    );
    assert_eq!(tool.description, "List things, newest first.");
}

/// An operation with a problem is not compiled, so it cannot also collide with another
/// operation's tool name: one problem is reported, not a cascade.
#[test]
fn a_failed_operation_does_not_also_collide() {
    let doc = r##"{"openapi": "3.1.0", "info": {"title": "c", "version": "1"}, "paths": {
  "/a": {"get": {"operationId": "list_things",
    "x-ptc-pagination": {"cursor_arg": "nope", "next_cursor_path": "$.next"},
    "responses": {"200": {"description": "ok", "content": {"application/json": {
      "schema": {"type": "object"}}}}}}},
  "/b": {"get": {"operationId": "listThings",
    "responses": {"200": {"description": "ok", "content": {"application/json": {
      "schema": {"type": "object"}}}}}}}}}"##;
    let diags = load_doc(doc, &["list_things", "listThings"]).expect_err("list_things fails");
    let messages: Vec<&str> = diags.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(
        messages,
        ["x-ptc-pagination.cursor_arg `nope` is not a query parameter of this operation"]
    );
}

/// Compiles a one-operation document whose `/x/{id}` GET takes `params` (JSON), returning the
/// problems' messages (empty when it compiles).
fn param_problems(params: &str) -> Vec<String> {
    let doc = format!(
        r##"{{"openapi": "3.1.0", "info": {{"title": "p", "version": "1"}}, "paths": {{
  "/x/{{id}}": {{"get": {{"operationId": "get_x", "parameters": {params},
    "responses": {{"200": {{"description": "ok", "content": {{"application/json": {{
      "schema": {{"type": "object"}}}}}}}}}}}}}}}}}}"##
    );
    messages(load_doc(&doc, &["get_x"]))
}

/// Each location's default style is accepted when spelled out (`simple` for path, `form` for
/// query) and the other one refused; arrays are accepted only as exploded query parameters.
#[test]
fn parameter_styles_and_arrays_follow_their_location() {
    let id = r#"{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}"#;
    assert_eq!(
        param_problems(&format!(
            r#"[{id}, "style": "simple"}}, {{"name": "q", "in": "query", "style": "form", "schema": {{"type": "string"}}}}]"#
        )),
        Vec::<String>::new()
    );
    assert_eq!(
        param_problems(&format!(r#"[{id}, "style": "form"}}]"#)),
        ["parameter `id` uses style `form`; v1 supports the default style only"]
    );
    assert_eq!(
        param_problems(&format!(
            r#"[{id}}}, {{"name": "q", "in": "query", "style": "simple", "schema": {{"type": "string"}}}}]"#
        )),
        ["parameter `q` uses style `simple`; v1 supports the default style only"]
    );
    let tags = |extra: &str| {
        format!(
            r#"[{id}}}, {{"name": "tags", "in": "query"{extra}, "schema": {{"type": "array", "items": {{"type": "string"}}}}}}]"#
        )
    };
    assert_eq!(param_problems(&tags("")), Vec::<String>::new());
    assert_eq!(
        param_problems(&tags(r#", "explode": true"#)),
        Vec::<String>::new()
    );
    assert_eq!(
        param_problems(&tags(r#", "explode": false"#)),
        [
            "query parameter `tags` is not a simple value (string, number, integer, boolean, or an exploded array of them)"
        ]
    );
    assert_eq!(
        param_problems(
            r#"[{"name": "id", "in": "path", "required": true, "schema": {"type": "array", "items": {"type": "string"}}}]"#
        ),
        ["path parameter `id` is not a simple value (string, number, integer, boolean)"]
    );
}

/// A path placeholder needs a parameter declared `in: path`: one of the same name elsewhere does
/// not count. Nullable types are judged by what they are besides null.
#[test]
fn placeholders_need_path_parameters_and_nullable_types_keep_their_kind() {
    assert_eq!(
        param_problems(r#"[{"name": "id", "in": "query", "schema": {"type": "string"}}]"#),
        ["path template `/x/{id}` uses `{id}` that is not declared as path parameter"]
    );
    let id = r#"{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}"#;
    assert_eq!(
        param_problems(&format!(
            r#"[{id}, {{"name": "n", "in": "query", "schema": {{"type": ["integer", "null"]}}}}]"#
        )),
        Vec::<String>::new()
    );
    assert_eq!(
        param_problems(&format!(
            r#"[{id}, {{"name": "f", "in": "query", "schema": {{"type": ["object", "null"]}}}}]"#
        )),
        [
            "query parameter `f` is not a simple value (string, number, integer, boolean, or an exploded array of them)"
        ]
    );
}

/// A one-operation document: `GET /things` with query `cursor`, `page`, `per_page` and `offset`,
/// answering `{items: [Thing], next: string|null, total: integer}`, with `extensions` (JSON
/// members) on the operation.
fn listing_doc(extensions: &str) -> String {
    format!(
        r##"{{"openapi": "3.1.0", "info": {{"title": "l", "version": "1"}}, "paths": {{
  "/things": {{"get": {{"operationId": "list_things", {extensions}
    "parameters": [
      {{"name": "cursor", "in": "query", "schema": {{"type": "string"}}}},
      {{"name": "page", "in": "query", "schema": {{"type": "integer"}}}},
      {{"name": "per_page", "in": "query", "schema": {{"type": "integer"}}}},
      {{"name": "offset", "in": "query", "schema": {{"type": "integer"}}}}],
    "responses": {{"200": {{"description": "ok", "content": {{"application/json": {{
      "schema": {{"$ref": "#/components/schemas/Things"}}}}}}}}}}}}}}}},
  "components": {{"schemas": {{
    "Thing": {{"type": "object", "properties": {{"id": {{"type": "string"}}}}}},
    "Things": {{"type": "object", "properties": {{
      "items": {{"type": "array", "items": {{"$ref": "#/components/schemas/Thing"}}}},
      "next": {{"type": ["string", "null"]}}, "total": {{"type": "integer"}}}}}}}}}}}}"##
    )
}

fn listing(extensions: &str, overrides: serde_json::Value) -> Result<ToolPlan, Vec<String>> {
    match load_doc_with(&listing_doc(extensions), &["list_things"], overrides) {
        Ok(loaded) => {
            let Transport::Openapi(api) = &loaded.plan.upstreams[0].transport else {
                panic!("openapi upstream")
            };
            Ok(api.tools[0].clone())
        }
        Err(d) => Err(d
            .iter()
            .map(|d| format!("{}: {}", d.pointer, d.message))
            .collect()),
    }
}

/// A result path selects what a call returns, and the tool's output schema is the selected
/// value's; a path the response schema does not have fails the build at the extension.
#[test]
fn the_result_path_must_be_in_the_response_schema() {
    let tool = listing(r#""x-ptc-result-path": "$.items","#, json!({})).unwrap();
    assert_eq!(
        tool.output_schema,
        json!({"type": "array", "items": {"$ref": "#/$defs/Thing"}})
    );
    assert_eq!(tool.ptc.result_path.unwrap().segments(), ["items"]);
    let tool = listing(r#""x-ptc-result-path": "/items/0/id","#, json!({})).unwrap();
    assert_eq!(tool.output_schema, json!({"type": "string"}));
    let tool = listing(r#""x-ptc-result-path": "$","#, json!({})).unwrap();
    assert_eq!(tool.output_schema, json!({"$ref": "#/$defs/Things"}));
    assert_eq!(
        listing(r#""x-ptc-result-path": "$.itemz","#, json!({})).unwrap_err(),
        [
            "/paths/~1things/get/x-ptc-result-path: x-ptc-result-path `$.itemz`: the response \
          has no property `itemz` (it has items, next, total)"
        ]
    );
    assert_eq!(
        listing(r#""x-ptc-result-path": "$.total.n","#, json!({})).unwrap_err(),
        [
            "/paths/~1things/get/x-ptc-result-path: x-ptc-result-path `$.total.n`: `total` is \
          integer, which has no `n`"
        ]
    );
}

/// The cursor must be where the response schema says, and every argument a style names must
/// be a query parameter.
#[test]
fn pagination_names_only_what_the_operation_has() {
    let tool = listing(
        r#""x-ptc-pagination": {"cursor_arg": "cursor", "next_cursor_path": "$.next"},"#,
        json!({}),
    )
    .unwrap();
    assert_eq!(tool.ptc.pagination.unwrap().style(), "cursor");
    assert_eq!(
        listing(
            r#""x-ptc-pagination": {"cursor_arg": "cursor", "next_cursor_path": "$.nxt"},"#,
            json!({})
        )
        .unwrap_err(),
        [
            "/paths/~1things/get/x-ptc-pagination: x-ptc-pagination.next_cursor_path `$.nxt`: the \
          response has no property `nxt` (it has items, next, total)"
        ]
    );
    assert_eq!(
        listing(
            r#""x-ptc-result-path": "$.items", "x-ptc-pagination": {"page_arg": "page", "size_arg": "size"},"#,
            json!({})
        )
        .unwrap_err(),
        ["/paths/~1things/get/x-ptc-pagination: x-ptc-pagination.size_arg `size` is not a query \
          parameter of this operation"]
    );
}

/// Page and offset pagination count each page's items, so what a call returns must be a list.
#[test]
fn counted_pagination_needs_a_list_result() {
    for style in [
        r#"{"page_arg": "page", "size_arg": "per_page"}"#,
        r#"{"offset_arg": "offset"}"#,
    ] {
        let ext = format!(r#""x-ptc-result-path": "$.items", "x-ptc-pagination": {style},"#);
        let tool = listing(&ext, json!({})).unwrap();
        assert!(tool.ptc.pagination.unwrap().counts_items());
        let ext = format!(r#""x-ptc-pagination": {style},"#);
        let e = listing(&ext, json!({})).unwrap_err();
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].ends_with(
                "pagination counts each page's items, but what a call returns is not a list"
            ),
            "{e:?}"
        );
    }
}

/// The operator's overrides replace the document's extensions (for documents they cannot
/// edit), and their problems are reported at the override.
#[test]
fn overrides_set_the_result_path_and_pagination() {
    let tool = listing(
        r#""x-ptc-result-path": "$.next","#,
        json!({"list_things": {"result_path": "/items",
            "pagination": {"offset_arg": "offset", "limit_arg": "per_page"}}}),
    )
    .unwrap();
    assert_eq!(tool.ptc.result_path.unwrap().as_str(), "/items");
    assert_eq!(tool.ptc.pagination.unwrap().position_arg(), "offset");
    let e = listing(
        "",
        json!({"list_things": {"result_path": "$.things",
            "pagination": {"page_arg": "p"}}}),
    )
    .unwrap_err();
    assert_eq!(
        e,
        [
            "/upstreams/api/operation_overrides/list_things/pagination: operation_overrides \
             pagination.page_arg `p` is not a query parameter of this operation",
            "/upstreams/api/operation_overrides/list_things/result_path: operation_overrides \
             result_path `$.things`: the response has no property `things` (it has items, next, \
             total)"
        ]
    );
    let e = listing(
        "",
        json!({"list_things": {"result_path": 3, "pagination": {}}}),
    )
    .unwrap_err();
    assert_eq!(
        e,
        [
            "/upstreams/api/operation_overrides/list_things/result_path: `result_path` must be a \
             path like \"$.items\" or \"/items\", got a number",
            "/upstreams/api/operation_overrides/list_things/pagination: `pagination` names no \
             style (cursor_arg, page_arg or offset_arg): use one of {\"cursor_arg\": \"cursor\", \
             \"next_cursor_path\": \"$.next\"}, {\"page_arg\": \"page\", \"first_page\": 1, \
             \"size_arg\": \"per_page\"} or {\"offset_arg\": \"offset\", \"limit_arg\": \"limit\"}"
        ]
    );
}

#[test]
fn a_token_exchange_needs_a_target_and_a_safe_endpoint_and_parses_into_the_plan() {
    let exchange = |fields: &str| {
        format!(
            r#"{{"c": {{"source": "env", "var": "C"}}, "x": {{"source": "caller_token_exchange",
                "client_id": "ptc", "client_secret": "c"{fields}}}}}"#
        )
    };
    let target = r#", "token_endpoint": "https://auth.example.test/token""#;
    for ok in [
        format!(r#"{target}, "audience": "a""#),
        format!(r#"{target}, "resource": "https://api.example.test""#),
        r#", "token_endpoint": "http://127.0.0.1:9/token", "audience": "a""#.to_string(),
        r#", "token_endpoint": "http://localhost:9/token", "audience": "a""#.to_string(),
        r#", "token_endpoint": "http://[::1]:9/token", "audience": "a""#.to_string(),
    ] {
        assert_eq!(problems(&exchange(&ok), "{}"), [], "{ok}");
    }
    assert_eq!(
        problems(&exchange(target), "{}"),
        [(
            "/credentials/x/audience".to_string(),
            "a token exchange needs `audience` or `resource`: the upstream the token is for"
                .to_string()
        )]
    );
    for bad in [
        "http://auth.example.test/token",
        "ftp://127.0.0.1/token",
        "not a url",
    ] {
        let fields = format!(r#", "token_endpoint": "{bad}", "audience": "a""#);
        let found = problems(&exchange(&fields), "{}");
        assert_eq!(found.len(), 1, "{bad}: {found:?}");
        assert_eq!(found[0].0, "/credentials/x/token_endpoint", "{bad}");
    }
    let text = format!(
        r#"{{"credentials": {}, "upstreams": {{}}}}"#,
        exchange(&format!(r#"{target}, "audience": "a", "scope": "s1 s2""#))
    );
    let config = parse(&text).unwrap();
    let x = config.credentials.iter().find(|c| c.name == "x").unwrap();
    assert!(x.source.is_per_caller());
    assert_eq!(
        x.source,
        crate::CredentialSource::CallerTokenExchange(crate::TokenExchangeSource {
            token_endpoint: "https://auth.example.test/token".into(),
            audience: Some("a".into()),
            resource: None,
            scope: Some("s1 s2".into()),
            client_id: "ptc".into(),
            client_secret: "c".into(),
        })
    );
    let c = config.credentials.iter().find(|c| c.name == "c").unwrap();
    assert!(!c.source.is_per_caller());
}

#[test]
fn per_caller_files_resolve_against_the_config_folder() {
    let text = r#"{"credentials": {"p": {"source": "per_caller",
        "files": {"alice": "alice.token", "*": "/run/shared"}}}, "upstreams": {}}"#;
    let mut d = crate::Diagnostics::default();
    let (config, _) = crate::config::parse(
        text,
        Path::new("/etc/ptc/upstreams.json"),
        Path::new("/etc/ptc"),
        &mut d,
    )
    .unwrap();
    assert!(d.is_empty(), "{d:?}");
    let crate::CredentialSource::PerCaller { files } = &config.credentials[0].source else {
        panic!("per_caller")
    };
    assert_eq!(files["*"], "/run/shared");
    assert_eq!(files["alice"], "/etc/ptc/alice.token");
    assert!(config.credentials[0].source.is_per_caller());
}
