//! The one way ptc builds an HTTP client (OpenAPI upstreams, documents fetched at start-up, MCP
//! over Streamable HTTP, and the tests and benches that speak HTTP): reqwest over rustls with the
//! *ring* crypto provider, and ptc's user agent.
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
        // Err only when a provider is already installed, which is then the one used.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    reqwest::Client::builder().user_agent(concat!("ptc/", env!("CARGO_PKG_VERSION")))
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
