//! MCP upstreams in the catalog and the executor: one [`McpClient`] per `mcp_stdio` or
//! `mcp_http` upstream, connected at start-up or on first use, its tools mapped into catalog
//! entries. The client itself (handshake, both protocol eras, pagination, result unwrapping,
//! reconnection) lives in [`crate::mcp`].

use std::time::Instant;

use serde_json::{Map, Value, json};

use crate::catalog::ToolEntry;
use crate::credentials::CallEnv;
use crate::mcp::McpClient;
use crate::outcome::{ToolError, ToolOutput};

/// How the upstream is reached.
enum Connect {
    Stdio(ptc_plan::McpStdioPlan),
    Http(ptc_plan::McpHttpPlan),
}

/// A configured MCP upstream; connected on first need.
pub(crate) struct McpLink {
    name: String,
    transport: &'static str,
    /// The upstream's `max_response_bytes`, which its client enforces on every answer.
    max_response_bytes: u64,
    connect: Connect,
    client: tokio::sync::OnceCell<McpClient>,
}

impl McpLink {
    /// The link for an `mcp_stdio` or `mcp_http` upstream (`None` for any other transport).
    pub(crate) fn new(name: &str, transport: &ptc_plan::Transport) -> Option<Self> {
        let (connect, max_response_bytes) = match transport {
            ptc_plan::Transport::McpStdio(p) => (Connect::Stdio(p.clone()), p.max_response_bytes),
            ptc_plan::Transport::McpHttp(p) => {
                (Connect::Http(p.clone()), p.http.max_response_bytes)
            }
            ptc_plan::Transport::Openapi(_) => return None,
        };
        Some(McpLink {
            name: name.to_string(),
            transport: transport.tag(),
            max_response_bytes,
            connect,
            client: tokio::sync::OnceCell::new(),
        })
    }

    /// The connected client, connecting now if this is the first use.
    async fn client(&self, env: &CallEnv<'_>) -> Result<&McpClient, ToolError> {
        self.client
            .get_or_try_init(|| async {
                match &self.connect {
                    Connect::Stdio(plan) => {
                        McpClient::connect_stdio(&self.name, plan, Vec::new(), env.redactor.clone())
                            .await
                    }
                    Connect::Http(plan) => {
                        McpClient::connect_http(
                            &self.name,
                            plan,
                            env.credentials,
                            env.secrets,
                            env.redactor.clone(),
                        )
                        .await
                    }
                }
            })
            .await
    }

    /// The upstream's tools as catalog entries (every page).
    pub(crate) async fn list_tools(&self, env: &CallEnv<'_>) -> Result<Vec<ToolEntry>, ToolError> {
        let tools = self.client(env).await?.list_tools().await?;
        Ok(tools
            .into_iter()
            .enumerate()
            .map(|(index, t)| ToolEntry {
                server: self.name.clone(),
                provenance: json!({"transport": self.transport, "name": t.name}),
                name: t.name,
                description: t.description,
                input_schema: t.input_schema,
                output_schema: t.output_schema,
                read_only: t.read_only,
                max_response_bytes: self.max_response_bytes,
                index,
            })
            .collect())
    }

    /// Calls tool `name` with validated arguments.
    pub(crate) async fn call(
        &self,
        env: &CallEnv<'_>,
        name: &str,
        args: Map<String, Value>,
        deadline: Option<Instant>,
    ) -> Result<ToolOutput, ToolError> {
        self.client(env)
            .await?
            .call_tool(name, args, deadline)
            .await
    }

    /// How the server describes itself, once connected.
    pub(crate) fn server_summary(&self) -> Option<String> {
        self.client.get().and_then(McpClient::server_summary)
    }

    /// Stops the upstream (closes the session, kills a child process).
    pub(crate) async fn shutdown(&self) {
        if let Some(c) = self.client.get() {
            c.shutdown().await;
        }
    }
}
