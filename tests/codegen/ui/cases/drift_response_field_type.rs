// Widget.size became a string: code that reads it as a number breaks.
ptc::upstreams!("drift/size_string.json");

fn size(w: &widgets::GetWidgetResponse) -> i64 {
    w.size
}

fn main() {
    let _ = size;
}
