//! Secrets and who they belong to: reading a credential binding's secret and turning it into
//! request headers ([`binding`]), the `exec` source (`exec`), credentials that depend on the
//! caller ([`per_caller`]), the caller's own identity as the HTTP host learns it ([`identity`]),
//! the OAuth client that obtains hosted MCP servers' tokens ([`upstream_oauth`]), and the
//! [`redact`]or every resolved secret is registered with before any text leaves.

pub mod binding;
pub(crate) mod exec;
pub mod identity;
pub mod per_caller;
pub mod redact;
pub mod upstream_oauth;
