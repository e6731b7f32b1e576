//! `tool/pages` and typed pages over real HTTP: the three pagination styles of
//! `fixtures/openapi/paging.openapi.json` (numbered pages shaped like GitHub's, offsets like
//! Jira's, cursors), a cursor that comes back, an answer that lost its result path, and the
//! run's budgets, against a loopback server that pages as those APIs do.

mod support;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::extract::Query;
use ptc_core::{Budgets, StartOptions, Upstreams};
use serde_json::{Value, json};

/// Issues in the repository (23: pages of 10 end with a short one).
const ISSUES: i64 = 23;

/// The paging server; it keeps every query string it was sent, per path.
fn paging_server(rt: &tokio::runtime::Runtime) -> (String, Arc<Mutex<Vec<String>>>) {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = |seen: &Arc<Mutex<Vec<String>>>, path: &str, q: &HashMap<String, String>| {
        let mut pairs: Vec<String> = q.iter().map(|(k, v)| format!("{k}={v}")).collect();
        pairs.sort();
        seen.lock()
            .unwrap()
            .push(format!("{path}?{}", pairs.join("&")));
    };
    let num = |q: &HashMap<String, String>, k: &str, d: i64| {
        q.get(k).and_then(|v| v.parse::<i64>().ok()).unwrap_or(d)
    };
    let (s1, s2, s3, s4) = (seen.clone(), seen.clone(), seen.clone(), seen.clone());
    let app = axum::Router::new()
        .route(
            "/repos/{owner}/{repo}/issues",
            axum::routing::get(move |Query(q): Query<HashMap<String, String>>| {
                log(&s1, "/issues", &q);
                let (page, per) = (num(&q, "page", 1), num(&q, "per_page", 30));
                let from = (page - 1) * per + 1;
                let list: Vec<Value> = (from..=(from + per - 1).min(ISSUES))
                    .map(|n| json!({"number": n, "title": format!("issue {n}")}))
                    .collect();
                async move { axum::Json(Value::Array(list)) }
            }),
        )
        .route(
            "/rest/api/3/search",
            axum::routing::get(move |Query(q): Query<HashMap<String, String>>| {
                log(&s2, "/search", &q);
                let (start, max) = (num(&q, "startAt", 0), num(&q, "maxResults", 50));
                let issues: Vec<Value> = (start..(start + max).min(ISSUES))
                    .map(|i| json!({"id": i.to_string(), "key": format!("OPS-{i}")}))
                    .collect();
                async move {
                    axum::Json(json!({"startAt": start, "maxResults": max, "total": ISSUES,
                                      "issues": issues}))
                }
            }),
        )
        .route(
            "/events",
            axum::routing::get(move |Query(q): Query<HashMap<String, String>>| {
                log(&s3, "/events", &q);
                // Cursors "c5", "c10", ...: the position of the next page's first event.
                let at = q
                    .get("cursor")
                    .and_then(|c| c.strip_prefix('c')?.parse::<i64>().ok())
                    .unwrap_or(0);
                let limit = num(&q, "limit", 5);
                let end = (at + limit).min(12);
                let data: Vec<Value> = (at..end).map(|i| json!({"id": i})).collect();
                let next = (end < 12).then(|| format!("c{end}"));
                async move { axum::Json(json!({"data": data, "meta": {"next": next}})) }
            }),
        )
        .route(
            "/events-looping",
            axum::routing::get(move |Query(q): Query<HashMap<String, String>>| {
                log(&s4, "/events-looping", &q);
                // Every page names the same cursor: the second page names the first's again.
                async move { axum::Json(json!({"data": [{"id": 1}], "meta": {"next": "a"}})) }
            }),
        )
        .route(
            "/events-drifted",
            axum::routing::get(|| async { axum::Json(json!({"events": [{"id": 1}]})) }),
        );
    let addr = support::loopback(rt, app);
    (format!("http://{addr}"), seen)
}

struct Bed {
    rt: tokio::runtime::Runtime,
    up: Arc<Upstreams>,
    seen: Arc<Mutex<Vec<String>>>,
}

fn bed() -> Bed {
    let rt = support::runtime(2);
    let (base, seen) = paging_server(&rt);
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/openapi/paging.openapi.json");
    let config = json!({"upstreams": {"api": {
        "transport": "openapi", "base_url": base, "allow_insecure_http": true,
        "schema_file": doc, "include_operations": ["issues/list-for-repo",
        "searchForIssuesUsingJql", "list_events", "list_events_looping", "list_events_drifted"]}}});
    let loaded = ptc_plan::load_str(
        &config.to_string(),
        Path::new("/paging/upstreams.json"),
        &ptc_plan::FileSource,
    )
    .unwrap_or_else(|d| panic!("{d}"));
    let up = rt
        .block_on(Upstreams::start(
            loaded.plan,
            loaded.secrets,
            StartOptions::default(),
        ))
        .unwrap();
    Bed {
        rt,
        up: Arc::new(up),
        seen,
    }
}

impl Bed {
    fn run_with(&self, src: &str, budgets: Budgets) -> String {
        let run = support::run(&self.rt, &self.up, src, budgets);
        match run.result {
            Ok(v) => v.to_string(),
            Err(e) => format!("error: {e}"),
        }
    }

    fn run(&self, src: &str) -> String {
        self.run_with(src, Budgets::default())
    }

    /// The requests the server got since the last call, and forgets them.
    fn requests(&self) -> Vec<String> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

/// Numbered pages (GitHub's style): the answer is the list, the page number grows by one, and
/// a page shorter than `per_page` is the last.
#[test]
fn numbered_pages_stop_at_the_short_page() {
    let b = bed();
    let out = b.run(
        "(let [r (tool/pages 'api/issues-list-for-repo {:owner \"o\" :repo \"r\" :per-page 10})]
           [(:ok r) (count (:value r)) (:pages r) (:complete r) (:next r) (:number (last (:value r)))])",
    );
    assert_eq!(out, "[true 23 3 true nil 23]");
    assert_eq!(
        b.requests(),
        [
            "/issues?page=1&per_page=10",
            "/issues?page=2&per_page=10",
            "/issues?page=3&per_page=10"
        ]
    );
    // Exactly a page size of items: the next page is asked for, and is empty.
    let out = b.run(
        "(let [r (tool/pages 'api/issues-list-for-repo {:owner \"o\" :repo \"r\" :per-page 23})]
           [(count (:value r)) (:pages r) (:complete r)])",
    );
    assert_eq!(out, "[23 2 true]");
    // :max-pages stops early, and :next is where to go on from (the page argument).
    let out = b.run(
        "(let [r (tool/pages 'api/issues-list-for-repo {:owner \"o\" :repo \"r\" :per-page 5}
                             {:max-pages 2})
               more (tool/pages 'api/issues-list-for-repo
                                {:owner \"o\" :repo \"r\" :per-page 5 :page (:next r)} {:max-pages 1})]
           [(count (:value r)) (:complete r) (:next r) (map :number (:value more))])",
    );
    assert_eq!(out, "[10 false 3 [11 12 13 14 15]]");
}

/// Offsets (Jira's style): the list is under `issues` (the result path), the offset grows by the
/// items a page returned, and a page shorter than `maxResults` is the last.
#[test]
fn offsets_grow_by_the_items_returned() {
    let b = bed();
    let out = b.run(
        "(let [r (tool/pages 'api/search-for-issues-using-jql {:jql \"x\" :maxResults 8})]
           [(count (:value r)) (:pages r) (:complete r) (:key (first (:value r)))])",
    );
    assert_eq!(out, "[23 3 true \"OPS-0\"]");
    assert_eq!(
        b.requests(),
        [
            "/search?jql=x&maxResults=8&startAt=0",
            "/search?jql=x&maxResults=8&startAt=8",
            "/search?jql=x&maxResults=8&startAt=16"
        ]
    );
    // A call returns what the result path selects: the issues, not the envelope.
    let out =
        b.run("(count (:value (tool/call 'api/search-for-issues-using-jql {:maxResults 4})))");
    assert_eq!(out, "4");
}

/// Cursors: each answer names the next page's cursor (at `/meta/next`); the last names none.
/// `:max-items` stops once enough items are in, and `:as :pages` keeps pages whole.
#[test]
fn cursors_are_followed_to_the_last_page() {
    let b = bed();
    let out = b.run(
        "(let [r (tool/pages 'api/list-events {:limit 5})]
           [(count (:value r)) (:pages r) (:complete r) (map :id (take-last 2 (:value r)))])",
    );
    assert_eq!(out, "[12 3 true [10 11]]");
    assert_eq!(
        b.requests(),
        [
            "/events?limit=5",
            "/events?cursor=c5&limit=5",
            "/events?cursor=c10&limit=5"
        ]
    );
    let out = b.run(
        "(let [r (tool/pages 'api/list-events {:limit 5} {:max-items 7})]
           [(count (:value r)) (:pages r) (:complete r) (:next r)])",
    );
    assert_eq!(out, "[7 2 false \"c10\"]");
    let out = b.run(
        "(let [r (tool/pages 'api/list-events {:limit 5} {:as :pages})]
           (map count (:value r)))",
    );
    assert_eq!(out, "[5 5 2]");
}

/// A cursor that comes back would loop: the loop stops with the pages so far and says why.
#[test]
fn a_repeated_cursor_stops_the_loop() {
    let b = bed();
    let out = b.run(
        "(let [r (tool/pages 'api/list-events-looping {} {:max-pages 10})]
           [(:ok r) (:reason r) (:pages r) (count (:value r)) (:message r)])",
    );
    assert_eq!(
        out,
        "[false :upstream_error 2 2 \"api/list-events-looping: stopped after page 2: the cursor \\\"a\\\" came back a second time; the upstream's paging loops\"]"
    );
    assert_eq!(b.requests().len(), 2);
}

/// An answer without its result path is the upstream's error, for a call and for a page.
#[test]
fn an_answer_without_its_result_path_is_an_upstream_error() {
    let b = bed();
    let out =
        b.run("(let [r (tool/call 'api/list-events-drifted)] [(:ok r) (:reason r) (:message r)])");
    assert_eq!(
        out,
        "[false :upstream_error \"api/list-events-drifted: the response has no value at `/data` (its result path); the upstream's answer no longer matches its schema\"]"
    );
}

/// Every page is one upstream call of the run's budget: a spent budget ends the loop with the
/// pages so far; `:max-pages` may not ask for more calls than the budget has.
#[test]
fn pages_spend_the_runs_call_budget() {
    let b = bed();
    let budgets = Budgets {
        max_calls: 3,
        ..Budgets::default()
    };
    let out = b.run_with(
        "(do (tool/call 'api/list-events {:limit 1})
             (let [r (tool/pages 'api/list-events {:limit 5} {:max-pages 3})]
               [(:ok r) (:reason r) (:pages r) (count (:value r))]))",
        budgets,
    );
    assert_eq!(out, "[false :cap_exhausted 2 10]");
    let out = b.run_with("(tool/pages 'api/list-events {} {:max-pages 4})", budgets);
    assert!(
        out.contains(":max-pages must be an integer 1..3, got 4"),
        "{out}"
    );
}

/// Malformed calls are the program's mistakes, found before anything is sent when written
/// literally.
#[test]
fn malformed_page_calls_say_what_to_write() {
    let b = bed();
    let out = b.run("(tool/pages 'api/list-events-drifted {})");
    assert!(
        out.contains(
            "tool/pages: api/list-events-drifted has no pagination; call it with tool/call"
        ) && out.contains("before running (nothing was called)"),
        "{out}"
    );
    for (options, says) in [
        (
            "{:max-pages 0}",
            ":max-pages must be an integer 1..50, got 0",
        ),
        ("{:max-items -1}", ":max-items must be an integer"),
        (
            "{:max-items 1000001}",
            ":max-items must be an integer 1..1000000, got 1000001",
        ),
        ("{:as :rows}", ":as must be :items or :pages, got :rows"),
        ("{:pages 2}", "unknown option :pages"),
        ("[1]", "the options must be a map, got vector"),
    ] {
        let out = b.run(&format!("(tool/pages 'api/list-events {{}} {options})"));
        assert!(out.contains(says), "{options}: {out}");
    }
    // The largest :max-items is allowed.
    let out =
        b.run("(count (:value (tool/pages 'api/list-events {:limit 5} {:max-items 1000000})))");
    assert_eq!(out, "12");
    b.requests();
    let out = b.run("(tool/pages 'api/list-events {} {} {})");
    assert!(out.contains("use (tool/pages 'server/tool"), "{out}");
    assert!(b.requests().is_empty(), "nothing was sent");
}
