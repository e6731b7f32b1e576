//! Plan → Rust tokens for the `ptc_upstreams!` macro and `ptc expand`.
//!
//! [`generate`] is pure: it turns a validated [`ptc_plan::Plan`] into one module per upstream
//! (typed argument structs, each a `ptc_core::Operation` that `Upstreams::run` calls, and
//! response types) plus a `plan()` registration, and never reads a file or the
//! environment. The code names outside paths only through the `ptc` facade (`paths`). [`expansion`] is the one place that loads a config the way the macro does
//! (vendored `schema_url` copies included), so the macro and `ptc expand` cannot disagree.
//! [`drift`] compares two plans of the same config for `ptc vendor --check`.

#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod build_profile;
pub mod drift;
pub mod expansion;
mod idents;
pub use idents::{serde_field_name, serde_snake};
mod operation;
mod paths;
mod registration;
mod types;
pub mod vendored;

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use proc_macro2::TokenStream;
use ptc_plan::{CredentialSource, Diagnostic, Plan, Transport, UpstreamPlan};
use quote::quote;

use crate::idents::{ident, snake};
use crate::types::{TypeGen, doc_lines};

/// The code for `plan`, or every reason it cannot be generated. `config` names the file the
/// plan came from, for messages only.
pub fn generate(plan: &Plan, config: &Path) -> Result<TokenStream, Vec<Diagnostic>> {
    generate_typed(plan, config, None)
}

/// [`generate`], with typed code (arguments, responses, `Operation`) only for the tools `typed`
/// names (`server/tool`), when it names any: a crate that calls a few operations of a large
/// catalog compiles only their types. Every tool is still in the plan, so programs call them
/// all; a name that is no tool is an error.
pub fn generate_typed(
    plan: &Plan,
    config: &Path,
    typed: Option<&BTreeSet<String>>,
) -> Result<TokenStream, Vec<Diagnostic>> {
    let mut diags = Vec::new();
    if let Some(typed) = typed {
        diags.extend(unknown_typed(plan, config, typed));
    }
    for cred in &plan.credentials {
        if cred.source == CredentialSource::Literal {
            diags.push(
                Diagnostic::new(
                    config,
                    ptc_plan::diagnostic::pointer_join("/credentials", &cred.name),
                    format!(
                        "credential `{}` is a literal value; a compiled deployment never embeds a secret",
                        cred.name
                    ),
                )
                .help("use \"source\": \"env\" or \"source\": \"file\" so the secret is read at run time"),
            );
        }
    }
    let mut modules = Vec::new();
    let mut module_names: BTreeMap<String, &str> = BTreeMap::new();
    for up in &plan.upstreams {
        let module = snake(&up.name);
        if let Some(other) = module_names.insert(module.clone(), &up.name) {
            diags.push(
                Diagnostic::new(
                    config,
                    ptc_plan::diagnostic::pointer_join("/upstreams", &up.name),
                    format!(
                        "upstreams `{other}` and `{}` both become the Rust module `{module}`",
                        up.name
                    ),
                )
                .upstream(&up.name)
                .help("rename one of the upstreams"),
            );
            continue;
        }
        match upstream(up, &module, config, typed) {
            Ok(tokens) => modules.push(tokens),
            Err(d) => diags.push(*d),
        }
    }
    if !plan.programs.is_empty() {
        if let Some(other) = module_names.get(PROGRAMS_MODULE) {
            diags.push(
                Diagnostic::new(
                    config,
                    ptc_plan::diagnostic::pointer_join("/upstreams", other),
                    format!(
                        "upstream `{other}` becomes the Rust module `{PROGRAMS_MODULE}`, which \
                         holds the declared programs' types"
                    ),
                )
                .upstream(other)
                .help("rename the upstream"),
            );
        } else {
            match programs(plan, config) {
                Ok(tokens) => modules.push(tokens),
                Err(d) => diags.push(*d),
            }
        }
    }
    if !diags.is_empty() {
        return Err(diags);
    }
    let registration = registration::plan_fn(plan).map_err(|m| {
        vec![Diagnostic::new(config, "", m).help("this is a ptc-codegen bug; please report it")]
    })?;
    Ok(quote! {
        #(#modules)*
        #registration
    })
}

/// The names in `typed` that are no tool of the plan, each an error with the closest name.
fn unknown_typed(plan: &Plan, config: &Path, typed: &BTreeSet<String>) -> Vec<Diagnostic> {
    let tools: Vec<String> = plan
        .upstreams
        .iter()
        .flat_map(|up| {
            let names: Vec<&str> = match &up.transport {
                Transport::Openapi(api) => api.tools.iter().map(|t| t.name.as_str()).collect(),
                Transport::McpStdio(ptc_plan::McpStdioPlan { tools, .. })
                | Transport::McpHttp(ptc_plan::McpHttpPlan { tools, .. }) => tools
                    .pinned
                    .iter()
                    .flatten()
                    .map(|t| t.name.as_str())
                    .collect(),
            };
            names.into_iter().map(move |t| format!("{}/{t}", up.name))
        })
        .collect();
    typed
        .iter()
        .filter(|name| !tools.contains(name))
        .map(|name| {
            let near = ptc_names::closest(name, tools.iter().map(String::as_str))
                .map(|c| format!(" (did you mean `{c}`?)"))
                .unwrap_or_default();
            Diagnostic::new(
                config,
                "",
                format!("`typed` names `{name}`, which is not a tool of this config{near}"),
            )
            .help("name tools as server/tool, as programs call them")
        })
        .collect()
}

/// Formats generated tokens as Rust source (what `ptc expand` prints and snapshots hold).
pub fn pretty(tokens: TokenStream) -> Result<String, String> {
    let file: syn::File =
        syn::parse2(tokens).map_err(|e| format!("generated code does not parse: {e}"))?;
    Ok(prettyplease::unparse(&file))
}

/// One upstream's module.
fn upstream(
    up: &UpstreamPlan,
    module: &str,
    config: &Path,
    typed: Option<&BTreeSet<String>>,
) -> Result<TokenStream, Box<Diagnostic>> {
    let wanted = |tool: &str| typed.is_none_or(|t| t.contains(&format!("{}/{tool}", up.name)));
    let name = &up.name;
    let module_id = ident(module);
    let doc = doc_lines(&[
        Some(format!("Upstream `{name}` ({}).", up.transport.tag())),
        (!up.description.is_empty()).then(|| up.description.clone()),
    ]);
    let items = match &up.transport {
        Transport::Openapi(api) => {
            let specs = api
                .tools
                .iter()
                .filter(|t| wanted(&t.name))
                .map(|t| {
                    (
                        operation::OpSpec::openapi(name, t),
                        t.ptc.operation_id.as_str(),
                    )
                })
                .collect();
            tool_items(name, &api.definitions, specs, config)?
        }
        Transport::McpStdio(ptc_plan::McpStdioPlan { tools, .. })
        | Transport::McpHttp(ptc_plan::McpHttpPlan { tools, .. }) => {
            let Some(pinned) = &tools.pinned else {
                return Err(Box::new(unpinned(name, config)));
            };
            let specs = pinned
                .iter()
                .filter(|t| wanted(&t.name))
                .map(|t| {
                    let spec = operation::OpSpec::mcp(name, t, tools.writes.get(&t.name));
                    (spec, t.name.as_str())
                })
                .collect();
            tool_items(name, &NO_DEFINITIONS, specs, config)?
        }
    };
    let serde_import = paths::serde_import();
    Ok(quote! {
        #doc
        pub mod #module_id {
            #serde_import
            /// The upstream's name: the namespace of its tools.
            pub const UPSTREAM: &str = #name;
            #(#items)*
        }
    })
}

/// The module of the declared programs' types.
const PROGRAMS_MODULE: &str = "programs";

/// The `programs` module: each declared program's arguments (a `ptc::Program`) and result.
fn programs(plan: &Plan, config: &Path) -> Result<TokenStream, Box<Diagnostic>> {
    let specs = plan
        .programs
        .iter()
        .map(|p| (operation::OpSpec::program(p), p.name.as_str()))
        .collect();
    let items = tool_items("", &NO_DEFINITIONS, specs, config)?;
    let module = ident(PROGRAMS_MODULE);
    let serde_import = paths::serde_import();
    Ok(quote! {
        /// The deployment's declared programs (tools of the host): typed arguments, each a
        /// `ptc::Program` that `ptc::run_declared` runs in-process, and typed results.
        pub mod #module {
            #serde_import
            #(#items)*
        }
    })
}

/// MCP tool schemas carry their own `$defs`; only OpenAPI upstreams share definitions.
static NO_DEFINITIONS: BTreeMap<String, serde_json::Value> = BTreeMap::new();

/// Why an MCP upstream without a vendored tool list cannot be built.
fn unpinned(upstream: &str, config: &Path) -> Diagnostic {
    Diagnostic::new(
        config,
        ptc_plan::diagnostic::pointer_join("/upstreams", upstream),
        format!(
            "MCP upstream `{upstream}` has no vendored tool list at `{}`: a compiled deployment types and pins its MCP tools at build time",
            ptc_plan::pins::path(config, upstream).display()
        ),
    )
    .upstream(upstream)
    .help(format!(
        "run `ptc vendor {}`: it connects to the server, writes the list, and the build reads it (review it and commit it)",
        config.display()
    ))
}

/// The items of an upstream's tools, each named by `what` (its operationId or MCP name) if the
/// generator fails on it.
fn tool_items<'v>(
    upstream: &str,
    definitions: &'v BTreeMap<String, serde_json::Value>,
    specs: Vec<(operation::OpSpec<'v>, &str)>,
    config: &Path,
) -> Result<Vec<TokenStream>, Box<Diagnostic>> {
    let mut types = TypeGen::new(definitions);
    let names: Vec<operation::OpNames> = specs
        .iter()
        .map(|(t, _)| operation::OpNames::claim(t.name, &mut types.names))
        .collect();
    types.declare_definitions();
    let mut out = Vec::new();
    for ((tool, what), op_names) in specs.iter().zip(&names) {
        // The backstop: a bug in the generator becomes a compile error naming the operation,
        // never a proc-macro panic.
        let result = catch_unwind(AssertUnwindSafe(|| {
            let mut items = Vec::new();
            operation::generate(&mut types, upstream, tool, op_names, &mut items);
            items
        }));
        match result {
            Ok(items) => out.extend(items),
            Err(payload) => {
                let why = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown failure".into());
                let d = Diagnostic::new(
                    config,
                    "",
                    format!("internal error while generating code for this operation: {why}"),
                )
                .help("this is a ptc-codegen bug; please report it with the operation's schema");
                // The declared programs have no upstream: they are named by themselves.
                let d = if upstream.is_empty() {
                    d.program(what)
                } else {
                    d.upstream(upstream).operation(what)
                };
                return Err(Box::new(d));
            }
        }
    }
    Ok(out)
}
