// widgets gained a required argument `region`: the program's call does not give it.
ptc::upstreams!("drift/programs/required_arg.json");

fn main() {}
