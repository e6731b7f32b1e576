//! Samples of text answers: a tool that answers with text (a git log, a diff) says nothing of
//! its format in its schema, so `doc` shows the start of the last text answer the same caller
//! got from it, and a program need not spend a call to learn the format.
//!
//! A sample is kept per caller, so `doc` never shows one caller's data to another. It is cut
//! from the text the program got, which its transport has already redacted (and `doc`'s output
//! passes the redactor again), to a few lines; the store is bounded (the oldest sample goes
//! first).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// Samples kept at most, over every caller and tool.
pub const MAX_SAMPLES: usize = 1024;
/// A sample's length at most, in characters (before the mark of a cut).
pub const SAMPLE_CHARS: usize = 240;
/// A sample's lines at most.
pub const SAMPLE_LINES: usize = 4;

/// Whose answer from which tool: (caller subject, upstream, tool).
type Key = (String, String, String);

/// The last text answers' samples.
#[derive(Default)]
pub struct Samples {
    kept: Mutex<(HashMap<Key, String>, VecDeque<Key>)>,
}

impl Samples {
    /// Keeps the start of `text`, a (redacted) answer `subject` got from `server/tool`.
    pub fn keep(&self, subject: &str, server: &str, tool: &str, text: &str) {
        let sample = cut(text);
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
    // Reads no further than the sample: an answer may be megabytes on one line.
    let mut end = text.len();
    let mut lines = 0;
    for (n, (i, c)) in text.char_indices().enumerate() {
        if n == SAMPLE_CHARS {
            end = i;
            break;
        }
        if c == '\n' {
            lines += 1;
            if lines == SAMPLE_LINES {
                end = i + 1;
                break;
            }
        }
    }
    let mut out = text[..end].trim_end().to_string();
    if end < text.len() {
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
        assert_eq!(cut("a\nb\nc\nd\n"), "a\nb\nc\nd");
        let long = "x".repeat(SAMPLE_CHARS);
        assert_eq!(cut(&long), long);
        let longer = "é".repeat(SAMPLE_CHARS + 1);
        assert_eq!(cut(&longer), format!("{}…", "é".repeat(SAMPLE_CHARS)));
    }

    #[test]
    fn samples_are_per_caller_and_bounded() {
        let samples = Samples::default();
        samples.keep("alice", "git", "log", "commit 1a2b\n");
        assert_eq!(
            samples.of("alice", "git", "log").as_deref(),
            Some("commit 1a2b")
        );
        assert_eq!(samples.of("bob", "git", "log"), None);
        assert_eq!(samples.of("alice", "git", "diff"), None);
        // The same key again replaces its sample without taking another place.
        samples.keep("alice", "git", "log", "newer");
        assert_eq!(samples.of("alice", "git", "log").as_deref(), Some("newer"));
        for n in 0..MAX_SAMPLES - 1 {
            samples.keep(&format!("c{n}"), "git", "log", "x");
        }
        assert!(
            samples.of("alice", "git", "log").is_some(),
            "at the cap, kept"
        );
        samples.keep("one-more", "git", "log", "x");
        assert_eq!(samples.of("alice", "git", "log"), None, "the oldest went");
        assert!(samples.of("c0", "git", "log").is_some());
        assert!(samples.of("one-more", "git", "log").is_some());
    }
}
