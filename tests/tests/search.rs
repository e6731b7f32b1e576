//! Search over a large real catalog: GitHub's REST API description (611 GET operations,
//! `fixtures/large-catalog`, installed by `scripts/test`). For each of 20 requests written the way
//! a user would ask, from the tools' descriptions, the tool meant is among the first three results;
//! `tool/search` gives the results as data and `apropos` pages them.

mod support;

use std::path::Path;
use std::sync::Arc;

use ptc_core::{Budgets, StartOptions, Upstreams};

/// (request, the tool it means)
const QUERIES: [(&str, &str); 20] = [
    ("pull request review", "pulls-list-reviews"),
    ("commits in a pull request", "pulls-list-commits"),
    ("contents of a file in a repository", "repos-get-content"),
    (
        "workflow runs of a repository",
        "actions-list-workflow-runs-for-repo",
    ),
    ("comments on an issue", "issues-list-comments"),
    ("release for a tag", "repos-get-release-by-tag"),
    ("branches of a repository", "repos-list-branches"),
    ("check runs for a commit", "checks-list-for-ref"),
    ("members of an organization", "orgs-list-members"),
    (
        "the authenticated user's profile",
        "users-get-authenticated",
    ),
    ("search code in files", "search-code"),
    ("tags of a repository", "repos-list-tags"),
    ("get a gist by id", "gists-get"),
    (
        "artifacts of a workflow run",
        "actions-list-workflow-run-artifacts",
    ),
    ("deployments of a repository", "repos-list-deployments"),
    ("labels on an issue", "issues-list-labels-on-issue"),
    (
        "dependabot alerts in a repository",
        "dependabot-list-alerts-for-repo",
    ),
    (
        "people who starred a repository",
        "activity-list-stargazers-for-repo",
    ),
    ("team by its slug", "teams-get-by-name"),
    ("API rate limit status", "rate-limit-get"),
];

struct Bed {
    rt: tokio::runtime::Runtime,
    up: Arc<Upstreams>,
}

fn bed() -> Option<Bed> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/large-catalog");
    if !root.join("node_modules/@octokit/openapi").exists() {
        ptc_tests::skip("GitHub's API description is not installed (scripts/test installs it)");
        return None;
    }
    let loaded = ptc_plan::load(&root.join("github.json")).unwrap_or_else(|d| panic!("{d}"));
    let rt = support::runtime(1);
    let up = rt
        .block_on(Upstreams::start(
            loaded.plan,
            loaded.secrets,
            StartOptions::default(),
        ))
        .unwrap();
    Some(Bed {
        rt,
        up: Arc::new(up),
    })
}

impl Bed {
    fn value(&self, src: &str) -> String {
        let run = support::run(&self.rt, &self.up, src, Budgets::default());
        run.result
            .unwrap_or_else(|e| panic!("{src}: {e}"))
            .to_string()
    }
}

#[test]
fn the_tool_meant_is_in_the_top_three_for_each_request() {
    let Some(b) = bed() else { return };
    let tools = b.up.catalog().servers()[0].tools().unwrap().len();
    assert_eq!(tools, 611);
    let mut misses = Vec::new();
    for (query, meant) in QUERIES {
        let hits = ptc_core::catalog::search::search(b.up.catalog(), query);
        let names: Vec<&str> = hits.iter().map(|h| h.tool.name.as_str()).collect();
        let rank = names.iter().position(|n| *n == meant);
        if rank.is_none_or(|r| r >= 3) {
            misses.push(format!(
                "{query:?}: {meant} at {rank:?}; top: {:?}",
                &names[..names.len().min(5)]
            ));
        }
    }
    assert!(misses.is_empty(), "{}", misses.join("\n"));
}

#[test]
fn tool_search_answers_data_and_apropos_pages() {
    let Some(b) = bed() else { return };
    let out = b.value(
        "(let [r (tool/search \"pull request review\" {:limit 3})]
           [(count r) (some #(= \"github/pulls-list-reviews\" (:name %)) r)
            (string? (:summary (first r))) (>= (:score (first r)) (:score (last r)))])",
    );
    assert_eq!(out, "[3 true true true]");
    // Pages of apropos put together are the first results of one larger page.
    let out = b.value(
        "(= (apropos \"workflow run\" {:limit 6})
            (concat (apropos \"workflow run\" {:limit 3}) (apropos \"workflow run\" {:limit 3 :offset 3})))",
    );
    assert_eq!(out, "true");
    let out = b.value("(count (tool/search \"zzzz-nothing\"))");
    assert_eq!(out, "0");
}
