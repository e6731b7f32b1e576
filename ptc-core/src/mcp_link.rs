//! MCP upstreams: the integration point for the MCP client (`crate::mcp`, contract C).
//!
//! INTEGRATION POINT: until the MCP client lands, an MCP upstream is in the catalog with no
//! tools, its catalog cannot be loaded and its calls end as `upstream_unavailable`. Wiring it
//! means: connect in [`McpLink::connect`] (`McpClient::connect_stdio` / `connect_http`), map
//! `list_tools` into [`ToolEntry`]s in [`McpLink::list_tools`], and forward
//! [`McpLink::call`] to `McpClient::call_tool`.

use std::time::Instant;

use serde_json::{Map, Value};

use crate::catalog::ToolEntry;
use crate::executor::{Reason, ToolError, ToolOutput};

/// A configured MCP upstream.
pub(crate) struct McpLink {
    name: String,
}

impl McpLink {
    pub(crate) fn new(name: &str) -> Self {
        McpLink {
            name: name.to_string(),
        }
    }

    fn unavailable(&self) -> ToolError {
        ToolError {
            reason: Reason::UpstreamUnavailable,
            message: format!(
                "upstream `{}` cannot be reached: this build has no client for its transport",
                self.name
            ),
        }
    }

    /// The upstream's tools (follows pagination).
    pub(crate) async fn list_tools(&self) -> Result<Vec<ToolEntry>, ToolError> {
        Err(self.unavailable())
    }

    /// Calls tool `name` with validated arguments.
    pub(crate) async fn call(
        &self,
        name: &str,
        args: Map<String, Value>,
        deadline: Option<Instant>,
    ) -> Result<ToolOutput, ToolError> {
        let _ = (name, args, deadline);
        Err(self.unavailable())
    }

    /// Stops the upstream (kills a child process).
    pub(crate) async fn shutdown(&self) {}
}
