//! The Observatory deployment binary: `serve`, `eval`, `repl`, `catalog` over the Observatory
//! plan, and `demo` (the README's main job). The host logic is ptc-app's, shared with `ptc`.

mod demo;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ptc_app::PlanSource;

#[derive(Parser)]
#[command(
    name = "generated-example",
    version,
    about = "The Observatory deployment of ptc: serve lisp_eval over MCP, or run the demo.",
    after_help = "\
Examples:
  generated-example demo
  generated-example serve
  generated-example serve --http 127.0.0.1:7332 --upstream-url observatory=https://observatory.example.com
  generated-example catalog
  generated-example eval -e \"(apropos \\\"cost\\\")\""
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the Observatory test bed in-process and answer agent questions with PTC-Lisp.
    #[command(after_help = "Example:\n  generated-example demo")]
    Demo,
    /// Serve lisp_eval to MCP clients over stdio (default) or Streamable HTTP.
    #[command(after_help = "\
Examples:
  generated-example serve
  generated-example serve --http 127.0.0.1:7332
  generated-example serve --http 0.0.0.0:7332 --token-file /run/secrets/mcp-token")]
    Serve(ptc_app::ServeArgs),
    /// Run one PTC-Lisp program against the Observatory upstream.
    #[command(after_help = "\
Example:
  generated-example eval -e \"(tool/servers)\"")]
    Eval(ptc_app::EvalArgs),
    /// Interactive PTC-Lisp against the Observatory upstream.
    #[command(after_help = "Example:\n  generated-example repl")]
    Repl(ptc_app::ReplArgs),
    /// List the Observatory tools programs can call.
    #[command(after_help = "Example:\n  generated-example catalog --json")]
    Catalog(ptc_app::CatalogArgs),
}

/// The Observatory plan. Until `ptc_upstreams!` compiles it in, the fixture config is loaded at
/// start-up (the same plan, validated by the same rules).
fn plan_source() -> PlanSource {
    PlanSource::Config(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fixtures/observatory/upstreams.json"
        )
        .into(),
    )
}

fn main() -> ExitCode {
    const NAME: &str = "generated-example";
    match Cli::parse().command {
        Command::Demo => demo::run(plan_source()),
        Command::Serve(a) => ptc_app::serve(NAME, plan_source(), a),
        Command::Eval(a) => ptc_app::eval(NAME, plan_source(), a),
        Command::Repl(a) => ptc_app::repl(NAME, plan_source(), a),
        Command::Catalog(a) => ptc_app::catalog(NAME, plan_source(), a),
    }
}
