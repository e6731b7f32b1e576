//! Newline-delimited JSON framing for stdio upstreams, with a byte cap per message.
//!
//! rmcp's own stdio reader drops an oversized line and keeps waiting, so the call behind it would
//! only end at its deadline. This reader never buffers more than the cap, and still finds the
//! request id of an oversized response (a streaming scan of its top level, wherever the key sits)
//! so that exactly that call fails with `response_too_large` while the connection stays usable.

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// One step of reading.
#[derive(Debug)]
pub(crate) enum Frame {
    /// A whole message (without its line break), at most the cap long.
    Message(Vec<u8>),
    /// A message longer than the cap was skipped; `id` is its top-level `"id"` if it had one.
    Oversized { id: Option<Value> },
    /// The peer closed its output.
    Eof,
    /// Reading failed.
    Io(std::io::Error),
}

/// Reads frames from `R`. Cancel-safe: a partly read line stays in `self` for the next call.
pub(crate) struct LineReader<R> {
    read: BufReader<R>,
    line: Vec<u8>,
    max: usize,
    /// Set while skipping the rest of an oversized line.
    skipping: Option<IdScanner>,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// A reader accepting messages of at most `max` bytes (line break not counted).
    pub(crate) fn new(read: R, max: usize) -> Self {
        LineReader {
            read: BufReader::new(read),
            line: Vec::new(),
            max,
            skipping: None,
        }
    }

    /// The next frame.
    pub(crate) async fn next(&mut self) -> Frame {
        loop {
            // The decision is taken while `fill_buf` borrows the buffer; `consume` follows with no
            // await in between, so a cancelled call loses nothing.
            let (consumed, done) = {
                let available = match self.read.fill_buf().await {
                    Ok(a) => a,
                    Err(e) => return Frame::Io(e),
                };
                if available.is_empty() {
                    return Frame::Eof;
                }
                let newline = available.iter().position(|b| *b == b'\n');
                let chunk = &available[..newline.unwrap_or(available.len())];
                let take = newline.map_or(available.len(), |i| i + 1);
                if let Some(scanner) = &mut self.skipping {
                    scanner.feed(chunk);
                } else if self.line.len() + chunk.len() > self.max + 1 {
                    // `+ 1`: a trailing `\r` is not part of the message.
                    let mut scanner = IdScanner::default();
                    scanner.feed(&self.line);
                    scanner.feed(chunk);
                    self.line = Vec::new();
                    self.skipping = Some(scanner);
                } else {
                    self.line.extend_from_slice(chunk);
                }
                (take, newline.is_some())
            };
            self.read.consume(consumed);
            if !done {
                continue;
            }
            if let Some(scanner) = self.skipping.take() {
                return Frame::Oversized { id: scanner.id };
            }
            let mut line = std::mem::take(&mut self.line);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if line.len() > self.max {
                let mut scanner = IdScanner::default();
                scanner.feed(&line);
                return Frame::Oversized { id: scanner.id };
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return Frame::Message(line);
        }
    }
}

/// Finds the top-level `"id"` of a JSON object fed to it in pieces, keeping only a few bytes.
#[derive(Default)]
struct IdScanner {
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// The current top-level string (a key, or the id's value), up to a small bound.
    text: Vec<u8>,
    /// The last top-level string ended was the key `id`.
    key_is_id: bool,
    /// Just after `"id":`.
    want_value: bool,
    /// Digits of a numeric id.
    number: Vec<u8>,
    id: Option<Value>,
}

/// Longest id (or key) kept; longer ones are not ids a client issued.
const MAX_ID_LEN: usize = 64;

impl IdScanner {
    fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.byte(b);
        }
    }

    fn byte(&mut self, b: u8) {
        if self.in_string {
            if self.escaped {
                self.escaped = false;
                self.keep(b);
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
                self.end_string();
            } else {
                self.keep(b);
            }
            return;
        }
        if self.want_value && self.depth == 1 {
            match b {
                b'0'..=b'9' | b'-' => {
                    // One digit past the bound is kept, so that `end_number` can refuse it.
                    if self.number.len() <= MAX_ID_LEN {
                        self.number.push(b);
                    }
                    return;
                }
                b' ' | b'\t' | b'\r' if self.number.is_empty() => return,
                _ if !self.number.is_empty() => self.end_number(),
                // A string id ends in `end_string`.
                b'"' => {}
                // `null`, an object or an array: not an id a client issued.
                _ => self.want_value = false,
            }
        }
        match b {
            b'"' => {
                self.in_string = true;
                self.text.clear();
            }
            // An object or array as the id's value already ended `want_value` above.
            b'{' | b'[' => self.depth += 1,
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            // Every top-level key sets `key_is_id` as it ends, so a `,` needs no reset.
            b':' if self.depth == 1 => self.want_value = self.key_is_id,
            _ => {}
        }
    }

    fn keep(&mut self, b: u8) {
        if self.depth == 1 && self.text.len() <= MAX_ID_LEN {
            self.text.push(b);
        }
    }

    fn end_string(&mut self) {
        if self.depth != 1 {
            return;
        }
        if self.want_value {
            self.want_value = false;
            if self.text.len() <= MAX_ID_LEN {
                self.id = Some(Value::String(String::from_utf8_lossy(&self.text).into()));
            }
        } else {
            self.key_is_id = self.text == b"id";
        }
    }

    fn end_number(&mut self) {
        self.want_value = false;
        if self.number.len() <= MAX_ID_LEN
            && let Ok(n) = std::str::from_utf8(&self.number)
                .unwrap_or("")
                .parse::<serde_json::Number>()
        {
            self.id = Some(Value::Number(n));
        }
        self.number.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    async fn frames(input: impl AsyncRead + Unpin, max: usize) -> Vec<String> {
        let mut r = LineReader::new(input, max);
        let mut out = Vec::new();
        loop {
            match r.next().await {
                Frame::Message(m) => out.push(format!("msg {}", String::from_utf8(m).unwrap())),
                Frame::Oversized { id } => out.push(format!("big {id:?}")),
                Frame::Eof => return out,
                Frame::Io(e) => panic!("{e}"),
            }
        }
    }

    #[tokio::test]
    async fn a_message_at_the_cap_passes_and_one_byte_more_is_oversized() {
        let at_cap = br#"{"id":7,"r":"xx"}"#; // 17 bytes
        assert_eq!(at_cap.len(), 17);
        let mut input = at_cap.to_vec();
        input.extend_from_slice(b"\r\n");
        input.extend_from_slice(br#"{"id":8,"r":"xxx"}"#);
        input.extend_from_slice(b"\n\n{\"id\":9}\n");
        assert_eq!(
            frames(&input[..], 17).await,
            [
                r#"msg {"id":7,"r":"xx"}"#,
                "big Some(Number(8))",
                r#"msg {"id":9}"#
            ]
        );
    }

    /// Hands out its bytes `step` at a time, as a pipe may.
    struct Trickle {
        bytes: Vec<u8>,
        at: usize,
        step: usize,
    }

    impl AsyncRead for Trickle {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            let end = (self.at + self.step).min(self.bytes.len());
            buf.put_slice(&self.bytes[self.at..end]);
            self.at = end;
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_message_read_in_pieces_is_capped_by_its_whole_length() {
        let mut input = br#"{"id":7,"r":"xx"}"#.to_vec(); // 17 bytes
        input.extend_from_slice(b"\r\n");
        input.extend_from_slice(br#"{"id":8,"r":"xxx"}"#);
        input.push(b'\n');
        let trickle = Trickle {
            bytes: input,
            at: 0,
            step: 3,
        };
        assert_eq!(
            frames(trickle, 17).await,
            [r#"msg {"id":7,"r":"xx"}"#, "big Some(Number(8))"]
        );
    }

    #[tokio::test]
    async fn the_id_of_an_oversized_message_is_found_wherever_it_sits() {
        let big = "y".repeat(10_000);
        let cases = [
            (
                json!({"jsonrpc": "2.0", "id": 12, "result": {"id": 99, "t": big}}),
                json!(12),
            ),
            (
                json!({"result": {"id": "inner", "t": big, "list": [{"id": 5}]}, "jsonrpc": "2.0", "id": "req-3"}),
                json!("req-3"),
            ),
        ];
        let mut input = Vec::new();
        for (message, _) in &cases {
            // serde_json with preserve_order keeps the key order written above.
            input.extend_from_slice(serde_json::to_string(message).unwrap().as_bytes());
            input.push(b'\n');
        }
        let got = frames(&input[..], 1000).await;
        let want: Vec<String> = cases
            .iter()
            .map(|(_, id)| format!("big {:?}", Some(id.clone())))
            .collect();
        assert_eq!(got, want);
    }

    #[tokio::test]
    async fn escaped_quotes_and_a_missing_id_do_not_confuse_the_scan() {
        let input = br#"{"result":"a \"id\": 4 \\","x":1}
{"method":"notify","params":{"id":3}}
"#;
        assert_eq!(frames(&input[..], 5).await, ["big None", "big None"]);
    }

    #[tokio::test]
    async fn ids_of_up_to_64_characters_are_found() {
        let line = |id: &str| format!("{{\"id\":{id},\"r\":\"{}\"}}\n", "x".repeat(100));
        let digits = |n| "7".repeat(n);
        let quoted = |n| format!("\"{}\"", "s".repeat(n));
        let input = [digits(64), digits(65), quoted(64), quoted(65)].map(|id| line(&id));
        let got = frames(input.concat().as_bytes(), 50).await;
        assert!(got[0].starts_with("big Some(Number(7.7"), "{got:?}");
        assert_eq!(got[1], "big None");
        assert_eq!(got[2], format!("big Some(String(\"{}\"))", "s".repeat(64)));
        assert_eq!(got[3], "big None");
        assert_eq!(got.len(), 4);
    }

    #[test]
    fn the_scanner_keeps_a_few_bytes_of_any_string() {
        let mut scan = IdScanner::default();
        scan.feed(b"{\"id\":\"");
        scan.feed(&[b'x'; 100_000]);
        assert_eq!(scan.text.len(), MAX_ID_LEN + 1);
        scan.feed(b"\",\"r\":{\"k\":\"");
        scan.feed(&[b'y'; 100_000]);
        assert_eq!(scan.text.len(), 0, "nested strings are not kept at all");
        assert_eq!(scan.id, None);
    }

    #[tokio::test]
    async fn whitespace_around_a_numeric_id_is_skipped() {
        let input = b"{\"id\" :\t\r 12 , \"r\":\"xxxxxxxxxx\"}\n{\"id\": -3}\n";
        assert_eq!(
            frames(&input[..], 8).await,
            ["big Some(Number(12))", "big Some(Number(-3))"]
        );
    }
}
