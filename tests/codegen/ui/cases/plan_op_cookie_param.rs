// fixtures/configs/invalid/op_cookie_param.json: a plan rejection reaches the user as a compile error.
ptc::upstreams!("../../../fixtures/configs/invalid/op_cookie_param.json");

fn main() {}
