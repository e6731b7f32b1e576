//! What a host serves for its upstreams' OAuth clients, from the plan: the path of every
//! authorization code grant's redirect URI (where a person's browser comes back), and every
//! Client ID Metadata Document at the path of its URL (the client id an authorization server
//! fetches to learn who ptc is).

use std::collections::{BTreeMap, BTreeSet};

use ptc_plan::{OAuthClient, OAuthGrant, Plan, Transport};
use serde_json::{Value, json};

/// The routes, by path.
#[derive(Debug, Default, PartialEq)]
pub struct HostedRoutes {
    /// Redirect URI paths.
    pub redirects: BTreeSet<String>,
    /// Client ID Metadata Documents by path.
    pub documents: BTreeMap<String, Value>,
}

/// The routes `plan`'s OAuth clients need, leaving out any path in `taken` (the host's own).
pub fn hosted_routes(plan: &Plan, taken: &[&str]) -> HostedRoutes {
    let mut routes = HostedRoutes::default();
    let oauth = plan.upstreams.iter().filter_map(|u| match &u.transport {
        Transport::McpHttp(p) => p.oauth.as_ref(),
        _ => None,
    });
    for o in oauth {
        let redirect = o
            .redirect_uri
            .as_deref()
            .filter(|_| o.grant == OAuthGrant::AuthorizationCode);
        if let Some(path) = redirect.and_then(path_of) {
            routes.redirects.insert(path);
        }
        if let OAuthClient::MetadataDocument { url, client_name } = &o.client
            && let Some(path) = path_of(url)
        {
            let document = routes
                .documents
                .entry(path)
                .or_insert_with(|| document(url, client_name));
            if let Some(uri) = redirect {
                add_redirect(document, uri);
            }
        }
    }
    routes.redirects.retain(|p| !taken.contains(&p.as_str()));
    routes.documents.retain(|p, _| !taken.contains(&p.as_str()));
    routes
}

fn path_of(url: &str) -> Option<String> {
    url::Url::parse(url).ok().map(|u| u.path().to_string())
}

/// The document of the client `url` names: a public client (PKCE, no secret) that asks for
/// codes and refreshes them.
fn document(url: &str, client_name: &str) -> Value {
    json!({
        "client_id": url,
        "client_name": client_name,
        "redirect_uris": [],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    })
}

fn add_redirect(document: &mut Value, uri: &str) {
    if let Some(uris) = document["redirect_uris"].as_array_mut()
        && !uris.iter().any(|u| u == uri)
    {
        uris.push(Value::from(uri));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(upstreams: serde_json::Value) -> Plan {
        let config = json!({"upstreams": upstreams,
                            "credentials": {"s": {"source": "literal", "value": "x"}}});
        ptc_plan::load_str(
            &config.to_string(),
            std::path::Path::new("upstreams.json"),
            &ptc_plan::FileSource,
        )
        .unwrap_or_else(|d| panic!("{d}"))
        .plan
    }

    fn upstream(oauth: serde_json::Value) -> serde_json::Value {
        json!({"transport": "mcp_http", "url": "https://mcp.example.com/mcp", "oauth": oauth})
    }

    #[test]
    fn a_host_serves_redirect_paths_and_metadata_documents_of_code_grants() {
        let doc = "https://ptc.example.com/oauth/client.json";
        let p = plan(json!({
            "linear": upstream(json!({"grant": "authorization_code", "client_metadata_url": doc,
                                      "redirect_uri": "https://ptc.example.com/oauth/callback"})),
            "notion": upstream(json!({"grant": "authorization_code", "client_metadata_url": doc,
                                      "client_name": "ignored-second",
                                      "redirect_uri": "https://ptc.example.com/oauth/notion"})),
            "github": upstream(json!({"grant": "authorization_code",
                                      "redirect_uri": "https://ptc.example.com/mcp"})),
        }));
        let routes = hosted_routes(&p, &["/mcp"]);
        assert_eq!(
            routes.redirects,
            BTreeSet::from(["/oauth/callback".to_string(), "/oauth/notion".to_string()])
        );
        let d = &routes.documents["/oauth/client.json"];
        assert_eq!(d["client_id"], doc);
        assert_eq!(d["token_endpoint_auth_method"], "none");
        let mut uris: Vec<&str> = d["redirect_uris"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| u.as_str().unwrap())
            .collect();
        uris.sort();
        assert_eq!(
            uris,
            [
                "https://ptc.example.com/oauth/callback",
                "https://ptc.example.com/oauth/notion"
            ]
        );
    }

    #[test]
    fn client_credentials_need_no_route() {
        let p = plan(json!({"billing": upstream(json!({
            "grant": "client_credentials", "client_id": "ptc", "client_secret": "s"}))}));
        assert_eq!(hosted_routes(&p, &[]), HostedRoutes::default());
    }
}
