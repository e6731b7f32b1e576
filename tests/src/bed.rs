//! The Observatory test bed for tests that drive a host binary: the bed on a runtime of its own,
//! its token in a file, and the flags that point the binary at both.

use std::path::PathBuf;

use observatory_server::{ServerConfig, ServerHandle, TokenSource, TokenSpec};

/// A running bed, shut down (and its token file removed) when dropped.
pub struct FlaggedBed {
    rt: tokio::runtime::Runtime,
    server: Option<ServerHandle>,
    token_file: PathBuf,
    /// `--upstream-url observatory=... --credential-file observatory-token=...`.
    pub flags: Vec<String>,
}

/// Starts a bed whose one token is `token` (its secret goes to the token file); `name` keeps
/// the token files of concurrent tests apart.
pub fn start(name: &str, token: TokenSpec) -> FlaggedBed {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime for the bed");
    let secret = token.secret.clone().expect("a token with its secret");
    let config = ServerConfig::new(TokenSource::Inline(vec![token]));
    let (addr, server) = rt
        .block_on(observatory_server::start(config))
        .expect("the Observatory test bed starts");
    let token_file = std::env::temp_dir().join(format!("ptc-{name}-{}.token", std::process::id()));
    std::fs::write(&token_file, secret).expect("the token file");
    let flags = vec![
        "--upstream-url".into(),
        format!("observatory=http://{addr}"),
        "--credential-file".into(),
        format!("observatory-token={}", token_file.display()),
    ];
    FlaggedBed {
        rt,
        server: Some(server),
        token_file,
        flags,
    }
}

impl FlaggedBed {
    /// The running bed (`None` once stopped).
    pub fn server(&self) -> Option<&ServerHandle> {
        self.server.as_ref()
    }

    /// Stops the bed; the flags and the token file stay (a replay runs without the bed).
    pub fn stop(&mut self) {
        if let Some(s) = self.server.take() {
            self.rt.block_on(s.shutdown());
        }
    }
}

impl Drop for FlaggedBed {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_file(&self.token_file);
    }
}
