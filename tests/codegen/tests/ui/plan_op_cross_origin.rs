// fixtures/configs/invalid/op_cross_origin.json: a plan rejection reaches the user as a compile error.
ptc_macros::ptc_upstreams!("fixtures/configs/invalid/op_cross_origin.json");

fn main() {}
