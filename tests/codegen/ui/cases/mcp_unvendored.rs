// The config includes MCP tools, but nobody ran `ptc vendor`: there is no tool list to type them.
ptc::upstreams!("drift/mcp/unvendored/upstreams.json");

fn main() {}
