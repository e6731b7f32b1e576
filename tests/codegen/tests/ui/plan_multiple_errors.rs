// fixtures/configs/invalid/multiple_errors.json: a plan rejection reaches the user as a compile error.
ptc_macros::ptc_upstreams!("fixtures/configs/invalid/multiple_errors.json");

fn main() {}
