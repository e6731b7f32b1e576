//! Rust identifiers from wire names, and the registry that keeps a module's type names unique.

use std::collections::BTreeSet;

use heck::{ToSnakeCase, ToUpperCamelCase};
use proc_macro2::{Ident, Span};

/// Words that cannot be identifiers even as raw identifiers (`r#self` is not allowed).
const NOT_RAW: [&str; 5] = ["self", "Self", "super", "crate", "_"];

/// Every strict and reserved keyword of Rust 2024.
const KEYWORDS: [&str; 51] = [
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for",
    "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return",
    "self", "Self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use", "where",
    "while", "async", "await", "dyn", "abstract", "become", "box", "do", "final", "macro",
    "override", "priv", "typeof", "unsized", "virtual", "yield", "try",
];

/// Makes `raw` (already cased) a valid identifier: non-identifier characters dropped, a leading
/// digit prefixed, an empty result replaced by `fallback`.
fn clean(raw: &str, fallback: &str, digit_prefix: &str) -> String {
    let mut out: String = raw
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    if out.is_empty() || out.chars().all(|c| c == '_') {
        out = fallback.to_string();
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert_str(0, digit_prefix);
    }
    out
}

/// The identifier text for a wire name used as a field, function or module name (snake_case).
pub fn snake(wire: &str) -> String {
    // `+1` and `-1` (GitHub reactions) differ only in their sign: keep it as a word.
    let spelled = wire.replace('+', " plus ").replace('-', " ");
    let spelled = if wire.starts_with('-') {
        format!("minus {spelled}")
    } else {
        spelled
    };
    clean(&spelled.to_snake_case(), "field", "_")
}

/// The identifier text for a type or variant name (UpperCamelCase).
pub fn pascal(wire: &str) -> String {
    let spelled = match wire.strip_prefix('-') {
        Some(rest) => format!("minus {rest}"),
        None => wire.replace('+', " plus "),
    };
    clean(&spelled.to_upper_camel_case(), "Empty", "V")
}

/// An identifier for `text`, raw (`r#type`) when it is a keyword, suffixed when it cannot be raw.
pub fn ident(text: &str) -> Ident {
    if NOT_RAW.contains(&text) {
        return Ident::new(&format!("{text}_"), Span::call_site());
    }
    if KEYWORDS.contains(&text) {
        return Ident::new_raw(text, Span::call_site());
    }
    Ident::new(text, Span::call_site())
}

/// The names already used in one scope (a module's types, a struct's fields, an enum's variants).
#[derive(Default)]
pub struct Names {
    used: BTreeSet<String>,
}

impl Names {
    /// Claims the first unused candidate; when all are taken, the first one with a number added.
    pub fn claim<S: AsRef<str>>(&mut self, candidates: &[S]) -> String {
        for c in candidates {
            if self.used.insert(c.as_ref().to_string()) {
                return c.as_ref().to_string();
            }
        }
        let base = candidates.first().map_or("Type", |c| c.as_ref());
        let mut n = 2usize;
        loop {
            let name = format!("{base}{n}");
            if self.used.insert(name.clone()) {
                return name;
            }
            n += 1;
        }
    }

    /// Marks `name` as used without checking.
    pub fn reserve(&mut self, name: &str) {
        self.used.insert(name.to_string());
    }
}

/// The name serde (and ptc's `Encode`/`Decode`) give a field without a rename: its identifier,
/// without the `r#` of a raw one (a suffixed one, `self_`, keeps its suffix).
pub fn serde_field_name(id: &Ident) -> String {
    let text = id.to_string();
    match text.strip_prefix("r#") {
        Some(raw) => raw.to_string(),
        None => text,
    }
}

/// The `rename_all = "snake_case"` spelling serde gives a variant identifier.
pub fn serde_snake(variant: &str) -> String {
    let mut out = String::with_capacity(variant.len() + 4);
    for (i, c) in variant.char_indices() {
        if c.is_uppercase() {
            if i != 0 {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_become_identifiers() {
        assert_eq!(snake("orgId"), "org_id");
        assert_eq!(snake("X-Request-Id"), "x_request_id");
        assert_eq!(snake("+1"), "plus_1");
        assert_eq!(snake("-1"), "minus_1");
        assert_eq!(snake("2fa"), "_2fa");
        assert_eq!(snake("$"), "field");
        assert_eq!(pascal("llm_call"), "LlmCall");
        assert_eq!(pascal(""), "Empty");
        assert_eq!(pascal("3d"), "V3d");
        assert_eq!(pascal("-1"), "Minus1");
        assert_eq!(pascal("+1"), "Plus1");
    }

    #[test]
    fn keywords_are_raw_or_suffixed() {
        assert_eq!(ident("type").to_string(), "r#type");
        assert_eq!(ident("self").to_string(), "self_");
        assert_eq!(ident("org_id").to_string(), "org_id");
    }

    #[test]
    fn claimed_names_stay_unique() {
        let mut names = Names::default();
        assert_eq!(names.claim(&["Status"]), "Status");
        assert_eq!(names.claim(&["Status", "TraceStatus"]), "TraceStatus");
        assert_eq!(names.claim(&["Status", "TraceStatus"]), "Status2");
        assert_eq!(names.claim(&["Status"]), "Status3");
    }

    #[test]
    fn serde_snake_matches_serde_rename_all() {
        assert_eq!(serde_snake("LlmCall"), "llm_call");
        assert_eq!(serde_snake("Ok"), "ok");
    }
}
