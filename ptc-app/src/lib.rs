//! The command-line host shared by `ptc` (config loaded at run time) and `generated-example`
//! (plan compiled in): the `serve`, `repl`, `catalog`, `eval`, `replay` and `login` subcommands, their
//! flags, and start-up with operator overrides.
//!
//! A separate crate so that the CLI-only dependencies (clap, rustyline) stay out of `ptc-core`,
//! and so both binaries parse the same flags and run the same code: a binary only picks its
//! [`PlanSource`] and calls [`serve`], [`repl`], [`catalog`] or [`eval`], or, for a plan compiled
//! in, hands the whole command line to [`deployment::main`].

pub mod args;
pub mod commands;
pub mod deployment;
pub mod overrides;
pub mod start;

pub use args::{CatalogArgs, EvalArgs, LoginArgs, ReplArgs, ReplayArgs, ServeArgs};
pub use commands::{catalog, eval, login, repl, replay, serve};
pub use deployment::{Deployment, HostCommand};
pub use start::PlanSource;
