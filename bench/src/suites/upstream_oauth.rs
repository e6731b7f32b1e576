//! A hosted MCP server behind OAuth 2.1: a call with the token ptc obtained itself (client
//! credentials, discovered from the server's 401) beside the same call with the same kind of
//! token configured as a static bearer credential, on the same server (`fixtures/mcp/
//! oauth_server.py`, which checks every token against the test issuer's keys), sampled in
//! alternation. Target: at most 1.05×. Also reported: the first call's cost, start-up included
//! (the 401, both metadata documents, the token request), beside the same first call with the
//! static token.

use std::time::{Duration, Instant};

use ptc_core::ToolOutput;
use ptc_core::call::upstreams::{CallOptions, StartOptions, Upstreams};
use serde_json::{Map, json};

use crate::measure::{Budget, pair_rounds};
use crate::report::Row;

/// What a call with an obtained token may cost over the same call with a static one.
const TARGET: f64 = 1.05;
/// Rounds of alternating samples: the difference sought is a few percent of a Python server's
/// answer, which moves more than that between rounds.
const ROUNDS: usize = 3;

/// The rows, skipped (said on stderr) when the issuer or server cannot run.
pub fn run(budget: Budget) -> Vec<Row> {
    match rows(budget) {
        Ok(rows) => rows,
        Err(e) => {
            eprintln!("upstream_oauth: skipped: {e}");
            Vec::new()
        }
    }
}

fn rows(budget: Budget) -> Result<Vec<Row>, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for venv in ["fixtures/auth-issuer/.venv", "fixtures/mcp/.venv"] {
        if !root.join(venv).exists() {
            return Err(format!("{venv} is missing (scripts/test installs it)"));
        }
    }
    let issuer = ptc_tests::issuer::start(&[]).ok_or("the issuer did not start")?;
    let server = ptc_tests::oauth_mcp::OAuthMcp::start(&issuer.url, &[])
        .ok_or("the OAuth MCP server did not start")?;
    let (id, secret) = ptc_tests::issuer::client();
    // The scope the server requires, as ptc asks for it (the resource's `scopes_supported`).
    let token =
        rt.block_on(issuer.client_credentials(&[("resource", &server.url), ("scope", "read")]));
    let upstream = |auth: serde_json::Value| {
        let mut u = json!({"transport": "mcp_http", "url": server.url,
                           "allow_insecure_http": true, "allow_insecure_auth": true});
        u.as_object_mut().expect("an object").extend(
            auth.as_object()
                .expect("an object")
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        json!({
            "credentials": {
                "client": {"source": "literal", "value": secret},
                "token": {"source": "literal", "value": token},
            },
            "upstreams": {"hosted": u},
        })
    };
    let obtained = upstream(json!({"oauth": {"grant": "client_credentials",
                                             "client_id": id, "client_secret": "client"}}));
    let configured = upstream(json!({"auth": [{"scheme": "bearer", "binding": "token"}]}));
    let start = |config: &serde_json::Value| -> Result<Upstreams, String> {
        let loaded = ptc_plan::load_str(
            &config.to_string(),
            std::path::Path::new("upstreams.json"),
            &ptc_plan::FileSource,
        )
        .map_err(|d| d.to_string())?;
        rt.block_on(Upstreams::start(
            loaded.plan,
            loaded.secrets,
            StartOptions::default(),
        ))
        .map_err(|e| e.to_string())
    };
    let call = |u: &Upstreams| {
        rt.block_on(u.call("hosted", "whoami", Map::new(), CallOptions::default()))
            .map_err(|e| e.message)
    };

    // The first call, start-up (connection, listing) included: once each, both fresh.
    let first = |config: &serde_json::Value| -> Result<Duration, String> {
        let t = Instant::now();
        let u = start(config)?;
        call(&u)?;
        Ok(t.elapsed())
    };
    let first_obtained = first(&obtained)?;
    let first_configured = first(&configured)?;
    let first_row = Row::time(
        "upstream_oauth",
        "first call, OAuth discovered and granted (start-up included)",
        first_obtained,
        "first call with a static bearer token",
        first_configured,
        None,
        format!(
            "discovery (401, resource and server metadata) and the token request add {:.1} ms",
            (first_obtained.as_secs_f64() - first_configured.as_secs_f64()) * 1e3
        ),
    );

    let with_oauth = start(&obtained)?;
    let with_static = start(&configured)?;
    call(&with_oauth)?;
    call(&with_static)?;
    let timed = |u: &Upstreams| {
        let t = Instant::now();
        let _ = std::hint::black_box(call(u));
        t.elapsed()
    };
    let (ours, base, ratios) = pair_rounds(
        budget,
        ROUNDS,
        || timed(&with_oauth),
        || timed(&with_static),
    );
    let per_round: Vec<String> = ratios.iter().map(|r| format!("{r:.3}")).collect();
    let call_row = Row::paired(
        "upstream_oauth",
        "call with the token ptc obtained (cached)",
        &ours,
        "the same call with a static bearer token",
        &base,
        Some(TARGET),
        format!(
            "{:.2} ms per call; rounds {}; target <= {TARGET}x",
            ours.median().as_secs_f64() * 1e3,
            per_round.join(", ")
        ),
    );
    let callers = rt.block_on(many_callers(&issuer, &server, &configured))?;
    let mut rows = vec![call_row, first_row];
    rows.extend(callers);
    Ok(rows)
}

/// Callers at once in the many-callers rows: below the per-upstream bound of caller sessions
/// (256), so each caller keeps a session of their own.
const CALLERS: usize = 200;
/// How long the upstream's `wait` tool takes: a slow hosted server, as a program mostly waits.
const WAIT_MS: u64 = 200;

/// Many callers at once, each called as themselves: each caller's own token exchanged (RFC 8693)
/// for one meant for the upstream and a session of their own, every call waiting [`WAIT_MS`] in
/// the server; beside the same calls at once over one shared session with a static token. Twice:
/// the first round opens every caller's session (an exchange, a handshake each), the second
/// finds them kept. Every answer must name its own caller.
async fn many_callers(
    issuer: &ptc_tests::issuer::Issuer,
    server: &ptc_tests::oauth_mcp::OAuthMcp,
    configured: &serde_json::Value,
) -> Result<Vec<Row>, String> {
    use ptc_core::credentials::identity::{Caller, CallerToken};
    use std::sync::Arc;

    let as_caller = server.as_each_caller(issuer);
    let start = |config: &serde_json::Value| {
        let loaded = ptc_plan::load_str(
            &config.to_string(),
            std::path::Path::new("upstreams.json"),
            &ptc_plan::FileSource,
        )
        .map_err(|d| d.to_string());
        async move {
            let loaded = loaded?;
            Upstreams::start(loaded.plan, loaded.secrets, StartOptions::default())
                .await
                .map_err(|e| e.to_string())
        }
    };
    let per_caller = Arc::new(start(&as_caller).await?);
    let shared = Arc::new(start(configured).await?);
    let mut people = Vec::with_capacity(CALLERS);
    for n in 0..CALLERS {
        let subject = format!("person-{n}");
        let own = issuer.caller_token(&subject).await;
        people.push(Arc::new(Caller {
            subject,
            token: Some(CallerToken::new(&own)),
            ..Caller::local()
        }));
    }
    let args: Map<String, serde_json::Value> =
        [("ms".to_string(), json!(WAIT_MS))].into_iter().collect();
    // All calls at once; the wall time until the last answer, every answer checked.
    let round = |upstreams: Arc<Upstreams>, as_themselves: bool| {
        let people = people.clone();
        let args = args.clone();
        async move {
            let t = Instant::now();
            let calls: Vec<_> = people
                .iter()
                .map(|person| {
                    let upstreams = upstreams.clone();
                    let args = args.clone();
                    let caller = as_themselves.then(|| person.clone());
                    tokio::spawn(async move {
                        let options = CallOptions {
                            caller,
                            ..CallOptions::default()
                        };
                        upstreams.call("hosted", "wait", args, options).await
                    })
                })
                .collect();
            let mut answers = Vec::with_capacity(calls.len());
            for call in calls {
                answers.push(call.await.map_err(|e| e.to_string())?);
            }
            let elapsed = t.elapsed();
            for (person, answer) in people.iter().zip(answers) {
                let answer: Option<serde_json::Value> = match answer.map_err(|e| e.message)? {
                    ToolOutput::Text(t) => serde_json::from_str(&t).ok(),
                    ToolOutput::Json(bytes) => serde_json::from_slice(&bytes).ok(),
                    ToolOutput::Empty => None,
                };
                let sub = answer.and_then(|v| v["sub"].as_str().map(str::to_string));
                if as_themselves && sub.as_deref() != Some(person.subject.as_str()) {
                    return Err(format!("{} was answered for {sub:?}", person.subject));
                }
            }
            Ok::<_, String>(elapsed)
        }
    };
    let shared_first = round(shared.clone(), false).await?;
    let opened = round(per_caller.clone(), true).await?;
    let shared_kept = round(shared.clone(), false).await?;
    let kept = round(per_caller.clone(), true).await?;
    let sessions: u64 = per_caller
        .caller_sessions()
        .iter()
        .map(|(_, c)| c.opened.load(std::sync::atomic::Ordering::Relaxed))
        .sum();
    if sessions != CALLERS as u64 {
        return Err(format!("{CALLERS} callers opened {sessions} sessions"));
    }
    let made = per_caller.exchanges().made();
    Ok(vec![
        Row::time(
            "upstream_oauth",
            &format!(
                "{CALLERS} callers at once, each as themselves (first: exchange and session each)"
            ),
            opened,
            &format!("{CALLERS} calls at once, one shared session, static token"),
            shared_first,
            None,
            format!(
                "each call waits {WAIT_MS} ms in the server; {made} exchanges, {sessions} sessions opened"
            ),
        ),
        Row::time(
            "upstream_oauth",
            &format!("{CALLERS} callers at once, each as themselves (sessions kept)"),
            kept,
            &format!("{CALLERS} calls at once, one shared session, static token"),
            shared_kept,
            None,
            format!("each call waits {WAIT_MS} ms in the server; every answer named its caller"),
        ),
    ])
}
