//! The Observatory deployment binary: `serve`, `eval`, `repl`, `catalog` over the Observatory
//! plan (ptc's one-call host), and its own `demo` (the README's main job) and `typed`.

mod demo;

use std::process::ExitCode;

use generated_example::{first_failed_trace, plan_at};
use observatory_server::{ServerConfig, TokenSource};
use ptc::clap;

/// The commands of this binary's own, listed before the host's.
#[derive(clap::Subcommand)]
enum Own {
    /// Start the Observatory test bed in-process and answer agent questions with PTC-Lisp.
    #[command(after_help = "Example:\n  generated-example demo")]
    Demo,
    /// List an org's failed traces and one trace's steps through the generated typed operations.
    #[command(after_help = "Example:\n  generated-example typed")]
    Typed,
}

fn main() -> ExitCode {
    ptc::Deployment::new("generated-example", generated_example::plan)
        .version(env!("CARGO_PKG_VERSION"))
        .about("The Observatory deployment of ptc: serve lisp_eval over MCP, or run the demo.")
        .example("demo")
        .run_with(|own, plan| match own {
            Own::Demo => demo::run(plan),
            Own::Typed => typed(),
        })
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
    let options = ptc::StartOptions::default();
    let outcome = match ptc::Upstreams::start(plan, ptc::Secrets::default(), options).await {
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
