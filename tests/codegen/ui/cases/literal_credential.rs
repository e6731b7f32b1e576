// A literal credential cannot be compiled into a deployment.
ptc::upstreams!("../../../fixtures/configs/valid/literal_credential.json");

fn main() {}
