// fixtures/configs/invalid/op_missing_operation.json: a plan rejection reaches the user as a compile error.
ptc::upstreams!("../../../fixtures/configs/invalid/op_missing_operation.json");

fn main() {}
