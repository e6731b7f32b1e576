//! The typed example end to end: generated structs, the ptc-core executor, the Observatory test
//! bed over loopback HTTP.

use generated_example::{first_failed_trace, observatory, plan_at};
use observatory_server::{ServerConfig, TokenSource};

/// The Observatory test bed, and the upstreams of the compiled plan pointed at it.
async fn bed() -> (ptc::core::Upstreams, observatory_server::ServerHandle) {
    let tokens = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/observatory/tokens.json"
    );
    let config = ServerConfig::new(TokenSource::File(tokens.into()));
    let (addr, server) = observatory_server::start(config)
        .await
        .expect("the test bed starts");
    let plan = plan_at(&format!("http://{addr}")).expect("the embedded plan reads");
    let upstreams = ptc::core::Upstreams::start(
        plan,
        ptc::plan::Secrets::default(),
        ptc::core::StartOptions::default(),
    )
    .await
    .expect("the upstreams start");
    (upstreams, server)
}

#[tokio::test]
async fn lists_failed_traces_and_fetches_steps_through_generated_types() {
    let (upstreams, server) = bed().await;
    let found = first_failed_trace(&upstreams, "org_acme").await;
    server.shutdown().await;
    let found = found
        .expect("the typed calls succeed")
        .expect("org_acme has failed traces");
    assert_eq!(found.trace.status, observatory::TraceStatus::Error);
    assert_eq!(found.trace.org_id, "org_acme");
    assert_eq!(found.steps.trace_id, found.trace.id);
    assert_eq!(found.steps.mode, observatory::Mode::Summary);
    assert!(!found.steps.steps.is_empty());
    assert_eq!(found.steps.steps.len() as i64, found.steps.total_steps);
}

/// `upstreams.pages` streams a paged operation's pages as its typed response (the traces its
/// result path selects), following `next_cursor` to the last page, or stopping at `max_pages`.
#[tokio::test]
async fn streams_the_pages_of_a_paged_operation() {
    use futures_util::StreamExt;
    let (upstreams, server) = bed().await;
    let all = observatory::ListTracesArgs {
        status: Some(observatory::TraceStatus::Timeout),
        limit: Some(500),
        ..observatory::ListTracesArgs::new("org_acme".into())
    };
    let every = upstreams.run(all).await.expect("one page of everything");
    let paged = observatory::ListTracesArgs {
        status: Some(observatory::TraceStatus::Timeout),
        limit: Some(7),
        ..observatory::ListTracesArgs::new("org_acme".into())
    };
    let pages: Vec<_> = upstreams.pages(&paged, 1_000).collect().await;
    let first_two: Vec<_> = upstreams.pages(&paged, 2).collect().await;
    server.shutdown().await;
    let pages: Vec<Vec<observatory::TraceSummary>> = pages
        .into_iter()
        .collect::<Result<_, _>>()
        .expect("every page succeeds");
    assert!(every.len() > 7 && every.len() < 500, "{}", every.len());
    assert_eq!(pages.len(), every.len().div_ceil(7));
    assert!(pages.iter().all(|p| p.len() <= 7 && !p.is_empty()));
    let ids: Vec<&str> = pages.iter().flatten().map(|t| t.id.as_str()).collect();
    let expected: Vec<&str> = every.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, expected, "the pages hold every trace once, in order");
    assert_eq!(first_two.len(), 2);
}

/// A declared program run in-process through its generated types answers what the same program
/// answers as its tool: `run_declared` checks the arguments, runs the program, decodes its value.
#[test]
fn a_declared_program_runs_in_process_with_its_generated_types() {
    use generated_example::programs;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (upstreams, server) = rt.block_on(bed());
    let upstreams = std::sync::Arc::new(upstreams);
    let run = |args: &programs::FailedStepsArgs| {
        ptc::run_declared(
            upstreams.clone(),
            rt.handle().clone(),
            args,
            ptc::lisp::Limits::default(),
            ptc::Budgets::default(),
        )
    };
    let failed =
        run(&programs::FailedStepsArgs::new("org_acme".into(), 3)).expect("the program answers");
    assert_eq!(failed.len(), 3);
    assert!(
        failed.iter().all(|t| t.trace.starts_with("tr_")),
        "{failed:?}"
    );
    // The arguments are checked against the parameters before anything runs.
    let refused = run(&programs::FailedStepsArgs::new("org_acme".into(), 0)).unwrap_err();
    assert_eq!(
        refused.to_string(),
        "failed-steps: invalid arguments: :limit must be at least 1, got 0"
    );
    assert!(
        matches!(&refused, ptc::ProgramError::InvalidArguments(m) if m == "failed-steps: invalid arguments: :limit must be at least 1, got 0"),
        "{refused}"
    );
    let classes = ptc::run_declared(
        upstreams.clone(),
        rt.handle().clone(),
        &programs::ErrorsByClassArgs::new("org_acme".into()),
        ptc::lisp::Limits::default(),
        ptc::Budgets::default(),
    )
    .expect("the program answers");
    assert!(
        !classes.is_empty() && classes.iter().all(|c| c.len() == 2),
        "{classes:?}"
    );
    rt.block_on(server.shutdown());
}
