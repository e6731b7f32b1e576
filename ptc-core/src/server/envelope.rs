//! The MCP result of an evaluation.
//!
//! Success: the value in Clojure syntax (after what the program printed) as text, bounded with a
//! truncation marker; `structuredContent` carries `result` (the JSON form), `prints`,
//! `upstream_calls` and `ptc_metrics`. Error: `isError` with `reason: message (line:col)` as text
//! and `{reason, message, position?, value?, prints, upstream_calls, ptc_metrics}` as structured
//! content (`value` is what `fail` carried).

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value as Json, json};

use crate::server::outcome::EvalOutcome;

/// `text` cut to at most `max` bytes (on a character boundary) with a marker saying how much was
/// kept; unchanged when it fits.
pub fn bounded(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let end = text.floor_char_boundary(max);
    format!(
        "{}… [truncated: {end} of {} bytes shown; return a smaller value, e.g. (take 10 xs) or \
         selected keys]",
        &text[..end],
        text.len()
    )
}

fn prints_json(prints: &str) -> Json {
    Json::Array(
        prints
            .lines()
            .map(|l| Json::String(l.to_string()))
            .collect(),
    )
}

/// The MCP result for `outcome`, rendering at most `max_output_bytes` of text.
pub fn to_result(outcome: &EvalOutcome, max_output_bytes: usize) -> CallToolResult {
    to_reply(outcome, max_output_bytes).0
}

/// [`to_result`], and whether the reply was cut at `max_output_bytes` (its text, or its JSON
/// result left out).
pub fn to_reply(outcome: &EvalOutcome, max_output_bytes: usize) -> (CallToolResult, bool) {
    let (mut r, cut) = content(outcome, max_output_bytes);
    if let Some(s) = r.structured_content.as_mut() {
        if !outcome.caller.is_empty() {
            s["caller"] = json!(outcome.caller);
        }
        if let Some(session) = &outcome.session {
            s["session"] = json!(session);
        }
    }
    (r, cut)
}

fn content(outcome: &EvalOutcome, max_output_bytes: usize) -> (CallToolResult, bool) {
    let records = &outcome.records;
    match &outcome.result {
        Ok(v) => {
            let mut text = String::new();
            if !outcome.prints.is_empty() {
                text.push_str(&outcome.prints);
                if !outcome.prints.ends_with('\n') {
                    text.push('\n');
                }
            }
            text.push_str(&v.text);
            let json_len = v.json.as_ref().map_or(0, |j| j.to_string().len());
            let cut = text.len() > max_output_bytes || json_len > max_output_bytes;
            let text = bounded(&text, max_output_bytes);
            let mut structured = json!({
                "prints": prints_json(&outcome.prints),
                "upstream_calls": records.upstream_calls,
                "ptc_metrics": records.ptc_metrics,
            });
            if json_len > max_output_bytes {
                structured["result"] = Json::Null;
                structured["result_truncated"] = json!(true);
            } else {
                structured["result"] = v.json.clone().unwrap_or(Json::Null);
            }
            let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
            r.structured_content = Some(structured);
            (r, cut)
        }
        Err(e) => {
            let mut text = format!("{}: {}", e.reason, e.message);
            if let Some(p) = e.position {
                text.push_str(&format!(" (line {}, column {})", p.line, p.col));
            }
            if let Some(v) = &e.value {
                text.push_str(&format!("\nfail value: {v}"));
            }
            if !outcome.prints.is_empty() {
                text.push_str("\nprinted before the error:\n");
                text.push_str(&outcome.prints);
            }
            let cut = text.len() > max_output_bytes;
            let text = bounded(&text, max_output_bytes);
            let mut structured = json!({
                "reason": e.reason.as_str(),
                "message": e.message,
                "prints": prints_json(&outcome.prints),
                "upstream_calls": records.upstream_calls,
                "ptc_metrics": records.ptc_metrics,
            });
            if let Some(p) = e.position {
                structured["position"] = json!({"line": p.line, "column": p.col});
            }
            if let Some(v) = &e.value {
                structured["value"] = (**v).clone();
            }
            let mut r = CallToolResult::error(vec![ContentBlock::text(text)]);
            r.structured_content = Some(structured);
            (r, cut)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::bounded;

    #[test]
    fn bounded_keeps_text_at_the_limit_and_marks_one_past() {
        let at = "a".repeat(10);
        assert_eq!(bounded(&at, 10), at);
        let past = "a".repeat(11);
        let out = bounded(&past, 10);
        assert!(out.starts_with(&at), "{out}");
        assert!(out.contains("[truncated: 10 of 11 bytes shown"), "{out}");
    }

    #[test]
    fn an_error_reply_is_cut_only_past_its_limit() {
        use crate::server::outcome::{EvalError, EvalOutcome, HostReason};
        let refused = EvalOutcome::refused(EvalError::host(HostReason::InvalidRequest, "xxxx"));
        let text = "invalid_request: xxxx".len();
        assert!(!super::to_reply(&refused, text).1, "at its limit");
        assert!(super::to_reply(&refused, text - 1).1, "one past");
    }

    #[test]
    fn bounded_cuts_on_a_character_boundary() {
        // "é" is two bytes: a cut at byte 1 must step back to 0.
        let out = bounded("éé", 1);
        assert!(out.starts_with("… [truncated: 0 of 4 bytes"), "{out}");
    }
}
