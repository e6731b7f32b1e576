//! Fetching OpenAPI documents named by `schema_url`, the way the upstream's own requests are
//! made: its auth emitters and static headers, its timeouts, its https rule, a byte cap, and
//! no redirects (a redirect could carry credentials to another host).

use std::time::Duration;

use ptc_plan::{DocumentRequest, DocumentSource, FileSource, SchemaLocation};

use crate::credentials::binding::auth_headers;

/// Reads `schema_file`s from disk and fetches `schema_url`s over the network. Blocking: for
/// start-up and the command line (it runs its own runtime, on its own thread when called from
/// inside another tokio runtime).
#[derive(Debug, Default, Clone, Copy)]
pub struct NetworkSource;

impl DocumentSource for NetworkSource {
    fn fetch(&self, request: &DocumentRequest) -> Result<Vec<u8>, String> {
        let SchemaLocation::Url(url) = request.location else {
            return FileSource.fetch(request);
        };
        let run = || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start the HTTP runtime: {e}"))?
                .block_on(fetch(url, request))
        };
        if tokio::runtime::Handle::try_current().is_ok() {
            std::thread::scope(|s| {
                s.spawn(run)
                    .join()
                    .unwrap_or_else(|_| Err("schema fetch thread failed".into()))
            })
        } else {
            run()
        }
    }
}

/// Fetches `url` for `request`, reading at most `request.max_bytes`.
pub async fn fetch(url: &str, request: &DocumentRequest<'_>) -> Result<Vec<u8>, String> {
    let http = request.http;
    let client = crate::wire::http_client::builder()
        .connect_timeout(Duration::from_millis(http.connect_timeout_ms))
        .timeout(Duration::from_millis(http.request_timeout_ms))
        .redirect(reqwest::redirect::Policy::none())
        .https_only(!http.allow_insecure_http)
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
    let mut rb = client.get(url).header(
        "accept",
        "application/json, application/yaml;q=0.9, */*;q=0.1",
    );
    for (name, value) in &http.static_headers {
        rb = rb.header(name, value);
    }
    let auth = auth_headers(
        &http.auth,
        request.credentials,
        request.secrets,
        &crate::credentials::redact::Redactor::new(),
    )
    .map_err(|e| e.to_string())?;
    for (name, value) in &auth {
        rb = rb.header(name, value.expose());
    }
    let mut resp = rb
        .send()
        .await
        .map_err(|e| format!("cannot fetch schema_url `{url}`: {}", describe(&e)))?;
    let status = resp.status();
    if status.is_redirection() {
        let to = resp
            .headers()
            .get("location")
            .and_then(|l| l.to_str().ok())
            .unwrap_or("?");
        return Err(format!(
            "schema_url `{url}` redirects ({status}) to `{to}`; point schema_url at the final location"
        ));
    }
    if !status.is_success() {
        return Err(format!("schema_url `{url}` answered {status}"));
    }
    let cap = request.max_bytes;
    if resp.content_length().is_some_and(|n| n > cap) {
        return Err(format!(
            "schema_url `{url}` is over the {cap}-byte cap (schema_max_bytes)"
        ));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| format!("reading schema_url `{url}` failed: {}", describe(&e)))?
    {
        if body.len() as u64 + chunk.len() as u64 > cap {
            return Err(format!(
                "schema_url `{url}` is over the {cap}-byte cap (schema_max_bytes)"
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A transport error in a few words (reqwest's own text repeats the URL).
fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".into()
    } else if e.is_connect() {
        "cannot connect".into()
    } else {
        let mut msg = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            msg = format!("{msg}: {s}");
            source = s.source();
        }
        msg
    }
}
