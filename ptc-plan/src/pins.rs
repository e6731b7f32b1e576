//! Pinned MCP tools: the tool list `ptc vendor` writes for an MCP upstream
//! (`vendored/<upstream>.tools.json` next to the config), which the build types and the host
//! enforces.
//!
//! A pin is the tool as a person reviewed it: name, description, input and output schemas and
//! annotations, with a SHA-256 over their canonical JSON (keys sorted, no whitespace). The host
//! compares a live `tools/list` with the pins by that digest, so a server that changes a tool's
//! description or schema after review (a "rug pull") is caught however the change is written.
//! The file is deterministic (tools sorted by name, keys sorted, two-space indent, one trailing
//! newline) so a re-vendor's diff shows exactly what changed.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::diagnostic::{Diagnostic, Diagnostics, pointer_join};
use crate::plan::McpTools;

/// The folder, next to the config, that holds vendored documents and tool lists.
pub const FOLDER: &str = "vendored";

/// The version of the tool-list format this build reads and writes.
pub const FORMAT: u32 = 1;

/// Largest tool list read, in bytes.
pub const MAX_BYTES: u64 = 16 * 1024 * 1024;

/// Where the tool list of MCP upstream `upstream` lives for the config at `config`.
pub fn path(config: &Path, upstream: &str) -> PathBuf {
    config
        .parent()
        .unwrap_or(Path::new("."))
        .join(FOLDER)
        .join(format!("{upstream}.tools.json"))
}

/// What to do with a pinned tool whose live definition differs from its pin.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PinPolicy {
    /// The changed tool is not callable until it is reviewed and re-vendored.
    #[default]
    Refuse,
    /// The changed tool stays callable (validated against its pin); the change is logged and
    /// counted. The model sees the reviewed description, but the server runs its new code.
    Warn,
}

impl PinPolicy {
    /// The policy as written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            PinPolicy::Refuse => "refuse",
            PinPolicy::Warn => "warn",
        }
    }
}

/// A vendored tool list, as written to `vendored/<upstream>.tools.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolList {
    /// Always [`FORMAT`].
    pub format: u32,
    /// The upstream the list was taken from.
    pub upstream: String,
    /// Its tools, sorted by name.
    pub tools: Vec<PinnedTool>,
}

impl ToolList {
    /// The list of `upstream`'s `tools`, sorted by name.
    pub fn new(upstream: &str, mut tools: Vec<PinnedTool>) -> Self {
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        ToolList {
            format: FORMAT,
            upstream: upstream.to_string(),
            tools,
        }
    }

    /// The file's text: keys sorted, two-space indent, one trailing newline.
    pub fn render(&self) -> String {
        let value = serde_json::to_value(self).unwrap_or(Value::Null);
        let mut text = serde_json::to_string_pretty(&sorted(&value)).unwrap_or_default();
        text.push('\n');
        text
    }

    /// The tool called `name`.
    pub fn tool(&self, name: &str) -> Option<&PinnedTool> {
        self.tools.iter().find(|t| t.name == name)
    }
}

/// One tool as vendored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinnedTool {
    /// The tool's name on the server (also its name in the catalog).
    pub name: String,
    /// Its description.
    #[serde(default)]
    pub description: String,
    /// JSON Schema of its arguments.
    #[serde(rename = "inputSchema")]
    pub input_schema: Value,
    /// JSON Schema of its structured result, when the server declares one.
    #[serde(
        rename = "outputSchema",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub output_schema: Option<Value>,
    /// Its annotations (`readOnlyHint`, `destructiveHint`, ...), as the server gave them.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub annotations: Map<String, Value>,
    /// Hex SHA-256 of the canonical JSON of everything above.
    pub sha256: String,
}

/// What differs between a pin and the live tool of the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinChange {
    /// The description.
    Description,
    /// The input schema.
    InputSchema,
    /// The output schema.
    OutputSchema,
    /// The annotations.
    Annotations,
}

impl PinChange {
    /// The field's name as MCP writes it.
    pub fn field(self) -> &'static str {
        match self {
            PinChange::Description => "description",
            PinChange::InputSchema => "inputSchema",
            PinChange::OutputSchema => "outputSchema",
            PinChange::Annotations => "annotations",
        }
    }
}

impl PinnedTool {
    /// The pin of a tool, its digest computed.
    pub fn new(
        name: &str,
        description: &str,
        input_schema: Value,
        output_schema: Option<Value>,
        annotations: Map<String, Value>,
    ) -> Self {
        let mut tool = PinnedTool {
            name: name.to_string(),
            description: description.to_string(),
            input_schema,
            output_schema,
            annotations,
            sha256: String::new(),
        };
        tool.sha256 = tool.digest();
        tool
    }

    /// The digest of the tool's content (what `sha256` holds when nobody edited it).
    pub fn digest(&self) -> String {
        let content = serde_json::json!({
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
            "outputSchema": self.output_schema,
            "annotations": self.annotations,
        });
        let canonical = serde_json::to_string(&sorted(&content)).unwrap_or_default();
        hex(&Sha256::digest(canonical.as_bytes()))
    }

    /// What `live` changed against this pin, field by field (the stored digests are not
    /// trusted: a hand-edited pin is compared by what it says).
    pub fn changes(&self, live: &PinnedTool) -> Vec<PinChange> {
        let same = |a: &Value, b: &Value| sorted(a) == sorted(b);
        let mut out = Vec::new();
        if self.description != live.description {
            out.push(PinChange::Description);
        }
        if !same(&self.input_schema, &live.input_schema) {
            out.push(PinChange::InputSchema);
        }
        let output = |t: &PinnedTool| t.output_schema.clone().unwrap_or(Value::Null);
        if !same(&output(self), &output(live)) {
            out.push(PinChange::OutputSchema);
        }
        if !same(
            &Value::Object(self.annotations.clone()),
            &Value::Object(live.annotations.clone()),
        ) {
            out.push(PinChange::Annotations);
        }
        out
    }
}

/// Reads the vendored tool list of MCP upstream `upstream` (configured at `pointer` in
/// `config`), if there is one, and pins the exposed tools in `tools`: every pinned tool, or those
/// `include_tools` names, each of which must be in the list. Problems go into `diags`; a file
/// read is recorded in `files` (so the build reruns when it changes).
pub(crate) fn attach(
    config: &Path,
    upstream: &str,
    pointer: &str,
    tools: &mut McpTools,
    diags: &mut Diagnostics,
    files: &mut Vec<PathBuf>,
) {
    let file = path(config, upstream);
    if !file.exists() {
        return;
    }
    files.push(file.clone());
    let revendor = format!("run `ptc vendor {}` to write it again", config.display());
    let problem = |message: String| {
        Diagnostic::new(&file, "", message)
            .upstream(upstream)
            .help(revendor.clone())
    };
    let list = match read(&file) {
        Ok(list) => list,
        Err(message) => return diags.push(problem(message)),
    };
    if list.upstream != upstream {
        return diags.push(problem(format!(
            "this tool list was vendored for upstream `{}`, not `{upstream}`",
            list.upstream
        )));
    }
    let mut ok = true;
    for (i, tool) in list.tools.iter().enumerate() {
        if tool.digest() != tool.sha256 {
            ok = false;
            diags.push(
                Diagnostic::new(
                    &file,
                    format!("/tools/{i}/sha256"),
                    format!(
                        "tool `{}` does not match its sha256: the pin was edited by hand",
                        tool.name
                    ),
                )
                .upstream(upstream)
                .help(format!(
                    "a pin records what the server said; {revendor} from the server"
                )),
            );
        }
        if list.tools[..i].iter().any(|t| t.name == tool.name) {
            ok = false;
            diags.push(
                Diagnostic::new(
                    &file,
                    format!("/tools/{i}/name"),
                    format!("tool `{}` is listed twice", tool.name),
                )
                .upstream(upstream)
                .help(revendor.clone()),
            );
        }
    }
    let pinned = match &tools.include {
        None => list.tools.clone(),
        Some(include) => {
            let mut out = Vec::with_capacity(include.len());
            for (i, name) in include.iter().enumerate() {
                match list.tool(name) {
                    Some(t) => out.push(t.clone()),
                    None => {
                        ok = false;
                        diags.push(
                            Diagnostic::new(
                                config,
                                pointer_join(&pointer_join(pointer, "include_tools"), &i.to_string()),
                                format!(
                                    "tool `{name}` is included but not in the vendored tool list `{}`{}",
                                    file.display(),
                                    crate::suggest::did_you_mean(
                                        name,
                                        list.tools.iter().map(|t| t.name.as_str())
                                    )
                                ),
                            )
                            .upstream(upstream)
                            .help(format!(
                                "the server no longer lists it (remove it from include_tools), or the list is stale ({revendor})"
                            )),
                        );
                    }
                }
            }
            out.sort_by(|a, b| a.name.cmp(&b.name));
            out
        }
    };
    ok &= check_writes(config, upstream, pointer, tools, &list, &pinned, diags);
    if ok {
        tools.left_out = list
            .tools
            .iter()
            .filter(|t| !pinned.iter().any(|p| p.name == t.name))
            .map(|t| t.name.clone())
            .collect();
        tools.pinned = Some(pinned);
    }
}

/// The `allow_writes` grants against the pinned tools' effects: a grant names a vendored tool
/// that is not a read, and every tool `include_tools` names explicitly is a read or granted.
/// Tools exposed without being named are left for the run time, which shows an ungranted write
/// as disabled. False when something was reported.
fn check_writes(
    config: &Path,
    upstream: &str,
    pointer: &str,
    tools: &McpTools,
    list: &ToolList,
    pinned: &[PinnedTool],
    diags: &mut Diagnostics,
) -> bool {
    use crate::effects::{Refusal, classify, mcp_effect};
    let before = diags.len();
    let grants_at = pointer_join(pointer, "allow_writes");
    for (name, grant) in &tools.writes {
        let Some(tool) = list.tool(name) else {
            // A name outside `include_tools` was reported when the config was read.
            if tools.include.is_none() {
                diags.push(
                    Diagnostic::new(
                        config,
                        pointer_join(&grants_at, name),
                        format!(
                            "allow_writes names `{name}`, which is not in the vendored tool list{}",
                            crate::suggest::did_you_mean(
                                name,
                                list.tools.iter().map(|t| t.name.as_str())
                            )
                        ),
                    )
                    .upstream(upstream)
                    .help("fix the name, or remove it from allow_writes"),
                );
            }
            continue;
        };
        let natural = mcp_effect(Some(&Value::Object(tool.annotations.clone())));
        if classify(natural, Some(grant), true) == Err(Refusal::ReadGranted) {
            diags.push(
                Diagnostic::new(
                    config,
                    pointer_join(&grants_at, name),
                    format!(
                        "allow_writes names `{name}`, which the server annotates readOnlyHint: \
                         true, a read; the config cannot change a tool's effect"
                    ),
                )
                .upstream(upstream)
                .help("remove it from allow_writes"),
            );
        }
    }
    if let Some(include) = &tools.include {
        for (i, name) in include.iter().enumerate() {
            let Some(tool) = pinned.iter().find(|t| &t.name == name) else {
                continue;
            };
            let natural = mcp_effect(Some(&Value::Object(tool.annotations.clone())));
            if classify(natural, tools.writes.get(name), true) == Err(Refusal::NotAllowListed) {
                diags.push(
                    Diagnostic::new(
                        config,
                        pointer_join(&pointer_join(pointer, "include_tools"), &i.to_string()),
                        format!(
                            "tool `{name}` is a write (its annotations do not say readOnlyHint: \
                             true); writes are exposed only when allow_writes lists them"
                        ),
                    )
                    .upstream(upstream)
                    .help(format!(
                        "add \"allow_writes\": {{\"{name}\": {{}}}} to the upstream (calls then need \
                         the write gate and a person's approval), or remove it from include_tools"
                    )),
                );
            }
        }
    }
    diags.len() == before
}

/// Reads and parses a tool list, its size checked first.
fn read(file: &Path) -> Result<ToolList, String> {
    let size = std::fs::metadata(file)
        .map_err(|e| format!("cannot read the vendored tool list: {e}"))?
        .len();
    if size > MAX_BYTES {
        return Err(format!(
            "the vendored tool list is {size} bytes, over the {MAX_BYTES}-byte cap"
        ));
    }
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read the vendored tool list: {e}"))?;
    let format = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v.get("format").and_then(Value::as_u64));
    if format.is_some_and(|f| f != u64::from(FORMAT)) {
        return Err(format!(
            "the vendored tool list has format {}; this build reads format {FORMAT}",
            format.unwrap_or_default()
        ));
    }
    serde_json::from_str(&text).map_err(|e| format!("the vendored tool list is not valid: {e}"))
}

/// `changes` as a phrase: `description and inputSchema`.
pub fn describe_changes(changes: &[PinChange]) -> String {
    let fields: Vec<&str> = changes.iter().map(|c| c.field()).collect();
    match fields.as_slice() {
        [] => "nothing".into(),
        [one] => (*one).into(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// `value` with every object's keys sorted, so equal content has one spelling whatever order
/// the server wrote it in (serde_json here preserves insertion order).
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&m[k])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(description: &str, input: Value) -> PinnedTool {
        PinnedTool::new("echo", description, input, None, Map::new())
    }

    #[test]
    fn the_digest_ignores_key_order_and_sees_every_field() {
        let a = tool(
            "Echoes",
            json!({"type": "object", "properties": {"m": {"type": "string"}}}),
        );
        let b = tool(
            "Echoes",
            json!({"properties": {"m": {"type": "string"}}, "type": "object"}),
        );
        assert_eq!(a.sha256, b.sha256);
        assert_eq!(a.sha256.len(), 64);
        assert!(a.changes(&b).is_empty());

        let described = tool("Echoes, and more", a.input_schema.clone());
        assert_eq!(a.changes(&described), vec![PinChange::Description]);
        let typed = tool(
            "Echoes",
            json!({"type": "object", "properties": {"m": {"type": "integer"}}}),
        );
        assert_eq!(a.changes(&typed), vec![PinChange::InputSchema]);
        let mut output = a.clone();
        output.output_schema = Some(json!({"type": "object"}));
        output.sha256 = output.digest();
        assert_eq!(a.changes(&output), vec![PinChange::OutputSchema]);
        let mut hinted = a.clone();
        hinted
            .annotations
            .insert("readOnlyHint".into(), json!(true));
        hinted.sha256 = hinted.digest();
        assert_eq!(a.changes(&hinted), vec![PinChange::Annotations]);
        assert_eq!(
            describe_changes(&[PinChange::Description, PinChange::InputSchema]),
            "description and inputSchema"
        );
    }

    #[test]
    fn the_policies_read_as_the_config_writes_them_and_the_cap_is_16_mib() {
        assert_eq!(PinPolicy::Refuse.as_str(), "refuse");
        assert_eq!(PinPolicy::Warn.as_str(), "warn");
        assert_eq!(PinPolicy::default(), PinPolicy::Refuse);
        assert_eq!(
            MAX_BYTES,
            16 * 1024 * 1024,
            "the cap docs/configuration.md states"
        );
    }

    #[test]
    fn a_tool_list_is_read_up_to_its_size_cap() {
        let dir = std::env::temp_dir().join(format!("ptc-pins-cap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("x.tools.json");
        let text = ToolList::new("x", vec![]).render();
        let padded = |extra: u64| {
            let pad = MAX_BYTES + extra - text.len() as u64;
            format!("{}{text}", " ".repeat(pad as usize))
        };
        std::fs::write(&file, padded(0)).unwrap();
        assert_eq!(read(&file).unwrap().upstream, "x", "at the cap it is read");
        std::fs::write(&file, padded(1)).unwrap();
        assert_eq!(
            read(&file).unwrap_err(),
            format!(
                "the vendored tool list is {} bytes, over the {MAX_BYTES}-byte cap",
                MAX_BYTES + 1
            )
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_file_is_sorted_and_reads_back() {
        let list = ToolList::new(
            "peer",
            vec![
                tool("b", json!({"type": "object"})),
                PinnedTool::new("add", "a", json!({"type": "object"}), None, Map::new()),
            ],
        );
        let text = list.render();
        assert!(text.ends_with("}\n"));
        assert!(text.find("\"add\"").unwrap() < text.find("\"echo\"").unwrap());
        assert!(text.find("\"format\"").unwrap() < text.find("\"tools\"").unwrap());
        let back: ToolList = serde_json::from_str(&text).unwrap();
        assert_eq!(back, list);
        assert_eq!(back.render(), text);
    }
}
