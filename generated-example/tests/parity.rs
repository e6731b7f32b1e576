//! The catalog the generated code registers is the catalog the runtime builds from the same
//! config: compile-time and run-time loading cannot disagree.

use std::path::Path;

#[test]
fn generated_plan_equals_the_runtime_load_of_the_same_config() {
    let config =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/observatory/upstreams.json");
    let runtime = ptc::plan::load_with(&config, &ptc::core::wire::documents::NetworkSource)
        .unwrap_or_else(|d| panic!("{d}"))
        .plan;
    let generated = generated_example::plan().expect("the embedded plan reads");
    assert!(!generated.upstreams.is_empty());
    assert!(
        !generated.programs.is_empty(),
        "the programs are compiled both ways too"
    );
    assert_eq!(generated, runtime);
}

#[test]
fn generated_names_match_the_catalog() {
    let plan = generated_example::plan().expect("the embedded plan reads");
    let upstream = plan
        .upstream(generated_example::observatory::UPSTREAM)
        .expect("the module names its upstream");
    assert_eq!(upstream.name, "observatory");
}

#[tokio::test]
async fn the_runtime_catalog_is_the_same_from_either_plan() {
    let config =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/observatory/upstreams.json");
    let loaded = ptc::plan::load_with(&config, &ptc::core::wire::documents::NetworkSource)
        .unwrap_or_else(|d| panic!("{d}"));
    let generated = generated_example::plan().expect("the embedded plan reads");
    let start =
        |plan| ptc::core::Upstreams::start(plan, ptc::plan::Secrets::default(), Default::default());
    let from_runtime = start(loaded.plan).await.expect("starts");
    let from_generated = start(generated).await.expect("starts");
    let tools = from_generated.catalog().servers()[0]
        .tools()
        .expect("OpenAPI tools are listed at start")
        .len();
    assert_eq!(tools, 8);
    assert_eq!(
        format!("{:?}", from_generated.catalog()),
        format!("{:?}", from_runtime.catalog())
    );
}
