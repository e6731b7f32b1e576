//! Who is calling: the [`Caller`] every evaluation runs for, and how the HTTP host learns it from
//! a bearer JWT as an OAuth 2.1 resource server ([`oauth`], keys from the issuer's JWKS in
//! [`jwks`]).
//!
//! The caller travels with the evaluation: the policy decides what it may reach, its subject goes
//! into the audit line and the run records, and a credential may be exchanged for it. Its token
//! is kept only for that exchange and is never forwarded to an upstream or written anywhere.

pub mod jwks;
pub mod oauth;

use std::sync::Arc;

/// The identity an evaluation runs for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// Who: the token's `sub`, or `local` (stdio, `eval`, `repl`) or `token` (the static bearer
    /// token, shared by everyone who holds it).
    pub subject: String,
    /// The OAuth client the caller used (`client_id` or `azp`), when the token says.
    pub client_id: Option<String>,
    /// Granted scopes (`scope`, space-separated, or `scp`).
    pub scopes: Vec<String>,
    /// Groups (or roles) from the claim the deployment names.
    pub groups: Vec<String>,
    /// The issuer that vouched for the caller.
    pub issuer: Option<String>,
    /// The bearer token the caller presented, for token exchange only.
    pub token: Option<CallerToken>,
}

impl Default for Caller {
    fn default() -> Self {
        Caller::local()
    }
}

impl Caller {
    /// The operator at the console or the process over stdio: the host trusts whoever started
    /// it.
    pub fn local() -> Self {
        Caller::named("local")
    }

    /// Whoever holds the static bearer token.
    pub fn shared_token() -> Self {
        Caller::named("token")
    }

    fn named(subject: &str) -> Self {
        Caller {
            subject: subject.to_string(),
            client_id: None,
            scopes: Vec::new(),
            groups: Vec::new(),
            issuer: None,
            token: None,
        }
    }
}

/// A caller's bearer token. It prints as `[REDACTED]` so no log or error can carry it by
/// accident; [`CallerToken::expose`] is for the token exchange request alone.
#[derive(Clone, PartialEq, Eq)]
pub struct CallerToken(Arc<str>);

impl CallerToken {
    /// Wraps a presented token.
    pub fn new(token: &str) -> Self {
        CallerToken(Arc::from(token))
    }

    /// The token itself.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for CallerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[REDACTED]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_token_never_prints() {
        let mut caller = Caller::shared_token();
        caller.token = Some(CallerToken::new("canary-token-value"));
        let shown = format!("{caller:?}");
        assert!(!shown.contains("canary"), "{shown}");
        assert!(shown.contains("[REDACTED]"));
        assert_eq!(caller.token.unwrap().expose(), "canary-token-value");
        assert_eq!(Caller::local().subject, "local");
        assert_eq!(Caller::shared_token().subject, "token");
    }
}
