//! The subcommands both binaries offer.

use std::io::Read;
use std::process::ExitCode;
use std::sync::Arc;

use ptc_core::server::{self, Evaluator, envelope, repl as engine, tool};
use tokio_util_free::shutdown_signal;

use crate::args::{CatalogArgs, EvalArgs, ReplArgs, ServeArgs};
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
    server::init_logging(args.log.format());
    let rt = match start::runtime() {
        Ok(rt) => rt,
        Err(e) => return startup_error(name, &e),
    };
    let result: Result<(), (u8, String)> = rt.block_on(async {
        let http = match args.http.http {
            Some(addr) => Some(args.http.options(addr).map_err(|e| (2, e))?),
            None => None,
        };
        if let Some(h) = &http {
            h.validate().map_err(|e| (2, e))?;
        }
        let upstreams = start::upstreams(&source, &args.overrides)
            .await
            .map_err(|e| (2, e))?;
        let evaluator = Evaluator::new(
            upstreams.clone(),
            tokio::runtime::Handle::current(),
            args.limits.limits(),
        )
        .map_err(|e| (2, e))?;
        let served = match http {
            None => server::serve_stdio(evaluator).await.map_err(|e| (1, e)),
            Some(options) => {
                let running = server::serve_http(evaluator, options, shutdown_signal())
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
        upstreams.shutdown().await;
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

/// `catalog`: the upstreams' tools, as text or JSON, or the `lisp_eval` description.
pub fn catalog(name: &str, source: PlanSource, args: CatalogArgs) -> ExitCode {
    let rt = match start::runtime() {
        Ok(rt) => rt,
        Err(e) => return startup_error(name, &e),
    };
    let upstreams = match rt.block_on(start::upstreams(&source, &args.overrides)) {
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
        out.push_str(&tool::description(catalog));
        out.push('\n');
    } else {
        for s in catalog.servers() {
            out.push_str(&format!("{} — {}\n", s.name, s.description));
            for t in s.tools().unwrap_or_default() {
                out.push_str(&format!("  {}\n", ptc_core::discovery::listing(t)));
            }
        }
    }
    // A closed pipe (`| head`) is not an error worth a panic.
    let _ = std::io::Write::write_all(&mut std::io::stdout(), out.as_bytes());
    rt.block_on(upstreams.shutdown());
    ExitCode::SUCCESS
}

/// `eval`: one program through the same evaluator and envelope an MCP client gets.
pub fn eval(name: &str, source: PlanSource, args: EvalArgs) -> ExitCode {
    let program = match (&args.expr, args.file.as_deref()) {
        (Some(e), _) => e.clone(),
        (None, Some(p)) if p.as_os_str() == "-" => {
            let mut s = String::new();
            if let Err(e) = std::io::stdin().read_to_string(&mut s) {
                return startup_error(name, &format!("cannot read standard input: {e}"));
            }
            s
        }
        (None, Some(p)) => match std::fs::read_to_string(p) {
            Ok(s) => s,
            Err(e) => return startup_error(name, &format!("cannot read {}: {e}", p.display())),
        },
        (None, None) => {
            return startup_error(
                name,
                "give a program with -e, a file, or - for standard input",
            );
        }
    };
    let context = match &args.context {
        None => None,
        Some(p) => {
            let parsed = std::fs::read(p).map_err(|e| e.to_string()).and_then(|b| {
                serde_json::from_slice::<serde_json::Value>(&b).map_err(|e| e.to_string())
            });
            match parsed {
                Ok(serde_json::Value::Object(m)) => Some(m),
                Ok(_) => {
                    return startup_error(
                        name,
                        &format!("{} must hold a JSON object", p.display()),
                    );
                }
                Err(e) => return startup_error(name, &format!("{}: {e}", p.display())),
            }
        }
    };
    let rt = match start::runtime() {
        Ok(rt) => rt,
        Err(e) => return startup_error(name, &e),
    };
    let outcome = rt.block_on(async {
        let upstreams = start::upstreams(&source, &args.overrides).await?;
        let evaluator = Evaluator::new(
            upstreams.clone(),
            tokio::runtime::Handle::current(),
            args.limits.limits(),
        )?;
        let req = server::EvalRequest {
            program,
            context,
            output_schema: None,
        };
        let outcome = evaluator.eval(req, Default::default()).await;
        upstreams.shutdown().await;
        Ok::<_, String>(outcome)
    });
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => return startup_error(name, &e),
    };
    if args.json {
        let r = envelope::to_result(&outcome, args.limits.max_output_bytes);
        println!(
            "{}",
            serde_json::to_string_pretty(&r.structured_content).unwrap_or_default()
        );
    } else {
        print!("{}", outcome.prints);
        match &outcome.result {
            Ok(v) => println!(
                "{}",
                envelope::bounded(&v.text, args.limits.max_output_bytes)
            ),
            Err(e) => eprintln!("{}: {}", e.reason, e.message),
        }
    }
    if outcome.result.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
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
    let upstreams = match rt.block_on(start::upstreams(&source, &args.overrides)) {
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
