//! Benchmark suites; each returns its rows, baselines measured in the same run.

pub mod baselines;
pub mod codegen;
pub mod host;
pub mod identity;
pub mod lisp;
pub mod load;
pub mod pins;
pub mod plan_compile;
pub mod programs;
pub mod sandbox;
pub mod tool_call;
pub mod traces;
pub mod upstream_oauth;
