// The baseline the program drift cases change: a declared program that calls widgets v1 builds,
// with its typed arguments (a `ptc::Program`), and the plan the binary embeds holds it.
ptc::upstreams!("drift/programs/v1.json");

fn name<P: ptc::Program>(_: &P) -> &'static str {
    P::NAME
}

fn main() {
    let args = programs::WidgetSizeArgs::new("w1".to_string());
    assert_eq!(name(&args), "widget-size");
    let plan = plan().expect("the embedded plan reads");
    assert!(plan.program("widget-size").is_some());
}
