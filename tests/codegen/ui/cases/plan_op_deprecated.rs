// fixtures/configs/invalid/op_deprecated.json: a plan rejection reaches the user as a compile error.
ptc::upstreams!("../../../fixtures/configs/invalid/op_deprecated.json");

fn main() {}
