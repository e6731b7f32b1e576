//! `ptc check`: validate a config and its OpenAPI documents; print the compiled catalog.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use ptc_plan::effects::{Classified, Refusal, classify, mcp_effect};
use ptc_plan::{Plan, Transport};

/// Arguments of `ptc check`.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  ptc check fixtures/observatory/upstreams.json
  ptc check --json fixtures/observatory/upstreams.json > plan.json

Exit codes:
  0  the config is valid; the catalog (or plan) is on stdout
  1  every problem found is on stderr, each with its file, line:column, JSON pointer and fix
  2  bad usage")]
pub struct CheckArgs {
    /// The upstreams.json to check.
    config: PathBuf,
    /// Print the whole compiled plan as JSON instead of the catalog table.
    #[arg(long)]
    json: bool,
}

/// Runs `ptc check`: exit 0 and the catalog on stdout, or exit 1 and every problem on stderr.
/// `schema_url` documents are fetched (with the upstream's auth), files are read.
pub fn run(args: CheckArgs) -> ExitCode {
    match ptc_plan::load_with(&args.config, &ptc_core::wire::documents::NetworkSource) {
        Ok(loaded) if args.json => match serde_json::to_string_pretty(&loaded.plan) {
            Ok(json) => {
                println!("{json}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: cannot render the plan as JSON: {e}");
                ExitCode::FAILURE
            }
        },
        Ok(loaded) => {
            print!("{}", render_catalog(&loaded.plan));
            ExitCode::SUCCESS
        }
        Err(diags) => {
            eprintln!("{diags}");
            ExitCode::FAILURE
        }
    }
}

/// The human-readable catalog: one block per upstream, one line per tool.
pub fn render_catalog(plan: &Plan) -> String {
    let mut out = String::new();
    let mut tools = 0;
    for up in &plan.upstreams {
        match &up.transport {
            Transport::Openapi(api) => {
                tools += api.tools.len();
                let _ = writeln!(
                    out,
                    "{} (openapi, {} tool{}) {}",
                    up.name,
                    api.tools.len(),
                    if api.tools.len() == 1 { "" } else { "s" },
                    api.base_url
                );
                let width = api
                    .tools
                    .iter()
                    .map(|t| up.name.len() + 1 + t.name.len())
                    .max()
                    .unwrap_or(0);
                let route_width = api
                    .tools
                    .iter()
                    .map(|t| t.ptc.method.len() + 1 + t.ptc.path.len())
                    .max()
                    .unwrap_or(0);
                for t in &api.tools {
                    let symbol = format!("{}/{}", up.name, t.name);
                    let route = format!("{} {}", t.ptc.method, t.ptc.path);
                    let required = required(&t.input_schema);
                    let mark = effect_mark(Ok(t.classified));
                    let _ = writeln!(
                        out,
                        "  {symbol:width$}  {route:route_width$}  required: {required}{mark}"
                    );
                }
            }
            Transport::McpStdio(p) => {
                let spec = format!(
                    "{}{}{}",
                    p.command,
                    if p.args.is_empty() { "" } else { " " },
                    p.args.join(" ")
                );
                let isolation = p.isolation();
                let under = Some(isolation.as_str());
                tools += mcp_tools(
                    &mut out,
                    &up.name,
                    ("mcp_stdio", &spec, under),
                    &p.tools,
                    "starts",
                );
            }
            Transport::McpHttp(p) => {
                let what = ("mcp_http", p.url.as_str(), None);
                tools += mcp_tools(&mut out, &up.name, what, &p.tools, "connects");
            }
        }
    }
    programs(&mut out, plan);
    let _ = write!(
        out,
        "ok: {} upstream{}, {tools} compiled tool{}",
        plan.upstreams.len(),
        if plan.upstreams.len() == 1 { "" } else { "s" },
        if tools == 1 { "" } else { "s" }
    );
    let n = plan.programs.len();
    if n > 0 {
        let _ = write!(
            out,
            ", {n} checked program{}",
            if n == 1 { "" } else { "s" }
        );
    }
    out.push('\n');
    out
}

/// The declared programs, one line each: the file, the arguments the caller must give, what
/// it calls and its effect.
fn programs(out: &mut String, plan: &Plan) {
    if plan.programs.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "programs ({}, checked against the tools above)",
        plan.programs.len()
    );
    let file_of = |p: &ptc_plan::ProgramPlan| {
        std::path::Path::new(&p.file)
            .file_name()
            .map_or(p.file.clone(), |f| f.to_string_lossy().into_owned())
    };
    let width = plan.programs.iter().map(|p| p.name.len()).max();
    let file_width = plan.programs.iter().map(|p| file_of(p).len()).max();
    let (width, file_width) = (width.unwrap_or(0), file_width.unwrap_or(0));
    for p in &plan.programs {
        let file = file_of(p);
        let effect = if p.writes.is_empty() {
            "read-only".to_string()
        } else {
            format!("writes {}", p.writes.join(" "))
        };
        let _ = writeln!(
            out,
            "  {:width$}  {file:file_width$}  required: {}  calls: {}  [{effect}]",
            p.name,
            required(&p.input_schema),
            p.calls.join(" ")
        );
    }
}

/// An MCP upstream's lines: its own (`what`: its transport, what it is started as or where it
/// is, and a line to print under it, a stdio server's isolation), then its pinned tools (name,
/// pin, required arguments), or that its tools are listed at run time. The number of pinned
/// tools.
fn mcp_tools(
    out: &mut String,
    name: &str,
    what: (&str, &str, Option<&str>),
    tools: &ptc_plan::McpTools,
    when: &str,
) -> usize {
    let (transport, spec, under) = what;
    let under = under.map_or(String::new(), |line| format!("\n  {line}"));
    let Some(pinned) = &tools.pinned else {
        let _ = writeln!(
            out,
            "{name} ({transport}) {spec}  [tools are listed when it {when}; not pinned: `ptc vendor` pins them]{under}"
        );
        return 0;
    };
    let _ = writeln!(
        out,
        "{name} ({transport}, {} pinned tool{}, pin_policy {}) {spec}  [compared with the server's listing when it {when}]{under}",
        pinned.len(),
        if pinned.len() == 1 { "" } else { "s" },
        tools.policy.as_str()
    );
    let width = pinned
        .iter()
        .map(|t| name.len() + 1 + t.name.len())
        .max()
        .unwrap_or(0);
    for t in pinned {
        let symbol = format!("{name}/{}", t.name);
        let required = required(&t.input_schema);
        let natural = mcp_effect(Some(&serde_json::Value::Object(t.annotations.clone())));
        let mark = effect_mark(classify(natural, tools.writes.get(&t.name), true));
        let pin: String = t.sha256.chars().take(12).collect();
        let _ = writeln!(
            out,
            "  {symbol:width$}  sha256 {pin}  required: {required}{mark}"
        );
    }
    pinned.len()
}

/// The required arguments of an input schema, listed (`-` for none).
fn required(input_schema: &serde_json::Value) -> String {
    let required: Vec<&str> = input_schema
        .get("required")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(serde_json::Value::as_str)
        .collect();
    if required.is_empty() {
        "-".to_string()
    } else {
        required.join(", ")
    }
}

/// What a tool that is not a read is, as a suffix: `  [write, approval always]`, or that the
/// config does not allow-list it (so it is disabled).
fn effect_mark(classified: Result<Classified, Refusal>) -> String {
    match classified {
        Ok(c) if c.effect.is_read() => String::new(),
        Ok(c) => format!(
            "  [{}, approval {}]",
            c.effect.as_str(),
            c.approval.as_str()
        ),
        Err(_) => "  [write, not in allow_writes: disabled]".to_string(),
    }
}
