//! The static registration: the whole compiled plan, embedded so nothing is read at run time.

use proc_macro2::TokenStream;
use ptc_plan::Plan;
use quote::quote;

/// `PLAN_JSON` and `plan()`. The plan holds no secret value (literal credentials are refused
/// before this point), so embedding it is safe.
pub fn plan_fn(plan: &Plan) -> Result<TokenStream, String> {
    let json =
        serde_json::to_string(plan).map_err(|e| format!("cannot serialise the plan: {e}"))?;
    let plan_ty = crate::paths::plan();
    let serde_json = crate::paths::serde_json();
    Ok(quote! {
        /// The compiled plan (every upstream, tool, connection spec and credential binding;
        /// never a secret value) as JSON, embedded at compile time.
        pub const PLAN_JSON: &str = #json;

        /// The compiled plan, for `ptc::Upstreams` and `ptc::main`. Fails only when the
        /// `ptc-plan` linked at run time cannot read what the macro's `ptc-plan` wrote
        /// (mismatched versions).
        pub fn plan() -> Result<#plan_ty, #serde_json::Error> {
            #serde_json::from_str(PLAN_JSON)
        }
    })
}
