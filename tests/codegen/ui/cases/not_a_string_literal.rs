ptc::upstreams!(upstreams_json);

fn main() {}
