// fixtures/configs/invalid/op_cross_origin.json: a plan rejection reaches the user as a compile error.
ptc::upstreams!("../../../fixtures/configs/invalid/op_cross_origin.json");

fn main() {}
