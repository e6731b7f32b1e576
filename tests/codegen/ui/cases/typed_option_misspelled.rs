// `typed` is the macro's only option.
ptc::upstreams!(
    "../../../fixtures/observatory/upstreams.json",
    types = ["observatory/get-trace"]
);

fn main() {}
