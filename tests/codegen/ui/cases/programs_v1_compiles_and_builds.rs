// The baseline the program drift cases change: a declared program that calls widgets v1 builds,
// and the plan the binary embeds holds it.
ptc::upstreams!("drift/programs/v1.json");

fn main() {
    let plan = plan().expect("the embedded plan reads");
    assert!(plan.program("widget-size").is_some());
}
