// fixtures/configs/invalid/schema_swagger2.json: a plan rejection reaches the user as a compile error.
ptc::upstreams!("../../../fixtures/configs/invalid/schema_swagger2.json");

fn main() {}
