//! Fetching a private `schema_url`: the upstream's auth and static headers are sent, redirects
//! are refused, and the byte cap holds.

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect};
use axum::routing::get;
use ptc_plan::{
    AuthEmitter, Backoff, CredentialBinding, CredentialSource, DocumentRequest, HttpSettings,
    SchemaLocation, Secrets,
};

const DOC: &str =
    r#"{"openapi": "3.1.0", "info": {"title": "private", "version": "1"}, "paths": {}}"#;

async fn private(headers: HeaderMap) -> impl IntoResponse {
    let auth = headers.get("authorization").and_then(|v| v.to_str().ok());
    let client = headers.get("x-client").and_then(|v| v.to_str().ok());
    if auth == Some("Bearer schema-s3cret") && client == Some("ptc") {
        (StatusCode::OK, DOC).into_response()
    } else {
        StatusCode::UNAUTHORIZED.into_response()
    }
}

fn settings(token_path: &str, allow_insecure_http: bool) -> (HttpSettings, Vec<CredentialBinding>) {
    let http = HttpSettings {
        auth: vec![AuthEmitter::Bearer {
            binding: "schema-token".into(),
        }],
        static_headers: vec![("x-client".into(), "ptc".into())],
        allow_insecure_http,
        allow_insecure_auth: true,
        request_timeout_ms: 5_000,
        connect_timeout_ms: 1_000,
        max_response_bytes: 1 << 20,
        pool_size: 1,
        backoff: Backoff {
            max_retries: 0,
            initial_ms: 100,
            max_ms: 100,
        },
    };
    let creds = vec![CredentialBinding {
        name: "schema-token".into(),
        source: CredentialSource::File {
            path: token_path.into(),
        },
        scheme_hint: None,
    }];
    (http, creds)
}

#[tokio::test]
async fn private_documents_use_the_upstream_auth_and_nothing_leaks() {
    let app = Router::new().route("/openapi.json", get(private)).route(
        "/moved",
        get(|| async { Redirect::temporary("http://elsewhere.example/openapi.json") }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let token = std::env::temp_dir().join(format!("ptc-core-doc-token-{}", std::process::id()));
    std::fs::write(&token, "schema-s3cret\n").unwrap();
    let (http, creds) = settings(token.to_str().unwrap(), true);
    let secrets = Secrets::default();
    let fetch = |url: String, max_bytes: u64, http: HttpSettings| {
        let creds = creds.clone();
        let secrets = secrets.clone();
        async move {
            let location = SchemaLocation::Url(url.clone());
            let request = DocumentRequest {
                upstream: "private",
                location: &location,
                max_bytes,
                http: &http,
                credentials: &creds,
                secrets: &secrets,
            };
            ptc_core::documents::fetch(&url, &request).await
        }
    };

    let body = fetch(format!("http://{addr}/openapi.json"), 1 << 20, http.clone())
        .await
        .unwrap();
    assert_eq!(body, DOC.as_bytes());

    let e = fetch(format!("http://{addr}/openapi.json"), 10, http.clone())
        .await
        .unwrap_err();
    assert!(e.contains("over the 10-byte cap"), "{e}");

    let e = fetch(format!("http://{addr}/moved"), 1 << 20, http.clone())
        .await
        .unwrap_err();
    assert!(
        e.contains("redirects") && e.contains("elsewhere.example"),
        "{e}"
    );

    // A rotated token is read on the next fetch; a wrong one is refused, and the error never shows it.
    std::fs::write(&token, "wrong-s3cret").unwrap();
    let e = fetch(format!("http://{addr}/openapi.json"), 1 << 20, http.clone())
        .await
        .unwrap_err();
    assert!(e.contains("answered 401"), "{e}");
    assert!(!e.contains("s3cret"), "{e}");

    // Without the insecure opt-in, plain http is refused before anything is sent.
    let (strict, _) = settings(token.to_str().unwrap(), false);
    let e = fetch(format!("http://{addr}/openapi.json"), 1 << 20, strict)
        .await
        .unwrap_err();
    assert!(e.contains("cannot fetch schema_url"), "{e}");
    std::fs::remove_file(&token).ok();
}
