//! The result table: one row per benchmark, its baseline measured in the same run, the ratio.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

/// One benchmark beside its baseline.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Suite (e.g. `plan`).
    pub suite: String,
    /// What ptc did.
    pub name: String,
    /// ptc's median time in microseconds.
    pub ours_us: f64,
    /// What it is compared with.
    pub baseline: String,
    /// The baseline's median time in microseconds.
    pub baseline_us: f64,
    /// ours / baseline.
    pub ratio: f64,
    /// The goal for `ratio` (at most), when there is one.
    pub target: Option<f64>,
    /// Free-form context (sizes, counts).
    pub note: String,
}

impl Row {
    /// A row from two measured durations.
    pub fn new(
        suite: &str,
        name: &str,
        ours: Duration,
        baseline: &str,
        base: Duration,
        target: Option<f64>,
        note: String,
    ) -> Self {
        let ours_us = ours.as_secs_f64() * 1e6;
        let baseline_us = base.as_secs_f64() * 1e6;
        Self {
            suite: suite.into(),
            name: name.into(),
            ours_us,
            baseline: baseline.into(),
            baseline_us,
            ratio: if baseline_us > 0.0 {
                ours_us / baseline_us
            } else {
                f64::NAN
            },
            target,
            note,
        }
    }

    /// Whether the row meets its target (rows without one always do).
    pub fn meets_target(&self) -> bool {
        self.target.is_none_or(|t| self.ratio <= t)
    }
}

fn human(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.2} s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{us:.1} µs")
    }
}

/// The whole table as Markdown.
pub fn markdown(rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| suite | benchmark | ptc | baseline | baseline time | ratio | target | ok | note |"
    );
    let _ = writeln!(out, "|---|---|---:|---|---:|---:|---:|---|---|");
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {:.2}× | {} | {} | {} |",
            r.suite,
            r.name,
            human(r.ours_us),
            r.baseline,
            human(r.baseline_us),
            r.ratio,
            r.target.map_or("-".to_string(), |t| format!("≤ {t}×")),
            if r.meets_target() { "yes" } else { "NO" },
            r.note
        );
    }
    out
}
