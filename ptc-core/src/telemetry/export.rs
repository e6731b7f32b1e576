//! Where spans go: the configuration (`--otlp-endpoint`, the `OTEL_*` variables), the running
//! exporter ([`Traces`]) and its HTTP client.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{BatchSpanProcessor, SpanData, SpanExporter, SpanProcessor as _};

use super::record::Active;
use super::{ACTIVE, set_recording};
use crate::wire::http_client::{ReadError, describe, read_capped};

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

/// The running exporter: spans ended from its start until it is dropped go to its batch
/// processor, one per process. Dropping it stops making spans, then exports what is queued and
/// stops the exporter (within a few seconds when the collector does not answer).
#[derive(Debug)]
pub struct Traces {
    processor: Arc<BatchSpanProcessor>,
}

/// How long one export request may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of a collector's answer is read (an OTLP answer is a few bytes).
const ANSWER_BYTES: u64 = 64 * 1024;

impl Traces {
    /// Starts the exporter (batch processor and its thread, `OTEL_BSP_*` honoured) for `config`
    /// and makes spans from now on. An error when another [`Traces`] is running in the process.
    pub fn start(config: &TraceConfig) -> Result<Traces, String> {
        let mut active = ACTIVE.write().unwrap_or_else(|e| e.into_inner());
        if active.is_some() {
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
        let mut exporter = exporter
            .build()
            .map_err(|e| format!("cannot start the OTLP trace exporter: {e}"))?;
        exporter.set_resource(&resource(&config.service));
        let exporter = Yielding {
            inner: exporter,
            lowered: AtomicBool::new(false),
        };
        let processor = Arc::new(BatchSpanProcessor::builder(exporter).build());
        *active = Some(Arc::new(Active::new(processor.clone())));
        drop(active);
        set_recording(true);
        Ok(Traces { processor })
    }

    /// Exports every span ended so far, waiting until the collector has answered.
    pub fn flush(&self) -> Result<(), String> {
        self.processor
            .force_flush()
            .map_err(|e| format!("the trace export failed: {e}"))
    }
}

impl Drop for Traces {
    fn drop(&mut self) {
        *ACTIVE.write().unwrap_or_else(|e| e.into_inner()) = None;
        set_recording(false);
        let _ = self.processor.shutdown();
    }
}

/// An exporter whose thread (the batch processor's) yields to every other: from its first
/// export on it is scheduled only when a CPU has nothing else to run (Linux's `SCHED_IDLE`), so
/// encoding and sending spans never takes a turn from an evaluation; on a host with no CPU to
/// spare, spans wait in the queue and are dropped when it is full, as the queue's rule says.
/// Measured in `ptc-bench traces` (docs/performance.md#traces-issue-28).
#[derive(Debug)]
struct Yielding<E> {
    inner: E,
    lowered: AtomicBool,
}

/// Only `export` is passed on: the OTLP exporter keeps the trait's defaults for the rest (nothing
/// to flush or shut down), and its resource is set before it is wrapped.
impl<E: SpanExporter> SpanExporter for Yielding<E> {
    fn export(&self, batch: Vec<SpanData>) -> impl Future<Output = OTelSdkResult> + Send {
        // The batch processor calls its exporter on its own thread only.
        if !self.lowered.swap(true, Ordering::Relaxed) {
            lower_this_thread();
        }
        self.inner.export(batch)
    }
}

/// Puts the calling thread in the idle scheduling class. Elsewhere than Linux, or when the system
/// refuses (a debug line in the log says why), the thread keeps its priority.
fn lower_this_thread() {
    #[cfg(target_os = "linux")]
    {
        use thread_priority::{
            NormalThreadSchedulePolicy, ThreadPriority, ThreadSchedulePolicy,
            set_thread_priority_and_policy, thread_native_id,
        };
        let idle = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle);
        if let Err(e) =
            set_thread_priority_and_policy(thread_native_id(), ThreadPriority::Min, idle)
        {
            tracing::debug!(
                target: "ptc::telemetry",
                "the trace exporter's thread keeps its priority: {e:?}"
            );
        }
    }
}

/// The resource spans are reported under: the SDK's (`OTEL_SERVICE_NAME`,
/// `OTEL_RESOURCE_ATTRIBUTES`, the SDK's own), with `service` as the name when those give none.
fn resource(service: &str) -> opentelemetry_sdk::Resource {
    let detected = opentelemetry_sdk::Resource::builder().build();
    // The SDK says it found no name only by its value: the specification's fallback,
    // `unknown_service` (with the executable's name after a colon).
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
        let http = crate::wire::http_client::builder()
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
    use super::TraceConfig;
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
}
