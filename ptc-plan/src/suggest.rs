//! The config compiler's framing of a "did you mean": appended to a diagnostic's message in
//! parentheses, the name in backticks as the config writes it. Which name is suggested is
//! `ptc-names`'s one rule.

/// `" (did you mean `x`?)"`, or nothing.
pub fn did_you_mean<'a>(input: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    ptc_names::did_you_mean(input, candidates, |c| format!("`{c}`"))
        .map(|s| format!(" ({s})"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_the_suggestion_in_parentheses_or_nothing() {
        let fields = ["base_url", "schema_file", "include_operations"];
        assert_eq!(
            did_you_mean("base_ur", fields),
            " (did you mean `base_url`?)"
        );
        assert_eq!(did_you_mean("zzz", fields), "");
    }
}
