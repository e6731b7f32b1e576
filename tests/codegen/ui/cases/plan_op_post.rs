// fixtures/configs/invalid/op_post.json: a plan rejection reaches the user as a compile error.
ptc::upstreams!("../../../fixtures/configs/invalid/op_post.json");

fn main() {}
