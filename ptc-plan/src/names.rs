//! Lisp-facing tool names: normalisation to kebab-case.

use heck::ToKebabCase;

/// Normalises an operationId (or an override / `x-ptc-name`) to the exposed kebab-case name:
/// `list_traces` and `listTraces` both become `list-traces`. Separators such as `.` and `/`
/// become `-`, so a name can never smuggle a namespace separator into a symbol.
pub fn normalize(raw: &str) -> String {
    raw.trim().to_kebab_case()
}

/// Why `name` cannot be a PTC-Lisp symbol name, if it cannot.
pub fn invalid_reason(name: &str) -> Option<&'static str> {
    let first = name.chars().next()?;
    if !first.is_ascii_lowercase() {
        return Some("it must start with a letter");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        return Some("it may only contain letters, digits and `-`");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_camel_and_pascal_become_kebab() {
        assert_eq!(normalize("list_traces"), "list-traces");
        assert_eq!(normalize("listTraces"), "list-traces");
        assert_eq!(normalize("MyWidgets"), "my-widgets");
        assert_eq!(normalize("getHTTPStatus"), "get-http-status");
        assert_eq!(normalize(" get_trace "), "get-trace");
    }

    #[test]
    fn separators_cannot_create_namespaces() {
        assert_eq!(normalize("repos/get-content"), "repos-get-content");
        assert_eq!(normalize("v1.list"), "v1-list");
    }

    #[test]
    fn symbol_validity() {
        assert_eq!(invalid_reason("list-traces"), None);
        assert!(invalid_reason("2fa-verify").is_some());
        assert!(invalid_reason("").is_none()); // empty is reported separately by the caller
    }
}
