// widgets renamed get_widget to fetch_widget: the declared program that calls it breaks the build.
ptc::upstreams!("drift/programs/renamed.json");

fn main() {}
