// fixtures/configs/invalid/op_name_collision.json: a plan rejection reaches the user as a compile error.
ptc::upstreams!("../../../fixtures/configs/invalid/op_name_collision.json");

fn main() {}
