// Widget.size became a string: code that reads it as a number breaks.
ptc_macros::ptc_upstreams!("tests/codegen/tests/ui/drift/size_string.json");

fn size(w: &widgets::GetWidgetResponse) -> i64 {
    w.size
}

fn main() {
    let _ = size;
}
