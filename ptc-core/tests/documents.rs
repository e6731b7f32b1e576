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
            ptc_core::wire::documents::fetch(&url, &request).await
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
    assert!(
        e.starts_with("cannot fetch schema_url `http://")
            && e.ends_with("URL scheme is not allowed"),
        "{e}"
    );
    std::fs::remove_file(&token).ok();
}

/// A bare HTTP/1.1 server answering every request with `body` in `chunk`-byte pieces, chunked,
/// without Content-Length (what a streaming upstream or proxy sends).
async fn chunked_server(body: Vec<u8>, chunk: usize) -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let mut out = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                    transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
                    .to_vec();
                for piece in body.chunks(chunk) {
                    out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                    out.extend_from_slice(piece);
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(b"0\r\n\r\n");
                let _ = socket.write_all(&out).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    addr
}

fn plain_settings(allow_insecure_http: bool) -> HttpSettings {
    let (mut http, _) = settings("/unused", allow_insecure_http);
    http.auth.clear();
    http
}

async fn fetch_plain(url: &str, max_bytes: u64, http: &HttpSettings) -> Result<Vec<u8>, String> {
    let location = SchemaLocation::Url(url.to_string());
    let secrets = Secrets::default();
    let request = DocumentRequest {
        upstream: "plain",
        location: &location,
        max_bytes,
        http,
        credentials: &[],
        secrets: &secrets,
    };
    ptc_core::wire::documents::fetch(url, &request).await
}

#[tokio::test]
async fn chunked_documents_without_content_length_are_capped_while_streaming() {
    let doc = DOC.as_bytes().to_vec();
    let size = doc.len() as u64;
    let addr = chunked_server(doc.clone(), 7).await;
    let url = format!("http://{addr}/openapi.json");
    let http = plain_settings(true);
    // Exactly the cap: read in full.
    assert_eq!(fetch_plain(&url, size, &http).await.unwrap(), doc);
    // One byte under the document's size: refused by the streaming check (no Content-Length).
    assert_eq!(
        fetch_plain(&url, size - 1, &http).await.unwrap_err(),
        format!(
            "schema_url `{url}` is over the {}-byte cap (schema_max_bytes)",
            size - 1
        )
    );
    // A cap smaller than one chunk is enforced on the first chunk.
    assert_eq!(
        fetch_plain(&url, 3, &http).await.unwrap_err(),
        format!("schema_url `{url}` is over the 3-byte cap (schema_max_bytes)")
    );
}

#[tokio::test]
async fn content_length_cap_holds_at_exactly_the_document_size() {
    let app = Router::new().route("/openapi.json", get(|| async { DOC }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let url = format!("http://{addr}/openapi.json");
    let http = plain_settings(true);
    let size = DOC.len() as u64;
    assert_eq!(
        fetch_plain(&url, size, &http).await.unwrap(),
        DOC.as_bytes()
    );
    assert_eq!(
        fetch_plain(&url, size - 1, &http).await.unwrap_err(),
        format!(
            "schema_url `{url}` is over the {}-byte cap (schema_max_bytes)",
            size - 1
        )
    );
}

#[tokio::test]
async fn plain_http_is_refused_by_the_https_rule_before_connecting() {
    // Nothing listens here: the refusal must come from the https rule, not from connecting.
    let url = "http://127.0.0.1:9/openapi.json";
    let e = fetch_plain(url, 1 << 20, &plain_settings(false))
        .await
        .unwrap_err();
    assert!(
        e.starts_with(&format!("cannot fetch schema_url `{url}`: "))
            && e.ends_with("URL scheme is not allowed"),
        "{e}"
    );
    // With the opt-in the same URL gets as far as connecting.
    let e = fetch_plain(url, 1 << 20, &plain_settings(true))
        .await
        .unwrap_err();
    assert_eq!(
        e,
        format!("cannot fetch schema_url `{url}`: cannot connect")
    );
}

#[tokio::test]
async fn non_success_statuses_are_named() {
    let app = Router::new().route("/gone", get(|| async { StatusCode::GONE }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let url = format!("http://{addr}/gone");
    assert_eq!(
        fetch_plain(&url, 1 << 20, &plain_settings(true))
            .await
            .unwrap_err(),
        format!("schema_url `{url}` answered 410 Gone")
    );
}

/// The blocking [`NetworkSource`], as the loader calls it: from a plain thread (its own
/// runtime) and from inside a runtime (on a helper thread), for URLs and for files.
#[test]
fn network_source_fetches_urls_and_files_from_any_context() {
    use ptc_core::wire::documents::NetworkSource;
    use ptc_plan::DocumentSource;

    // The server runs on its own runtime thread for the whole test.
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                addr_tx.send(listener.local_addr().unwrap()).unwrap();
                let app = Router::new().route("/openapi.json", get(|| async { DOC }));
                axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        stopped.await.ok();
                    })
                    .await
                    .unwrap()
            })
    });
    let addr = addr_rx.recv().unwrap();

    let http = plain_settings(true);
    let secrets = Secrets::default();
    let url = SchemaLocation::Url(format!("http://{addr}/openapi.json"));
    let request = DocumentRequest {
        upstream: "plain",
        location: &url,
        max_bytes: 1 << 20,
        http: &http,
        credentials: &[],
        secrets: &secrets,
    };
    // No runtime on this thread.
    assert_eq!(NetworkSource.fetch(&request).unwrap(), DOC.as_bytes());
    // Inside a runtime: fetched on a helper thread instead of blocking the runtime's own.
    let in_runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async { NetworkSource.fetch(&request) });
    assert_eq!(in_runtime.unwrap(), DOC.as_bytes());

    // Files are read by the file source, with its cap.
    let file = std::env::temp_dir().join(format!("ptc-core-doc-file-{}.json", std::process::id()));
    std::fs::write(&file, DOC).unwrap();
    let location = SchemaLocation::File(file.to_string_lossy().into());
    let request = DocumentRequest {
        location: &location,
        ..request
    };
    assert_eq!(NetworkSource.fetch(&request).unwrap(), DOC.as_bytes());
    let capped = DocumentRequest {
        max_bytes: 10,
        ..request
    };
    assert_eq!(
        NetworkSource.fetch(&capped).unwrap_err(),
        format!(
            "`{}` is {} bytes, over the 10-byte cap (schema_max_bytes)",
            file.display(),
            DOC.len()
        )
    );
    std::fs::remove_file(&file).ok();
    stop.send(()).unwrap();
    server.join().unwrap();
}
