//! Benchmark suites; each returns its rows, baselines measured in the same run.

pub mod plan_compile;
