//! `ptc serve`, `ptc repl` and `ptc catalog`: the shared host (ptc-app) over a config loaded at
//! run time.

use std::path::PathBuf;
use std::process::ExitCode;

use ptc_app::PlanSource;

/// Arguments of `ptc serve`.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  ptc serve --config fixtures/observatory/upstreams.json
  ptc serve --config upstreams.json --http 127.0.0.1:7332
  PTC_HTTP_TOKEN=$(cat token) ptc serve --config upstreams.json --http 0.0.0.0:7332
  ptc serve --config upstreams.json --upstream-url observatory=https://staging.example.com

Without --http, MCP runs over stdin/stdout (what `claude mcp add` and most clients spawn).
Logs go to stderr; one `ptc::audit` line per evaluation.

Exit codes:
  0  stopped cleanly (stdin closed, or SIGTERM/Ctrl-C after in-flight evaluations finished)
  2  the config is invalid, an upstream cannot start, or a flag is refused")]
pub struct ServeCmd {
    /// The upstreams.json to serve.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    #[command(flatten)]
    args: ptc_app::ServeArgs,
}

/// Arguments of `ptc repl`.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  ptc repl --config fixtures/observatory/upstreams.json

A session:
  ptc> (apropos \"cost\")
  ptc> (count (:value (tool/call 'observatory/list-traces {:org-id \"org_acme\"})))
  ptc> (inc *1)

Exit codes:
  0  the session ended (Ctrl-D)
  2  the config is invalid, an upstream cannot start, or a flag is refused")]
pub struct ReplCmd {
    /// The upstreams.json whose upstreams programs call.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    #[command(flatten)]
    args: ptc_app::ReplArgs,
}

/// Arguments of `ptc catalog`.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  ptc catalog --config fixtures/observatory/upstreams.json
  ptc catalog --config fixtures/observatory/upstreams.json --json
  ptc catalog --config fixtures/observatory/upstreams.json --tool-description

Exit codes:
  0  the catalog was printed
  2  the config is invalid, an upstream cannot start, or a flag is refused")]
pub struct CatalogCmd {
    /// The upstreams.json to list.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    #[command(flatten)]
    args: ptc_app::CatalogArgs,
}

/// `ptc login`: consent to an upstream calling as you.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  ptc login linear --config upstreams.json
  ptc login linear --config upstreams.json --caller alice@example.com --session-store redis://redis.internal:6379/0 --grant-key-file /etc/ptc/grant.key

Prints the authorization URL on stderr and waits (5 minutes at most) for the browser to come back
to the upstream's loopback redirect_uri.

Exit codes:
  0  the consent was given; where the grant is kept is printed
  1  it was not (declined, refused by the authorization server, timed out): the reason is printed
  2  bad usage, an invalid config, a store without the grant key")]
pub struct LoginCmd {
    /// The upstreams.json naming the upstream.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    #[command(flatten)]
    args: ptc_app::LoginArgs,
}

/// Runs `ptc login`.
pub fn login(cmd: LoginCmd) -> ExitCode {
    ptc_app::login("ptc", PlanSource::Config(cmd.config), cmd.args)
}

/// Runs `ptc serve`.
pub fn serve(cmd: ServeCmd) -> ExitCode {
    ptc_app::serve("ptc", PlanSource::Config(cmd.config), cmd.args)
}

/// Runs `ptc repl`.
pub fn repl(cmd: ReplCmd) -> ExitCode {
    ptc_app::repl("ptc", PlanSource::Config(cmd.config), cmd.args)
}

/// Runs `ptc catalog`.
pub fn catalog(cmd: CatalogCmd) -> ExitCode {
    ptc_app::catalog("ptc", PlanSource::Config(cmd.config), cmd.args)
}
