//! `#[derive(Encode, Decode)]`: a generated type's `Serialize` and `Deserialize`, as calls of
//! `ptc_core`'s `encode_struct!`/`decode_struct!` (`encode_enum!`/`decode_enum!`) listing each
//! field's (variant's) wire name. `ptc_upstreams!` puts them on its structs and string enums
//! instead of serde's derives (docs/codegen.md, "Build cost"). They read the
//! `#[serde(rename)]` and `#[serde(rename_all = "snake_case")]` attributes the generator writes and
//! name the wire names serde would.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::{Data, DeriveInput, Fields, Ident, LitStr};

/// `ptc_core::<which>_struct!` or `<which>_enum!` for `input` (`which` is `encode` or
/// `decode`), or an error spanned on what it cannot take.
pub fn derive(input: &DeriveInput, which: &str) -> syn::Result<TokenStream> {
    let name = &input.ident;
    let (kind, entries) = match &input.data {
        Data::Struct(data) => ("struct", fields(input, &data.fields)?),
        Data::Enum(data) => ("enum", variants(input, data)?),
        Data::Union(_) => return Err(unsupported(input)),
    };
    let mac = format_ident!("{which}_{kind}");
    let entries = entries.iter().map(|(wire, id)| quote!(#wire => #id));
    Ok(quote!(::ptc::__private::#mac!(#name { #(#entries),* });))
}

/// Each named field's wire name (its rename, else `ptc_codegen::serde_field_name`) and
/// identifier.
fn fields(input: &DeriveInput, fields: &Fields) -> syn::Result<Vec<(String, Ident)>> {
    let Fields::Named(named) = fields else {
        return Err(unsupported(input));
    };
    let mut out = Vec::with_capacity(named.named.len());
    for field in &named.named {
        let Some(id) = &field.ident else { continue };
        let wire = match attr(&field.attrs, "rename")? {
            Some(w) => w,
            None => ptc_codegen::serde_field_name(id),
        };
        out.push((wire, id.clone()));
    }
    Ok(out)
}

/// Each unit variant's wire name (its rename, else its identifier, snake_cased under
/// `rename_all = "snake_case"`) and identifier.
fn variants(input: &DeriveInput, data: &syn::DataEnum) -> syn::Result<Vec<(String, Ident)>> {
    let snake = match attr(&input.attrs, "rename_all")?.as_deref() {
        None => false,
        Some("snake_case") => true,
        Some(_) => return Err(unsupported(input)),
    };
    let mut out = Vec::with_capacity(data.variants.len());
    for variant in &data.variants {
        if !matches!(variant.fields, Fields::Unit) {
            return Err(unsupported(input));
        }
        let id = &variant.ident;
        let wire = match attr(&variant.attrs, "rename")? {
            Some(w) => w,
            None if snake => ptc_codegen::serde_snake(&id.to_string()),
            None => id.to_string(),
        };
        out.push((wire, id.clone()));
    }
    Ok(out)
}

fn unsupported(input: &DeriveInput) -> syn::Error {
    syn::Error::new_spanned(
        &input.ident,
        "ptc's Encode and Decode derives take a struct with named fields or an enum of unit \
         variants (renamed one by one or with rename_all = \"snake_case\")",
    )
}

/// The value of `#[serde(<key> = "...")]` among `attrs`.
fn attr(attrs: &[syn::Attribute], key: &str) -> syn::Result<Option<String>> {
    let mut found = None;
    for a in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        a.parse_nested_meta(|meta| {
            if meta.path.is_ident(key) {
                found = Some(meta.value()?.parse::<LitStr>()?.value());
            } else if meta.input.peek(syn::Token![=]) {
                // Another key's value (`crate = "..."`): read past it.
                meta.value()?.parse::<LitStr>()?;
            }
            Ok(())
        })?;
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::derive;

    fn expand(src: &str, which: &str) -> String {
        let input = syn::parse_str(src).unwrap();
        match derive(&input, which) {
            Ok(tokens) => tokens.to_string(),
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    fn fields_are_named_as_serde_names_them() {
        let src = r#"
            #[serde(crate = "::ptc::__private::serde")]
            struct S {
                /// Doc.
                plain: i64,
                #[serde(rename = "b-b")]
                renamed: String,
                r#type: Option<String>,
                #[serde(rename = "self")]
                self_: String,
            }"#;
        assert_eq!(
            expand(src, "decode"),
            r#":: ptc :: __private :: decode_struct ! (S { "plain" => plain , "b-b" => renamed , "type" => r#type , "self" => self_ }) ;"#
        );
        assert!(expand(src, "encode").starts_with(":: ptc :: __private :: encode_struct ! (S {"));
    }

    #[test]
    fn variants_are_named_as_serde_names_them() {
        let snake = r#"
            #[serde(rename_all = "snake_case")]
            enum E { InProgress, Done, #[serde(rename = "+1")] Plus1 }"#;
        assert_eq!(
            expand(snake, "encode"),
            r#":: ptc :: __private :: encode_enum ! (E { "in_progress" => InProgress , "done" => Done , "+1" => Plus1 }) ;"#
        );
        let plain = "enum E { InProgress, Done }";
        assert_eq!(
            expand(plain, "decode"),
            r#":: ptc :: __private :: decode_enum ! (E { "InProgress" => InProgress , "Done" => Done }) ;"#
        );
    }

    #[test]
    fn shapes_the_generator_never_writes_are_refused_by_name() {
        for src in [
            "struct T(i64);",
            "union U { a: u32 }",
            "enum E { A(i64) }",
            r#"#[serde(rename_all = "camelCase")] enum E { A }"#,
        ] {
            let out = expand(src, "encode");
            assert!(
                out.starts_with(
                    "error: ptc's Encode and Decode derives take a struct with named fields"
                ),
                "{src}: {out}"
            );
        }
        let out = expand(r#"struct S { #[serde(rename = 3)] a: i64 }"#, "decode");
        assert!(out.starts_with("error: expected string literal"), "{out}");
    }
}
