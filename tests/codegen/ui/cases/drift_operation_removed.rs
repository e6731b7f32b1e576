// get_widget is no longer in the document.
ptc::upstreams!("drift/removed.json");

fn main() {}
