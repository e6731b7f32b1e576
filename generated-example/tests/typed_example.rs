//! The typed example end to end: generated structs, the ptc-core executor, the Observatory test
//! bed over loopback HTTP.

use generated_example::{first_failed_trace, observatory, plan_at};
use observatory_server::{ServerConfig, TokenSource};

#[tokio::test]
async fn lists_failed_traces_and_fetches_steps_through_generated_types() {
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
