// The baseline the MCP drift cases change: this code compiles against the tools the Python peer
// listed when it was vendored (drift/mcp/v1/vendored/peer.tools.json).
ptc::upstreams!("drift/mcp/v1/upstreams.json");

fn temperature(w: &peer::GetStructuredContentResponse) -> f64 {
    w.temperature
}

/// A typed call, as a deployment makes it (`tests/codegen` runs such calls against the peers).
async fn weather(upstreams: &ptc::Upstreams) -> Result<f64, ptc::ToolError> {
    let args = peer::GetStructuredContentArgs::new("Oslo".into());
    Ok(upstreams.run(args).await?.temperature)
}

fn main() {
    let literal = peer::GetSumArgs { a: 1.0, b: 2.0 };
    let built = peer::GetSumArgs::new(1.0, 2.0);
    let _ = (literal, built, temperature, weather);
}
