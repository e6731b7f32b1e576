ptc_macros::ptc_upstreams!(upstreams_json);

fn main() {}
