// fixtures/configs/invalid/op_no_2xx.json: a plan rejection reaches the user as a compile error.
ptc::upstreams!("../../../fixtures/configs/invalid/op_no_2xx.json");

fn main() {}
