//! Plan -> Rust tokens for the ptc_upstreams! macro.
