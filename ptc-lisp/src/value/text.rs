//! The text of strings, keywords, symbols and vars: 15 bytes, so that a [`Value`] is 16.
//!
//! Text of at most [`INLINE`] bytes lives in the value itself: most keys, ids, statuses and
//! names in tool results cost no allocation at all. Longer text is one shared allocation
//! reached by a thin pointer (`triomphe::ThinArc`: its count, the charge that paid for it and
//! its length sit in front of the bytes), where `Arc<str>` needed a pointer and a length.
//!
//! Layout: byte 0 is the length of inline text (`0..=INLINE`), followed by the bytes and zeros;
//! or [`SHARED`], then six zero bytes and the pointer. Because text that fits is always inline
//! and the unused bytes are zero, two texts with equal bytes are equal, and two texts with
//! different bytes are equal only when both are shared ([`Text::same`]).
//!
//! [`Value`]: super::Value
//!
//! One of the workspace's few `unsafe` modules (the lint is denied elsewhere): a value cannot
//! hold a pointer and 14 bytes of text in 15 bytes any other way. Each block says why it holds.
#![allow(unsafe_code)]

use std::cmp::Ordering;
use std::fmt;
use std::mem::ManuallyDrop;
use std::ops::Deref;

use triomphe::ThinArc;

use crate::meter::Charge;

/// The longest text stored inline.
pub const INLINE: usize = 14;

/// Byte 0 of shared text.
const SHARED: u8 = u8::MAX;

/// Where the pointer of shared text starts: offset 8 of a value, as the value's tag is byte 0.
const POINTER: usize = 7;

/// Shared text: its charge and its bytes (valid UTF-8).
type Shared = ThinArc<Charge, u8>;

/// Immutable UTF-8 text, cheap to clone: inline up to [`INLINE`] bytes, shared beyond.
#[repr(C)]
pub struct Text {
    bytes: [u8; 15],
}

// Shared bytes are immutable behind an atomic count (`ThinArc`), so text is `Send + Sync` as the
// byte array says.
const _: () = assert!(std::mem::size_of::<Text>() == 15);

impl Text {
    /// The text of `s`.
    #[inline]
    pub fn new(s: &str) -> Text {
        Text::charged(s, Charge::default())
    }

    /// The text of `s`, paid for by `charge` (credited when the shared bytes are freed; text
    /// stored inline costs nothing of its own, so its charge comes back at once).
    pub(crate) fn charged(s: &str, charge: Charge) -> Text {
        let mut bytes = [0u8; 15];
        if s.len() <= INLINE {
            bytes[0] = s.len() as u8;
            bytes[1..=s.len()].copy_from_slice(s.as_bytes());
        } else {
            let shared = Shared::from_header_and_slice(charge, s.as_bytes());
            bytes[0] = SHARED;
            let raw = Shared::into_raw(shared) as usize;
            bytes[POINTER..].copy_from_slice(&raw.to_ne_bytes());
        }
        Text { bytes }
    }

    /// True when the bytes are shared (longer than [`INLINE`]).
    #[inline]
    fn is_shared(&self) -> bool {
        self.bytes[0] == SHARED
    }

    /// The shared allocation, borrowed: dropping the result must not release it.
    #[inline]
    fn shared(&self) -> ManuallyDrop<Shared> {
        debug_assert!(self.is_shared());
        let mut raw = [0u8; 8];
        raw.copy_from_slice(&self.bytes[POINTER..]);
        // SAFETY: shared text holds the pointer `into_raw` gave for a live allocation, and the
        // copy is never dropped.
        ManuallyDrop::new(unsafe {
            Shared::from_raw(usize::from_ne_bytes(raw) as *const std::ffi::c_void)
        })
    }

    /// The text.
    #[inline]
    pub fn as_str(&self) -> &str {
        let bytes: &[u8] = if self.is_shared() {
            let shared = self.shared();
            let slice = &shared.slice;
            // SAFETY: the slice lives in the allocation, which outlives `&self` (this text
            // holds a count on it); only the borrowed handle goes away here.
            unsafe { std::slice::from_raw_parts(slice.as_ptr(), slice.len()) }
        } else {
            &self.bytes[1..=usize::from(self.bytes[0])]
        };
        // SAFETY: built from a `&str` and never changed.
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }

    /// True when both are the same text, without looking at shared bytes: equal inline bytes,
    /// or the same allocation. False does not mean different ([`PartialEq`] decides).
    #[inline]
    pub fn same(&self, other: &Text) -> bool {
        self.bytes == other.bytes
    }

    /// Takes one more count on shared bytes, for a bitwise copy of this text that will own it
    /// (`Value`'s `Clone`).
    #[inline]
    pub(crate) fn retain(&self) {
        if self.is_shared() {
            std::mem::forget(Shared::clone(&self.shared()));
        }
    }
}

impl Clone for Text {
    #[inline]
    fn clone(&self) -> Text {
        self.retain();
        Text { bytes: self.bytes }
    }
}

impl Drop for Text {
    #[inline]
    fn drop(&mut self) {
        if self.is_shared() {
            drop(ManuallyDrop::into_inner(self.shared()));
        }
    }
}

impl Deref for Text {
    type Target = str;
    #[inline]
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for Text {
    #[inline]
    fn eq(&self, other: &Text) -> bool {
        // Inline text equals only inline text with the same bytes.
        self.same(other)
            || (self.is_shared() && other.is_shared() && self.as_str() == other.as_str())
    }
}
impl Eq for Text {}

impl PartialOrd for Text {
    fn partial_cmp(&self, other: &Text) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Text {
    fn cmp(&self, other: &Text) -> Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl From<&str> for Text {
    #[inline]
    fn from(s: &str) -> Text {
        Text::new(s)
    }
}

impl From<String> for Text {
    fn from(s: String) -> Text {
        Text::new(&s)
    }
}

impl From<&std::sync::Arc<str>> for Text {
    fn from(s: &std::sync::Arc<str>) -> Text {
        Text::new(s)
    }
}

impl From<char> for Text {
    fn from(c: char) -> Text {
        Text::new(c.encode_utf8(&mut [0; 4]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_up_to_fourteen_bytes_is_inline_and_longer_text_is_shared() {
        for len in [0, 1, INLINE - 1, INLINE, INLINE + 1, 100] {
            let s = "é".repeat(len / 2) + &"x".repeat(len % 2);
            let t = Text::new(&s);
            assert_eq!(t.as_str(), s);
            assert_eq!(t.len(), len);
            assert_eq!(t.is_shared(), len > INLINE, "{len} bytes");
            let copy = t.clone();
            assert!(copy.same(&t) && copy == t);
            drop(t);
            assert_eq!(copy.as_str(), s, "the copy outlives the original");
        }
    }

    #[test]
    fn equal_texts_are_equal_whether_or_not_they_share_bytes() {
        let long = "a".repeat(40);
        let (a, b) = (Text::new(&long), Text::new(&long));
        assert!(!a.same(&b), "two allocations");
        assert_eq!(a, b);
        assert_ne!(a, Text::new(&"a".repeat(41)));
        assert_ne!(Text::new("ab"), Text::new("ac"));
        assert_ne!(Text::new("a"), Text::new("a\0"));
        assert_eq!(Text::new("").as_str(), "");
        assert!(Text::new("b") > Text::new("a") && Text::new(&long) > Text::new("a"));
        assert_eq!(format!("{:?}", Text::new("a\"b")), r#""a\"b""#);
        assert_eq!(format!("{}", Text::new(&long)), long);
    }

    #[test]
    fn shared_text_is_freed_with_its_last_copy() {
        let t = Text::new(&"z".repeat(20));
        let shared = ManuallyDrop::into_inner(t.shared());
        let counted = shared.clone();
        std::mem::forget(shared);
        assert_eq!(Shared::strong_count(&counted), 2);
        let copies: Vec<Text> = (0..3).map(|_| t.clone()).collect();
        assert_eq!(Shared::strong_count(&counted), 5);
        drop(copies);
        drop(t);
        assert_eq!(
            Shared::strong_count(&counted),
            1,
            "only the test's own count is left"
        );
    }
}
