//! Ranking tools for a search (`apropos`, `tool/search`): BM25F over each tool's fields — its
//! name (and upstream), summary, the rest of its description and its argument names, weighted in
//! that order — with light stemming (`reviews` finds `review`) and a bonus for tools that match
//! every term of the query. Hand-written: the catalog is small (hundreds of tools) and held in
//! memory, so an index crate (tantivy) would cost far more than it saves; each search scores
//! every listed tool, well under a millisecond per hundred tools.

use std::collections::HashMap;

use serde_json::Value;

use crate::catalog::{Catalog, ToolEntry};

/// Field weights: name, summary, description, argument names.
const WEIGHTS: [f64; 4] = [3.0, 2.0, 1.0, 1.5];
/// BM25 saturation and length normalisation.
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// Words that say nothing about which tool is meant.
const STOPWORDS: &[&str] = &[
    "a", "all", "an", "and", "are", "as", "at", "be", "by", "do", "does", "for", "from", "get",
    "how", "i", "in", "is", "it", "its", "me", "my", "of", "on", "or", "that", "the", "their",
    "this", "to", "what", "which", "who", "with",
];
/// Name words that say what kind of call it is, not what it is about.
const VERBS: &[&str] = &["list", "get"];

/// A tool and how well it matched.
#[derive(Debug)]
pub struct Hit<'c> {
    /// The tool.
    pub tool: &'c ToolEntry,
    /// Its score (higher is better; comparable within one search only).
    pub score: f64,
}

/// The tools matching `query`, best first (ties by upstream and name); only tools already listed
/// are searched, so a search never connects to an upstream.
pub fn search<'c>(catalog: &'c Catalog, query: &str) -> Vec<Hit<'c>> {
    let terms: Vec<String> = {
        let mut t = words(query);
        t.dedup();
        t
    };
    if terms.is_empty() {
        return Vec::new();
    }
    let docs: Vec<(&ToolEntry, [Vec<String>; 4])> = catalog
        .servers()
        .iter()
        .flat_map(|s| s.tools().unwrap_or_default())
        .map(|t| (t, fields(t)))
        .collect();
    let n = docs.len() as f64;
    let mut avg = [0.0; 4];
    for (_, f) in &docs {
        for (a, field) in avg.iter_mut().zip(f) {
            *a += field.len() as f64 / n.max(1.0);
        }
    }
    // Document frequency of each term (exact token match in any field).
    let mut df: HashMap<&str, f64> = HashMap::new();
    for term in &terms {
        let count = docs
            .iter()
            .filter(|(_, f)| f.iter().flatten().any(|w| w == term))
            .count();
        df.insert(term, count as f64);
    }
    let mut hits: Vec<Hit<'c>> = docs
        .iter()
        .filter_map(|(tool, f)| {
            let mut score = 0.0;
            let mut matched = 0;
            for term in &terms {
                let mut tf = 0.0;
                for (i, field) in f.iter().enumerate() {
                    let count: f64 = field.iter().map(|w| weight(w, term)).sum();
                    if count > 0.0 {
                        let norm = 1.0 - B + B * field.len() as f64 / avg[i].max(1.0);
                        tf += WEIGHTS[i] * count / norm;
                    }
                }
                if tf > 0.0 {
                    matched += 1;
                    let d = df[term.as_str()];
                    let idf = (1.0 + (n - d + 0.5) / (d + 0.5)).ln();
                    score += idf * tf * (K1 + 1.0) / (tf + K1);
                }
            }
            (matched > 0).then(|| Hit {
                tool,
                // Tools that match every term, and whose name the query explains, come first.
                score: score
                    * (1.0 + matched as f64 / terms.len() as f64)
                    * (1.0 + name_coverage(tool, &terms)),
            })
        })
        .collect();
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.tool.server.cmp(&b.tool.server))
            .then_with(|| a.tool.name.cmp(&b.tool.name))
    });
    hits
}

/// How much token `w` counts for query term `t`: 1 when equal; less when one starts the other
/// (`repo` in a name for `repository` asked, `reviewer` for `review`), for words of four letters
/// or more; 0 otherwise.
fn weight(w: &str, t: &str) -> f64 {
    if w == t {
        1.0
    } else if w.len() >= 4 && t.starts_with(w) {
        0.5
    } else if t.len() >= 4 && w.starts_with(t) {
        0.3
    } else {
        0.0
    }
}

/// The share of the words of the tool's own name (its verbs `list`, `get` aside) that query
/// terms match, each counted by how well: a short name the query explains beats a long one it
/// touches.
fn name_coverage(tool: &ToolEntry, terms: &[String]) -> f64 {
    let name: Vec<String> = words(&tool.name)
        .into_iter()
        .filter(|w| !VERBS.contains(&w.as_str()))
        .collect();
    if name.is_empty() {
        return 0.0;
    }
    let covered: f64 = name
        .iter()
        .map(|w| terms.iter().map(|t| weight(w, t)).fold(0.0, f64::max))
        .sum();
    covered / name.len() as f64
}

/// A tool's fields as words: name (with its upstream), summary, rest of the description,
/// argument names.
fn fields(t: &ToolEntry) -> [Vec<String>; 4] {
    let (summary, rest) = t
        .description
        .split_once("\n\n")
        .unwrap_or((&t.description, ""));
    let args: String = t
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    [
        words(&format!("{} {}", t.server, t.name)),
        words(summary),
        words(rest),
        words(&args),
    ]
}

/// The words of `text`: split at anything not a letter or digit and at camelCase humps,
/// lowercased, stop words left out, lightly stemmed.
pub fn words(text: &str) -> Vec<String> {
    tokens(text)
        .into_iter()
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
        .map(|w| stem(&w))
        .collect()
}

/// Plural and `-ing` endings off, so `reviews`, `reviewing` and `review` meet.
fn stem(w: &str) -> String {
    let n = w.len();
    if n > 4 && w.ends_with("ies") {
        format!("{}y", &w[..n - 3])
    } else if n > 5 && w.ends_with("ing") {
        w[..n - 3].to_string()
    } else if n > 3 && w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") {
        w[..n - 1].to_string()
    } else {
        w.to_string()
    }
}

/// `text` split into lowercase tokens at non-alphanumerics and camelCase humps.
pub fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && prev_lower && !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            prev_lower = c.is_lowercase();
            cur.extend(c.to_lowercase());
        } else {
            prev_lower = false;
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_lowercase_stem_and_drop_stop_words() {
        assert_eq!(
            words("List reviewsForPullRequest of the repos_issues"),
            ["list", "review", "pull", "request", "repo", "issue"]
        );
        assert_eq!(
            words("policies running status access"),
            ["policy", "runn", "status", "access"]
        );
        assert_eq!(stem("bus"), "bus");
        assert_eq!(stem("is"), "is");
        assert_eq!(stem("ties"), "tie");
        assert_eq!(stem("sing"), "sing");
        // At the length limits: five letters keep their `-ing`, three their `s`.
        assert_eq!(stem("thing"), "thing");
        assert_eq!(stem("things"), "thing");
        assert_eq!(stem("gas"), "gas");
        assert_eq!(stem("gases"), "gase");
    }

    #[test]
    fn weights_count_equal_words_fully_and_prefixes_a_little() {
        assert_eq!(weight("review", "review"), 1.0);
        assert_eq!(weight("reviewer", "review"), 0.3);
        assert_eq!(weight("repo", "repository"), 0.5);
        assert_eq!(weight("rep", "repository"), 0.0);
        assert_eq!(weight("rev", "re"), 0.0);
        assert_eq!(weight("prs", "pr"), 0.0);
    }

    fn tool(server: &str, name: &str, description: &str, args: &[&str]) -> ToolEntry {
        let props: serde_json::Map<String, Value> = args
            .iter()
            .map(|a| (a.to_string(), serde_json::json!({"type": "string"})))
            .collect();
        ToolEntry {
            server: server.into(),
            name: name.into(),
            description: description.into(),
            input_schema: serde_json::json!({"type": "object", "properties": props}),
            output_schema: None,
            classified: Default::default(),
            disabled: None,
            max_response_bytes: 1,
            binding: crate::catalog::tests_support::operation(name),
            projection: Default::default(),
            pin: None,
            index: 0,
        }
    }

    fn catalog(servers: &[(&str, Vec<ToolEntry>)]) -> Catalog {
        Catalog {
            servers: servers
                .iter()
                .map(|(name, tools)| {
                    let s = crate::catalog::ServerEntry::new(
                        name,
                        "",
                        ptc_plan::TransportKind::Openapi,
                        Default::default(),
                    );
                    s.set_tools(tools.clone());
                    s
                })
                .collect(),
        }
    }

    fn ranked(catalog: &Catalog, query: &str) -> Vec<(String, f64)> {
        search(catalog, query)
            .into_iter()
            .map(|h| (format!("{}/{}", h.tool.server, h.tool.name), h.score))
            .collect()
    }

    /// The scores are BM25F as the module says, checked against the formula worked out for a
    /// four-tool catalog (fields: `server name`, summary, rest of the description, argument
    /// names; weights 3, 2, 1, 1.5; k1 1.2, b 0.75; idf ln(1 + (n − df + 0.5)/(df + 0.5)); then
    /// × (1 + matched/terms) × (1 + name coverage)). An equal word counts 1, a word the term
    /// starts with 0.5 (`repo` for `repository`), a word starting with the term 0.3
    /// (`reviewers` for `review`).
    #[test]
    fn scores_follow_bm25f_and_rank_best_first() {
        let c = catalog(&[(
            "s",
            vec![
                tool(
                    "s",
                    "pull-reviews",
                    "List reviews\n\nThe reviews of a pull request, oldest first.",
                    &["pull_number", "per_page"],
                ),
                tool(
                    "s",
                    "issues",
                    "List issues\n\nIssues with their review state.",
                    &["state"],
                ),
                tool("s", "repo", "Get a repository\n\nOne repository.", &[]),
                tool("s", "reviewers", "Requested reviewers", &["pull_number"]),
            ],
        )]);
        let expect = |query: &str, want: &[(&str, f64)]| {
            let got = ranked(&c, query);
            assert_eq!(got.len(), want.len(), "{query}: {got:?}");
            for ((name, score), (want_name, want_score)) in got.iter().zip(want) {
                assert_eq!(name, want_name, "{query}: {got:?}");
                assert!((score - want_score).abs() < 1e-9, "{query}: {got:?}");
            }
        };
        expect(
            "pull review",
            &[
                ("s/pull-reviews", 9.491748186395192),
                ("s/reviewers", 4.320581603930607),
                ("s/issues", 0.9610864268268151),
            ],
        );
        expect(
            "reviews",
            &[
                ("s/pull-reviews", 3.6564315286078),
                ("s/reviewers", 2.2180351562321063),
                ("s/issues", 1.2814485691024202),
            ],
        );
        expect("repository", &[("s/repo", 6.576222378364729)]);
        expect("nothing here", &[]);
        expect("the of", &[]);
    }

    /// Equal scores are ordered by upstream, then by tool name.
    #[test]
    fn ties_go_by_upstream_then_name() {
        let same = |server: &str, name: &str| tool(server, name, "Alpha", &[]);
        let c = catalog(&[
            ("b", vec![same("b", "x2"), same("b", "x1")]),
            ("a", vec![same("a", "x3")]),
        ]);
        let got: Vec<String> = ranked(&c, "alpha").into_iter().map(|h| h.0).collect();
        assert_eq!(got, ["a/x3", "b/x1", "b/x2"]);
    }
}
