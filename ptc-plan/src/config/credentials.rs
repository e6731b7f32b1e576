//! `credentials`: named bindings that say where a secret is read from.

use std::path::Path;

use serde_json::Value;

use super::Secrets;
use super::fields::{Cx, Fields};
use crate::diagnostic::pointer_join;
use crate::plan::{
    CredentialBinding, CredentialSource, ExecSource, SchemeHint, TokenExchangeSource,
};
use crate::suggest::did_you_mean;

const SOURCES: [&str; 6] = [
    "env",
    "file",
    "literal",
    "exec",
    "caller_token_exchange",
    "per_caller",
];

pub(super) fn parse_all(
    cx: &mut Cx,
    value: &Value,
    pointer: &str,
    base_dir: &Path,
    secrets: &mut Secrets,
) -> Vec<CredentialBinding> {
    let Some(map) = cx.object(
        value,
        pointer,
        "`credentials`",
        "map each binding name to {\"source\": \"env\"|\"file\"|\"exec\"|\"literal\", ...}",
    ) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, entry) in map {
        let at = pointer_join(pointer, name);
        if !ptc_names::is_identifier(name) {
            cx.error(
                &at,
                format!("credential binding name `{name}` is invalid"),
                Some(format!("use {}", ptc_names::IDENTIFIER_RULE)),
            );
        }
        if let Some(b) = parse_one(cx, name, entry, &at, base_dir, secrets) {
            out.push(b);
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    check_client_secrets(cx, pointer, &out);
    out
}

/// A token exchange's client secret is a binding of its own, read the usual way: not one that
/// depends on the caller (the host authenticates as itself).
fn check_client_secrets(cx: &mut Cx, pointer: &str, bindings: &[CredentialBinding]) {
    for b in bindings {
        let CredentialSource::CallerTokenExchange(x) = &b.source else {
            continue;
        };
        let at = pointer_join(&pointer_join(pointer, &b.name), "client_secret");
        match bindings.iter().find(|c| c.name == x.client_secret) {
            None => {
                let names = bindings.iter().map(|c| c.name.as_str());
                cx.error(
                    &at,
                    format!(
                        "names unknown credential binding `{}`{}",
                        x.client_secret,
                        did_you_mean(&x.client_secret, names)
                    ),
                    Some(
                        "define the host's client secret as a binding of its own, e.g. \
                         {\"source\": \"file\", \"path\": \"/run/secrets/exchange-client\"}"
                            .into(),
                    ),
                );
            }
            Some(c) if c.source.is_per_caller() => cx.error(
                &at,
                format!(
                    "`{}` depends on the caller; the client secret is the host's own",
                    x.client_secret
                ),
                Some("read it from an env, file, exec or literal binding".into()),
            ),
            Some(_) => {}
        }
    }
}

/// `{"source": "caller_token_exchange", "token_endpoint", "audience"?, "resource"?, "scope"?,
/// "client_id", "client_secret"}`.
fn exchange(cx: &mut Cx, f: &mut Fields) -> Option<TokenExchangeSource> {
    let endpoint = f.required_string(
        cx,
        "token_endpoint",
        "give the authorization server's token endpoint, e.g. \"https://auth.example.com/token\"",
    );
    let audience = f.string(cx, "audience").map(str::to_string);
    let resource = f.string(cx, "resource").map(str::to_string);
    let scope = f.string(cx, "scope").map(str::to_string);
    let client_id = f.required_string(cx, "client_id", "give the host's client id");
    let client_secret = f.required_string(
        cx,
        "client_secret",
        "name the binding that holds the host's client secret",
    );
    if audience.is_none() && resource.is_none() {
        cx.error(
            &f.at("audience"),
            "a token exchange needs `audience` or `resource`: the upstream the token is for",
            Some("e.g. \"audience\": \"https://observatory.example.com\"".into()),
        );
    }
    let endpoint = endpoint?;
    if let Some(problem) = endpoint_problem(endpoint) {
        cx.error(&f.at("token_endpoint"), problem, None);
        return None;
    }
    Some(TokenExchangeSource {
        token_endpoint: endpoint.to_string(),
        audience: audience.clone(),
        resource: resource.clone(),
        scope,
        client_id: client_id?.to_string(),
        client_secret: client_secret?.to_string(),
    })
    .filter(|_| audience.is_some() || resource.is_some())
}

/// Whether `url` is safe to send a token to: https, or http on a loopback address (a test or a
/// sidecar). The one rule for token endpoints and OAuth issuers.
pub fn https_or_loopback(url: &url::Url) -> bool {
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d == "localhost",
        None => false,
    };
    url.scheme() == "https" || (url.scheme() == "http" && loopback)
}

/// The caller's token travels to the token endpoint: https, or http on loopback only.
fn endpoint_problem(endpoint: &str) -> Option<String> {
    let Ok(url) = url::Url::parse(endpoint) else {
        return Some(format!("`token_endpoint` `{endpoint}` is not a URL"));
    };
    match https_or_loopback(&url) {
        true => None,
        false => Some(format!(
            "`token_endpoint` `{endpoint}` must use https:// (http:// only on a loopback \
             address): callers' tokens travel to it"
        )),
    }
}

/// `{"source": "per_caller", "files": {"<subject>": "<path>", "*": "<path>"}}`.
fn per_caller(cx: &mut Cx, f: &mut Fields, base_dir: &Path) -> Option<CredentialSource> {
    let at = f.at("files");
    let Some(files) = f.string_map(cx, "files") else {
        cx.error(
            &at,
            "`files` is required: map each caller's subject (or \"*\") to its secret file",
            Some("e.g. \"files\": {\"alice\": \"/run/secrets/alice\", \"*\": \"/run/secrets/others\"}".into()),
        );
        return None;
    };
    if files.is_empty() {
        cx.error(
            &at,
            "`files` is empty: no caller would get a credential",
            None,
        );
        return None;
    }
    Some(CredentialSource::PerCaller {
        files: files
            .into_iter()
            .map(|(who, path)| (who.to_string(), crate::paths::resolve(base_dir, path)))
            .collect(),
    })
}

/// `{"source": "exec", "command", "args", "env", "timeout_ms", "cache_ttl_ms"}`.
fn exec(cx: &mut Cx, f: &mut Fields, base_dir: &Path) -> Option<ExecSource> {
    let command = f.required_string(
        cx,
        "command",
        "give the program's path, e.g. \"command\": \"/usr/local/bin/get-token\"",
    );
    let args: Vec<String> = f
        .string_list(cx, "args")
        .unwrap_or_default()
        .into_iter()
        .map(str::to_string)
        .collect();
    let env: Vec<String> = f
        .string_list(cx, "env")
        .unwrap_or_default()
        .into_iter()
        .map(str::to_string)
        .collect();
    for var in env.iter().filter(|v| !valid_env_name(v)) {
        cx.error(
            &f.at("env"),
            format!("`{var}` is not a valid environment variable name"),
            Some("list the variables the command needs, e.g. [\"HOME\", \"VAULT_ADDR\"]".into()),
        );
    }
    let timeout_ms = f.positive(cx, "timeout_ms", ExecSource::DEFAULT_TIMEOUT_MS);
    if timeout_ms > ExecSource::MAX_TIMEOUT_MS {
        cx.error(
            &f.at("timeout_ms"),
            format!(
                "`timeout_ms` is {timeout_ms}; a credential command may run at most {} ms",
                ExecSource::MAX_TIMEOUT_MS
            ),
            None,
        );
    }
    let cache_ttl_ms = match f.get("cache_ttl_ms") {
        None => ExecSource::DEFAULT_CACHE_TTL_MS,
        Some(v) => match v.as_u64() {
            Some(n) => n,
            None => {
                cx.wrong_type(
                    &f.at("cache_ttl_ms"),
                    "`cache_ttl_ms`",
                    "a whole number of milliseconds (0: run the command on every use)",
                    v,
                    None,
                );
                0
            }
        },
    };
    let command = command?;
    if command.trim().is_empty() {
        cx.error(&f.at("command"), "`command` is empty", None);
        return None;
    }
    // A bare name is a path in the config's folder, never a `PATH` lookup: the config says
    // exactly which program holds the secret.
    Some(ExecSource {
        command: crate::paths::resolve(base_dir, command),
        args,
        env,
        timeout_ms,
        cache_ttl_ms,
    })
}

fn parse_one(
    cx: &mut Cx,
    name: &str,
    entry: &Value,
    at: &str,
    base_dir: &Path,
    secrets: &mut Secrets,
) -> Option<CredentialBinding> {
    let mut f = Fields::new(cx, entry, at, "a credential binding")?;
    let source = f.required_string(
        cx,
        "source",
        "set \"source\" to \"env\", \"file\", \"exec\", \"literal\", \"caller_token_exchange\" or \"per_caller\"",
    );
    let scheme_hint = match f.string(cx, "scheme_hint") {
        None => None,
        Some("bearer") => Some(SchemeHint::Bearer),
        Some("basic") => Some(SchemeHint::Basic),
        Some("raw") => Some(SchemeHint::Raw),
        Some(other) => {
            cx.error(
                &f.at("scheme_hint"),
                format!(
                    "credential `{name}` has unknown scheme_hint `{other}`{}",
                    did_you_mean(other, ["bearer", "basic", "raw"])
                ),
                Some("use \"bearer\", \"basic\" or \"raw\"".into()),
            );
            None
        }
    };
    let parsed = match source? {
        "env" => f
            .required_string(
                cx,
                "var",
                "name the environment variable, e.g. \"var\": \"OBSERVATORY_TOKEN\"",
            )
            .and_then(|var| {
                if valid_env_name(var) {
                    Some(CredentialSource::Env {
                        var: var.to_string(),
                    })
                } else {
                    cx.error(
                        &f.at("var"),
                        format!("`{var}` is not a valid environment variable name"),
                        Some("use letters, digits and `_`, not starting with a digit".into()),
                    );
                    None
                }
            }),
        "file" => f
            .required_string(
                cx,
                "path",
                "give the secret file's path, e.g. \"/run/secrets/token\"",
            )
            .map(|path| CredentialSource::File {
                path: crate::paths::resolve(base_dir, path),
            }),
        "literal" => f
            .required_string(
                cx,
                "value",
                "give the secret as \"value\" (for local development only)",
            )
            .map(|value| {
                secrets.insert(name, value);
                CredentialSource::Literal
            }),
        "exec" => exec(cx, &mut f, base_dir).map(CredentialSource::Exec),
        "caller_token_exchange" => exchange(cx, &mut f).map(CredentialSource::CallerTokenExchange),
        "per_caller" => per_caller(cx, &mut f, base_dir),
        other => {
            cx.error(
                &f.at("source"),
                format!(
                    "credential `{name}` has unknown source `{other}`{}",
                    did_you_mean(other, SOURCES)
                ),
                Some(
                    "use \"env\", \"file\", \"exec\", \"literal\", \"caller_token_exchange\" or \
                     \"per_caller\""
                        .into(),
                ),
            );
            None
        }
    };
    f.finish(cx);
    parsed.map(|source| CredentialBinding {
        name: name.to_string(),
        source,
        scheme_hint,
    })
}

fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
