// widgets gained a required query parameter `region`: code that builds the args breaks.
ptc::upstreams!("drift/required_param.json");

fn main() {
    let args = widgets::GetWidgetArgs {
        id: "w1".to_string(),
        org: "acme".to_string(),
    };
    let _ = args;
}
