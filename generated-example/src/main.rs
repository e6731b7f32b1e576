//! The typed example against the Observatory test bed started in-process: lists an org's failed
//! traces and prints the first one's steps.

use std::process::ExitCode;

use generated_example::{first_failed_trace, plan_at};
use observatory_server::{ServerConfig, TokenSource};

#[tokio::main]
async fn main() -> ExitCode {
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
