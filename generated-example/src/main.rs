//! The Observatory deployment binary: `serve`, `eval`, `repl`, `catalog` over the Observatory
//! plan, and `demo` (the README's main job). The host logic is ptc-app's, shared with `ptc`.

mod demo;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use generated_example::{first_failed_trace, plan_at};
use observatory_server::{ServerConfig, TokenSource};
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
    /// List an org's failed traces and one trace's steps through the generated typed operations.
    #[command(after_help = "Example:\n  generated-example typed")]
    Typed,
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

/// The Observatory plan `ptc_upstreams!` compiled into this binary: no file is read at start-up.
fn plan_source() -> PlanSource {
    PlanSource::Compiled(Box::new(|| {
        generated_example::plan()
            .map(|plan| (plan, ptc_plan::Secrets::default()))
            .map_err(|e| format!("the compiled plan does not load: {e}"))
    }))
}

fn main() -> ExitCode {
    const NAME: &str = "generated-example";
    match Cli::parse().command {
        Command::Demo => demo::run(plan_source()),
        Command::Typed => typed(),
        Command::Serve(a) => ptc_app::serve(NAME, plan_source(), a),
        Command::Eval(a) => ptc_app::eval(NAME, plan_source(), a),
        Command::Repl(a) => ptc_app::repl(NAME, plan_source(), a),
        Command::Catalog(a) => ptc_app::catalog(NAME, plan_source(), a),
    }
}

/// The typed example: the generated structs against the Observatory test bed started in-process.
#[tokio::main]
async fn typed() -> ExitCode {
    let tokens = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/observatory/tokens.json"
    );
    let config = ServerConfig::new(TokenSource::File(tokens.into()));
    let (addr, server) = match observatory_server::start(config).await {
        Ok(started) => started,
        Err(e) => {
            eprintln!("error: cannot start the Observatory test bed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let plan = match plan_at(&format!("http://{addr}")) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("error: the embedded plan does not load: {e}");
            return ExitCode::FAILURE;
        }
    };
    let options = ptc_core::StartOptions::default();
    let outcome =
        match ptc_core::Upstreams::start(plan, ptc_plan::Secrets::default(), options).await {
            Ok(upstreams) => first_failed_trace(&upstreams, "org_acme").await,
            Err(e) => {
                eprintln!("error: the upstreams do not start: {e}");
                server.shutdown().await;
                return ExitCode::FAILURE;
            }
        };
    server.shutdown().await;
    match outcome {
        Ok(Some(found)) => {
            println!(
                "{} ({:?}, {}): {} steps",
                found.trace.id, found.trace.status, found.trace.model, found.steps.total_steps
            );
            for step in &found.steps.steps {
                println!("  {step:?}");
            }
            ExitCode::SUCCESS
        }
        Ok(None) => {
            println!("org_acme has no failed trace");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
