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
    /// What the numbers measure: `"time"` (median microseconds) or `"bytes"`.
    pub unit: &'static str,
    /// ptc's figure.
    pub ours: f64,
    /// What it is compared with.
    pub baseline: String,
    /// The baseline's figure, in the same unit.
    pub base: f64,
    /// ours / base.
    pub ratio: f64,
    /// The goal for `ratio` (at most), when there is one.
    pub target: Option<f64>,
    /// Free-form context (sizes, counts).
    pub note: String,
}

/// What to compare: a name and a figure.
pub struct Side<'a> {
    /// Label.
    pub name: &'a str,
    /// Figure, in the row's unit.
    pub value: f64,
}

impl Row {
    /// A row from two measured durations.
    pub fn time(
        suite: &str,
        name: &str,
        ours: Duration,
        baseline: &str,
        base: Duration,
        target: Option<f64>,
        note: String,
    ) -> Self {
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        Self::build(
            suite,
            "time",
            Side {
                name,
                value: us(ours),
            },
            Side {
                name: baseline,
                value: us(base),
            },
            target,
            note,
        )
    }

    /// A row comparing byte counts (peak memory against input size, say).
    pub fn bytes(
        suite: &str,
        name: &str,
        ours: u64,
        baseline: &str,
        base: u64,
        target: Option<f64>,
        note: String,
    ) -> Self {
        Self::build(
            suite,
            "bytes",
            Side {
                name,
                value: ours as f64,
            },
            Side {
                name: baseline,
                value: base as f64,
            },
            target,
            note,
        )
    }

    fn build(
        suite: &str,
        unit: &'static str,
        ours: Side,
        base: Side,
        target: Option<f64>,
        note: String,
    ) -> Self {
        Self {
            suite: suite.into(),
            name: ours.name.into(),
            unit,
            ours: ours.value,
            baseline: base.name.into(),
            base: base.value,
            ratio: if base.value > 0.0 {
                ours.value / base.value
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

fn human(unit: &str, v: f64) -> String {
    match unit {
        "bytes" if v >= 1e6 => format!("{:.1} MB", v / 1e6),
        "bytes" => format!("{:.1} KB", v / 1e3),
        "lines" => format!("{v:.1} lines"),
        _ if v >= 1e6 => format!("{:.2} s", v / 1e6),
        _ if v >= 1e3 => format!("{:.2} ms", v / 1e3),
        _ => format!("{v:.1} µs"),
    }
}

/// The whole table as Markdown.
pub fn markdown(rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| suite | benchmark | ptc | baseline | baseline figure | ratio | target | ok | note |"
    );
    let _ = writeln!(out, "|---|---|---:|---|---:|---:|---:|---|---|");
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {:.2}× | {} | {} | {} |",
            r.suite,
            r.name,
            human(r.unit, r.ours),
            r.baseline,
            human(r.unit, r.base),
            r.ratio,
            r.target.map_or("-".to_string(), |t| format!("≤ {t:.2}×")),
            if r.meets_target() { "yes" } else { "NO" },
            r.note
        );
    }
    out
}
