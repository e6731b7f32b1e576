//! `ptc promote`: a program that ran (a recording of `ptc eval --record`, or its text) drafted
//! as a declared program for a person to review: the program file is written beside the config,
//! its declaration printed to add under `programs`, and both are checked by the plan compiler
//! first. A draft that does not pass is refused with every problem, and nothing is left behind.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use ptc_core::program::record_replay::{Answer, RunFile};
use serde_json::{Map, Value};

/// Arguments of `ptc promote`.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  ptc eval --config upstreams.json --record target/run.json -e '(tool/call ...)'
  ptc promote --config upstreams.json --name errors-by-class --description \"Error classes of an org's recent failures\" target/run.json
  ptc promote --config upstreams.json --name my-query --description \"...\" -e '(tool/call ...)'

A required argument of a tool call written as a literal becomes a parameter (read as
data/<name>); every data/ key the program reads is one too. The result schema is the shape of the
recorded answer. Review the file and the declaration before adding it to the config.

Exit codes:
  0  the program file is written and its declaration printed
  1  the draft does not pass the checks; every problem is printed and nothing is written
  2  bad usage: a missing or unreadable input, a file that exists already")]
pub struct PromoteArgs {
    /// The upstreams.json the program calls.
    #[arg(long)]
    config: PathBuf,
    /// The tool name of the program (kebab-case).
    #[arg(long)]
    name: String,
    /// What the program answers (agents choose tools by it).
    #[arg(long)]
    description: String,
    /// A recorded run (`ptc eval --record`), or a file holding the program's text.
    #[arg(conflicts_with = "expr", required_unless_present = "expr")]
    input: Option<PathBuf>,
    /// The program's text.
    #[arg(short = 'e', long = "expr")]
    expr: Option<String>,
    /// Where to write the program, relative to the config's folder [default: programs/NAME.clj].
    #[arg(long)]
    file: Option<String>,
}

/// What ran: the program, and when recorded, its context and answer.
struct Ran {
    source: String,
    context: Option<Map<String, Value>>,
    answer: Option<Value>,
}

/// Runs `ptc promote`.
pub fn run(args: PromoteArgs) -> ExitCode {
    match promote(&args) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err((code, message)) => {
            eprintln!("{message}");
            ExitCode::from(code)
        }
    }
}

fn usage(message: String) -> (u8, String) {
    (2, format!("ptc promote: {message}"))
}

fn ran(args: &PromoteArgs) -> Result<Ran, (u8, String)> {
    if let Some(source) = &args.expr {
        return Ok(Ran {
            source: source.clone(),
            context: None,
            answer: None,
        });
    }
    let path = args
        .input
        .as_ref()
        .ok_or_else(|| usage("give a run file or -e".into()))?;
    let bytes =
        std::fs::read(path).map_err(|e| usage(format!("cannot read `{}`: {e}", path.display())))?;
    // A recording is JSON of its own format; anything else is the program's text.
    if let Ok(file) = RunFile::parse(&bytes, &path.display().to_string()) {
        let context = match &file.context {
            Some(text) => match serde_json::from_str(text) {
                Ok(Value::Object(m)) => Some(m),
                _ => {
                    return Err(usage(format!(
                        "`{}`: its context is not a JSON object",
                        path.display()
                    )));
                }
            },
            None => None,
        };
        let answer = match file.answer {
            Answer::Value { json, .. } => json,
            Answer::Error { message, .. } => {
                return Err(usage(format!(
                    "`{}` recorded a failed run ({message}): promote a program that answers",
                    path.display()
                )));
            }
        };
        return Ok(Ran {
            source: file.program,
            context,
            answer,
        });
    }
    String::from_utf8(bytes)
        .map(|source| Ran {
            source,
            context: None,
            answer: None,
        })
        .map_err(|_| {
            usage(format!(
                "`{}` is neither a run file nor program text",
                path.display()
            ))
        })
}

fn promote(args: &PromoteArgs) -> Result<String, (u8, String)> {
    let config_text = std::fs::read_to_string(&args.config)
        .map_err(|e| usage(format!("cannot read `{}`: {e}", args.config.display())))?;
    let mut config: Value = serde_json::from_str(&config_text)
        .map_err(|e| usage(format!("`{}` is not JSON: {e}", args.config.display())))?;
    let source = &ptc_core::wire::documents::NetworkSource;
    let loaded = ptc_plan::load_with(&args.config, source).map_err(|d| {
        (
            1,
            format!("the config has problems of its own; fix them first:\n{d}"),
        )
    })?;
    let ran = ran(args)?;
    let proposal = ptc_plan::programs::promote::propose(
        &loaded.plan,
        &ran.source,
        &args.description,
        ran.context.as_ref(),
        ran.answer.as_ref(),
    );
    // A text that does not read is left to the check, which says where.
    let (text, declaration, lifted) = match proposal {
        Some(p) => (p.source, p.declaration, p.lifted),
        None => (
            ran.source.clone(),
            serde_json::json!({"description": args.description}),
            Vec::new(),
        ),
    };
    let relative = args
        .file
        .clone()
        .unwrap_or_else(|| format!("programs/{}.clj", args.name));
    let base = ptc_plan::paths::base_dir(&args.config);
    let path = PathBuf::from(ptc_plan::paths::resolve(&base, &relative));
    if path.exists() {
        return Err(usage(format!(
            "`{}` exists already; pass --file to write the program elsewhere",
            path.display()
        )));
    }
    if config
        .get("programs")
        .and_then(|p| p.get(&args.name))
        .is_some()
    {
        return Err(usage(format!(
            "the config declares a program `{}` already; choose another --name",
            args.name
        )));
    }
    // `file` first, as a person writes a declaration.
    let mut ordered = Map::new();
    ordered.insert("file".into(), Value::String(relative.clone()));
    if let Value::Object(rest) = declaration {
        ordered.extend(rest);
    }
    let declaration = Value::Object(ordered);
    config["programs"][&args.name] = declaration.clone();
    let written = Written::new(&path, &text)?;
    let checked = ptc_plan::load_str(&config.to_string(), &args.config, source);
    if let Err(diags) = checked {
        return Err((
            1,
            format!(
                "ptc promote: the draft of `{}` does not pass the checks (nothing is kept):\n{diags}",
                args.name
            ),
        ));
    }
    written.keep();
    let mut out = format!(
        "wrote {}\nreview it, then add to \"programs\" in {}:\n",
        path.display(),
        args.config.display()
    );
    let snippet =
        serde_json::to_string_pretty(&serde_json::json!({ args.name.as_str(): declaration }))
            .unwrap_or_default();
    for line in snippet.lines().skip(1).take_while(|l| *l != "}") {
        out.push_str(line);
        out.push('\n');
    }
    for (name, literal) in lifted {
        out.push_str(&format!("parameter `{name}`: was the literal {literal}\n"));
    }
    Ok(out)
}

/// A program file written for the check, removed again unless kept.
struct Written {
    path: PathBuf,
    kept: bool,
}

impl Written {
    fn new(path: &Path, text: &str) -> Result<Written, (u8, String)> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| usage(format!("cannot create `{}`: {e}", dir.display())))?;
        }
        std::fs::write(path, text)
            .map_err(|e| usage(format!("cannot write `{}`: {e}", path.display())))?;
        Ok(Written {
            path: path.to_path_buf(),
            kept: false,
        })
    }

    fn keep(mut self) {
        self.kept = true;
    }
}

impl Drop for Written {
    fn drop(&mut self) {
        if !self.kept {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
