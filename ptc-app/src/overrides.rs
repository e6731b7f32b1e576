//! Operator overrides at start-up: an upstream's `base_url` and a credential's file path, so one
//! build serves staging and production.
//!
//! The overrides obey the config's own rules because ptc-plan checks them: for a config file
//! they are written into the config before it is validated; for a compiled plan each new URL is
//! put through ptc-plan's URL rules (https, or http only with the upstream's opt-ins).

use std::path::{Path, PathBuf};

use ptc_plan::{CredentialSource, Plan, Transport};
use serde_json::Value;

use crate::args::OverrideArgs;

/// Parsed overrides.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `(upstream, url)`.
    pub urls: Vec<(String, String)>,
    /// `(credential, absolute path)`.
    pub credential_files: Vec<(String, PathBuf)>,
}

fn pair<'a>(flag: &str, raw: &'a str) -> Result<(&'a str, &'a str), String> {
    match raw.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() && !v.trim().is_empty() => Ok((k.trim(), v.trim())),
        _ => Err(format!("{flag} `{raw}`: expected NAME=VALUE")),
    }
}

impl Overrides {
    /// Reads the flags (and their environment variables).
    pub fn from_args(args: &OverrideArgs) -> Result<Self, String> {
        let mut o = Overrides::default();
        for raw in &args.upstream_urls {
            let (name, url) = pair("--upstream-url", raw)?;
            o.urls.push((name.to_string(), url.to_string()));
        }
        for raw in &args.credential_files {
            let (name, path) = pair("--credential-file", raw)?;
            let path =
                std::path::absolute(path).map_err(|e| format!("--credential-file {name}: {e}"))?;
            o.credential_files.push((name.to_string(), path));
        }
        Ok(o)
    }

    /// Whether there is nothing to override.
    pub fn is_empty(&self) -> bool {
        self.urls.is_empty() && self.credential_files.is_empty()
    }

    /// Writes the overrides into config `text` (read from `path`), for ptc-plan to validate.
    pub fn apply_to_config(&self, text: &str, path: &Path) -> Result<String, String> {
        if self.is_empty() {
            return Ok(text.to_string());
        }
        let mut config: Value =
            serde_json::from_str(text).map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
        for (name, url) in &self.urls {
            let up = config
                .get_mut("upstreams")
                .and_then(|u| u.get_mut(name.as_str()))
                .and_then(Value::as_object_mut)
                .ok_or_else(|| {
                    format!(
                        "--upstream-url: {} has no upstream `{name}`",
                        path.display()
                    )
                })?;
            let key = match up.get("transport").and_then(Value::as_str) {
                Some("openapi") => "base_url",
                Some("mcp_http") => "url",
                _ => {
                    return Err(format!(
                        "--upstream-url: upstream `{name}` is not reached by URL (openapi or \
                         mcp_http)"
                    ));
                }
            };
            up.insert(key.to_string(), Value::String(url.clone()));
        }
        for (name, file) in &self.credential_files {
            let cred = config
                .get_mut("credentials")
                .and_then(|c| c.get_mut(name.as_str()))
                .and_then(Value::as_object_mut)
                .ok_or_else(|| {
                    format!(
                        "--credential-file: {} has no credential `{name}`",
                        path.display()
                    )
                })?;
            if cred.get("source").and_then(Value::as_str) != Some("file") {
                return Err(format!(
                    "--credential-file: credential `{name}` is not read from a file (its \
                     source must be \"file\")"
                ));
            }
            cred.insert(
                "path".into(),
                Value::String(file.to_string_lossy().into_owned()),
            );
        }
        serde_json::to_string_pretty(&config).map_err(|e| e.to_string())
    }

    /// Applies the overrides to a compiled plan, each URL checked by ptc-plan's rules.
    pub fn apply_to_plan(&self, plan: &mut Plan) -> Result<(), String> {
        for (name, url) in &self.urls {
            let up = plan
                .upstreams
                .iter_mut()
                .find(|u| &u.name == name)
                .ok_or_else(|| format!("--upstream-url: there is no upstream `{name}`"))?;
            let (slot, http) = match &mut up.transport {
                Transport::Openapi(api) => (&mut api.base_url, &api.http),
                Transport::McpHttp(m) => (&mut m.url, &m.http),
                Transport::McpStdio(_) => {
                    return Err(format!(
                        "--upstream-url: upstream `{name}` is a local process, not reached by URL"
                    ));
                }
            };
            check_url(name, url, http)?;
            *slot = url.clone();
        }
        for (name, file) in &self.credential_files {
            let cred = plan
                .credentials
                .iter_mut()
                .find(|c| &c.name == name)
                .ok_or_else(|| format!("--credential-file: there is no credential `{name}`"))?;
            match &mut cred.source {
                CredentialSource::File { path } => *path = file.to_string_lossy().into_owned(),
                _ => {
                    return Err(format!(
                        "--credential-file: credential `{name}` is not read from a file"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Puts `url` through ptc-plan's URL rules with the upstream's opt-ins, by validating a one-line
/// probe config (an `mcp_http` upstream has the same URL rules and needs no document).
fn check_url(name: &str, url: &str, http: &ptc_plan::HttpSettings) -> Result<(), String> {
    let mut upstream = serde_json::json!({
        "transport": "mcp_http",
        "url": url,
        "allow_insecure_http": http.allow_insecure_http,
        "allow_insecure_auth": http.allow_insecure_auth,
    });
    let mut config = serde_json::json!({ "upstreams": {} });
    if !http.auth.is_empty() {
        upstream["auth"] = serde_json::json!([{ "scheme": "bearer", "binding": "probe" }]);
        config["credentials"] =
            serde_json::json!({ "probe": { "source": "env", "var": "PTC_PROBE" } });
    }
    config["upstreams"][name] = upstream;
    let probe = Path::new("--upstream-url");
    ptc_plan::load_str(&config.to_string(), probe, &ptc_plan::FileSource)
        .map(|_| ())
        .map_err(|d| {
            let mut msg = format!("--upstream-url {name}={url} is refused:");
            for diag in &d.0 {
                msg.push_str(&format!("\n  {}", diag.message));
            }
            msg
        })
}
