//! Upstream runtime: OpenAPI and MCP execution, credentials, redaction, catalog, discovery and the
//! PTC-Lisp host.
//!
//! [`Upstreams`] is the executor every call goes through (a Lisp `tool/call` or a generated typed
//! [`Operation`]): it validates arguments against the tool's schema ([`validate`]), runs the
//! transport and maps the outcome onto the result contract ([`Reason`]). [`host`] plugs it into
//! PTC-Lisp: `tool/call`, discovery, budgets and per-run records.

pub mod approval;
mod call_form;
pub mod catalog;
pub mod credential_caller;
mod credential_exec;
pub mod credentials;
pub mod discovery;
pub mod documents;
pub mod drift;
pub mod executor;
pub mod host;
pub mod http_client;
pub mod identity;
pub mod mcp;
mod mcp_link;
mod openapi;
pub mod outcome;
pub mod pinning;
pub mod policy;
pub mod precheck;
pub mod projection;
pub mod recording;
pub mod records;
pub mod redact;
pub mod search;
pub mod server;
pub mod telemetry;
mod typed_pages;
#[doc(hidden)]
pub mod typed_serde;
pub mod validate;
mod webhook;
pub mod writes;

pub use executor::{CallOptions, CatalogLoad, Operation, StartError, StartOptions, Upstreams};
pub use host::{Budgets, ProgramHost, ProgramRun, run_program, run_program_taped};
pub use mcp_link::list_live_tools;
pub use outcome::{Reason, ToolError, ToolOutput};
pub use records::{Metrics, RunRecords, UpstreamCall};
pub use typed_pages::Paged;
pub use writes::WriteGate;
