//! The ptc_upstreams! proc-macro.
