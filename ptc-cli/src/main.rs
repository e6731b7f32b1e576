//! The `ptc` command: thin entry points over the workspace crates.

mod check;
mod eval;
mod expand;
mod host;
mod new;
mod promote;
mod vendor;

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
    about = "Programmatic tool calling: check, expand and vendor upstream configs; evaluate, serve and explore PTC-Lisp programs.",
    after_help = "\
Examples:
  ptc check fixtures/observatory/upstreams.json
  ptc eval -e '(->> [3 1 2] (sort) (map inc))'
  ptc replay target/run.json --config fixtures/observatory/upstreams.json
  ptc expand fixtures/observatory/upstreams.json
  ptc vendor --check upstreams.json
  ptc serve --config fixtures/observatory/upstreams.json --http 127.0.0.1:7332
  ptc repl --config fixtures/observatory/upstreams.json
  ptc catalog --config fixtures/observatory/upstreams.json
  ptc login linear --config upstreams.json --caller alice@example.com --session-store redis://redis.internal:6379/0 --grant-key-file /etc/ptc/grant.key
  ptc new my-deployment --config upstreams.json
  ptc promote --config upstreams.json --name top-errors --description \"...\" target/run.json

Exit codes:
  0  success
  1  the config has problems (check, expand, vendor), a draft does not pass the checks
     (promote), the program failed (eval), a replay diverged from its recording (replay), a vendored document drifted (vendor --check) or no
     consent was given (login); the reason is printed
  2  bad usage: unknown option, missing or unreadable input; for serve, repl, catalog and login an
     invalid config or an upstream that cannot start"
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
    Eval(eval::EvalCmd),
    /// Run a recorded program (`eval --record`) again against its recorded results, offline.
    Replay(eval::ReplayCmd),
    /// Print the Rust code `ptc_upstreams!` generates for an upstreams.json.
    Expand(expand::ExpandArgs),
    /// Fetch each `schema_url` document into `vendored/` next to the config (`--check`: report drift).
    Vendor(vendor::VendorArgs),
    /// Serve `lisp_eval` to MCP clients over stdio or Streamable HTTP.
    Serve(Box<host::ServeCmd>),
    /// Interactive PTC-Lisp against the configured upstreams.
    Repl(host::ReplCmd),
    /// List the upstreams and tools programs can call.
    Catalog(host::CatalogCmd),
    /// Consent, at the terminal, to an upstream calling as you (OAuth); keep the grant for the hosts.
    Login(host::LoginCmd),
    /// Scaffold a deployment crate (one `ptc` dependency) that compiles the config in.
    New(new::NewArgs),
    /// Draft a declared program (a tool of the host) from a recorded run or a program text.
    Promote(promote::PromoteArgs),
}

/// mimalloc's `mi_option_purge_delay` (its place in `mi_option_e`, mimalloc.h; the crate names
/// no constant for it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Freed memory goes back to the system at once, not a second later (mimalloc 3's default): the
/// memory budget counts what a program holds, credited as it frees, so a program that frees and
/// allocates in a loop would otherwise hold its budget plus what it freed in the last second (a
/// doubling map peaked 20 % past its budget; `tests/memory.rs`). Measured in
/// docs/performance.md: no slower decode. `MIMALLOC_PURGE_DELAY` in the environment still wins.
fn return_freed_memory_at_once() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: sets a process-wide option of the allocator, which reads it at each purge.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0)
    };
}

fn main() -> ExitCode {
    return_freed_memory_at_once();
    let cli = Cli::parse();
    match cli.command {
        Command::Check(args) => check::run(args),
        Command::Eval(args) => eval::run(args),
        Command::Replay(args) => eval::replay(args),
        Command::Expand(args) => expand::run(args),
        Command::Vendor(args) => vendor::run(args),
        Command::Serve(cmd) => host::serve(*cmd),
        Command::Repl(cmd) => host::repl(cmd),
        Command::Catalog(cmd) => host::catalog(cmd),
        Command::Login(cmd) => host::login(cmd),
        Command::New(args) => new::run(args),
        Command::Promote(args) => promote::run(args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(unsafe_code)]
    fn the_option_set_is_the_purge_delay() {
        // SAFETY: reads a process-wide option of the allocator.
        let get = || unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            // mimalloc 3's default purge delay (options.c), which no neighbouring option has.
            assert_eq!(get(), 1000);
        }
        return_freed_memory_at_once();
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!(get(), 0);
        }
    }
}
