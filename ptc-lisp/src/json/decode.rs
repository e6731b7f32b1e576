//! JSON bytes to values, with an explicit stack: keys and short strings interned, arrays of
//! records sharing their keys, depth and memory bounded.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Instant;

use super::jerr;
use super::source::{MIN_AHEAD, Source};
use crate::error::{LispError, Reason};
use crate::footprint;
use crate::meter::{Charge, Meter};
use crate::value::{
    Charged, CollArc, FxBuild, INLINE, Items, MapData, Record, SMALL_MAP, Shape, Text, Value,
};

/// Keys, and strings up to this many bytes, are shared through the intern table (unless they
/// are short enough to be stored inline, which costs less than a lookup).
const MAX_INTERNED_LEN: usize = 32;
/// The intern table stops growing here: small enough to stay in cache (at 65 536 entries the
/// probes of a 50 MB trace list missed it and the decode took a fifth longer). Values that
/// repeat (statuses, models, tool names) are met early; ids and free text never repeat.
pub(super) const MAX_INTERNED: usize = 1 << 12;
/// Depths and positions within an object whose last key is remembered (a plain array: a hash
/// lookup per key cost more than the hint saved).
const HINT_SIDE: usize = 16;
/// Nesting depths with a remembered object shape (deeper objects share the last slot).
const SHAPE_SLOTS: usize = 16;

/// An interned string, looked up by the bytes it was decoded from.
struct Interned(Text);

impl Borrow<[u8]> for Interned {
    fn borrow(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

// Hashed and compared as its bytes, so a lookup by `&[u8]` finds it.
impl Hash for Interned {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.0.as_bytes().hash(h)
    }
}

impl PartialEq for Interned {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_bytes() == other.0.as_bytes()
    }
}

impl Eq for Interned {}

/// A key of an object being read: the key remembered at its (depth, position) slot, which no
/// other object can change while this one is open (objects nested in it are deeper), or one of
/// its own. A remembered key is cloned only if the object does not take a known shape, so the
/// keys of an array of records touch no reference count.
enum Key {
    Hinted(usize),
    Own(Text),
}

/// A key as a string value.
fn key_text(hints: &[Option<Text>], k: Key) -> Text {
    match k {
        Key::Hinted(i) => hints[i].clone().unwrap_or_else(|| Text::new("")),
        Key::Own(s) => s,
    }
}

/// Whether a shape's key is this key.
fn key_is(hints: &[Option<Text>], shape_key: &Value, k: &Key) -> bool {
    let Value::Str(a) = shape_key else {
        return false;
    };
    match k {
        Key::Hinted(i) => hints[*i].as_ref().is_some_and(|b| a == b),
        Key::Own(b) => a == b,
    }
}

struct Decoder<'m, S> {
    src: S,
    /// The program's meter, when decoding for one: each collection's storage is charged to it
    /// as it is made and credited back when freed.
    meter: Option<&'m Meter<'m>>,
    /// Of `used`, what is charged to `meter` already.
    held: u64,
    /// Index of the next byte in `src.bytes()`.
    i: usize,
    /// Bytes a streaming source has forgotten: `base + i` is the position in the input.
    base: usize,
    max_depth: usize,
    budget: u64,
    used: u64,
    deadline: Option<Instant>,
    count: u64,
    interned: HashSet<Interned, FxBuild>,
    /// The key last seen at each (depth, position) slot, `HINT_SIDE` × `HINT_SIDE` of them.
    key_hints: Vec<Option<Text>>,
    scratch: Vec<Value>,
    scratch_pairs: Vec<(Key, Value)>,
    /// The keys of the last small object finished at each depth.
    shapes: [Option<Arc<Shape>>; SHAPE_SLOTS],
    buf: String,
}

/// Where the run of string bytes that need no attention (not `"`, `\\` or a control
/// character) starting at `i` ends, eight bytes at a time: strings in tool results are long
/// enough for the word-at-a-time scan to pay.
fn plain_run_end(b: &[u8], mut i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // A byte of `x` is zero: its high bit in the result (exact for the lowest such byte, which
    // is the one used).
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    while let Some(chunk) = b.get(i..i + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        let special = zero(w ^ (ONES * b'"' as u64))
            | zero(w ^ (ONES * b'\\' as u64))
            | (w.wrapping_sub(ONES * 0x20) & !w & HIGH);
        if special != 0 {
            return i + (special.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i
}

impl<S: Source> Decoder<'_, S> {
    /// Skips whitespace. A streaming source then has at least [`MIN_AHEAD`] bytes at hand, or
    /// all that is left of the input.
    #[inline(always)]
    fn ws(&mut self) -> Result<(), LispError> {
        self.skip_ws();
        if S::STREAMS && self.src.bytes().len() - self.i < MIN_AHEAD && !self.src.exhausted() {
            return self.ws_refilling();
        }
        Ok(())
    }

    #[inline(always)]
    fn skip_ws(&mut self) {
        let b = self.src.bytes();
        while self.i < b.len() && matches!(b[self.i], b' ' | b'\n' | b'\r' | b'\t') {
            self.i += 1;
        }
    }

    /// [`Decoder::ws`] at the end of a window: refill, skip, until a token or the end is at hand.
    #[cold]
    #[inline(never)]
    fn ws_refilling(&mut self) -> Result<(), LispError> {
        loop {
            self.ensure_ahead()?;
            self.skip_ws();
            if self.src.bytes().len() - self.i >= MIN_AHEAD || self.src.exhausted() {
                return Ok(());
            }
        }
    }

    /// Refills a streaming source until [`MIN_AHEAD`] bytes from `i` are at hand, or the rest
    /// of the input.
    fn ensure_ahead(&mut self) -> Result<(), LispError> {
        while S::STREAMS && self.src.bytes().len() - self.i < MIN_AHEAD && !self.src.exhausted() {
            self.refill(self.i)?;
        }
        Ok(())
    }

    /// Refills a streaming source keeping the bytes from `keep` on; returns how far indices
    /// moved down.
    fn refill(&mut self, keep: usize) -> Result<usize, LispError> {
        let shift = self.src.refill(keep)?;
        self.i -= shift;
        self.base += shift;
        Ok(shift)
    }

    /// The position of the next byte in the input, for messages.
    fn pos(&self) -> usize {
        self.base + self.i
    }

    fn charge(&mut self, n: u64) -> Result<(), LispError> {
        self.used += n;
        if self.used > self.budget {
            return Err(LispError::new(
                Reason::MemoryExceeded,
                format!(
                    "decoding JSON would exceed the memory budget ({} bytes left)",
                    self.budget
                ),
            ));
        }
        Ok(())
    }

    /// Charges one collection's or shared string's storage (as [`Decoder::charge`]): what it
    /// keeps, to be credited back when it is freed, when decoding for a program.
    fn charge_storage(&mut self, n: u64) -> Result<Charge, LispError> {
        self.charge(n)?;
        let Some(meter) = self.meter else {
            return Ok(Charge::default());
        };
        let bill = meter
            .charge(n)
            .map_err(|message| LispError::new(Reason::MemoryExceeded, message))?;
        self.held += n;
        Ok(meter.own(bill))
    }

    fn tick(&mut self) -> Result<(), LispError> {
        self.count += 1;
        if self.count & 0xFFFF == 0
            && let Some(d) = self.deadline
            && Instant::now() >= d
        {
            return Err(LispError::new(
                Reason::Timeout,
                "deadline reached while decoding JSON",
            ));
        }
        Ok(())
    }

    fn finish_object(&mut self, start: usize, depth: usize) -> Result<Value, LispError> {
        let n = self.scratch_pairs.len() - start;
        if n == 0 || n > SMALL_MAP {
            let mut m = MapData::with_capacity(n);
            let charge = self.charge_storage(footprint::map_storage(&m))?;
            for (k, x) in self.scratch_pairs.drain(start..) {
                m.insert(Value::Str(key_text(&self.key_hints, k)), x);
            }
            return Ok(Value::Map(CollArc::new(Charged::new(m, charge))));
        }
        // Arrays of records repeat one object's keys in the same order: the second and later
        // objects at this depth with the keys of the last one seen there share its key list.
        let pairs = &self.scratch_pairs[start..];
        let slot = depth.min(SHAPE_SLOTS - 1);
        let hit = self.shapes[slot].as_ref().is_some_and(|shape| {
            shape.keys().len() == n
                && shape
                    .keys()
                    .iter()
                    .zip(pairs)
                    .all(|(a, (b, _))| key_is(&self.key_hints, a, b))
        });
        if hit && let Some(shape) = self.shapes[slot].clone() {
            let charge = self.charge_storage(footprint::record(n))?;
            let values: Box<[Value]> = self.scratch_pairs.drain(start..).map(|(_, v)| v).collect();
            return Ok(Value::Map(CollArc::new(Charged::new(
                MapData::Record(Record::new(shape, values)),
                charge,
            ))));
        }
        let charge = self.charge_storage(footprint::map_room(n))?;
        let mut v: Vec<(Value, Value)> = Vec::with_capacity(n);
        // Duplicate keys are rare: the last one wins, as in most JSON decoders.
        for (k, x) in self.scratch_pairs.drain(start..) {
            let k = Value::Str(key_text(&self.key_hints, k));
            if let Some(e) = v.iter_mut().find(|(kk, _)| kk.fast_eq(&k)) {
                e.1 = x;
            } else {
                v.push((k, x));
            }
        }
        if v.len() == n {
            let keys: Box<[Value]> = v.iter().map(|(k, _)| k.clone()).collect();
            self.shapes[slot] = Some(Arc::new(Shape::new(keys)));
        }
        Ok(Value::Map(CollArc::new(Charged::new(
            MapData::Small(v),
            charge,
        ))))
    }

    fn finish_array(&mut self, start: usize) -> Result<Value, LispError> {
        let n = self.scratch.len() - start;
        let charge = self.charge_storage(footprint::vector(n))?;
        // A long array that is all of the scratch list (the outermost open one) takes the list
        // itself: copying it out would hold it twice at the end of a large document.
        let items: Vec<Value> = if start == 0 && n >= 1024 {
            std::mem::take(&mut self.scratch)
        } else {
            self.scratch.drain(start..).collect()
        };
        Ok(Value::Vector(CollArc::new(Charged::new(
            Items(items),
            charge,
        ))))
    }

    /// Reads `"key":` (after the opening quote has been checked).
    /// Reads `"key":`. `slot` identifies the key's place (nesting depth and position in its
    /// object): arrays of records repeat the same keys in the same places, so the key seen there
    /// last time is tried first, without hashing.
    fn key(&mut self, slot: (usize, usize)) -> Result<Key, LispError> {
        self.ws()?;
        if self.src.bytes().get(self.i) != Some(&b'"') {
            return Err(jerr(format!(
                "expected a string key at byte {}",
                self.pos()
            )));
        }
        self.i += 1;
        let index = (slot.0 < HINT_SIDE && slot.1 < HINT_SIDE).then(|| slot.0 * HINT_SIDE + slot.1);
        let hinted = index.and_then(|i| {
            let h = self.key_hints[i].as_ref()?;
            let b = self.src.bytes();
            (b.get(self.i..self.i + h.len()) == Some(h.as_bytes())
                && b.get(self.i + h.len()) == Some(&b'"'))
            .then_some((i, h.len()))
        });
        let k = match hinted {
            Some((i, len)) => {
                self.i += len + 1;
                Key::Hinted(i)
            }
            None => {
                let k = self.string(true)?;
                // Only keys whose raw form is their text can be matched byte for byte later.
                let plain = k.bytes().all(|c| c >= 0x20 && c != b'"' && c != b'\\');
                match index {
                    Some(i) if plain => {
                        self.key_hints[i] = Some(k);
                        Key::Hinted(i)
                    }
                    _ => Key::Own(k),
                }
            }
        };
        self.ws()?;
        if self.src.bytes().get(self.i) != Some(&b':') {
            return Err(jerr(format!("expected `:` at byte {}", self.pos())));
        }
        self.i += 1;
        Ok(k)
    }

    /// Parses one value with an explicit stack (no recursion, whatever the nesting).
    fn value(&mut self) -> Result<Value, LispError> {
        enum Open {
            Arr(usize),
            Obj(usize, Option<Key>),
        }
        let mut stack: Vec<Open> = Vec::new();
        loop {
            self.tick()?;
            self.ws()?;
            let c = match self.src.bytes().get(self.i) {
                Some(c) => *c,
                None => {
                    return Err(jerr(format!(
                        "unexpected end of JSON at byte {}",
                        self.pos()
                    )));
                }
            };
            let mut v = match c {
                b'{' | b'[' => {
                    if stack.len() >= self.max_depth {
                        return Err(LispError::new(
                            Reason::DepthExceeded,
                            format!("JSON nested deeper than {}", self.max_depth),
                        ));
                    }
                    self.i += 1;
                    self.ws()?;
                    if c == b'{' {
                        let start = self.scratch_pairs.len();
                        if self.src.bytes().get(self.i) == Some(&b'}') {
                            self.i += 1;
                            self.finish_object(start, stack.len())?
                        } else {
                            let k = self.key((stack.len(), 0))?;
                            stack.push(Open::Obj(start, Some(k)));
                            continue;
                        }
                    } else {
                        let start = self.scratch.len();
                        if self.src.bytes().get(self.i) == Some(&b']') {
                            self.i += 1;
                            self.finish_array(start)?
                        } else {
                            stack.push(Open::Arr(start));
                            continue;
                        }
                    }
                }
                b'"' => {
                    self.i += 1;
                    Value::Str(self.string(false)?)
                }
                b't' => self.lit(b"true", Value::Bool(true))?,
                b'f' => self.lit(b"false", Value::Bool(false))?,
                b'n' => self.lit(b"null", Value::Nil)?,
                b'-' | b'0'..=b'9' => self.number()?,
                _ => {
                    return Err(jerr(format!(
                        "unexpected character `{}` at byte {}",
                        c as char,
                        self.pos()
                    )));
                }
            };
            // Attach the finished value to its parent, closing containers as they end.
            loop {
                match stack.last_mut() {
                    None => return Ok(v),
                    Some(Open::Arr(start)) => {
                        let start = *start;
                        self.scratch.push(v);
                        self.ws()?;
                        match self.src.bytes().get(self.i) {
                            Some(b',') => {
                                self.i += 1;
                                break;
                            }
                            Some(b']') => {
                                self.i += 1;
                                stack.pop();
                                v = self.finish_array(start)?;
                            }
                            _ => {
                                return Err(jerr(format!(
                                    "expected `,` or `]` at byte {}",
                                    self.pos()
                                )));
                            }
                        }
                    }
                    Some(Open::Obj(start, key)) => {
                        let start = *start;
                        let k = key.take().unwrap_or_else(|| Key::Own(Text::new("")));
                        self.scratch_pairs.push((k, v));
                        self.ws()?;
                        match self.src.bytes().get(self.i) {
                            Some(b',') => {
                                self.i += 1;
                                let pos = self.scratch_pairs.len() - start;
                                let k = self.key((stack.len() - 1, pos))?;
                                if let Some(Open::Obj(_, slot)) = stack.last_mut() {
                                    *slot = Some(k);
                                }
                                break;
                            }
                            Some(b'}') => {
                                self.i += 1;
                                stack.pop();
                                v = self.finish_object(start, stack.len())?;
                            }
                            _ => {
                                return Err(jerr(format!(
                                    "expected `,` or `}}` at byte {}",
                                    self.pos()
                                )));
                            }
                        }
                    }
                }
            }
        }
    }

    fn lit(&mut self, word: &[u8], v: Value) -> Result<Value, LispError> {
        if self.src.bytes()[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(v)
        } else {
            Err(jerr(format!("invalid literal at byte {}", self.pos())))
        }
    }

    fn number(&mut self) -> Result<Value, LispError> {
        if S::STREAMS {
            self.whole_number()?;
        }
        let start = self.i;
        let mut neg = false;
        if self.src.bytes()[self.i] == b'-' {
            neg = true;
            self.i += 1;
        }
        let mut acc: i64 = 0;
        let mut overflow = false;
        let digits_start = self.i;
        while let Some(c) = self
            .src
            .bytes()
            .get(self.i)
            .copied()
            .filter(u8::is_ascii_digit)
        {
            match acc
                .checked_mul(10)
                .and_then(|a| a.checked_add((c - b'0') as i64))
            {
                Some(a) => acc = a,
                None => overflow = true,
            }
            self.i += 1;
        }
        if self.i == digits_start {
            return Err(jerr(format!(
                "invalid number at byte {}",
                self.base + start
            )));
        }
        let mut is_float = false;
        if self.src.bytes().get(self.i) == Some(&b'.') {
            is_float = true;
            self.i += 1;
            while self.src.bytes().get(self.i).is_some_and(u8::is_ascii_digit) {
                self.i += 1;
            }
        }
        if matches!(self.src.bytes().get(self.i), Some(b'e' | b'E')) {
            is_float = true;
            self.i += 1;
            if matches!(self.src.bytes().get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            while self.src.bytes().get(self.i).is_some_and(u8::is_ascii_digit) {
                self.i += 1;
            }
        }
        if !is_float && !overflow {
            return Ok(Value::Int(if neg { -acc } else { acc }));
        }
        let text = std::str::from_utf8(&self.src.bytes()[start..self.i])
            .map_err(|_| jerr("invalid number"))?;
        text.parse::<f64>()
            .map(Value::Float)
            .map_err(|_| jerr(format!("invalid number `{text}`")))
    }

    /// Reads a string body (after the opening quote).
    fn string(&mut self, key: bool) -> Result<Text, LispError> {
        let mut start = self.i;
        loop {
            self.i = plain_run_end(self.src.bytes(), self.i);
            match self.src.bytes().get(self.i) {
                Some(b'"') => {
                    let end = self.i;
                    self.i += 1;
                    return self.plain_string(start, end, key);
                }
                Some(&c) if c == b'\\' || c < 0x20 => break,
                Some(_) => self.i += 1,
                // A plain string is decoded from one piece: the window keeps all of it.
                None if S::STREAMS && !self.src.exhausted() => start -= self.refill(start)?,
                None => break,
            }
        }
        // Slow path with escapes.
        self.buf.clear();
        self.buf.push_str(
            std::str::from_utf8(&self.src.bytes()[start..self.i])
                .map_err(|_| jerr("invalid UTF-8 in JSON string"))?,
        );
        loop {
            // What came before is in `buf`: only the rest is kept, with room for an escape.
            self.ensure_ahead()?;
            let c = match self.src.bytes().get(self.i) {
                Some(c) => *c,
                None => return Err(jerr("unterminated JSON string")),
            };
            match c {
                b'"' => {
                    self.i += 1;
                    let charge = self.charge_storage(footprint::string(self.buf.len()))?;
                    return Ok(Text::charged(&self.buf, charge));
                }
                b'\\' => {
                    self.i += 1;
                    let e = self
                        .src
                        .bytes()
                        .get(self.i)
                        .copied()
                        .ok_or_else(|| jerr("unterminated escape"))?;
                    self.i += 1;
                    match e {
                        b'"' => self.buf.push('"'),
                        b'\\' => self.buf.push('\\'),
                        b'/' => self.buf.push('/'),
                        b'b' => self.buf.push('\u{8}'),
                        b'f' => self.buf.push('\u{c}'),
                        b'n' => self.buf.push('\n'),
                        b'r' => self.buf.push('\r'),
                        b't' => self.buf.push('\t'),
                        b'u' => {
                            let hi = self.hex4()?;
                            let code = if (0xD800..0xDC00).contains(&hi) {
                                if self.src.bytes().get(self.i) == Some(&b'\\')
                                    && self.src.bytes().get(self.i + 1) == Some(&b'u')
                                {
                                    self.i += 2;
                                    let lo = self.hex4()?;
                                    0x10000
                                        + ((hi - 0xD800) << 10)
                                        + (lo.wrapping_sub(0xDC00) & 0x3FF)
                                } else {
                                    0xFFFD
                                }
                            } else {
                                hi
                            };
                            self.buf.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
                        }
                        _ => return Err(jerr("invalid escape in JSON string")),
                    }
                }
                c if c < 0x20 => return Err(jerr("control character in JSON string")),
                _ => {
                    let bytes = self.src.bytes();
                    let run_start = self.i;
                    let mut end = run_start;
                    while let Some(&c) = bytes.get(end) {
                        if c == b'"' || c == b'\\' || c < 0x20 {
                            break;
                        }
                        end += 1;
                    }
                    let run = &bytes[run_start..end];
                    let bad = || jerr("invalid UTF-8 in JSON string");
                    let text = match std::str::from_utf8(run) {
                        Ok(text) => text,
                        // A character cut by the end of the window: its first bytes wait for
                        // the rest, which the next refill brings.
                        Err(e)
                            if S::STREAMS
                                && end == bytes.len()
                                && e.error_len().is_none()
                                && !self.src.exhausted() =>
                        {
                            end = run_start + e.valid_up_to();
                            std::str::from_utf8(&run[..e.valid_up_to()]).map_err(|_| bad())?
                        }
                        Err(_) => return Err(bad()),
                    };
                    self.buf.push_str(text);
                    self.i = end;
                }
            }
        }
    }

    /// The string between `start` and `end` (no escapes): inline when it fits, else interned
    /// when it is a key or short.
    fn plain_string(&mut self, start: usize, end: usize, key: bool) -> Result<Text, LispError> {
        let utf8 = |b| std::str::from_utf8(b).map_err(|_| jerr("invalid UTF-8 in JSON string"));
        let len = end - start;
        if len <= INLINE {
            return Ok(Text::new(utf8(&self.src.bytes()[start..end])?));
        }
        let interned = key || len <= MAX_INTERNED_LEN;
        if interned && let Some(s) = self.interned.get(&self.src.bytes()[start..end]) {
            return Ok(s.0.clone());
        }
        let charge = self.charge_storage(footprint::string(len))?;
        let s = Text::charged(utf8(&self.src.bytes()[start..end])?, charge);
        if !interned || self.interned.len() == MAX_INTERNED {
            return Ok(s);
        }
        self.interned.insert(Interned(s.clone()));
        Ok(s)
    }

    /// Makes sure a streaming source holds the whole number token starting at `i`.
    fn whole_number(&mut self) -> Result<(), LispError> {
        let mut end = self.i;
        loop {
            let b = self.src.bytes();
            while b
                .get(end)
                .is_some_and(|c| matches!(c, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
            {
                end += 1;
            }
            if end < b.len() || self.src.exhausted() {
                return Ok(());
            }
            end -= self.refill(self.i)?;
        }
    }

    fn hex4(&mut self) -> Result<u32, LispError> {
        let h = self
            .src
            .bytes()
            .get(self.i..self.i + 4)
            .ok_or_else(|| jerr("truncated \\u escape"))?;
        let s = std::str::from_utf8(h).map_err(|_| jerr("invalid \\u escape"))?;
        let v = u32::from_str_radix(s, 16).map_err(|_| jerr("invalid \\u escape"))?;
        self.i += 4;
        Ok(v)
    }
}

/// Decodes JSON within `budget` bytes; returns the value and the bytes it takes.
pub(crate) fn decode(
    bytes: &[u8],
    max_depth: usize,
    budget: u64,
    deadline: Option<Instant>,
) -> Result<(Value, u64), LispError> {
    decode_from(
        bytes,
        interned_for(bytes),
        max_depth,
        budget,
        deadline,
        None,
    )
}

/// Decodes JSON for a running program: within what is left of its budget, charged to its
/// meter (a collection's or shared string's storage as it is made, credited back when it is
/// freed).
pub(crate) fn decode_for(
    meter: &Meter<'_>,
    bytes: &[u8],
    max_depth: usize,
    deadline: Option<Instant>,
) -> Result<Value, LispError> {
    let (v, rest) = decode_from(
        bytes,
        interned_for(bytes),
        max_depth,
        meter.left(),
        deadline,
        Some(meter),
    )?;
    meter
        .charge(rest)
        .map_err(|message| LispError::new(Reason::MemoryExceeded, message))?;
    Ok(v)
}

/// The intern table's size, from the input (a short string per ~128 bytes, up to the cap) so
/// the table is not rehashed as it fills, and a small document does not pay for a large table.
fn interned_for(bytes: &[u8]) -> usize {
    (bytes.len() / 128).min(MAX_INTERNED)
}

/// Decodes JSON from `src`; returns the value and the bytes it takes that are not charged to
/// `meter` yet (all of them without one).
pub(super) fn decode_from<S: Source>(
    src: S,
    interned: usize,
    max_depth: usize,
    budget: u64,
    deadline: Option<Instant>,
    meter: Option<&Meter<'_>>,
) -> Result<(Value, u64), LispError> {
    let mut d = Decoder {
        src,
        meter,
        held: 0,
        i: 0,
        base: 0,
        max_depth,
        budget,
        used: 0,
        deadline,
        count: 0,
        interned: HashSet::with_capacity_and_hasher(interned, FxBuild::default()),
        key_hints: vec![None; HINT_SIDE * HINT_SIDE],
        scratch: Vec::new(),
        scratch_pairs: Vec::new(),
        shapes: Default::default(),
        buf: String::new(),
    };
    let v = d.value()?;
    d.ws()?;
    if d.i != d.src.bytes().len() {
        return Err(jerr(format!(
            "trailing characters after JSON value at byte {}",
            d.pos()
        )));
    }
    Ok((v, d.used - d.held))
}

#[cfg(test)]
mod tests {
    use super::super::source::{Streamed, WINDOW};
    use super::{MAX_INTERNED, MAX_INTERNED_LEN, decode, decode_from, plain_run_end};
    use crate::error::LispError;
    use crate::footprint;
    use crate::value::{INLINE, Value};

    const DEPTH: usize = 64;
    const BUDGET: u64 = 1 << 30;

    /// A decode's outcome in comparable form: the printed value and the bytes charged, or the
    /// error's reason and message (with its byte position).
    fn outcome(r: Result<(Value, u64), LispError>) -> Result<(String, u64), String> {
        r.map(|(v, used)| (v.to_string(), used))
            .map_err(|e| format!("{}: {}", e.reason(), e.message()))
    }

    /// A streaming decode reading `window` bytes at a time gives what decoding the whole slice
    /// gives: the same value, the same charge, the same error at the same position.
    fn same_streamed(input: &[u8], windows: impl IntoIterator<Item = usize>) {
        let whole = outcome(decode(input, DEPTH, BUDGET, None));
        for window in windows {
            let streamed = outcome(decode_from(
                Streamed::new(input, window),
                MAX_INTERNED,
                DEPTH,
                BUDGET,
                None,
                None,
            ));
            assert_eq!(
                streamed,
                whole,
                "window {window}, input {:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    /// Every window boundary, on input with every token kind: strings longer than the window,
    /// escapes and surrogate pairs, multi-byte characters, numbers, literals, whitespace runs,
    /// nesting, repeated records; and each kind of malformed input, cut anywhere.
    #[test]
    fn a_streamed_decode_equals_the_whole_one_at_every_window_size() {
        let long = "x".repeat(100);
        let doc = format!(
            r#"  {{"records": [{{"id": "a", "n": 1, "f": -1.5e3}}, {{"id": "b\u00e9\ud83d\ude00\n", "n": 12345678901234567890, "f": 0.25}},
              {{"id": "é😀{long}", "n": null, "f": true}}],   "s": "{long}\"{long}",
              "deep": [[[[{{"k": [false, [], {{}}]}}]]]],       "tail": "ü"}}   "#
        );
        same_streamed(doc.as_bytes(), 1..=40);
        same_streamed(doc.as_bytes(), [64, 127, 128, 1000]);
        let bad = [
            r#"{"a": "unterminated"#,
            r#"{"a": "bad \q escape"}"#,
            r#"{"a": "\u12"}"#,
            r#"[1, 2,, 3]"#,
            r#"{"a" 1}"#,
            r#"[tru]"#,
            r#"[1.]"#,
            r#"[-]"#,
            r#"{"a": 1} trailing"#,
            "[\"\u{1}\"]",
            "",
            "   ",
        ];
        for b in bad {
            same_streamed(b.as_bytes(), 1..=24);
        }
        // Invalid UTF-8, whole and cut at the end of the input.
        same_streamed(b"[\"ok \xff\"]", 1..=12);
        same_streamed(b"[\"cut \xc3", 1..=12);
        same_streamed(b"[\"esc \\n \xe2\x82\"]", 1..=16);
    }

    /// Mutants of a document with every token kind (bytes replaced by structural, escape,
    /// number and UTF-8 bytes, cut short), streamed at every small window, decode as they do
    /// whole: valid or not, the same answer.
    #[test]
    fn mutated_documents_stream_as_they_decode_whole() {
        let doc = r#"{"a": [1, -2.5e3, "x\u00e9\ud83d\ude00y", true, null, {"b": "é😀"}], "c": {"d": [[]], "e": 12345678901234567890}}"#.as_bytes();
        let bytes = b"\"\\{}[],: 0e-.u\xc3\xff\x01";
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for _ in 0..300 {
            let mut input = doc.to_vec();
            for _ in 0..1 + next(3) {
                let at = next(input.len());
                input[at] = bytes[next(bytes.len())];
            }
            input.truncate(input.len() - next(input.len() / 4));
            same_streamed(&input, 1..=20);
        }
    }

    /// At the real window size, a document of several windows decodes as it does whole, and an
    /// error past the first window names its position in the whole input.
    #[test]
    fn a_document_of_several_windows_streams_with_absolute_positions() {
        let record =
            r#"{"id": "tr_0001", "status": "ok", "cost": 1.25, "steps": [{"tool": "ls"}]}"#;
        let n = 3 * WINDOW / record.len();
        let doc = format!("[{}]", vec![record; n].join(",\n"));
        same_streamed(doc.as_bytes(), [WINDOW]);
        let bad = format!("{} x]", &doc[..doc.len() - 1]);
        same_streamed(bad.as_bytes(), [WINDOW]);
        let e = Value::from_json_reader(bad.as_bytes(), &crate::Limits::default()).unwrap_err();
        assert_eq!(
            e.message(),
            format!("expected `,` or `]` at byte {}", bad.len() - 2)
        );
    }

    /// The json fuzz target's corpus, streamed at small windows, decodes as it does whole.
    #[test]
    fn the_json_corpus_streams_as_it_decodes_whole() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/json");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).expect("the json corpus") {
            let data = std::fs::read(entry.expect("a corpus entry").path()).expect("a file");
            same_streamed(&data, [1, 2, 3, 7, 16, 17, 64]);
            n += 1;
        }
        assert!(n > 1000, "{n} corpus files");
    }

    /// A read that fails midway is a clean error naming the failure.
    #[test]
    fn a_failing_read_is_reported() {
        struct Failing(usize);
        impl std::io::Read for Failing {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                if self.0 == 0 {
                    return Err(std::io::Error::other("disk on fire"));
                }
                buf[0] = b'[';
                self.0 -= 1;
                Ok(1)
            }
        }
        let e =
            decode_from(Streamed::new(Failing(3), 2), 16, DEPTH, BUDGET, None, None).unwrap_err();
        assert_eq!(e.message(), "cannot read the JSON input: disk on fire");
    }

    /// A string repeated through a document is stored once when it is short enough to be
    /// interned (charged once), stored inline at no cost when shorter still, and stored (and
    /// charged) every time when longer; keys are interned at any length.
    #[test]
    fn repeated_strings_are_charged_once_when_interned_and_never_when_inline() {
        let used = |doc: &str| decode(doc.as_bytes(), DEPTH, u64::MAX, None).unwrap().1;
        let array = |s: &str| format!("[{}]", vec![format!("\"{s}\""); 100].join(","));
        let vector = footprint::vector(100);
        for len in [
            1,
            INLINE,
            INLINE + 1,
            MAX_INTERNED_LEN,
            MAX_INTERNED_LEN + 1,
        ] {
            let s = "s".repeat(len);
            let copies = match len {
                l if l <= INLINE => 0,
                l if l <= MAX_INTERNED_LEN => 1,
                _ => 100,
            };
            assert_eq!(
                used(&array(&s)),
                vector + copies * footprint::string(len),
                "{len} bytes"
            );
        }
        // The table keeps its first MAX_INTERNED strings: the next one is stored every time.
        let distinct: Vec<String> = (0..=MAX_INTERNED).map(|i| format!("\"{i:020}\"")).collect();
        let doc = format!("[{},{}]", distinct.join(","), distinct[MAX_INTERNED]);
        assert_eq!(
            used(&doc),
            footprint::vector(MAX_INTERNED + 2) + (MAX_INTERNED as u64 + 2) * footprint::string(20)
        );
        let doc = format!("[{},{}]", distinct.join(","), distinct[MAX_INTERNED - 1]);
        assert_eq!(
            used(&doc),
            footprint::vector(MAX_INTERNED + 2) + (MAX_INTERNED as u64 + 1) * footprint::string(20),
            "the last string the table keeps is found again"
        );
        // One object per key: a key longer than any interned value is stored once.
        let key = "k".repeat(MAX_INTERNED_LEN + 1);
        let objects = format!("[{}]", vec![format!("{{\"{key}\": 1}}"); 2].join(","));
        let one = format!("[{{\"{key}\": 1}}]");
        assert_eq!(
            used(&objects) - used(&one),
            footprint::record(1) + footprint::VALUE,
            "the second object shares the first one's key (and its shape)"
        );
    }

    /// The word-at-a-time scan stops exactly where a byte-at-a-time one would, for every
    /// special byte at every offset, among plain bytes of every kind (ASCII, UTF-8, 0x7f).
    #[test]
    fn plain_runs_end_at_the_first_special_byte() {
        let scalar = |b: &[u8], i: usize| {
            (i..b.len())
                .find(|&j| b[j] == b'"' || b[j] == b'\\' || b[j] < 0x20)
                .unwrap_or(b.len())
        };
        for filler in [b'a', b' ', 0x7f, 0x80, 0xc3, 0xff] {
            for special in [b'"', b'\\', 0x00, 0x1f, b'\n'] {
                for len in 0..24 {
                    for at in 0..=len {
                        let mut b = vec![filler; len];
                        if at < len {
                            b[at] = special;
                        }
                        for start in 0..=len.min(9) {
                            let fast = plain_run_end(&b, start);
                            // The fast scan may stop short only in the last 8 bytes, where
                            // the byte loop takes over; it never runs past a special byte.
                            let want = scalar(&b, start);
                            assert!(fast <= want, "{b:?} from {start}: {fast} > {want}");
                            assert!(
                                fast == want || b.len() - fast < 8,
                                "{b:?} from {start}: stopped at {fast}, want {want}"
                            );
                        }
                    }
                }
            }
        }
    }
}
