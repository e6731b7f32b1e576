//! `upstreams`: one entry per tool namespace, dispatched on `transport`.

use std::collections::BTreeMap;
use std::path::Path;

use ptc_names::namespaces;
use serde_json::Value;

use super::fields::{Cx, Fields};
use super::http::{self, DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_REQUEST_TIMEOUT_MS};
use super::oauth;
use super::{OpenApiConfig, OperationOverride, UpstreamConfig, UpstreamKind};
use crate::diagnostic::pointer_join;
use crate::plan::{
    CredentialBinding, McpHttpPlan, McpStdioPlan, McpTools, PinPolicy, SchemaLocation,
};
use crate::projection::{Pagination, ValuePath};
use crate::suggest::did_you_mean;

const TRANSPORTS: [&str; 3] = ["openapi", "mcp_stdio", "mcp_http"];
const DEFAULT_HANDSHAKE_TIMEOUT_MS: u64 = 10_000;
const DEFAULT_SCHEMA_MAX_BYTES: u64 = 16 * 1024 * 1024;

pub(super) fn parse_all(
    cx: &mut Cx,
    value: &Value,
    pointer: &str,
    base_dir: &Path,
    credentials: &[CredentialBinding],
) -> Vec<UpstreamConfig> {
    let Some(map) = cx.object(
        value,
        pointer,
        "`upstreams`",
        "map each upstream name to its settings",
    ) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, entry) in map {
        cx.report.set_upstream(Some(name));
        let at = pointer_join(pointer, name);
        check_name(cx, &at, name);
        if let Some(u) = parse_one(cx, name, entry, &at, base_dir, credentials) {
            out.push(u);
        }
        cx.report.set_upstream(None);
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// An upstream's name becomes the `name/` before its tools in a program: it must be an
/// identifier, and not one PTC-Lisp already reads as its own (`s/join` is `clojure.string/join`
/// whatever upstreams there are).
fn check_name(cx: &mut Cx, at: &str, name: &str) {
    if !ptc_names::is_identifier(name) {
        cx.error(
            at,
            format!("upstream name `{name}` cannot be a PTC-Lisp namespace"),
            Some(format!(
                "use {} (it becomes the `name/` in `name/tool`)",
                ptc_names::IDENTIFIER_RULE
            )),
        );
    } else if let Some(why) = namespaces::why_reserved(name) {
        cx.error(
            at,
            format!("upstream name `{name}` is reserved by PTC-Lisp: {why}"),
            Some(format!(
                "rename the upstream; {}",
                reserved_upstream_names()
            )),
        );
    }
}

/// The reserved names an upstream could otherwise take (those with a `.` fail the identifier
/// rule first), as the hint lists them.
fn reserved_upstream_names() -> String {
    let names: Vec<&str> = namespaces::reserved()
        .filter(|n| ptc_names::is_identifier(n))
        .collect();
    format!("PTC-Lisp reserves {}", names.join(", "))
}

fn parse_one(
    cx: &mut Cx,
    name: &str,
    entry: &Value,
    at: &str,
    base_dir: &Path,
    credentials: &[CredentialBinding],
) -> Option<UpstreamConfig> {
    let mut f = Fields::new(cx, entry, at, "an upstream")?;
    let transport = f.required_string(
        cx,
        "transport",
        "set \"transport\" to \"openapi\", \"mcp_stdio\" or \"mcp_http\"",
    );
    let description = f.string(cx, "description").unwrap_or_default().to_string();
    let kind = match transport {
        Some("openapi") => {
            parse_openapi(cx, &mut f, base_dir, credentials).map(UpstreamKind::Openapi)
        }
        Some("mcp_stdio") => parse_stdio(cx, &mut f, base_dir).map(UpstreamKind::McpStdio),
        Some("mcp_http") => parse_mcp_http(cx, &mut f, credentials).map(UpstreamKind::McpHttp),
        Some(old @ ("stdio" | "http")) => {
            cx.error(
                &f.at("transport"),
                format!("transport \"{old}\" is the old name"),
                Some(format!("use \"mcp_{old}\"")),
            );
            None
        }
        Some(other) => {
            cx.error(
                &f.at("transport"),
                format!(
                    "unsupported transport `{other}`{}",
                    did_you_mean(other, TRANSPORTS)
                ),
                Some("use \"openapi\", \"mcp_stdio\" or \"mcp_http\"".into()),
            );
            None
        }
        None => None,
    };
    // Unknown-field checks only make sense once we know which fields the transport has.
    if kind.is_some() {
        f.finish(cx);
    }
    kind.map(|kind| UpstreamConfig {
        name: name.to_string(),
        description,
        pointer: at.to_string(),
        kind,
    })
}

fn parse_openapi(
    cx: &mut Cx,
    f: &mut Fields,
    base_dir: &Path,
    credentials: &[CredentialBinding],
) -> Option<OpenApiConfig> {
    let http = http::parse_settings(cx, f, credentials);
    let base_url = f.required_string(
        cx,
        "base_url",
        "set \"base_url\" to the API's https:// origin",
    );
    let base_ok = base_url.is_some_and(|u| {
        let problems = http::check_base_url(u, http::UrlOptIns::of(&http));
        http::report_url(cx, &f.at("base_url"), problems)
    });
    let schema_file = f.string(cx, "schema_file");
    let schema_url = f.string(cx, "schema_url");
    let schema = match (schema_file, schema_url) {
        (Some(path), None) => Some(SchemaLocation::File(crate::paths::resolve(base_dir, path))),
        (None, Some(url)) => http::check_url(cx, &f.at("schema_url"), "schema_url", url, &http)
            .then(|| SchemaLocation::Url(url.to_string())),
        (Some(_), Some(_)) => {
            cx.error(
                &f.pointer,
                "sets both `schema_file` and `schema_url`; exactly one schema source is allowed",
                Some("keep `schema_file` for production (no network at start-up) and remove `schema_url`".into()),
            );
            None
        }
        (None, None) => {
            cx.error(
                &f.pointer,
                "has no schema source: set exactly one of `schema_file` or `schema_url`",
                Some(
                    "e.g. \"schema_file\": \"observatory.openapi.json\" (relative to this config)"
                        .into(),
                ),
            );
            None
        }
    };
    let schema_max_bytes = f.positive(cx, "schema_max_bytes", DEFAULT_SCHEMA_MAX_BYTES);
    let include_operations = parse_includes(cx, f);
    let overrides = match f.get("operation_overrides") {
        Some(v) => parse_overrides(
            cx,
            v,
            &f.at("operation_overrides"),
            include_operations.as_deref().unwrap_or(&[]),
        ),
        None => BTreeMap::new(),
    };
    let writes = super::writes::parse_allow_writes(
        cx,
        f,
        include_operations.as_deref(),
        "include_operations",
    );
    let idempotency_header =
        super::writes::parse_idempotency_header(cx, f, &http.auth, &http.static_headers);
    Some(OpenApiConfig {
        base_url: base_url
            .filter(|_| base_ok)?
            .trim_end_matches('/')
            .to_string(),
        schema: schema?,
        schema_max_bytes,
        http,
        include_operations: include_operations?,
        overrides,
        writes,
        idempotency_header,
    })
}

/// A base URL is an origin with an optional path prefix: no query, no fragment.
fn parse_includes(cx: &mut Cx, f: &mut Fields) -> Option<Vec<String>> {
    let help = "list the operationIds to expose, e.g. \"include_operations\": [\"list_traces\"]; \
                nothing is exposed by default";
    let at = f.at("include_operations");
    let Some(list) = f.string_list(cx, "include_operations") else {
        if f.get("include_operations").is_none() {
            cx.error(
                &f.pointer,
                "is missing required field `include_operations`",
                Some(help.into()),
            );
        }
        return None;
    };
    if list.is_empty() {
        cx.error(
            &at,
            "`include_operations` is empty; v1 exposes only listed operations",
            Some(help.into()),
        );
        return None;
    }
    let mut out: Vec<String> = Vec::with_capacity(list.len());
    for (i, id) in list.iter().enumerate() {
        if id.trim().is_empty() {
            cx.error(
                &pointer_join(&at, &i.to_string()),
                "operationId must not be empty",
                None,
            );
        } else if out.iter().any(|o| o == id) {
            cx.error(
                &pointer_join(&at, &i.to_string()),
                format!("operation `{id}` is listed twice"),
                Some("remove the duplicate".into()),
            );
        } else {
            out.push(id.to_string());
        }
    }
    Some(out)
}

fn parse_overrides(
    cx: &mut Cx,
    value: &Value,
    pointer: &str,
    includes: &[String],
) -> BTreeMap<String, OperationOverride> {
    let Some(map) = cx.object(
        value,
        pointer,
        "`operation_overrides`",
        "map operationIds to {\"name\", \"description\", \"default_args\", ...}",
    ) else {
        return BTreeMap::new();
    };
    let mut out = BTreeMap::new();
    for (id, entry) in map {
        let at = pointer_join(pointer, id);
        if !includes.is_empty() && !includes.contains(id) {
            cx.error(
                &at,
                format!(
                    "operation_overrides names `{id}`, which is not in include_operations{}",
                    did_you_mean(id, includes.iter().map(String::as_str))
                ),
                Some(format!(
                    "add `{id}` to include_operations, or remove its override"
                )),
            );
        }
        let Some(mut f) = Fields::new(cx, entry, &at, "an operation override") else {
            continue;
        };
        let mut o = OperationOverride {
            name: f.string(cx, "name").map(str::to_string),
            description: f.string(cx, "description").map(str::to_string),
            ..OperationOverride::default()
        };
        let at = f.at("default_args");
        o.default_args = f.get("default_args").and_then(|v| {
            cx.object(
                v,
                &at,
                "`default_args`",
                "e.g. \"default_args\": {\"mode\": \"summary\"}",
            )
            .cloned()
        });
        o.max_response_bytes = f.positive_opt(cx, "max_response_bytes");
        o.request_timeout_ms = f.positive_opt(cx, "request_timeout_ms");
        o.allow_deprecated = f.bool(cx, "allow_deprecated");
        o.notes = f.string(cx, "notes").map(str::to_string);
        let at = f.at("result_path");
        o.result_path = match f.get("result_path").map(|v| (v, v.as_str())) {
            None => None,
            Some((_, Some(text))) => ValuePath::parse(text)
                .map_err(|e| cx.error(&at, e, None))
                .ok(),
            Some((v, None)) => {
                cx.wrong_type(
                    &at,
                    "`result_path`",
                    "a path like \"$.items\" or \"/items\"",
                    v,
                    None,
                );
                None
            }
        };
        let at = f.at("pagination");
        o.pagination = f.get("pagination").and_then(|v| {
            Pagination::read(v)
                .map_err(|e| cx.error(&at, format!("`pagination` {e}"), None))
                .ok()
        });
        f.finish(cx);
        out.insert(id.clone(), o);
    }
    out
}

fn parse_stdio(cx: &mut Cx, f: &mut Fields, base_dir: &Path) -> Option<McpStdioPlan> {
    let command = f.required_string(
        cx,
        "command",
        "set \"command\" to the MCP server program, e.g. \"npx\"",
    );
    let args = f.string_list(cx, "args").unwrap_or_default();
    let mut env: Vec<(String, String)> = f
        .string_map(cx, "env")
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    env.sort();
    let cwd = f
        .string(cx, "cwd")
        .map(|c| crate::paths::resolve(base_dir, c));
    let handshake_timeout_ms = f.positive(cx, "handshake_timeout_ms", DEFAULT_HANDSHAKE_TIMEOUT_MS);
    let request_timeout_ms = f.positive(cx, "request_timeout_ms", DEFAULT_REQUEST_TIMEOUT_MS);
    let max_response_bytes = f.positive(cx, "max_response_bytes", DEFAULT_MAX_RESPONSE_BYTES);
    let tools = parse_mcp_tools(cx, f);
    let sandbox = super::sandbox::parse(cx, f, base_dir);
    let command = command?;
    // A relative path with a slash is a file next to the config; a bare name is looked up on PATH.
    let command = if command.contains('/') {
        crate::paths::resolve(base_dir, command)
    } else {
        command.to_string()
    };
    Some(McpStdioPlan {
        command,
        args: args.into_iter().map(str::to_string).collect(),
        env,
        cwd,
        handshake_timeout_ms,
        request_timeout_ms,
        max_response_bytes,
        tools,
        sandbox,
    })
}

fn parse_mcp_http(
    cx: &mut Cx,
    f: &mut Fields,
    credentials: &[CredentialBinding],
) -> Option<McpHttpPlan> {
    // Credentials that depend on the caller are fine here: such an upstream is called over a
    // session per caller.
    let http = http::parse_settings(cx, f, credentials);
    let handshake_timeout_ms = f.positive(cx, "handshake_timeout_ms", DEFAULT_HANDSHAKE_TIMEOUT_MS);
    let tools = parse_mcp_tools(cx, f);
    let oauth_at = f.at("oauth");
    let oauth_value = f.get("oauth");
    let oauth = oauth_value
        .and_then(|v| oauth::parse(cx, v, &oauth_at, credentials, (&http.auth, &f.at("auth"))));
    let url = f.required_string(
        cx,
        "url",
        "set \"url\" to the MCP endpoint, e.g. https://host/mcp",
    )?;
    let mut opt_ins = http::UrlOptIns::of(&http);
    // Tokens travel to the upstream even when the `oauth` object itself has a problem.
    opt_ins.sends_credentials |= oauth_value.is_some();
    let problems = http::check_upstream_url("url", url, opt_ins);
    http::report_url(cx, &f.at("url"), problems).then(|| McpHttpPlan {
        url: url.to_string(),
        handshake_timeout_ms,
        http,
        tools,
        oauth,
    })
}

/// `include_tools` and `pin_policy` of an MCP upstream (the pins themselves are read by the
/// loader, from the vendored tool list).
fn parse_mcp_tools(cx: &mut Cx, f: &mut Fields) -> McpTools {
    let at = f.at("include_tools");
    let include = f.string_list(cx, "include_tools").map(|list| {
        let mut out: Vec<String> = Vec::with_capacity(list.len());
        for (i, name) in list.iter().enumerate() {
            let here = pointer_join(&at, &i.to_string());
            if name.trim().is_empty() {
                cx.error(&here, "a tool name must not be empty", None);
            } else if out.iter().any(|o| o == name) {
                cx.error(
                    &here,
                    format!("tool `{name}` is listed twice"),
                    Some("remove the duplicate".into()),
                );
            } else {
                out.push(name.to_string());
            }
        }
        if list.is_empty() {
            cx.error(
                &at,
                "`include_tools` is empty, which would expose no tool",
                Some("list the tools to expose, or leave the field out to expose every vendored tool".into()),
            );
        }
        out
    });
    let policy = match f.string(cx, "pin_policy") {
        None | Some("refuse") => PinPolicy::Refuse,
        Some("warn") => PinPolicy::Warn,
        Some(other) => {
            cx.error(
                &f.at("pin_policy"),
                format!(
                    "unknown pin_policy `{other}`{}",
                    did_you_mean(other, ["refuse", "warn"])
                ),
                Some("use \"refuse\" (a changed tool is not callable; the default) or \"warn\" (it stays callable and the change is logged)".into()),
            );
            PinPolicy::Refuse
        }
    };
    let writes = super::writes::parse_allow_writes(cx, f, include.as_deref(), "include_tools");
    McpTools {
        include,
        policy,
        writes,
        ..McpTools::default()
    }
}
