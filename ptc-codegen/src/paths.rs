//! Every path the generated code names outside itself, in one place: all go through the `ptc`
//! facade, so a deployment's `Cargo.toml` names `ptc` and nothing else (no `serde`,
//! `serde_json`, `ptc-core` or `ptc-plan` of its own).

use proc_macro2::TokenStream;
use quote::quote;

/// The module-level imports the derives and the response types' `Deserialize` impls use.
pub fn serde_import() -> TokenStream {
    quote!(
        #[allow(unused_imports)]
        use ::ptc::__private::serde::{Deserialize, Serialize};
        #[allow(unused_imports)]
        use ::ptc::__private::decode as __de;
    )
}

/// The serde crate, for the traits a `Deserialize` impl names.
pub fn serde() -> TokenStream {
    quote!(::ptc::__private::serde)
}

/// The container attribute every serde derive needs: without it the derive expands to
/// `extern crate serde`, which a crate without its own `serde` dependency cannot resolve.
pub fn serde_crate() -> TokenStream {
    quote!(#[serde(crate = "::ptc::__private::serde")])
}

/// The untyped JSON value.
pub fn json_value() -> TokenStream {
    quote!(::ptc::serde_json::Value)
}

/// The untyped JSON object.
pub fn json_map() -> TokenStream {
    quote!(::ptc::serde_json::Map<String, ::ptc::serde_json::Value>)
}

/// The trait of a typed call's arguments.
pub fn operation() -> TokenStream {
    quote!(::ptc::Operation)
}

/// The trait of an operation that pages.
pub fn paged() -> TokenStream {
    quote!(::ptc::Paged)
}

/// The compiled plan's type.
pub fn plan() -> TokenStream {
    quote!(::ptc::Plan)
}

/// The JSON crate `plan()` decodes the embedded plan with.
pub fn serde_json() -> TokenStream {
    quote!(::ptc::serde_json)
}
