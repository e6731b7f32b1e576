//! Settings shared by HTTP-based upstreams: URLs, auth emitters, static headers, timeouts, caps.

use serde_json::Value;

use super::fields::{Cx, Fields};
use crate::diagnostic::pointer_join;
use crate::headers::{is_protocol_controlled, is_secret_bearing, is_token};
use crate::plan::{AuthEmitter, Backoff, CredentialBinding, HttpSettings, SchemeHint};
use crate::suggest::did_you_mean;

/// Defaults, documented in docs/configuration.md.
pub(super) const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 30_000;
pub(super) const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 5_000;
pub(super) const DEFAULT_MAX_RESPONSE_BYTES: u64 = 2 * 1024 * 1024;
const DEFAULT_POOL_SIZE: u64 = 8;
const DEFAULT_BACKOFF_INITIAL_MS: u64 = 100;
const DEFAULT_BACKOFF_MAX_MS: u64 = 2_000;

/// Reads the shared HTTP fields of an upstream entry.
pub(super) fn parse_settings(
    cx: &mut Cx,
    f: &mut Fields,
    credentials: &[CredentialBinding],
) -> HttpSettings {
    let auth = match f.get("auth") {
        Some(v) => parse_auth(cx, v, &f.at("auth"), credentials),
        None => Vec::new(),
    };
    let static_headers = parse_static_headers(cx, f, &auth);
    let allow_insecure_http = f.bool(cx, "allow_insecure_http");
    let allow_insecure_auth = f.bool(cx, "allow_insecure_auth");
    let request_timeout_ms = f.positive(cx, "request_timeout_ms", DEFAULT_REQUEST_TIMEOUT_MS);
    let connect_timeout_ms = f.positive(cx, "connect_timeout_ms", DEFAULT_CONNECT_TIMEOUT_MS);
    let max_response_bytes = f.positive(cx, "max_response_bytes", DEFAULT_MAX_RESPONSE_BYTES);
    // An MCP client holds one Streamable HTTP session over fresh connections (reusing an idle
    // one stalls on delayed ACKs): there is no pool to size, and a silently ignored number would
    // mislead whoever tunes it.
    if f.get("transport").and_then(Value::as_str) == Some("mcp_http")
        && f.get("pool_size").is_some()
    {
        cx.error(
            &f.at("pool_size"),
            "`pool_size` does not apply to an mcp_http upstream: it holds one Streamable HTTP \
             session and keeps no idle connections",
            Some("remove pool_size from this upstream".into()),
        );
    }
    let pool_size = f.positive(cx, "pool_size", DEFAULT_POOL_SIZE);
    let pool_size = u32::try_from(pool_size).unwrap_or_else(|_| {
        cx.error(&f.at("pool_size"), "`pool_size` is too large", None);
        DEFAULT_POOL_SIZE as u32
    });
    let max_retries = f.count(cx, "max_retries", 0);
    let initial_ms = f.positive(cx, "backoff_initial_ms", DEFAULT_BACKOFF_INITIAL_MS);
    let max_ms = f.positive(cx, "backoff_max_ms", DEFAULT_BACKOFF_MAX_MS.max(initial_ms));
    if max_ms < initial_ms {
        cx.error(
            &f.at("backoff_max_ms"),
            format!(
                "`backoff_max_ms` ({max_ms}) is smaller than `backoff_initial_ms` ({initial_ms})"
            ),
            Some("make backoff_max_ms at least backoff_initial_ms".into()),
        );
    }
    if connect_timeout_ms > request_timeout_ms {
        cx.error(
            &f.at("connect_timeout_ms"),
            format!(
                "`connect_timeout_ms` ({connect_timeout_ms}) is longer than `request_timeout_ms` ({request_timeout_ms})"
            ),
            Some("the connect timeout is part of the request timeout; lower it".into()),
        );
    }
    HttpSettings {
        auth,
        static_headers,
        allow_insecure_http,
        allow_insecure_auth,
        request_timeout_ms,
        connect_timeout_ms,
        max_response_bytes,
        pool_size,
        backoff: Backoff {
            max_retries,
            initial_ms,
            max_ms,
        },
    }
}

/// Checks a URL the upstream talks to: https, or http with the opt-ins.
pub(super) fn check_url(
    cx: &mut Cx,
    pointer: &str,
    field: &str,
    raw: &str,
    http: &HttpSettings,
) -> bool {
    let url = match url::Url::parse(raw) {
        Ok(u) => u,
        Err(e) => {
            cx.error(
                pointer,
                format!("`{field}` is not a valid absolute URL ({e}): `{raw}`"),
                Some("write it as https://host[:port][/path]".into()),
            );
            return false;
        }
    };
    let mut ok = true;
    if url.host_str().is_none_or(str::is_empty) {
        cx.error(pointer, format!("`{field}` has no host: `{raw}`"), None);
        ok = false;
    }
    if !url.username().is_empty() || url.password().is_some() {
        cx.error(
            pointer,
            format!("`{field}` embeds credentials in the URL"),
            Some(
                "remove user:password@ from the URL and use `auth` with a credential binding"
                    .into(),
            ),
        );
        ok = false;
    }
    match url.scheme() {
        "https" => {}
        "http" => {
            if !http.allow_insecure_http {
                cx.error(
                    pointer,
                    format!("`{field}` uses http:// without allow_insecure_http"),
                    Some("use https://, or set \"allow_insecure_http\": true for a local development server".into()),
                );
                ok = false;
            } else if !http.auth.is_empty() && !http.allow_insecure_auth {
                cx.error(
                    pointer,
                    format!("`{field}` uses http:// with auth but allow_insecure_auth is not true"),
                    Some(
                        "credentials would travel in clear text: use https://, or also set \"allow_insecure_auth\": true"
                            .into(),
                    ),
                );
                ok = false;
            }
        }
        other => {
            cx.error(
                pointer,
                format!("`{field}` uses unsupported URL scheme `{other}`"),
                Some("use https://".into()),
            );
            ok = false;
        }
    }
    ok
}

fn parse_auth(
    cx: &mut Cx,
    value: &Value,
    pointer: &str,
    credentials: &[CredentialBinding],
) -> Vec<AuthEmitter> {
    let Value::Array(items) = value else {
        cx.wrong_type(
            pointer,
            "`auth`",
            "a list of emitters",
            value,
            Some("e.g. \"auth\": [{\"scheme\": \"bearer\", \"binding\": \"my-token\"}]".into()),
        );
        return Vec::new();
    };
    let mut out: Vec<AuthEmitter> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = pointer_join(pointer, &i.to_string());
        let Some(mut f) = Fields::new(cx, item, &at, "an auth emitter") else {
            continue;
        };
        let scheme = f.required_string(
            cx,
            "scheme",
            "set \"scheme\" to \"bearer\", \"basic\" or \"custom_header\"",
        );
        let binding = f.required_string(cx, "binding", "name a binding from `credentials`");
        let header = f.string(cx, "header");
        let binding_ok =
            binding.is_some_and(|b| check_binding(cx, &f.at("binding"), b, credentials));
        let emitter = match (scheme, binding) {
            (Some("bearer" | "basic"), _) if header.is_some() => {
                cx.error(
                    &f.at("header"),
                    "`header` is only allowed with scheme \"custom_header\"",
                    Some("bearer and basic always set Authorization; remove `header`".into()),
                );
                None
            }
            (Some("bearer"), Some(b)) => Some(AuthEmitter::Bearer { binding: b.into() }),
            (Some("basic"), Some(b)) => Some(AuthEmitter::Basic { binding: b.into() }),
            (Some("custom_header"), Some(b)) => match header {
                None => {
                    cx.error(
                        &at,
                        "a custom_header emitter is missing required field `header`",
                        Some("name the header, e.g. \"header\": \"X-Api-Token\"".into()),
                    );
                    None
                }
                Some(h) if check_custom_header(cx, &f.at("header"), h) => {
                    Some(AuthEmitter::CustomHeader {
                        binding: b.into(),
                        header: h.into(),
                    })
                }
                Some(_) => None,
            },
            (Some(other), _) if !matches!(other, "bearer" | "basic" | "custom_header") => {
                cx.error(
                    &f.at("scheme"),
                    format!(
                        "unknown auth scheme `{other}`{}",
                        did_you_mean(other, ["bearer", "basic", "custom_header"])
                    ),
                    Some("use \"bearer\", \"basic\" or \"custom_header\"".into()),
                );
                None
            }
            _ => None,
        };
        f.finish(cx);
        let Some(emitter) = emitter else { continue };
        if binding_ok {
            check_scheme_hint(cx, &at, &emitter, credentials);
        }
        if let Some(prev) = out.iter().find(|e| e.header() == emitter.header()) {
            cx.error(
                &at,
                format!(
                    "two auth emitters set header `{}` (bindings `{}` and `{}`)",
                    emitter.header(),
                    prev.binding(),
                    emitter.binding()
                ),
                Some("keep one emitter per header".into()),
            );
            continue;
        }
        out.push(emitter);
    }
    out
}

fn check_binding(
    cx: &mut Cx,
    pointer: &str,
    binding: &str,
    credentials: &[CredentialBinding],
) -> bool {
    if credentials.iter().any(|c| c.name == binding) {
        return true;
    }
    let names: Vec<&str> = credentials.iter().map(|c| c.name.as_str()).collect();
    cx.error(
        pointer,
        format!(
            "references unknown credential binding `{binding}`{}",
            did_you_mean(binding, names.iter().copied())
        ),
        Some(if names.is_empty() {
            "define it under top-level \"credentials\"".to_string()
        } else {
            format!(
                "define it under top-level \"credentials\" (defined: {})",
                names.join(", ")
            )
        }),
    );
    false
}

fn check_custom_header(cx: &mut Cx, pointer: &str, header: &str) -> bool {
    if !is_token(header) {
        cx.error(
            pointer,
            format!("custom_header name `{header}` is not a valid HTTP header name"),
            Some(
                "use an RFC 7230 token: letters, digits and !#$%&'*+-.^_`|~, no spaces or colons"
                    .into(),
            ),
        );
        return false;
    }
    let lower = header.to_ascii_lowercase();
    if matches!(lower.as_str(), "authorization" | "proxy-authorization") {
        cx.error(
            pointer,
            format!("custom_header cannot set `{header}`"),
            Some("use scheme \"bearer\" or \"basic\" for the Authorization header".into()),
        );
        return false;
    }
    if lower == "set-cookie" || is_protocol_controlled(&lower) {
        cx.error(
            pointer,
            format!("custom_header cannot set protocol-controlled header `{header}`"),
            Some(
                "ptc sets this header itself; pick the header your API reads the credential from"
                    .into(),
            ),
        );
        return false;
    }
    true
}

fn check_scheme_hint(
    cx: &mut Cx,
    pointer: &str,
    emitter: &AuthEmitter,
    credentials: &[CredentialBinding],
) {
    let Some(binding) = credentials.iter().find(|c| c.name == emitter.binding()) else {
        return;
    };
    let Some(hint) = binding.scheme_hint else {
        return;
    };
    let (scheme, compatible) = match emitter {
        AuthEmitter::Bearer { .. } => ("bearer", hint == SchemeHint::Bearer),
        AuthEmitter::Basic { .. } => ("basic", hint == SchemeHint::Basic),
        AuthEmitter::CustomHeader { .. } => ("custom_header", hint == SchemeHint::Raw),
    };
    if !compatible {
        let hint_name = match hint {
            SchemeHint::Bearer => "bearer",
            SchemeHint::Basic => "basic",
            SchemeHint::Raw => "raw",
        };
        cx.error(
            pointer,
            format!(
                "auth scheme `{scheme}` uses binding `{}` whose scheme_hint is `{hint_name}`",
                binding.name
            ),
            Some(format!(
                "use a binding meant for {scheme} (scheme_hint \"{}\"), or fix the binding's scheme_hint",
                match emitter {
                    AuthEmitter::Bearer { .. } => "bearer",
                    AuthEmitter::Basic { .. } => "basic",
                    AuthEmitter::CustomHeader { .. } => "raw",
                }
            )),
        );
    }
}

fn parse_static_headers(
    cx: &mut Cx,
    f: &mut Fields,
    auth: &[AuthEmitter],
) -> Vec<(String, String)> {
    let Some(entries) = f.string_map(cx, "static_headers") else {
        return Vec::new();
    };
    let base = f.at("static_headers");
    let mut out: Vec<(String, String)> = Vec::new();
    for (name, value) in entries {
        let at = pointer_join(&base, name);
        let lower = name.to_ascii_lowercase();
        if !is_token(name) {
            cx.error(
                &at,
                format!("static header name `{name}` is not a valid HTTP header name"),
                Some("use an RFC 7230 token: letters, digits and !#$%&'*+-.^_`|~, no spaces or colons".into()),
            );
            continue;
        }
        if is_secret_bearing(&lower) {
            cx.error(
                &at,
                format!(
                    "static header `{name}` carries a secret and is not allowed in static_headers"
                ),
                Some(
                    "move the secret into a credential binding and reference it from `auth` \
                     (scheme bearer, basic or custom_header)"
                        .into(),
                ),
            );
            continue;
        }
        if is_protocol_controlled(&lower) {
            cx.error(
                &at,
                format!("static header `{name}` is protocol-controlled; ptc sets it itself"),
                Some("remove it from static_headers".into()),
            );
            continue;
        }
        if value.contains(['\r', '\n']) {
            cx.error(
                &at,
                format!("static header `{name}` value contains a line break"),
                None,
            );
            continue;
        }
        if out.iter().any(|(n, _)| *n == lower) {
            cx.error(
                &at,
                format!("static header `{name}` is set twice (header names ignore case)"),
                Some("keep one".into()),
            );
            continue;
        }
        if auth.iter().any(|e| e.header() == lower) {
            cx.error(
                &at,
                format!("header `{name}` is set by both `auth` and `static_headers`"),
                Some("remove it from static_headers".into()),
            );
            continue;
        }
        out.push((lower, value.to_string()));
    }
    out.sort();
    out
}
