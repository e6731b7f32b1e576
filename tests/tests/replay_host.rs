//! Record and replay through the program host against the real Observatory test bed: a write a
//! person approved (or declined) replays with the recorded decision and nobody asked, and
//! nothing reaches the test bed while replaying; a result past the run file's cap is recorded
//! truncated and its replay names the call; a call in flight when the program ran out of time
//! replays to the same timeout.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use observatory_server::{Faults, TokenSpec};
use ptc_core::call::approval::{ApprovalRequest, Approver, Decision, DecisionFuture};
use ptc_core::call::upstreams::StartSettings;
use ptc_core::program::record_replay::{
    Answer, Recorder, Replayer, RunFile, Settings, Tape, answer_difference,
};
use ptc_core::program::run_report::ApprovalOutcome;
use ptc_core::{Budgets, ProgramHost, StartOptions, WriteGate};
use ptc_lisp::{Interpreter, Limits};

const TOKEN: &str = "obs_replay_host_8a2c4e6f1b3d";

/// The test bed (a token that may annotate, writes open) and the runtime its tests block on.
struct Bed {
    rt: tokio::runtime::Runtime,
    bed: support::Bed,
}

impl std::ops::Deref for Bed {
    type Target = support::Bed;

    fn deref(&self) -> &support::Bed {
        &self.bed
    }
}

fn bed(name: &str) -> Bed {
    let rt = support::runtime(2);
    let mut token = TokenSpec::full_access("tok_replay", TOKEN);
    token.scopes.push("traces:write".into());
    let options = StartOptions {
        writes: WriteGate::Open,
        ..StartOptions::default()
    };
    let bed = rt.block_on(support::Bed::start(
        &format!("replay-{name}"),
        token,
        "",
        options,
    ));
    Bed { rt, bed }
}

/// A person who answers `answer` and counts how often they were asked.
struct Person {
    answer: Decision,
    asked: AtomicUsize,
}

impl Person {
    fn answering(answer: Decision) -> Arc<Person> {
        Arc::new(Person {
            answer,
            asked: AtomicUsize::new(0),
        })
    }
}

impl Approver for Person {
    fn approve(&self, _: ApprovalRequest, _: Duration) -> DecisionFuture {
        self.asked.fetch_add(1, Ordering::SeqCst);
        Box::pin(std::future::ready(self.answer.clone()))
    }
}

/// The answer and the printed output of `src` run (as `eval` runs it) with `tape` on.
fn run(bed: &Bed, src: &str, tape: Tape, person: Arc<Person>, limits: Limits) -> (Answer, String) {
    let host = Arc::new(ProgramHost::with_approver(
        bed.up.clone(),
        bed.rt.handle().clone(),
        Budgets::default(),
        person,
    ));
    host.set_tape(tape);
    let mut interp = Interpreter::with_host(limits, host);
    let result = interp.eval_str(src);
    (Answer::of(&result, bed.up.redactor()), interp.take_output())
}

/// Records `src` and reads the run file back, as `replay` reads it.
fn record(bed: &Bed, src: &str, person: Arc<Person>, limits: Limits) -> RunFile {
    let recorder = Recorder::new(Settings::new(&limits, StartSettings::default()));
    let (answer, prints) = run(bed, src, Tape::Record(recorder.clone()), person, limits);
    let file = recorder.run_file(&bed.up, src, None, &prints, answer);
    let bytes = file.to_json().unwrap();
    assert!(!String::from_utf8_lossy(&bytes).contains(TOKEN));
    RunFile::parse(&bytes, "run.json").unwrap()
}

/// Replays `file` (the test bed still up: nothing may reach it); the replayer and what the
/// program answered.
fn replay(bed: &Bed, file: &RunFile, person: Arc<Person>) -> (Replayer, Answer, String) {
    let before = bed.server().audit_records().len();
    let replayer = Replayer::new(&file.calls);
    let (answer, prints) = run(
        bed,
        &file.program,
        Tape::Replay(replayer.clone()),
        person,
        file.settings.limits(),
    );
    assert_eq!(
        bed.server().audit_records().len(),
        before,
        "the replay reached the test bed"
    );
    (replayer, answer, prints)
}

fn annotate(label: &str) -> String {
    format!(
        "(let [id (-> (tool/call 'observatory/list-traces {{:org-id \"org_acme\" :limit 1}}) :value first :id)
               r (tool/call 'observatory/annotate-trace
                            {{:id id :org-id \"org_acme\" :body {{:label \"{label}\" :note \"n\"}}}})]
           (println \"wrote\" (:ok r))
           [(:ok r) (:reason r) (:mutation_state r) (-> r :value :label)])"
    )
}

#[test]
fn approvals_replay_as_recorded_without_asking_anyone_and_nothing_is_sent() {
    let b = bed("approved");
    let yes = Person::answering(Decision::Approved);
    let file = record(&b, &annotate("replayed"), yes.clone(), Limits::default());
    assert_eq!(yes.asked.load(Ordering::SeqCst), 1);
    assert_eq!(file.calls.len(), 2);
    assert_eq!(file.calls[1].tool, "annotate-trace");
    assert_eq!(file.calls[1].approval, Some(ApprovalOutcome::Approved));
    assert!(matches!(
        &file.answer,
        Answer::Value { text, .. } if text == "[true nil :applied \"replayed\"]"
    ));
    let posts = || {
        b.server()
            .audit_records()
            .iter()
            .filter(|r| r.method == "POST")
            .count()
    };
    assert_eq!(posts(), 1);
    // The replay's person would say no: never asked, the recording's yes stands.
    let no = Person::answering(Decision::Declined("no".into()));
    let (replayer, answer, prints) = replay(&b, &file, no.clone());
    assert_eq!(no.asked.load(Ordering::SeqCst), 0);
    assert_eq!((replayer.divergence(), replayer.unused()), (None, None));
    assert_eq!(answer_difference(&file, &answer, &prints), None);
    assert_eq!(prints, "wrote true\n");
    assert_eq!(posts(), 1);

    // A person who said no: the refusal is recorded, and replayed.
    let file = record(&b, &annotate("declined"), no.clone(), Limits::default());
    assert_eq!(no.asked.load(Ordering::SeqCst), 1);
    assert_eq!(file.calls[1].approval, Some(ApprovalOutcome::Declined));
    let (replayer, answer, prints) = replay(&b, &file, yes.clone());
    assert_eq!(
        yes.asked.load(Ordering::SeqCst),
        1,
        "asked again in the replay"
    );
    assert_eq!((replayer.divergence(), replayer.unused()), (None, None));
    assert_eq!(answer_difference(&file, &answer, &prints), None);
    assert!(
        matches!(
            &answer,
            Answer::Value { text, .. } if text == "[false :approval_declined nil nil]"
        ),
        "{answer:?}"
    );
}

#[test]
fn a_result_past_the_cap_is_recorded_truncated_and_its_replay_names_the_call() {
    let b = bed("cap");
    // Padded with whitespace past 1 MiB (still valid JSON, under the tool's own cap).
    b.server().set_faults(Faults {
        oversize_bytes: Some((1 << 20) + 4096),
        ..Faults::default()
    });
    let src = "(count (:errors (:value (tool/call 'observatory/list-errors {:org-id \"org_acme\" :limit 3}))))";
    let nobody = Person::answering(Decision::Approved);
    let file = record(&b, src, nobody.clone(), Limits::default());
    assert!(matches!(&file.answer, Answer::Value { text, .. } if text == "3"));
    let ptc_core::program::record_replay::Outcome::Truncated { bytes, start } =
        &file.calls[0].outcome
    else {
        panic!("{:?}", file.calls[0].outcome);
    };
    assert!(*bytes > 1 << 20, "{bytes}");
    assert_eq!(start.len(), 1 << 20);
    let (replayer, answer, _) = replay(&b, &file, nobody);
    assert_eq!(
        replayer.divergence(),
        Some(format!(
            "call 1 (observatory/list-errors {{\"org_id\":\"org_acme\",\"limit\":3}}, recorded \
             as call 1) cannot be replayed: its result was {bytes} bytes, more than the 1048576 \
             a run file keeps, so the recording has only its start"
        ))
    );
    assert!(matches!(answer, Answer::Error { .. }));
}

#[test]
fn a_call_in_flight_at_the_deadline_replays_to_the_same_timeout() {
    let b = bed("deadline");
    // The answer comes long after the program's 300 ms.
    b.server().set_faults(Faults {
        latency_ms: 30_000,
        ..Faults::default()
    });
    let limits = Limits {
        timeout: Some(Duration::from_millis(300)),
        ..Limits::default()
    };
    let src = "(tool/call 'observatory/list-errors {:org-id \"org_acme\" :limit 3})";
    let nobody = Person::answering(Decision::Approved);
    let file = record(&b, src, nobody.clone(), limits);
    assert_eq!(
        file.calls[0].outcome,
        ptc_core::program::record_replay::Outcome::Unfinished
    );
    let Answer::Error { reason, message } = &file.answer else {
        panic!("{:?}", file.answer);
    };
    assert_eq!(*reason, ptc_lisp::Reason::Timeout);
    assert!(
        message.contains("program exceeded its 300 ms deadline"),
        "{message}"
    );
    b.server().set_faults(Faults::default());
    let (replayer, answer, prints) = replay(&b, &file, nobody);
    assert_eq!((replayer.divergence(), replayer.unused()), (None, None));
    assert_eq!(answer_difference(&file, &answer, &prints), None);
}
