//! The result table: one row per benchmark, its baseline measured in the same run, the ratio.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use crate::measure::Samples;

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
    /// Allocators of the two sides (`ptc / baseline`), when it matters.
    pub alloc: String,
    /// Samples per side, fastest sample and spread ((max − min) / median) of each side, for
    /// rows measured with [`crate::measure::pair`].
    pub spread: Option<Spread>,
}

/// How the samples of a paired row were spread.
#[derive(Debug, Clone, Serialize)]
pub struct Spread {
    /// Samples per side.
    pub samples: usize,
    /// ptc's fastest sample (µs).
    pub ours_min: f64,
    /// The baseline's fastest sample (µs).
    pub base_min: f64,
    /// ptc's (max − min) / median.
    pub ours_spread: f64,
    /// The baseline's (max − min) / median.
    pub base_spread: f64,
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
            alloc: String::new(),
            spread: None,
        }
    }

    /// A row from two sides sampled in alternation: medians compared, minimum and spread shown.
    pub fn paired(
        suite: &str,
        name: &str,
        ours: &Samples,
        baseline: &str,
        base: &Samples,
        target: Option<f64>,
        note: String,
    ) -> Self {
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let mut row = Self::time(
            suite,
            name,
            ours.median(),
            baseline,
            base.median(),
            target,
            note,
        );
        row.spread = Some(Spread {
            samples: ours.len().min(base.len()),
            ours_min: us(ours.min()),
            base_min: us(base.min()),
            ours_spread: ours.spread(),
            base_spread: base.spread(),
        });
        row
    }

    /// The same row, naming the allocators of both sides.
    pub fn with_alloc(mut self, ours: &str, base: &str) -> Self {
        self.alloc = format!("{ours} / {base}");
        self
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
        "| suite | benchmark | ptc | baseline | baseline figure | ratio | target | ok | note | \
         n | min ptc / base | spread ptc / base | allocators |"
    );
    let _ = writeln!(
        out,
        "|---|---|---:|---|---:|---:|---:|---|---|---:|---:|---:|---|"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.suite,
            r.name,
            human(r.unit, r.ours),
            r.baseline,
            human(r.unit, r.base),
            // No ratio when the baseline has no figure (it did not run).
            if r.ratio.is_finite() {
                format!("{:.2}×", r.ratio)
            } else {
                "-".to_string()
            },
            r.target.map_or("-".to_string(), |t| format!("≤ {t:.2}×")),
            if r.meets_target() { "yes" } else { "NO" },
            r.note,
            r.spread
                .as_ref()
                .map_or(String::new(), |s| s.samples.to_string()),
            r.spread.as_ref().map_or(String::new(), |s| format!(
                "{} / {}",
                human(r.unit, s.ours_min),
                human(r.unit, s.base_min)
            )),
            r.spread.as_ref().map_or(String::new(), |s| format!(
                "{:.0}% / {:.0}%",
                s.ours_spread * 100.0,
                s.base_spread * 100.0
            )),
            r.alloc
        );
    }
    out
}
