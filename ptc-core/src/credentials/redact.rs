//! The redactor: every secret value the runtime resolves is registered here, and every text that
//! leaves the runtime (results, error messages, logs, discovery output, child stderr) passes
//! through [`Redactor::redact`].

use std::borrow::Cow;
use std::sync::{Arc, RwLock};

/// What a secret is replaced with.
pub const MASK: &str = "[REDACTED]";

/// Shortest value registered: shorter ones would mask ordinary text and are not credentials.
pub const MIN_SECRET_LEN: usize = 4;

/// A shared set of secret values to mask. Cheap to clone (one `Arc`).
#[derive(Clone, Default)]
pub struct Redactor {
    secrets: Arc<RwLock<Vec<String>>>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Redactor([REDACTED])")
    }
}

impl Redactor {
    /// An empty redactor.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `secret` (and nothing shorter than [`MIN_SECRET_LEN`]).
    pub fn register(&self, secret: &str) {
        if secret.len() < MIN_SECRET_LEN {
            return;
        }
        // Most registrations repeat one already made (a token is registered with every request
        // it goes out on): a read lock settles those, leaving the write lock to new secrets.
        let known = |secrets: &Vec<String>| secrets.iter().any(|s| s == secret);
        if known(&self.secrets.read().unwrap_or_else(|e| e.into_inner())) {
            return;
        }
        let mut secrets = self.secrets.write().unwrap_or_else(|e| e.into_inner());
        if !known(&secrets) {
            secrets.push(secret.to_string());
            // Longest first, so a secret that contains another is masked whole.
            secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        }
    }

    /// Stops masking `secret` (a per-caller token that left its cache: kept, the list would grow
    /// with every caller ever seen).
    pub fn forget(&self, secret: &str) {
        let mut secrets = self.secrets.write().unwrap_or_else(|e| e.into_inner());
        secrets.retain(|s| s != secret);
    }

    /// `text` with every registered secret replaced by [`MASK`].
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let secrets = self.secrets.read().unwrap_or_else(|e| e.into_inner());
        let mut out = Cow::Borrowed(text);
        for secret in secrets.iter() {
            if out.contains(secret.as_str()) {
                out = Cow::Owned(out.replace(secret.as_str(), MASK));
            }
        }
        out
    }

    /// `bytes` (a response body) with every registered secret replaced by [`MASK`]. The mask has
    /// no JSON-special characters, so a JSON body stays valid JSON.
    pub fn redact_bytes<'a>(&self, bytes: &'a [u8]) -> Cow<'a, [u8]> {
        let secrets = self.secrets.read().unwrap_or_else(|e| e.into_inner());
        let mut out = Cow::Borrowed(bytes);
        for secret in secrets.iter() {
            let finder = memchr::memmem::Finder::new(secret.as_bytes());
            if finder.find(&out).is_none() {
                continue;
            }
            let mut replaced = Vec::with_capacity(out.len());
            let mut rest: &[u8] = &out;
            while let Some(i) = finder.find(rest) {
                replaced.extend_from_slice(&rest[..i]);
                replaced.extend_from_slice(MASK.as_bytes());
                rest = &rest[i + secret.len()..];
            }
            replaced.extend_from_slice(rest);
            out = Cow::Owned(replaced);
        }
        out
    }

    /// True when no secret has been registered (the common fast path).
    pub fn is_empty(&self) -> bool {
        self.secrets
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forgotten_secret_is_no_longer_masked_and_others_still_are() {
        let r = Redactor::new();
        r.register("first-secret");
        r.register("second-secret");
        r.forget("first-secret");
        r.forget("never-registered");
        assert_eq!(
            r.redact("first-secret second-secret"),
            "first-secret [REDACTED]"
        );
    }

    #[test]
    fn masks_registered_secrets_longest_first() {
        let r = Redactor::new();
        r.register("abcd");
        r.register("abcdef");
        r.register("xyz"); // below the minimum: ordinary text stays readable
        assert_eq!(
            r.redact("t=abcdef u=abcd v=xyz"),
            "t=[REDACTED] u=[REDACTED] v=xyz"
        );
    }

    #[test]
    fn masks_secrets_in_bodies_keeping_json_valid() {
        let r = Redactor::new();
        r.register("tok-123");
        let body = br#"{"echo":"Bearer tok-123","again":"tok-123tok-123"}"#;
        let out = r.redact_bytes(body);
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"echo":"Bearer [REDACTED]","again":"[REDACTED][REDACTED]"}"#
        );
        assert!(serde_json::from_slice::<serde_json::Value>(&out).is_ok());
        assert!(matches!(r.redact_bytes(b"{}"), Cow::Borrowed(_)));
    }

    #[test]
    fn text_without_secrets_is_borrowed() {
        let r = Redactor::new();
        r.register("secret-token");
        assert!(matches!(r.redact("nothing here"), Cow::Borrowed(_)));
    }
}
