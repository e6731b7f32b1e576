//! The one "did you mean" rule of ptc, shared by the language (`ptc-lisp`: unknown symbols and
//! namespaces), the config compiler (`ptc-plan`: unknown fields, transports, operationIds) and
//! the runtime (`ptc-core`: unknown upstreams, tools and arguments), which must agree on which
//! name a typo meant.
//!
//! The rule: names are compared ignoring ASCII case, by Jaro-Winkler similarity, with two hints
//! spelling alone misses: one edit away is a typo even in a short name (`fz` for `fx`), and a
//! name of four letters or more that begins a word of a candidate means it (`traces` for
//! `list-traces`, `span` for `getSpan`). The best candidate at or above [`THRESHOLD`] is
//! suggested; of equally good ones, the first given. The message is always
//! `did you mean X?`, `X` written as the caller's language writes the name.
//!
//! ```
//! let fields = ["base_url", "schema_file", "include_operations"];
//! assert_eq!(ptc_names::closest("base_ur", fields), Some("base_url"));
//! assert_eq!(
//!     ptc_names::did_you_mean("schema-fil", fields, |c| format!("`{c}`")).as_deref(),
//!     Some("did you mean `schema_file`?")
//! );
//! assert_eq!(ptc_names::closest("zzz", fields), None);
//! ```

/// The least score a candidate needs to be suggested: below it, a suggestion is more often a
/// distraction than the name meant.
pub const THRESHOLD: f64 = 0.8;

/// The score of a candidate one edit away from the input: exactly enough, so any candidate
/// closer by spelling still wins over it.
const ONE_EDIT: f64 = THRESHOLD;

/// The score of a candidate with a word the input begins: above a bare typo, since a whole word
/// written out is a stronger sign than a near spelling.
const BEGINS_A_WORD: f64 = 0.85;

/// Inputs shorter than this begin too many words (`id`, `get`) to say which one was meant.
const MIN_WORD_HINT: usize = 4;

/// The candidate most likely meant by `input`, if any is close enough (see the crate docs for the
/// rule).
pub fn closest<'a>(input: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    best(
        candidates
            .into_iter()
            .map(|candidate| (score(input, candidate), candidate)),
    )
}

/// `did you mean X?` for the candidate most likely meant by `input`, `X` being `written(name)`:
/// the caller decides only how its language writes a name (`` `base_url` ``, `:org-id`,
/// `server/tool`); the choice and the wording are this crate's.
pub fn did_you_mean<'a>(
    input: &str,
    candidates: impl IntoIterator<Item = &'a str>,
    written: impl FnOnce(&str) -> String,
) -> Option<String> {
    closest(input, candidates).map(|name| format!("did you mean {}?", written(name)))
}

/// The highest-scoring candidate at or above the threshold; the first of equals.
fn best<'a>(scored: impl Iterator<Item = (f64, &'a str)>) -> Option<&'a str> {
    let mut best: Option<(f64, &str)> = None;
    for (score, candidate) in scored {
        if score >= THRESHOLD && best.is_none_or(|(b, _)| score > b) {
            best = Some((score, candidate));
        }
    }
    best.map(|(_, candidate)| candidate)
}

/// How likely `candidate` is what `input` meant, in `0.0..=1.0`.
fn score(input: &str, candidate: &str) -> f64 {
    let input = input.to_ascii_lowercase();
    let lower = candidate.to_ascii_lowercase();
    let mut score = strsim::jaro_winkler(&input, &lower);
    let len = input.chars().count();
    if len >= 2 && strsim::levenshtein(&input, &lower) <= 1 {
        score = score.max(ONE_EDIT);
    }
    if len >= MIN_WORD_HINT
        && word_starts(candidate).any(|at| lower[at..].starts_with(input.as_str()))
    {
        score = score.max(BEGINS_A_WORD);
    }
    score
}

/// Byte offsets where a word of `name` begins: its start, after a character that is not a letter
/// or digit (`list-traces`, `org_id`, `repl/dir`), and at an upper-case letter after a lower-case
/// one (`getSpan`).
fn word_starts(name: &str) -> impl Iterator<Item = usize> + '_ {
    let mut previous: Option<char> = None;
    name.char_indices().filter_map(move |(at, c)| {
        let starts = match previous {
            None => true,
            Some(p) => !p.is_alphanumeric() || (p.is_lowercase() && c.is_uppercase()),
        };
        previous = Some(c);
        (starts && c.is_alphanumeric()).then_some(at)
    })
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
        assert_eq!(closest("", fields), None);
    }

    #[test]
    fn no_candidates_no_suggestion() {
        assert_eq!(closest("base_url", []), None);
        assert_eq!(did_you_mean("base_url", [], |c| c.to_string()), None);
        // An empty name is no candidate for anything.
        assert_eq!(closest("ab", [""]), None);
    }

    /// A candidate scored exactly at the threshold is suggested; the next score below it is not.
    #[test]
    fn the_threshold_is_inclusive() {
        let below = THRESHOLD.next_down();
        assert_eq!(best([(THRESHOLD, "at")].into_iter()), Some("at"));
        assert_eq!(best([(below, "below")].into_iter()), None);
        assert_eq!(
            best([(below, "below"), (THRESHOLD, "at")].into_iter()),
            Some("at")
        );
    }

    /// The same boundary with names: one edit away scores exactly the threshold (and is taken),
    /// two edits away in a name too short to be similar otherwise falls below it.
    #[test]
    fn one_edit_is_at_the_threshold_and_two_are_past_it() {
        assert!(strsim::jaro_winkler("fz", "fx") < THRESHOLD);
        assert_eq!(score("fz", "fx"), THRESHOLD);
        assert_eq!(closest("fz", ["fx", "ab"]), Some("fx"));
        assert!(score("fzz", "fxx") < THRESHOLD);
        assert_eq!(closest("fzz", ["fxx"]), None);
        // One letter is too little to call anything a typo of it.
        assert_eq!(closest("a", ["b"]), None);
    }

    /// Equally good candidates: the first given wins, whatever comes after it.
    #[test]
    fn ties_go_to_the_first_candidate() {
        assert_eq!(score("cat", "car"), score("cat", "cab"));
        assert_eq!(closest("cat", ["car", "cab"]), Some("car"));
        assert_eq!(closest("cat", ["cab", "car"]), Some("cab"));
        // A better score later still wins.
        assert_eq!(closest("cat", ["cab", "cats"]), Some("cats"));
    }

    #[test]
    fn case_is_ignored_and_the_candidate_kept_as_written() {
        assert_eq!(closest("BASE_URL", ["base_url"]), Some("base_url"));
        assert_eq!(closest("listtraces", ["ListTraces"]), Some("ListTraces"));
    }

    /// A word of four letters or more that begins a word of a name is a hint, where spelling
    /// alone would not reach the threshold; three letters, or letters in the middle of a word,
    /// are not.
    #[test]
    fn a_word_of_four_letters_or_more_is_a_hint() {
        let tools = ["list-traces", "get-span", "getSpanTree"];
        assert!(strsim::jaro_winkler("traces", "list-traces") < THRESHOLD);
        assert_eq!(closest("traces", tools), Some("list-traces"));
        assert_eq!(closest("trace", tools), Some("list-traces"));
        assert_eq!(closest("span", tools), Some("get-span"));
        assert!(strsim::jaro_winkler("tree", "getspantree") < THRESHOLD);
        assert_eq!(closest("tree", tools), Some("getSpanTree"));
        assert_eq!(closest("ace", tools), None);
        assert!(strsim::jaro_winkler("races", "list-traces") < THRESHOLD);
        assert_eq!(closest("races", tools), None);
        assert_eq!(closest("zzzz", tools), None);
    }

    #[test]
    fn word_starts_follow_separators_and_case() {
        let starts = |name: &str| word_starts(name).collect::<Vec<_>>();
        assert_eq!(starts("list-traces"), [0, 5]);
        assert_eq!(starts("repl/dir"), [0, 5]);
        assert_eq!(starts("getSpanTree"), [0, 3, 7]);
        assert_eq!(starts("HTTPServer"), [0]);
        assert_eq!(starts("-x"), [1]);
    }

    #[test]
    fn the_wording_is_one_and_the_caller_writes_the_name() {
        assert_eq!(
            did_you_mean("limt", ["limit"], |c| format!(":{c}")).as_deref(),
            Some("did you mean :limit?")
        );
        assert_eq!(did_you_mean("zzz", ["limit"], |c| format!(":{c}")), None);
    }
}
