//! Which request headers a config may set, and which only ptc (or the `auth` emitters) may set.
//!
//! One list for the config validator and the runtime, so the two can never disagree.

/// Headers that carry secrets: only `auth` emitters may set credentials.
pub const SECRET_BEARING: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-api-key",
];

/// Headers ptc sets itself (HTTP framing and the MCP protocol); nobody else may.
pub const PROTOCOL_CONTROLLED: &[&str] = &[
    "host",
    "content-length",
    "content-type",
    "content-encoding",
    "accept",
    "accept-encoding",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
    "expect",
    "user-agent",
    "mcp-protocol-version",
    "mcp-session-id",
    "last-event-id",
];

/// True when `name` is an RFC 7230 `token` (the grammar of a header field name).
pub fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'!' | b'#'
                        | b'$'
                        | b'%'
                        | b'&'
                        | b'\''
                        | b'*'
                        | b'+'
                        | b'-'
                        | b'.'
                        | b'^'
                        | b'_'
                        | b'`'
                        | b'|'
                        | b'~'
                )
        })
}

/// True when `name` carries a secret.
pub fn is_secret_bearing(name: &str) -> bool {
    SECRET_BEARING.iter().any(|h| h.eq_ignore_ascii_case(name))
}

/// True when ptc owns `name`.
pub fn is_protocol_controlled(name: &str) -> bool {
    PROTOCOL_CONTROLLED
        .iter()
        .any(|h| h.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_grammar() {
        assert!(is_token("X-Api-Token"));
        assert!(is_token("x_trace.id"));
        assert!(!is_token("X Foo"));
        assert!(!is_token(""));
        assert!(!is_token("X:Foo"));
        assert!(!is_token("Ünicode"));
    }

    #[test]
    fn classification_ignores_case() {
        assert!(is_secret_bearing("Authorization"));
        assert!(is_secret_bearing("X-API-KEY"));
        assert!(is_protocol_controlled("Mcp-Session-Id"));
        assert!(!is_protocol_controlled("X-Request-Source"));
    }
}
