//! `ptc-plan`: turns `upstreams.json` plus OpenAPI documents into a validated [`Plan`].
//!
//! The one compiler both paths share: the `ptc_upstreams!` macro runs it at build time, the `ptc`
//! binary at start-up, so the same config gives the same catalog either way. It is pure: no
//! async, no network (documents come through a [`DocumentSource`]), and every problem is
//! reported at once as [`Diagnostics`] naming the file, the JSON pointer and the fix.
//!
//! Component schemas are kept once per upstream, by name, in [`OpenApiPlan::definitions`]; tool
//! schemas point at them with `{"$ref": "#/$defs/<Name>"}`. [`schema::resolve`] follows such a
//! reference and [`schema::bundle`] makes a standalone JSON Schema of a tool schema.
//!
//! ```
//! let loaded = ptc_plan::load(std::path::Path::new(concat!(
//!     env!("CARGO_MANIFEST_DIR"),
//!     "/../fixtures/observatory/upstreams.json"
//! )))
//! .expect("the fixture config is valid");
//! assert!(loaded.plan.upstream("observatory").is_some());
//! ```

pub mod call_form;
mod config;
pub mod diagnostic;
pub mod effects;
mod headers;
mod load;
mod locate;
mod names;
mod openapi;
pub mod paths;
pub mod pins;
pub mod plan;
pub mod programs;
pub mod projection;
#[cfg(test)]
mod rules_boundaries;
pub mod schema;
mod suggest;
pub mod validate;

pub use config::credentials::https_or_loopback;
pub use config::{
    Secrets, UrlOptIns, UrlProblem, check_base_url, check_upstream_url, hide_from_sandboxes,
};
pub use diagnostic::{Diagnostic, Diagnostics};
pub use effects::{Approval, Effect};
pub use load::{
    DocumentRequest, DocumentSource, FileSource, Loaded, load, load_str, load_unpinned, load_with,
};
pub use plan::*;
