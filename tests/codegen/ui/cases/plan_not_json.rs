// fixtures/configs/invalid/not_json.json: a plan rejection reaches the user as a compile error.
ptc::upstreams!("../../../fixtures/configs/invalid/not_json.json");

fn main() {}
