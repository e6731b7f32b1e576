//! Samples of text answers: a tool that answers with text (a git log, a diff) says nothing of
//! its format in its schema, so `doc` shows the start of the last text answer the same caller
//! got from it, and a program need not spend a call to learn the format.
//!
//! A sample is kept per caller, so `doc` never shows one caller's data to another. It is
//! redacted when it is kept, cut to a few lines, and the store is bounded (the oldest sample
//! goes first).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use crate::credentials::redact::Redactor;

/// Samples kept at most, over every caller and tool.
pub const MAX_SAMPLES: usize = 1024;
/// A sample's length at most, in characters (before the mark of a cut).
pub const SAMPLE_CHARS: usize = 240;
/// A sample's lines at most.
pub const SAMPLE_LINES: usize = 4;

/// How much of an answer is redacted before its sample is cut from it.
const REDACTED_BYTES: usize = 8192;

/// Whose answer from which tool: (caller subject, upstream, tool).
type Key = (String, String, String);

/// The last text answers' samples.
#[derive(Default)]
pub struct Samples {
    kept: Mutex<(HashMap<Key, String>, VecDeque<Key>)>,
}

impl Samples {
    /// Keeps the start of `text`, an answer `subject` got from `server/tool`, redacted.
    pub fn keep(&self, redactor: &Redactor, subject: &str, server: &str, tool: &str, text: &str) {
        // Only the start is redacted: wide enough that a secret reaching into the sample is
        // whole in it.
        let start = &text[..text.floor_char_boundary(REDACTED_BYTES)];
        let sample = cut(&redactor.redact(start));
        let key = (subject.to_string(), server.to_string(), tool.to_string());
        let mut guard = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let (map, order) = &mut *guard;
        if map.insert(key.clone(), sample).is_none() {
            order.push_back(key);
            if order.len() > MAX_SAMPLES
                && let Some(oldest) = order.pop_front()
            {
                map.remove(&oldest);
            }
        }
    }

    /// The sample of `server/tool`'s last text answer to `subject`.
    pub fn of(&self, subject: &str, server: &str, tool: &str) -> Option<String> {
        let key = (subject.to_string(), server.to_string(), tool.to_string());
        let guard = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        guard.0.get(&key).cloned()
    }
}

/// The first [`SAMPLE_LINES`] lines of `text`, at most [`SAMPLE_CHARS`] characters, with `…`
/// where it was cut.
fn cut(text: &str) -> String {
    let mut out: String = text
        .split_inclusive('\n')
        .take(SAMPLE_LINES)
        .collect::<String>()
        .chars()
        .take(SAMPLE_CHARS)
        .collect();
    let whole = out.len() == text.len();
    out.truncate(out.trim_end().len());
    if !whole {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_is_the_first_lines_up_to_its_length_marked_where_cut() {
        assert_eq!(cut("one\ntwo\n"), "one\ntwo");
        assert_eq!(cut("a\nb\nc\nd"), "a\nb\nc\nd");
        assert_eq!(cut("a\nb\nc\nd\ne"), "a\nb\nc\nd…");
        let long = "x".repeat(SAMPLE_CHARS);
        assert_eq!(cut(&long), long);
        let longer = "é".repeat(SAMPLE_CHARS + 1);
        assert_eq!(cut(&longer), format!("{}…", "é".repeat(SAMPLE_CHARS)));
    }

    /// A long answer is redacted over its start only, cut at a character: a secret in the
    /// sample is masked, and a character astride the window's end does not split.
    #[test]
    fn a_long_answer_is_redacted_over_its_start() {
        let redactor = Redactor::new();
        redactor.register("s3cr3t-token");
        let samples = Samples::default();
        let text = format!("s3cr3t-token {}", "é".repeat(REDACTED_BYTES));
        samples.keep(&redactor, "alice", "git", "log", &text);
        let kept = samples.of("alice", "git", "log").unwrap();
        assert!(
            kept.starts_with("[REDACTED] éé") && kept.ends_with('…'),
            "{kept}"
        );
    }

    #[test]
    fn samples_are_per_caller_redacted_and_bounded() {
        let redactor = Redactor::new();
        redactor.register("s3cr3t-token");
        let samples = Samples::default();
        samples.keep(&redactor, "alice", "git", "log", "commit s3cr3t-token\n");
        let kept = samples.of("alice", "git", "log").unwrap();
        assert!(
            !kept.contains("s3cr3t-token") && kept.starts_with("commit "),
            "{kept}"
        );
        assert_eq!(samples.of("bob", "git", "log"), None);
        assert_eq!(samples.of("alice", "git", "diff"), None);
        // The same key again replaces its sample without taking another place.
        samples.keep(&redactor, "alice", "git", "log", "newer");
        assert_eq!(samples.of("alice", "git", "log").as_deref(), Some("newer"));
        for n in 0..MAX_SAMPLES - 1 {
            samples.keep(&redactor, &format!("c{n}"), "git", "log", "x");
        }
        assert!(
            samples.of("alice", "git", "log").is_some(),
            "at the cap, kept"
        );
        samples.keep(&redactor, "one-more", "git", "log", "x");
        assert_eq!(samples.of("alice", "git", "log"), None, "the oldest went");
        assert!(samples.of("c0", "git", "log").is_some());
        assert!(samples.of("one-more", "git", "log").is_some());
    }
}
