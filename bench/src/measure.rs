//! Timing: run a closure until enough time has passed, keep the median of the samples.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// How long each measurement runs at least, and how many samples it takes at least.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Minimum total time spent sampling one closure.
    pub min_time: Duration,
    /// Minimum number of samples.
    pub min_samples: usize,
}

impl Budget {
    /// Defaults for a full run.
    pub fn full() -> Self {
        Self {
            min_time: Duration::from_secs(2),
            min_samples: 10,
        }
    }

    /// A quick smoke run (`--quick`).
    pub fn quick() -> Self {
        Self {
            min_time: Duration::from_millis(200),
            min_samples: 3,
        }
    }
}

/// Median wall time of one call of `f`, after one warm-up call.
pub fn median<R>(budget: Budget, mut f: impl FnMut() -> R) -> Duration {
    black_box(f());
    let mut samples = Vec::new();
    let start = Instant::now();
    while samples.len() < budget.min_samples || start.elapsed() < budget.min_time {
        let t = Instant::now();
        black_box(f());
        samples.push(t.elapsed());
        if samples.len() >= 10_000 {
            break;
        }
    }
    samples.sort();
    samples[samples.len() / 2]
}
