//! `ptc`: everything a deployment binary needs, behind one dependency (the way `sqlx` fronts its
//! macros and runtime).
//!
//! ```no_run
//! // Relative to Cargo.toml: one module per upstream, and `plan()`.
//! ptc::upstreams!("../fixtures/observatory/upstreams.json");
//!
//! fn main() -> std::process::ExitCode {
//!     ptc::main(env!("CARGO_PKG_NAME"), plan) // serve, eval, repl, catalog
//! }
//! ```
//!
//! - [`upstreams!`] reads the config and every OpenAPI document it names at compile time and
//!   generates typed arguments and responses for each operation (see `docs/codegen.md`); the
//!   generated code names only `::ptc::` paths, so the deployment's `Cargo.toml` needs nothing
//!   else.
//! - [`main`] and [`Deployment`] are the host command line (`serve` over stdio or Streamable
//!   HTTP, `eval`, `repl`, `catalog`, with the operator's override flags); [`Deployment::run_with`]
//!   adds commands of the binary's own (a `#[derive(clap::Subcommand)]` enum: bring
//!   [`clap`] into scope with `use ptc::clap;`).
//! - [`Upstreams`] runs typed calls (`upstreams.run(args)`); the workspace crates are here as
//!   [`core`], [`plan`], [`app`] and [`lisp`].

/// `upstreams!("upstreams.json")`: typed modules for the config's upstreams and `plan()`, the
/// compiled plan, generated at compile time. The path is relative to the crate's `Cargo.toml`.
pub use ptc_macros::ptc_upstreams as upstreams;

/// The host commands and their flags (`ptc-app`).
pub use ptc_app as app;
/// The upstream runtime, catalog, discovery and MCP host (`ptc-core`).
pub use ptc_core as core;
/// The PTC-Lisp language runtime (`ptc-lisp`).
pub use ptc_lisp as lisp;
/// The config model and plan compiler (`ptc-plan`).
pub use ptc_plan as plan;

pub use ptc_app::deployment::{Choice, CompiledPlan, Deployment, HostCommand, NoCommands, main};
pub use ptc_app::{PlanSource, ServeArgs};
pub use ptc_core::{
    Budgets, CallOptions, Operation, Paged, Program, ProgramError, Reason, StartError,
    StartOptions, ToolError, ToolOutput, Upstreams, WriteGate, run_declared,
};
pub use ptc_plan::{Plan, Secrets};

/// The command-line parser [`Deployment::run_with`] takes subcommands from: `use ptc::clap;`
/// makes `#[derive(clap::Subcommand)]` work without a `clap` dependency of your own.
pub use clap;
/// JSON values: the type of the fields the generated code cannot type more precisely
/// (`serde_json::Value`), and what `plan()` fails with.
pub use serde_json;

/// What the generated code and the facade's own macros need; not a stable API.
#[doc(hidden)]
pub mod __private {
    pub use ptc_core::{decode_enum, decode_struct, encode_enum, encode_struct};
    pub use ptc_macros::{Decode, Encode};
    pub use serde;
    pub use serde_json;
    pub use tokio;
}
