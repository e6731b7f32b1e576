//! The one way ptc builds an HTTP client (OpenAPI upstreams, documents fetched at start-up, MCP
//! over Streamable HTTP, and the tests and benches that speak HTTP): reqwest over rustls with the
//! *ring* crypto provider, and ptc's user agent; and the one way a body is read within a cap and
//! a transport error is put in words.
//!
//! ring rather than rustls' default aws-lc-rs: a client gets the same TLS 1.2 and 1.3 suites and
//! certificate checks, without aws-lc-sys's C build, which was the largest single step of a fresh
//! build.

use std::sync::Once;

/// A client builder with ring installed as the process's crypto provider. An application that
/// embeds ptc and installed a provider of its own keeps it.
pub fn builder() -> reqwest::ClientBuilder {
    static PROVIDER: Once = Once::new();
    PROVIDER.call_once(|| {
        // Installs the provider rustls' features name (ring alone: ptc enables no other) unless
        // one is installed; rustls 0.23.48 deprecates naming ring's, having no successor to it.
        let _ = rustls::ClientConfig::builder();
    });
    reqwest::Client::builder().user_agent(concat!("ptc/", env!("CARGO_PKG_VERSION")))
}

/// Why a body was not read whole.
pub(crate) enum ReadError {
    TooLarge,
    Failed(reqwest::Error),
}

/// Reads the body as a stream, stopping as soon as it passes `cap` bytes (whatever
/// Content-Length said).
pub(crate) async fn read_capped(
    mut resp: reqwest::Response,
    cap: u64,
) -> Result<Vec<u8>, ReadError> {
    if resp.content_length().is_some_and(|n| n > cap) {
        return Err(ReadError::TooLarge);
    }
    let hint = resp.content_length().unwrap_or(0).min(cap).min(1 << 24) as usize;
    let mut body = Vec::with_capacity(hint);
    while let Some(chunk) = resp.chunk().await.map_err(ReadError::Failed)? {
        if body.len() as u64 + chunk.len() as u64 > cap {
            return Err(ReadError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A transport error in a few words (reqwest's own text repeats the URL).
pub(crate) fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        return "timed out".into();
    }
    let mut msg = if e.is_connect() {
        "cannot connect".to_string()
    } else if e.is_request() {
        "the request failed".to_string()
    } else if e.is_body() || e.is_decode() {
        "the response body failed".to_string()
    } else {
        "transport error".to_string()
    };
    let mut source = std::error::Error::source(e);
    let mut last = String::new();
    while let Some(s) = source {
        last = s.to_string();
        source = s.source();
    }
    if !last.is_empty() {
        msg.push_str(": ");
        msg.push_str(&last);
    }
    msg
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_client_builds_with_ring_installed() {
        let _client = super::builder().build().expect("a client");
        assert!(
            rustls::crypto::CryptoProvider::get_default().is_some(),
            "a provider is installed"
        );
    }
}
