//! On the wire: how ptc talks to what is outside the process, below the catalog. The one HTTP
//! client builder ([`http_client`]), the OpenAPI transport, the MCP client ([`mcp`]), OpenAPI
//! documents fetched at start-up ([`documents`]) and the approval webhook.
//!
//! Nothing here knows about programs, policy or the catalog's lookup rules: a room above hands
//! in a compiled operation or an MCP upstream's plan and gets back a
//! [`ToolOutput`](crate::ToolOutput) or a [`ToolError`](crate::ToolError).

pub mod documents;
pub mod http_client;
pub mod mcp;
pub(crate) mod openapi;
pub(crate) mod webhook;
