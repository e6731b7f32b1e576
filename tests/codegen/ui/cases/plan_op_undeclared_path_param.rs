// fixtures/configs/invalid/op_undeclared_path_param.json: a plan rejection reaches the user as a compile error.
ptc::upstreams!("../../../fixtures/configs/invalid/op_undeclared_path_param.json");

fn main() {}
