//! The subcommands both binaries offer.

use std::io::Read;
use std::process::ExitCode;
use std::sync::Arc;

use ptc_core::program::program_hash;
use ptc_core::program::record_replay::{
    Answer, Recorder, Replayer, RunFile, Settings, Tape, answer_difference,
};
use ptc_core::server::{self, Evaluator, repl as engine, tool};
use ptc_core::telemetry::{self, TraceParent, Traces};
use ptc_lisp::Value;
use tokio_util_free::shutdown_signal;

use crate::args::{CatalogArgs, EvalArgs, LoginArgs, ReplArgs, ReplayArgs, ServeArgs, TraceArgs};
use crate::start::{self, PlanSource};

/// Prints `error: …` and returns exit code 2 (start-up problems: config, flags, bind).
fn startup_error(what: &str, e: &str) -> ExitCode {
    eprintln!("{what}: {e}");
    ExitCode::from(2)
}

mod tokio_util_free {
    /// Completes on Ctrl-C or SIGTERM.
    pub async fn shutdown_signal() {
        #[cfg(unix)]
        {
            let mut term =
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(s) => s,
                    Err(_) => {
                        let _ = tokio::signal::ctrl_c().await;
                        return;
                    }
                };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// `serve`: MCP over stdio, or Streamable HTTP with `--http`. `name` prefixes messages.
pub fn serve(name: &str, source: PlanSource, args: ServeArgs) -> ExitCode {
    let source = Arc::new(source);
    // Flushes the spans still queued when serving ends.
    let _traces = match start_traces(&args.traces, name) {
        Ok(t) => t,
        Err(e) => return startup_error(name, &e),
    };
    // One redactor for the upstreams and the log: whatever a secret gets into, it is masked.
    let redactor = ptc_core::credentials::redact::Redactor::new();
    server::init_logging(args.log.format(), redactor.clone());
    let rt = match start::runtime() {
        Ok(rt) => rt,
        Err(e) => return startup_error(name, &e),
    };
    let result: Result<(), (u8, String)> = rt.block_on(async {
        let mut http = match args.http.http {
            Some(addr) => Some(args.http.options(addr).map_err(|e| (2, e))?),
            None => None,
        };
        if let Some(h) = &mut http {
            h.metrics = args.metrics.metrics_listen.is_none();
            h.validate().map_err(|e| (2, e))?;
        }
        let policy = match &args.policy {
            Some(p) => Some(ptc_core::catalog::policy::Policy::load(p).map_err(|e| (2, e))?),
            None => None,
        };
        let sessions = args.sessions.options().map_err(|e| (2, e))?;
        let grants = args
            .sessions
            .grants(sessions.as_ref())
            .map_err(|e| (2, e))?;
        let start = args.overrides.start_settings().map_err(|e| (2, e))?;
        let record_dir = args.record.record_dir(start).map_err(|e| (2, e))?;
        let kept = start::Kept { grants, redactor };
        let upstreams = start::upstreams_keeping(&source, &args.overrides, start, kept.clone())
            .await
            .map_err(|e| (2, e))?;
        let evaluator = Evaluator::new(
            upstreams.clone(),
            tokio::runtime::Handle::current(),
            args.limits.limits(),
        )
        .map_err(|e| (2, e))?;
        evaluator.set_reload(start::reload(
            source.clone(),
            args.overrides.clone(),
            start,
            kept,
        ));
        if let Some(p) = policy {
            evaluator.set_policy(p);
        }
        if let Some(s) = sessions {
            evaluator.set_sessions(s);
        }
        if let Some(d) = record_dir {
            evaluator.set_record_dir(d);
        }
        refresh_on_sighup(evaluator.clone(), name.to_string());
        let (stop_metrics, metrics_stopped) = tokio::sync::oneshot::channel::<()>();
        let metrics = match args.metrics.metrics_listen {
            Some(addr) => {
                let stopped = async {
                    let _ = metrics_stopped.await;
                };
                let running = server::http::serve_metrics(evaluator.clone(), addr, stopped)
                    .await
                    .map_err(|e| (2, e))?;
                eprintln!("{name}: metrics on http://{}/metrics", running.addr);
                Some(running)
            }
            None => None,
        };
        let served = match http {
            None => server::serve_stdio(evaluator.clone())
                .await
                .map_err(|e| (1, e)),
            Some(options) => {
                let running = server::serve_http(evaluator.clone(), options, shutdown_signal())
                    .await
                    .map_err(|e| (2, e))?;
                // A stable line tests and scripts read to find the port.
                eprintln!("{name}: listening on http://{}/mcp", running.addr);
                match running.done.await {
                    Ok(r) => r.map_err(|e| (1, e)),
                    Err(e) => Err((1, format!("the server task failed: {e}"))),
                }
            }
        };
        drop(stop_metrics);
        if let Some(m) = metrics {
            let _ = m.done.await;
        }
        // The upstreams in force now (a refresh may have replaced the first ones).
        drop(upstreams);
        evaluator.upstreams().shutdown().await;
        served
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, e)) => {
            eprintln!("{name} serve: {e}");
            ExitCode::from(code)
        }
    }
}

/// Refreshes the catalog on every SIGHUP, logging what changed (or why it did not).
fn refresh_on_sighup(evaluator: Arc<Evaluator>, name: String) {
    // The handler is in place before this returns (so before the host says it listens): a
    // SIGHUP never finds the default action, which would end the process.
    #[cfg(unix)]
    let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else {
        return;
    };
    #[cfg(unix)]
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            match evaluator.refresh().await {
                Ok(diff) => eprintln!("{name}: catalog refreshed: {}", diff.summary()),
                Err(e) => eprintln!("{name}: catalog not refreshed: {e}"),
            }
        }
    });
    #[cfg(not(unix))]
    let _ = (evaluator, name);
}

/// `login`: the person at the terminal consents to `args.upstream` calling as `args.caller`;
/// the grant is kept where `args` says. Exit 0 with the consent given, 1 without it, 2 on bad
/// usage.
pub fn login(name: &str, source: PlanSource, args: LoginArgs) -> ExitCode {
    let what = format!("{name} login");
    let rt = match start::runtime() {
        Ok(rt) => rt,
        Err(e) => return startup_error(&what, &e),
    };
    let prepared = args.grants().and_then(|(grants, kept)| {
        let start = args.overrides.terminal_start_settings()?;
        Ok((grants, kept, start))
    });
    let (grants, kept, start) = match prepared {
        Ok(p) => p,
        Err(e) => return startup_error(&what, &e),
    };
    let upstreams = match rt.block_on(start::upstreams_listed_later(
        &source,
        &args.overrides,
        start,
        grants,
    )) {
        Ok(u) => u,
        Err(e) => return startup_error(&what, &e),
    };
    let caller = Arc::new(ptc_core::credentials::identity::Caller {
        subject: args.caller.clone(),
        ..ptc_core::credentials::identity::Caller::local()
    });
    match rt.block_on(upstreams.sign_in(&args.upstream, caller)) {
        Ok(tools) => {
            println!(
                "upstream `{}`: consent given for `{}` ({tools} tools listed); the grant is kept \
                 in {kept}",
                args.upstream, args.caller
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{what}: {}", e.message);
            ExitCode::from(1)
        }
    }
}

/// `catalog`: the upstreams' tools, as text or JSON, or the `lisp_eval` description.
pub fn catalog(name: &str, source: PlanSource, args: CatalogArgs) -> ExitCode {
    let rt = match start::runtime() {
        Ok(rt) => rt,
        Err(e) => return startup_error(name, &e),
    };
    let started = args
        .overrides
        .terminal_start_settings()
        .and_then(|start| rt.block_on(start::upstreams(&source, &args.overrides, start)));
    let upstreams = match started {
        Ok(u) => u,
        Err(e) => return startup_error(&format!("{name} catalog"), &e),
    };
    let catalog = upstreams.catalog();
    let mut out = String::new();
    if args.json {
        let tools: Vec<serde_json::Value> = catalog
            .servers()
            .iter()
            .flat_map(|s| s.tools().unwrap_or_default())
            .map(|t| t.to_json())
            .collect();
        match serde_json::to_string_pretty(&tools) {
            Ok(s) => out.push_str(&s),
            Err(e) => return startup_error(name, &e.to_string()),
        }
        out.push('\n');
    } else if args.tool_description {
        out.push_str(&tool::description(
            catalog,
            &ptc_core::catalog::policy::Grant::everything(),
        ));
        out.push('\n');
    } else {
        for s in catalog.servers() {
            out.push_str(&format!("{} — {}\n", s.name, s.description()));
            for t in s.tools().unwrap_or_default() {
                out.push_str(&format!("  {}\n", ptc_core::catalog::discovery::listing(t)));
            }
        }
    }
    // A closed pipe (`| head`) is not an error worth a panic.
    let _ = std::io::Write::write_all(&mut std::io::stdout(), out.as_bytes());
    rt.block_on(upstreams.shutdown());
    ExitCode::SUCCESS
}

/// `eval`: one program, run once in this process against the upstreams (none for an empty
/// plan), through the same pre-check, program host, budgets and redaction as `lisp_eval`.
///
/// It runs the program with [`ptc_core::run_program`] rather than the server's evaluator: the
/// evaluator takes a client's context as a JSON map within `--max-context-bytes`, where a local
/// `--context` file is decoded straight into program values as it is read (a 50 MB file would
/// otherwise be held three times over), and admission, cancellation and the reply's size bound
/// serve clients sharing one server, which a single local run does not.
///
/// With `--record FILE` the run is written to FILE for [`replay`].
///
/// Exit codes: 0 the result is on stdout; 1 the program failed, `reason: message` on stderr;
/// 2 bad usage, an unreadable program or context, a run file that cannot be written, or a plan
/// or upstream that cannot start.
pub fn eval(name: &str, source: PlanSource, args: EvalArgs) -> ExitCode {
    let service = name;
    let name = format!("{name} eval");
    let program = match read_program(&args) {
        Ok(p) => p,
        Err(e) => return startup_error(&name, &e),
    };
    let limits = args.limits.lisp_limits();
    let context = match args.context.as_deref().map(|p| read_context(p, &limits)) {
        None => None,
        Some(Ok(c)) => Some(c),
        Some(Err(e)) => return startup_error(&name, &e),
    };
    let start = match args.overrides.terminal_start_settings() {
        Ok(s) => s,
        Err(e) => return startup_error(&name, &e),
    };
    let recording = match args.record.as_deref() {
        None => None,
        Some(path) => match EvalRecording::open(path, &args, &limits, start) {
            Ok(r) => Some(r),
            Err(e) => return startup_error(&name, &e),
        },
    };
    let rt = match start::runtime() {
        Ok(rt) => rt,
        Err(e) => return startup_error(&name, &e),
    };
    let upstreams = match rt.block_on(start::upstreams(&source, &args.overrides, start)) {
        Ok(u) => u,
        Err(e) => return startup_error(&name, &e),
    };
    // The process ends right after: the OS takes back a decoded `--context` at once, where
    // dropping it value by value is a seventh of a 50 MB run. The clone shares the values.
    std::mem::forget(context.clone());
    let tape = recording
        .as_ref()
        .map_or(Tape::Off, |r| Tape::Record(r.recorder.clone()));
    // Flushes the run's spans when `eval` returns.
    let _traces = match start_traces(&args.traces, service) {
        Ok(t) => t,
        Err(e) => return startup_error(&name, &e),
    };
    let parent = telemetry::is_on().then(TraceParent::from_env).flatten();
    let span = telemetry::eval_span(
        ptc_core::server::tool::NAME,
        &program,
        program_hash,
        "local",
        parent.as_ref(),
    );
    let run = span.in_scope(|| {
        ptc_core::run_program_taped(
            upstreams.clone(),
            rt.handle().clone(),
            &program,
            limits,
            args.limits.budgets(),
            context,
            tape,
        )
    });
    let reason = run.result.as_ref().err().map(|e| e.reason().as_str());
    telemetry::eval_ended(&span, reason, &run.records, run.output.len());
    drop(span);
    rt.block_on(upstreams.shutdown());
    let redactor = upstreams.redactor();
    print_output(&run, args.json);
    if args.metrics {
        match serde_json::to_string(&run.records) {
            Ok(text) => eprintln!("{text}"),
            Err(e) => eprintln!("{name}: cannot print the metrics: {e}"),
        }
    }
    let mut code = print_value(&run, args.json, redactor);
    if let Some(r) = recording
        && let Err(e) = r.write(&upstreams, &program, &run)
    {
        eprintln!("{name}: {e}");
        code = ExitCode::from(2);
    }
    // As with the context: the result may be as large, and the process is about to end.
    std::mem::forget(run);
    code
}

/// The exporter of the traces `args` and the OTEL variables configure, named `service` unless
/// OTEL_SERVICE_NAME says; `None` when traces are off.
fn start_traces(args: &TraceArgs, service: &str) -> Result<Option<Traces>, String> {
    match args.config(service)? {
        None => Ok(None),
        Some(config) => Traces::start(&config).map(Some),
    }
}

/// What the program printed: on stdout, or with `--json` on stderr (stdout must then parse as
/// one JSON value).
fn print_output(run: &ptc_core::ProgramRun, json: bool) {
    if json {
        eprint!("{}", run.output);
    } else {
        print!("{}", run.output);
    }
}

/// The program's value on stdout (Clojure syntax, or JSON), or its error on stderr.
fn print_value(
    run: &ptc_core::ProgramRun,
    json: bool,
    redactor: &ptc_core::credentials::redact::Redactor,
) -> ExitCode {
    match &run.result {
        Ok(v) if json => match v.to_json_string() {
            Ok(s) => {
                println!("{}", redactor.redact(&s));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{}", redactor.redact(&e.to_string()));
                ExitCode::FAILURE
            }
        },
        Ok(v) => {
            println!("{}", redactor.redact(&v.to_string()));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{}", redactor.redact(&e.to_string()));
            ExitCode::FAILURE
        }
    }
}

/// `eval --record FILE`: the file (created before the program runs, so a path that cannot be
/// written is found before anything is called), the recorder, and the context's text.
struct EvalRecording {
    path: std::path::PathBuf,
    file: std::fs::File,
    recorder: Recorder,
    context: Option<String>,
}

impl EvalRecording {
    fn open(
        path: &std::path::Path,
        args: &EvalArgs,
        limits: &ptc_lisp::Limits,
        start: ptc_core::call::upstreams::StartSettings,
    ) -> Result<Self, String> {
        // The context as its file holds it: a replay decodes the very text this run did.
        let context = match args.context.as_deref() {
            Some(p) => Some(
                std::fs::read_to_string(p)
                    .map_err(|e| format!("cannot read {}: {e}", p.display()))?,
            ),
            None => None,
        };
        let file = std::fs::File::create(path)
            .map_err(|e| format!("cannot write the run file {}: {e}", path.display()))?;
        Ok(EvalRecording {
            path: path.to_path_buf(),
            file,
            recorder: Recorder::new(Settings::new(limits, start)),
            context,
        })
    }

    fn write(
        mut self,
        upstreams: &ptc_core::Upstreams,
        program: &str,
        run: &ptc_core::ProgramRun,
    ) -> Result<(), String> {
        use std::io::Write;
        let answer = Answer::of(&run.result, upstreams.redactor());
        let file = self.recorder.run_file(
            upstreams,
            program,
            self.context.as_deref(),
            &run.output,
            answer,
        );
        let bytes = file.to_json()?;
        self.file
            .write_all(&bytes)
            .map_err(|e| format!("cannot write the run file {}: {e}", self.path.display()))
    }
}

/// `replay`: runs a recorded program again (`eval --record`, `serve --record-dir`) against the
/// recorded results, under the recorded limits, with no upstream contacted (a call of an MCP
/// upstream lists its tools, to check the call against them). Its answer is printed as `eval`
/// prints it; the first divergence goes to stderr: a call the recording does not have (other
/// arguments, one call too many), recorded calls the program did not make, another answer.
///
/// Exit codes: 0 the same answer, no divergence; 1 a divergence (on stderr); 2 bad usage, a run
/// file that cannot be read or is of another format, or a plan that cannot load.
pub fn replay(name: &str, source: PlanSource, args: ReplayArgs) -> ExitCode {
    let name = format!("{name} replay");
    let file = match RunFile::read(&args.file) {
        Ok(f) => f,
        Err(e) => return startup_error(&name, &e),
    };
    let limits = file.settings.limits();
    let context = match file.context_value(&limits) {
        Ok(c) => c,
        Err(e) => return startup_error(&name, &format!("{}: {e}", args.file.display())),
    };
    let options = file.settings.start_options();
    let rt = match start::runtime() {
        Ok(rt) => rt,
        Err(e) => return startup_error(&name, &e),
    };
    let started = rt.block_on(async {
        let (plan, secrets) = source.load(&crate::args::OverrideArgs::default())?;
        ptc_core::Upstreams::start(plan, secrets, options)
            .await
            .map(Arc::new)
            .map_err(|e| format!("cannot start the upstreams: {e}"))
    });
    let upstreams = match started {
        Ok(u) => u,
        Err(e) => return startup_error(&name, &e),
    };
    let budgets = file.settings.budgets();
    let replayer = Replayer::new(&file.calls);
    let run = ptc_core::run_program_taped(
        upstreams.clone(),
        rt.handle().clone(),
        &file.program,
        limits,
        budgets,
        context,
        Tape::Replay(replayer.clone()),
    );
    rt.block_on(upstreams.shutdown());
    let redactor = upstreams.redactor();
    print_output(&run, args.json);
    let stopped = replayer.divergence();
    // A divergence stops the program: its error is the divergence, said once below.
    if stopped.is_none() || run.result.is_ok() {
        print_value(&run, args.json, redactor);
    }
    let answer = Answer::of(&run.result, redactor);
    let diverged = stopped
        .or_else(|| replayer.unused())
        .or_else(|| answer_difference(&file, &answer, &run.output));
    match diverged {
        Some(why) => {
            eprintln!("{name}: diverged from {}: {why}", args.file.display());
            ExitCode::FAILURE
        }
        None => {
            eprintln!(
                "{name}: the same answer as recorded; {} upstream calls answered from {}, none \
                 sent",
                replayer.calls_made(),
                args.file.display()
            );
            ExitCode::SUCCESS
        }
    }
}

/// The program from `-e`, a file, or standard input (`-`).
fn read_program(args: &EvalArgs) -> Result<String, String> {
    match (&args.expr, args.file.as_deref()) {
        (Some(e), _) => Ok(e.clone()),
        (None, Some(p)) if p.as_os_str() == "-" => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .map_err(|e| format!("cannot read standard input: {e}"))?;
            Ok(s)
        }
        (None, Some(p)) => {
            std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))
        }
        (None, None) => Err("give a program with -e, a file, or - for standard input".into()),
    }
}

/// `--context`: a JSON object decoded while it is read, under the program's memory limit, so
/// the file is never whole in memory beside its values.
fn read_context(path: &std::path::Path, limits: &ptc_lisp::Limits) -> Result<Value, String> {
    let file =
        std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    match Value::from_json_reader(file, limits) {
        Ok(v @ Value::Map(_)) => Ok(v),
        Ok(_) => Err(format!("{} must hold a JSON object", path.display())),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

const REPL_HELP: &str = "\
Type PTC-Lisp forms; a form may span lines. *1 *2 *3 hold the last results.
Discovery: (tool/servers) (dir 'server) (doc 'server/tool) (apropos \"text\")
Commands: :help  :quit (or Ctrl-D)";

/// `repl`: line editing, history, multi-line forms, `*1`.
pub fn repl(name: &str, source: PlanSource, args: ReplArgs) -> ExitCode {
    use rustyline::error::ReadlineError;
    let rt = match start::runtime() {
        Ok(rt) => rt,
        Err(e) => return startup_error(name, &e),
    };
    let started = args
        .overrides
        .terminal_start_settings()
        .and_then(|start| rt.block_on(start::upstreams(&source, &args.overrides, start)));
    let upstreams = match started {
        Ok(u) => u,
        Err(e) => return startup_error(&format!("{name} repl"), &e),
    };
    let mut session = engine::Repl::new(
        Arc::clone(&upstreams),
        rt.handle().clone(),
        args.limits.limits(),
    );
    let mut editor = match rustyline::DefaultEditor::new() {
        Ok(e) => e,
        Err(e) => return startup_error(name, &format!("cannot start the line editor: {e}")),
    };
    let history = args.history.clone().or_else(|| {
        std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".ptc_history"))
    });
    if let Some(h) = &history {
        let _ = editor.load_history(h);
    }
    println!(
        "{name} repl — {} upstream(s). :help for help.",
        upstreams.catalog().servers().len()
    );
    let mut pending = String::new();
    loop {
        let prompt = if pending.is_empty() { "ptc> " } else { "...> " };
        match editor.readline(prompt) {
            Ok(line) => {
                if pending.is_empty() {
                    match line.trim() {
                        "" => continue,
                        ":quit" | ":q" => break,
                        ":help" => {
                            println!("{REPL_HELP}");
                            continue;
                        }
                        _ => {}
                    }
                }
                pending.push_str(&line);
                pending.push('\n');
                if !engine::is_complete(&pending) {
                    continue;
                }
                let entry = std::mem::take(&mut pending);
                let _ = editor.add_history_entry(entry.trim_end());
                let out = session.eval(&entry);
                print!("{}", out.prints);
                match out.result {
                    Ok(v) => println!("{v}"),
                    Err(e) => println!("error: {e}"),
                }
            }
            Err(ReadlineError::Interrupted) => {
                pending.clear();
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => {
                eprintln!("{name} repl: {e}");
                break;
            }
        }
    }
    if let Some(h) = &history {
        let _ = editor.save_history(h);
    }
    rt.block_on(upstreams.shutdown());
    ExitCode::SUCCESS
}
