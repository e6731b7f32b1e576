//! `ptc eval` and `ptc replay`: ptc-app's `eval` and `replay` (the commands a deployment binary
//! has too) over the upstreams of `--config`, or over none.

use std::path::PathBuf;
use std::process::ExitCode;

use ptc_app::PlanSource;
use ptc_plan::{Plan, Secrets};

/// Arguments of `ptc eval`.
#[derive(clap::Args)]
#[command(
    mut_arg("metrics", |a| a.requires("config")),
    after_help = "\
Examples:
  ptc eval -e '(->> [3 1 2] (sort) (map inc))'
  echo '(+ 1 2)' | ptc eval -
  ptc eval --json --context data.json -e '(count data/items)'
  ptc eval --config fixtures/observatory/upstreams.json -e '(doc (quote observatory/costs))'

With --json, stdout holds the JSON result only; what the program prints goes to stderr.

Exit codes:
  0  the result is on stdout
  1  the program failed; `reason: message` is on stderr
  2  bad usage, the program or context file cannot be read, or the config is invalid or
     an upstream cannot start"
)]
pub struct EvalCmd {
    /// An upstreams.json: the program may call its upstreams with `tool/call` and discover them
    /// (without it, the program runs with no upstreams).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(flatten)]
    args: ptc_app::EvalArgs,
}

/// Arguments of `ptc replay`.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  ptc eval --config fixtures/observatory/upstreams.json --record target/run.json -e '(count (tool/servers))'
  ptc replay target/run.json --config fixtures/observatory/upstreams.json
  ptc replay target/run.json --config fixtures/observatory/upstreams.json --json

The program runs against the recorded results, under the recorded limits; no upstream is
called. Its answer is printed as `eval` prints it.

Exit codes:
  0  the same answer as recorded, and no divergence
  1  the replay diverged (a call the recording does not have, a recorded call not made, another
     answer); the first divergence is on stderr
  2  bad usage, a run file that cannot be read or is of another format, or an invalid config")]
pub struct ReplayCmd {
    /// The upstreams.json the program was recorded against (without it, none).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(flatten)]
    args: ptc_app::ReplayArgs,
}

/// The plan of `--config`, or none.
fn source(config: Option<PathBuf>) -> PlanSource {
    match config {
        Some(path) => PlanSource::Config(path),
        None => PlanSource::Compiled(Box::new(|| {
            let plan = Plan::default();
            Ok((plan, Secrets::default()))
        })),
    }
}

/// Runs `ptc eval`.
pub fn run(cmd: EvalCmd) -> ExitCode {
    ptc_app::eval("ptc", source(cmd.config), cmd.args)
}

/// Runs `ptc replay`.
pub fn replay(cmd: ReplayCmd) -> ExitCode {
    ptc_app::replay("ptc", source(cmd.config), cmd.args)
}
