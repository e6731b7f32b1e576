//! Upstream runtime: OpenAPI and MCP execution, credentials, redaction, catalog, discovery and the
//! MCP host.
//!
//! So far: [`credentials`] (per-use secret reads and auth headers) and [`documents`] (fetching
//! `schema_url` documents with the upstream's auth).

pub mod credentials;
pub mod documents;
pub mod executor;
pub mod mcp;
pub mod redact;

pub use executor::{CallOptions, Reason, ToolError, ToolOutput, Upstreams};
