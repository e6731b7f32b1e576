//! `allow_writes` (both upstream kinds) and `idempotency_header` (OpenAPI): the operator's
//! allow-list of tools that are not reads. Whether a listed name really is a write is checked
//! where the tool's effect is known (the OpenAPI compiler, the pins), by
//! [`crate::effects::classify`].

use std::collections::BTreeMap;

use super::fields::{Cx, Fields};
use crate::diagnostic::pointer_join;
use crate::effects::{Approval, Effect, WriteGrant};
use crate::plan::AuthEmitter;
use crate::suggest::did_you_mean;

/// Reads `allow_writes`: tool (or operationId) → grant. `known` are the names the upstream
/// exposes when the config lists them (`include_operations`, `include_tools`); a grant for
/// another name is an error.
pub(super) fn parse_allow_writes(
    cx: &mut Cx,
    f: &mut Fields,
    known: Option<&[String]>,
    list_field: &str,
) -> BTreeMap<String, WriteGrant> {
    let Some(value) = f.get("allow_writes") else {
        return BTreeMap::new();
    };
    let at = f.at("allow_writes");
    let Some(map) = cx.object(
        value,
        &at,
        "`allow_writes`",
        "map each write's name to {} or {\"approval\": \"always\"|\"none\", \"effect\": \"write\"|\"safe_query\"}",
    ) else {
        return BTreeMap::new();
    };
    let mut out = BTreeMap::new();
    for (name, entry) in map {
        let here = pointer_join(&at, name);
        if let Some(known) = known
            && !known.contains(name)
        {
            cx.error(
                &here,
                format!(
                    "allow_writes names `{name}`, which is not in {list_field}{}",
                    did_you_mean(name, known.iter().map(String::as_str))
                ),
                Some(format!(
                    "add `{name}` to {list_field}, or remove it from allow_writes"
                )),
            );
        }
        let Some(mut g) = Fields::new(cx, entry, &here, "an allow_writes entry") else {
            continue;
        };
        let effect = match g.string(cx, "effect") {
            None | Some("write") => Effect::Write,
            Some("safe_query") => Effect::SafeQuery,
            Some(other) => {
                cx.error(
                    &g.at("effect"),
                    format!(
                        "unknown effect `{other}`{}",
                        did_you_mean(other, ["write", "safe_query"])
                    ),
                    Some(
                        "use \"write\" (changes the world; the default) or \"safe_query\" (a POST \
                         that only queries)"
                            .into(),
                    ),
                );
                Effect::Write
            }
        };
        let mut grant = WriteGrant::with_default_approval(effect);
        match g.string(cx, "approval") {
            None => {}
            Some("always") => grant.approval = Approval::Always,
            Some("none") => grant.approval = Approval::None,
            Some(other) => cx.error(
                &g.at("approval"),
                format!(
                    "unknown approval `{other}`{}",
                    did_you_mean(other, ["always", "none"])
                ),
                Some(
                    "use \"always\" (a person approves each call; the default for writes) or \
                     \"none\""
                        .into(),
                ),
            ),
        }
        g.finish(cx);
        out.insert(name.clone(), grant);
    }
    out
}

/// Reads `idempotency_header`: the request header that carries a write's idempotency key.
pub(super) fn parse_idempotency_header(
    cx: &mut Cx,
    f: &mut Fields,
    auth: &[AuthEmitter],
    static_headers: &[(String, String)],
) -> Option<String> {
    let name = f.string(cx, "idempotency_header")?;
    let at = f.at("idempotency_header");
    let lower = name.to_ascii_lowercase();
    let problem = if !crate::headers::is_token(name) {
        Some(format!("`{name}` is not a valid header name"))
    } else if crate::headers::is_secret_bearing(name)
        || crate::headers::is_protocol_controlled(name)
    {
        Some(format!(
            "`{name}` is a header ptc or `auth` sets; it cannot carry the key"
        ))
    } else if auth.iter().any(|a| a.header() == lower)
        || static_headers.iter().any(|(h, _)| *h == lower)
    {
        Some(format!(
            "`{name}` is already set by `auth` or `static_headers`"
        ))
    } else {
        None
    };
    match problem {
        Some(message) => {
            cx.error(
                &at,
                format!("idempotency_header {message}"),
                Some(
                    "name the header the API reads idempotency keys from, e.g. \"Idempotency-Key\""
                        .into(),
                ),
            );
            None
        }
        None => Some(name.to_string()),
    }
}
