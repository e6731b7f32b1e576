//! ptc-bench.

fn main() {}
