//! The OpenAPI transport: one pooled HTTP client per upstream; a call builds the request from the
//! compiled operation (path segments percent-encoded one by one, query pairs encoded, `Accept:
//! application/json`, static headers, then auth headers read fresh), reads the body as a stream
//! cut at the cap, and maps the status onto the result contract.

use std::time::{Duration, Instant};

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use ptc_plan::{BODY_ARG, Effect, OpenApiPlan, ParamLocation, ToolPlan};
use reqwest::StatusCode;
use serde_json::{Map, Value};

use crate::call::contract::{Reason, ResponseCap, ToolError, ToolOutput};
use crate::call::writes::IdempotencyKey;
use crate::credentials::binding::auth_headers_with;
use crate::credentials::per_caller::CallEnv;
use crate::wire::http_client::{ReadError, describe, read_capped};

/// Everything but RFC 3986 unreserved characters is encoded in a path segment, so `/`, `?`, `#`
/// and `%` in a value stay inside its segment.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// How much of an error response is read for its problem detail.
const ERROR_BODY_BYTES: u64 = 8 * 1024;
/// How much of a problem detail goes into a message.
const DETAIL_CHARS: usize = 500;

/// A live OpenAPI upstream.
pub(crate) struct OpenApiUpstream {
    name: String,
    plan: OpenApiPlan,
    client: reqwest::Client,
}

/// What a successful exchange produced, with the byte count for the records.
pub(crate) struct Fetched {
    pub output: ToolOutput,
    pub bytes: u64,
}

/// An (origin) triple used to refuse cross-origin redirects.
fn origin(u: &reqwest::Url) -> (String, Option<String>, Option<u16>) {
    (
        u.scheme().to_string(),
        u.host_str().map(str::to_ascii_lowercase),
        u.port_or_known_default(),
    )
}

impl OpenApiUpstream {
    pub(crate) fn new(name: &str, plan: &OpenApiPlan) -> Result<Self, String> {
        let http = &plan.http;
        // Same-origin redirects are followed (a few); anything else stops at the 3xx, which the
        // call then reports. Credentials are therefore never sent to another origin.
        let policy = reqwest::redirect::Policy::custom(|attempt| {
            let first = attempt.previous().first().map(origin);
            if attempt.previous().len() > 5 {
                attempt.stop()
            } else if first.is_some_and(|o| o == origin(attempt.url())) {
                attempt.follow()
            } else {
                attempt.stop()
            }
        });
        let client = crate::wire::http_client::builder()
            .connect_timeout(Duration::from_millis(http.connect_timeout_ms.max(1)))
            .pool_max_idle_per_host(http.pool_size as usize)
            .redirect(policy)
            .https_only(!http.allow_insecure_http)
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(OpenApiUpstream {
            name: name.to_string(),
            plan: plan.clone(),
            client,
        })
    }

    pub(crate) fn tools(&self) -> &[ToolPlan] {
        &self.plan.tools
    }

    /// The request a call of tool `index` with `args` makes, in a line a person can read:
    /// `POST https://host/api/traces/tr_1/annotations` (what an approval shows).
    pub(crate) fn preview(&self, index: usize, args: &Map<String, Value>) -> String {
        let tool = &self.plan.tools[index];
        let mut merged = tool.ptc.default_args.clone();
        merged.extend(args.clone());
        let base = tool.ptc.base_url.as_deref().unwrap_or(&self.plan.base_url);
        match build_url(base, tool, &merged) {
            Ok(url) => format!("{} {url}", tool.ptc.method),
            Err(_) => format!("{} {}{}", tool.ptc.method, base, tool.ptc.path),
        }
    }

    /// Runs tool `index` with validated `args` (wire names), defaults not yet applied. A write
    /// is sent once, never retried, with its idempotency key when the upstream names a header.
    pub(crate) async fn call(
        &self,
        env: &CallEnv<'_>,
        index: usize,
        args: Map<String, Value>,
        deadline: Option<Instant>,
        idempotency_key: Option<IdempotencyKey>,
        cap: ResponseCap,
    ) -> Result<Fetched, ToolError> {
        let tool = &self.plan.tools[index];
        let write = tool.classified.effect == Effect::Write;
        let call = format!("{}/{}", self.name, tool.name);
        let fail = |reason, message: String| ToolError {
            reason,
            message: format!("{call}: {message}"),
        };
        let mut merged = tool.ptc.default_args.clone();
        merged.extend(args);
        let body = match tool.ptc.body {
            Some(_) => merged.remove(BODY_ARG),
            None => None,
        };
        let method = reqwest::Method::from_bytes(tool.ptc.method.as_bytes()).map_err(|_| {
            fail(
                Reason::InvalidArgs,
                format!("method {} is not usable", tool.ptc.method),
            )
        })?;
        let idempotency = match (&self.plan.idempotency_header, idempotency_key) {
            // The host gives keys to writes only.
            (Some(header), Some(key)) => Some((header.as_str(), key.to_string())),
            _ => None,
        };
        let url = build_url(
            tool.ptc.base_url.as_deref().unwrap_or(&self.plan.base_url),
            tool,
            &merged,
        )
        .map_err(|m| fail(Reason::InvalidArgs, m))?;
        let url = reqwest::Url::parse(&url)
            .map_err(|e| fail(Reason::InvalidArgs, format!("cannot build the URL: {e}")))?;
        let http = &self.plan.http;
        let request_timeout = Duration::from_millis(tool.ptc.request_timeout_ms.max(1));
        let mut retries = 0u32;
        let mut auth_retried = false;
        // The call's trace context (traces on), so the upstream's spans join the trace.
        let trace = crate::telemetry::outgoing();
        loop {
            let timeout = match deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(fail(
                            Reason::Timeout,
                            "the program's time ran out before the call".into(),
                        ));
                    }
                    left.min(request_timeout)
                }
                None => request_timeout,
            };
            let mut rb = self
                .client
                .request(method.clone(), url.clone())
                .timeout(timeout)
                .header("accept", "application/json");
            if let Some(body) = &body {
                rb = rb.json(body);
            }
            for (name, value) in &http.static_headers {
                rb = rb.header(name, value);
            }
            for (name, value) in &trace {
                rb = rb.header(*name, value);
            }
            if let Some((header, key)) = &idempotency {
                rb = rb.header(*header, key);
            }
            // Read per attempt: a 401 retry sees a rotated credential.
            let per_caller = crate::credentials::per_caller::for_call(&http.auth, env)
                .await
                .map_err(|e| fail(Reason::AuthFailed, e.to_string()))?;
            let auth = auth_headers_with(
                &http.auth,
                env.credentials,
                env.secrets,
                env.redactor,
                &per_caller,
            )
            .map_err(|e| fail(Reason::AuthFailed, e.to_string()))?;
            for (name, value) in &auth {
                rb = rb.header(name, value.expose());
            }
            let resp = match rb.send().await {
                Ok(r) => r,
                Err(e) => {
                    if e.is_timeout() {
                        return Err(fail(Reason::Timeout, timed_out(timeout, deadline)));
                    }
                    let msg = describe(&e);
                    if !write
                        && retries < http.backoff.max_retries
                        && pause(&http.backoff, retries, deadline).await
                    {
                        retries += 1;
                        crate::telemetry::note_retries(retries);
                        continue;
                    }
                    return Err(fail(Reason::UpstreamUnavailable, retried(msg, retries)));
                }
            };
            let status = resp.status();
            crate::telemetry::note_status(status.as_u16());
            if status.is_success() {
                return self.success(resp, cap, &call, timeout, deadline).await;
            }
            if status == StatusCode::UNAUTHORIZED
                && !write
                && !auth_retried
                && !http.auth.is_empty()
            {
                auth_retried = true;
                crate::credentials::binding::refresh(&http.auth, env.credentials);
                for e in &http.auth {
                    env.exchanges.forget(e.binding(), env.caller);
                }
                continue;
            }
            if matches!(status.as_u16(), 502..=504)
                && !write
                && retries < http.backoff.max_retries
                && pause(&http.backoff, retries, deadline).await
            {
                retries += 1;
                crate::telemetry::note_retries(retries);
                continue;
            }
            return Err(self.failure(resp, &call, retries).await);
        }
    }

    async fn success(
        &self,
        resp: reqwest::Response,
        cap: ResponseCap,
        call: &str,
        timeout: Duration,
        deadline: Option<Instant>,
    ) -> Result<Fetched, ToolError> {
        let status = resp.status().as_u16();
        let fail = |reason, message: String| ToolError {
            reason,
            message: format!("{call}: {message}"),
        };
        if status == 204 {
            return Ok(Fetched {
                output: ToolOutput::Empty,
                bytes: 0,
            });
        }
        let content_type = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_ascii_lowercase);
        let body = match read_capped(resp, cap.bytes).await {
            Ok(b) => b,
            Err(ReadError::TooLarge) => {
                return Err(fail(Reason::ResponseTooLarge, cap.exceeded()));
            }
            Err(ReadError::Failed(e)) if e.is_timeout() => {
                return Err(fail(Reason::Timeout, timed_out(timeout, deadline)));
            }
            Err(ReadError::Failed(e)) => {
                return Err(fail(
                    Reason::UpstreamUnavailable,
                    format!("reading the response failed: {}", describe(&e)),
                ));
            }
        };
        let bytes = body.len() as u64;
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Fetched {
                output: ToolOutput::Empty,
                bytes,
            });
        }
        if let Some(ct) = &content_type
            && !ct.contains("json")
        {
            let ct = ct.split(';').next().unwrap_or(ct).trim();
            return Err(fail(
                Reason::UpstreamError,
                format!("HTTP {status} answered with {ct} where JSON was expected"),
            ));
        }
        Ok(Fetched {
            output: ToolOutput::Json(body),
            bytes,
        })
    }

    async fn failure(&self, resp: reqwest::Response, call: &str, retries: u32) -> ToolError {
        let status = resp.status();
        let code = status.as_u16();
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let location = resp
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let request_url = resp.url().clone();
        let detail = match read_capped(resp, ERROR_BODY_BYTES).await {
            Ok(body) => problem_detail(&body),
            // An oversized error body keeps its status-derived reason; the detail is cut.
            Err(_) => String::new(),
        };
        let with_detail = |head: String| {
            if detail.is_empty() {
                head
            } else {
                format!("{head}: {detail}")
            }
        };
        let line = status_line(status);
        let (reason, message) = match code {
            400 | 413 | 422 => (Reason::ToolError, with_detail(line)),
            401 => (
                Reason::AuthFailed,
                with_detail(format!(
                    "{line} (after a fresh credential read); check the upstream's credential"
                )),
            ),
            403 => (
                Reason::Forbidden,
                with_detail(format!("{line}: the credential is not allowed to do this")),
            ),
            404 => (Reason::NotFound, with_detail(line)),
            429 => {
                let wait = match &retry_after {
                    Some(r) => format!("; Retry-After: {r}"),
                    None => String::new(),
                };
                (Reason::RateLimited, with_detail(format!("{line}{wait}")))
            }
            300..=399 => {
                let target = location.as_deref().and_then(|l| request_url.join(l).ok());
                let message = match target {
                    Some(t) if origin(&t) != origin(&request_url) => format!(
                        "{line}: refused to follow a redirect to another origin ({}); \
                         credentials are never sent there",
                        t.origin().ascii_serialization()
                    ),
                    Some(_) => format!("{line}: too many redirects"),
                    None => format!("{line}: a redirect without a usable Location"),
                };
                (Reason::UpstreamError, message)
            }
            500..=599 => (
                Reason::UpstreamUnavailable,
                retried(with_detail(line), retries),
            ),
            _ => (Reason::UpstreamError, with_detail(line)),
        };
        ToolError {
            reason,
            message: format!("{call}: {message}"),
        }
    }
}

fn status_line(status: StatusCode) -> String {
    match status.canonical_reason() {
        Some(r) => format!("HTTP {} {r}", status.as_u16()),
        None => format!("HTTP {}", status.as_u16()),
    }
}

fn retried(msg: String, retries: u32) -> String {
    match retries {
        0 => msg,
        1 => format!("{msg} (after 1 retry)"),
        n => format!("{msg} (after {n} retries)"),
    }
}

/// Sleeps before retry `n` (exponential backoff, full jitter). False, at once, when the deadline
/// would pass first.
async fn pause(backoff: &ptc_plan::Backoff, n: u32, deadline: Option<Instant>) -> bool {
    let entropy = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64)
        .unwrap_or(0);
    let delay = backoff_delay(backoff, n, entropy);
    if passes(deadline, Instant::now(), delay) {
        return false;
    }
    tokio::time::sleep(delay).await;
    true
}

/// Whether waiting `delay` from `now` reaches the deadline.
fn passes(deadline: Option<Instant>, now: Instant, delay: Duration) -> bool {
    deadline.is_some_and(|d| now + delay >= d)
}

/// The delay before retry `n`: `entropy` picks it in `0..=ceiling`, the ceiling doubling from
/// `initial_ms` per retry up to `max_ms` (and at least 1 ms).
fn backoff_delay(backoff: &ptc_plan::Backoff, n: u32, entropy: u64) -> Duration {
    let ceiling = backoff
        .initial_ms
        .saturating_mul(1u64 << n.min(20))
        .min(backoff.max_ms)
        .max(1);
    Duration::from_millis(entropy % (ceiling + 1))
}

fn timed_out(timeout: Duration, deadline: Option<Instant>) -> String {
    if deadline.is_some_and(|d| Instant::now() >= d) {
        "the program's time ran out during the call".into()
    } else {
        format!("no complete answer within {} ms", timeout.as_millis())
    }
}

/// The useful part of an error body: a problem document's `detail`/`title`, an error object's
/// `message`/`error`, or the text itself; bounded.
fn problem_detail(body: &[u8]) -> String {
    let text = match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => {
            let pick = |k: &str| match m.get(k) {
                Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
                Some(Value::Object(o)) => {
                    o.get("message").and_then(Value::as_str).map(str::to_string)
                }
                _ => None,
            };
            let main = pick("detail")
                .or_else(|| pick("message"))
                .or_else(|| pick("error"))
                .or_else(|| pick("title"));
            match main {
                Some(d) => d,
                None => Value::Object(m).to_string(),
            }
        }
        Ok(other) => other.to_string(),
        Err(_) => String::from_utf8_lossy(body).trim().to_string(),
    };
    let text: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.chars().count() > DETAIL_CHARS {
        let cut: String = text.chars().take(DETAIL_CHARS).collect();
        format!("{cut}...")
    } else {
        text
    }
}

/// Text of a query or path value: strings as they are, numbers and booleans as JSON.
fn scalar_text(name: &str, v: &Value) -> Result<Option<String>, String> {
    Ok(Some(match v {
        Value::Null => return Ok(None),
        Value::String(s) => s.clone(),
        Value::Bool(_) | Value::Number(_) => v.to_string(),
        Value::Array(_) | Value::Object(_) => {
            return Err(format!(
                "argument :{} must be a single value here, got {}",
                name.replace('_', "-"),
                if v.is_array() { "a list" } else { "a map" }
            ));
        }
    }))
}

/// The request URL for `tool` with `args` (default args already merged under the caller's).
pub(crate) fn build_url(
    base: &str,
    tool: &ToolPlan,
    args: &Map<String, Value>,
) -> Result<String, String> {
    let mut path = tool.ptc.path.clone();
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    let mut any_query = false;
    for p in &tool.ptc.params {
        let Some(v) = args.get(&p.name) else {
            if p.required {
                return Err(format!(
                    "missing required argument :{}",
                    p.name.replace('_', "-")
                ));
            }
            continue;
        };
        match p.location {
            ParamLocation::Path => {
                let Some(text) = scalar_text(&p.name, v)? else {
                    return Err(format!(
                        "argument :{} is part of the path and cannot be nil",
                        p.name.replace('_', "-")
                    ));
                };
                // `.` and `..` would be resolved away by URL parsing (even percent-encoded), and
                // an empty segment would change the route: none can be a path value.
                if text.is_empty() || text == "." || text == ".." {
                    return Err(format!(
                        "argument :{} is part of the path and cannot be {text:?}",
                        p.name.replace('_', "-")
                    ));
                }
                let segment = utf8_percent_encode(&text, SEGMENT).to_string();
                path = path.replace(&format!("{{{}}}", p.name), &segment);
            }
            ParamLocation::Query => match v {
                Value::Array(items) => {
                    let texts = items
                        .iter()
                        .map(|x| scalar_text(&p.name, x))
                        .collect::<Result<Vec<_>, _>>()?;
                    let texts: Vec<String> = texts.into_iter().flatten().collect();
                    if p.repeated {
                        for t in &texts {
                            query.append_pair(&p.name, t);
                            any_query = true;
                        }
                    } else if !texts.is_empty() {
                        query.append_pair(&p.name, &texts.join(","));
                        any_query = true;
                    }
                }
                other => {
                    if let Some(t) = scalar_text(&p.name, other)? {
                        query.append_pair(&p.name, &t);
                        any_query = true;
                    }
                }
            },
        }
    }
    let mut url = String::with_capacity(base.len() + path.len() + 32);
    url.push_str(base.trim_end_matches('/'));
    if !path.starts_with('/') {
        url.push('/');
    }
    url.push_str(&path);
    if any_query {
        url.push('?');
        url.push_str(&query.finish());
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The backoff ceiling starts at `initial_ms`, doubles per retry, stops at `max_ms`, and is
    /// never 0; the delay is `entropy` folded into `0..=ceiling`.
    #[test]
    fn backoff_delays_double_up_to_the_ceiling() {
        let b = ptc_plan::Backoff {
            max_retries: 9,
            initial_ms: 100,
            max_ms: 1000,
        };
        // Entropy c gives c while c is within the ceiling, and 0 at ceiling + 1: the pair pins
        // the ceiling exactly.
        let top = |n: u32, c: u64| backoff_delay(&b, n, c).as_millis() as u64;
        assert_eq!(top(0, 100), 100);
        assert_eq!(top(0, 101), 0);
        assert_eq!(top(1, 200), 200);
        assert_eq!(top(1, 201), 0);
        assert_eq!(top(2, 400), 400);
        assert_eq!(top(3, 800), 800);
        assert_eq!(top(4, 1000), 1000, "capped at max_ms");
        assert_eq!(top(4, 1001), 0);
        assert_eq!(top(40, 1000), 1000, "no overflow past 20 doublings");
        let zero = ptc_plan::Backoff {
            max_retries: 1,
            initial_ms: 0,
            max_ms: 0,
        };
        assert_eq!(backoff_delay(&zero, 0, 1).as_millis(), 1, "at least 1 ms");
        assert_eq!(backoff_delay(&zero, 0, 2).as_millis(), 0);
    }

    /// A wait reaches the deadline when it ends at it or later.
    #[test]
    fn a_wait_passes_the_deadline_from_its_end_on() {
        let now = Instant::now();
        let s = Duration::from_secs;
        assert!(!passes(None, now, s(1000)));
        assert!(!passes(Some(now + s(5)), now, s(4)));
        assert!(passes(Some(now + s(5)), now, s(5)));
        assert!(passes(Some(now + s(5)), now, s(6)));
        assert!(passes(Some(now), now, s(0)));
    }

    /// A pause that would end past the deadline does not start; without a deadline it sleeps
    /// and lets the retry go.
    #[tokio::test]
    async fn a_pause_past_the_deadline_gives_up_at_once() {
        let b = ptc_plan::Backoff {
            max_retries: 1,
            initial_ms: 1,
            max_ms: 1,
        };
        assert!(!pause(&b, 0, Some(Instant::now())).await);
        assert!(pause(&b, 0, None).await);
        assert!(pause(&b, 0, Some(Instant::now() + Duration::from_secs(60))).await);
    }
    use ptc_plan::{Annotations, OperationBinding, Param};
    use serde_json::json;

    fn tool(path: &str, params: &[(&str, ParamLocation, bool, bool)]) -> ToolPlan {
        ToolPlan {
            name: "t".into(),
            description: String::new(),
            input_schema: json!({}),
            output_schema: json!({}),
            annotations: Annotations {
                read_only_hint: true,
            },
            classified: Default::default(),
            ptc: OperationBinding {
                transport: "openapi".into(),
                operation_id: "t".into(),
                method: "GET".into(),
                path: path.into(),
                base_url: None,
                params: params
                    .iter()
                    .map(|(n, l, r, rep)| Param {
                        name: n.to_string(),
                        location: *l,
                        required: *r,
                        repeated: *rep,
                    })
                    .collect(),
                body: None,
                default_args: Map::new(),
                request_timeout_ms: 1000,
                connect_timeout_ms: 1000,
                max_response_bytes: 1000,
                result_path: None,
                pagination: None,
                notes: None,
                unvalidated: vec![],
            },
        }
    }

    fn args(v: Value) -> Map<String, Value> {
        let Value::Object(m) = v else { panic!() };
        m
    }

    #[test]
    fn path_values_stay_in_their_segment() {
        let t = tool(
            "/api/traces/{id}/steps",
            &[("id", ParamLocation::Path, true, false)],
        );
        let cases = [
            ("a/b", "/api/traces/a%2Fb/steps"),
            ("x?y=1", "/api/traces/x%3Fy%3D1/steps"),
            ("x#frag", "/api/traces/x%23frag/steps"),
            ("50%", "/api/traces/50%25/steps"),
            ("..a", "/api/traces/..a/steps"),
            ("é ö", "/api/traces/%C3%A9%20%C3%B6/steps"),
        ];
        for (value, want) in cases {
            let url = build_url("http://h:1/base/", &t, &args(json!({"id": value}))).unwrap();
            assert_eq!(url, format!("http://h:1/base{want}"), "{value}");
            // Parsing keeps the route: the path still has exactly these segments.
            let parsed = reqwest::Url::parse(&url).unwrap();
            assert_eq!(parsed.path(), format!("/base{want}"));
        }
        for bad in ["..", ".", ""] {
            let e = build_url("http://h", &t, &args(json!({"id": bad}))).unwrap_err();
            assert_eq!(
                e,
                format!("argument :id is part of the path and cannot be {bad:?}")
            );
        }
    }

    #[test]
    fn query_values_are_encoded_and_arrays_follow_the_plan() {
        let t = tool(
            "/q",
            &[
                ("q", ParamLocation::Query, false, false),
                ("tag", ParamLocation::Query, false, true),
                ("ids", ParamLocation::Query, false, false),
                ("n", ParamLocation::Query, false, false),
            ],
        );
        let url = build_url(
            "http://h",
            &t,
            &args(json!({"q": "a&b=c #d", "tag": ["x", "y"], "ids": [1, 2], "n": 5})),
        )
        .unwrap();
        assert_eq!(url, "http://h/q?q=a%26b%3Dc+%23d&tag=x&tag=y&ids=1%2C2&n=5");
        assert_eq!(
            build_url("http://h", &t, &Map::new()).unwrap(),
            "http://h/q"
        );
        let e = build_url("http://h", &t, &args(json!({"q": {"a": 1}}))).unwrap_err();
        assert_eq!(e, "argument :q must be a single value here, got a map");
    }

    #[test]
    fn problem_details_are_bounded() {
        assert_eq!(
            problem_detail(br#"{"type":"x","title":"Bad","detail":"org_id is required"}"#),
            "org_id is required"
        );
        assert_eq!(problem_detail(b"plain\n text"), "plain text");
        // The first non-empty of detail, message, error, title; an object's own `message`.
        assert_eq!(problem_detail(br#"{"detail":"","title":"T"}"#), "T");
        assert_eq!(problem_detail(br#"{"message":"m","error":"e"}"#), "m");
        assert_eq!(
            problem_detail(br#"{"error":{"message":"nested"}}"#),
            "nested"
        );
        assert_eq!(problem_detail(br#"{"code":7}"#), r#"{"code":7}"#);
        assert_eq!(problem_detail(b"[1, 2]"), "[1,2]");
        let long = "x".repeat(2000);
        assert_eq!(
            problem_detail(long.as_bytes()).chars().count(),
            DETAIL_CHARS + 3
        );
        let exact = "é".repeat(DETAIL_CHARS);
        assert_eq!(
            problem_detail(exact.as_bytes()),
            exact,
            "at the bound: whole"
        );
        let over = "é".repeat(DETAIL_CHARS + 1);
        assert_eq!(
            problem_detail(over.as_bytes()),
            format!("{}...", &over[..over.len() - 2]),
            "one past: cut"
        );
    }

    /// A timeout says which clock ran out: the program's, or the request's own.
    #[test]
    fn timeouts_name_the_clock_that_ran_out() {
        let t = Duration::from_millis(1500);
        let now = Instant::now();
        let want_request = "no complete answer within 1500 ms";
        assert_eq!(timed_out(t, None), want_request);
        assert_eq!(
            timed_out(t, Some(now + Duration::from_secs(60))),
            want_request
        );
        assert_eq!(
            timed_out(t, Some(now)),
            "the program's time ran out during the call"
        );
    }
}
