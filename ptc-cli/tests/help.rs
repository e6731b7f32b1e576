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
            "check", "eval", "replay", "expand", "vendor", "serve", "repl", "catalog", "new"
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
        // and `repl` wait for a client or a terminal, `new` writes a crate (their own tests
        // drive them).
        let interactive = command == "serve" || command == "repl" || command == "new";
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
