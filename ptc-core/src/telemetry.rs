//! Traces: one OpenTelemetry span per evaluation (`lisp_eval`), a child per upstream call
//! (`tool/call`, and each page of `tool/pages`) and a child of a call per approval wait
//! (`approval`), exported as OTLP over HTTP/protobuf (docs/operations.md#traces).
//!
//! Off unless configured ([`TraceConfig::from_env`]): then no tracer exists, no span is made and
//! nothing is added to an upstream request, so tracing off costs one relaxed atomic load per
//! evaluation and per call. On, the spans are made with the SDK's tracer directly (not through
//! `tracing`, whose registry and field visitors cost more than the span itself), so the logs and
//! the traces are separate: no log event becomes a span event. A span's attributes are names,
//! hashes, counts and reasons: never a program, an argument, a result, a header or a secret.
//!
//! A span is current the way OpenTelemetry makes it so: its context is attached while the future
//! it covers is polled ([`traced`]), which is where an upstream request reads the context it
//! propagates ([`outgoing`]) and the call's status is noted.
//!
//! A span starts where it starts (its identity is needed at once, by its children and by the
//! requests it propagates to) and ends off the program's path (`telemetry/ending.rs`). Export
//! runs on the SDK's batch processor thread, so an evaluation never waits for a collector;
//! [`Traces`] flushes what is queued when it is dropped.

mod ending;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use futures_util::future::Either;
use opentelemetry::context::FutureExt as _;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{
    Span as _, SpanKind, Status, TraceContextExt, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider, Span};

use ending::{Ended, Ending};

use crate::http_client::{ReadError, describe, read_capped};
use crate::records::RunRecords;

/// Whether spans are made: a [`Traces`] is running and recording.
static ON: AtomicBool = AtomicBool::new(false);

/// The running [`Traces`]' tracer and the queue its spans end through.
static TRACER: RwLock<Option<Active>> = RwLock::new(None);

#[derive(Debug)]
struct Active {
    tracer: SdkTracer,
    ending: Arc<Ending>,
}

/// Whether traces are on: an exporter is running and recording.
pub fn is_on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Turns span making on or off while the exporter runs. [`Traces::start`] turns it on; the bench
/// turns it off to measure the same program without traces in the same process.
pub fn set_recording(on: bool) {
    let running = TRACER.read().is_ok_and(|t| t.is_some());
    ON.store(on && running, Ordering::Relaxed);
}

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
    fn context(&self) -> Context {
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

/// One of ptc's spans; none when traces are off. Ended by its `*_ended` function, or when its
/// last clone is dropped.
#[derive(Clone, Debug, Default)]
pub struct TraceSpan(Option<Arc<Open>>);

/// A span that has not ended.
#[derive(Debug)]
struct Open {
    /// What the span's children and the requests it propagates to see while it is current: its
    /// identity, and the notes taken then ([`note`]).
    cx: Context,
    /// The SDK's span, until it ends.
    span: Mutex<Option<Span>>,
    ending: Arc<Ending>,
}

/// Attributes noted on a span while it is current, on whichever thread polls its future.
#[derive(Debug, Default)]
struct Notes(Mutex<Vec<KeyValue>>);

impl TraceSpan {
    /// Runs `f` with this span current (the command-line `eval`, whose program runs on the
    /// calling thread): the calls `f` makes are its children.
    pub fn in_scope<T>(&self, f: impl FnOnce() -> T) -> T {
        let _current = self.0.as_ref().map(|open| open.cx.clone().attach());
        f()
    }

    /// Ends the span with `attributes`, the notes taken on it and `status`; the span is finished
    /// off the caller's path (`telemetry/ending.rs`). Once: a second end does nothing.
    fn end_with(&self, attributes: impl IntoIterator<Item = KeyValue>, status: Option<Status>) {
        let Some(open) = &self.0 else { return };
        let mut attributes: Vec<KeyValue> = attributes.into_iter().collect();
        let at = SystemTime::now();
        let Some(span) = open.span.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return;
        };
        if let Some(notes) = open.cx.get::<Notes>() {
            attributes.append(&mut notes.0.lock().unwrap_or_else(|e| e.into_inner()));
        }
        open.ending.end(Ended {
            span,
            attributes,
            status,
            at,
        });
    }

    /// Ends the span with `attributes`, `ptc.outcome`, `ptc.reason` and, for an error, the span's
    /// status (its reason, never the message: a message may quote the program's data).
    fn end(&self, attributes: impl IntoIterator<Item = KeyValue>, reason: Option<&str>) {
        // Traces off: nothing is collected, formatted or allocated.
        if self.0.is_none() {
            return;
        }
        let mut attributes: Vec<KeyValue> = attributes.into_iter().collect();
        let status = match reason {
            None => {
                attributes.push(KeyValue::new("ptc.outcome", "ok"));
                None
            }
            Some(r) => {
                attributes.push(KeyValue::new("ptc.outcome", "error"));
                attributes.push(KeyValue::new("ptc.reason", r.to_string()));
                Some(Status::error(r.to_string()))
            }
        };
        self.end_with(attributes, status);
    }
}

/// `fut` with `span` current while it is polled; `fut` itself when traces are off.
pub(crate) fn traced<F: Future>(
    fut: F,
    span: &TraceSpan,
) -> impl Future<Output = F::Output> + use<F> {
    match &span.0 {
        None => Either::Left(fut),
        Some(open) => Either::Right(fut.with_context(open.cx.clone())),
    }
}

/// A new span named `name` of `kind` with `attributes`, a child of `parent`'s span (a root when
/// it has none); none when no exporter is running.
fn start(
    name: &'static str,
    kind: SpanKind,
    attributes: Vec<KeyValue>,
    parent: &Context,
) -> TraceSpan {
    let Ok(active) = TRACER.read() else {
        return TraceSpan(None);
    };
    let Some(active) = active.as_ref() else {
        return TraceSpan(None);
    };
    let span = active
        .tracer
        .span_builder(name)
        .with_kind(kind)
        .with_attributes(attributes)
        .start_with_context(&active.tracer, parent);
    // The span's identity, as a propagator would carry it (`with_remote_span_context` takes the
    // span context as it is: this one is local); the SDK's span stays with `Open` to be ended.
    let cx = Context::new()
        .with_value(Notes::default())
        .with_remote_span_context(span.span_context().clone());
    TraceSpan(Some(Arc::new(Open {
        cx,
        span: Mutex::new(Some(span)),
        ending: active.ending.clone(),
    })))
}

/// The span the calls of one program run are children of (the evaluation's), held as its
/// OpenTelemetry context.
#[derive(Clone, Debug)]
pub(crate) struct Parent(Context);

impl Parent {
    /// The current span's, when traces are on and a span is current.
    pub(crate) fn current() -> Option<Parent> {
        if !is_on() {
            return None;
        }
        let cx = Context::current();
        cx.span().span_context().is_valid().then_some(Parent(cx))
    }
}

/// The span of one evaluation of `program` for `caller`, continuing `parent`'s trace when the
/// request carried one; none when traces are off. `hash` gives the program's hash
/// (`server::audit::program_hash`), asked only when traces are on. Ended by [`eval_ended`].
pub fn eval_span(
    program: &str,
    hash: impl FnOnce(&str) -> String,
    caller: &str,
    parent: Option<&TraceParent>,
) -> TraceSpan {
    if !is_on() {
        return TraceSpan(None);
    }
    let attributes = vec![
        KeyValue::new("ptc.program.sha256", hash(program)),
        KeyValue::new("ptc.program.bytes", int(program.len() as u64)),
        KeyValue::new("ptc.caller", caller.to_string()),
    ];
    // A root unless the caller sent its trace: never a child of whatever the host's thread had.
    let parent = parent.map_or_else(Context::new, TraceParent::context);
    start("lisp_eval", SpanKind::Server, attributes, &parent)
}

/// Records how the evaluation of `span` ended: its error's reason (`None`: a value), what it
/// read from upstreams and what it answered with.
pub fn eval_ended(
    span: &TraceSpan,
    reason: Option<&str>,
    records: &RunRecords,
    prints_bytes: usize,
) {
    let m = &records.ptc_metrics;
    span.end(
        [
            KeyValue::new("ptc.upstream.calls", int(m.upstream_call_count)),
            KeyValue::new("ptc.upstream.bytes", int(m.upstream_result_bytes)),
            KeyValue::new("ptc.result.bytes", int(m.final_result_bytes)),
            KeyValue::new("ptc.prints.bytes", int(prints_bytes as u64)),
        ],
        reason,
    );
}

/// A count as an OpenTelemetry integer.
fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The span of one upstream call of `server/tool` over `transport` (page `page` of a
/// `tool/pages`), a child of `parent`; none when there is no parent (traces off).
/// Ended by [`call_ended`].
pub(crate) fn call_span(
    parent: Option<&Parent>,
    server: &str,
    tool: &str,
    transport: impl FnOnce() -> &'static str,
    page: Option<u64>,
) -> TraceSpan {
    let Some(parent) = parent else {
        return TraceSpan(None);
    };
    let mut attributes = vec![
        KeyValue::new("ptc.upstream", server.to_string()),
        KeyValue::new("ptc.tool", tool.to_string()),
        KeyValue::new("ptc.transport", transport()),
    ];
    let name = match page {
        None => "tool/call",
        Some(n) => {
            attributes.push(KeyValue::new("ptc.page", int(n)));
            "tool/pages"
        }
    };
    start(name, SpanKind::Client, attributes, &parent.0)
}

/// Records how the call of `span` ended: its reason (`None`: answered), the answer's bytes and
/// the time since `started`.
pub(crate) fn call_ended(span: &TraceSpan, reason: Option<&str>, bytes: u64, started: Instant) {
    span.end(
        [
            KeyValue::new("ptc.bytes", int(bytes)),
            KeyValue::new("ptc.duration_ms", int(started.elapsed().as_millis() as u64)),
        ],
        reason,
    );
}

/// The span of a wait for a person's approval, a child of the call waiting (the current span);
/// none when traces are off. Ended by [`approval_ended`].
pub(crate) fn approval_span() -> TraceSpan {
    if !is_on() {
        return TraceSpan(None);
    }
    start(
        "approval",
        SpanKind::Internal,
        Vec::new(),
        &Context::current(),
    )
}

/// Records the person's answer (`approved`, `declined`, `unavailable`); the span ends.
pub(crate) fn approval_ended(span: &TraceSpan, answer: &str) {
    span.end_with([KeyValue::new("ptc.approval", answer.to_string())], None);
}

/// Notes `attribute` on the current span (the call's), when traces are on.
fn note(attribute: impl FnOnce() -> KeyValue) {
    if is_on() {
        Context::map_current(|cx| {
            if let Some(notes) = cx.get::<Notes>() {
                let mut notes = notes.0.lock().unwrap_or_else(|e| e.into_inner());
                notes.push(attribute());
            }
        });
    }
}

/// Notes the HTTP status an upstream answered the current call with.
pub(crate) fn note_status(status: u16) {
    note(|| KeyValue::new("http.response.status_code", i64::from(status)));
}

/// Notes how many times the current call has been retried so far.
pub(crate) fn note_retries(retries: u32) {
    note(|| KeyValue::new("ptc.retries", i64::from(retries)));
}

/// The trace context an upstream request of the current call carries (`traceparent` and
/// `tracestate`, as HTTP headers or MCP `_meta` keys), so the upstream's own spans join the
/// trace; none when traces are off or no call span is current.
pub(crate) fn outgoing() -> Vec<(&'static str, String)> {
    if !is_on() {
        return Vec::new();
    }
    Context::map_current(carried)
}

/// The `traceparent` and `tracestate` that carry `cx` on.
fn carried(cx: &Context) -> Vec<(&'static str, String)> {
    let mut out = Outgoing(Vec::new());
    TraceContextPropagator::new().inject_context(cx, &mut out);
    out.0
}

/// The propagator's carrier for [`outgoing`].
struct Outgoing(Vec<(&'static str, String)>);

impl Injector for Outgoing {
    fn set(&mut self, key: &str, value: String) {
        let key = match key {
            "traceparent" => "traceparent",
            // The propagator writes an empty state too; an empty header says nothing.
            "tracestate" if !value.is_empty() => "tracestate",
            _ => return,
        };
        self.0.push((key, value));
    }
}

/// Where traces go and whose they are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceConfig {
    /// The collector's OTLP/HTTP base URL (`--otlp-endpoint`; traces are POSTed to
    /// `{endpoint}/v1/traces`); `None`: the `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` variable says.
    pub endpoint: Option<String>,
    /// `service.name` unless `OTEL_SERVICE_NAME` or `OTEL_RESOURCE_ATTRIBUTES` name one.
    pub service: String,
}

impl TraceConfig {
    /// Traces as the flag `--otlp-endpoint` (`flag`) and the standard variables configure them:
    /// `None` (off) unless the flag or an `OTEL_EXPORTER_OTLP_*ENDPOINT` variable is set, and
    /// off too with `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`. A protocol other
    /// than `http/protobuf`, another exporter or a flag that is not an http(s) URL is an error.
    pub fn from_env(flag: Option<&str>, service: &str) -> Result<Option<TraceConfig>, String> {
        Self::decide(flag, service, |name| std::env::var(name).ok())
    }

    fn decide(
        flag: Option<&str>,
        service: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<TraceConfig>, String> {
        let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let configured = flag.is_some()
            || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some()
            || set("OTEL_EXPORTER_OTLP_ENDPOINT").is_some();
        if !configured
            || set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
        {
            return Ok(None);
        }
        match set("OTEL_TRACES_EXPORTER").as_deref().map(str::trim) {
            None | Some("otlp") => {}
            Some("none") => return Ok(None),
            Some(other) => {
                return Err(format!(
                    "OTEL_TRACES_EXPORTER is `{other}`: ptc exports traces with `otlp` (or \
                     `none` for no traces)"
                ));
            }
        }
        for var in [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ] {
            if let Some(p) = set(var)
                && p.trim() != "http/protobuf"
            {
                return Err(format!(
                    "{var} is `{}`: ptc exports traces as OTLP over HTTP with protobuf only (no \
                     gRPC); set it to http/protobuf (the collector's port 4318) or leave it unset",
                    p.trim()
                ));
            }
        }
        let endpoint = match flag {
            None => None,
            Some(f) => Some(base_url(f)?),
        };
        Ok(Some(TraceConfig {
            endpoint,
            service: service.to_string(),
        }))
    }
}

/// The `--otlp-endpoint` value, checked: an http(s) URL without credentials (a collector's
/// token goes in `OTEL_EXPORTER_OTLP_HEADERS`), with no trailing `/`.
fn base_url(given: &str) -> Result<String, String> {
    let url = url::Url::parse(given.trim())
        .map_err(|e| format!("--otlp-endpoint `{given}` is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "--otlp-endpoint `{given}`: use an http:// or https:// URL (the collector's \
             OTLP/HTTP receiver, port 4318 by default)"
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(
            "--otlp-endpoint embeds credentials in the URL; give the collector's token in \
             OTEL_EXPORTER_OTLP_HEADERS instead"
                .into(),
        );
    }
    Ok(url.as_str().trim_end_matches('/').to_string())
}

/// The running exporter, whose tracer makes the process's spans (one at a time). Dropping it
/// stops making spans, then exports what is queued and stops the exporter (within a few seconds
/// when the collector does not answer).
#[derive(Debug)]
pub struct Traces {
    provider: SdkTracerProvider,
    ending: Arc<Ending>,
}

/// How long one export request may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of a collector's answer is read (an OTLP answer is a few bytes).
const ANSWER_BYTES: u64 = 64 * 1024;

impl Traces {
    /// Starts the exporter (batch processor and its thread) for `config` and makes spans from
    /// now on. An error when another [`Traces`] is running in the process.
    pub fn start(config: &TraceConfig) -> Result<Traces, String> {
        let mut tracer = TRACER.write().unwrap_or_else(|e| e.into_inner());
        if tracer.is_some() {
            return Err("traces are exported already in this process".into());
        }
        let client = ExportClient::new()?;
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(client)
            .with_protocol(Protocol::HttpBinary);
        if let Some(base) = &config.endpoint {
            exporter = exporter.with_endpoint(format!("{base}/v1/traces"));
        }
        let exporter = exporter
            .build()
            .map_err(|e| format!("cannot start the OTLP trace exporter: {e}"))?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource(&config.service))
            .build();
        let ending = Ending::start()?;
        *tracer = Some(Active {
            tracer: provider.tracer("ptc"),
            ending: ending.clone(),
        });
        drop(tracer);
        set_recording(true);
        Ok(Traces { provider, ending })
    }

    /// Exports every span ended so far, waiting until the collector has answered.
    pub fn flush(&self) -> Result<(), String> {
        self.ending.drain();
        self.provider
            .force_flush()
            .map_err(|e| format!("the trace export failed: {e}"))
    }
}

impl Drop for Traces {
    fn drop(&mut self) {
        *TRACER.write().unwrap_or_else(|e| e.into_inner()) = None;
        set_recording(false);
        self.ending.stop();
        let _ = self.provider.shutdown();
    }
}

/// The resource spans are reported under: the SDK's (`OTEL_SERVICE_NAME`,
/// `OTEL_RESOURCE_ATTRIBUTES`, the SDK's own), with `service` as the name when those give none.
fn resource(service: &str) -> opentelemetry_sdk::Resource {
    let detected = opentelemetry_sdk::Resource::builder().build();
    let unnamed = detected
        .get(&opentelemetry::Key::from_static_str("service.name"))
        .is_none_or(|v| v.as_str().starts_with("unknown_service"));
    if unnamed {
        opentelemetry_sdk::Resource::builder()
            .with_service_name(service.to_string())
            .build()
    } else {
        detected
    }
}

/// The exporter's HTTP client: ptc's reqwest client (ring TLS, proxies), driven by a runtime of
/// its own. The batch processor calls it on its own thread and blocks on each export there, so
/// that thread is where the runtime runs: no evaluation's runtime is borrowed, and a test's
/// short-lived runtimes do not take the exporter down with them.
#[derive(Debug)]
struct ExportClient {
    http: reqwest::Client,
    runtime: Arc<tokio::runtime::Runtime>,
}

impl ExportClient {
    fn new() -> Result<Self, String> {
        let http = crate::http_client::builder()
            .timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| format!("cannot build the trace exporter's HTTP client: {e}"))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the trace exporter's runtime: {e}"))?;
        Ok(ExportClient {
            http,
            runtime: Arc::new(runtime),
        })
    }

    async fn send(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let request = reqwest::Request::try_from(request)?;
        let answer = self
            .http
            .execute(request)
            .await
            .map_err(|e| format!("OTLP export: {}", describe(&e)))?;
        let status = answer.status();
        let headers = answer.headers().clone();
        let body = match read_capped(answer, ANSWER_BYTES).await {
            Ok(b) => b,
            Err(ReadError::TooLarge) => {
                return Err(format!(
                    "OTLP export: the collector's answer is over {ANSWER_BYTES} bytes"
                )
                .into());
            }
            Err(ReadError::Failed(e)) => {
                return Err(format!("OTLP export: {}", describe(&e)).into());
            }
        };
        let mut out = Response::builder().status(status).body(Bytes::from(body))?;
        *out.headers_mut() = headers;
        Ok(out)
    }
}

impl HttpClient for ExportClient {
    fn send_bytes<'life0, 'async_trait>(
        &'life0 self,
        request: Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            // The batch processor's thread runs no runtime; a caller inside one would deadlock
            // (or panic) blocking on this one.
            if tokio::runtime::Handle::try_current().is_ok() {
                return Err("the OTLP exporter runs on the batch processor's thread only".into());
            }
            self.runtime.block_on(self.send(request))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{TraceConfig, TraceParent};
    use std::collections::HashMap;

    fn decide(flag: Option<&str>, vars: &[(&str, &str)]) -> Result<Option<TraceConfig>, String> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        TraceConfig::decide(flag, "ptc", |name| vars.get(name).cloned())
    }

    fn on(endpoint: Option<&str>) -> Result<Option<TraceConfig>, String> {
        Ok(Some(TraceConfig {
            endpoint: endpoint.map(str::to_string),
            service: "ptc".into(),
        }))
    }

    #[test]
    fn traces_are_off_unless_an_endpoint_is_configured() {
        assert_eq!(decide(None, &[]), Ok(None));
        // Other OTEL variables alone do not turn traces on, nor does an empty endpoint.
        assert_eq!(
            decide(
                None,
                &[
                    ("OTEL_SERVICE_NAME", "x"),
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", " "),
                    ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                ]
            ),
            Ok(None)
        );
        assert_eq!(
            decide(None, &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")]),
            on(None)
        );
        assert_eq!(
            decide(
                None,
                &[(
                    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                    "http://c:4318/v1/traces"
                )]
            ),
            on(None)
        );
        assert_eq!(
            decide(Some("http://c:4318/"), &[]),
            on(Some("http://c:4318"))
        );
    }

    #[test]
    fn the_sdk_switches_turn_configured_traces_off() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318");
        assert_eq!(
            decide(None, &[endpoint, ("OTEL_SDK_DISABLED", "TRUE")]),
            Ok(None)
        );
        assert_eq!(
            decide(Some("http://c:4318"), &[("OTEL_SDK_DISABLED", "true")]),
            Ok(None)
        );
        assert_eq!(
            decide(None, &[endpoint, ("OTEL_SDK_DISABLED", "false")]),
            on(None)
        );
        assert_eq!(
            decide(None, &[endpoint, ("OTEL_TRACES_EXPORTER", "none")]),
            Ok(None)
        );
        assert_eq!(
            decide(None, &[endpoint, ("OTEL_TRACES_EXPORTER", "otlp")]),
            on(None)
        );
        let e = decide(None, &[endpoint, ("OTEL_TRACES_EXPORTER", "zipkin")]).unwrap_err();
        assert!(e.starts_with("OTEL_TRACES_EXPORTER is `zipkin`"), "{e}");
    }

    #[test]
    fn a_protocol_other_than_http_protobuf_is_refused_naming_the_variable() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318");
        assert_eq!(
            decide(
                None,
                &[endpoint, ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")]
            ),
            on(None)
        );
        for (var, value) in [
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"),
        ] {
            let e = decide(None, &[endpoint, (var, value)]).unwrap_err();
            assert!(e.starts_with(&format!("{var} is `{value}`")), "{e}");
            assert!(e.contains("no gRPC"), "{e}");
        }
    }

    #[test]
    fn the_flag_must_be_an_http_url_without_credentials() {
        for bad in ["collector:4318", "ftp://c/", "not a url"] {
            let e = decide(Some(bad), &[]).unwrap_err();
            assert!(e.starts_with("--otlp-endpoint"), "{bad}: {e}");
        }
        for with in [
            "https://user:s3cret@c:4318",
            "https://user@c:4318",
            "https://:s3cret@c:4318",
        ] {
            let e = decide(Some(with), &[]).unwrap_err();
            assert!(e.contains("embeds credentials"), "{with}: {e}");
            assert!(!e.contains("s3cret"), "{e}");
        }
        assert_eq!(
            decide(Some("https://c.example.com:4318/otlp/"), &[]),
            on(Some("https://c.example.com:4318/otlp"))
        );
    }

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
    fn with_traces_off_no_span_is_made_and_nothing_is_propagated() {
        // Nothing in this test binary starts an exporter, so recording cannot be turned on.
        super::set_recording(true);
        assert!(!super::is_on());
        let parent = TraceParent {
            traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into(),
            tracestate: None,
        };
        let hash = |_: &str| -> String { panic!("the program is hashed with traces off") };
        assert!(
            super::eval_span("(+ 1 2)", hash, "local", Some(&parent))
                .0
                .is_none()
        );
        assert!(super::Parent::current().is_none());
        let transport = || -> &'static str { panic!("the transport is looked up with traces off") };
        assert!(
            super::call_span(None, "obs", "list", transport, None)
                .0
                .is_none()
        );
        assert!(super::approval_span().0.is_none());
        assert!(super::outgoing().is_empty());
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
    fn a_call_carries_the_trace_and_its_state_on() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let with_state = TraceParent {
            traceparent: tp.into(),
            tracestate: Some("vendor=opaque".into()),
        };
        assert_eq!(
            super::carried(&with_state.context()),
            [
                ("traceparent", tp.to_string()),
                ("tracestate", "vendor=opaque".to_string())
            ]
        );
        let without = TraceParent {
            traceparent: tp.into(),
            tracestate: None,
        };
        assert_eq!(
            super::carried(&without.context()),
            [("traceparent", tp.to_string())]
        );
    }

    #[test]
    fn a_collectors_answer_is_read_up_to_its_cap() {
        // A collector answering `n` bytes, on a runtime of its own: the client blocks on its own
        // runtime, as on the batch processor's thread.
        let rt = tokio::runtime::Runtime::new().unwrap();
        let addr = rt.block_on(async {
            let app =
                axum::Router::new().route(
                    "/v1/traces/{n}",
                    axum::routing::post(
                        |axum::extract::Path(n): axum::extract::Path<usize>| async move {
                            vec![b'x'; n]
                        },
                    ),
                );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(async move { axum::serve(listener, app).await });
            addr
        });
        let client = super::ExportClient::new().unwrap();
        let export = |n: u64| {
            let request = opentelemetry_http::Request::post(format!("http://{addr}/v1/traces/{n}"))
                .body(opentelemetry_http::Bytes::from_static(b"spans"))
                .unwrap();
            client.runtime.block_on(client.send(request))
        };
        let cap = super::ANSWER_BYTES;
        assert_eq!(cap, 64 * 1024);
        let answer = export(cap).expect("an answer at the cap is read");
        assert_eq!(answer.body().len() as u64, cap);
        let e = export(cap + 1).unwrap_err().to_string();
        assert_eq!(e, "OTLP export: the collector's answer is over 65536 bytes");
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
