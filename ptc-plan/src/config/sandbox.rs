//! `sandbox` of an `mcp_stdio` upstream: isolated unless the config says `false`, and what the
//! loader hides from every sandbox (secrets, the config, the other servers' folders).

use std::path::Path;

use serde_json::Value;

use super::fields::{Cx, Fields};
use crate::plan::{CredentialSource, SandboxLimits, SandboxPlan, Transport};

const HELP: &str = "set \"sandbox\" to an object (e.g. {\"read_paths\": [\"./data\"]}), true, or \
                    false to run the server with the host's own rights";

/// Reads `sandbox` (absent or `true`: isolated with the defaults; `false`: not isolated).
pub(super) fn parse(cx: &mut Cx, f: &mut Fields, base_dir: &Path) -> Option<SandboxPlan> {
    let at = f.at("sandbox");
    let value = match f.get("sandbox") {
        None | Some(Value::Bool(true)) => return Some(SandboxPlan::default()),
        Some(Value::Bool(false)) => return None,
        Some(v) if v.is_object() => v,
        Some(other) => {
            cx.wrong_type(
                &at,
                "`sandbox`",
                "an object, true or false",
                other,
                Some(HELP.into()),
            );
            return None;
        }
    };
    let mut g = Fields::new(cx, value, &at, "`sandbox`")?;
    let network = g.bool(cx, "network");
    let read_paths = paths(cx, &mut g, "read_paths", base_dir);
    let write_paths = paths(cx, &mut g, "write_paths", base_dir);
    let default = SandboxLimits::default();
    let limits = SandboxLimits {
        memory_mb: g.positive(cx, "memory_mb", default.memory_mb),
        processes: g.positive(cx, "processes", default.processes),
        open_files: g.positive(cx, "open_files", default.open_files),
        cpu_seconds: g.positive(cx, "cpu_seconds", default.cpu_seconds),
    };
    g.finish(cx);
    Some(SandboxPlan {
        network,
        read_paths,
        write_paths,
        hidden: Vec::new(),
        limits,
    })
}

/// A list of paths, resolved against the config's folder; `/` is refused (it is the whole host).
fn paths(cx: &mut Cx, f: &mut Fields, key: &'static str, base_dir: &Path) -> Vec<String> {
    let at = f.at(key);
    let list = f.string_list(cx, key).unwrap_or_default();
    let mut out = Vec::with_capacity(list.len());
    for (i, p) in list.into_iter().enumerate() {
        let here = crate::diagnostic::pointer_join(&at, &i.to_string());
        if p.trim().is_empty() {
            cx.error(&here, format!("`{key}` items must not be empty"), None);
            continue;
        }
        let resolved = crate::paths::resolve(base_dir, p);
        if Path::new(&resolved).parent().is_none() {
            cx.error(
                &here,
                format!("`{key}` must not name `/`: that is the whole host"),
                Some("name the folders the server needs, e.g. \"./data\"".into()),
            );
            continue;
        }
        out.push(resolved);
    }
    out.sort();
    out.dedup();
    out
}

/// Fills each sandbox's `hidden`: the config file at `config` when there is one (it may hold
/// literal secrets), every file a credential is read from, and the working and writable folders
/// of the other stdio upstreams. Run again whenever the credentials' files change (an operator's
/// `--credential-file` over a compiled plan), so the files hidden are the ones read.
pub fn hide(plan: &mut crate::plan::Plan, config: Option<&Path>) {
    let mut secret: Vec<String> = config
        .map(|c| {
            crate::paths::normalize(&std::path::absolute(c).unwrap_or_else(|_| c.to_path_buf()))
                .to_string_lossy()
                .into_owned()
        })
        .into_iter()
        .collect();
    for c in &plan.credentials {
        match &c.source {
            CredentialSource::File { path } => secret.push(path.clone()),
            CredentialSource::PerCaller { files } => secret.extend(files.values().cloned()),
            _ => {}
        }
    }
    let upstreams = &mut plan.upstreams;
    let folders: Vec<(String, Vec<String>)> = upstreams
        .iter()
        .filter_map(|u| match &u.transport {
            Transport::McpStdio(p) => {
                let mut own: Vec<String> = p.cwd.iter().cloned().collect();
                if let Some(s) = &p.sandbox {
                    own.extend(s.write_paths.iter().cloned());
                }
                Some((u.name.clone(), own))
            }
            _ => None,
        })
        .collect();
    for u in upstreams.iter_mut() {
        let Transport::McpStdio(p) = &mut u.transport else {
            continue;
        };
        let cwd = p.cwd.clone();
        let Some(sandbox) = &mut p.sandbox else {
            continue;
        };
        let mut hidden = secret.clone();
        for (name, own) in &folders {
            // A folder this server is itself given stays visible: the config shares it.
            let given = |f: &&String| {
                cwd.as_ref() == Some(*f)
                    || sandbox.read_paths.contains(f)
                    || sandbox.write_paths.contains(f)
            };
            if *name != u.name {
                hidden.extend(own.iter().filter(|f| !given(f)).cloned());
            }
        }
        hidden.sort();
        hidden.dedup();
        sandbox.hidden = hidden;
    }
}
