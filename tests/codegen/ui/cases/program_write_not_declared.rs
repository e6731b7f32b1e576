// The program calls a write its config does not list in the program's "writes".
ptc::upstreams!("drift/programs/write.json");

fn main() {}
