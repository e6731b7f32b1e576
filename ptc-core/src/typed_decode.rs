//! What the generated response types' `Deserialize` impls share.
//!
//! `ptc_upstreams!` writes a small `Deserialize` impl per response struct and string enum instead
//! of `#[derive(Deserialize)]`: serde's derive also accepts a struct as a positional array and
//! field names as integers or bytes, none of which JSON answers need, and its output was three
//! quarters of the code rustc checks for a large catalog (docs/codegen.md, "Build cost"). The
//! generated impls decode exactly what the derive would from a JSON object or string, with the
//! same error messages; the parts that do not depend on the type live here once.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};

/// An object key or enum value, borrowed from the input when it can be (no escapes).
pub struct Key<'de>(Cow<'de, str>);

impl Key<'_> {
    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// Reads the value of field `name` into its slot; a field given twice is an error, as with the
/// derive.
pub fn put<'de, T: Deserialize<'de>, A: MapAccess<'de>>(
    slot: &mut Option<T>,
    map: &mut A,
    name: &'static str,
) -> Result<(), A::Error> {
    if slot.is_some() {
        return Err(de::Error::duplicate_field(name));
    }
    *slot = Some(map.next_value()?);
    Ok(())
}

/// Skips the value of a field the type does not know.
pub fn skip<'de, A: MapAccess<'de>>(map: &mut A) -> Result<(), A::Error> {
    map.next_value::<IgnoredAny>().map(drop)
}

/// A required field's value, or the derive's `missing field` error.
pub fn need<T, E: de::Error>(slot: Option<T>, name: &'static str) -> Result<T, E> {
    slot.ok_or_else(|| E::missing_field(name))
}

/// A struct's decoding: `fields` is called with each key and the map positioned at its value
/// and answers whether it knew the key; `finish` builds the struct from what was read.
pub trait Fields<'de>: Default {
    /// The struct this decodes to.
    type Out;
    /// The struct's name, for `invalid type` errors.
    const NAME: &'static str;
    /// Reads the value of `key` if it is a field of the struct.
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error>;
    /// The struct, or the first required field that was missing.
    fn finish<E: de::Error>(self) -> Result<Self::Out, E>;
}

/// Decodes a JSON object through `F`, skipping unknown keys.
pub fn object<'de, D: Deserializer<'de>, F: Fields<'de>>(d: D) -> Result<F::Out, D::Error> {
    struct ObjectVisitor<'de, F>(PhantomData<(&'de (), F)>);
    impl<'de, F: Fields<'de>> Visitor<'de> for ObjectVisitor<'de, F> {
        type Value = F::Out;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "struct {}", F::NAME)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<F::Out, A::Error> {
            let mut fields = F::default();
            while let Some(key) = map.next_key::<Key<'de>>()? {
                if !fields.field(key.as_str(), &mut map)? {
                    skip(&mut map)?;
                }
            }
            fields.finish()
        }
    }
    d.deserialize_map(ObjectVisitor::<F>(PhantomData))
}

/// Decodes a string enum: the value whose wire name is the string, or the derive's `unknown
/// variant` error naming the expected ones.
pub fn variant<'de, D: Deserializer<'de>, T: Copy>(
    d: D,
    names: &'static [&'static str],
    values: &[T],
) -> Result<T, D::Error> {
    // The lookup runs inside the deserializer, which adds the position to its errors.
    struct VariantVisitor<'v, T> {
        names: &'static [&'static str],
        values: &'v [T],
    }
    impl<'de, T: Copy> Visitor<'de> for VariantVisitor<'_, T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "one of `{}`", self.names.join("`, `"))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
            match self.names.iter().position(|n| *n == v) {
                Some(i) => Ok(self.values[i]),
                None => Err(E::unknown_variant(v, self.names)),
            }
        }
    }
    d.deserialize_str(VariantVisitor { names, values })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the generator writes for `struct Pair { a: i64, b: Option<String> }`.
    #[derive(Debug, PartialEq, serde::Deserialize)]
    struct Derived {
        a: i64,
        #[serde(rename = "b-b")]
        b: Option<String>,
    }

    #[derive(Debug, PartialEq)]
    struct Pair {
        a: i64,
        b: Option<String>,
    }

    #[derive(Default)]
    struct PairFields {
        a: Option<i64>,
        b: Option<Option<String>>,
    }

    impl<'de> Fields<'de> for PairFields {
        type Out = Pair;
        const NAME: &'static str = "Derived";
        fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
            match key {
                "a" => put(&mut self.a, map, "a")?,
                "b-b" => put(&mut self.b, map, "b-b")?,
                _ => return Ok(false),
            }
            Ok(true)
        }
        fn finish<E: de::Error>(self) -> Result<Pair, E> {
            Ok(Pair {
                a: need(self.a, "a")?,
                b: self.b.flatten(),
            })
        }
    }

    impl<'de> Deserialize<'de> for Pair {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            object::<D, PairFields>(d)
        }
    }

    #[derive(Debug, PartialEq, Clone, Copy, serde::Deserialize)]
    enum Color {
        #[serde(rename = "red")]
        Red,
        #[serde(rename = "dark-blue")]
        DarkBlue,
    }

    fn color<'de, D: Deserializer<'de>>(d: D) -> Result<Color, D::Error> {
        variant(d, &["red", "dark-blue"], &[Color::Red, Color::DarkBlue])
    }

    /// The generated impls answer what serde's derive answers, error messages included.
    #[test]
    fn structs_decode_and_fail_as_the_derive_does() {
        for json in [
            r#"{"a": 1, "b-b": "x"}"#,
            r#"{"a": 1}"#,
            r#"{"a": 1, "b-b": null, "other": {"deep": [1, 2]}}"#,
            r#"{"b-b": "x"}"#,
            r#"{"a": 1, "a": 2}"#,
            r#"{"a": "one"}"#,
            r#""text""#,
            r#"{"a\u0062": 1, "a": 3, "b\u002db": "esc\u0061ped"}"#,
        ] {
            let derived = serde_json::from_str::<Derived>(json)
                .map(|d| Pair { a: d.a, b: d.b })
                .map_err(|e| e.to_string());
            let ours = serde_json::from_str::<Pair>(json).map_err(|e| e.to_string());
            assert_eq!(ours, derived, "{json}");
        }
        // The derive also takes a struct as an array; a JSON answer never is one.
        let e = serde_json::from_str::<Pair>("[1, null]").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid type: sequence, expected struct Derived at line 1 column 0"
        );
    }

    #[test]
    fn string_enums_decode_and_fail_as_the_derive_does() {
        for json in [
            r#""red""#,
            r#""dark-blue""#,
            r#""dark\u002dblue""#,
            r#""green""#,
        ] {
            let derived = serde_json::from_str::<Color>(json).map_err(|e| e.to_string());
            let ours =
                color(&mut serde_json::Deserializer::from_str(json)).map_err(|e| e.to_string());
            assert_eq!(ours, derived, "{json}");
        }
        // Where the derive says only "expected value", the error names what was expected.
        let e = color(&mut serde_json::Deserializer::from_str("3")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid type: integer `3`, expected one of `red`, `dark-blue` at line 1 column 1"
        );
        // From an owned value as well as borrowed text.
        let v = serde_json::json!("dark-blue");
        assert_eq!(color(v).unwrap(), Color::DarkBlue);
    }
}
