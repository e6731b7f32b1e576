// get_widget is no longer in the document.
ptc_macros::ptc_upstreams!("tests/codegen/tests/ui/drift/removed.json");

fn main() {}
