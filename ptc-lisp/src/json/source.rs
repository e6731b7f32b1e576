//! Where the decoder's bytes come from: a slice held whole, or a reader read a window at a time.

use std::io::Read;

use super::jerr;
use crate::error::LispError;

/// Where a decoder's bytes come from: a slice held whole, or a reader read a window at a time.
pub(super) trait Source {
    /// False when every byte is at hand from the start (`refill` never adds any).
    const STREAMS: bool;
    /// The bytes at hand.
    fn bytes(&self) -> &[u8];
    /// True once every byte of the input has been read.
    fn exhausted(&self) -> bool;
    /// Forgets the bytes before `keep` and reads a window more (less at the end of the input);
    /// returns how many bytes were forgotten (what every index into `bytes` moves down by).
    fn refill(&mut self, keep: usize) -> Result<usize, LispError>;
}

impl Source for &[u8] {
    const STREAMS: bool = false;
    #[inline(always)]
    fn bytes(&self) -> &[u8] {
        self
    }
    fn exhausted(&self) -> bool {
        true
    }
    fn refill(&mut self, _keep: usize) -> Result<usize, LispError> {
        Ok(0)
    }
}

/// How much a streaming decode reads at a time: small enough to stay in cache, large enough
/// that reading costs nothing beside decoding.
pub(super) const WINDOW: usize = 256 << 10;
/// The bytes a streaming decoder keeps at hand past every token boundary (the longest
/// fixed-size token, a `\uXXXX\uXXXX` surrogate pair, is 12); longer tokens (strings,
/// numbers, runs of whitespace) refill as they go.
pub(super) const MIN_AHEAD: usize = 16;

/// A reader, decoded a window at a time: the input is never whole in memory.
pub(super) struct Streamed<R> {
    buf: Vec<u8>,
    read: R,
    /// Bytes read per refill ([`WINDOW`]; the tests try every small size).
    window: usize,
    done: bool,
}

impl<R: Read> Streamed<R> {
    pub(super) fn new(read: R, window: usize) -> Self {
        Streamed {
            buf: Vec::with_capacity(window + MIN_AHEAD),
            read,
            window,
            done: false,
        }
    }
}

impl<R: Read> Source for Streamed<R> {
    const STREAMS: bool = true;
    #[inline(always)]
    fn bytes(&self) -> &[u8] {
        &self.buf
    }
    fn exhausted(&self) -> bool {
        self.done
    }
    fn refill(&mut self, keep: usize) -> Result<usize, LispError> {
        self.buf.drain(..keep);
        let got = (&mut self.read)
            .take(self.window as u64)
            .read_to_end(&mut self.buf)
            .map_err(|e| jerr(format!("cannot read the JSON input: {e}")))?;
        self.done = got < self.window;
        Ok(keep)
    }
}
