//! Turning a tool call's result into the executor's [`ToolOutput`], and failures into
//! [`ToolError`]s: the one place that knows the result contract's mapping for this transport.

use rmcp::ServiceError;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

use crate::call::contract::{Reason, ToolError, ToolOutput};
use crate::credentials::redact::Redactor;

/// Longest upstream-provided text kept in an error message.
pub(crate) const MAX_DETAIL: usize = 500;

/// Who a message is about: `upstream `x` tool `t``, and in which step when it says
/// (`the handshake failed: ...`).
#[derive(Clone, Copy)]
pub(crate) struct Subject<'a> {
    pub upstream: &'a str,
    pub tool: Option<&'a str>,
    pub redactor: &'a Redactor,
    pub step: Option<&'static str>,
}

impl Subject<'_> {
    /// A redacted error naming the upstream (and tool, and step).
    pub(crate) fn error(&self, reason: Reason, what: impl std::fmt::Display) -> ToolError {
        let what = match self.step {
            Some(step) => format!("{step}: {what}"),
            None => what.to_string(),
        };
        let message = match self.tool {
            Some(tool) => format!("upstream `{}` tool `{tool}`: {what}", self.upstream),
            None => format!("upstream `{}`: {what}", self.upstream),
        };
        ToolError {
            reason,
            message: self.redactor.redact(&message).into_owned(),
        }
    }
}

/// `text` cut to [`MAX_DETAIL`] bytes at a character boundary.
pub(crate) fn bounded(text: &str) -> String {
    if text.len() <= MAX_DETAIL {
        return text.to_string();
    }
    format!("{}…", &text[..text.floor_char_boundary(MAX_DETAIL)])
}

/// The call's value: `structuredContent` as JSON; otherwise the text (JSON when it parses, plain
/// text when not); no content at all is empty; `isError` is a `tool_error`. Everything is
/// redacted.
pub(crate) fn unwrap(subject: &Subject, result: CallToolResult) -> Result<ToolOutput, ToolError> {
    let redactor = subject.redactor;
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect();
    if result.is_error == Some(true) {
        let detail = texts
            .first()
            .map(|t| bounded(t.trim()))
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| "the tool reported an error without a message".into());
        return Err(subject.error(Reason::ToolError, detail));
    }
    if let Some(value) = result.structured_content {
        return Ok(json(redact_value(redactor, value)));
    }
    if texts.is_empty() {
        if result.content.is_empty() {
            return Ok(ToolOutput::Empty);
        }
        // Only non-text blocks (images, resources): hand them over as the JSON they came in.
        let blocks: Vec<Value> = result
            .content
            .iter()
            .filter_map(|c: &ContentBlock| serde_json::to_value(c).ok())
            .collect();
        return Ok(json(redact_value(redactor, Value::Array(blocks))));
    }
    let text = texts.join("\n");
    match serde_json::from_str::<Value>(&text) {
        Ok(value) => Ok(json(redact_value(redactor, value))),
        Err(_) => Ok(ToolOutput::Text(redactor.redact(&text).into_owned())),
    }
}

fn json(value: Value) -> ToolOutput {
    ToolOutput::Json(serde_json::to_vec(&value).unwrap_or_else(|_| b"null".to_vec()))
}

/// `value` with every registered secret masked in its strings and keys. Depth is bounded by the
/// JSON parser's recursion limit, so this recursion is too.
pub(crate) fn redact_value(redactor: &Redactor, value: Value) -> Value {
    match value {
        Value::String(s) => Value::String(redactor.redact(&s).into_owned()),
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|v| redact_value(redactor, v))
                .collect(),
        ),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (redactor.redact(&k).into_owned(), redact_value(redactor, v)))
                .collect(),
        ),
        other => other,
    }
}

/// Maps a failed request. `closed` explains a closed connection for this transport.
pub(crate) fn service_error(subject: &Subject, error: ServiceError) -> ToolError {
    match error {
        ServiceError::McpError(data) => subject.error(
            Reason::UpstreamError,
            format!(
                "the server answered with error {}: {}",
                data.code.0,
                bounded(&data.message)
            ),
        ),
        ServiceError::TransportSend(e) => transport_error(subject, e.error.as_ref()),
        ServiceError::TransportClosed => subject.error(
            Reason::UpstreamUnavailable,
            "the connection closed before the answer (the server exited or crashed); it is \
             reconnected on the next call",
        ),
        ServiceError::Timeout { timeout } => subject.error(
            Reason::Timeout,
            format!("no answer within {} ms", timeout.as_millis()),
        ),
        ServiceError::Cancelled { .. } => {
            subject.error(Reason::UpstreamUnavailable, "the request was cancelled")
        }
        other => subject.error(Reason::UpstreamError, bounded(&other.to_string())),
    }
}

/// A failed request's transport error and the errors it was caused by, outermost first.
fn transport_chain(
    error: &ServiceError,
) -> impl Iterator<Item = &(dyn std::error::Error + 'static)> {
    let first = match error {
        ServiceError::TransportSend(e) => {
            Some(e.error.as_ref() as &(dyn std::error::Error + 'static))
        }
        _ => None,
    };
    std::iter::successors(first, |e| e.source())
}

/// Whether `error` means the request never reached the server: sending it failed to open its
/// connection. Only such a call is safe to send again, whatever the tool does.
pub(crate) fn never_sent(error: &ServiceError) -> bool {
    use rmcp::transport::streamable_http_client::StreamableHttpError as E;
    transport_chain(error)
        .find_map(|e| match e.downcast_ref::<E<reqwest::Error>>() {
            Some(E::Client(r)) => Some(r.is_connect()),
            _ => e
                .downcast_ref::<reqwest::Error>()
                .map(reqwest::Error::is_connect),
        })
        .unwrap_or(false)
}

/// Whether a failed request is the server refusing the credentials (HTTP 401): the one failure
/// a call is sent again for, with its credentials read afresh.
pub(crate) fn refused_credentials_of(error: &ServiceError) -> bool {
    use rmcp::transport::streamable_http_client::StreamableHttpError as E;
    transport_chain(error)
        .find_map(|e| e.downcast_ref::<E<reqwest::Error>>())
        .is_some_and(refused_credentials)
}

/// Maps a transport failure by what is in its error chain.
pub(crate) fn transport_error(
    subject: &Subject,
    error: &(dyn std::error::Error + Send + Sync + 'static),
) -> ToolError {
    use rmcp::transport::streamable_http_client::StreamableHttpError as E;
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = current {
        if let Some(c) = e.downcast_ref::<crate::credentials::binding::CredentialError>() {
            return subject.error(Reason::AuthFailed, c);
        }
        if let Some(http) = e.downcast_ref::<E<reqwest::Error>>() {
            return http_error(subject, http);
        }
        if let Some(r) = e.downcast_ref::<reqwest::Error>() {
            return reqwest_error(subject, r);
        }
        current = e.source();
    }
    subject.error(Reason::UpstreamUnavailable, bounded(&error.to_string()))
}

/// The server answered 401: with a challenge (rmcp's `AuthRequired`) or without one (the
/// `HttpStatus` the client types it as, see `http::typed_refusal`).
pub(crate) fn refused_credentials<C: std::error::Error + Send + Sync + 'static>(
    error: &rmcp::transport::streamable_http_client::StreamableHttpError<C>,
) -> bool {
    use rmcp::transport::streamable_http_client::StreamableHttpError as E;
    match error {
        E::AuthRequired(_) => true,
        E::HttpStatus(s) => s.status == 401,
        _ => false,
    }
}

/// Whether an SSE failure is rmcp refusing an event larger than `max_sse_event_size`. rmcp's
/// `BoundedSseStreamError::EventTooLarge` is private to it and reaches us boxed in
/// `sse_stream::Error::Body`, so only its text (`SSE event exceeded the maximum size of N
/// bytes`) says so; this is the one place that reads it.
fn sse_event_too_large(error: &rmcp::transport::streamable_http_client::SseError) -> bool {
    use rmcp::transport::streamable_http_client::SseError;
    matches!(error, SseError::Body(inner)
        if inner.to_string().starts_with("SSE event exceeded the maximum size"))
}

fn http_error(
    subject: &Subject,
    error: &rmcp::transport::streamable_http_client::StreamableHttpError<reqwest::Error>,
) -> ToolError {
    use rmcp::transport::streamable_http_client::StreamableHttpError as E;
    let text = error.to_string();
    match error {
        E::Io(io) => match io
            .get_ref()
            .and_then(|e| e.downcast_ref::<crate::credentials::binding::CredentialError>())
        {
            Some(c) => subject.error(Reason::AuthFailed, c),
            None => subject.error(Reason::UpstreamUnavailable, bounded(&text)),
        },
        E::Client(r) => reqwest_error(subject, r),
        E::ResponseBodyTooLarge { max_size } => subject.error(
            Reason::ResponseTooLarge,
            crate::call::contract::response_too_large(*max_size as u64),
        ),
        E::Sse(sse) if sse_event_too_large(sse) => subject.error(
            Reason::ResponseTooLarge,
            "a response event exceeds max_response_bytes",
        ),
        e if refused_credentials(e) => subject.error(
            Reason::AuthFailed,
            "the server refused the credentials (HTTP 401)",
        ),
        E::InsufficientScope(_) => subject.error(
            Reason::Forbidden,
            "the credentials lack the scope this needs (HTTP 403)",
        ),
        E::HttpStatus(s) if s.status == 403 => {
            subject.error(Reason::Forbidden, "the server refused access (HTTP 403)")
        }
        E::HttpStatus(s) if s.status == 429 => subject.error(
            Reason::RateLimited,
            format!(
                "rate limited (HTTP 429, Retry-After: {})",
                s.retry_after.as_deref().unwrap_or("not given")
            ),
        ),
        E::HttpStatus(s) => subject.error(
            Reason::UpstreamUnavailable,
            format!("the server answered HTTP {}", s.status),
        ),
        E::SessionExpired | E::SessionRecoveryTimeout | E::ReinitializationFailed(_) => subject
            .error(
                Reason::UpstreamUnavailable,
                format!("the session could not be renewed: {}", bounded(&text)),
            ),
        _ => subject.error(Reason::UpstreamError, bounded(&text)),
    }
}

fn reqwest_error(subject: &Subject, error: &reqwest::Error) -> ToolError {
    if error.is_timeout() {
        return subject.error(Reason::Timeout, "the HTTP request timed out");
    }
    // reqwest's text names the URL, never headers; the redactor still runs over it.
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    subject.error(Reason::UpstreamUnavailable, bounded(&text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{CallToolResult, ContentBlock};
    use serde_json::json;

    #[test]
    fn http_transport_errors_map_to_their_reasons() {
        use rmcp::transport::streamable_http_client::{
            AuthRequiredError, HttpStatusError, InsufficientScopeError, SseError,
            StreamableHttpError as E,
        };
        let r = Redactor::new();
        let map = |e: E<reqwest::Error>| {
            let t = http_error(&subject(&r), &e);
            (t.reason, t.message)
        };
        let too_big = SseError::Body(Box::new(std::io::Error::other(
            "SSE event exceeded the maximum size of 4096 bytes",
        )));
        assert_eq!(
            map(E::Sse(too_big)),
            (
                Reason::ResponseTooLarge,
                "upstream `up` tool `t`: a response event exceeds max_response_bytes".into()
            )
        );
        // The size refusal is rmcp's own error, boxed as the body's: a body error that only
        // mentions a size is not it.
        let mentions = SseError::Body(Box::new(std::io::Error::other(
            "the upstream said: exceeded the maximum size",
        )));
        assert_eq!(map(E::Sse(mentions)).0, Reason::UpstreamError);
        assert_eq!(
            map(E::Sse(SseError::InvalidLine)),
            (
                Reason::UpstreamError,
                "upstream `up` tool `t`: SSE error: invalid line".into()
            )
        );
        assert_eq!(
            map(E::AuthRequired(AuthRequiredError::new("Bearer".into()))),
            (
                Reason::AuthFailed,
                "upstream `up` tool `t`: the server refused the credentials (HTTP 401)".into()
            )
        );
        let scope =
            InsufficientScopeError::new("Bearer scope=\"logs\"".into(), Some("logs".into()));
        assert_eq!(
            map(E::InsufficientScope(scope)),
            (
                Reason::Forbidden,
                "upstream `up` tool `t`: the credentials lack the scope this needs (HTTP 403)"
                    .into()
            )
        );
        // A refusal without a challenge, by its status (`http::typed_refusal` types rmcp's
        // text), whatever its body said.
        let status = |code| map(E::HttpStatus(HttpStatusError::new(code, None)));
        assert_eq!(
            status(401),
            (
                Reason::AuthFailed,
                "upstream `up` tool `t`: the server refused the credentials (HTTP 401)".into()
            )
        );
        assert_eq!(
            status(403),
            (
                Reason::Forbidden,
                "upstream `up` tool `t`: the server refused access (HTTP 403)".into()
            )
        );
        // Text is never read for a status here: what it says is the diagnosis.
        let unexpected = |body: &'static str| map(E::UnexpectedServerResponse(body.into()));
        assert_eq!(
            unexpected("HTTP 401 Unauthorized"),
            (
                Reason::UpstreamError,
                "upstream `up` tool `t`: unexpected server response: HTTP 401 Unauthorized".into()
            )
        );
        assert_eq!(
            unexpected("<html>"),
            (
                Reason::UpstreamError,
                "upstream `up` tool `t`: unexpected server response: <html>".into()
            )
        );
        for (e, why) in [
            (E::SessionExpired, "Session expired (HTTP 404)"),
            (
                E::SessionRecoveryTimeout,
                "Session recovery timed out; the server may have processed the POST",
            ),
        ] {
            assert_eq!(
                map(e),
                (
                    Reason::UpstreamUnavailable,
                    format!("upstream `up` tool `t`: the session could not be renewed: {why}")
                )
            );
        }
    }

    fn subject(r: &Redactor) -> Subject<'_> {
        Subject {
            upstream: "up",
            tool: Some("t"),
            redactor: r,
            step: None,
        }
    }

    fn result(
        content: Vec<ContentBlock>,
        structured: Option<Value>,
        error: bool,
    ) -> CallToolResult {
        let mut r = if error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        };
        r.structured_content = structured;
        r
    }

    #[test]
    fn each_result_shape_maps_to_its_output() {
        let r = Redactor::new();
        r.register("s3cret-value");
        let s = subject(&r);
        let cases: Vec<(CallToolResult, Result<ToolOutput, ToolError>)> = vec![
            (
                result(
                    vec![ContentBlock::text("ignored")],
                    Some(json!({"a": "s3cret-value"})),
                    false,
                ),
                Ok(ToolOutput::Json(br#"{"a":"[REDACTED]"}"#.to_vec())),
            ),
            (
                result(vec![ContentBlock::text(" [1, 2] ")], None, false),
                Ok(ToolOutput::Json(b"[1,2]".to_vec())),
            ),
            (
                result(vec![ContentBlock::text("Echo: s3cret-value")], None, false),
                Ok(ToolOutput::Text("Echo: [REDACTED]".into())),
            ),
            (result(vec![], None, false), Ok(ToolOutput::Empty)),
            (
                result(vec![ContentBlock::text("bad s3cret-value")], None, true),
                Err(ToolError {
                    reason: Reason::ToolError,
                    message: "upstream `up` tool `t`: bad [REDACTED]".into(),
                }),
            ),
            (
                result(vec![], None, true),
                Err(ToolError {
                    reason: Reason::ToolError,
                    message: "upstream `up` tool `t`: the tool reported an error without a \
                              message"
                        .into(),
                }),
            ),
        ];
        assert!(!cases.is_empty());
        for (input, want) in cases {
            assert_eq!(unwrap(&s, input), want);
        }
    }

    #[test]
    fn tool_error_detail_is_bounded_at_a_char_boundary() {
        let r = Redactor::new();
        let exact = "é".repeat(MAX_DETAIL / 2); // 500 bytes: kept whole
        let e = unwrap(
            &subject(&r),
            result(vec![ContentBlock::text(exact.clone())], None, true),
        )
        .unwrap_err();
        assert_eq!(e.message, format!("upstream `up` tool `t`: {exact}"));
        let over = format!("{exact}é"); // 502 bytes: cut to 500 and marked
        let e = unwrap(
            &subject(&r),
            result(vec![ContentBlock::text(over)], None, true),
        )
        .unwrap_err();
        assert_eq!(e.message, format!("upstream `up` tool `t`: {exact}…"));
        // 501 bytes whose 500th is inside an `é`: the cut moves back before it.
        let straddling = format!("a{exact}");
        let cut = format!("a{}…", "é".repeat(MAX_DETAIL / 2 - 1));
        assert_eq!(bounded(&straddling), cut);
    }

    /// The one failure a call is sent again for is a typed 401; a credential that cannot be
    /// read is not one, whatever its message says.
    #[test]
    fn only_a_refusal_of_the_credentials_is_a_401() {
        use rmcp::transport::streamable_http_client::{
            AuthRequiredError, HttpStatusError, StreamableHttpError as E,
        };
        let sent = |e: E<reqwest::Error>| {
            ServiceError::TransportSend(rmcp::transport::DynamicTransportError::from_parts(
                "test",
                std::any::TypeId::of::<()>(),
                Box::new(e),
            ))
        };
        let status = |code| sent(E::HttpStatus(HttpStatusError::new(code, None)));
        assert!(refused_credentials_of(&status(401)));
        assert!(refused_credentials_of(&sent(E::AuthRequired(
            AuthRequiredError::new("Bearer".into())
        ))));
        assert!(!refused_credentials_of(&status(403)));
        assert!(!refused_credentials_of(&status(503)));
        let unreadable = || {
            sent(E::Io(std::io::Error::other(
                crate::credentials::binding::CredentialError(
                    "credential `t`: the token endpoint answered HTTP 401".into(),
                ),
            )))
        };
        assert!(!refused_credentials_of(&unreadable()));
        let r = Redactor::new();
        assert_eq!(
            service_error(&subject(&r), unreadable()).reason,
            Reason::AuthFailed,
            "still an auth failure, just not one to send again"
        );
        assert!(!refused_credentials_of(&ServiceError::TransportClosed));
    }

    #[test]
    fn a_protocol_error_is_an_upstream_error_whatever_it_says() {
        let r = Redactor::new();
        let s = subject(&r);
        let e = service_error(
            &s,
            ServiceError::McpError(rmcp::ErrorData::new(
                rmcp::model::ErrorCode(-32602),
                "Unknown tool: t",
                None,
            )),
        );
        assert_eq!(e.reason, Reason::UpstreamError);
        assert_eq!(
            e.message,
            "upstream `up` tool `t`: the server answered with error -32602: Unknown tool: t"
        );
        // An error that reads like the transport's size refusal is still the server's own: the
        // refusal reaches the caller as a value (`stdio::Refusals`), never through an error.
        let forged = service_error(
            &s,
            ServiceError::McpError(rmcp::ErrorData::new(
                rmcp::model::ErrorCode(-32_088),
                "the response exceeds max_response_bytes (10 bytes)",
                Some(json!("ptc:response_too_large")),
            )),
        );
        assert_eq!(forged.reason, Reason::UpstreamError);
    }
}
