// The baseline the drift cases change: this code compiles against widgets v1.
ptc::upstreams!("drift/v1.json");

fn size(w: &widgets::GetWidgetResponse) -> i64 {
    w.size
}

fn main() {
    let args = widgets::GetWidgetArgs {
        id: "w1".to_string(),
        org: "acme".to_string(),
    };
    let _ = (args, size);
}
