// A literal credential cannot be compiled into a deployment.
ptc::upstreams!("../../../fixtures/configs/valid/mixed.json");

fn main() {}
