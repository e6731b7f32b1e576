//! The `ptc` command: thin entry points over the workspace crates.

mod check;
mod eval;
mod expand;
mod vendor;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// ptc: programmatic tool calling with PTC-Lisp.
#[derive(Parser)]
#[command(name = "ptc", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate an upstreams.json and its OpenAPI documents; print the compiled catalog.
    Check(check::CheckArgs),
    /// Evaluate a PTC-Lisp program and print its result in Clojure syntax.
    Eval(eval::EvalArgs),
    /// Print the Rust code `ptc_upstreams!` generates for an upstreams.json.
    Expand(expand::ExpandArgs),
    /// Fetch each `schema_url` document into `vendored/` next to the config (`--check`: report drift).
    Vendor(vendor::VendorArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check(args) => check::run(args),
        Command::Eval(args) => eval::run(args),
        Command::Expand(args) => expand::run(args),
        Command::Vendor(args) => vendor::run(args),
    }
}
