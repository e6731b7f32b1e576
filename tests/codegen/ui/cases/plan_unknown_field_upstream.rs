// fixtures/configs/invalid/unknown_field_upstream.json: a plan rejection reaches the user as a compile error.
ptc::upstreams!("../../../fixtures/configs/invalid/unknown_field_upstream.json");

fn main() {}
