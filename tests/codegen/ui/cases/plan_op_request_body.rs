// fixtures/configs/invalid/op_request_body.json: a plan rejection reaches the user as a compile error.
ptc::upstreams!("../../../fixtures/configs/invalid/op_request_body.json");

fn main() {}
