//! Upstream runtime: OpenAPI and MCP execution, credentials, redaction, catalog, discovery, the
//! PTC-Lisp host and the MCP host.
//!
//! The rooms follow the data flow (README.md has the module map): [`wire`] talks to upstreams,
//! [`credentials`] supplies their secrets, [`catalog`] holds what can be called and by whom,
//! [`call`] runs one call through the [`Upstreams`] executor (validating arguments against the
//! tool's schema and mapping the outcome onto the result contract, [`Reason`]), [`program`] plugs
//! it into PTC-Lisp (`tool/call`, discovery, budgets, per-run records), [`telemetry`] traces it,
//! and [`server`], the MCP host, serves programs to clients. Nothing imports [`server`], no two
//! files import each other through others, and the result contract (`call::contract`) imports
//! nothing of the crate (`tests/layers.rs`).

pub mod call;
pub mod catalog;
pub mod credentials;
pub mod program;
pub mod server;
pub mod telemetry;
pub mod wire;

pub use call::contract::{Reason, ToolError, ToolOutput};
pub use call::typed_pages::Paged;
pub use call::upstreams::{
    CallOptions, CatalogLoad, Operation, StartError, StartOptions, Upstreams,
};
pub use call::writes::WriteGate;
pub use catalog::mcp_link::list_live_tools;
pub use program::declared::{Program, ProgramError, run_declared};
pub use program::host::ProgramHost;
pub use program::limits::Budgets;
pub use program::run::{ProgramRun, run_program, run_program_taped};
pub use program::run_report::{Metrics, RunRecords, UpstreamCall};
