// `typed` may name only tools of the config.
ptc::upstreams!(
    "../../../fixtures/observatory/upstreams.json",
    typed = ["observatory/get-trac"]
);

fn main() {}
