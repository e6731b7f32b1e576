// fixtures/configs/invalid/multiple_errors.json: a plan rejection reaches the user as a compile error.
ptc::upstreams!("../../../fixtures/configs/invalid/multiple_errors.json");

fn main() {}
