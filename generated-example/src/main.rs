//! The Observatory deployment binary.

fn main() {}
