//! The catalog the generated code registers is the catalog the runtime builds from the same
//! config: compile-time and run-time loading cannot disagree.

use std::path::Path;

#[test]
fn generated_plan_equals_the_runtime_load_of_the_same_config() {
    let config =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/observatory/upstreams.json");
    let runtime = ptc_plan::load_with(&config, &ptc_core::documents::NetworkSource)
        .unwrap_or_else(|d| panic!("{d}"))
        .plan;
    let generated = generated_example::plan().expect("the embedded plan reads");
    assert!(!generated.upstreams.is_empty());
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
