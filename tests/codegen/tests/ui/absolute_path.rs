ptc_macros::ptc_upstreams!("/etc/upstreams.json");

fn main() {}
