//! `ptc-names`: the naming rules that the language (`ptc-lisp`), the config compiler (`ptc-plan`)
//! and the runtime (`ptc-core`) must agree on, each stated once:
//!
//! - [`suggest`]: the one "did you mean" rule: which known name a misspelt one most likely meant
//!   ([`closest`], [`did_you_mean`], re-exported here so call sites stay short).
//!
//! It is a crate of its own because the language and the config compiler must not depend on
//! each other; a leaf crate is the one place all of them can reach. It depends on no other crate
//! of the workspace.

pub mod suggest;

pub use suggest::{THRESHOLD, closest, did_you_mean};
