//! Every example in docs/getting-started.md, docs/security.md and docs/operations.md is run:
//! `$ command` lines are run and their output compared with the lines after them; every
//! `generated-example serve …` / `ptc serve …` line (also after `claude mcp add … --`) is started
//! (HTTP ports made free, token files made real) and must come up and answer `/health` (HTTP) or
//! exit cleanly when its client hangs up (stdio); `claude mcp add --transport http` URLs must be a
//! served address. The nginx block of operations.md is run by generated-example/tests/replicas.rs.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_generated-example");

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn doc(name: &str) -> String {
    std::fs::read_to_string(root().join("docs").join(name)).unwrap()
}

/// The lines of the ```sh blocks of `text`.
fn sh_blocks(text: &str) -> Vec<Vec<String>> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<String>> = None;
    // A line ending in `\` goes on with the next, as in the shell.
    let mut continued = false;
    for line in text.lines() {
        match (&mut current, line.trim_start().starts_with("```")) {
            (None, true) if line.trim() == "```sh" => current = Some(Vec::new()),
            (Some(_), true) => blocks.push(current.take().unwrap()),
            (Some(b), false) => {
                let text = line.strip_suffix('\\').unwrap_or(line);
                match b.last_mut() {
                    Some(last) if continued => {
                        last.push(' ');
                        last.push_str(text.trim());
                    }
                    _ => b.push(text.trim_end().to_string()),
                }
                continued = line.ends_with('\\');
            }
            _ => {}
        }
    }
    blocks
}

/// Splits a shell line into words (double quotes with `\"` escapes; enough for these docs).
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_q = false;
    let mut chars = line.chars().peekable();
    let mut started = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' if in_q => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            '"' => {
                in_q = !in_q;
                started = true;
            }
            ' ' if !in_q => {
                if started {
                    out.push(std::mem::take(&mut cur));
                    started = false;
                }
            }
            '#' if !in_q && !started => break,
            c => {
                cur.push(c);
                started = true;
            }
        }
    }
    if started {
        out.push(cur);
    }
    out
}

fn program(name: &str) -> PathBuf {
    match name {
        "generated-example" => PathBuf::from(BIN),
        other => Path::new(BIN).parent().unwrap().join(other),
    }
}

#[test]
fn dollar_examples_print_what_the_docs_show() {
    let mut ran = 0;
    for name in ["getting-started.md", "security.md", "operations.md"] {
        for block in sh_blocks(&doc(name)) {
            let mut i = 0;
            while i < block.len() {
                let Some(cmd) = block[i].strip_prefix("$ ") else {
                    i += 1;
                    continue;
                };
                let expected: Vec<&str> = block[i + 1..]
                    .iter()
                    .take_while(|l| !l.starts_with("$ "))
                    .map(String::as_str)
                    .collect();
                let w = words(cmd);
                let out = Command::new(program(&w[0]))
                    .args(&w[1..])
                    .current_dir(root())
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{name}: `{cmd}` failed: {out:?}");
                let stdout = String::from_utf8(out.stdout).unwrap();
                assert_eq!(stdout.trim_end(), expected.join("\n"), "{name}: `{cmd}`");
                ran += 1;
                i += 1 + expected.len();
            }
        }
    }
    assert_eq!(ran, 2, "the $ examples of getting-started.md");
}

/// Every server command line of the docs, with the line it came from.
fn serve_lines() -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for name in ["getting-started.md", "security.md", "operations.md"] {
        for block in sh_blocks(&doc(name)) {
            for line in block {
                let w = words(&line);
                let cmd = match w.iter().position(|x| x == "--") {
                    Some(p) if w.first().is_some_and(|x| x == "claude") => w[p + 1..].to_vec(),
                    _ => w,
                };
                let start = cmd
                    .iter()
                    .position(|x| x == "generated-example" || x == "ptc");
                if let Some(s) = start
                    && cmd.get(s + 1).is_some_and(|x| x == "serve")
                {
                    // Leading NAME=VALUE words are the command's environment.
                    let mut full = cmd[s..].to_vec();
                    full.extend(
                        cmd[..s]
                            .iter()
                            .filter(|w| w.contains('='))
                            .map(|w| format!("@env:{w}")),
                    );
                    out.push((format!("{name}: {line}"), full));
                }
            }
        }
    }
    out
}

fn http_get(addr: &str, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    r
}

#[test]
fn serve_examples_start_and_answer() {
    let lines = serve_lines();
    assert_eq!(lines.len(), 10, "{lines:?}");
    let token_file = std::env::temp_dir().join(format!("ptc-docs-{}.token", std::process::id()));
    std::fs::write(&token_file, "d0c5d0c5d0c5d0c5d0c5d0c5d0c5d0c5d0c5").unwrap();
    // The policy the docs show (security.md's json block that has "rules").
    let policy_file = std::env::temp_dir().join(format!("ptc-docs-{}.policy", std::process::id()));
    let security = doc("security.md");
    let policy = security
        .split("```json\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap())
        .find(|b| b.contains("\"rules\""))
        .expect("security.md shows a policy");
    std::fs::write(&policy_file, policy).unwrap();
    let mut http_urls = Vec::new();
    for (origin, cmd) in &lines {
        let prog = program(&cmd[0]);
        if !prog.exists() {
            ptc_tests::skip(&format!("{origin}: {} is not built", prog.display()));
            continue;
        }
        let env: Vec<(String, String)> = cmd
            .iter()
            .filter_map(|w| w.strip_prefix("@env:"))
            .filter_map(|w| w.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut args: Vec<String> = cmd[1..]
            .iter()
            .filter(|w| !w.starts_with("@env:"))
            .cloned()
            .collect();
        let mut http = None;
        for i in 0..args.len() {
            if args[i] == "--http" {
                http = Some(args[i + 1].clone());
                let host = args[i + 1].rsplit_once(':').unwrap().0.to_string();
                args[i + 1] = format!("{host}:0");
            }
            if args[i] == "--token-file" {
                args[i + 1] = token_file.display().to_string();
            }
            if args[i] == "--policy" {
                args[i + 1] = policy_file.display().to_string();
            }
        }
        let mut child = Command::new(&prog)
            .args(&args)
            .current_dir(root())
            .env_remove("PTC_HTTP_TOKEN")
            .envs(env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        match http {
            Some(shown) => {
                http_urls.push(format!("http://{shown}/mcp"));
                let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
                let addr = loop {
                    let line = lines
                        .next()
                        .unwrap_or_else(|| panic!("{origin}: exited before listening"))
                        .unwrap();
                    if let Some(rest) = line.split("listening on http://").nth(1) {
                        break rest.trim_end_matches("/mcp").to_string();
                    }
                };
                std::thread::spawn(move || for _ in lines {});
                let addr = addr.replace("0.0.0.0", "127.0.0.1");
                let health = http_get(&addr, "/health");
                assert!(health.starts_with("HTTP/1.1 200"), "{origin}: {health}");
                let _ = child.kill();
                let _ = child.wait();
            }
            None => {
                // A stdio server started by a client: it answers the handshake and tools/list,
                // and stops cleanly when the client hangs up.
                let mut stdin = child.stdin.take().unwrap();
                writeln!(
                    stdin,
                    r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"docs","version":"1"}}}}}}"#
                )
                .unwrap();
                writeln!(
                    stdin,
                    r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
                )
                .unwrap();
                writeln!(stdin, r#"{{"jsonrpc":"2.0","id":2,"method":"tools/list"}}"#).unwrap();
                let mut replies = BufReader::new(child.stdout.take().unwrap()).lines();
                let first = replies.next().unwrap().unwrap();
                assert!(first.contains("\"serverInfo\""), "{origin}: {first}");
                let second = replies.next().unwrap().unwrap();
                assert!(second.contains("\"lisp_eval\""), "{origin}: {second}");
                drop(stdin);
                let status = child.wait().unwrap();
                let mut err = String::new();
                child
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut err)
                    .unwrap();
                assert!(status.success(), "{origin}: {status}\n{err}");
            }
        }
    }
    let _ = std::fs::remove_file(&token_file);
    // `claude mcp add --transport http` points at a served address.
    let gs = doc("getting-started.md");
    let claude_http: Vec<&str> = gs
        .lines()
        .filter(|l| l.starts_with("claude mcp add --transport http"))
        .collect();
    assert_eq!(claude_http.len(), 1);
    let url = claude_http[0].split_whitespace().last().unwrap();
    assert!(
        http_urls.iter().any(|u| u == url),
        "{url} not in {http_urls:?}"
    );
}
