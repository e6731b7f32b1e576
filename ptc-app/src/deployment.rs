//! The whole command line of a deployment binary in one call: `serve`, `eval`, `repl` and
//! `catalog` over a plan compiled in with `ptc_upstreams!`, plus any subcommands of the binary's
//! own.
//!
//! ```no_run
//! # fn plan() -> Result<ptc_plan::Plan, serde_json::Error> { unimplemented!() }
//! fn main() -> std::process::ExitCode {
//!     ptc_app::deployment::main("my-deployment", plan)
//! }
//! ```
//!
//! A binary with commands of its own derives `clap::Subcommand` for them and calls
//! [`Deployment::run_with`]; they are listed before the host commands.

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{ArgMatches, Command, FromArgMatches, Subcommand};
use ptc_plan::{Plan, Secrets};

use crate::args::{CatalogArgs, EvalArgs, LoginArgs, ReplArgs, ReplayArgs, ServeArgs};
use crate::start::PlanSource;

/// The `plan()` function `ptc_upstreams!` generates.
pub type CompiledPlan = fn() -> Result<Plan, serde_json::Error>;

/// The subcommands every deployment binary offers, run by ptc-app's [`serve`](crate::serve),
/// [`eval`](crate::eval), [`repl`](crate::repl) and [`catalog`](crate::catalog).
#[derive(Subcommand, Clone, Debug)]
pub enum HostCommand {
    /// Serve lisp_eval to MCP clients over stdio (default) or Streamable HTTP.
    Serve(Box<ServeArgs>),
    /// Run one PTC-Lisp program against the upstreams.
    Eval(EvalArgs),
    /// Run a recorded program again against its recorded results, offline.
    Replay(ReplayArgs),
    /// Interactive PTC-Lisp against the upstreams.
    Repl(ReplArgs),
    /// List the tools programs can call.
    Catalog(CatalogArgs),
    /// Consent, at the terminal, to an upstream calling as you; keep the grant for the hosts.
    Login(LoginArgs),
}

impl HostCommand {
    /// Runs the command; `name` prefixes its messages.
    pub fn run(self, name: &str, source: PlanSource) -> ExitCode {
        match self {
            HostCommand::Serve(a) => crate::serve(name, source, *a),
            HostCommand::Eval(a) => crate::eval(name, source, a),
            HostCommand::Replay(a) => crate::replay(name, source, a),
            HostCommand::Repl(a) => crate::repl(name, source, a),
            HostCommand::Catalog(a) => crate::catalog(name, source, a),
            HostCommand::Login(a) => crate::login(name, source, a),
        }
    }
}

/// The whole CLI of a deployment named `name` over its compiled `plan`: parses the process
/// arguments, runs the command and returns its exit code. `Deployment` sets the version, the
/// description or commands of the binary's own.
pub fn main(name: &'static str, plan: CompiledPlan) -> ExitCode {
    Deployment::new(name, plan).run()
}

/// A deployment binary's command line, configured before [`run`](Deployment::run).
#[derive(Clone, Debug)]
pub struct Deployment {
    name: &'static str,
    plan: CompiledPlan,
    version: Option<&'static str>,
    about: Option<String>,
    examples: Vec<String>,
}

/// What the command line asked for.
#[derive(Debug)]
// Parsed once per process: boxing the larger variant would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum Choice<E> {
    /// One of the host commands.
    Host(HostCommand),
    /// One of the binary's own commands.
    Own(E),
}

impl Deployment {
    /// The CLI of the deployment `name` (the binary's name, used in help and messages).
    pub fn new(name: &'static str, plan: CompiledPlan) -> Self {
        Deployment {
            name,
            plan,
            version: None,
            about: None,
            examples: Vec::new(),
        }
    }

    /// Enables `--version`; pass `env!("CARGO_PKG_VERSION")` (this crate's own version would be
    /// the wrong one).
    pub fn version(mut self, version: &'static str) -> Self {
        self.version = Some(version);
        self
    }

    /// The one-line description `--help` starts with.
    pub fn about(mut self, about: impl Into<String>) -> Self {
        self.about = Some(about.into());
        self
    }

    /// An example command line listed first in `--help` (without the binary's name: `"demo"`).
    pub fn example(mut self, args: impl Into<String>) -> Self {
        self.examples.push(args.into());
        self
    }

    /// The compiled plan as a [`PlanSource`] (what the host commands and ptc-app's functions take).
    pub fn plan_source(&self) -> PlanSource {
        let plan = self.plan;
        PlanSource::Compiled(Box::new(move || {
            plan()
                .map(|plan| (plan, Secrets::default()))
                .map_err(|e| format!("the compiled plan does not load: {e}"))
        }))
    }

    /// Parses the process arguments and runs the host command they name (help and usage errors
    /// exit as clap does).
    pub fn run(self) -> ExitCode {
        self.run_with(|never: NoCommands, _| match never {})
    }

    /// Like [`run`](Deployment::run), with the binary's own subcommands `E` listed first; `own`
    /// runs them, given the compiled plan. `E` must not reuse the host commands' names.
    pub fn run_with<E: Subcommand>(self, own: impl FnOnce(E, PlanSource) -> ExitCode) -> ExitCode {
        match self.parse::<E, _, _>(std::env::args_os()) {
            Ok(Choice::Host(command)) => command.run(self.name, self.plan_source()),
            Ok(Choice::Own(command)) => own(command, self.plan_source()),
            Err(e) => e.exit(),
        }
    }

    /// Parses `args` (the first is the binary's name) against the host commands and `E`.
    pub fn parse<E, I, T>(&self, args: I) -> Result<Choice<E>, clap::Error>
    where
        E: Subcommand,
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let mut command = self.command::<E>();
        let matches = command.try_get_matches_from_mut(args)?;
        let choice = choose::<E>(&matches);
        choice.map_err(|e| e.format(&mut command))
    }

    /// The clap command: `E`'s subcommands, then the host commands, each with examples naming
    /// this binary.
    pub fn command<E: Subcommand>(&self) -> Command {
        let name = self.name;
        let about = self.about.clone().unwrap_or_else(|| {
            format!("The {name} deployment of ptc: serve lisp_eval over MCP, or run PTC-Lisp against its upstreams.")
        });
        let mut examples: Vec<String> = self.examples.clone();
        examples.extend([
            "serve".into(),
            "serve --http 127.0.0.1:7332 --token-file /run/secrets/mcp-token".into(),
            "catalog".into(),
            "eval -e \"(tool/servers)\"".into(),
        ]);
        let examples: String = examples.iter().map(|e| format!("\n  {name} {e}")).collect();
        // The derives set `about` from the enums' doc comments: ours go on after them.
        let mut command =
            HostCommand::augment_subcommands(E::augment_subcommands(Command::new(name)))
                .about(about)
                .long_about(None)
                .subcommand_required(true)
                .arg_required_else_help(true)
                .after_help(format!("Examples:{examples}"));
        if let Some(version) = self.version {
            command = command.version(version);
        }
        command
            .mut_subcommand("serve", |c| {
                c.after_help(format!(
                    "Examples:\n  {name} serve\n  {name} serve --http 127.0.0.1:7332\n  {name} serve --http 0.0.0.0:7332 --token-file /run/secrets/mcp-token\n  {name} serve --upstream-url <UPSTREAM>=https://staging.example.com"
                ))
            })
            .mut_subcommand("eval", |c| {
                c.after_help(format!(
                    "Examples:\n  {name} eval -e \"(tool/servers)\"\n  {name} eval program.clj --context data.json"
                ))
            })
            .mut_subcommand("replay", |c| {
                c.after_help(format!(
                    "Examples:\n  {name} eval --record run.json -e \"(tool/servers)\"\n  {name} replay run.json\n\nExit codes: 0 the same answer as recorded; 1 a divergence (on stderr); 2 an unreadable run file or one of another format"
                ))
            })
            .mut_subcommand("repl", |c| c.after_help(format!("Example:\n  {name} repl")))
            .mut_subcommand("catalog", |c| {
                c.after_help(format!(
                    "Examples:\n  {name} catalog\n  {name} catalog --json"
                ))
            })
            .mut_subcommand("login", |c| {
                c.after_help(format!(
                    "Examples:\n  {name} login <UPSTREAM>\n  {name} login <UPSTREAM> --caller alice@example.com --session-store redis://redis.internal:6379/0 --grant-key-file /etc/ptc/grant.key\n\nExit codes: 0 the consent was given; 1 it was not (declined, refused: the reason is on stderr); 2 bad usage"
                ))
            })
    }
}

fn choose<E: Subcommand>(matches: &ArgMatches) -> Result<Choice<E>, clap::Error> {
    match matches.subcommand_name() {
        Some(sub) if HostCommand::has_subcommand(sub) => {
            HostCommand::from_arg_matches(matches).map(Choice::Host)
        }
        _ => E::from_arg_matches(matches).map(Choice::Own),
    }
}

/// No commands of the binary's own: what [`Deployment::run`] passes as `E`.
#[derive(Debug, Clone, Copy)]
pub enum NoCommands {}

impl FromArgMatches for NoCommands {
    fn from_arg_matches(_: &ArgMatches) -> Result<Self, clap::Error> {
        Err(clap::Error::new(clap::error::ErrorKind::MissingSubcommand))
    }

    fn update_from_arg_matches(&mut self, _: &ArgMatches) -> Result<(), clap::Error> {
        match *self {}
    }
}

impl Subcommand for NoCommands {
    fn augment_subcommands(command: Command) -> Command {
        command
    }

    fn augment_subcommands_for_update(command: Command) -> Command {
        command
    }

    fn has_subcommand(_: &str) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Result<Plan, serde_json::Error> {
        serde_json::from_str(r#"{"credentials":[],"upstreams":[]}"#)
    }

    /// Commands of a binary's own, as a deployment declares them.
    #[derive(Subcommand, Debug, PartialEq)]
    enum Own {
        /// Runs the demo.
        Demo,
        /// Takes an argument.
        Greet { who: String },
    }

    fn subcommands(command: &Command) -> Vec<String> {
        command
            .get_subcommands()
            .map(|c| c.get_name().to_string())
            .collect()
    }

    #[test]
    fn own_commands_come_first_then_the_host_commands() {
        let d = Deployment::new("obs", plan);
        assert_eq!(
            subcommands(&d.command::<Own>()),
            [
                "demo", "greet", "serve", "eval", "replay", "repl", "catalog", "login"
            ]
        );
        assert_eq!(
            subcommands(&d.command::<NoCommands>()),
            ["serve", "eval", "replay", "repl", "catalog", "login"]
        );
    }

    #[test]
    fn arguments_reach_the_host_command_or_the_binarys_own() {
        let d = Deployment::new("obs", plan);
        let serve = d.parse::<Own, _, _>(["obs", "serve", "--http", "127.0.0.1:0"]);
        assert!(
            matches!(&serve, Ok(Choice::Host(HostCommand::Serve(a))) if a.http.http.is_some()),
            "{serve:?}"
        );
        let on_localhost = d.parse::<Own, _, _>(["obs", "serve", "--http", "localhost:7332"]);
        assert!(
            matches!(&on_localhost, Ok(Choice::Host(HostCommand::Serve(a)))
                if a.http.http == Some(([127, 0, 0, 1], 7332).into())),
            "{on_localhost:?}"
        );
        let eval = d.parse::<Own, _, _>(["obs", "eval", "-e", "(+ 1 2)"]);
        assert!(
            matches!(&eval, Ok(Choice::Host(HostCommand::Eval(a))) if a.expr.as_deref() == Some("(+ 1 2)")),
            "{eval:?}"
        );
        let greet = d.parse::<Own, _, _>(["obs", "greet", "you"]);
        assert!(
            matches!(&greet, Ok(Choice::Own(Own::Greet { who })) if who == "you"),
            "{greet:?}"
        );
        let demo = d.parse::<Own, _, _>(["obs", "demo"]);
        assert!(matches!(demo, Ok(Choice::Own(Own::Demo))), "{demo:?}");
    }

    /// The serve arguments `args` parse to.
    fn serve_args(args: &[&str]) -> Result<crate::args::ServeArgs, String> {
        let d = Deployment::new("obs", plan);
        let all: Vec<&str> = ["obs", "serve"].iter().chain(args).copied().collect();
        match d.parse::<NoCommands, _, _>(all) {
            Ok(Choice::Host(HostCommand::Serve(a))) => Ok(*a),
            Ok(other) => Err(format!("not serve: {other:?}")),
            Err(e) => Err(e.kind().to_string()),
        }
    }

    #[test]
    fn oauth_flags_need_an_issuer_and_an_audience_together() {
        let none = serve_args(&[]).unwrap();
        assert!(none.http.oauth.options().unwrap().is_none());
        let both = serve_args(&[
            "--oauth-issuer",
            "https://auth.example.com",
            "--oauth-audience",
            "https://ptc.example.com/mcp",
            "--oauth-scope",
            "ptc:eval",
            "--oauth-algorithm",
            "ES256",
            "--oauth-groups-claim",
            "roles",
        ])
        .unwrap();
        let o = both.http.oauth.options().unwrap().unwrap();
        assert_eq!(o.issuers, ["https://auth.example.com"]);
        assert_eq!(o.audience, "https://ptc.example.com/mcp");
        assert_eq!(o.required_scopes, ["ptc:eval"]);
        assert_eq!(format!("{:?}", o.algorithms), "[ES256]");
        assert_eq!(o.groups_claim, "roles");
        let no_audience = serve_args(&["--oauth-issuer", "https://auth.example.com"]).unwrap();
        assert!(
            no_audience
                .http
                .oauth
                .options()
                .unwrap_err()
                .starts_with("--oauth-issuer needs --oauth-audience URL")
        );
        let no_issuer = serve_args(&["--oauth-audience", "https://ptc.example.com/mcp"]).unwrap();
        assert_eq!(
            no_issuer.http.oauth.options().unwrap_err(),
            "--oauth-audience needs --oauth-issuer"
        );
        let bad_alg = serve_args(&[
            "--oauth-issuer",
            "https://a",
            "--oauth-audience",
            "https://b",
            "--oauth-algorithm",
            "XS999",
        ])
        .unwrap();
        assert_eq!(
            bad_alg.http.oauth.options().unwrap_err(),
            "--oauth-algorithm: unknown algorithm `XS999`"
        );
    }

    #[test]
    fn session_flags_need_sessions_on_and_their_limits_at_least_one() {
        assert!(
            serve_args(&[])
                .unwrap()
                .sessions
                .options()
                .unwrap()
                .is_none()
        );
        let on = serve_args(&["--sessions"]).unwrap();
        let o = on.sessions.options().unwrap().unwrap();
        assert_eq!(o.store.describe(), "memory");
        assert_eq!(o.ttl, std::time::Duration::from_secs(1800));
        assert_eq!(o.max_bytes, 1 << 20);
        let set = serve_args(&[
            "--sessions",
            "--session-ttl-secs",
            "1",
            "--session-max-bytes",
            "1",
        ])
        .unwrap();
        let o = set.sessions.options().unwrap().unwrap();
        assert_eq!((o.ttl.as_secs(), o.max_bytes), (1, 1));
        for (flag, value) in [("--session-ttl-secs", "0"), ("--session-max-bytes", "0")] {
            let zero = serve_args(&["--sessions", flag, value]).unwrap();
            assert_eq!(
                zero.sessions.options().unwrap_err(),
                format!("{flag} must be at least 1")
            );
        }
        // A session setting without --sessions is a usage error, not silently ignored.
        assert!(serve_args(&["--session-store", "memory"]).is_err());
        assert!(serve_args(&["--grant-key-file", "/k"]).is_err());
        let bad = serve_args(&["--sessions", "--session-store", "mongodb://x"]).unwrap();
        assert!(
            bad.sessions
                .options()
                .unwrap_err()
                .starts_with("--session-store: ")
        );
    }

    /// Grants stay in memory without a key; a key seals them in a shared store only, and must
    /// be readable and 32 bytes.
    #[test]
    fn a_grant_key_seals_grants_in_a_shared_store_only() {
        let plain = serve_args(&["--sessions"]).unwrap();
        let sessions = plain.sessions.options().unwrap();
        assert!(plain.sessions.grants(sessions.as_ref()).is_ok());
        let dir = std::env::temp_dir().join(format!("ptc-grant-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = dir.join("grant.key");
        std::fs::write(&key, [7u8; 32]).unwrap();
        let key = key.to_str().unwrap();
        let in_memory = serve_args(&["--sessions", "--grant-key-file", key]).unwrap();
        let sessions = in_memory.sessions.options().unwrap();
        let refused = in_memory.sessions.grants(sessions.as_ref()).unwrap_err();
        assert!(refused.contains("--session-store redis://"), "{refused}");
        let redis = ["--sessions", "--session-store", "redis://127.0.0.1:1/0"];
        let shared = serve_args(&[&redis[..], &["--grant-key-file", key]].concat()).unwrap();
        let sessions = shared.sessions.options().unwrap();
        assert!(shared.sessions.grants(sessions.as_ref()).is_ok());
        let short = dir.join("short.key");
        std::fs::write(&short, [7u8; 31]).unwrap();
        let short =
            serve_args(&[&redis[..], &["--grant-key-file", short.to_str().unwrap()]].concat())
                .unwrap();
        let sessions = short.sessions.options().unwrap();
        let e = short.sessions.grants(sessions.as_ref()).unwrap_err();
        assert!(
            e.contains("32 bytes") && e.contains("this one is 31"),
            "{e}"
        );
        let missing =
            serve_args(&[&redis[..], &["--grant-key-file", "/no/such/key"]].concat()).unwrap();
        let sessions = missing.sessions.options().unwrap();
        let e = missing.sessions.grants(sessions.as_ref()).unwrap_err();
        assert!(
            e.starts_with("--grant-key-file: cannot read /no/such/key"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_missing_or_unknown_command_is_a_usage_error_naming_the_commands() {
        let d = Deployment::new("obs", plan);
        let none = d.parse::<NoCommands, _, _>(["obs"]).unwrap_err();
        assert_eq!(
            none.kind(),
            clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
        );
        let unknown = d.parse::<NoCommands, _, _>(["obs", "demo"]).unwrap_err();
        assert_eq!(unknown.kind(), clap::error::ErrorKind::InvalidSubcommand);
        assert!(unknown.to_string().contains("demo"), "{unknown}");
    }

    #[test]
    fn help_names_the_binary_in_every_example_and_version_is_opt_in() {
        let d = Deployment::new("obs", plan)
            .example("demo")
            .about("Observatory.");
        let mut command = d.command::<Own>();
        let help = command.render_long_help().to_string();
        assert!(help.starts_with("Observatory."), "{help}");
        let examples: Vec<&str> = help
            .lines()
            .skip_while(|l| !l.starts_with("Examples:"))
            .skip(1)
            .collect();
        assert_eq!(examples.first(), Some(&"  obs demo"), "{help}");
        assert!(examples.iter().all(|l| l.starts_with("  obs ")), "{help}");
        for sub in ["serve", "eval", "replay", "repl", "catalog", "login"] {
            let mut sub_command = command.find_subcommand_mut(sub).unwrap().clone();
            let text = sub_command.render_long_help().to_string();
            assert!(text.contains(&format!("  obs {sub}")), "{sub}: {text}");
        }
        let version = d.parse::<Own, _, _>(["obs", "--version"]).unwrap_err();
        assert_eq!(version.kind(), clap::error::ErrorKind::UnknownArgument);
        let d = d.version("1.2.3");
        let version = d.parse::<Own, _, _>(["obs", "--version"]).unwrap_err();
        assert_eq!(version.kind(), clap::error::ErrorKind::DisplayVersion);
        assert!(version.to_string().contains("1.2.3"));
    }

    #[test]
    fn the_plan_source_loads_the_compiled_plan() {
        let source = Deployment::new("obs", plan).plan_source();
        let (plan, _) = source
            .load(&crate::args::OverrideArgs::default())
            .expect("loads");
        assert!(plan.upstreams.is_empty());
        fn broken() -> Result<Plan, serde_json::Error> {
            serde_json::from_str("{")
        }
        let err = Deployment::new("obs", broken)
            .plan_source()
            .load(&crate::args::OverrideArgs::default())
            .map(|_| ())
            .unwrap_err();
        assert!(err.starts_with("the compiled plan does not load"), "{err}");
    }
}
