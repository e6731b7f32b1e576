//! The host's Prometheus metrics (`GET /metrics`, text format 0.0.4): evaluations by outcome and
//! reason and how long they took, the wait for a turn, upstream calls by upstream, tool and
//! reason with their durations and bytes, the bytes answered, limits hit and drifted answers,
//! counted as each evaluation ends ([`HostMetrics::observe`]); programs in flight, requests
//! waiting and pin events, read when Prometheus scrapes ([`Now`], from the evaluator). The
//! routes are in [`crate::server::http`].
//!
//! Every label value comes from a fixed set or from the catalog: `upstream` and `tool` are the
//! catalog's names (anything else is [`OTHER`]), `reason` a documented reason, `limit` one of
//! [`LIMITS`]. Never a caller, an argument, a session or a message: the number of series stays
//! bounded by the catalog, whatever programs send.

use std::sync::atomic::AtomicU64;
use std::time::Instant;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::prometheus_text;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use crate::call::contract::Reason;
use crate::catalog::Catalog;
use crate::program::run_report::UpstreamCall;
use crate::server::outcome::{EvalError, EvalOutcome, EvalReason, HostReason};
use ptc_lisp::Reason as ProgramReason;

/// The `Content-Type` of what [`HostMetrics::render`] writes (Prometheus text format 0.0.4).
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// The `upstream` or `tool` label of a name the catalog does not have (a call the program
/// named wrongly, or that stopped before its tool was found).
pub const OTHER: &str = "other";

/// The `reason` label of a success: a label is never empty (Prometheus reads an empty value
/// as no label at all).
pub const NO_REASON: &str = "none";

/// The `limit` values of `ptc_limit_hits_total`: the evaluation reason, or the upstream call
/// reason, that says the limit was hit, and its name.
pub const LIMITS: [(Hit, &str); 10] = [
    (
        Hit::Eval(EvalReason::Program(ProgramReason::Timeout)),
        "program_timeout",
    ),
    (
        Hit::Eval(EvalReason::Program(ProgramReason::MemoryExceeded)),
        "program_memory",
    ),
    (
        Hit::Eval(EvalReason::Program(ProgramReason::LoopLimitExceeded)),
        "loop_iterations",
    ),
    (
        Hit::Eval(EvalReason::Program(ProgramReason::DepthExceeded)),
        "nesting_depth",
    ),
    (
        Hit::Eval(EvalReason::Program(ProgramReason::ParallelCapacityExceeded)),
        "parallel_threads",
    ),
    (Hit::Eval(EvalReason::Host(HostReason::Busy)), "queue"),
    (
        Hit::Eval(EvalReason::Host(HostReason::RateLimited)),
        "caller_rate",
    ),
    (Hit::Call(Reason::CapExhausted), "upstream_budget"),
    (Hit::Call(Reason::ResponseTooLarge), "response_size"),
    (Hit::ReplyCut, "output_size"),
];

/// What says a limit was hit: an evaluation's reason, or one upstream call's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hit {
    /// An evaluation ended with this reason.
    Eval(EvalReason),
    /// An upstream call failed with this reason.
    Call(Reason),
    /// A reply was cut at `--max-output-bytes`.
    ReplyCut,
}

/// Upper bounds of the evaluation duration buckets, in seconds (programs run for milliseconds
/// to the 10 s default timeout, longer when they wait for approval).
const EVAL_SECONDS: [f64; 15] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0,
];
/// Upper bounds of the queue wait buckets, in seconds (most requests do not wait at all).
const WAIT_SECONDS: [f64; 11] = [
    0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// Upper bounds of the ready wait buckets, in seconds: a turn is at most a time slice, so a
/// ready program waits a few slices at most.
const READY_SECONDS: [f64; 10] = [
    0.0001, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0,
];
/// Upper bounds of the upstream call duration buckets, in seconds (calls are timed in
/// milliseconds).
const CALL_SECONDS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProgramLabels {
    program: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EvalLabels {
    outcome: &'static str,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    upstream: String,
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    upstream: String,
    tool: String,
    outcome: &'static str,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallTimeLabels {
    upstream: String,
    tool: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LimitLabels {
    limit: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PinLabels {
    upstream: String,
    event: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamLabel {
    upstream: String,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// The counters and histograms of one host process, counted as evaluations end.
pub struct HostMetrics {
    registry: Registry,
    evaluations: Family<EvalLabels, Counter>,
    program_runs: Family<ProgramLabels, Counter>,
    evaluation_seconds: Histograms<OutcomeLabels>,
    queue_wait: Histogram,
    ready_wait: Histogram,
    upstream_calls: Family<CallLabels, Counter>,
    upstream_seconds: Histograms<CallTimeLabels>,
    upstream_bytes: Family<ToolLabels, Counter>,
    answer_bytes: Counter,
    limit_hits: Family<LimitLabels, Counter>,
    drifted: Family<ToolLabels, Counter>,
}

impl std::fmt::Debug for HostMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostMetrics").finish_non_exhaustive()
    }
}

impl Default for HostMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl HostMetrics {
    /// Every family registered, the limits and the successful evaluations at 0 (a series
    /// that appears only when it first moves hides its first increase from `rate`).
    pub fn new() -> Self {
        let mut m = HostMetrics {
            registry: Registry::with_prefix("ptc"),
            evaluations: Family::default(),
            program_runs: Family::default(),
            evaluation_seconds: Family::new_with_constructor(|| Histogram::new(EVAL_SECONDS)),
            queue_wait: Histogram::new(WAIT_SECONDS),
            ready_wait: Histogram::new(READY_SECONDS),
            upstream_calls: Family::default(),
            upstream_seconds: Family::new_with_constructor(|| Histogram::new(CALL_SECONDS)),
            upstream_bytes: Family::default(),
            answer_bytes: Counter::default(),
            limit_hits: Family::default(),
            drifted: Family::default(),
        };
        m.registry.register(
            "evaluations",
            "Evaluations (lisp_eval calls) that ended, by outcome (ok, error) and reason (none \
             for ok)",
            m.evaluations.clone(),
        );
        m.registry.register(
            "program_runs",
            "Evaluations that ran a declared program called as its tool, by program and outcome \
             (also counted in evaluations)",
            m.program_runs.clone(),
        );
        m.registry.register_with_unit(
            "evaluation_duration",
            "Time from a request reaching the evaluator to its answer, its wait for a turn \
             included",
            Unit::Seconds,
            m.evaluation_seconds.clone(),
        );
        m.registry.register_with_unit(
            "queue_wait",
            "Time a request waited for its turn (a slot and memory of the global budget)",
            Unit::Seconds,
            m.queue_wait.clone(),
        );
        m.registry.register_with_unit(
            "ready_wait",
            "Time a running program, ready to compute, waited for its evaluation thread: the \
             threads run the ready program of the party (client session, else caller) that \
             has computed least, one time slice at a time",
            Unit::Seconds,
            m.ready_wait.clone(),
        );
        let slice: Gauge<f64, AtomicU64> = Gauge::default();
        slice.set(ptc_lisp::TIME_SLICE.as_secs_f64());
        m.registry.register_with_unit(
            "time_slice",
            "How long a program computes before the other ready programs of its thread run",
            Unit::Seconds,
            slice,
        );
        m.registry.register(
            "upstream_calls",
            "Upstream calls programs made, by upstream, tool, outcome and reason (none for ok)",
            m.upstream_calls.clone(),
        );
        m.registry.register_with_unit(
            "upstream_call_duration",
            "Time of one upstream call, refusals before sending included",
            Unit::Seconds,
            m.upstream_seconds.clone(),
        );
        m.registry.register_with_unit(
            "upstream_response",
            "Bytes upstreams answered successful calls with",
            Unit::Bytes,
            m.upstream_bytes.clone(),
        );
        m.registry.register_with_unit(
            "answer",
            "Bytes of successful programs' results as JSON (upstream bytes over these: the \
             payload reduction)",
            Unit::Bytes,
            m.answer_bytes.clone(),
        );
        m.registry.register(
            "limit_hits",
            "Evaluations and upstream calls stopped by a limit, by limit",
            m.limit_hits.clone(),
        );
        m.registry.register(
            "response_drift",
            "Upstream answers that did not match their tool's output schema",
            m.drifted.clone(),
        );
        for (_, limit) in LIMITS {
            let _ = m.limit_hits.get_or_create(&LimitLabels { limit });
        }
        let _ = m.evaluations.get_or_create(&EvalLabels {
            outcome: "ok",
            reason: NO_REASON,
        });
        m
    }

    /// Counts one evaluation that ended, and its upstream calls; `catalog` says which upstream
    /// and tool names may be labels.
    pub fn observe(&self, outcome: &EvalOutcome, catalog: &Catalog) {
        let (name, reason) = match &outcome.result {
            Ok(_) => ("ok", None),
            Err(e) => ("error", Some(e.reason)),
        };
        self.ended(name, reason);
        if let Some(program) = &outcome.tool {
            self.program_runs
                .get_or_create(&ProgramLabels {
                    program: program.clone(),
                    outcome: name,
                })
                .inc();
        }
        self.evaluation_seconds
            .get_or_create(&OutcomeLabels { outcome: name })
            .observe(outcome.duration.as_secs_f64());
        if outcome.result.is_ok() {
            self.answer_bytes
                .inc_by(outcome.records.ptc_metrics.final_result_bytes);
        }
        for call in &outcome.records.upstream_calls {
            self.observe_call(call, catalog);
        }
    }

    /// Counts one request refused before it reached the evaluator (its arguments, its
    /// session's queue, a stale round): an evaluation that ended in `error`, with no duration.
    pub fn refused(&self, error: &EvalError, program: Option<&str>) {
        self.ended("error", Some(error.reason));
        if let Some(program) = program {
            self.program_runs
                .get_or_create(&ProgramLabels {
                    program: program.to_string(),
                    outcome: "error",
                })
                .inc();
        }
    }

    /// Counts an evaluation that ended with `outcome` and `reason`, and the limit it hit.
    fn ended(&self, outcome: &'static str, reason: Option<EvalReason>) {
        self.evaluations
            .get_or_create(&EvalLabels {
                outcome,
                reason: reason.map_or(NO_REASON, EvalReason::as_str),
            })
            .inc();
        if let Some(r) = reason {
            self.hit(Hit::Eval(r));
        }
    }

    /// Counts one reply cut at `--max-output-bytes` (its text, or its JSON result left out).
    pub fn reply_cut(&self) {
        self.hit(Hit::ReplyCut);
    }

    fn observe_call(&self, call: &UpstreamCall, catalog: &Catalog) {
        let (upstream, tool) = catalog_names(catalog, &call.server, &call.tool);
        let outcome = call.status();
        self.upstream_calls
            .get_or_create(&CallLabels {
                upstream: upstream.to_string(),
                tool: tool.to_string(),
                outcome,
                reason: call.reason.map_or(NO_REASON, Reason::as_str),
            })
            .inc();
        self.upstream_seconds
            .get_or_create(&CallTimeLabels {
                upstream: upstream.to_string(),
                tool: tool.to_string(),
                outcome,
            })
            .observe(call.duration_ms as f64 / 1000.0);
        let labels = || ToolLabels {
            upstream: upstream.to_string(),
            tool: tool.to_string(),
        };
        if call.reason.is_none() {
            self.upstream_bytes
                .get_or_create(&labels())
                .inc_by(call.result_bytes);
        }
        // Answers, from the records: the drift watch counts fields, and starts again when a
        // refresh replaces the upstreams.
        if !call.drift.is_empty() {
            self.drifted.get_or_create(&labels()).inc();
        }
        if let Some(r) = call.reason {
            self.hit(Hit::Call(r));
        }
    }

    fn hit(&self, hit: Hit) {
        if let Some((_, limit)) = LIMITS.iter().find(|(h, _)| *h == hit) {
            self.limit_hits.get_or_create(&LimitLabels { limit }).inc();
        }
    }

    /// The histogram of ready programs' waits for their evaluation thread (the threads observe
    /// it).
    pub(crate) fn ready_wait(&self) -> Histogram {
        self.ready_wait.clone()
    }

    /// Times one request's wait for its turn, from now until the guard drops (admitted,
    /// refused or cancelled).
    pub fn queue_wait(&self) -> QueueWait<'_> {
        QueueWait {
            histogram: &self.queue_wait,
            since: Instant::now(),
        }
    }

    /// The text Prometheus scrapes: the counters, then what `now` read.
    pub fn render(&self, now: Now) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_text::encode(&mut out, &self.registry)?;
        let mut scraped = Registry::with_prefix("ptc");
        scraped.register_collector(Box::new(now));
        prometheus_text::encode(&mut out, &scraped)?;
        Ok(out)
    }
}

/// Observes the time since it was made into the queue wait histogram when dropped.
pub struct QueueWait<'a> {
    histogram: &'a Histogram,
    since: Instant,
}

impl Drop for QueueWait<'_> {
    fn drop(&mut self) {
        self.histogram.observe(self.since.elapsed().as_secs_f64());
    }
}

/// The `upstream` and `tool` labels of a call: the catalog's names, [`OTHER`] for a name it
/// does not have.
fn catalog_names<'a>(catalog: &'a Catalog, server: &str, tool: &str) -> (&'a str, &'a str) {
    let Some(s) = catalog.servers().iter().find(|s| s.name == server) else {
        return (OTHER, OTHER);
    };
    let known = s
        .tools()
        .and_then(|tools| tools.iter().find(|t| t.name == tool));
    (&s.name, known.map_or(OTHER, |t| t.name.as_str()))
}

/// The pin events of one pinned MCP upstream: a pinned tool changed, a pinned tool removed, a
/// tool listed that is not pinned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PinEvents {
    /// The upstream's name.
    pub upstream: String,
    /// Pinned tools found changed.
    pub changed: u64,
    /// Pinned tools found missing.
    pub removed: u64,
    /// Listed tools that are not pinned.
    pub unpinned: u64,
}

/// What a scrape reads at its time rather than counts as it happens.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Now {
    /// Evaluations running.
    pub in_flight: usize,
    /// Requests waiting for their turn.
    pub queue_depth: usize,
    /// Every pinned MCP upstream's pin events since its catalog was loaded.
    pub pins: Vec<PinEvents>,
    /// Every MCP upstream called as the caller: its per-caller sessions.
    pub caller_sessions: Vec<CallerSessionCounts>,
}

/// The per-caller sessions of one MCP upstream called as the caller.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallerSessionCounts {
    /// The upstream's name.
    pub upstream: String,
    /// Sessions open now.
    pub open: u64,
    /// Sessions opened.
    pub opened: u64,
    /// Sessions closed after they went unused for the idle time.
    pub closed_idle: u64,
    /// Sessions closed to make room for another caller's.
    pub evicted: u64,
}

impl Collector for Now {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let gauges = [
            (
                "programs_in_flight",
                "Evaluations running now (computing or waiting on upstreams).",
                self.in_flight,
            ),
            (
                "queue_depth",
                "Requests waiting now for their turn (a slot or memory of the global budget).",
                self.queue_depth,
            ),
        ];
        for (name, help, value) in gauges {
            let gauge = ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX));
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }
        self.encode_caller_sessions(&mut encoder)?;
        if self.pins.is_empty() {
            return Ok(());
        }
        let mut family = encoder.encode_descriptor(
            "pin_events",
            "Pin events of pinned MCP upstreams since their catalog was loaded: a pinned tool \
             changed or removed, a tool listed unpinned.",
            None,
            MetricType::Counter,
        )?;
        for p in &self.pins {
            for (event, n) in [
                ("changed", p.changed),
                ("removed", p.removed),
                ("unpinned", p.unpinned),
            ] {
                let labels = PinLabels {
                    upstream: p.upstream.clone(),
                    event,
                };
                ConstCounter::new(n).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

impl Now {
    /// `mcp_caller_sessions` (a gauge) and `mcp_caller_sessions_closed` (counters by why), per
    /// upstream called as the caller; nothing when there is none.
    fn encode_caller_sessions(
        &self,
        encoder: &mut DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        if self.caller_sessions.is_empty() {
            return Ok(());
        }
        let mut open = encoder.encode_descriptor(
            "mcp_caller_sessions",
            "Sessions open now to MCP upstreams called as the caller (one per caller).",
            None,
            MetricType::Gauge,
        )?;
        for c in &self.caller_sessions {
            let labels = UpstreamLabel {
                upstream: c.upstream.clone(),
            };
            let gauge = ConstGauge::new(i64::try_from(c.open).unwrap_or(i64::MAX));
            gauge.encode(open.encode_family(&labels)?)?;
        }
        let mut events = encoder.encode_descriptor(
            "mcp_caller_session_events",
            "Sessions of MCP upstreams called as the caller: opened, closed when idle, closed to \
             make room for another caller's.",
            None,
            MetricType::Counter,
        )?;
        for c in &self.caller_sessions {
            for (event, n) in [
                ("opened", c.opened),
                ("closed_idle", c.closed_idle),
                ("evicted", c.evicted),
            ] {
                let labels = PinLabels {
                    upstream: c.upstream.clone(),
                    event,
                };
                ConstCounter::new(n).encode(events.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::catalog::ServerEntry;
    use crate::catalog::tests_support::tool;
    use crate::program::run_report::RunRecords;
    use crate::server::outcome::{EvalError, EvalValue};

    /// Upstream `obs` with `list-traces` and `get-trace`.
    fn catalog() -> Catalog {
        let server = ServerEntry::new(
            "obs",
            "",
            ptc_plan::TransportKind::Openapi,
            Default::default(),
        );
        server.set_tools(vec![tool("obs", "list-traces"), tool("obs", "get-trace")]);
        Catalog {
            servers: vec![server],
        }
    }

    fn call(tool: &str, reason: Option<Reason>, ms: u64, bytes: u64) -> UpstreamCall {
        UpstreamCall {
            server: "obs".into(),
            tool: tool.into(),
            reason,
            duration_ms: ms,
            result_bytes: bytes,
            write: None,
            drift: Vec::new(),
        }
    }

    fn outcome(result: Result<u64, EvalReason>, calls: Vec<UpstreamCall>, ms: u64) -> EvalOutcome {
        let (result, answer) = match result {
            Ok(bytes) => (
                Ok(EvalValue {
                    text: "x".into(),
                    json: None,
                }),
                bytes,
            ),
            Err(reason) => {
                let e = EvalError {
                    reason,
                    message: "m".into(),
                    position: None,
                    value: None,
                };
                (Err(e), 0)
            }
        };
        EvalOutcome {
            result,
            prints: String::new(),
            records: RunRecords::new(calls, answer),
            duration: Duration::from_millis(ms),
            caller: "alice".into(),
            session: None,
            tool: None,
        }
    }

    /// The value of the sample `series` (name and labels as rendered) in `body`.
    fn sample(body: &str, series: &str) -> Option<f64> {
        body.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    fn render(m: &HostMetrics) -> String {
        m.render(Now::default()).expect("renders")
    }

    #[test]
    fn debug_output_names_the_metrics_without_dumping_every_series() {
        // An evaluator's `Debug` shows up in logs and panics: its metrics stay one line.
        assert_eq!(format!("{:?}", HostMetrics::new()), "HostMetrics { .. }");
    }

    #[test]
    fn an_evaluation_counts_its_outcome_duration_calls_bytes_and_drift() {
        let m = HostMetrics::new();
        let mut drifted = call("get-trace", None, 30, 300);
        drifted.drift = vec!["/status: a string, not an integer".into()];
        let calls = vec![call("list-traces", None, 12, 1200), drifted];
        m.observe(&outcome(Ok(100), calls, 40), &catalog());
        let failed = vec![call("list-traces", Some(Reason::NotFound), 7, 0)];
        let unknown_tool = EvalReason::Program(ProgramReason::UnknownTool);
        m.observe(&outcome(Err(unknown_tool), failed, 3), &catalog());
        let body = render(&m);
        for (series, value) in [
            (r#"ptc_evaluations_total{outcome="ok",reason="none"}"#, 1.0),
            (
                r#"ptc_evaluations_total{outcome="error",reason="unknown_tool"}"#,
                1.0,
            ),
            (
                r#"ptc_evaluation_duration_seconds_bucket{outcome="ok",le="0.025"}"#,
                0.0,
            ),
            (
                r#"ptc_evaluation_duration_seconds_bucket{outcome="ok",le="0.05"}"#,
                1.0,
            ),
            (r#"ptc_evaluation_duration_seconds_sum{outcome="ok"}"#, 0.04),
            (
                r#"ptc_evaluation_duration_seconds_count{outcome="error"}"#,
                1.0,
            ),
            (
                r#"ptc_upstream_calls_total{upstream="obs",tool="list-traces",outcome="ok",reason="none"}"#,
                1.0,
            ),
            (
                r#"ptc_upstream_calls_total{upstream="obs",tool="get-trace",outcome="ok",reason="none"}"#,
                1.0,
            ),
            (
                r#"ptc_upstream_calls_total{upstream="obs",tool="list-traces",outcome="error",reason="not_found"}"#,
                1.0,
            ),
            (
                r#"ptc_upstream_call_duration_seconds_bucket{upstream="obs",tool="list-traces",outcome="ok",le="0.01"}"#,
                0.0,
            ),
            (
                r#"ptc_upstream_call_duration_seconds_bucket{upstream="obs",tool="list-traces",outcome="ok",le="0.025"}"#,
                1.0,
            ),
            (
                r#"ptc_upstream_call_duration_seconds_sum{upstream="obs",tool="get-trace",outcome="ok"}"#,
                0.03,
            ),
            // Only successful calls' bytes, as the run's ptc_metrics count them.
            (
                r#"ptc_upstream_response_bytes_total{upstream="obs",tool="list-traces"}"#,
                1200.0,
            ),
            (
                r#"ptc_upstream_response_bytes_total{upstream="obs",tool="get-trace"}"#,
                300.0,
            ),
            ("ptc_answer_bytes_total", 100.0),
            (
                r#"ptc_response_drift_total{upstream="obs",tool="get-trace"}"#,
                1.0,
            ),
        ] {
            assert_eq!(sample(&body, series), Some(value), "{series} in\n{body}");
        }
        assert_eq!(
            sample(
                &body,
                r#"ptc_response_drift_total{upstream="obs",tool="list-traces"}"#
            ),
            None,
            "an answer without drift is not counted"
        );
        assert!(
            !body.contains("alice") && !body.contains("/status"),
            "no caller, no field path:\n{body}"
        );
    }

    #[test]
    fn each_limit_is_counted_by_the_reason_that_says_it_was_hit_and_no_other_is() {
        for (hit, limit) in LIMITS {
            let m = HostMetrics::new();
            match hit {
                Hit::Eval(reason) => m.observe(&outcome(Err(reason), Vec::new(), 1), &catalog()),
                Hit::Call(reason) => m.observe(
                    &outcome(Ok(2), vec![call("get-trace", Some(reason), 1, 0)], 1),
                    &catalog(),
                ),
                Hit::ReplyCut => m.reply_cut(),
            }
            let body = render(&m);
            for (_, other) in LIMITS {
                let series = format!("ptc_limit_hits_total{{limit=\"{other}\"}}");
                let want = if other == limit { 1.0 } else { 0.0 };
                assert_eq!(sample(&body, &series), Some(want), "{hit:?}: {series}");
            }
        }
        // Reasons that are no limit of this host: a program's own error, an upstream's
        // timeout or rate limit (the upstream's limit, not ours).
        let m = HostMetrics::new();
        let type_error = EvalReason::Program(ProgramReason::TypeError);
        m.observe(&outcome(Err(type_error), Vec::new(), 1), &catalog());
        let calls = vec![
            call("get-trace", Some(Reason::Timeout), 1, 0),
            call("get-trace", Some(Reason::RateLimited), 1, 0),
        ];
        m.observe(&outcome(Ok(2), calls, 1), &catalog());
        let body = render(&m);
        let hits: f64 = LIMITS
            .iter()
            .filter_map(|(_, l)| sample(&body, &format!("ptc_limit_hits_total{{limit=\"{l}\"}}")))
            .sum();
        assert_eq!(hits, 0.0, "{body}");
    }

    #[test]
    fn names_outside_the_catalog_become_other() {
        let m = HostMetrics::new();
        let mut wrong_server = call("list-traces", Some(Reason::Timeout), 1, 0);
        wrong_server.server = "elsewhere".into();
        // Aliases and arguments-like text are no catalog names either.
        let calls = vec![
            call("list_traces", Some(Reason::Timeout), 1, 0),
            call("list-traces?org=acme", Some(Reason::Timeout), 1, 0),
            wrong_server,
        ];
        m.observe(&outcome(Ok(1), calls, 1), &catalog());
        let body = render(&m);
        assert_eq!(
            sample(
                &body,
                r#"ptc_upstream_calls_total{upstream="obs",tool="other",outcome="error",reason="timeout"}"#
            ),
            Some(2.0),
            "{body}"
        );
        assert_eq!(
            sample(
                &body,
                r#"ptc_upstream_calls_total{upstream="other",tool="other",outcome="error",reason="timeout"}"#
            ),
            Some(1.0),
            "{body}"
        );
        for absent in ["list_traces", "acme", "elsewhere"] {
            assert!(!body.contains(absent), "{absent} in\n{body}");
        }
    }

    #[test]
    fn every_documented_reason_is_a_label_of_its_own() {
        let m = HostMetrics::new();
        let reasons: Vec<EvalReason> = ProgramReason::ALL
            .into_iter()
            .map(EvalReason::Program)
            .chain(HostReason::ALL.into_iter().map(EvalReason::Host))
            .collect();
        for r in &reasons {
            m.observe(&outcome(Err(*r), Vec::new(), 1), &catalog());
        }
        let body = render(&m);
        for r in reasons {
            let series = format!("ptc_evaluations_total{{outcome=\"error\",reason=\"{r}\"}}");
            assert!(
                sample(&body, &series).is_some_and(|n| n >= 1.0),
                "{series}\n{body}"
            );
        }
    }

    /// The evaluation threads' order is visible: the time slice, and how long ready programs
    /// waited for their thread, observed by a worker as it runs a program.
    #[tokio::test]
    async fn the_time_slice_and_ready_waits_are_reported() {
        let m = HostMetrics::new();
        let body = render(&m);
        assert_eq!(
            sample(&body, "ptc_time_slice_seconds"),
            Some(ptc_lisp::TIME_SLICE.as_secs_f64())
        );
        assert_eq!(sample(&body, "ptc_ready_wait_seconds_count"), Some(0.0));
        let workers = crate::server::workers::Workers::new(1, m.ready_wait()).unwrap();
        assert_eq!(
            workers.run(std::sync::Arc::from("p"), || async { 1 }).await,
            Some(1)
        );
        assert_eq!(
            sample(&render(&m), "ptc_ready_wait_seconds_count"),
            Some(1.0)
        );
    }

    #[test]
    fn a_queue_wait_is_observed_once_when_its_guard_drops() {
        let m = HostMetrics::new();
        assert_eq!(
            sample(&render(&m), "ptc_queue_wait_seconds_count"),
            Some(0.0)
        );
        drop(m.queue_wait());
        let body = render(&m);
        assert_eq!(sample(&body, "ptc_queue_wait_seconds_count"), Some(1.0));
        assert_eq!(
            sample(&body, r#"ptc_queue_wait_seconds_bucket{le="+Inf"}"#),
            Some(1.0)
        );
    }

    #[test]
    fn what_a_scrape_reads_is_rendered_as_gauges_and_pin_event_counters() {
        let m = HostMetrics::new();
        let quiet = render(&m);
        assert_eq!(sample(&quiet, "ptc_programs_in_flight"), Some(0.0));
        assert_eq!(sample(&quiet, "ptc_queue_depth"), Some(0.0));
        assert!(
            !quiet.contains("ptc_pin_events_total"),
            "no pinned upstream, no family: {quiet}"
        );
        assert!(
            !quiet.contains("ptc_mcp_caller_session"),
            "no upstream called as the caller, no family: {quiet}"
        );
        let now = Now {
            in_flight: 3,
            queue_depth: 2,
            pins: vec![PinEvents {
                upstream: "fs".into(),
                changed: 1,
                removed: 0,
                unpinned: 4,
            }],
            caller_sessions: vec![CallerSessionCounts {
                upstream: "linear".into(),
                open: 2,
                opened: 5,
                closed_idle: 2,
                evicted: 1,
            }],
        };
        let body = m.render(now).unwrap();
        for (series, value) in [
            ("ptc_programs_in_flight", 3.0),
            ("ptc_queue_depth", 2.0),
            (
                r#"ptc_pin_events_total{upstream="fs",event="changed"}"#,
                1.0,
            ),
            (
                r#"ptc_pin_events_total{upstream="fs",event="removed"}"#,
                0.0,
            ),
            (
                r#"ptc_pin_events_total{upstream="fs",event="unpinned"}"#,
                4.0,
            ),
            (r#"ptc_mcp_caller_sessions{upstream="linear"}"#, 2.0),
            (
                r#"ptc_mcp_caller_session_events_total{upstream="linear",event="opened"}"#,
                5.0,
            ),
            (
                r#"ptc_mcp_caller_session_events_total{upstream="linear",event="closed_idle"}"#,
                2.0,
            ),
            (
                r#"ptc_mcp_caller_session_events_total{upstream="linear",event="evicted"}"#,
                1.0,
            ),
        ] {
            assert_eq!(sample(&body, series), Some(value), "{series} in\n{body}");
        }
        assert!(
            body.contains("# TYPE ptc_programs_in_flight gauge\n"),
            "{body}"
        );
        assert!(
            body.contains("# TYPE ptc_pin_events_total counter\n"),
            "{body}"
        );
    }

    #[test]
    fn a_fresh_host_shows_every_limit_and_successes_at_zero() {
        let body = render(&HostMetrics::new());
        for (_, limit) in LIMITS {
            let series = format!("ptc_limit_hits_total{{limit=\"{limit}\"}}");
            assert_eq!(sample(&body, &series), Some(0.0), "{series}");
        }
        assert_eq!(
            sample(
                &body,
                r#"ptc_evaluations_total{outcome="ok",reason="none"}"#
            ),
            Some(0.0)
        );
        // A family nothing has touched is left out rather than shown without samples.
        assert!(!body.contains("ptc_upstream_calls_total"), "{body}");
    }
}
