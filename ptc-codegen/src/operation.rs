//! One included operation, pinned MCP tool or declared program: its arguments struct (the typed
//! call's [`ptc_core::Operation`], or a program's [`ptc_core::Program`]) and its response type.
//! All come here as an [`OpSpec`], so they share the naming rules and the type generator.

use proc_macro2::TokenStream;
use ptc_plan::{Effect, PinnedTool, ProgramPlan, ToolPlan, WriteGrant};
use quote::quote;
use serde_json::{Map, Value};

use crate::idents::{Names, ident, pascal, snake};
use crate::types::{
    Field, FieldStyle, Hint, TypeGen, description, doc_lines, doc_paragraphs, first_paragraph,
    sentences, struct_item,
};

/// The Rust names of one operation's items, claimed before any type is generated so a schema
/// that happens to be called `ListTracesArgs` cannot take an operation's name.
pub struct OpNames {
    /// The arguments struct.
    pub args: String,
    /// The response type.
    pub response: String,
}

/// What the generator needs of one tool, whatever its transport.
pub struct OpSpec<'v> {
    /// Exposed (catalog) name.
    pub name: &'v str,
    /// Description.
    pub description: &'v str,
    /// JSON Schema of the arguments.
    pub input_schema: &'v Value,
    /// JSON Schema of a successful result (`None`: the tool declares none).
    pub output_schema: Option<&'v Value>,
    /// Arguments the runtime fills in when the caller leaves them out.
    pub default_args: Option<&'v Map<String, Value>>,
    /// Where the call goes, for doc comments: "`GET /x` on upstream `u` (...)."
    pub route: String,
    /// What calling it does: a write's doc says it needs the write gate.
    pub effect: Effect,
    /// It pages (`x-ptc-pagination`): the args struct implements `ptc::Paged`.
    pub paged: bool,
    /// A declared program (its arguments implement `ptc::Program`), not an upstream's tool.
    pub program: bool,
}

impl<'v> OpSpec<'v> {
    /// An OpenAPI operation of `upstream`.
    pub fn openapi(upstream: &str, tool: &'v ToolPlan) -> Self {
        OpSpec {
            name: &tool.name,
            description: &tool.description,
            input_schema: &tool.input_schema,
            output_schema: Some(&tool.output_schema),
            default_args: Some(&tool.ptc.default_args),
            route: format!(
                "`{} {}` on upstream `{upstream}` (operationId `{}`, tool `{upstream}/{}`).",
                tool.ptc.method, tool.ptc.path, tool.ptc.operation_id, tool.name
            ),
            effect: tool.classified.effect,
            paged: tool.ptc.pagination.is_some(),
            program: false,
        }
    }

    /// A pinned tool of MCP upstream `upstream`, allow-listed by `grant` when it writes.
    pub fn mcp(upstream: &str, tool: &'v PinnedTool, grant: Option<&WriteGrant>) -> Self {
        OpSpec {
            name: &tool.name,
            description: &tool.description,
            input_schema: &tool.input_schema,
            output_schema: tool.output_schema.as_ref(),
            default_args: None,
            route: format!(
                "MCP tool `{}` of upstream `{upstream}` (tool `{upstream}/{}`, pinned at sha256 `{}`).",
                tool.name,
                tool.name,
                tool.sha256.chars().take(12).collect::<String>()
            ),
            effect: grant.map_or_else(
                || ptc_plan::effects::mcp_effect(Some(&Value::Object(tool.annotations.clone()))),
                |g| g.effect,
            ),
            paged: false,
            program: false,
        }
    }

    /// A declared program: its parameters and result (`{}`, any value, is untyped).
    pub fn program(program: &'v ProgramPlan) -> Self {
        let file = std::path::Path::new(&program.file).file_name().map_or_else(
            || program.file.clone(),
            |f| f.to_string_lossy().into_owned(),
        );
        OpSpec {
            name: &program.name,
            description: &program.description,
            input_schema: &program.input_schema,
            output_schema: program
                .output_schema
                .as_object()
                .is_some_and(|s| !s.is_empty())
                .then_some(&program.output_schema),
            default_args: None,
            route: format!("the declared program `{}` (`{file}`).", program.name),
            effect: if program.writes.is_empty() {
                Effect::Read
            } else {
                Effect::Write
            },
            paged: false,
            program: true,
        }
    }
}

impl OpNames {
    /// Claims the names for the tool called `tool` in `names`.
    pub fn claim(tool: &str, names: &mut Names) -> Self {
        let base = pascal(tool);
        OpNames {
            args: names.claim(&[format!("{base}Args")]),
            response: names.claim(&[format!("{base}Response")]),
        }
    }
}

/// The items of `tool` of upstream `upstream`, appended to `out` (types go through `types`).
pub fn generate<'v>(
    types: &mut TypeGen<'v>,
    upstream: &str,
    tool: &OpSpec<'v>,
    names: &OpNames,
    out: &mut Vec<TokenStream>,
) {
    let route = &tool.route;
    out.push(args(types, upstream, tool, names, route));
    let id = ident(&names.response);
    let Some(output) = tool.output_schema else {
        let value = crate::paths::json_value();
        let doc = doc_lines(&[
            Some(format!("Successful result of {route}")),
            Some("The tool declares no `outputSchema`, so its result is untyped: the JSON it answers (`structuredContent` or JSON text), or a JSON string for other text.".into()),
        ]);
        out.push(quote! {
            #doc
            pub type #id = #value;
        });
        out.extend(types.take_items());
        return;
    };
    let root = types.root(output);
    let response = types.ty(output, &Hint::fixed(&names.response), root, 0);
    if response.named.as_deref() != Some(names.response.as_str()) {
        let target = crate::types::optional(&response);
        let doc = doc_lines(&[
            Some(format!("Successful result of {route}")),
            response.note.clone(),
        ]);
        out.push(quote! {
            #doc
            pub type #id = #target;
        });
    }
    out.extend(types.take_items());
}

/// The arguments struct, its constructor taking every required argument (`Default` when none
/// is), and its [`ptc_core::Operation`] impl (`upstreams.run(args)` is the typed call), or a
/// program's [`ptc_core::Program`] impl (`ptc::run_declared`).
fn args<'v>(
    types: &mut TypeGen<'v>,
    upstream: &str,
    tool: &OpSpec<'v>,
    names: &OpNames,
    route: &str,
) -> TokenStream {
    let schema = tool.input_schema;
    let no_defaults = Map::new();
    let root = types.root(schema);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let defaults = tool.default_args.unwrap_or(&no_defaults);
    let mut fields = Vec::new();
    let props = schema.get("properties").and_then(Value::as_object);
    for (wire, prop) in props.into_iter().flatten() {
        let ty = types.ty(prop, &Hint::field(&names.args, wire), root, 1);
        let default = match (defaults.get(wire), prop.get("default")) {
            (Some(d), _) => Some(format!(
                "Default: `{d}` (filled in by the runtime when `None`)."
            )),
            (None, Some(d)) => Some(format!("Server default: `{d}`.")),
            (None, None) => None,
        };
        fields.push(Field {
            wire: wire.clone(),
            doc: doc_lines(&[description(prop), ty.note.clone(), default]),
            optional: ty.nullable
                || !required.contains(&wire.as_str())
                || defaults.contains_key(wire),
            boxed: false,
            ty,
        });
    }
    let all_optional = fields.iter().all(|f| f.optional);
    let how = if fields.is_empty() {
        "The operation takes no arguments: build them with `Default`"
    } else if all_optional {
        "Every argument is optional: `Default` leaves them `None`"
    } else {
        "Required arguments are plain fields (see `new`), optional ones `Option`s"
    };
    // The summary, then the first paragraph of the description: the full text is in the catalog.
    let mut paragraphs = tool.description.split("\n\n").filter_map(first_paragraph);
    let doc = doc_paragraphs(&[
        paragraphs.next(),
        Some(sentences(&[
            paragraphs.next(),
            Some(format!(
                "Arguments of {route} {how}. {}{}.",
                if tool.program {
                    "Run it in-process with `ptc::run_declared(upstreams, runtime, &args, \
                     limits, budgets)`"
                } else {
                    "Call it with `upstreams.run(args)`"
                },
                if tool.paged {
                    ", or stream its pages with `upstreams.pages(&args, max_pages)`"
                } else {
                    ""
                }
            )),
            (tool.program && !tool.effect.is_read()).then(|| {
                "It calls writes: each runs only when the process's write gate is open, and \
                 waits for a person's approval where its grant asks for one (none can be asked \
                 in-process, so such a write is refused there)."
                    .to_string()
            }),
            (!tool.program && !tool.effect.is_read()).then(|| {
                format!(
                    "A {}: it runs only when the process's write gate is open \
                     (`--allow-writes`), never retried; a Rust caller is not asked for approval, \
                     a program is.",
                    tool.effect.as_str().replace('_', " ")
                )
            }),
        ])),
    ]);
    let item = struct_item(
        &names.args,
        doc,
        &fields,
        FieldStyle::Args {
            default: all_optional,
        },
    );
    let id = ident(&names.args);
    let response_id = ident(&names.response);
    let paged = tool.paged.then(|| {
        let paged_trait = crate::paths::paged();
        quote!(impl #paged_trait for #id {})
    });
    let operation = if tool.program {
        let program_trait = crate::paths::program();
        let name = tool.name;
        quote! {
            impl #program_trait for #id {
                const NAME: &'static str = #name;
                type Output = #response_id;
            }
        }
    } else {
        let operation_trait = crate::paths::operation();
        let tool_name = format!("{upstream}/{}", tool.name);
        quote! {
            impl #operation_trait for #id {
                const TOOL: &'static str = #tool_name;
                type Response = #response_id;
            }
            #paged
        }
    };
    if all_optional {
        return quote!(#item #operation);
    }
    let mut field_names = Names::default();
    let mut params = Vec::new();
    let mut inits = Vec::new();
    for f in &fields {
        let id = ident(&field_names.claim(&[snake(&f.wire)]));
        if f.optional {
            inits.push(quote!(#id: None));
        } else {
            let ty = &f.ty.tokens;
            params.push(quote!(#id: #ty));
            inits.push(quote!(#id));
        }
    }
    let allow = (params.len() >= 8).then(|| quote!(#[allow(clippy::too_many_arguments)]));
    quote! {
        #item
        #allow
        impl #id {
            /// The arguments with every required one given and every optional one `None`.
            pub fn new(#(#params),*) -> Self {
                Self { #(#inits),* }
            }
        }
        #operation
    }
}
