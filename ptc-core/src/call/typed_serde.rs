//! The serde impls of generated types, and what they share.
//!
//! The code `ptc_upstreams!` writes derives `Encode` (every struct and string enum) and `Decode`
//! (response types), ptc's own derives (`ptc-macros`), which expand to the macros here instead of
//! serde's `Serialize`/`Deserialize` derives: serde's also accept a struct as a positional array
//! and field names as integers or bytes, none of which JSON needs, and their output was three
//! quarters of the code rustc checks for a large catalog (docs/codegen.md, "Build cost"). These
//! encode and decode what serde's derives would as JSON, with the same error messages; the parts
//! that do not depend on the type live here once.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};

/// The serde the macros below name (a deployment crate has no `serde` of its own).
pub use serde;

/// A response struct's `Deserialize`: `decode_struct!(Name { "wire" => field, ... })`. A local
/// per field, filled from the object's keys by wire name (unknown keys skipped); the types come
/// from the struct by inference, so the invocation repeats none. The macro's own names are
/// hygienic, so a field called `map` or `key` is no clash.
#[doc(hidden)]
#[macro_export]
macro_rules! decode_struct {
    ($name:ident { $($wire:literal => $field:ident),* $(,)? }) => {
        impl<'de> $crate::call::typed_serde::serde::Deserialize<'de> for $name {
            fn deserialize<__D: $crate::call::typed_serde::serde::Deserializer<'de>>(
                d: __D,
            ) -> ::core::result::Result<Self, __D::Error> {
                struct __Visitor;
                impl<'de> $crate::call::typed_serde::serde::de::Visitor<'de> for __Visitor {
                    type Value = $name;
                    fn expecting(&self, f: &mut ::core::fmt::Formatter) -> ::core::fmt::Result {
                        f.write_str(concat!("struct ", stringify!($name)))
                    }
                    fn visit_map<__A: $crate::call::typed_serde::serde::de::MapAccess<'de>>(
                        self,
                        mut map: __A,
                    ) -> ::core::result::Result<$name, __A::Error> {
                        $(let mut $field = ::core::option::Option::None;)*
                        while let ::core::option::Option::Some(key) =
                            map.next_key::<$crate::call::typed_serde::Key<'de>>()?
                        {
                            match key.as_str() {
                                $($wire => $crate::call::typed_serde::put(&mut $field, &mut map, $wire)?,)*
                                _ => $crate::call::typed_serde::skip(&mut map)?,
                            }
                        }
                        ::core::result::Result::Ok($name {
                            $($field: $crate::call::typed_serde::take($field, $wire)?,)*
                        })
                    }
                }
                d.deserialize_map(__Visitor)
            }
        }
    };
}

/// A string enum's `Deserialize`: `decode_enum!(Name { "wire" => Variant, ... })`.
#[doc(hidden)]
#[macro_export]
macro_rules! decode_enum {
    ($name:ident { $($wire:literal => $variant:ident),* $(,)? }) => {
        impl<'de> $crate::call::typed_serde::serde::Deserialize<'de> for $name {
            fn deserialize<__D: $crate::call::typed_serde::serde::Deserializer<'de>>(
                d: __D,
            ) -> ::core::result::Result<Self, __D::Error> {
                $crate::call::typed_serde::variant(d, &[$($wire),*], &[$(Self::$variant),*])
            }
        }
    };
}

/// A generated struct's `Serialize`: `encode_struct!(Name { "wire" => field, ... })`, each field
/// under its wire name in declaration order, as serde's derive writes it.
#[doc(hidden)]
#[macro_export]
macro_rules! encode_struct {
    ($name:ident { $($wire:literal => $field:ident),* $(,)? }) => {
        impl $crate::call::typed_serde::serde::Serialize for $name {
            fn serialize<__S: $crate::call::typed_serde::serde::Serializer>(
                &self,
                s: __S,
            ) -> ::core::result::Result<__S::Ok, __S::Error> {
                use $crate::call::typed_serde::serde::ser::SerializeStruct as _;
                let len = <[&str]>::len(&[$($wire),*]);
                let mut out = s.serialize_struct(stringify!($name), len)?;
                $(out.serialize_field($wire, &self.$field)?;)*
                out.end()
            }
        }
    };
}

/// A string enum's `Serialize`: `encode_enum!(Name { "wire" => Variant, ... })`, as serde's
/// derive writes a unit variant.
#[doc(hidden)]
#[macro_export]
macro_rules! encode_enum {
    ($name:ident { $($wire:literal => $variant:ident),* $(,)? }) => {
        impl $crate::call::typed_serde::serde::Serialize for $name {
            fn serialize<__S: $crate::call::typed_serde::serde::Serializer>(
                &self,
                s: __S,
            ) -> ::core::result::Result<__S::Ok, __S::Error> {
                match self {
                    $(Self::$variant => {
                        s.serialize_unit_variant(stringify!($name), Self::$variant as u32, $wire)
                    })*
                }
            }
        }
    };
}

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

/// A field's value once the object is read. A missing field decodes from "missing", as with the
/// derive: an `Option` is `None`, anything else the `missing field` error.
pub fn take<'de, T: Deserialize<'de>, E: de::Error>(
    slot: Option<T>,
    name: &'static str,
) -> Result<T, E> {
    match slot {
        Some(v) => Ok(v),
        None => T::deserialize(Missing(name, std::marker::PhantomData)),
    }
}

/// The value of a field the object does not have.
struct Missing<E>(&'static str, std::marker::PhantomData<E>);

impl<'de, E: de::Error> Deserializer<'de> for Missing<E> {
    type Error = E;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, E> {
        Err(E::missing_field(self.0))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, E> {
        visitor.visit_none()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf unit
        unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier ignored_any
    }
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

    /// The twin with serde's derive, named the same (the name is in some errors).
    mod derived {
        #[derive(Debug, PartialEq, serde::Deserialize, serde::Serialize)]
        pub struct Pair {
            pub a: i64,
            #[serde(rename = "b-b")]
            pub b: Option<String>,
        }
    }

    /// What the generator writes.
    #[derive(Debug, PartialEq)]
    struct Pair {
        a: i64,
        b: Option<String>,
    }

    crate::decode_struct!(Pair { "a" => a, "b-b" => b });
    crate::encode_struct!(Pair { "a" => a, "b-b" => b });

    #[derive(Debug, PartialEq, Clone, Copy, serde::Deserialize)]
    enum Color {
        #[serde(rename = "red")]
        Red,
        #[serde(rename = "dark-blue")]
        DarkBlue,
    }

    /// The derive's twin, from the generated `Deserialize`.
    #[derive(Debug, PartialEq, Clone, Copy)]
    enum Hue {
        Red,
        DarkBlue,
    }

    crate::decode_enum!(Hue { "red" => Red, "dark-blue" => DarkBlue });
    crate::encode_enum!(Hue { "red" => Red, "dark-blue" => DarkBlue });

    /// The generated `Serialize` writes what the derive writes: fields in order under their wire
    /// names, `None` as null, a unit variant as its wire name.
    #[test]
    fn structs_and_enums_encode_as_the_derive_does() {
        for (a, b) in [(1, Some("x")), (-7, None)] {
            let ours = Pair {
                a,
                b: b.map(String::from),
            };
            let derived = derived::Pair {
                a,
                b: b.map(String::from),
            };
            assert_eq!(
                serde_json::to_string(&ours).unwrap(),
                serde_json::to_string(&derived).unwrap()
            );
        }
        assert_eq!(
            serde_json::to_string(&Hue::DarkBlue).unwrap(),
            r#""dark-blue""#
        );
        assert_eq!(serde_json::to_string(&[Hue::Red]).unwrap(), r#"["red"]"#);
    }

    fn color<'de, D: Deserializer<'de>>(d: D) -> Result<Color, D::Error> {
        Hue::deserialize(d).map(|h| match h {
            Hue::Red => Color::Red,
            Hue::DarkBlue => Color::DarkBlue,
        })
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
            let derived = serde_json::from_str::<derived::Pair>(json)
                .map(|d| Pair { a: d.a, b: d.b })
                .map_err(|e| e.to_string());
            let ours = serde_json::from_str::<Pair>(json).map_err(|e| e.to_string());
            assert_eq!(ours, derived, "{json}");
        }
        // The derive also takes a struct as an array; a JSON answer never is one.
        let e = serde_json::from_str::<Pair>("[1, null]").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid type: sequence, expected struct Pair at line 1 column 0"
        );
    }

    /// A key that is not text (possible outside JSON) says what was expected.
    #[test]
    fn a_key_that_is_not_a_string_is_refused_naming_what_was_expected() {
        let e = Key::deserialize(&mut serde_json::Deserializer::from_str("3"))
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "invalid type: integer `3`, expected a string at line 1 column 1"
        );
    }

    /// Fields named like the macro's own locals, or raw.
    #[derive(Debug, PartialEq)]
    struct Awkward {
        map: i64,
        key: Option<i64>,
        d: i64,
        r#type: String,
    }

    crate::decode_struct!(Awkward { "map" => map, "key" => key, "d" => d, "type" => r#type });

    #[test]
    fn field_names_never_clash_with_the_macros_own() {
        let a: Awkward =
            serde_json::from_str(r#"{"type": "t", "d": 3, "key": 2, "map": 1}"#).unwrap();
        assert_eq!(
            a,
            Awkward {
                map: 1,
                key: Some(2),
                d: 3,
                r#type: "t".into()
            }
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
