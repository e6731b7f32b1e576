//! Timing: samples of one call, the clock stopped before the call's result is freed; two sides
//! sampled in alternation so that load on the machine falls on both alike.

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

/// The samples of one side, sorted.
#[derive(Debug, Clone)]
pub struct Samples(Vec<Duration>);

impl Samples {
    /// Samples from raw durations.
    pub fn new(mut v: Vec<Duration>) -> Self {
        v.sort();
        Self(v)
    }

    /// Median sample.
    pub fn median(&self) -> Duration {
        self.0[self.0.len() / 2]
    }

    /// Fastest sample.
    pub fn min(&self) -> Duration {
        self.0[0]
    }

    /// (slowest − fastest) / median, as a fraction.
    pub fn spread(&self) -> f64 {
        let m = self.median().as_secs_f64();
        if m > 0.0 {
            (self.0[self.0.len() - 1] - self.0[0]).as_secs_f64() / m
        } else {
            0.0
        }
    }

    /// The samples, fastest first.
    pub fn iter(&self) -> impl Iterator<Item = Duration> + '_ {
        self.0.iter().copied()
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.0.len()
    }
}

/// One timed call: the clock stops when `f` returns, before its result is dropped; the drop is
/// timed separately and returned second.
pub fn once<R>(f: &mut impl FnMut() -> R) -> (Duration, Duration) {
    let t = Instant::now();
    let r = black_box(f());
    let took = t.elapsed();
    let t = Instant::now();
    drop(r);
    (took, t.elapsed())
}

/// Samples of `f` alone, after one warm-up call.
pub fn single<R>(budget: Budget, mut f: impl FnMut() -> R) -> Samples {
    once(&mut f);
    let mut samples = Vec::new();
    let start = Instant::now();
    while samples.len() < budget.min_samples || start.elapsed() < budget.min_time {
        samples.push(once(&mut f).0);
        if samples.len() >= 10_000 {
            break;
        }
    }
    Samples::new(samples)
}

/// Median of `f` alone.
pub fn median<R>(budget: Budget, f: impl FnMut() -> R) -> Duration {
    single(budget, f).median()
}

/// Samples of two sides, one call of each in turn (a, b, a, b, ...), after one warm-up each.
/// Each side returns its own time, so a side measured in another process reports its own clock.
pub fn pair(
    budget: Budget,
    mut a: impl FnMut() -> Duration,
    mut b: impl FnMut() -> Duration,
) -> (Samples, Samples) {
    a();
    b();
    let (mut sa, mut sb) = (Vec::new(), Vec::new());
    let start = Instant::now();
    while sa.len() < budget.min_samples || start.elapsed() < 2 * budget.min_time {
        sa.push(a());
        sb.push(b());
        if sa.len() >= 10_000 {
            break;
        }
    }
    (Samples::new(sa), Samples::new(sb))
}

/// [`pair`] run `rounds` times: the samples of every round pooled, and each round's ratio of
/// medians (`a` over `b`). For a row whose difference is a few percent: one round's figure moves
/// by more than that, so the row is judged on all the rounds' samples and shows how far a single
/// round strays.
pub fn pair_rounds(
    budget: Budget,
    rounds: usize,
    mut a: impl FnMut() -> Duration,
    mut b: impl FnMut() -> Duration,
) -> (Samples, Samples, Vec<f64>) {
    let (mut sa, mut sb, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (ra, rb) = pair(budget, &mut a, &mut b);
        ratios.push(ra.median().as_secs_f64() / rb.median().as_secs_f64());
        sa.extend(ra.0);
        sb.extend(rb.0);
    }
    (Samples::new(sa), Samples::new(sb), ratios)
}

/// A closure's time as a side for [`pair`]: the clock stops before its result is freed.
pub fn timed<R>(mut f: impl FnMut() -> R) -> impl FnMut() -> Duration {
    move || once(&mut f).0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A side whose `n`th sample takes `times[n]` microseconds, cycling.
    fn side(times: &'static [u64]) -> impl FnMut() -> Duration {
        let mut n = 0;
        move || {
            n += 1;
            Duration::from_micros(times[(n - 1) % times.len()])
        }
    }

    #[test]
    fn rounds_pool_their_samples_and_give_each_rounds_ratio() {
        let budget = Budget {
            min_time: Duration::ZERO,
            min_samples: 3,
        };
        // Each round is a warm-up of each side, then three samples of each; one side cycles
        // through five values, so the two rounds see different medians.
        let (a, b, ratios) = pair_rounds(budget, 2, side(&[10, 40, 20, 30, 50]), side(&[10]));
        // Round one: warm-up 10, samples 40, 20, 30; round two: warm-up 50, samples 10, 40, 20.
        assert_eq!(ratios, vec![3.0, 2.0]);
        assert_eq!((a.len(), b.len()), (6, 6));
        assert_eq!(a.median(), Duration::from_micros(30));
        assert_eq!(a.min(), Duration::from_micros(10));
        assert_eq!(b.median(), Duration::from_micros(10));
    }
}
