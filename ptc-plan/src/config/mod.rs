//! The `upstreams.json` model and its validation.
//!
//! Parsing produces a [`Config`]: every rule that can be checked without the OpenAPI documents has
//! been checked. The OpenAPI compiler then turns each OpenAPI upstream's config into tools.

pub(crate) mod credentials;
mod fields;
mod http;
mod oauth;
pub(crate) mod programs;
pub(crate) mod sandbox;
mod upstreams;
mod writes;

pub use http::{UrlOptIns, UrlProblem, check_base_url, check_upstream_url};
pub use sandbox::hide as hide_from_sandboxes;

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde_json::{Map, Value};

use crate::diagnostic::{Diagnostics, Reporter};
use crate::effects::WriteGrant;
use crate::plan::{
    ApprovalWebhook, CredentialBinding, HttpSettings, McpHttpPlan, McpStdioPlan, SchemaLocation,
};
use fields::{Cx, Fields};

/// A validated config, before the OpenAPI documents are compiled.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Credential bindings, sorted by name.
    pub credentials: Vec<CredentialBinding>,
    /// Upstreams, sorted by name.
    pub upstreams: Vec<UpstreamConfig>,
    /// `approval_webhook`, when set.
    pub approval_webhook: Option<ApprovalWebhook>,
    /// `programs`: the programs offered as tools, sorted by name.
    pub programs: Vec<programs::ProgramConfig>,
}

/// One upstream as configured.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamConfig {
    /// Upstream name (its tool namespace).
    pub name: String,
    /// Operator description.
    pub description: String,
    /// JSON pointer of the entry in the config.
    pub pointer: String,
    /// Transport and its settings.
    pub kind: UpstreamKind,
}

/// Transport-specific config.
#[derive(Debug, Clone, PartialEq)]
pub enum UpstreamKind {
    /// OpenAPI: compiled against its document.
    Openapi(OpenApiConfig),
    /// MCP over stdio: complete as configured.
    McpStdio(McpStdioPlan),
    /// MCP over Streamable HTTP: complete as configured.
    McpHttp(McpHttpPlan),
}

/// An OpenAPI upstream's config.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenApiConfig {
    /// Request origin and optional path prefix.
    pub base_url: String,
    /// The document's location.
    pub schema: SchemaLocation,
    /// Cap on the document's size.
    pub schema_max_bytes: u64,
    /// Transport settings.
    pub http: HttpSettings,
    /// operationIds to expose, in order.
    pub include_operations: Vec<String>,
    /// Operator patches by operationId.
    pub overrides: BTreeMap<String, OperationOverride>,
    /// `allow_writes`: the operations that are not reads the operator allows, by operationId.
    pub writes: BTreeMap<String, WriteGrant>,
    /// `idempotency_header`: the header a write's idempotency key goes in.
    pub idempotency_header: Option<String>,
}

/// Operator patches for one operation; they may narrow or rename, never widen.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OperationOverride {
    /// Exposed name (normalised to kebab-case).
    pub name: Option<String>,
    /// Description shown by discovery.
    pub description: Option<String>,
    /// Default args; replaces `x-ptc-default-args` when set.
    pub default_args: Option<Map<String, Value>>,
    /// Response cap (the smaller of this and the schema's/upstream's wins).
    pub max_response_bytes: Option<u64>,
    /// Request timeout (the smaller of this and the upstream's wins).
    pub request_timeout_ms: Option<u64>,
    /// Expose the operation even though the document marks it deprecated.
    pub allow_deprecated: bool,
    /// Agent guidance, appended to `x-ptc-notes`.
    pub notes: Option<String>,
    /// What a call returns; replaces `x-ptc-result-path` (for documents the operator cannot
    /// edit).
    pub result_path: Option<crate::projection::ValuePath>,
    /// How to page; replaces `x-ptc-pagination`.
    pub pagination: Option<crate::projection::Pagination>,
}

/// Secret values written literally in the config. Kept out of the plan; never printed.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secrets {
    literals: BTreeMap<String, String>,
}

impl Secrets {
    /// The literal value of binding `name`.
    pub fn literal(&self, name: &str) -> Option<&str> {
        self.literals.get(name).map(String::as_str)
    }

    pub(crate) fn insert(&mut self, name: &str, value: &str) {
        self.literals.insert(name.to_string(), value.to_string());
    }
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.literals.keys().map(|k| (k, "[REDACTED]")))
            .finish()
    }
}

/// Parses and validates config text, recording every problem in `diags`. `file` names the config
/// in messages; relative paths in it resolve against `base_dir` (the config file's folder).
///
/// Returns what could be read even when there were problems (an upstream with an unknown field
/// is still returned; one missing a required field is not), so later stages can check the rest
/// and every problem is reported at once. `None` when the text is not a JSON object at all.
pub(crate) fn parse(
    text: &str,
    file: &Path,
    base_dir: &Path,
    diags: &mut Diagnostics,
) -> Option<(Config, Secrets)> {
    let mut cx = Cx {
        file,
        report: Reporter::new(diags),
    };
    let root: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            cx.error(
                "",
                format!("config is not valid JSON: {e}"),
                Some("fix the JSON syntax at the line and column given".into()),
            );
            return None;
        }
    };
    let mut secrets = Secrets::default();
    parse_root(&mut cx, &root, base_dir, &mut secrets).map(|config| (config, secrets))
}

fn parse_root(cx: &mut Cx, root: &Value, base_dir: &Path, secrets: &mut Secrets) -> Option<Config> {
    let mut top = Fields::new(cx, root, "", "the config")?;
    let credentials = match top.get("credentials") {
        Some(v) => credentials::parse_all(cx, v, "/credentials", base_dir, secrets),
        None => Vec::new(),
    };
    let upstreams = match top.required(
        cx,
        "upstreams",
        "add an \"upstreams\" object mapping each upstream name to its settings",
    ) {
        Some(v) => upstreams::parse_all(cx, v, "/upstreams", base_dir, &credentials),
        None => Vec::new(),
    };
    let approval_webhook = top
        .get("approval_webhook")
        .and_then(|v| http::parse_webhook(cx, v, "/approval_webhook", &credentials));
    let programs = top
        .get("programs")
        .map(|v| programs::parse_all(cx, v, "/programs", base_dir))
        .unwrap_or_default();
    top.finish(cx);
    Some(Config {
        credentials,
        upstreams,
        approval_webhook,
        programs,
    })
}
