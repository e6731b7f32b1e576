// A schema_url upstream compiles from its vendored copy only.
ptc::upstreams!("drift/url_not_vendored.json");

fn main() {}
