// fixtures/configs/invalid/op_complex_query.json: a plan rejection reaches the user as a compile error.
ptc::upstreams!("../../../fixtures/configs/invalid/op_complex_query.json");

fn main() {}
