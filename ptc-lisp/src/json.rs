//! JSON in and out. Decoding goes straight from bytes to [`Value`]s (no intermediate
//! `serde_json::Value`), interns object keys and short strings (tool results repeat them
//! millions of times), enforces a depth limit and charges the memory budget as it goes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use crate::error::{LispError, Reason};
use crate::limits::Limits;
use crate::printer::format_float;
use crate::value::{FxBuild, Items, MapData, SMALL_MAP, Shape, Value};

const VALUE_BYTES: u64 = std::mem::size_of::<Value>() as u64;
/// Keys, and strings up to this many bytes, are shared through the intern table.
const MAX_INTERNED_LEN: usize = 32;
/// The intern table stops growing here: small enough to stay in cache (at 65 536 entries the
/// probes of a 50 MB trace list missed it and the decode took a fifth longer). Values that
/// repeat (statuses, models, tool names) are met early; ids and free text never repeat.
const MAX_INTERNED: usize = 1 << 12;
/// Depths and positions within an object whose last key is remembered (a plain array: a hash
/// lookup per key cost more than the hint saved).
const HINT_SIDE: usize = 16;
/// Nesting depths with a remembered object shape (deeper objects share the last slot).
const SHAPE_SLOTS: usize = 16;

struct Decoder<'a> {
    b: &'a [u8],
    i: usize,
    max_depth: usize,
    budget: u64,
    used: u64,
    deadline: Option<Instant>,
    count: u64,
    interned: HashMap<&'a [u8], Arc<str>, FxBuild>,
    /// The key last seen at each (depth, position) slot, `HINT_SIDE` × `HINT_SIDE` of them.
    key_hints: Vec<Option<Arc<str>>>,
    scratch: Vec<Value>,
    scratch_pairs: Vec<(Value, Value)>,
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

fn jerr(msg: impl Into<String>) -> LispError {
    LispError::new(Reason::ParseError, msg)
}

impl<'a> Decoder<'a> {
    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\n' | b'\r' | b'\t') {
            self.i += 1;
        }
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
            self.charge(n as u64 * 2 * VALUE_BYTES + 32)?;
            let mut m = MapData::with_capacity(n);
            for (k, x) in self.scratch_pairs.drain(start..) {
                m.insert(k, x);
            }
            return Ok(Value::Map(Arc::new(m)));
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
                    .all(|(a, (b, _))| a.fast_eq(b))
        });
        if hit && let Some(shape) = self.shapes[slot].clone() {
            self.charge(n as u64 * VALUE_BYTES + 32)?;
            let values: Box<[Value]> = self.scratch_pairs.drain(start..).map(|(_, v)| v).collect();
            return Ok(Value::Map(Arc::new(MapData::Record(shape, values))));
        }
        self.charge(n as u64 * 2 * VALUE_BYTES + 32)?;
        let mut v: Vec<(Value, Value)> = Vec::with_capacity(n);
        // Duplicate keys are rare: the last one wins, as in most JSON decoders.
        for (k, x) in self.scratch_pairs.drain(start..) {
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
        Ok(Value::Map(Arc::new(MapData::Small(v))))
    }

    fn finish_array(&mut self, start: usize) -> Result<Value, LispError> {
        let n = self.scratch.len() - start;
        self.charge(n as u64 * VALUE_BYTES + 32)?;
        let items: Vec<Value> = self.scratch.drain(start..).collect();
        Ok(Value::Vector(Arc::new(Items(items))))
    }

    /// Reads `"key":` (after the opening quote has been checked).
    /// Reads `"key":`. `slot` identifies the key's place (nesting depth and position in its
    /// object): arrays of records repeat the same keys in the same places, so the key seen there
    /// last time is tried first, without hashing.
    fn key(&mut self, slot: (usize, usize)) -> Result<Arc<str>, LispError> {
        self.ws();
        if self.b.get(self.i) != Some(&b'"') {
            return Err(jerr(format!("expected a string key at byte {}", self.i)));
        }
        self.i += 1;
        let index = (slot.0 < HINT_SIDE && slot.1 < HINT_SIDE).then(|| slot.0 * HINT_SIDE + slot.1);
        let hinted = index.and_then(|i| self.key_hints[i].clone());
        let k = match hinted {
            Some(h)
                if self.b.get(self.i..self.i + h.len()) == Some(h.as_bytes())
                    && self.b.get(self.i + h.len()) == Some(&b'"') =>
            {
                self.i += h.len() + 1;
                h
            }
            _ => {
                let k = self.string(true)?;
                // Only keys whose raw form is their text can be matched byte for byte later.
                let plain = k.bytes().all(|c| c >= 0x20 && c != b'"' && c != b'\\');
                if plain && let Some(i) = index {
                    self.key_hints[i] = Some(k.clone());
                }
                k
            }
        };
        self.ws();
        if self.b.get(self.i) != Some(&b':') {
            return Err(jerr(format!("expected `:` at byte {}", self.i)));
        }
        self.i += 1;
        Ok(k)
    }

    /// Parses one value with an explicit stack (no recursion, whatever the nesting).
    fn value(&mut self) -> Result<Value, LispError> {
        enum Open {
            Arr(usize),
            Obj(usize, Option<Arc<str>>),
        }
        let mut stack: Vec<Open> = Vec::new();
        loop {
            self.tick()?;
            self.ws();
            let c = match self.b.get(self.i) {
                Some(c) => *c,
                None => return Err(jerr(format!("unexpected end of JSON at byte {}", self.i))),
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
                    self.ws();
                    if c == b'{' {
                        let start = self.scratch_pairs.len();
                        if self.b.get(self.i) == Some(&b'}') {
                            self.i += 1;
                            self.finish_object(start, stack.len())?
                        } else {
                            let k = self.key((stack.len(), 0))?;
                            stack.push(Open::Obj(start, Some(k)));
                            continue;
                        }
                    } else {
                        let start = self.scratch.len();
                        if self.b.get(self.i) == Some(&b']') {
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
                        c as char, self.i
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
                        self.ws();
                        match self.b.get(self.i) {
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
                                    self.i
                                )));
                            }
                        }
                    }
                    Some(Open::Obj(start, key)) => {
                        let start = *start;
                        let k = key.take().unwrap_or_else(|| Arc::from(""));
                        self.scratch_pairs.push((Value::Str(k), v));
                        self.ws();
                        match self.b.get(self.i) {
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
                                    self.i
                                )));
                            }
                        }
                    }
                }
            }
        }
    }

    fn lit(&mut self, word: &[u8], v: Value) -> Result<Value, LispError> {
        if self.b[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(v)
        } else {
            Err(jerr(format!("invalid literal at byte {}", self.i)))
        }
    }

    fn number(&mut self) -> Result<Value, LispError> {
        let start = self.i;
        let mut neg = false;
        if self.b[self.i] == b'-' {
            neg = true;
            self.i += 1;
        }
        let mut acc: i64 = 0;
        let mut overflow = false;
        let digits_start = self.i;
        while let Some(c) = self.b.get(self.i).copied().filter(u8::is_ascii_digit) {
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
            return Err(jerr(format!("invalid number at byte {start}")));
        }
        let mut is_float = false;
        if self.b.get(self.i) == Some(&b'.') {
            is_float = true;
            self.i += 1;
            while self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
                self.i += 1;
            }
        }
        if matches!(self.b.get(self.i), Some(b'e' | b'E')) {
            is_float = true;
            self.i += 1;
            if matches!(self.b.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            while self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
                self.i += 1;
            }
        }
        if !is_float && !overflow {
            return Ok(Value::Int(if neg { -acc } else { acc }));
        }
        let text =
            std::str::from_utf8(&self.b[start..self.i]).map_err(|_| jerr("invalid number"))?;
        text.parse::<f64>()
            .map(Value::Float)
            .map_err(|_| jerr(format!("invalid number `{text}`")))
    }

    /// Reads a string body (after the opening quote).
    fn string(&mut self, key: bool) -> Result<Arc<str>, LispError> {
        let start = self.i;
        self.i = plain_run_end(self.b, self.i);
        while let Some(&c) = self.b.get(self.i) {
            if c == b'"' {
                let raw = &self.b[start..self.i];
                self.i += 1;
                if key || raw.len() <= MAX_INTERNED_LEN {
                    if let Some(s) = self.interned.get(raw) {
                        return Ok(s.clone());
                    }
                    let s: Arc<str> = std::str::from_utf8(raw)
                        .map_err(|_| jerr("invalid UTF-8 in JSON string"))?
                        .into();
                    self.charge(raw.len() as u64 + 16)?;
                    if self.interned.len() < MAX_INTERNED {
                        self.interned.insert(raw, s.clone());
                    }
                    return Ok(s);
                }
                self.charge(raw.len() as u64 + 16)?;
                let s =
                    std::str::from_utf8(raw).map_err(|_| jerr("invalid UTF-8 in JSON string"))?;
                return Ok(s.into());
            }
            if c == b'\\' || c < 0x20 {
                break;
            }
            self.i += 1;
        }
        // Slow path with escapes.
        self.buf.clear();
        self.buf.push_str(
            std::str::from_utf8(&self.b[start..self.i])
                .map_err(|_| jerr("invalid UTF-8 in JSON string"))?,
        );
        loop {
            let c = match self.b.get(self.i) {
                Some(c) => *c,
                None => return Err(jerr("unterminated JSON string")),
            };
            match c {
                b'"' => {
                    self.i += 1;
                    self.charge(self.buf.len() as u64 + 16)?;
                    return Ok(self.buf.as_str().into());
                }
                b'\\' => {
                    self.i += 1;
                    let e = self
                        .b
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
                                if self.b.get(self.i) == Some(&b'\\')
                                    && self.b.get(self.i + 1) == Some(&b'u')
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
                    let run_start = self.i;
                    while let Some(&c) = self.b.get(self.i) {
                        if c == b'"' || c == b'\\' || c < 0x20 {
                            break;
                        }
                        self.i += 1;
                    }
                    let s = std::str::from_utf8(&self.b[run_start..self.i])
                        .map_err(|_| jerr("invalid UTF-8 in JSON string"))?;
                    self.buf.push_str(s);
                }
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, LispError> {
        let h = self
            .b
            .get(self.i..self.i + 4)
            .ok_or_else(|| jerr("truncated \\u escape"))?;
        let s = std::str::from_utf8(h).map_err(|_| jerr("invalid \\u escape"))?;
        let v = u32::from_str_radix(s, 16).map_err(|_| jerr("invalid \\u escape"))?;
        self.i += 4;
        Ok(v)
    }
}

/// Decodes JSON; returns the value and the bytes charged.
pub(crate) fn decode(
    bytes: &[u8],
    max_depth: usize,
    budget: u64,
    deadline: Option<Instant>,
) -> Result<(Value, u64), LispError> {
    let mut d = Decoder {
        b: bytes,
        i: 0,
        max_depth,
        budget,
        used: 0,
        deadline,
        count: 0,
        // Sized from the input (a short string per ~128 bytes, up to the cap) so the table is
        // not rehashed as it fills, and a small document does not pay for a large table.
        interned: HashMap::with_capacity_and_hasher(
            (bytes.len() / 128).min(MAX_INTERNED),
            FxBuild::default(),
        ),
        key_hints: vec![None; HINT_SIDE * HINT_SIDE],
        scratch: Vec::new(),
        scratch_pairs: Vec::new(),
        shapes: Default::default(),
        buf: String::new(),
    };
    let v = d.value()?;
    d.ws();
    if d.i != bytes.len() {
        return Err(jerr(format!(
            "trailing characters after JSON value at byte {}",
            d.i
        )));
    }
    Ok((v, d.used))
}

impl Value {
    /// Decodes JSON bytes straight into values, with `limits.max_json_depth` and
    /// `limits.max_memory_bytes` applied.
    pub fn from_json_bytes(bytes: &[u8], limits: &Limits) -> Result<Value, LispError> {
        decode(bytes, limits.max_json_depth, limits.max_memory_bytes, None).map(|(v, _)| v)
    }

    /// Encodes as JSON: keywords and symbols become strings, sets become arrays, map keys are
    /// stringified, non-finite floats become `null`. Errors on functions and on nesting beyond
    /// the printer's bound.
    pub fn to_json_string(&self) -> Result<String, LispError> {
        let mut out = String::new();
        encode(self, &mut out, 0, usize::MAX, false)?;
        Ok(out)
    }

    /// Encodes as JSON for a tool boundary, the way the reference sends tool arguments: like
    /// [`Value::to_json_string`], but every map key (nested ones included) has `-` replaced by
    /// `_`, so `{:org-id "acme"}` is sent as `{"org_id":"acme"}`. Keyword *values* keep their
    /// hyphens (`:production` → `"production"`).
    pub fn to_tool_json_string(&self) -> Result<String, LispError> {
        let mut out = String::new();
        encode(self, &mut out, 0, usize::MAX, true)?;
        Ok(out)
    }
}

const MAX_ENCODE_DEPTH: usize = 1_000;

fn encode_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn key_string(k: &Value) -> String {
    match k {
        Value::Str(s) | Value::Keyword(s) | Value::Symbol(s) => s.to_string(),
        other => {
            let mut s = String::new();
            crate::printer::to_str(other, &mut s);
            s
        }
    }
}

/// Encodes `v`, failing with `memory_exceeded` once the text is longer than `limit`.
pub(crate) fn encode(
    v: &Value,
    out: &mut String,
    depth: usize,
    limit: usize,
    underscore: bool,
) -> Result<(), LispError> {
    if out.len() > limit {
        return Err(LispError::new(
            Reason::MemoryExceeded,
            "JSON text would exceed the memory budget",
        ));
    }
    if depth > MAX_ENCODE_DEPTH {
        return Err(LispError::new(
            Reason::DepthExceeded,
            "value nested too deeply to encode as JSON",
        ));
    }
    match v {
        Value::Nil => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => out.push_str(&i.to_string()),
        Value::Float(f) => {
            if f.is_finite() {
                let mut s = String::new();
                format_float(*f, &mut s);
                out.push_str(&s.replace('E', "e"));
            } else {
                out.push_str("null");
            }
        }
        Value::Str(s) | Value::Keyword(s) | Value::Symbol(s) => encode_str(s, out),
        Value::Var(s) => encode_str(&format!("#'{s}"), out),
        Value::Regex(r) => encode_str(r.as_str(), out),
        Value::Func(f) => {
            return Err(LispError::new(
                Reason::TypeError,
                format!("cannot encode function {} as JSON", f.name()),
            ));
        }
        Value::Vector(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                encode(x, out, depth + 1, limit, underscore)?;
            }
            out.push(']');
        }
        Value::Set(s) => {
            out.push('[');
            for (i, x) in s.sorted().into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                encode(x, out, depth + 1, limit, underscore)?;
            }
            out.push(']');
        }
        Value::Map(m) => {
            out.push('{');
            let mut entries: Vec<(String, &Value)> = m
                .iter()
                .map(|(k, v)| {
                    let k = key_string(k);
                    (if underscore { k.replace('-', "_") } else { k }, v)
                })
                .collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            for (i, (k, x)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                encode_str(&k, out);
                out.push(':');
                encode(x, out, depth + 1, limit, underscore)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::plain_run_end;

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
