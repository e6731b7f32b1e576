//! Settings shared by HTTP-based upstreams: URLs, auth emitters, static headers, timeouts, caps.

use serde_json::Value;

use super::fields::{Cx, Fields};
use crate::diagnostic::pointer_join;
use crate::headers::{is_protocol_controlled, is_secret_bearing, is_token};
use crate::plan::{
    ApprovalWebhook, AuthEmitter, Backoff, CredentialBinding, HttpSettings, SchemeHint,
};
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

/// Reads `approval_webhook`: `url`, `auth`, `static_headers`, the `http://` opt-ins and
/// `connect_timeout_ms` (a request waits as long as the approval may; no other timeout applies).
pub(super) fn parse_webhook(
    cx: &mut Cx,
    value: &Value,
    pointer: &str,
    credentials: &[CredentialBinding],
) -> Option<ApprovalWebhook> {
    let mut f = Fields::new(cx, value, pointer, "the approval webhook")?;
    let auth = match f.get("auth") {
        Some(v) => parse_auth(cx, v, &f.at("auth"), credentials),
        None => Vec::new(),
    };
    let static_headers = parse_static_headers(cx, &mut f, &auth);
    refuse_per_caller(
        cx,
        &f.at("auth"),
        &auth,
        credentials,
        "the approval webhook",
    );
    let http = HttpSettings {
        auth,
        static_headers,
        allow_insecure_http: f.bool(cx, "allow_insecure_http"),
        allow_insecure_auth: f.bool(cx, "allow_insecure_auth"),
        connect_timeout_ms: f.positive(cx, "connect_timeout_ms", DEFAULT_CONNECT_TIMEOUT_MS),
        request_timeout_ms: DEFAULT_REQUEST_TIMEOUT_MS,
        max_response_bytes: WEBHOOK_MAX_RESPONSE_BYTES,
        pool_size: 1,
        backoff: Backoff {
            max_retries: 0,
            initial_ms: DEFAULT_BACKOFF_INITIAL_MS,
            max_ms: DEFAULT_BACKOFF_MAX_MS,
        },
    };
    let url = f.required_string(
        cx,
        "url",
        "set \"url\" to the https:// endpoint that answers approvals",
    );
    let ok = url.is_some_and(|u| check_url(cx, &f.at("url"), "url", u, &http));
    f.finish(cx);
    Some(ApprovalWebhook {
        url: url.filter(|_| ok)?.to_string(),
        http,
    })
}

/// The largest answer an approval webhook may give.
const WEBHOOK_MAX_RESPONSE_BYTES: u64 = 64 * 1024;

/// What an upstream's URLs are checked against: its opt-ins, and whether it sends credentials
/// (which is what `allow_insecure_auth` is about).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UrlOptIns {
    /// `allow_insecure_http`: `http://` is allowed.
    pub allow_insecure_http: bool,
    /// `allow_insecure_auth`: credentials may be sent over `http://`.
    pub allow_insecure_auth: bool,
    /// The upstream has `auth`: its requests carry credentials.
    pub sends_credentials: bool,
}

impl UrlOptIns {
    /// The opt-ins of an upstream with these HTTP settings.
    pub fn of(http: &HttpSettings) -> Self {
        UrlOptIns {
            allow_insecure_http: http.allow_insecure_http,
            allow_insecure_auth: http.allow_insecure_auth,
            sends_credentials: !http.auth.is_empty(),
        }
    }
}

/// One reason an upstream URL is refused: the message and the fix of its diagnostic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlProblem {
    /// What is wrong, naming the field.
    pub message: String,
    /// How to fix it.
    pub help: Option<String>,
}

/// The rule for a URL an upstream is reached at (`field` is the config field it is written in,
/// `url`, `base_url` or `schema_url`, named in the messages): absolute with a host, no
/// `user:password@`, and https, or http only with `allow_insecure_http` (and, when the upstream
/// sends credentials, `allow_insecure_auth` too). Every problem is returned; none means the URL
/// is taken. The config compiler and a URL override at start-up both check with it.
pub fn check_upstream_url(field: &str, url: &str, opt_ins: UrlOptIns) -> Vec<UrlProblem> {
    let problem = |message: String, help: Option<&str>| UrlProblem {
        message,
        help: help.map(str::to_string),
    };
    let parsed = match url::Url::parse(url) {
        Ok(u) => u,
        Err(e) => {
            return vec![problem(
                format!("`{field}` is not a valid absolute URL ({e}): `{url}`"),
                Some("write it as https://host[:port][/path]"),
            )];
        }
    };
    let mut problems = Vec::new();
    if parsed.host_str().is_none_or(str::is_empty) {
        problems.push(problem(format!("`{field}` has no host: `{url}`"), None));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        problems.push(problem(
            format!("`{field}` embeds credentials in the URL"),
            Some("remove user:password@ from the URL and use `auth` with a credential binding"),
        ));
    }
    match parsed.scheme() {
        "https" => {}
        "http" if !opt_ins.allow_insecure_http => problems.push(problem(
            format!("`{field}` uses http:// without allow_insecure_http"),
            Some(
                "use https://, or set \"allow_insecure_http\": true for a local development server",
            ),
        )),
        "http" if opt_ins.sends_credentials && !opt_ins.allow_insecure_auth => {
            problems.push(problem(
                format!("`{field}` uses http:// with auth but allow_insecure_auth is not true"),
                Some(
                    "credentials would travel in clear text: use https://, or also set \"allow_insecure_auth\": true",
                ),
            ))
        }
        "http" => {}
        other => problems.push(problem(
            format!("`{field}` uses unsupported URL scheme `{other}`"),
            Some("use https://"),
        )),
    }
    problems
}

/// [`check_upstream_url`] for an OpenAPI `base_url`, which operation paths are appended to, so
/// it has no query string or fragment either.
pub fn check_base_url(url: &str, opt_ins: UrlOptIns) -> Vec<UrlProblem> {
    let problems = check_upstream_url("base_url", url, opt_ins);
    if !problems.is_empty() {
        return problems;
    }
    match url::Url::parse(url) {
        Ok(u) if u.query().is_some() || u.fragment().is_some() => vec![UrlProblem {
            message: "`base_url` must not have a query string or fragment".into(),
            help: Some("keep only scheme, host, port and an optional path prefix".into()),
        }],
        _ => Vec::new(),
    }
}

/// Reports each problem of a URL at `pointer`; true when there is none.
pub(super) fn report_url(cx: &mut Cx, pointer: &str, problems: Vec<UrlProblem>) -> bool {
    let ok = problems.is_empty();
    for p in problems {
        cx.error(pointer, p.message, p.help);
    }
    ok
}

/// Checks a URL the upstream talks to: see [`check_upstream_url`].
pub(super) fn check_url(
    cx: &mut Cx,
    pointer: &str,
    field: &str,
    raw: &str,
    http: &HttpSettings,
) -> bool {
    report_url(
        cx,
        pointer,
        check_upstream_url(field, raw, UrlOptIns::of(http)),
    )
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

/// Refuses credentials that depend on the caller where one connection serves every caller (an
/// MCP server's session, the approval webhook): only an OpenAPI request is made for one caller.
pub(super) fn refuse_per_caller(
    cx: &mut Cx,
    pointer: &str,
    auth: &[AuthEmitter],
    credentials: &[CredentialBinding],
    what: &str,
) {
    for (i, e) in auth.iter().enumerate() {
        let per_caller = credentials
            .iter()
            .any(|c| c.name == e.binding() && c.source.is_per_caller());
        if per_caller {
            cx.error(
                &pointer_join(&pointer_join(pointer, &i.to_string()), "binding"),
                format!(
                    "credential `{}` depends on the caller, but {what} serves every caller over \
                     one connection",
                    e.binding()
                ),
                Some(
                    "use it on an upstream (OpenAPI, or MCP over HTTP), whose requests are made \
                     per caller"
                        .into(),
                ),
            );
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    const NONE: UrlOptIns = UrlOptIns {
        allow_insecure_http: false,
        allow_insecure_auth: false,
        sends_credentials: false,
    };

    fn messages(field: &str, url: &str, opt_ins: UrlOptIns) -> Vec<String> {
        check_upstream_url(field, url, opt_ins)
            .into_iter()
            .map(|p| p.message)
            .collect()
    }

    #[test]
    fn http_needs_allow_insecure_http() {
        let url = "http://localhost:8080/mcp";
        assert_eq!(
            messages("url", url, NONE),
            ["`url` uses http:// without allow_insecure_http"]
        );
        let http = UrlOptIns {
            allow_insecure_http: true,
            ..NONE
        };
        assert_eq!(messages("url", url, http), Vec::<String>::new());
        assert_eq!(
            messages("url", "https://api.example.com", NONE),
            Vec::<String>::new()
        );
    }

    /// Credentials over http need the second opt-in as well; without credentials, or over
    /// https, it is not asked for.
    #[test]
    fn credentials_over_http_need_allow_insecure_auth() {
        let url = "http://localhost:8080";
        let with_auth = UrlOptIns {
            allow_insecure_http: true,
            sends_credentials: true,
            ..NONE
        };
        let problems = check_upstream_url("base_url", url, with_auth);
        assert_eq!(
            problems,
            [UrlProblem {
                message: "`base_url` uses http:// with auth but allow_insecure_auth is not true"
                    .into(),
                help: Some(
                    "credentials would travel in clear text: use https://, or also set \
                     \"allow_insecure_auth\": true"
                        .into()
                ),
            }]
        );
        let both = UrlOptIns {
            allow_insecure_auth: true,
            ..with_auth
        };
        assert!(check_upstream_url("base_url", url, both).is_empty());
        // allow_insecure_auth alone does not open http.
        let auth_only = UrlOptIns {
            allow_insecure_auth: true,
            sends_credentials: true,
            ..NONE
        };
        assert_eq!(
            messages("base_url", url, auth_only),
            ["`base_url` uses http:// without allow_insecure_http"]
        );
        let https = UrlOptIns {
            sends_credentials: true,
            ..NONE
        };
        assert!(check_upstream_url("base_url", "https://api.example.com", https).is_empty());
    }

    #[test]
    fn userinfo_is_refused_whatever_the_opt_ins() {
        let all = UrlOptIns {
            allow_insecure_http: true,
            allow_insecure_auth: true,
            sends_credentials: false,
        };
        for url in ["https://u:p@api.example.com", "https://u@api.example.com"] {
            assert_eq!(
                messages("url", url, all),
                ["`url` embeds credentials in the URL"],
                "{url}"
            );
        }
        // Every problem at once: userinfo and plain http.
        assert_eq!(
            messages("url", "http://u:p@api.example.com", NONE),
            [
                "`url` embeds credentials in the URL",
                "`url` uses http:// without allow_insecure_http"
            ]
        );
    }

    #[test]
    fn not_a_url_and_other_schemes_are_refused() {
        assert_eq!(
            messages("url", "api.example.com", NONE),
            ["`url` is not a valid absolute URL (relative URL without a base): `api.example.com`"]
        );
        assert_eq!(
            messages("schema_url", "ftp://api.example.com/x", NONE),
            ["`schema_url` uses unsupported URL scheme `ftp`"]
        );
    }

    #[test]
    fn a_base_url_has_no_query_or_fragment() {
        assert!(check_base_url("https://api.example.com/v1", NONE).is_empty());
        for url in [
            "https://api.example.com/v1?x=1",
            "https://api.example.com/v1#top",
        ] {
            let problems = check_base_url(url, NONE);
            assert_eq!(problems.len(), 1, "{url}");
            assert_eq!(
                problems[0].message,
                "`base_url` must not have a query string or fragment"
            );
        }
        // The URL rule first: a refused URL is not also judged by its shape.
        assert_eq!(
            check_base_url("http://api.example.com/v1?x=1", NONE)[0].message,
            "`base_url` uses http:// without allow_insecure_http"
        );
    }
}
