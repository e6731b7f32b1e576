// fixtures/configs/invalid/op_non_json.json: a plan rejection reaches the user as a compile error.
ptc::upstreams!("../../../fixtures/configs/invalid/op_non_json.json");

fn main() {}
