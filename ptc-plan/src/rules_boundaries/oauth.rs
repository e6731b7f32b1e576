//! `oauth` of an `mcp_http` upstream, rule by rule: each accepted at its edge and refused one
//! past it, with its message at its pointer; and the client ptc is, as the plan carries it.

use super::{parse, problems};
use crate::config::UpstreamKind;
use crate::plan::{McpOAuthPlan, OAuthClient, OAuthGrant};

/// `client` is the deployment's own secret; `caller` and `exchange` depend on the caller.
const CREDENTIALS: &str = r#"{
    "client": {"source": "env", "var": "CLIENT_SECRET"},
    "caller": {"source": "per_caller", "files": {"*": "/run/secrets/shared"}},
    "exchange": {"source": "caller_token_exchange", "token_endpoint": "https://as.example.test/token",
      "audience": "a", "client_id": "ptc", "client_secret": "client"}}"#;

const AT: &str = "/upstreams/linear/oauth";

/// The upstreams object: `linear` over https with `oauth` and the upstream's `extra` fields.
fn upstream_with(oauth: &str, extra: &str) -> String {
    format!(
        r#"{{"linear": {{"transport": "mcp_http", "url": "https://mcp.example.test/mcp",
            "oauth": {oauth}{extra}}}}}"#
    )
}

/// The problems of `linear` with this `oauth`.
fn oauth_problems(oauth: &str) -> Vec<(String, String)> {
    problems(CREDENTIALS, &upstream_with(oauth, ""))
}

/// The one problem of `linear` with this `oauth`, as (pointer, message).
fn one(oauth: &str) -> (String, String) {
    let mut found = oauth_problems(oauth);
    assert_eq!(found.len(), 1, "{oauth}: {found:?}");
    found.remove(0)
}

/// `linear`'s compiled `oauth`, which must load without a problem.
fn plan(oauth: &str) -> McpOAuthPlan {
    plan_of(CREDENTIALS, &upstream_with(oauth, ""))
}

fn plan_of(credentials: &str, upstreams: &str) -> McpOAuthPlan {
    let text = format!(r#"{{"credentials": {credentials}, "upstreams": {upstreams}}}"#);
    let config = parse(&text).unwrap_or_else(|e| panic!("{upstreams}: {e:?}"));
    match &config.upstreams[0].kind {
        UpstreamKind::McpHttp(mcp) => mcp.oauth.clone().expect("oauth is carried"),
        other => panic!("{other:?}"),
    }
}

fn at(field: &str) -> String {
    format!("{AT}/{field}")
}

const CC: &str =
    r#""grant": "client_credentials", "client_id": "ptc-prod", "client_secret": "client""#;
const AC: &str = r#""grant": "authorization_code", "redirect_uri": "http://127.0.0.1:8765/cb""#;

#[test]
fn the_grant_is_required_and_one_of_two() {
    assert_eq!(
        one("{}"),
        (
            AT.to_string(),
            "`oauth` is missing required field `grant`".to_string()
        )
    );
    assert_eq!(
        one(r#"{"grant": " "}"#),
        (at("grant"), "`grant` must not be empty".to_string())
    );
    assert_eq!(
        one(r#"{"grant": 1}"#),
        (
            at("grant"),
            "`grant` must be a string, got a number".to_string()
        )
    );
    assert_eq!(
        one(r#"{"grant": "authorization-code", "redirect_uri": "http://127.0.0.1:1/cb"}"#),
        (
            at("grant"),
            "unknown grant `authorization-code` (did you mean `authorization_code`?)".to_string()
        )
    );
    assert_eq!(
        one(r#"{"grant": "password"}"#),
        (at("grant"), "unknown grant `password`".to_string())
    );
    assert_eq!(
        plan(&format!("{{{CC}}}")).grant,
        OAuthGrant::ClientCredentials
    );
    assert_eq!(
        plan(&format!("{{{AC}}}")).grant,
        OAuthGrant::AuthorizationCode
    );
}

#[test]
fn oauth_is_an_object_of_known_fields_on_mcp_http_only() {
    assert_eq!(
        one(r#""client_credentials""#),
        (
            AT.to_string(),
            "`oauth` must be a JSON object, got a string".to_string()
        )
    );
    assert_eq!(
        one(&format!(r#"{{{CC}, "scope": ["read"]}}"#)),
        (
            at("scope"),
            "unknown field `scope` in `oauth` (did you mean `scopes`?)".to_string()
        )
    );
    // Only mcp_http knows the field.
    for upstream in [
        r#"{"transport": "mcp_stdio", "command": "server""#,
        r#"{"transport": "mcp_http", "url": "https://mcp.example.test/mcp""#,
    ] {
        let text = format!(r#"{{"linear": {upstream}, "oauth": {{{CC}}}}}}}"#);
        let found = problems(CREDENTIALS, &text);
        if upstream.contains("mcp_http") {
            assert_eq!(found, [], "{upstream}");
        } else {
            assert_eq!(found.len(), 1, "{found:?}");
            assert_eq!(found[0].0, AT);
            assert!(
                found[0]
                    .1
                    .starts_with("unknown field `oauth` in an upstream"),
                "{found:?}"
            );
        }
    }
}

#[test]
fn client_credentials_needs_a_registered_confidential_client_and_no_redirect() {
    assert_eq!(
        plan(&format!("{{{CC}}}")).client,
        OAuthClient::Registered {
            client_id: "ptc-prod".into(),
            client_secret: Some("client".into())
        }
    );
    let needs = (
        AT.to_string(),
        "the client_credentials grant needs `client_id` and `client_secret`: the deployment \
         authenticates as a registered confidential client"
            .to_string(),
    );
    assert_eq!(
        one(r#"{"grant": "client_credentials", "client_id": "ptc-prod"}"#),
        needs
    );
    assert_eq!(one(r#"{"grant": "client_credentials"}"#), needs);
    // A secret without its id is one problem, at the secret.
    assert_eq!(
        one(r#"{"grant": "client_credentials", "client_secret": "client"}"#),
        (
            at("client_secret"),
            "`client_secret` needs the `client_id` it belongs to".to_string()
        )
    );
    assert_eq!(
        one(&format!(
            r#"{{{CC}, "redirect_uri": "http://127.0.0.1:8765/cb"}}"#
        )),
        (
            at("redirect_uri"),
            "`redirect_uri` is for the authorization_code grant: client_credentials sends \
             nobody to a browser"
                .to_string()
        )
    );
}

#[test]
fn authorization_code_needs_a_redirect_uri_on_https_or_loopback() {
    assert_eq!(
        one(r#"{"grant": "authorization_code"}"#),
        (
            AT.to_string(),
            "the authorization_code grant needs `redirect_uri`: where the authorization server \
             sends the person back to ptc"
                .to_string()
        )
    );
    let with = |uri: &str| format!(r#"{{"grant": "authorization_code", "redirect_uri": "{uri}"}}"#);
    for ok in [
        "https://ptc.example.com/oauth/callback",
        "https://ptc.example.com:8443/cb?tenant=a",
        "http://127.0.0.1:8765/oauth/callback",
        "http://127.255.255.254/cb",
        "http://localhost:3000/cb",
        "http://[::1]:8765/cb",
    ] {
        assert_eq!(oauth_problems(&with(ok)), [], "{ok}");
        assert_eq!(plan(&with(ok)).redirect_uri.as_deref(), Some(ok));
    }
    for clear in [
        "http://ptc.example.com/oauth/callback",
        "http://128.0.0.1/cb",
        "http://0.0.0.0:8765/cb",
        "http://localhost.example.com/cb",
        "ftp://127.0.0.1/cb",
    ] {
        assert_eq!(
            one(&with(clear)),
            (
                at("redirect_uri"),
                format!(
                    "`redirect_uri` `{clear}` must use https:// (http:// only on a loopback \
                     address): the authorization code travels to it"
                )
            ),
        );
    }
    assert_eq!(
        one(&with("/oauth/callback")),
        (
            at("redirect_uri"),
            "`redirect_uri` `/oauth/callback` is not a URL".to_string()
        )
    );
    for fragment in ["https://ptc.example.com/cb#x", "http://127.0.0.1:8765/cb#"] {
        assert_eq!(
            one(&with(fragment)),
            (
                at("redirect_uri"),
                format!("`redirect_uri` `{fragment}` must not hold a fragment")
            )
        );
    }
}

/// Who ptc is: a registered client, else a metadata document, else a dynamic registration;
/// the name only for the two ptc registers itself with.
#[test]
fn the_client_is_registered_else_a_metadata_document_else_dynamically_registered() {
    assert_eq!(McpOAuthPlan::DEFAULT_CLIENT_NAME, "ptc");
    assert_eq!(
        plan(&format!("{{{AC}}}")).client,
        OAuthClient::Dynamic {
            client_name: "ptc".into()
        }
    );
    assert_eq!(
        plan(&format!(r#"{{{AC}, "client_name": "Acme agent"}}"#)).client,
        OAuthClient::Dynamic {
            client_name: "Acme agent".into()
        }
    );
    let doc = r#""client_metadata_url": "https://ptc.example.com/oauth/client.json""#;
    assert_eq!(
        plan(&format!("{{{AC}, {doc}}}")).client,
        OAuthClient::MetadataDocument {
            url: "https://ptc.example.com/oauth/client.json".into(),
            client_name: "ptc".into()
        }
    );
    assert_eq!(
        plan(&format!(r#"{{{AC}, {doc}, "client_name": "Acme"}}"#)).client,
        OAuthClient::MetadataDocument {
            url: "https://ptc.example.com/oauth/client.json".into(),
            client_name: "Acme".into()
        }
    );
    // A public client, and a confidential one.
    assert_eq!(
        plan(&format!(r#"{{{AC}, "client_id": "ptc-cli"}}"#)).client,
        OAuthClient::Registered {
            client_id: "ptc-cli".into(),
            client_secret: None
        }
    );
    assert_eq!(
        plan(&format!(
            r#"{{{AC}, "client_id": "ptc-web", "client_secret": "client"}}"#
        ))
        .client,
        OAuthClient::Registered {
            client_id: "ptc-web".into(),
            client_secret: Some("client".into())
        }
    );
    assert_eq!(
        one(&format!(r#"{{{AC}, "client_id": "ptc-cli", {doc}}}"#)),
        (
            at("client_metadata_url"),
            "`client_id` and `client_metadata_url` both name the client: give one".to_string()
        )
    );
    assert_eq!(
        one(&format!(
            r#"{{{AC}, "client_id": "ptc-cli", "client_name": "Acme"}}"#
        )),
        (
            at("client_name"),
            "`client_name` is what ptc registers itself as; the client `client_id` names is \
             registered already"
                .to_string()
        )
    );
    assert_eq!(
        one(
            r#"{"grant": "authorization_code", "redirect_uri": "http://127.0.0.1:1/cb", "client_secret": "client"}"#
        ),
        (
            at("client_secret"),
            "`client_secret` needs the `client_id` it belongs to".to_string()
        )
    );
}

#[test]
fn client_id_and_client_name_are_not_blank() {
    for (field, blank) in [
        ("client_id", ""),
        ("client_id", " "),
        ("client_name", ""),
        ("client_name", "\\t"),
    ] {
        assert_eq!(
            one(&format!(r#"{{{AC}, "{field}": "{blank}"}}"#)),
            (at(field), format!("`{field}` must not be empty")),
            "{field}: {blank:?}"
        );
    }
    // One character is enough.
    assert_eq!(
        plan(&format!(r#"{{{AC}, "client_name": "x"}}"#)).client,
        OAuthClient::Dynamic {
            client_name: "x".into()
        }
    );
    assert_eq!(
        plan(&format!(r#"{{{AC}, "client_id": "x"}}"#)).client,
        OAuthClient::Registered {
            client_id: "x".into(),
            client_secret: None
        }
    );
}

#[test]
fn a_client_metadata_url_is_https_with_a_path_and_nothing_else() {
    let with = |url: &str| format!(r#"{{{AC}, "client_metadata_url": "{url}"}}"#);
    for ok in [
        "https://ptc.example.com/oauth/client.json",
        "https://ptc.example.com/c",
        "https://ptc.example.com:8443/c?v=2",
    ] {
        assert_eq!(oauth_problems(&with(ok)), [], "{ok}");
    }
    for bad in [
        "http://ptc.example.com/oauth/client.json",
        "http://127.0.0.1:8765/client.json",
        "https://ptc.example.com",
        "https://ptc.example.com/",
        "https://ptc.example.com/?v=2",
    ] {
        assert_eq!(
            one(&with(bad)),
            (
                at("client_metadata_url"),
                format!(
                    "`client_metadata_url` `{bad}` must be an https URL with a path, e.g. \
                     https://ptc.example.com/oauth/client.json: it is the client id"
                )
            ),
        );
    }
    for bad in [
        "https://ptc.example.com/c#f",
        "https://ptc.example.com/c#",
        "https://me@ptc.example.com/c",
        "https://:pw@ptc.example.com/c",
        "https://me:pw@ptc.example.com/c",
    ] {
        assert_eq!(
            one(&with(bad)),
            (
                at("client_metadata_url"),
                format!("`client_metadata_url` `{bad}` must not hold a fragment or credentials")
            ),
        );
    }
    assert_eq!(
        one(&with("client.json")),
        (
            at("client_metadata_url"),
            "`client_metadata_url` `client.json` is not a URL".to_string()
        )
    );
}

#[test]
fn the_client_secret_is_a_binding_of_the_deployments_own() {
    let with = |secret: &str| {
        format!(
            r#"{{"grant": "client_credentials", "client_id": "ptc-prod", "client_secret": "{secret}"}}"#
        )
    };
    assert_eq!(
        one(&with("clinet")),
        (
            at("client_secret"),
            "names unknown credential binding `clinet` (did you mean `client`?)".to_string()
        )
    );
    assert_eq!(
        one(&with("vault")),
        (
            at("client_secret"),
            "names unknown credential binding `vault`".to_string()
        )
    );
    for per_caller in ["caller", "exchange"] {
        assert_eq!(
            one(&with(per_caller)),
            (
                at("client_secret"),
                format!(
                    "`{per_caller}` depends on the caller; the client secret is the deployment's own"
                )
            ),
        );
    }
    for own in [
        r#"{"source": "file", "path": "/run/secrets/client"}"#,
        r#"{"source": "literal", "value": "s3cret"}"#,
        r#"{"source": "exec", "command": "/usr/bin/mint"}"#,
    ] {
        let credentials = format!(r#"{{"client": {own}}}"#);
        let oauth = plan_of(&credentials, &upstream_with(&format!("{{{CC}}}"), ""));
        assert_eq!(
            oauth.client,
            OAuthClient::Registered {
                client_id: "ptc-prod".into(),
                client_secret: Some("client".into())
            },
            "{own}"
        );
    }
}

#[test]
fn no_other_emitter_may_set_the_authorization_header() {
    let message = "this emitter sets the `Authorization` header, which carries the OAuth access \
                   token";
    for (i, emitter) in [
        r#"{"scheme": "bearer", "binding": "client"}"#,
        r#"{"scheme": "basic", "binding": "client"}"#,
    ]
    .iter()
    .enumerate()
    {
        let auth = format!(
            r#", "auth": [{{"scheme": "custom_header", "binding": "client", "header": "X-{i}"}}, {emitter}]"#
        );
        assert_eq!(
            problems(CREDENTIALS, &upstream_with(&format!("{{{CC}}}"), &auth)),
            [("/upstreams/linear/auth/1".to_string(), message.to_string())],
            "{emitter}"
        );
    }
    // A custom header stays.
    let custom =
        r#", "auth": [{"scheme": "custom_header", "binding": "client", "header": "X-Tenant"}]"#;
    assert_eq!(
        problems(CREDENTIALS, &upstream_with(&format!("{{{CC}}}"), custom)),
        []
    );
}

/// RFC 6749's scope-token: `%x21 / %x23-5B / %x5D-7E`, at least one.
#[test]
fn each_scope_is_one_scope_token() {
    let with = |scopes: &str| format!(r#"{{{CC}, "scopes": {scopes}}}"#);
    let edges = r##"["repo", "read:org", "!", "#", "[", "]", "~", "a!#[]~z"]"##;
    assert_eq!(
        plan(&with(edges)).scopes,
        ["repo", "read:org", "!", "#", "[", "]", "~", "a!#[]~z"]
    );
    assert!(plan(&with("[]")).scopes.is_empty());
    assert!(plan(&format!("{{{CC}}}")).scopes.is_empty());
    for bad in [
        "",
        " ",
        "repo read:org",
        "a\\tb",
        "\\\"",
        "\\\\",
        "\\u007f",
        "é",
        "read\\u0000",
    ] {
        let found = oauth_problems(&with(&format!(r#"["repo", "{bad}"]"#)));
        let scope: String = serde_json::from_str(&format!("\"{bad}\"")).unwrap();
        assert_eq!(
            found,
            [(
                at("scopes/1"),
                format!(
                    "scope `{scope}` is not one scope token: printable ASCII, without spaces, \
                     `\"` or `\\`"
                )
            )],
            "{bad}"
        );
    }
    assert_eq!(
        one(&with(r#""repo""#)),
        (
            at("scopes"),
            "`scopes` must be an array of strings, got a string".to_string()
        )
    );
}

/// An access token is a credential: over http:// it needs allow_insecure_auth as `auth` does,
/// even when the `oauth` object has problems of its own.
#[test]
fn oauth_over_http_needs_allow_insecure_auth() {
    let upstream = |oauth: &str, opt_ins: &str| {
        format!(
            r#"{{"linear": {{"transport": "mcp_http", "url": "http://127.0.0.1:3333/mcp",
                "oauth": {oauth}{opt_ins}}}}}"#
        )
    };
    let cc = format!("{{{CC}}}");
    let both = r#", "allow_insecure_http": true, "allow_insecure_auth": true"#;
    assert_eq!(
        plan_of(CREDENTIALS, &upstream(&cc, both)).grant,
        OAuthGrant::ClientCredentials
    );
    let insecure = (
        "/upstreams/linear/url".to_string(),
        "`url` uses http:// with auth but allow_insecure_auth is not true".to_string(),
    );
    let http_only = r#", "allow_insecure_http": true"#;
    assert_eq!(
        problems(CREDENTIALS, &upstream(&cc, http_only)),
        std::slice::from_ref(&insecure)
    );
    assert_eq!(
        problems(
            CREDENTIALS,
            &upstream(r#"{"grant": "implicit"}"#, http_only)
        ),
        [
            (at("grant"), "unknown grant `implicit`".to_string()),
            insecure.clone()
        ]
    );
    // Beside an emitter of its own (which alone needs the opt-in too).
    let tenant = r#", "allow_insecure_http": true,
        "auth": [{"scheme": "custom_header", "binding": "client", "header": "X-Tenant"}]"#;
    assert_eq!(problems(CREDENTIALS, &upstream(&cc, tenant)), [insecure]);
    // Without oauth (and auth), http:// needs only allow_insecure_http.
    let plain = r#"{"linear": {"transport": "mcp_http", "url": "http://127.0.0.1:3333/mcp",
        "allow_insecure_http": true}}"#;
    assert_eq!(problems(CREDENTIALS, plain), []);
}

/// The compiled grant is carried whole, and reads back from the JSON a compiled deployment
/// embeds (`PLAN_JSON`): codegen and the runtime cannot disagree on it.
#[test]
fn the_oauth_plan_round_trips_through_json() {
    let oauth = plan(&format!(
        r#"{{{AC}, "client_metadata_url": "https://ptc.example.com/c.json",
            "client_name": "Acme", "scopes": ["repo", "read:org"]}}"#
    ));
    assert_eq!(
        oauth,
        McpOAuthPlan {
            grant: OAuthGrant::AuthorizationCode,
            client: OAuthClient::MetadataDocument {
                url: "https://ptc.example.com/c.json".into(),
                client_name: "Acme".into()
            },
            scopes: vec!["repo".into(), "read:org".into()],
            redirect_uri: Some("http://127.0.0.1:8765/cb".into()),
        }
    );
    for oauth in [oauth, plan(&format!("{{{CC}}}"))] {
        let text = serde_json::to_string(&oauth).unwrap();
        assert_eq!(
            serde_json::from_str::<McpOAuthPlan>(&text).unwrap(),
            oauth,
            "{text}"
        );
    }
}
