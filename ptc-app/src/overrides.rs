//! Operator overrides at start-up: an upstream's `base_url` and a credential's file path, so one
//! build serves staging and production.
//!
//! The overrides obey the config's own rules because ptc-plan checks them: for a config file
//! they are written into the config before it is validated; for a compiled plan each new URL is
//! put through ptc-plan's URL rule (https, or http only with the upstream's opt-ins; a `base_url`
//! also without query or fragment), the one the config compiler checks with.

use std::path::{Path, PathBuf};

use ptc_plan::{CredentialSource, Plan, Transport, UrlOptIns};
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
            let (slot, problems) = match &mut up.transport {
                Transport::Openapi(api) => {
                    let problems = ptc_plan::check_base_url(url, UrlOptIns::of(&api.http));
                    (&mut api.base_url, problems)
                }
                Transport::McpHttp(m) => {
                    let problems = ptc_plan::check_upstream_url("url", url, UrlOptIns::of(&m.http));
                    (&mut m.url, problems)
                }
                Transport::McpStdio(_) => {
                    return Err(format!(
                        "--upstream-url: upstream `{name}` is a local process, not reached by URL"
                    ));
                }
            };
            if !problems.is_empty() {
                let mut msg = format!("--upstream-url {name}={url} is refused:");
                for p in problems {
                    msg.push_str(&format!("\n  {}", p.message));
                }
                return Err(msg);
            }
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
        if !self.credential_files.is_empty() {
            // The sandboxes hide the files the credentials are read from now. (A compiled
            // plan's config holds no secret: literal values are refused at compile time.)
            ptc_plan::hide_from_sandboxes(plan, None);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ptc_plan::FileSource;

    fn overrides(urls: &[&str], files: &[&str]) -> Result<Overrides, String> {
        Overrides::from_args(&OverrideArgs {
            upstream_urls: urls.iter().map(|s| s.to_string()).collect(),
            credential_files: files.iter().map(|s| s.to_string()).collect(),
            ..OverrideArgs::default()
        })
    }

    /// The opt-ins an upstream may have: plain http, and credentials over it.
    const SECURE: (bool, bool) = (false, false);
    const HTTP: (bool, bool) = (true, false);
    const HTTP_AUTH: (bool, bool) = (true, true);

    /// One upstream of each transport and one credential of two sources; `bearer` puts the
    /// file credential on the HTTP upstream, `insecure` are its opt-ins.
    fn config(bearer: bool, insecure: (bool, bool)) -> String {
        let mut http = serde_json::json!({"transport": "mcp_http", "url": "https://prod.example.com/mcp",
            "allow_insecure_http": insecure.0, "allow_insecure_auth": insecure.1});
        if bearer {
            http["auth"] = serde_json::json!([{"scheme": "bearer", "binding": "file_cred"}]);
        }
        serde_json::json!({
            "credentials": {
                "file_cred": {"source": "file", "path": "/etc/ptc/prod-token"},
                "env_cred": {"source": "env", "var": "PTC_TOKEN"},
            },
            "upstreams": {
                "api": {"transport": "openapi", "base_url": "https://prod.example.com",
                        "schema_file": "api.json", "include_operations": ["list"]},
                "web": http,
                "local": {"transport": "mcp_stdio", "command": "server"},
            },
        })
        .to_string()
    }

    fn plan(bearer: bool, insecure: (bool, bool)) -> Plan {
        let mut config: Value = serde_json::from_str(&config(bearer, insecure)).unwrap();
        // A compiled plan needs no document for the MCP upstreams; the OpenAPI one goes.
        config["upstreams"].as_object_mut().unwrap().remove("api");
        ptc_plan::load_str(
            &config.to_string(),
            Path::new("upstreams.json"),
            &FileSource,
        )
        .unwrap_or_else(|d| panic!("{d}"))
        .plan
    }

    fn url_of(plan: &Plan, name: &str) -> String {
        let upstream = plan.upstreams.iter().find(|u| u.name == name).unwrap();
        let Transport::McpHttp(m) = &upstream.transport else {
            panic!("{name} is not an MCP HTTP upstream");
        };
        m.url.clone()
    }

    fn path_of(plan: &Plan, name: &str) -> String {
        let credential = plan.credentials.iter().find(|c| c.name == name).unwrap();
        let CredentialSource::File { path } = &credential.source else {
            panic!("{name} is not read from a file");
        };
        path.clone()
    }

    #[test]
    fn flags_are_name_value_pairs() {
        let o = overrides(
            &[" api = https://staging.example.com "],
            &["file_cred=/run/t"],
        )
        .unwrap();
        assert_eq!(
            o.urls,
            [("api".to_string(), "https://staging.example.com".to_string())]
        );
        assert_eq!(
            o.credential_files,
            [("file_cred".to_string(), PathBuf::from("/run/t"))]
        );
        assert!(!o.is_empty());
        let relative = overrides(&[], &["c=token"]).unwrap();
        assert_eq!(
            relative.credential_files[0].1,
            std::env::current_dir().unwrap().join("token")
        );
        for bad in ["api", "=https://x", "api=", " = "] {
            assert_eq!(
                overrides(&[bad], &[]).unwrap_err(),
                format!("--upstream-url `{bad}`: expected NAME=VALUE")
            );
            assert_eq!(
                overrides(&[], &[bad]).unwrap_err(),
                format!("--credential-file `{bad}`: expected NAME=VALUE")
            );
        }
        assert!(overrides(&[], &[]).unwrap().is_empty());
        assert!(!overrides(&[], &["c=/t"]).unwrap().is_empty());
    }

    #[test]
    fn a_config_gets_the_overrides_written_in_for_ptc_plan_to_check() {
        let path = Path::new("upstreams.json");
        let text = config(false, SECURE);
        let none = overrides(&[], &[]).unwrap();
        assert_eq!(none.apply_to_config("not json", path).unwrap(), "not json");
        let o = overrides(
            &[
                "api=https://staging.example.com",
                "web=http://localhost:9/mcp",
            ],
            &["file_cred=/run/staging-token"],
        )
        .unwrap();
        let out: Value = serde_json::from_str(&o.apply_to_config(&text, path).unwrap()).unwrap();
        assert_eq!(
            out["upstreams"]["api"]["base_url"],
            "https://staging.example.com"
        );
        assert_eq!(out["upstreams"]["web"]["url"], "http://localhost:9/mcp");
        assert_eq!(
            out["credentials"]["file_cred"]["path"],
            "/run/staging-token"
        );
        let mut expected: Value = serde_json::from_str(&text).unwrap();
        expected["upstreams"]["api"]["base_url"] = out["upstreams"]["api"]["base_url"].clone();
        expected["upstreams"]["web"]["url"] = out["upstreams"]["web"]["url"].clone();
        expected["credentials"]["file_cred"]["path"] = "/run/staging-token".into();
        assert_eq!(out, expected, "nothing else changes");

        let refused = |urls: &[&str], files: &[&str]| {
            overrides(urls, files)
                .unwrap()
                .apply_to_config(&text, path)
                .unwrap_err()
        };
        assert_eq!(
            refused(&["nosuch=https://x.example.com"], &[]),
            "--upstream-url: upstreams.json has no upstream `nosuch`"
        );
        assert_eq!(
            refused(&["local=https://x.example.com"], &[]),
            "--upstream-url: upstream `local` is not reached by URL (openapi or mcp_http)"
        );
        assert_eq!(
            refused(&[], &["nosuch=/t"]),
            "--credential-file: upstreams.json has no credential `nosuch`"
        );
        assert_eq!(
            refused(&[], &["env_cred=/t"]),
            "--credential-file: credential `env_cred` is not read from a file (its source must \
             be \"file\")"
        );
        assert!(
            o.apply_to_config("[1", path)
                .unwrap_err()
                .starts_with("upstreams.json: not JSON: "),
        );
    }

    /// An OpenAPI upstream's new `base_url` is checked as the config's `base_url` is: by the same
    /// URL rule, and without query or fragment (operation paths are appended to it).
    #[test]
    fn an_openapi_base_url_override_obeys_the_base_url_rule() {
        let config =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/observatory/upstreams.json");
        let apply = |url: &str| {
            let mut plan = ptc_plan::load(&config)
                .unwrap_or_else(|d| panic!("{d}"))
                .plan;
            overrides(&[&format!("observatory={url}")], &[])
                .unwrap()
                .apply_to_plan(&mut plan)
                .map(|()| {
                    let up = plan.upstream("observatory").unwrap();
                    let Transport::Openapi(api) = &up.transport else {
                        panic!("observatory is an OpenAPI upstream")
                    };
                    api.base_url.clone()
                })
        };
        assert_eq!(
            apply("http://127.0.0.1:9/v2").unwrap(),
            "http://127.0.0.1:9/v2"
        );
        assert_eq!(
            apply("https://staging.example.com/v2?x=1").unwrap_err(),
            "--upstream-url observatory=https://staging.example.com/v2?x=1 is refused:\n  \
             `base_url` must not have a query string or fragment"
        );
        assert_eq!(
            apply("ftp://staging.example.com").unwrap_err(),
            "--upstream-url observatory=ftp://staging.example.com is refused:\n  \
             `base_url` uses unsupported URL scheme `ftp`"
        );
    }

    /// A credential file given over a compiled plan is the one its stdio servers' sandboxes
    /// hide, no longer the one the config named.
    #[test]
    fn a_credential_file_given_is_hidden_from_the_sandboxes() {
        let config = r#"{"credentials": {"key": {"source": "file", "path": "/etc/app/key"}},
            "upstreams": {"files": {"transport": "mcp_stdio", "command": "files"}}}"#;
        let mut plan =
            ptc_plan::load_str(config, Path::new("/srv/ptc/upstreams.json"), &FileSource)
                .unwrap_or_else(|d| panic!("{d}"))
                .plan;
        let hidden = |plan: &Plan| match &plan.upstream("files").unwrap().transport {
            Transport::McpStdio(p) => p.sandbox.as_ref().unwrap().hidden.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(hidden(&plan), ["/etc/app/key", "/srv/ptc/upstreams.json"]);
        overrides(&[], &[])
            .unwrap()
            .apply_to_plan(&mut plan)
            .unwrap();
        assert_eq!(
            hidden(&plan),
            ["/etc/app/key", "/srv/ptc/upstreams.json"],
            "nothing given: as compiled"
        );
        overrides(&[], &["key=/run/secrets/key"])
            .unwrap()
            .apply_to_plan(&mut plan)
            .unwrap();
        assert_eq!(hidden(&plan), ["/run/secrets/key"]);
    }

    #[test]
    fn a_compiled_plan_takes_urls_that_pass_its_upstreams_rules() {
        let apply = |bearer: bool, insecure: (bool, bool), urls: &[&str], files: &[&str]| {
            let mut plan = plan(bearer, insecure);
            overrides(urls, files)
                .unwrap()
                .apply_to_plan(&mut plan)
                .map(|()| plan)
        };
        let p = apply(
            true,
            SECURE,
            &["web=https://staging.example.com/mcp"],
            &["file_cred=/run/t"],
        )
        .unwrap();
        assert_eq!(url_of(&p, "web"), "https://staging.example.com/mcp");
        assert_eq!(path_of(&p, "file_cred"), "/run/t");
        // http only with the upstream's opt-ins: for the URL, and for credentials over it.
        let http = ["web=http://staging.example.com/mcp"];
        let refused = "--upstream-url web=http://staging.example.com/mcp is refused:\n  ";
        for (bearer, without, with, opt_in) in [
            (false, SECURE, HTTP, "allow_insecure_http"),
            (true, HTTP, HTTP_AUTH, "allow_insecure_auth"),
        ] {
            let err = apply(bearer, without, &http, &[]).unwrap_err();
            assert!(err.starts_with(refused), "{err}");
            assert!(err.contains(opt_in), "{err}");
            assert_eq!(
                url_of(&apply(bearer, with, &http, &[]).unwrap(), "web"),
                "http://staging.example.com/mcp"
            );
        }
        let userinfo = apply(
            false,
            SECURE,
            &["web=https://u:p@staging.example.com/mcp"],
            &[],
        );
        assert!(
            userinfo
                .unwrap_err()
                .contains("embeds credentials in the URL"),
            "the URL rules are ptc-plan's own"
        );
        assert_eq!(
            apply(
                false,
                SECURE,
                &["web=https://staging.example.com/mcp?x=1"],
                &[]
            )
            .map(|p| url_of(&p, "web")),
            Ok("https://staging.example.com/mcp?x=1".to_string()),
            "a query is an MCP endpoint's own business"
        );
        assert_eq!(
            apply(false, SECURE, &["nosuch=https://x.example.com"], &[]).unwrap_err(),
            "--upstream-url: there is no upstream `nosuch`"
        );
        assert_eq!(
            apply(false, SECURE, &["local=https://x.example.com"], &[]).unwrap_err(),
            "--upstream-url: upstream `local` is a local process, not reached by URL"
        );
        assert_eq!(
            apply(false, SECURE, &[], &["nosuch=/t"]).unwrap_err(),
            "--credential-file: there is no credential `nosuch`"
        );
        assert_eq!(
            apply(false, SECURE, &[], &["env_cred=/t"]).unwrap_err(),
            "--credential-file: credential `env_cred` is not read from a file"
        );
    }
}
