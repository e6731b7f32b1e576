//! `generated-example demo`, the README's main job, run as a newcomer runs it.

use std::process::Command;

#[test]
fn demo_answers_every_question_with_its_calls_and_payload_reduction() {
    let out = Command::new(env!("CARGO_BIN_EXE_generated-example"))
        .arg("demo")
        .output()
        .expect("the demo runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    // Six questions, each with its program, an answer (no error) and a payload line; the
    // first five are the deployment's program tools. Then the first again, called as its tool.
    let all: Vec<&str> = stdout.split("\n── ").skip(1).collect();
    assert_eq!(all.len(), 7, "{stdout}");
    let (sections, as_tool) = all.split_at(6);
    for (i, s) in sections.iter().enumerate() {
        let header = if i < 5 {
            "\nprogram (the deployment's tool `"
        } else {
            "\nprogram:\n  ("
        };
        assert!(s.contains(header), "{s}");
        assert!(s.contains("\nanswer:\n  "), "{s}");
        assert!(!s.contains("\nerror: "), "{s}");
        assert!(s.contains("\nupstream calls:\n  observatory/"), "{s}");
        assert!(
            s.contains("from upstreams ->") && s.contains("x smaller)"),
            "{s}"
        );
    }
    // The questions and the calls they needed.
    assert!(
        sections[0].contains("observatory/list-errors ok")
            && sections[0].contains("[[\"timeout\" ")
    );
    assert!(sections[1].contains("observatory/costs ok") && sections[1].contains(":total-usd "));
    assert!(
        sections[2].contains("observatory/search-traces ok")
            && sections[2].contains(":status \"error\"")
    );
    assert!(sections[3].contains("observatory/get-trace-steps ok"));
    assert!(
        sections[3].contains("observatory/get-trace-step ok")
            && sections[3].contains(":failed-step {:index ")
    );
    assert!(
        as_tool[0].starts_with("The first question again, called as the tool `errors-by-class`")
            && as_tool[0].contains("\nanswer (the same as question 1's):\n  [[\"timeout\" "),
        "{}",
        as_tool[0]
    );
    // The fan-out: one list and eight step fetches.
    assert_eq!(
        sections[4]
            .matches("observatory/get-trace-steps ok")
            .count(),
        8,
        "{}",
        sections[4]
    );
    // The write: the person was asked (and shown the request), the call ran once, a read
    // afterwards sees it, and the test bed's audit log recorded it with its idempotency key.
    let write = sections[5];
    assert!(
        write.contains("\napproval asked (an MCP client shows this to its user")
            && write.contains("  | A program wants to call observatory/annotate-trace (write).")
            && write.contains("  | Request: POST http://127.0.0.1:")
            && write.contains("  -> approved"),
        "{write}"
    );
    assert!(
        write.contains(":labels-now [\"needs-review\"]")
            && write.contains(":write {:mutation_state :applied :ok true}"),
        "{write}"
    );
    assert!(
        write.contains("observatory/annotate-trace ok ")
            && write.contains(" [write, approval approved, applied]"),
        "{write}"
    );
    assert_eq!(
        write
            .matches("Observatory audit log: POST /api/traces/")
            .count(),
        1,
        "{write}"
    );
    assert!(
        write.contains("-> 201 ok, annotation an_000001, token tok_demo, idempotency key "),
        "{write}"
    );
    // The generated token never appears, and its file is gone afterwards.
    assert!(!stdout.contains("obs_demo_") && !stderr.contains("obs_demo_"));
    let path = stdout
        .split("(token in ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .expect("the token file is named");
    assert!(
        !std::path::Path::new(path).exists(),
        "{path} was left behind"
    );
}

#[test]
fn the_readme_main_job_is_this_demo() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let main_job: Vec<&str> = readme
        .lines()
        .filter(|l| l.contains("# main job"))
        .collect();
    assert_eq!(main_job.len(), 1, "{main_job:?}");
    assert!(
        main_job[0].starts_with("cargo run -p generated-example -- demo "),
        "{}",
        main_job[0]
    );
}
