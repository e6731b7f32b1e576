//! The test OAuth authorization server (`fixtures/auth-issuer`) through its launcher
//! (`ptc_tests::issuer`): discovery, the JWKS and its rotation, minted tokens, and RFC 8693 token
//! exchange. The host's own OAuth tests rely on all of this behaving as documented.

use ptc_tests::issuer::{self, Issuer};
use serde_json::{Value, json};

const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";

/// Decodes unpadded base64url (a JWT part). No crypto: the issuer's library signs and verifies.
fn base64url(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'-' => 62,
        b'_' => 63,
        _ => panic!("not base64url: {text}"),
    };
    let (mut out, mut bits, mut acc) = (Vec::new(), 0u32, 0u32);
    for c in text.bytes() {
        acc = (acc << 6) | u32::from(value(c));
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

/// Part `n` of a compact JWT (0: header, 1: payload) as JSON.
fn part(token: &str, n: usize) -> Value {
    let text = token.split('.').nth(n).expect("a JWT part");
    serde_json::from_slice(&base64url(text)).expect("a JSON JWT part")
}

async fn get_json(issuer: &Issuer, url: &str) -> Value {
    let response = issuer.http().get(url).send().await.unwrap();
    assert_eq!(response.status(), 200, "GET {url}");
    response.json().await.unwrap()
}

async fn jwks_kids(issuer: &Issuer) -> Vec<String> {
    let jwks = get_json(issuer, &issuer.jwks_uri()).await;
    jwks["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .map(|k| k["kid"].as_str().expect("a kid").to_string())
        .collect()
}

/// POSTs a token-exchange form to `/token` with Basic auth as `id:secret`.
async fn exchange(
    issuer: &Issuer,
    (id, secret): (&str, &str),
    subject: &str,
    extra: &[(&str, &str)],
) -> (u16, Value) {
    let mut form = vec![
        ("grant_type", TOKEN_EXCHANGE),
        ("subject_token", subject),
        ("subject_token_type", ACCESS_TOKEN),
    ];
    form.extend_from_slice(extra);
    let response = issuer
        .http()
        .post(issuer.token_endpoint())
        .basic_auth(id, Some(secret))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(issuer::form_encode(&form))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

#[tokio::test]
async fn discovery_names_the_endpoints_and_the_jwks_serves_kids() {
    let Some(issuer) = issuer::start(&[]) else {
        return;
    };
    assert!(issuer.url.starts_with("http://127.0.0.1:") && !issuer.url.ends_with('/'));
    for path in [
        "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration",
    ] {
        let meta = get_json(&issuer, &format!("{}{path}", issuer.url)).await;
        assert_eq!(meta["issuer"], issuer.url.as_str(), "{path}");
        assert_eq!(meta["jwks_uri"], issuer.jwks_uri().as_str());
        assert_eq!(meta["token_endpoint"], issuer.token_endpoint().as_str());
        let grants = meta["grant_types_supported"].as_array().unwrap();
        assert!(grants.contains(&json!("client_credentials")));
        assert!(grants.contains(&json!(TOKEN_EXCHANGE)));
        let auth = meta["token_endpoint_auth_methods_supported"]
            .as_array()
            .unwrap();
        assert!(auth.contains(&json!("client_secret_basic")));
        assert!(auth.contains(&json!("client_secret_post")));
    }
    let jwks = get_json(&issuer, &issuer.jwks_uri()).await;
    let keys = jwks["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 2, "{jwks}");
    let mut algs: Vec<&str> = keys.iter().map(|k| k["alg"].as_str().unwrap()).collect();
    algs.sort_unstable();
    assert_eq!(algs, ["ES256", "RS256"]);
    for key in keys {
        assert!(key["kid"].as_str().is_some_and(|k| !k.is_empty()), "{key}");
        assert_eq!(key["use"], "sig");
        assert!(key.get("d").is_none(), "a private key is published: {key}");
    }
    let missing = issuer
        .http()
        .get(format!("{}/nowhere", issuer.url))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
}

#[tokio::test]
async fn minted_tokens_carry_a_published_kid_and_none_is_unsigned() {
    let Some(issuer) = issuer::start(&[]) else {
        return;
    };
    let kids = jwks_kids(&issuer).await;
    for alg in ["RS256", "ES256"] {
        let token = issuer
            .mint(json!({"alg": alg, "claims": {"sub": "alice"}}))
            .await;
        let parts: Vec<&str> = token.split('.').collect();
        assert_eq!(parts.len(), 3, "{token}");
        assert!(parts.iter().all(|p| !p.is_empty()), "{token}");
        let header = part(&token, 0);
        assert_eq!(header["alg"], alg);
        assert!(kids.contains(&header["kid"].as_str().unwrap().to_string()));
        let claims = part(&token, 1);
        assert_eq!(claims["iss"], issuer.url.as_str());
        assert_eq!(claims["sub"], "alice");
        assert!(claims["exp"].as_i64().unwrap() > claims["iat"].as_i64().unwrap());
        assert!(claims["jti"].is_string());
    }
    let stranger = issuer
        .mint(json!({"alg": "ES256", "key": "stranger", "claims": {}}))
        .await;
    let kid = part(&stranger, 0)["kid"].as_str().unwrap().to_string();
    assert!(!kids.contains(&kid), "a stranger's kid is published");

    let none = issuer
        .mint(json!({"alg": "none", "claims": {"exp": null}, "kid": null}))
        .await;
    assert!(none.ends_with('.'), "{none}");
    assert_eq!(none.split('.').count(), 3);
    assert_eq!(part(&none, 0)["alg"], "none");
    assert!(part(&none, 0).get("kid").is_none());
    assert!(
        part(&none, 1).get("exp").is_none(),
        "a null claim is left out"
    );
}

#[tokio::test]
async fn rotation_adds_kids_and_drop_old_removes_the_old_ones() {
    let Some(issuer) = issuer::start(&[]) else {
        return;
    };
    let first = jwks_kids(&issuer).await;
    let rotated = issuer.rotate(false).await;
    let new: Vec<String> = ["RS256", "ES256"]
        .iter()
        .map(|alg| rotated["kids"][alg].as_str().unwrap().to_string())
        .collect();
    let both = jwks_kids(&issuer).await;
    assert_eq!(both.len(), 4, "{both:?}");
    assert!(first.iter().chain(&new).all(|k| both.contains(k)));
    let token = issuer.mint(json!({"claims": {}})).await;
    assert_eq!(part(&token, 0)["kid"], new[0].as_str(), "new keys sign");

    let dropped = issuer.rotate(true).await;
    let only = jwks_kids(&issuer).await;
    assert_eq!(only.len(), 2, "{only:?}");
    for alg in ["RS256", "ES256"] {
        assert!(only.contains(&dropped["kids"][alg].as_str().unwrap().to_string()));
    }
    assert!(!first.iter().chain(&new).any(|k| only.contains(k)));
}

#[tokio::test]
async fn token_exchange_issues_a_delegated_token_and_counts_it() {
    let Some(issuer) = issuer::start(&["--exchange-ttl", "120"]) else {
        return;
    };
    issuer.reset_stats().await;
    let subject = issuer
        .mint(json!({"claims": {"sub": "alice", "scope": "lisp:eval"}}))
        .await;
    let (status, body) = exchange(
        &issuer,
        issuer::client(),
        &subject,
        &[("audience", "https://upstream.example")],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["issued_token_type"], ACCESS_TOKEN);
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["expires_in"], 120);
    let token = body["access_token"].as_str().unwrap();
    let claims = part(token, 1);
    assert_eq!(claims["sub"], "alice");
    assert_eq!(claims["aud"], "https://upstream.example");
    assert_eq!(claims["act"]["sub"], issuer::client().0);
    assert_eq!(claims["scope"], "lisp:eval");
    assert_eq!(claims["iss"], issuer.url.as_str());
    let ttl = claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap();
    assert_eq!(ttl, 120);

    // A subject signed by a key outside the JWKS, and one that expired.
    let stranger = issuer
        .mint(json!({"key": "stranger", "claims": {"sub": "mallory"}}))
        .await;
    let expired = issuer
        .mint(json!({"claims": {"sub": "alice", "exp": 1}}))
        .await;
    for bad in [stranger.as_str(), expired.as_str(), "not-a-jwt"] {
        let (status, body) =
            exchange(&issuer, issuer::client(), bad, &[("resource", "https://r")]).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(body["error"], "invalid_grant", "{body}");
    }
    let (status, body) = exchange(
        &issuer,
        (issuer::client().0, "wrong-secret"),
        &subject,
        &[("audience", "https://upstream.example")],
    )
    .await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"], "invalid_client");

    jwks_kids(&issuer).await;
    jwks_kids(&issuer).await;
    let stats = issuer.stats().await;
    assert_eq!(stats["jwks_requests"], 2, "{stats}");
    assert_eq!(stats["token_requests"], 5, "{stats}");
    let exchanges = stats["exchanges"].as_array().unwrap();
    assert_eq!(exchanges.len(), 1, "{stats}");
    assert_eq!(exchanges[0]["subject"], "alice");
    assert_eq!(
        exchanges[0]["audience"],
        json!(["https://upstream.example"])
    );
    assert_eq!(exchanges[0]["client_id"], issuer::client().0);
    assert_eq!(exchanges[0]["jti"], claims["jti"]);
    assert_eq!(exchanges[0]["expires_in"], 120);

    // A client_credentials token is a subject the issuer accepts too.
    let own = issuer
        .client_credentials(&[("resource", "http://127.0.0.1:1/mcp"), ("scope", "lisp")])
        .await;
    let own_claims = part(&own, 1);
    assert_eq!(own_claims["sub"], issuer::client().0);
    assert_eq!(own_claims["aud"], "http://127.0.0.1:1/mcp");
    let (status, body) = exchange(&issuer, issuer::client(), &own, &[("resource", "r")]).await;
    assert_eq!(status, 200, "{body}");

    issuer.reset_stats().await;
    let stats = issuer.stats().await;
    assert_eq!(stats["jwks_requests"], 0);
    assert_eq!(stats["exchanges"], json!([]));
}
