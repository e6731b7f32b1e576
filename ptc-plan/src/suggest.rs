//! "Did you mean ...?" suggestions for misspelt names.

/// The candidate closest to `input`, when it is close enough to be a plausible typo.
pub fn closest<'a>(input: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let input_lower = input.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| {
            (
                strsim::jaro_winkler(&input_lower, &c.to_ascii_lowercase()),
                c,
            )
        })
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// `" (did you mean `x`?)"`, or nothing.
pub fn did_you_mean<'a>(input: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    closest(input, candidates)
        .map(|c| format!(" (did you mean `{c}`?)"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        let fields = ["base_url", "schema_file", "include_operations"];
        assert_eq!(closest("base_ur", fields), Some("base_url"));
        assert_eq!(
            closest("include_operation", fields),
            Some("include_operations")
        );
        assert_eq!(closest("zzz", fields), None);
    }
}
