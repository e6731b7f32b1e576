//! Compiling one declared program: its file read, every check of [`super`] made, its effects
//! summed up into annotations.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use ptc_lisp::{LiteralArg, Pos};
use serde_json::Value;

use super::flow::{self, Param};
use super::tools::{Listed, Tool, tools_of};
use crate::call_form::{self, FormError};
use crate::config::programs::ProgramConfig;
use crate::diagnostic::{Diagnostic, Diagnostics};
use crate::plan::{ProgramAnnotations, ProgramPlan, UpstreamPlan, find_tool};
use crate::suggest::did_you_mean;
use crate::validate::{self, Patterns};

/// How a call whose tool is known only at run time is fixed.
const LITERAL_CALL: &str = "name the tool literally, e.g. (tool/call 'server/tool {:arg value}): \
                            a declared program's calls are checked when it is built";

/// Compiles `program` (declared in `config`) against `upstreams`. Calls of the upstreams in
/// `failed` (configured, but their own problems kept them from compiling) are not checked:
/// those problems are reported already. `None` when a problem was found (it is in `diags`).
pub(crate) fn compile(
    program: &ProgramConfig,
    config: &Path,
    upstreams: &[UpstreamPlan],
    failed: &[String],
    diags: &mut Diagnostics,
    files: &mut Vec<PathBuf>,
) -> Option<ProgramPlan> {
    let file = Path::new(&program.file);
    files.push(file.to_path_buf());
    let source = match read(file) {
        Ok(source) => source,
        Err(why) => {
            diags.push(
                Diagnostic::new(config, format!("{}/file", program.pointer), why)
                    .program(&program.name)
                    .help("fix `file`: it is relative to the config's folder"),
            );
            return None;
        }
    };
    let before = diags.len();
    let mut check = Check {
        program,
        file,
        upstreams,
        failed,
        diags,
        patterns: Patterns::default(),
        calls: BTreeSet::new(),
        writes: BTreeMap::new(),
        destructive: false,
        idempotent: true,
    };
    check.source(&source);
    check.declared_writes(config);
    let Check {
        calls,
        writes,
        destructive,
        idempotent,
        diags,
        ..
    } = check;
    // In the order of the text, as a person reads the program.
    diags.0[before..].sort_by_key(|d| (d.file.clone(), d.position));
    (diags.len() == before).then(|| ProgramPlan {
        name: program.name.clone(),
        description: program.description.clone(),
        file: program.file.clone(),
        source,
        input_schema: program.parameters.clone(),
        output_schema: program.result.clone(),
        calls: calls.into_iter().collect(),
        annotations: ProgramAnnotations {
            read_only_hint: writes.is_empty(),
            destructive_hint: destructive,
            idempotent_hint: idempotent,
        },
        writes: writes.into_keys().collect(),
    })
}

/// The program text, refused past the size the evaluator takes.
fn read(file: &Path) -> Result<String, String> {
    let max = ptc_lisp::Limits::default().max_program_bytes;
    let meta = std::fs::metadata(file)
        .map_err(|e| format!("cannot read program `{}`: {e}", file.display()))?;
    if meta.len() > max as u64 {
        return Err(format!(
            "program `{}` is {} bytes, over the {max}-byte program limit",
            file.display(),
            meta.len()
        ));
    }
    std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read program `{}`: {e}", file.display()))
}

struct Check<'a> {
    program: &'a ProgramConfig,
    file: &'a Path,
    upstreams: &'a [UpstreamPlan],
    failed: &'a [String],
    diags: &'a mut Diagnostics,
    patterns: Patterns,
    /// Every tool called, `server/tool`.
    calls: BTreeSet<String>,
    /// The writes called, and where the first call of each is.
    writes: BTreeMap<String, Pos>,
    destructive: bool,
    idempotent: bool,
}

impl Check<'_> {
    fn problem(&mut self, pos: Pos, message: impl Into<String>, help: impl Into<String>) {
        self.diags.push(
            Diagnostic::new(self.file, "", message)
                .program(&self.program.name)
                .at(pos.line as usize, pos.col as usize)
                .help(help),
        );
    }

    fn source(&mut self, source: &str) {
        let servers: Vec<&str> = (self.upstreams.iter().map(|u| u.name.as_str()))
            .chain(self.failed.iter().map(String::as_str))
            .collect();
        let named = |s: &str| call_form::is_call_head(s, &servers);
        let uses = match ptc_lisp::uses(source, &named) {
            Ok(uses) => uses,
            Err(e) => {
                let pos = e.pos().unwrap_or(Pos { line: 1, col: 1 });
                self.problem(
                    pos,
                    format!("the program does not read: {}", e.message()),
                    "fix the program text at the line and column given",
                );
                return;
            }
        };
        for (name, pos) in uses.other {
            self.problem(
                pos,
                format!(
                    "`{name}` is used here other than as a call's head, so what it calls is \
                     known only when the program runs"
                ),
                LITERAL_CALL,
            );
        }
        self.data_reads(&uses.data);
        for (head, site) in uses.calls {
            let (paged, args) = call_form::site_args(&head, &site.args);
            self.call(site.pos, &args, paged);
        }
    }

    fn params(&self) -> Vec<Param<'_>> {
        let p = &self.program.parameters;
        let required: Vec<&str> = p
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        p.get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(name, schema)| Param {
                name,
                schema,
                required: required.contains(&name.as_str()),
            })
            .collect()
    }

    fn data_reads(&mut self, reads: &[(String, Pos)]) {
        let names: Vec<String> = self.params().iter().map(|p| p.name.to_string()).collect();
        for (key, pos) in reads {
            if !names.contains(key) {
                self.problem(
                    *pos,
                    format!(
                        "reads data/{key}, which is not a parameter{}",
                        did_you_mean(key, names.iter().map(String::as_str))
                    ),
                    format!("declare `{key}` in the program's parameters, or fix the name"),
                );
            }
        }
    }

    fn call(&mut self, pos: Pos, args: &[LiteralArg], paged: bool) {
        let call = match call_form::read(args) {
            Ok(call) => call,
            Err(FormError::Computed) => {
                return self.problem(
                    pos,
                    "the tool this calls is computed when the program runs",
                    LITERAL_CALL,
                );
            }
            Err(FormError::Wrong(message)) => {
                return self.problem(pos, message, "fix the call");
            }
        };
        if self.failed.contains(&call.server) {
            return;
        }
        let upstreams = self.upstreams;
        let Some(up) = upstreams.iter().find(|u| u.name == call.server) else {
            let names = upstreams.iter().map(|u| u.name.as_str());
            return self.problem(
                pos,
                format!(
                    "calls `{}/{}`, but there is no upstream `{}`{}",
                    call.server,
                    call.tool,
                    call.server,
                    did_you_mean(&call.server, names.clone())
                ),
                format!(
                    "call one of the configured upstreams: {}",
                    names.collect::<Vec<_>>().join(" ")
                ),
            );
        };
        let tools = match tools_of(up) {
            Listed::Tools(tools) => tools,
            Listed::Unpinned => {
                return self.problem(
                    pos,
                    format!(
                        "calls `{}/{}`, but the tools of `{}` are listed only when it runs",
                        call.server, call.tool, call.server
                    ),
                    format!(
                        "pin them with `ptc vendor` so the build can check the program's calls \
                         of `{}`",
                        call.server
                    ),
                );
            }
        };
        let Some(tool) = find_tool(&tools, &call.tool, |t| t.name, |t| t.operation_id) else {
            return self.problem(
                pos,
                format!(
                    "calls `{}/{}`, but `{}` has no tool `{}`{}",
                    call.server,
                    call.tool,
                    call.server,
                    call.tool,
                    did_you_mean(&call.tool.replace('_', "-"), tools.iter().map(|t| t.name))
                ),
                format!(
                    "call one of its tools (`ptc catalog` lists them; (dir '{}) in a program)",
                    call.server
                ),
            );
        };
        let qualified = format!("{}/{}", call.server, tool.name);
        self.calls.insert(qualified.clone());
        if tool.classified.is_none() {
            return self.problem(
                pos,
                format!("calls {qualified}, a write its upstream does not allow"),
                format!(
                    "review it, then add it to the upstream's allow_writes and to the program's \
                     \"writes\": [\"{qualified}\"]"
                ),
            );
        }
        if paged && !tool.paged {
            return self.problem(
                pos,
                format!("tool/pages: {qualified} has no pagination"),
                "call it with tool/call",
            );
        }
        if !tool.reads() {
            self.write(pos, &qualified, tool);
        }
        self.arguments(pos, &call, tool, &qualified);
    }

    fn write(&mut self, pos: Pos, qualified: &str, tool: &Tool) {
        self.writes.entry(qualified.to_string()).or_insert(pos);
        self.destructive |= tool.destructive;
        self.idempotent &= tool.idempotent;
        if !self.program.writes.iter().any(|(w, _)| w == qualified) {
            self.problem(
                pos,
                format!(
                    "calls {qualified}, a write, but the program's \"writes\" does not list it"
                ),
                format!(
                    "review the write, then add \"{qualified}\" to the program's \"writes\" in \
                     the config"
                ),
            );
        }
    }

    fn arguments(
        &mut self,
        pos: Pos,
        call: &call_form::CallForm<LiteralArg>,
        tool: &Tool,
        qualified: &str,
    ) {
        let entries = match call.arg_entries() {
            Ok(entries) => entries,
            // An arguments map the program computes is checked when the call is made.
            Err(FormError::Computed) => return,
            Err(FormError::Wrong(message)) => return self.problem(pos, message, "fix the call"),
        };
        let complete = entries.iter().all(|(k, _)| k.is_some());
        let literal: validate::LiteralArgs = entries
            .into_iter()
            .filter_map(|(k, v)| Some((k?, v.and_then(Result::ok))))
            .collect();
        let found = validate::check_literal_args(tool.schema, &self.patterns, literal, complete);
        if !found.is_empty() {
            self.problem(
                pos,
                format!("{qualified}: invalid arguments: {}", found.join("; ")),
                format!("fix the arguments; (doc '{qualified}) lists every argument"),
            );
        }
        let Some(LiteralArg::Map(written)) = &call.args else {
            return;
        };
        let params = self.params();
        let flows: Vec<(String, String)> = written
            .iter()
            .filter_map(|(k, v)| match (k, v) {
                (LiteralArg::Const(k), LiteralArg::Data(key)) => {
                    let param = params.iter().find(|p| p.name == key)?;
                    flow::problem(param, &call_form::key_text(k), tool.schema, qualified)
                }
                _ => None,
            })
            .collect();
        for (message, help) in flows {
            self.problem(pos, message, help);
        }
    }

    /// Every write the program lists must be one it calls: a stale entry would let a later
    /// edit call it unreviewed.
    fn declared_writes(&mut self, config: &Path) {
        for (w, pointer) in &self.program.writes {
            if !self.writes.contains_key(w) {
                self.diags.push(
                    Diagnostic::new(
                        config,
                        pointer.clone(),
                        format!(
                            "\"writes\" lists `{w}`, which the program does not call as a write"
                        ),
                    )
                    .program(&self.program.name)
                    .help(
                        "remove it, or name the write as server/tool the way the program calls it",
                    ),
                );
            }
        }
    }
}
