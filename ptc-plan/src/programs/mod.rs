//! Declared programs, compiled with the plan: each program file is read and checked against the
//! upstreams' tools before it is ever run, by the same rules a call meets when it is made
//! ([`crate::call_form`], [`crate::validate`]). The `ptc_upstreams!` macro and `ptc check` /
//! `ptc serve --config` compile them here alike, so a program an upstream's drift breaks fails
//! the build, and a program that passes here is the same tool everywhere.
//!
//! What is checked, each problem reported at the program file's line and column:
//! - the text reads;
//! - every tool it calls is named literally (`(tool/call 'server/tool {...})`,
//!   `(tool/pages 'server/tool {...})` or `(server/tool {...})`), exists, and is callable as
//!   configured; a call whose tool is computed, or `tool/call` passed as a value, is refused: the
//!   build could not say what the program does;
//! - literal arguments meet the tool's input schema (names, required, types, enums, patterns);
//! - an argument given straight from a parameter (`{:org-id data/org_id}`) meets it by the
//!   parameter's declared type, enum and requiredness;
//! - every `data/<key>` it reads is a declared parameter;
//! - every write it calls is allowed by its upstream and listed in the program's `writes`, and
//!   every listed write is called.
//!
//! Its effects become MCP tool annotations (`readOnlyHint`, `destructiveHint`,
//! `idempotentHint`). [`promote`] drafts a declaration from a program that ran.

mod check;
mod flow;
pub mod promote;
mod tools;

pub(crate) use check::compile;
