// fixtures/configs/invalid/schema_missing_file.json: a plan rejection reaches the user as a compile error.
ptc::upstreams!("../../../fixtures/configs/invalid/schema_missing_file.json");

fn main() {}
