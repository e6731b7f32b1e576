//! The `ptc` command.

fn main() {}
