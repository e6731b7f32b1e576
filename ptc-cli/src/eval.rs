//! `ptc eval`: evaluate a PTC-Lisp program.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use ptc_lisp::{Interpreter, Limits};

/// Arguments of `ptc eval`.
#[derive(clap::Args)]
#[command(after_help = "\
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
     an upstream cannot start")]
pub struct EvalArgs {
    /// Program text to evaluate.
    #[arg(short = 'e', long = "expr", conflicts_with = "file")]
    expr: Option<String>,
    /// Program file to evaluate (`-` reads standard input).
    file: Option<PathBuf>,
    /// Wall-clock limit in milliseconds.
    #[arg(long)]
    timeout_ms: Option<u64>,
    /// Memory budget in bytes.
    #[arg(long)]
    memory_bytes: Option<u64>,
    /// Print the result as JSON instead of Clojure syntax (printed output goes to stderr).
    #[arg(long)]
    json: bool,
    /// A JSON object whose keys the program reads as `data/<key>`.
    #[arg(long, value_name = "FILE")]
    context: Option<PathBuf>,
    /// An upstreams.json: the program may call its upstreams with `tool/call` and discover them.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Print the run's upstream calls and payload metrics as JSON on stderr (needs --config).
    #[arg(long, requires = "config")]
    metrics: bool,
}

fn read_program(args: &EvalArgs) -> Result<String, String> {
    if let Some(e) = &args.expr {
        return Ok(e.clone());
    }
    match args.file.as_deref() {
        Some(p) if p.as_os_str() == "-" => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .map_err(|e| format!("cannot read standard input: {e}"))?;
            Ok(s)
        }
        Some(p) => {
            std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))
        }
        None => Err("give a program with -e, a file, or - for standard input".into()),
    }
}

/// Runs `ptc eval`.
pub fn run(args: EvalArgs) -> ExitCode {
    let src = match read_program(&args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ptc eval: {e}");
            return ExitCode::from(2);
        }
    };
    let mut limits = Limits::default();
    if let Some(ms) = args.timeout_ms {
        limits.timeout = Some(Duration::from_millis(ms));
    }
    if let Some(b) = args.memory_bytes {
        limits.max_memory_bytes = b;
    }
    let context = match &args.context {
        Some(path) => {
            let file = match std::fs::File::open(path) {
                Ok(f) => f,
                Err(e) => {
                    eprintln!("ptc eval: cannot read {}: {e}", path.display());
                    return ExitCode::from(2);
                }
            };
            // Decoded as it is read: the file is never whole in memory beside its values.
            match ptc_lisp::Value::from_json_reader(file, &limits) {
                Ok(v @ ptc_lisp::Value::Map(_)) => Some(v),
                Ok(_) => {
                    eprintln!("ptc eval: {} must hold a JSON object", path.display());
                    return ExitCode::from(2);
                }
                Err(e) => {
                    eprintln!("ptc eval: {}: {e}", path.display());
                    return ExitCode::from(2);
                }
            }
        }
        None => None,
    };
    let (result, printed, records) = match &args.config {
        Some(config) => match crate::upstreams::run(config, &src, limits, context) {
            Ok(run) => (run.result, run.output, Some(run.records)),
            Err(e) => {
                eprintln!("ptc eval: {e}");
                return ExitCode::from(2);
            }
        },
        None => {
            let mut interp = Interpreter::new(limits);
            if let Some(c) = context {
                interp.set_context(c);
            }
            let result = interp.eval_str(&src);
            let printed = interp.take_output();
            // The process ends right after: the OS takes back a decoded `--context` at once,
            // where dropping it value by value is a seventh of a 50 MB run.
            std::mem::forget(interp);
            (result, printed, None)
        }
    };
    // With --json, stdout must parse as one JSON value, so printed output goes to stderr.
    if args.json {
        eprint!("{printed}");
    } else {
        print!("{printed}");
    }
    if args.metrics
        && let Some(r) = &records
    {
        match serde_json::to_string(r) {
            Ok(text) => eprintln!("{text}"),
            Err(e) => eprintln!("ptc eval: cannot print the metrics: {e}"),
        }
    }
    match result {
        Ok(v) => {
            if args.json {
                match v.to_json_string() {
                    Ok(s) => println!("{s}"),
                    Err(e) => {
                        eprintln!("{e}");
                        return ExitCode::FAILURE;
                    }
                }
            } else {
                println!("{v}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
