// A literal credential cannot be compiled into a deployment.
ptc_macros::ptc_upstreams!("fixtures/configs/valid/mixed.json");

fn main() {}
