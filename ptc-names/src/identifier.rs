//! The identifier rule: what an upstream may be called, since its name becomes the `name/` a
//! program writes before each of its tools (`observatory/list-traces`). Credential binding names
//! follow the same rule, so a config has one kind of name.
//!
//! ```
//! assert!(ptc_names::is_identifier("my-api_2"));
//! assert!(!ptc_names::is_identifier("2api"));
//! ```

/// The rule in words, for the hint of an error that refuses a name.
pub const IDENTIFIER_RULE: &str = "a letter followed by letters, digits, `-` or `_`";

/// Whether `name` follows [`IDENTIFIER_RULE`]: an ASCII letter, then ASCII letters, digits, `-`
/// and `_`. ASCII only, so a name is written one way (no look-alike letters, no normalisation
/// forms); no `.` or `/`, so `name/tool` splits at one place.
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_letter_then_letters_digits_dashes_and_underscores() {
        for name in ["a", "Z", "api", "my-api_2", "a-", "a_", "a9", "A-B_c"] {
            assert!(is_identifier(name), "{name}");
        }
    }

    /// Each boundary of the rule: nothing at all, the first character (digit, `-`, `_`, a
    /// letter outside ASCII) and a later one (a character outside the four kinds).
    #[test]
    fn refuses_each_boundary() {
        for name in [
            "", "1api", "-api", "_api", "äpi", "é", "a.b", "a/b", "a b", "ab!", "aé", "a\u{0}",
        ] {
            assert!(!is_identifier(name), "{name:?}");
        }
    }
}
