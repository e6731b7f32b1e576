//! `ptc_upstreams!("upstreams.json")`: typed code for a deployment's upstreams, generated at
//! compile time from the config and every OpenAPI document it names.
//!
//! A thin shell over `ptc-codegen` (which `ptc expand` also uses): it resolves the literal,
//! turns every diagnostic into an error spanned on the literal (all at once, in `ptc check`'s
//! wording), and ends the expansion with an `include_bytes!` of each file read so editing the
//! config or a document re-runs the macro. See `docs/codegen.md`.

#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Component, Path, PathBuf};

use proc_macro::TokenStream;
use quote::quote;
use syn::LitStr;

/// Generates one module per upstream of the config (typed argument structs, each a
/// `ptc_core::Operation` that `Upstreams::run` calls, and response types) and `plan()`, the
/// compiled plan.
///
/// The path is relative to the crate's `Cargo.toml`. `schema_url` upstreams compile from the
/// copy `ptc vendor` keeps in `vendored/` next to the config. The generated code names its
/// runtime through the `ptc` facade (`::ptc::Operation`, `::ptc::Plan`, serde through
/// `::ptc::__private`), so the crate using the macro depends on `ptc` only, and calls it as
/// `ptc::upstreams!`.
///
/// `ptc_upstreams!("upstreams.json", typed = ["github/pulls-list-reviews"])` generates typed
/// code only for the tools named (every tool stays in the plan, for programs): a crate that
/// calls a few operations of a large API compiles only their types.
mod serde_derives;

/// A generated type's `Serialize` (`ptc_core::encode_struct!`/`encode_enum!`), honouring the
/// `#[serde(rename)]`/`#[serde(rename_all = "snake_case")]` the generator writes. Used by the
/// code `ptc_upstreams!` writes, instead of serde's derive.
#[proc_macro_derive(Encode, attributes(serde))]
pub fn derive_encode(input: TokenStream) -> TokenStream {
    serde_impl(input, "encode")
}

/// A generated response type's `Deserialize` (`ptc_core::decode_struct!`/`decode_enum!`); see
/// [`derive_encode`].
#[proc_macro_derive(Decode, attributes(serde))]
pub fn derive_decode(input: TokenStream) -> TokenStream {
    serde_impl(input, "decode")
}

fn serde_impl(input: TokenStream, which: &str) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    serde_derives::derive(&input, which)
        .unwrap_or_else(|e| e.to_compile_error())
        .into()
}

#[proc_macro]
pub fn ptc_upstreams(input: TokenStream) -> TokenStream {
    let args = match syn::parse::<Args>(input) {
        Ok(args) => args,
        Err(e) => {
            return syn::Error::new(
                e.span(),
                "expected the config path as a string literal, then optionally the tools to type: \
                 ptc_upstreams!(\"upstreams.json\") or ptc_upstreams!(\"upstreams.json\", typed = \
                 [\"server/tool\"])",
            )
            .to_compile_error()
            .into();
        }
    };
    let lit = &args.config;
    let typed = args.typed.as_ref();
    let expanded = catch_unwind(AssertUnwindSafe(|| expand(lit, typed))).unwrap_or_else(|_| {
        Err(syn::Error::new(
            lit.span(),
            "internal error in ptc_upstreams! (a ptc-codegen bug; please report it)",
        ))
    });
    expanded.unwrap_or_else(|e| e.to_compile_error()).into()
}

/// The macro's input: the config path, and optionally `typed = ["server/tool", ...]`.
struct Args {
    config: LitStr,
    typed: Option<std::collections::BTreeSet<String>>,
}

impl syn::parse::Parse for Args {
    fn parse(input: syn::parse::ParseStream<'_>) -> syn::Result<Self> {
        let config: LitStr = input.parse()?;
        let mut typed = None;
        if input.parse::<Option<syn::Token![,]>>()?.is_some() && !input.is_empty() {
            let key: syn::Ident = input.parse()?;
            if key != "typed" {
                return Err(syn::Error::new(
                    key.span(),
                    "the only option is `typed = [...]`",
                ));
            }
            input.parse::<syn::Token![=]>()?;
            let list;
            syn::bracketed!(list in input);
            let names =
                syn::punctuated::Punctuated::<LitStr, syn::Token![,]>::parse_terminated(&list)?;
            typed = Some(names.iter().map(LitStr::value).collect());
            input.parse::<Option<syn::Token![,]>>()?;
        }
        Ok(Args { config, typed })
    }
}

fn expand(
    lit: &LitStr,
    typed: Option<&std::collections::BTreeSet<String>>,
) -> Result<proc_macro2::TokenStream, syn::Error> {
    let relative = lit.value();
    if Path::new(&relative).is_absolute() {
        return Err(syn::Error::new(
            lit.span(),
            "the config path must be relative to the crate's Cargo.toml, so the build works on every machine",
        ));
    }
    let base = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .ok_or_else(|| {
            syn::Error::new(
                lit.span(),
                "CARGO_MANIFEST_DIR is not set: build with cargo",
            )
        })?;
    let config = normalize(&base.join(&relative));
    let expansion = ptc_codegen::expansion::expand_typed(&config, typed).map_err(|diags| {
        let prefix = format!("{}/", normalize(&base).display());
        diags
            .iter()
            .map(|d| {
                let text = d.to_string();
                let text = text.strip_prefix("error: ").unwrap_or(&text);
                syn::Error::new(lit.span(), text.replace(&prefix, ""))
            })
            .reduce(|mut all, e| {
                all.combine(e);
                all
            })
            .unwrap_or_else(|| syn::Error::new(lit.span(), "the config could not be compiled"))
    })?;
    let tokens = expansion.tokens;
    let tracked = expansion.files.iter().map(|f| f.display().to_string());
    Ok(quote! {
        #tokens
        #(const _: &[u8] = include_bytes!(#tracked);)*
    })
}

/// `a/b/../c` → `a/c`, without touching the file system (the file may not exist yet; the
/// loader says so with a proper message).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}
