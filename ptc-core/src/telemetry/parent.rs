//! The caller's trace context: the W3C `traceparent` and `tracestate` a request came with.

use opentelemetry::Context;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry_sdk::propagation::TraceContextPropagator;

/// The W3C trace context a request came with (`traceparent`, and `tracestate` when sent): the
/// evaluation's span continues that trace as a child of the caller's span.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceParent {
    /// `version-traceid-parentid-flags`, as sent.
    pub traceparent: String,
    /// The vendors' state, as sent.
    pub tracestate: Option<String>,
}

impl TraceParent {
    /// From an MCP request's `_meta` (`traceparent`, `tracestate`), when it holds a string
    /// `traceparent`.
    pub fn from_meta(meta: &serde_json::Map<String, serde_json::Value>) -> Option<Self> {
        let text = |key: &str| meta.get(key).and_then(|v| v.as_str()).map(str::to_string);
        Some(TraceParent {
            traceparent: text("traceparent")?,
            tracestate: text("tracestate"),
        })
    }

    /// From HTTP headers (`traceparent`, `tracestate`), when a readable `traceparent` is there.
    pub fn from_headers(headers: &axum::http::HeaderMap) -> Option<Self> {
        let text = |key: &str| {
            headers
                .get(key)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        Some(TraceParent {
            traceparent: text("traceparent")?,
            tracestate: text("tracestate"),
        })
    }

    /// From the environment (`TRACEPARENT`, `TRACESTATE`), the carrier a CI job or a script
    /// passes its trace to a command with.
    pub fn from_env() -> Option<Self> {
        Some(TraceParent {
            traceparent: std::env::var("TRACEPARENT").ok()?,
            tracestate: std::env::var("TRACESTATE").ok(),
        })
    }

    /// The remote parent it names; an empty context when it is malformed (W3C: a bad
    /// `traceparent` is ignored and a new trace starts).
    pub(super) fn context(&self) -> Context {
        // From an empty context, not the thread's current one: a bad `traceparent` must not make
        // the evaluation a child of whatever span the thread has.
        TraceContextPropagator::new().extract_with_context(&Context::new(), self)
    }
}

impl Extractor for TraceParent {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            "traceparent" => Some(&self.traceparent),
            "tracestate" => self.tracestate.as_deref(),
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        match self.tracestate {
            Some(_) => vec!["traceparent", "tracestate"],
            None => vec!["traceparent"],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::TraceParent;

    #[test]
    fn a_trace_parent_is_read_from_meta_and_headers() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let meta = serde_json::json!({"traceparent": tp, "tracestate": "a=1", "other": 1});
        let from_meta = TraceParent::from_meta(meta.as_object().unwrap()).unwrap();
        assert_eq!(from_meta.traceparent, tp);
        assert_eq!(from_meta.tracestate.as_deref(), Some("a=1"));
        assert_eq!(
            TraceParent::from_meta(serde_json::json!({"traceparent": 7}).as_object().unwrap()),
            None
        );
        let mut headers = axum::http::HeaderMap::new();
        assert_eq!(TraceParent::from_headers(&headers), None);
        headers.insert("traceparent", tp.parse().unwrap());
        let from_headers = TraceParent::from_headers(&headers).unwrap();
        assert_eq!(
            (from_headers.traceparent.as_str(), from_headers.tracestate),
            (tp, None)
        );
    }

    #[test]
    fn a_trace_parent_lists_the_keys_it_holds() {
        use opentelemetry::propagation::Extractor;
        let mut parent = TraceParent {
            traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into(),
            tracestate: None,
        };
        assert_eq!(parent.keys(), ["traceparent"]);
        parent.tracestate = Some("vendor=opaque".into());
        assert_eq!(parent.keys(), ["traceparent", "tracestate"]);
    }

    #[test]
    fn a_malformed_trace_parent_names_no_parent() {
        use opentelemetry::trace::TraceContextExt;
        let good = TraceParent {
            traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into(),
            tracestate: None,
        };
        let cx = good.context();
        assert!(cx.span().span_context().is_valid());
        assert!(cx.span().span_context().is_remote());
        // Nor the span the thread has current.
        let _current = cx.attach();
        for bad in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "garbage",
        ] {
            let cx = TraceParent {
                traceparent: bad.into(),
                tracestate: None,
            }
            .context();
            assert!(!cx.span().span_context().is_valid(), "{bad}");
        }
    }
}
