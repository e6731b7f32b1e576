// widgets' `id` became an integer: the program passes its string parameter to it.
ptc::upstreams!("drift/programs/arg_type.json");

fn main() {}
