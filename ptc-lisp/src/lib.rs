//! PTC-Lisp: the language LLM-written programs run in — a Clojure dialect that is eager,
//! bounded and impossible to crash.
//!
//! ```
//! use ptc_lisp::{Interpreter, Limits};
//! let mut interp = Interpreter::new(Limits::default());
//! let v = interp.eval_str("(->> [1 2 3 4] (filter odd?) (map inc))").unwrap();
//! assert_eq!(v.to_string(), "[2 4]");
//! ```
//!
//! Pipeline: [`reader`] (text → forms) → `analyze` (forms → resolved nodes; names from the
//! tables in `names`, sugar expanded by `sugar`) → `eval` (nodes → values, limits enforced) →
//! [`printer`] / `json` (values → text). The crate README maps the modules and which way they
//! depend.

// Values hold regexes (which cache internally) and functions, but their hash and equality
// never depend on that interior state.
#![allow(clippy::mutable_key_type)]
#![warn(missing_docs)]

mod analyze;
mod ast;
pub mod builtins;
mod call_sites;
mod destructure;
mod error;
mod eval;
mod eval_stack;
mod footprint;
mod function;
mod globals;
pub mod host;
mod interp;
mod json;
mod limits;
mod liveness;
mod meter;
mod names;
pub mod printer;
mod read_data;
mod reader;
pub mod session;
mod sugar;
pub mod suspend;
mod value;

pub use call_sites::{CallSite, LiteralArg, Uses, call_sites, upstream_call_sites, uses};
pub use error::{Ctl, LispError, Pos, R, Reason};
pub use eval::TIME_SLICE;
pub use function::{Closure, Function, Native};
pub use host::{CallContext, Discovery, Host, HostError, HostValue};
pub use interp::Interpreter;
pub use limits::Limits;
pub use meter::{MemoryPool, RESERVE_CHUNK};
pub use read_data::read_value;
pub use session::{Kept, SessionError, SessionState, SessionVar};
pub use suspend::yield_when;
pub use value::{
    Charged, CollArc, FxBuild, INLINE, Items, MapData, Record, SetData, Shape, Text, Value,
    compare, equal,
};
