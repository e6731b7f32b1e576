//! `ptc-names`: the naming rules that the language (`ptc-lisp`), the config compiler (`ptc-plan`)
//! and the runtime (`ptc-core`) must agree on, each stated once:
//!
//! - [`suggest`]: the one "did you mean" rule: which known name a misspelt one most likely meant
//!   ([`closest`], [`did_you_mean`], re-exported here so call sites stay short);
//! - [`namespaces`]: the namespaces of PTC-Lisp with their aliases, and so which upstream names
//!   the config must refuse ([`namespaces::is_reserved`]);
//! - [`identifier`]: what an upstream (or credential binding) may be called ([`is_identifier`]).
//!
//! It is a crate of its own because the language and the config compiler must not depend on
//! each other, yet an upstream name the config accepts must be one the language reads as that
//! upstream; a leaf crate is the one place all of them can reach. It depends on no other crate
//! of the workspace.

pub mod identifier;
pub mod namespaces;
pub mod suggest;

pub use identifier::{IDENTIFIER_RULE, is_identifier};
pub use suggest::{THRESHOLD, closest, did_you_mean};
