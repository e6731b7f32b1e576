//! Every path the generated code names outside itself, in one place: all go through the `ptc`
//! facade, so a deployment's `Cargo.toml` names `ptc` and nothing else (no `serde`,
//! `serde_json`, `ptc-core` or `ptc-plan` of its own).

use proc_macro2::TokenStream;
use quote::quote;

/// The module-level imports the derives use: ptc's `Encode`/`Decode` (`ptc_core::call::typed_serde`)
/// on structs and string enums, serde's own on untagged enums.
pub fn serde_import() -> TokenStream {
    quote!(
        #[allow(unused_imports)]
        use ::ptc::__private::serde::{Deserialize, Serialize};
        #[allow(unused_imports)]
        use ::ptc::__private::{Decode, Encode};
    )
}

/// The container attribute serde's derives need: without it they expand to `extern crate
/// serde`, which a crate without its own `serde` dependency cannot resolve.
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

/// The trait of a declared program's typed arguments.
pub fn program() -> TokenStream {
    quote!(::ptc::Program)
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
