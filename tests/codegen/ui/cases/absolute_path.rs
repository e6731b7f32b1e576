ptc::upstreams!("/etc/upstreams.json");

fn main() {}
