//! `oauth` of an `mcp_http` upstream: how ptc obtains access tokens under the MCP authorization
//! spec (OAuth 2.1): the grant, who ptc is at the authorization server, the scopes and the
//! redirect URI.

use serde_json::Value;

use super::credentials::https_or_loopback;
use super::fields::{Cx, Fields};
use crate::plan::{AuthEmitter, CredentialBinding, McpOAuthPlan, OAuthClient, OAuthGrant};
use crate::suggest::did_you_mean;

const GRANTS: [&str; 2] = ["authorization_code", "client_credentials"];

/// Parses `oauth` at `pointer`. `auth` is the upstream's other emitters (at `auth_pointer`):
/// none of them may send the `Authorization` header the access token goes in.
pub(super) fn parse(
    cx: &mut Cx,
    value: &Value,
    pointer: &str,
    credentials: &[CredentialBinding],
    (auth, auth_pointer): (&[AuthEmitter], &str),
) -> Option<McpOAuthPlan> {
    let mut f = Fields::new(cx, value, pointer, "`oauth`")?;
    let grant = match f.required_string(
        cx,
        "grant",
        "set \"grant\" to \"authorization_code\" (a person consents) or \"client_credentials\" \
         (the deployment's own identity)",
    ) {
        Some("authorization_code") => Some(OAuthGrant::AuthorizationCode),
        Some("client_credentials") => Some(OAuthGrant::ClientCredentials),
        Some(other) => {
            cx.error(
                &f.at("grant"),
                format!(
                    "unknown grant `{other}`{}",
                    did_you_mean(other, GRANTS.iter().copied())
                ),
                Some(format!("use one of: {}", GRANTS.join(", "))),
            );
            None
        }
        None => None,
    };
    let client_id = non_empty(cx, &mut f, "client_id");
    let client_secret = f.string(cx, "client_secret");
    let metadata_url = f.string(cx, "client_metadata_url");
    let client_name = non_empty(cx, &mut f, "client_name");
    let redirect_uri = f.string(cx, "redirect_uri");
    let scopes = f.string_list(cx, "scopes").unwrap_or_default();
    for (i, scope) in scopes.iter().enumerate() {
        if !is_scope_token(scope) {
            cx.error(
                &format!("{}/{i}", f.at("scopes")),
                format!(
                    "scope `{scope}` is not one scope token: printable ASCII, without spaces, \
                     `\"` or `\\`"
                ),
                Some("give each scope as its own string, e.g. [\"repo\", \"read:org\"]".into()),
            );
        }
    }
    f.finish(cx);

    if let Some(secret) = client_secret {
        check_secret(cx, &format!("{pointer}/client_secret"), secret, credentials);
        if client_id.is_none() {
            cx.error(
                &format!("{pointer}/client_secret"),
                "`client_secret` needs the `client_id` it belongs to",
                Some("add the client id the authorization server registered".into()),
            );
        }
    }
    if client_id.is_some() && client_name.is_some() {
        cx.error(
            &format!("{pointer}/client_name"),
            "`client_name` is what ptc registers itself as; the client `client_id` names is \
             registered already",
            Some("remove client_name, or client_id to have ptc register itself".into()),
        );
    }
    if client_id.is_some() && metadata_url.is_some() {
        cx.error(
            &format!("{pointer}/client_metadata_url"),
            "`client_id` and `client_metadata_url` both name the client: give one",
            Some(
                "keep client_id for a client registered beforehand, or client_metadata_url for \
                 a Client ID Metadata Document"
                    .into(),
            ),
        );
    }
    if let Some(url) = metadata_url
        && let Some(problem) = metadata_url_problem(url)
    {
        cx.error(&format!("{pointer}/client_metadata_url"), problem, None);
    }
    match grant {
        Some(OAuthGrant::ClientCredentials) => {
            // A secret without an id is reported above, at the secret.
            if client_secret.is_none() {
                cx.error(
                    pointer,
                    "the client_credentials grant needs `client_id` and `client_secret`: the \
                     deployment authenticates as a registered confidential client",
                    Some(
                        "e.g. \"client_id\": \"ptc-prod\", \"client_secret\": \"linear-client\" \
                         (a credential binding)"
                            .into(),
                    ),
                );
            }
            if redirect_uri.is_some() {
                cx.error(
                    &format!("{pointer}/redirect_uri"),
                    "`redirect_uri` is for the authorization_code grant: client_credentials \
                     sends nobody to a browser",
                    Some("remove redirect_uri".into()),
                );
            }
        }
        Some(OAuthGrant::AuthorizationCode) => match redirect_uri {
            None => cx.error(
                pointer,
                "the authorization_code grant needs `redirect_uri`: where the authorization \
                 server sends the person back to ptc",
                Some(
                    "use a loopback URI, which `ptc eval`, `repl`, `catalog` and `vendor` listen \
                     on themselves, e.g. \"http://127.0.0.1:8765/oauth/callback\""
                        .into(),
                ),
            ),
            Some(uri) => {
                if let Some(problem) = redirect_uri_problem(uri) {
                    cx.error(&format!("{pointer}/redirect_uri"), problem, None);
                }
            }
        },
        None => {}
    }
    for (i, emitter) in auth.iter().enumerate() {
        if matches!(
            emitter,
            AuthEmitter::Bearer { .. } | AuthEmitter::Basic { .. }
        ) {
            cx.error(
                &format!("{auth_pointer}/{i}"),
                "this emitter sets the `Authorization` header, which carries the OAuth access \
                 token",
                Some("remove it, or remove `oauth`; a custom_header emitter may stay".into()),
            );
        }
    }

    let name = client_name.unwrap_or(McpOAuthPlan::DEFAULT_CLIENT_NAME);
    let client = match (client_id, metadata_url) {
        (Some(id), _) => OAuthClient::Registered {
            client_id: id.to_string(),
            client_secret: client_secret.map(str::to_string),
        },
        (None, Some(url)) => OAuthClient::MetadataDocument {
            url: url.to_string(),
            client_name: name.to_string(),
        },
        (None, None) => OAuthClient::Dynamic {
            client_name: name.to_string(),
        },
    };
    Some(McpOAuthPlan {
        grant: grant?,
        client,
        scopes: scopes.into_iter().map(str::to_string).collect(),
        redirect_uri: redirect_uri.map(str::to_string),
    })
}

/// An optional string field that, when given, must not be blank.
fn non_empty<'v>(cx: &mut Cx, f: &mut Fields<'v>, key: &'static str) -> Option<&'v str> {
    let value = f.string(cx, key)?;
    if value.trim().is_empty() {
        cx.error(&f.at(key), format!("`{key}` must not be empty"), None);
    }
    Some(value)
}

/// RFC 6749's `scope-token`: one or more printable ASCII characters other than space, `"` and
/// `\`.
fn is_scope_token(scope: &str) -> bool {
    !scope.is_empty()
        && scope
            .chars()
            .all(|c| matches!(c, '\x21' | '\x23'..='\x5b' | '\x5d'..='\x7e'))
}

/// The client secret is the deployment's own: a binding read the usual way.
fn check_secret(cx: &mut Cx, at: &str, secret: &str, credentials: &[CredentialBinding]) {
    match credentials.iter().find(|c| c.name == secret) {
        None => cx.error(
            at,
            format!(
                "names unknown credential binding `{secret}`{}",
                did_you_mean(secret, credentials.iter().map(|c| c.name.as_str()))
            ),
            Some(
                "define the client secret as a binding, e.g. {\"source\": \"file\", \"path\": \
                 \"/run/secrets/linear-client\"}"
                    .into(),
            ),
        ),
        Some(c) if c.source.is_per_caller() => cx.error(
            at,
            format!("`{secret}` depends on the caller; the client secret is the deployment's own"),
            Some("read it from an env, file, exec or literal binding".into()),
        ),
        Some(_) => {}
    }
}

/// A Client ID Metadata Document's URL is the client id: https with a path (the spec's rule).
fn metadata_url_problem(raw: &str) -> Option<String> {
    match url::Url::parse(raw) {
        Err(_) => Some(format!("`client_metadata_url` `{raw}` is not a URL")),
        // (An https URL's path is never empty: `/` is the root.)
        Ok(url) if url.scheme() != "https" || url.path() == "/" => Some(format!(
            "`client_metadata_url` `{raw}` must be an https URL with a path, e.g. \
             https://ptc.example.com/oauth/client.json: it is the client id"
        )),
        Ok(url)
            if url.fragment().is_some()
                || !url.username().is_empty()
                || url.password().is_some() =>
        {
            Some(format!(
                "`client_metadata_url` `{raw}` must not hold a fragment or credentials"
            ))
        }
        Ok(_) => None,
    }
}

/// The code travels to the redirect URI: https, or http on a loopback address.
fn redirect_uri_problem(raw: &str) -> Option<String> {
    match url::Url::parse(raw) {
        Err(_) => Some(format!("`redirect_uri` `{raw}` is not a URL")),
        Ok(url) if !https_or_loopback(&url) => Some(format!(
            "`redirect_uri` `{raw}` must use https:// (http:// only on a loopback address): \
             the authorization code travels to it"
        )),
        Ok(url) if url.fragment().is_some() => {
            Some(format!("`redirect_uri` `{raw}` must not hold a fragment"))
        }
        Ok(_) => None,
    }
}
