//! Pinned MCP tools at run time: an MCP upstream with a vendored tool list exposes exactly the
//! pinned tools, as they were reviewed, and compares the server's live `tools/list` with the pins
//! on every (re)connection and every `notifications/tools/list_changed`.
//!
//! The rule lives here once: a pinned tool whose live definition changed is refused under the
//! `refuse` policy (`tool_changed`, naming what changed) and stays callable under `warn`; a pinned
//! tool the server no longer lists answers `not_found`; a tool the server lists but nobody pinned
//! is never exposed. Each change is logged once, when it is first seen, and counted.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ptc_plan::pins::{PinChange, describe_changes};
use ptc_plan::{PinPolicy, PinnedTool};

use crate::call::contract::{Reason, ToolError};
use crate::wire::mcp::McpTool;

/// What the last comparison found for one pinned tool.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Verdict {
    /// Not compared yet: the server has not been listed.
    #[default]
    Unchecked,
    /// The live tool is the pinned one.
    Matches,
    /// The live tool differs from its pin in these fields.
    Changed(Vec<PinChange>),
    /// The server no longer lists the tool.
    Removed,
}

/// A pinned tool's verdict, shared by its catalog entry and its upstream's [`PinBoard`].
#[derive(Debug)]
pub struct PinCell {
    verdict: Mutex<Verdict>,
    policy: PinPolicy,
}

impl PinCell {
    /// The last comparison's verdict.
    pub fn verdict(&self) -> Verdict {
        self.verdict
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set(&self, verdict: Verdict) -> Verdict {
        std::mem::replace(
            &mut *self.verdict.lock().unwrap_or_else(|e| e.into_inner()),
            verdict,
        )
    }

    /// Why the tool `qualified` must not be called now, if it must not.
    pub fn refusal(&self, qualified: &str) -> Option<ToolError> {
        match self.verdict() {
            Verdict::Changed(changes) if self.policy == PinPolicy::Refuse => Some(ToolError {
                reason: Reason::ToolChanged,
                message: format!(
                    "{qualified} changed on the server since it was pinned (changed: {}), so it \
                     is not callable until the change is reviewed: `ptc vendor --check` shows \
                     it, `ptc vendor` pins it again",
                    describe_changes(&changes)
                ),
            }),
            Verdict::Removed => Some(ToolError {
                reason: Reason::NotFound,
                message: format!(
                    "{qualified} is pinned, but the server no longer lists it; remove it from \
                     `include_tools` or ask the server's owner"
                ),
            }),
            _ => None,
        }
    }

    /// What discovery says about the tool, when the comparison found something.
    pub fn note(&self) -> Option<String> {
        match self.verdict() {
            Verdict::Changed(changes) => Some(match self.policy {
                PinPolicy::Refuse => format!(
                    "not callable: its {} changed on the server since it was pinned",
                    describe_changes(&changes)
                ),
                PinPolicy::Warn => format!(
                    "warning: its {} changed on the server since it was pinned",
                    describe_changes(&changes)
                ),
            }),
            Verdict::Removed => Some("not callable: the server no longer lists it".into()),
            Verdict::Unchecked | Verdict::Matches => None,
        }
    }
}

/// How many pin events an upstream has seen (each counted once, when first seen).
#[derive(Debug, Default)]
pub struct PinCounts {
    /// A pinned tool found changed.
    pub changed: AtomicU64,
    /// A pinned tool found missing.
    pub removed: AtomicU64,
    /// A tool listed by the server that is not pinned (never exposed).
    pub unpinned: AtomicU64,
}

/// The pins of one MCP upstream and what the last comparison found.
pub(crate) struct PinBoard {
    upstream: String,
    pins: Vec<(PinnedTool, Arc<PinCell>)>,
    /// Vendored tools the config leaves out (not news when listed).
    left_out: Vec<String>,
    /// Unpinned tools already reported.
    unpinned: Mutex<BTreeSet<String>>,
    /// Serialises comparisons.
    pub(crate) comparing: tokio::sync::Mutex<()>,
    pub(crate) counts: PinCounts,
}

impl PinBoard {
    pub(crate) fn new(
        upstream: &str,
        policy: PinPolicy,
        pins: &[PinnedTool],
        left_out: &[String],
    ) -> Self {
        PinBoard {
            upstream: upstream.to_string(),
            left_out: left_out.to_vec(),
            pins: pins
                .iter()
                .map(|p| {
                    let cell = PinCell {
                        verdict: Mutex::new(Verdict::Unchecked),
                        policy,
                    };
                    (p.clone(), Arc::new(cell))
                })
                .collect(),
            unpinned: Mutex::new(BTreeSet::new()),
            comparing: tokio::sync::Mutex::new(()),
            counts: PinCounts::default(),
        }
    }

    /// The pins, each with its cell.
    pub(crate) fn pins(&self) -> impl Iterator<Item = (&PinnedTool, &Arc<PinCell>)> {
        self.pins.iter().map(|(p, c)| (p, c))
    }

    /// Compares the live listing of a session's client generation `generation` with the pins,
    /// updating each pinned tool's verdict (a verdict that changed is logged and counted once),
    /// and notes in the session's `compared` that its listing was compared.
    pub(crate) fn compare(&self, compared: &Compared, generation: u64, live: &[McpTool]) {
        for (pin, cell) in &self.pins {
            let now = match live.iter().find(|t| t.name == pin.name) {
                None => Verdict::Removed,
                Some(t) => {
                    // The pins' digests were checked against their content when the plan was
                    // loaded, so equal digests are equal tools: fields are compared only when a
                    // change has to be named.
                    let now = t.pin();
                    if now.sha256 == pin.sha256 {
                        Verdict::Matches
                    } else {
                        Verdict::Changed(pin.changes(&now))
                    }
                }
            };
            let before = cell.set(now.clone());
            if before == now {
                continue;
            }
            match &now {
                Verdict::Changed(changes) => {
                    self.counts.changed.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        upstream = %self.upstream,
                        tool = %pin.name,
                        changed = %describe_changes(changes),
                        policy = cell.policy.as_str(),
                        "a pinned tool changed on the server"
                    );
                }
                Verdict::Removed => {
                    self.counts.removed.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        upstream = %self.upstream,
                        tool = %pin.name,
                        "a pinned tool is no longer listed by the server"
                    );
                }
                Verdict::Matches if before != Verdict::Unchecked => tracing::info!(
                    upstream = %self.upstream,
                    tool = %pin.name,
                    "a pinned tool matches its pin again"
                ),
                Verdict::Matches | Verdict::Unchecked => {}
            }
        }
        let mut seen = self.unpinned.lock().unwrap_or_else(|e| e.into_inner());
        for t in live {
            let known =
                self.pins.iter().any(|(p, _)| p.name == t.name) || self.left_out.contains(&t.name);
            if !known && seen.insert(t.name.clone()) {
                self.counts.unpinned.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    upstream = %self.upstream,
                    tool = %t.name,
                    "the server lists a tool that is not pinned; it is not exposed"
                );
            }
        }
        compared.0.store(generation + 1, Ordering::Release);
    }
}

/// Which listing of one session (one MCP client) was last compared with the pins: every session
/// is compared, a caller's as much as the shared one.
#[derive(Debug, Default)]
pub(crate) struct Compared(AtomicU64);

impl Compared {
    /// Whether the listing of client generation `generation` has been compared.
    pub(crate) fn is_current(&self, generation: u64) -> bool {
        self.0.load(Ordering::Acquire) == generation + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, json};

    fn live(name: &str, description: &str) -> McpTool {
        McpTool {
            name: name.into(),
            description: description.into(),
            input_schema: json!({"type": "object"}),
            output_schema: None,
            annotations: Map::new(),
        }
    }

    fn board(policy: PinPolicy) -> PinBoard {
        let pins: Vec<PinnedTool> = ["echo", "add"]
            .iter()
            .map(|n| live(n, "reviewed").pin())
            .collect();
        PinBoard::new("peer", policy, &pins, &["left-out".into()])
    }

    fn cell<'a>(b: &'a PinBoard, name: &str) -> &'a PinCell {
        b.pins().find(|(p, _)| p.name == name).unwrap().1
    }

    #[test]
    fn a_changed_tool_is_refused_a_missing_one_is_not_found_and_new_ones_are_counted_once() {
        let b = board(PinPolicy::Refuse);
        let seen = Compared::default();
        assert!(!seen.is_current(0));
        assert!(cell(&b, "echo").refusal("peer/echo").is_none(), "unchecked");
        let listing = [
            live("echo", "rewritten"),
            live("extra", "new"),
            live("left-out", "x"),
        ];
        b.compare(&seen, 0, &listing);
        assert!(seen.is_current(0) && !seen.is_current(1));
        let refused = cell(&b, "echo").refusal("peer/echo").unwrap();
        assert_eq!(refused.reason, Reason::ToolChanged);
        assert!(
            refused.message.contains("peer/echo changed"),
            "{}",
            refused.message
        );
        assert!(
            refused.message.contains("(changed: description)"),
            "{}",
            refused.message
        );
        assert_eq!(
            cell(&b, "add").refusal("peer/add").unwrap().reason,
            Reason::NotFound
        );
        b.compare(&seen, 1, &listing);
        let count = |c: &AtomicU64| c.load(Ordering::Relaxed);
        assert_eq!(
            (
                count(&b.counts.changed),
                count(&b.counts.removed),
                count(&b.counts.unpinned)
            ),
            (1, 1, 1),
            "a change seen twice is counted once"
        );
        b.compare(
            &seen,
            2,
            &[live("echo", "reviewed"), live("add", "reviewed")],
        );
        assert_eq!(cell(&b, "echo").verdict(), Verdict::Matches);
        assert!(cell(&b, "add").refusal("peer/add").is_none());
        assert_eq!(cell(&b, "add").note(), None);
    }

    /// The log lines `compare` writes for upstream `peer`. The subscriber is the process's
    /// default (installed once): a thread-scoped one misses callsites another test thread reached
    /// first, whose interest tracing has cached.
    fn logged(b: &PinBoard, listings: &[&[McpTool]]) -> Vec<String> {
        #[derive(Clone)]
        struct Lines(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Lines {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        static LINES: std::sync::OnceLock<Lines> = std::sync::OnceLock::new();
        let lines = LINES.get_or_init(|| {
            let lines = Lines(Arc::default());
            let writer = lines.clone();
            let subscriber = tracing_subscriber::fmt()
                .with_ansi(false)
                .without_time()
                .with_max_level(tracing::Level::INFO)
                .with_writer(move || writer.clone())
                .finish();
            tracing::subscriber::set_global_default(subscriber).expect("one subscriber");
            lines
        });
        for (generation, live) in listings.iter().enumerate() {
            b.compare(&Compared::default(), generation as u64, live);
        }
        let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .filter(|l| l.contains(&format!("upstream={}", b.upstream)))
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn each_change_is_logged_once_when_first_seen_and_a_return_to_the_pin_too() {
        let mut b = board(PinPolicy::Refuse);
        b.upstream = "logged".into();
        let reviewed = [live("echo", "reviewed"), live("add", "reviewed")];
        let pulled = [live("echo", "rewritten"), live("extra", "new")];
        let lines = logged(&b, &[&reviewed, &pulled, &pulled, &reviewed, &reviewed]);
        let has = |text: &str| lines.iter().filter(|l| l.contains(text)).count();
        assert_eq!(lines.len(), 5, "{lines:#?}");
        assert_eq!(has("a pinned tool changed on the server"), 1, "{lines:#?}");
        assert!(
            lines.iter().any(|l| l.contains("WARN")
                && l.contains("tool=echo")
                && l.contains("changed=description")
                && l.contains("policy=\"refuse\"")),
            "{lines:#?}"
        );
        assert_eq!(has("a pinned tool is no longer listed by the server"), 1);
        assert_eq!(has("the server lists a tool that is not pinned"), 1);
        // Back to the pins: said once for each tool, after the changes (the first clean listing
        // says nothing).
        assert_eq!(has("a pinned tool matches its pin again"), 2, "{lines:#?}");
        assert!(
            lines[3..]
                .iter()
                .all(|l| l.contains("matches its pin again")),
            "{lines:#?}"
        );
    }

    #[test]
    fn under_warn_a_changed_tool_stays_callable_and_discovery_says_why() {
        let b = board(PinPolicy::Warn);
        b.compare(
            &Compared::default(),
            0,
            &[live("echo", "rewritten"), live("add", "reviewed")],
        );
        assert!(cell(&b, "echo").refusal("peer/echo").is_none());
        assert_eq!(
            cell(&b, "echo").note().unwrap(),
            "warning: its description changed on the server since it was pinned"
        );
    }
}
