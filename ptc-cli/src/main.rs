//! The `ptc` command: thin entry points over the workspace crates.

mod check;
mod eval;
mod upstreams;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc: decoding a large tool result makes millions of small allocations, and freeing them;
/// measured against glibc malloc in `ptc-bench lisp` (rows `alloc`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// ptc: programmatic tool calling with PTC-Lisp.
#[derive(Parser)]
#[command(
    name = "ptc",
    version,
    about = "Programmatic tool calling: check upstream configs and evaluate PTC-Lisp programs.",
    after_help = "\
Examples:
  ptc check fixtures/observatory/upstreams.json
  ptc eval -e '(->> [3 1 2] (sort) (map inc))'

Exit codes:
  0  success
  1  the config has problems (check) or the program failed (eval); the reason is on stderr
  2  bad usage: unknown option, missing or unreadable input"
)]
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check(args) => check::run(args),
        Command::Eval(args) => eval::run(args),
    }
}
