//! "Did you mean ...?" for misspelt server, tool and argument names.

/// The candidate closest to `input`, when it is close enough to be a plausible typo.
pub fn did_you_mean<S: AsRef<str>>(input: &str, candidates: &[S]) -> Option<String> {
    let input = input.to_ascii_lowercase();
    candidates
        .iter()
        .map(|c| {
            let c = c.as_ref();
            let lower = c.to_ascii_lowercase();
            let mut score = strsim::jaro_winkler(&input, &lower);
            // `traces` for `list-traces`: a whole word of the name is a good hint too.
            if input.len() >= 4 && lower.contains(&input) {
                score = score.max(0.85);
            }
            // Short names: one typo is still a typo.
            if input.len() >= 2 && strsim::levenshtein(&input, &lower) <= 1 {
                score = score.max(0.8);
            }
            (score, c)
        })
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        let tools = ["list-traces", "get-trace", "costs"];
        assert_eq!(
            did_you_mean("list-trace", &tools).as_deref(),
            Some("list-traces")
        );
        assert_eq!(did_you_mean("cost", &tools).as_deref(), Some("costs"));
        assert_eq!(did_you_mean("zzz", &tools), None);
        assert_eq!(did_you_mean("fz", &["fx", "ab"]).as_deref(), Some("fx"));
    }

    #[test]
    fn a_whole_word_of_four_letters_or_more_is_a_hint() {
        let tools = ["list-traces", "get-span"];
        // Too far apart by spelling alone; the word inside the name is the hint.
        assert!(strsim::jaro_winkler("traces", "list-traces") < 0.8);
        assert_eq!(
            did_you_mean("traces", &tools).as_deref(),
            Some("list-traces")
        );
        assert_eq!(did_you_mean("span", &tools).as_deref(), Some("get-span"));
        // Three letters inside a name, or four that are not in one, are no hint.
        assert!(strsim::jaro_winkler("ace", "list-traces") < 0.8);
        assert_eq!(did_you_mean("ace", &tools), None);
        assert_eq!(did_you_mean("zzzz", &tools), None);
    }
}
