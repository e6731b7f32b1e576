//! One tool call, whichever way it is made (a program's `tool/call`, a typed operation): the
//! [`Upstreams`](upstreams::Upstreams) executor every call goes through, what a call form asks
//! for (`form`), argument validation ([`validate`]), the result contract ([`contract`]), what a
//! tool's result path selects ([`projection`]), typed pages and serde, writes and their
//! approval, and the check of an answer against its tool's output schema ([`response_check`]).

pub mod approval;
pub mod contract;
pub mod projection;
pub mod response_check;
pub mod samples;
pub(crate) mod typed_pages;
#[doc(hidden)]
pub mod typed_serde;
pub mod upstreams;
pub mod writes;

/// What a call form asks for: the one reading of a `tool/call` form, shared with the plan
/// compiler's check of declared programs.
pub(crate) use ptc_plan::call_form as form;
/// Argument validation: the one validator, shared with the plan compiler.
pub use ptc_plan::validate;
