//! Upstream runtime: OpenAPI and MCP execution, credentials, redaction, catalog, discovery and the MCP host.
