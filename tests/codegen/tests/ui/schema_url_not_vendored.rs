// A schema_url upstream compiles from its vendored copy only.
ptc_macros::ptc_upstreams!("tests/codegen/tests/ui/drift/url_not_vendored.json");

fn main() {}
