//! `ptc --help` announces only commands that exist, and every help text has examples that run
//! and the exit codes.

use std::process::Command;

fn ptc(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ptc"))
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .args(args)
        .output()
        .expect("ptc runs")
}

fn help(args: &[&str]) -> String {
    let out = ptc(args);
    assert_eq!(out.status.code(), Some(0), "{args:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The commands `ptc --help` lists, in its `Commands:` section.
fn listed_commands(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect()
}

/// The example lines (`  ptc ...`) of a help text.
fn examples(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.starts_with("Examples:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| l.trim().to_string())
        .collect()
}

#[test]
fn top_level_help_lists_only_real_commands_with_examples_and_exit_codes() {
    let text = help(&["--help"]);
    assert_eq!(
        listed_commands(&text),
        [
            "check", "eval", "replay", "expand", "vendor", "serve", "repl", "catalog", "login",
            "new", "promote"
        ],
        "{text}"
    );
    assert!(text.contains("Exit codes:"), "{text}");
    let examples = examples(&text);
    for command in listed_commands(&text) {
        assert!(
            examples
                .iter()
                .any(|e| e.starts_with(&format!("ptc {command} "))),
            "no example for {command}:\n{text}"
        );
    }
}

#[test]
fn every_subcommand_help_has_examples_that_run_and_exit_codes() {
    let commands = listed_commands(&help(&["--help"]));
    assert!(!commands.is_empty());
    // `ptc eval`'s examples record to and replay from `target/run.json`, as a reader in the
    // checkout would; `target/` is not there when CARGO_TARGET_DIR puts the build elsewhere.
    std::fs::create_dir_all(concat!(env!("CARGO_MANIFEST_DIR"), "/../target")).unwrap();
    for command in commands {
        let text = help(&[&command, "--help"]);
        assert!(text.contains("Exit codes:"), "{command}:\n{text}");
        let examples = examples(&text);
        assert!(!examples.is_empty(), "{command} has no example:\n{text}");
        // Examples without shell plumbing or files of the reader's own run as written; `serve`
        // and `repl` wait for a client or a terminal, `login` for a person's browser, `new`
        // writes a crate and `promote` a program beside the config (their own tests drive them).
        let interactive = ["serve", "repl", "login", "new", "promote"].contains(&command.as_str());
        for example in examples
            .iter()
            .filter(|e| !interactive && !e.contains(['|', '>']) && !e.contains("data.json"))
        {
            let words = shell_words(example);
            let args: Vec<&str> = words[1..].iter().map(String::as_str).collect();
            let out = ptc(&args);
            assert_eq!(
                out.status.code(),
                Some(0),
                "`{example}` fails:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// Splits a command line on spaces, keeping single-quoted parts whole (enough for our examples).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '\'' => quoted = !quoted,
            ' ' if !quoted => {
                if !current.is_empty() {
                    words.push(std::mem::take(&mut current));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// `ptc --help` and each listed command's help, with the command line that printed it.
fn all_helps() -> Vec<(String, String)> {
    let top = help(&["--help"]);
    let mut helps: Vec<(String, String)> = listed_commands(&top)
        .into_iter()
        .map(|c| (format!("ptc {c} --help"), help(&[&c, "--help"])))
        .collect();
    helps.push(("ptc --help".into(), top));
    helps
}

/// Every flag some `ptc` command takes, read from the options part of each help text
/// (`      --timeout-ms <MS>`, `  -h, --help`).
fn flags_taken(helps: &[(String, String)]) -> std::collections::BTreeSet<String> {
    helps
        .iter()
        .flat_map(|(_, h)| h.lines())
        .filter(|l| l.trim_start().starts_with('-'))
        .flat_map(|l| {
            let spec = l.trim_start().split("  ").next().unwrap_or_default();
            flags_in(spec)
        })
        .collect()
}

/// The `--flag` words of `text`.
fn flags_in(text: &str) -> Vec<String> {
    text.match_indices("--")
        .filter(|(at, _)| !text[..*at].ends_with(|c: char| c.is_alphanumeric() || c == '-'))
        .map(|(at, _)| {
            let rest = &text[at + 2..];
            let end = rest
                .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .filter(|name| name.starts_with(|c: char| c.is_ascii_lowercase()))
        .map(|name| format!("--{name}"))
        .collect()
}

/// A help text or a doc that names a flag no command takes sends its reader to an error (one
/// once cited `--max-context-bytes` before the flag existed). The docs' flag tables are checked
/// too; `docs/observatory.md` documents the test bed's own server, not `ptc`.
#[test]
fn help_texts_and_the_docs_flag_tables_name_only_flags_that_exist() {
    let helps = all_helps();
    let taken = flags_taken(&helps);
    assert!(
        taken.contains("--timeout-ms") && taken.contains("--help"),
        "{taken:?}"
    );
    let mut cited = Vec::new();
    for (name, text) in &helps {
        cited.extend(flags_in(text).into_iter().map(|f| (name.clone(), f)));
    }
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
    for entry in std::fs::read_dir(&docs).expect("docs/") {
        let path = entry.expect("an entry").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name == "observatory.md" || path.extension().is_none_or(|x| x != "md") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a doc");
        for line in text.lines().filter(|l| l.starts_with("| `--")) {
            let first = line.split('|').nth(1).unwrap_or_default();
            cited.extend(flags_in(first).into_iter().map(|f| (name.clone(), f)));
        }
    }
    let unknown: Vec<_> = cited.iter().filter(|(_, f)| !taken.contains(f)).collect();
    assert!(
        unknown.is_empty(),
        "flags no ptc command takes: {unknown:?}"
    );
}

#[test]
fn flag_words_are_read_whole() {
    assert_eq!(
        flags_in("use --max-calls N (or --timeout-ms=5); a-- b ---x"),
        ["--max-calls", "--timeout-ms"]
    );
}
