//! Compiling the included operations of one OpenAPI upstream into tools.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value, json};

use super::document::Document;
use super::extensions::{self, Extensions};
use super::resolve::{RefError, Resolver, Store};
use crate::config::{OpenApiConfig, OperationOverride};
use crate::diagnostic::{Reporter, pointer_join};
use crate::effects::{self, Classified, Refusal};
use crate::names;
use crate::plan::{
    Annotations, BODY_ARG, OperationBinding, Param, ParamLocation, RequestBody, ToolPlan,
};
use crate::projection::{Pagination, ValuePath, is_not_a_list, schema_at};
use crate::suggest::did_you_mean;

const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// Where the upstream came from, for messages.
pub struct Origin<'a> {
    /// The upstream's name.
    pub upstream: &'a str,
    /// The config file and the upstream's pointer in it.
    pub config_file: &'a Path,
    /// Pointer of the upstream entry in the config.
    pub config_pointer: &'a str,
    /// The OpenAPI document's file (or URL).
    pub doc_file: &'a Path,
}

/// An operation found in the document.
struct Located<'d> {
    path: &'d str,
    method: &'d str,
    op: &'d Map<String, Value>,
    path_item: &'d Map<String, Value>,
    pointer: String,
}

/// An upstream's compiled operations and the named schemas they reach.
pub struct Compiled {
    /// The tools, in `include_operations` order.
    pub tools: Vec<ToolPlan>,
    /// The component schemas the tools' schemas reach, by name.
    pub definitions: BTreeMap<String, Value>,
}

/// Compiles the upstream's included operations, reporting every problem through `report`
/// (which is about the upstream).
pub fn compile(
    origin: &Origin,
    cfg: &OpenApiConfig,
    doc: &Document,
    report: &mut Reporter,
) -> Compiled {
    let resolver = Resolver::new(&doc.root, doc.version);
    let mut store = Store::default();
    let index = index_operations(origin, &resolver, &doc.root, report);
    let mut tools: Vec<ToolPlan> = Vec::new();
    let includes_at = pointer_join(origin.config_pointer, "include_operations");
    for (i, id) in cfg.include_operations.iter().enumerate() {
        let Some(found) = index.get(id.as_str()) else {
            let ids = index.keys().copied();
            report.about(Some(origin.upstream), Some(id)).error(
                origin.config_file,
                &pointer_join(&includes_at, &i.to_string()),
                format!(
                    "include_operations names `{id}`, which is not an operationId in {}{}",
                    // The file name: the full path is in the config the error points into.
                    origin
                        .doc_file
                        .file_name()
                        .unwrap_or(origin.doc_file.as_os_str())
                        .display(),
                    did_you_mean(id, ids)
                ),
                Some("fix the operationId, or update the document if the API renamed it".into()),
            );
            continue;
        };
        let overrides = cfg.overrides.get(id).cloned().unwrap_or_default();
        let mut op = OpCompiler {
            origin,
            cfg,
            resolver: &resolver,
            store: &mut store,
            id,
            found,
            overrides: &overrides,
            report: report.about(Some(origin.upstream), Some(id)),
        };
        if let Some(tool) = op.compile() {
            tools.push(tool);
        }
    }
    check_collisions(origin, cfg, &tools, report);
    // Only what the compiled tools reach: a failed operation's schemas are not kept.
    let mut keep = std::collections::HashSet::new();
    for tool in &tools {
        for schema in [&tool.input_schema, &tool.output_schema] {
            if let Ok(names) = crate::schema::referenced(schema, store.values()) {
                keep.extend(names.into_iter().map(str::to_string));
            }
        }
    }
    Compiled {
        tools,
        definitions: store.into_definitions(&keep),
    }
}

fn index_operations<'d>(
    origin: &Origin,
    resolver: &Resolver<'d>,
    root: &'d Value,
    report: &mut Reporter,
) -> BTreeMap<&'d str, Located<'d>> {
    let mut index: BTreeMap<&str, Located> = BTreeMap::new();
    let Some(paths) = root.get("paths").and_then(Value::as_object) else {
        return index;
    };
    for (path, item) in paths {
        let item_at = pointer_join("/paths", path);
        let item = match resolver.follow(item, &item_at) {
            Ok((Value::Object(m), _)) => m,
            _ => continue,
        };
        for method in METHODS {
            let Some(Value::Object(op)) = item.get(method) else {
                continue;
            };
            let Some(Value::String(id)) = op.get("operationId") else {
                continue;
            };
            let pointer = pointer_join(&item_at, method);
            if let Some(prev) = index.get(id.as_str()) {
                report.about(Some(origin.upstream), Some(id)).error(
                    origin.doc_file,
                    &pointer,
                    format!("operationId `{id}` is used twice"),
                    Some(format!(
                        "it is also {} {}; operationIds must be unique",
                        prev.method.to_uppercase(),
                        prev.path
                    )),
                );
                continue;
            }
            index.insert(
                id,
                Located {
                    path,
                    method,
                    op,
                    path_item: item,
                    pointer,
                },
            );
        }
    }
    index
}

struct OpCompiler<'a, 'd> {
    origin: &'a Origin<'a>,
    cfg: &'a OpenApiConfig,
    resolver: &'a Resolver<'d>,
    /// The upstream's named schemas, shared by its operations.
    store: &'a mut Store,
    id: &'a str,
    found: &'a Located<'d>,
    overrides: &'a OperationOverride,
    /// About this upstream and operation; anything it records means the operation failed.
    report: Reporter<'a>,
}

/// One query or path parameter, as declared.
struct Declared {
    name: String,
    location: ParamLocation,
    required: bool,
    repeated: bool,
    schema: Value,
    /// Constructs in `schema` v1 does not validate against.
    unvalidated: Vec<String>,
}

impl OpCompiler<'_, '_> {
    /// A problem in the document at `pointer`.
    fn error(&mut self, pointer: &str, message: impl Into<String>, help: impl Into<String>) {
        self.report
            .error(self.origin.doc_file, pointer, message, Some(help.into()));
    }

    /// A problem in the operator's override; `field` is the path of tokens below the override.
    fn config_error(
        &mut self,
        field: &[&str],
        message: impl Into<String>,
        help: impl Into<String>,
    ) {
        let mut at = pointer_join(
            &pointer_join(self.origin.config_pointer, "operation_overrides"),
            self.id,
        );
        for token in field {
            at = pointer_join(&at, token);
        }
        self.report
            .error(self.origin.config_file, &at, message, Some(help.into()));
    }

    fn ref_error(&mut self, e: RefError) {
        self.error(&e.pointer, e.message, "fix the reference in the document");
    }

    fn compile(&mut self) -> Option<ToolPlan> {
        let op = self.found.op;
        let at = self.found.pointer.clone();
        let remove = "remove it from include_operations";
        let (ext, problems) = extensions::read(op);
        for (key, message) in problems {
            self.error(
                &pointer_join(&at, &key),
                message,
                "fix the extension (see docs/openapi.md)",
            );
        }
        let method = self.found.method.to_uppercase();
        let classified = self.classify(&at, &method, &ext);
        if op.get("deprecated") == Some(&Value::Bool(true)) && !self.overrides.allow_deprecated {
            self.error(
                &pointer_join(&at, "deprecated"),
                "is deprecated, so it is hidden",
                format!(
                    "{remove}, or set operation_overrides.{}.allow_deprecated to true to expose it anyway",
                    self.id
                ),
            );
        }
        let body = self.request_body(&at, &method);
        let base_url = self.operation_server(&at);
        let params = self.parameters(&at);
        let name = self.name(&ext);
        if body.is_some() && params.iter().any(|p| p.name == BODY_ARG) {
            self.error(
                &at,
                format!("has both a request body and a parameter named `{BODY_ARG}`; programs give the body as the `{BODY_ARG}` argument"),
                "remove it from include_operations",
            );
        }
        let input_schema = self.input_schema(&params, body.as_ref(), &ext);
        let mut unvalidated = Vec::new();
        let output_schema = self.output_schema(&at, &mut unvalidated);
        if let Some((_, _, notes)) = &body {
            unvalidated.extend(notes.iter().map(|note| format!("{BODY_ARG}: {note}")));
        }
        for p in &params {
            unvalidated.extend(
                p.unvalidated
                    .iter()
                    .map(|note| format!("param {}: {note}", p.name)),
            );
        }
        let default_args = self.default_args(&params, &ext);
        let (output_schema, result_path, pagination) =
            self.projection(&at, &params, output_schema, &ext);
        if self.report.reported() > 0 {
            return None;
        }
        let http = &self.cfg.http;
        let max_response_bytes = [
            Some(http.max_response_bytes),
            self.overrides.max_response_bytes,
            ext.max_response_bytes,
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(http.max_response_bytes);
        let request_timeout_ms = self
            .overrides
            .request_timeout_ms
            .map_or(http.request_timeout_ms, |t| t.min(http.request_timeout_ms));
        let notes = match (ext.notes.clone(), self.overrides.notes.clone()) {
            (Some(a), Some(b)) => Some(format!("{a}\n{b}")),
            (a, b) => a.or(b),
        };
        Some(ToolPlan {
            name,
            description: self.description(),
            input_schema,
            output_schema,
            annotations: Annotations {
                read_only_hint: classified.effect.is_read(),
            },
            classified,
            ptc: OperationBinding {
                transport: "openapi".into(),
                operation_id: self.id.to_string(),
                method,
                path: self.found.path.to_string(),
                base_url,
                params: params
                    .iter()
                    .map(|d| Param {
                        name: d.name.clone(),
                        location: d.location,
                        required: d.required && !default_args.contains_key(&d.name),
                        repeated: d.repeated,
                    })
                    .collect(),
                body: body.map(|(b, _, _)| b),
                default_args,
                request_timeout_ms,
                connect_timeout_ms: http.connect_timeout_ms.min(request_timeout_ms),
                max_response_bytes,
                result_path,
                pagination,
                notes,
                unvalidated,
            },
        })
    }

    /// What a call returns and how it pages (the override's choice over the document's): the
    /// output schema becomes the selected value's, and every name the two give is checked
    /// against the operation, so an upstream that renames one breaks the build.
    fn projection(
        &mut self,
        at: &str,
        params: &[Declared],
        full: Value,
        ext: &Extensions,
    ) -> (Value, Option<ValuePath>, Option<Pagination>) {
        let result_path = self.overrides.result_path.clone();
        let (result_path, path_at) = match result_path {
            Some(p) => (Some(p), Where::Override("result_path")),
            None => (
                ext.result_path.clone(),
                Where::Document("x-ptc-result-path"),
            ),
        };
        let (pagination, paging_at) = match self.overrides.pagination.clone() {
            Some(p) => (Some(p), Where::Override("pagination")),
            None => (ext.pagination.clone(), Where::Document("x-ptc-pagination")),
        };
        if result_path.is_none() && pagination.is_none() {
            return (full, None, None);
        }
        let defs = self.store.values().clone();
        if let Some(p) = &pagination {
            for (key, arg) in p.args() {
                if !params
                    .iter()
                    .any(|d| d.name == arg && d.location == ParamLocation::Query)
                {
                    self.report_at(
                        at,
                        &paging_at,
                        format!(
                            "{}.{key} `{arg}` is not a query parameter of this operation",
                            paging_at.name()
                        ),
                        "name the query parameter that carries it",
                    );
                }
            }
            if let Pagination::Cursor {
                next_cursor_path, ..
            } = p
                && let Err(e) = schema_at(&full, next_cursor_path, &defs)
            {
                self.report_at(
                    at,
                    &paging_at,
                    format!(
                        "{}.next_cursor_path `{next_cursor_path}`: {e}",
                        paging_at.name()
                    ),
                    "name where the response carries the next page's cursor",
                );
            }
        }
        let output = match &result_path {
            None => full,
            Some(path) => match schema_at(&full, path, &defs) {
                Ok(s) => s,
                Err(e) => {
                    self.report_at(
                        at,
                        &path_at,
                        format!("{} `{path}`: {e}", path_at.name()),
                        "name where the response carries what a call should return",
                    );
                    Value::Null
                }
            },
        };
        if let Some(p) = &pagination
            && p.counts_items()
            && is_not_a_list(&output, &defs)
        {
            self.report_at(
                at,
                &paging_at,
                format!(
                    "{} pagination counts each page's items, but what a call returns is not a \
                     list",
                    p.style()
                ),
                "set a result path that selects the list (e.g. `$.items`)",
            );
        }
        (output, result_path, pagination)
    }

    /// Reports a problem with a value from the document (at `op_at`) or from the override.
    fn report_at(&mut self, op_at: &str, source: &Where, message: String, help: &str) {
        match source {
            Where::Document(key) => self.error(&pointer_join(op_at, key), message, help),
            Where::Override(field) => self.config_error(&[field], message, help),
        }
    }

    /// The operation's effect from its method (and `x-ptc-read-only: false`), with the
    /// operator's `allow_writes` grant applied; a refusal is reported where it can be fixed.
    fn classify(&mut self, at: &str, method: &str, ext: &Extensions) -> Classified {
        let natural = effects::openapi_effect(method, ext.read_only);
        let grant = self.cfg.writes.get(self.id);
        let refusal = match effects::classify(natural, grant, method == "POST") {
            Ok(c) => return c,
            Err(r) => r,
        };
        let grant_at = pointer_join(
            &pointer_join(self.origin.config_pointer, "allow_writes"),
            self.id,
        );
        let (file, pointer, message, help) = match refusal {
            Refusal::NotAllowListed => {
                let why = if method == "GET" || method == "HEAD" {
                    "is marked x-ptc-read-only: false, so it is a write".to_string()
                } else if ext.read_only == Some(true) {
                    format!(
                        "uses method {method}, a write (x-ptc-read-only does not make it a read)"
                    )
                } else {
                    format!("uses method {method}, a write")
                };
                (
                    self.origin.doc_file,
                    at.to_string(),
                    format!("{why}; writes are exposed only when allow_writes lists them"),
                    format!(
                        "add \"allow_writes\": {{\"{}\": {{}}}} to the upstream (calls then need \
                         the write gate and a person's approval), or remove it from \
                         include_operations",
                        self.id
                    ),
                )
            }
            Refusal::ReadGranted => (
                self.origin.config_file,
                grant_at,
                format!(
                    "allow_writes names `{}`, a {method} and so a read; the config cannot change \
                     an operation's effect",
                    self.id
                ),
                "remove it from allow_writes".to_string(),
            ),
            Refusal::SafeQueryNotPost => (
                self.origin.config_file,
                pointer_join(&grant_at, "effect"),
                format!(
                    "`{}` uses method {method}; only a POST can be a safe_query",
                    self.id
                ),
                "make it \"effect\": \"write\" (or leave effect out)".to_string(),
            ),
        };
        self.report.error(file, &pointer, message, Some(help));
        Classified::default()
    }

    /// The JSON request body of a write method, with its (stored) schema; `None` when the
    /// operation has none. A body on a read method, or one that is not JSON, is refused.
    fn request_body(
        &mut self,
        at: &str,
        method: &str,
    ) -> Option<(RequestBody, Value, Vec<String>)> {
        let raw = self.found.op.get("requestBody")?;
        let body_at = pointer_join(at, "requestBody");
        if method == "GET" || method == "HEAD" {
            self.error(
                &body_at,
                format!(
                    "has a requestBody on a {method}; ptc sends bodies with write methods only"
                ),
                "remove it from include_operations",
            );
            return None;
        }
        let (body, body_at) = match self.resolver.follow(raw, &body_at) {
            Ok(x) => x,
            Err(e) => {
                self.ref_error(e);
                return None;
            }
        };
        let required = body.get("required") == Some(&Value::Bool(true));
        let content = body.get("content").and_then(Value::as_object);
        let json_entry = content.and_then(|c| c.iter().find(|(media, _)| is_json_media(media)));
        let Some((media, entry)) = json_entry else {
            let kinds = content
                .map(|c| c.keys().cloned().collect::<Vec<_>>().join(", "))
                .unwrap_or_default();
            self.error(
                &body_at,
                format!("the request body is not JSON ({kinds}); ptc sends JSON bodies only"),
                "remove it from include_operations",
            );
            return None;
        };
        let schema_at = pointer_join(
            &pointer_join(&pointer_join(&body_at, "content"), media),
            "schema",
        );
        let mut notes = Vec::new();
        let schema = match entry.get("schema") {
            None => json!({}),
            Some(s) => match self.store.schema(self.resolver, s, &schema_at, &mut notes) {
                Ok(s) => s,
                Err(e) => {
                    self.ref_error(e);
                    return None;
                }
            },
        };
        Some((RequestBody { required }, schema, notes))
    }

    fn name(&mut self, ext: &Extensions) -> String {
        let (raw, source) = match (&self.overrides.name, &ext.name) {
            (Some(n), _) => (n.as_str(), "operation_overrides name"),
            (None, Some(n)) => (n.as_str(), "x-ptc-name"),
            (None, None) => (self.id, "operationId"),
        };
        let name = names::normalize(raw);
        let problem = if name.is_empty() {
            Some("it is empty after normalisation")
        } else {
            names::invalid_reason(&name)
        };
        if let Some(why) = problem {
            let message = format!(
                "exposed name `{name}` (from {source} `{raw}`) is not a valid PTC-Lisp symbol: {why}"
            );
            let help = format!(
                "set operation_overrides.{}.name to a name like `list-traces`",
                self.id
            );
            if self.overrides.name.is_some() {
                self.config_error(&["name"], message, help);
            } else {
                let at = self.found.pointer.clone();
                self.error(&at, message, help);
            }
        }
        name
    }

    fn description(&self) -> String {
        if let Some(d) = &self.overrides.description {
            return d.clone();
        }
        let get = |k: &str| {
            self.found
                .op
                .get(k)
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
        };
        match (get("summary"), get("description")) {
            (Some(s), Some(d)) if d.starts_with(s) => d.to_string(),
            (Some(s), Some(d)) => format!("{s}\n\n{d}"),
            (a, b) => a.or(b).unwrap_or_default().to_string(),
        }
    }

    /// Same-origin operation-level servers are allowed and give the operation its own base URL.
    fn operation_server(&mut self, at: &str) -> Option<String> {
        let servers = self.found.op.get("servers")?.as_array()?;
        let base = url::Url::parse(&self.cfg.base_url).ok()?;
        let mut chosen = None;
        for (i, server) in servers.iter().enumerate() {
            let server_at = pointer_join(&pointer_join(at, "servers"), &i.to_string());
            let Some(raw) = server.get("url").and_then(Value::as_str) else {
                self.error(
                    &server_at,
                    "server entry has no `url`",
                    "give each server a url",
                );
                continue;
            };
            let expanded = expand_server_variables(raw, server.get("variables"));
            let resolved = match base.join(&expanded) {
                Ok(u) => u,
                Err(e) => {
                    self.error(
                        &server_at,
                        format!("server url `{raw}` is invalid: {e}"),
                        "fix the server url",
                    );
                    continue;
                }
            };
            let same_origin = resolved.scheme() == base.scheme()
                && resolved.host_str() == base.host_str()
                && resolved.port_or_known_default() == base.port_or_known_default();
            if !same_origin {
                self.error(
                    &server_at,
                    format!(
                        "has operation-level server `{raw}`, which is not same-origin with base_url `{}`",
                        self.cfg.base_url
                    ),
                    "v1 never calls other hosts than base_url; remove it from include_operations",
                );
            } else if chosen.is_none() {
                let url = resolved.as_str().trim_end_matches('/').to_string();
                chosen = (url != self.cfg.base_url).then_some(url);
            }
        }
        chosen
    }

    fn parameters(&mut self, at: &str) -> Vec<Declared> {
        let mut declared: Vec<Declared> = Vec::new();
        let mut rejected: Vec<String> = Vec::new();
        let sources = [
            (
                self.found.path_item.get("parameters"),
                pointer_join(
                    &self
                        .found
                        .pointer
                        .rsplit_once('/')
                        .map(|(p, _)| p.to_string())
                        .unwrap_or_default(),
                    "parameters",
                ),
            ),
            (
                self.found.op.get("parameters"),
                pointer_join(at, "parameters"),
            ),
        ];
        for (list, list_at) in sources {
            let Some(list) = list else { continue };
            let Some(items) = list.as_array() else {
                self.error(
                    &list_at,
                    "`parameters` must be an array",
                    "fix the document",
                );
                continue;
            };
            for (i, raw) in items.iter().enumerate() {
                let p_at = pointer_join(&list_at, &i.to_string());
                let (param, p_at) = match self.resolver.follow(raw, &p_at) {
                    Ok(x) => x,
                    Err(e) => {
                        self.ref_error(e);
                        continue;
                    }
                };
                match self.parameter(param, &p_at) {
                    Some(d) => {
                        // Operation-level parameters override path-item-level ones with the same name and location.
                        declared.retain(|o| !(o.name == d.name && o.location == d.location));
                        declared.push(d);
                    }
                    // Already reported; do not report its placeholder as undeclared too.
                    None => rejected.extend(
                        param
                            .get("name")
                            .and_then(Value::as_str)
                            .map(str::to_string),
                    ),
                }
            }
        }
        self.check_path_template(at, &declared, &rejected);
        declared.sort_by_key(|d| d.location != ParamLocation::Path);
        declared
    }

    fn parameter(&mut self, param: &Value, at: &str) -> Option<Declared> {
        let name = param.get("name").and_then(Value::as_str);
        let location = param.get("in").and_then(Value::as_str);
        let (Some(name), Some(location)) = (name, location) else {
            self.error(
                at,
                "parameter needs a string `name` and `in`",
                "fix the document",
            );
            return None;
        };
        let location = match location {
            "path" => ParamLocation::Path,
            "query" => ParamLocation::Query,
            "header" | "cookie" => {
                self.error(
                    at,
                    format!("has {location} parameter `{name}`; programs cannot set {location}s in v1"),
                    "remove it from include_operations, or, if the value is constant, drop the parameter and set it in static_headers",
                );
                return None;
            }
            other => {
                self.error(
                    at,
                    format!("parameter `{name}` has unknown location `{other}`"),
                    "use path or query",
                );
                return None;
            }
        };
        let required = param.get("required") == Some(&Value::Bool(true));
        if location == ParamLocation::Path && !required {
            self.error(
                at,
                format!("path parameter `{name}` is not marked required"),
                "path parameters must have `required: true` (OpenAPI requires it)",
            );
        }
        if param.get("content").is_some() {
            self.error(
                at,
                format!("parameter `{name}` uses `content` serialisation; v1 supports `schema` parameters only"),
                "remove it from include_operations",
            );
            return None;
        }
        let style = param.get("style").and_then(Value::as_str);
        let default_style = if location == ParamLocation::Path {
            "simple"
        } else {
            "form"
        };
        if style.is_some_and(|s| s != default_style) {
            self.error(
                at,
                format!(
                    "parameter `{name}` uses style `{}`; v1 supports the default style only",
                    style.unwrap_or_default()
                ),
                "remove it from include_operations",
            );
            return None;
        }
        let raw_schema = param
            .get("schema")
            .cloned()
            .unwrap_or_else(|| json!({"type": "string"}));
        let mut notes = Vec::new();
        let stored = self.store.schema(
            self.resolver,
            &raw_schema,
            &pointer_join(at, "schema"),
            &mut notes,
        );
        let mut schema = match stored {
            Ok(s) => s,
            Err(e) => {
                self.ref_error(e);
                return None;
            }
        };
        if let Value::Object(m) = &mut schema {
            // A named definition has its own type; an untyped parameter is a string.
            if !m.contains_key("$ref") {
                m.entry("type").or_insert_with(|| json!("string"));
            }
            if let Some(d) = param.get("description").and_then(Value::as_str) {
                m.entry("description").or_insert_with(|| json!(d));
            }
        }
        let kind = scalar_kind(&schema, self.store.values());
        let repeated = kind == Kind::Array;
        let explode = param
            .get("explode")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        match kind {
            Kind::Scalar => {}
            Kind::Array if location == ParamLocation::Query && explode => {}
            _ => {
                self.error(
                    &pointer_join(at, "schema"),
                    format!(
                        "{} parameter `{name}` is not a simple value (string, number, integer, boolean{})",
                        if location == ParamLocation::Path { "path" } else { "query" },
                        if location == ParamLocation::Query { ", or an exploded array of them" } else { "" }
                    ),
                    "v1 supports simple parameters only; remove it from include_operations",
                );
                return None;
            }
        }
        Some(Declared {
            name: name.to_string(),
            location,
            required: required || location == ParamLocation::Path,
            repeated,
            schema,
            unvalidated: notes,
        })
    }

    fn check_path_template(&mut self, at: &str, declared: &[Declared], rejected: &[String]) {
        let placeholders = path_placeholders(self.found.path);
        let missing: Vec<&str> = placeholders
            .iter()
            .copied()
            .filter(|p| {
                !rejected.iter().any(|r| r == p)
                    && !declared
                        .iter()
                        .any(|d| d.location == ParamLocation::Path && d.name == *p)
            })
            .collect();
        if !missing.is_empty() {
            self.error(
                at,
                format!(
                    "path template `{}` uses {} that {} not declared as path parameter{}",
                    self.found.path,
                    missing
                        .iter()
                        .map(|m| format!("`{{{m}}}`"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    if missing.len() == 1 { "is" } else { "are" },
                    if missing.len() == 1 { "" } else { "s" },
                ),
                "declare each placeholder as a parameter with `in: path` and `required: true`",
            );
        }
        for d in declared
            .iter()
            .filter(|d| d.location == ParamLocation::Path)
        {
            if !placeholders.contains(&d.name.as_str()) {
                self.error(
                    at,
                    format!(
                        "declares path parameter `{}` but the template `{}` has no `{{{}}}`",
                        d.name, self.found.path, d.name
                    ),
                    "remove the parameter or fix the path template",
                );
            }
        }
    }

    fn default_args(&mut self, params: &[Declared], ext: &Extensions) -> Map<String, Value> {
        let (defaults, from_override) = match (&self.overrides.default_args, &ext.default_args) {
            (Some(d), _) => (d.clone(), true),
            (None, Some(d)) => (d.clone(), false),
            (None, None) => return Map::new(),
        };
        let mut out = Map::new();
        for (key, value) in defaults {
            let problem = match params.iter().find(|p| p.name == key) {
                None => Some(format!(
                    "default arg `{key}` is not a parameter of this operation{}",
                    did_you_mean(&key, params.iter().map(|p| p.name.as_str()))
                )),
                Some(p) => value_problem(&p.schema, self.store.values(), &value)
                    .map(|why| format!("default arg `{key}` = {value} {why}")),
            };
            match problem {
                Some(message) if from_override => {
                    self.config_error(
                        &["default_args", &key],
                        message,
                        "fix or remove the default",
                    );
                }
                Some(message) => {
                    let at = pointer_join(&self.found.pointer, "x-ptc-default-args");
                    self.error(&at, message, "fix or remove the default");
                }
                None => {
                    out.insert(key, value);
                }
            }
        }
        out
    }

    fn input_schema(
        &mut self,
        params: &[Declared],
        body: Option<&(RequestBody, Value, Vec<String>)>,
        ext: &Extensions,
    ) -> Value {
        let defaults = self
            .overrides
            .default_args
            .as_ref()
            .or(ext.default_args.as_ref());
        let mut properties = Map::new();
        let mut required = Vec::new();
        for p in params {
            let mut schema = p.schema.clone();
            if let (Some(d), Value::Object(m)) =
                (defaults.and_then(|d| d.get(&p.name)), &mut schema)
            {
                m.insert("default".into(), d.clone());
            }
            let defaulted = defaults.is_some_and(|d| d.contains_key(&p.name));
            if p.required && !defaulted && !required.contains(&json!(p.name)) {
                required.push(json!(p.name));
            }
            properties.insert(p.name.clone(), schema);
        }
        if let Some((b, schema, _)) = body {
            properties.insert(BODY_ARG.into(), schema.clone());
            if b.required {
                required.push(json!(BODY_ARG));
            }
        }
        json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false
        })
    }

    fn output_schema(&mut self, at: &str, unvalidated: &mut Vec<String>) -> Value {
        let responses_at = pointer_join(at, "responses");
        let Some(responses) = self.found.op.get("responses").and_then(Value::as_object) else {
            self.error(
                at,
                "has no responses",
                "document at least one 2xx JSON response",
            );
            return Value::Null;
        };
        let mut success: Vec<(&String, &Value)> = responses
            .iter()
            .filter(|(code, _)| code.starts_with('2') && code.len() == 3)
            .collect();
        success.sort_by(|a, b| a.0.cmp(b.0));
        if success.is_empty() {
            self.error(
                &responses_at,
                "has no 2xx response",
                "document the success response (JSON, or 204 for none)",
            );
            return Value::Null;
        }
        let mut output: Option<Value> = None;
        for (code, response) in success {
            let r_at = pointer_join(&responses_at, code);
            let (response, r_at) = match self.resolver.follow(response, &r_at) {
                Ok(x) => x,
                Err(e) => {
                    self.ref_error(e);
                    continue;
                }
            };
            let content = response.get("content").and_then(Value::as_object);
            let Some(content) = content.filter(|c| !c.is_empty()) else {
                continue;
            };
            let json_entry = content.iter().find(|(media, _)| is_json_media(media));
            let Some((media, entry)) = json_entry else {
                let kinds = content.keys().cloned().collect::<Vec<_>>().join(", ");
                self.error(
                    &pointer_join(&r_at, "content"),
                    format!(
                        "{code} response is not JSON ({kinds}); v1 supports JSON responses only"
                    ),
                    "remove it from include_operations",
                );
                continue;
            };
            if output.is_none() {
                let schema_at = pointer_join(
                    &pointer_join(&pointer_join(&r_at, "content"), media),
                    "schema",
                );
                let schema = match entry.get("schema") {
                    None => json!({}),
                    Some(s) => match self.store.schema(self.resolver, s, &schema_at, unvalidated) {
                        Ok(s) => s,
                        Err(e) => {
                            self.ref_error(e);
                            json!({})
                        }
                    },
                };
                output = Some(schema);
            }
        }
        output.unwrap_or_else(|| json!({"type": "null"}))
    }
}

/// Where a projection setting came from: a document extension or an operator override field.
enum Where {
    Document(&'static str),
    Override(&'static str),
}

impl Where {
    fn name(&self) -> String {
        match self {
            Where::Document(key) => (*key).to_string(),
            Where::Override(field) => format!("operation_overrides {field}"),
        }
    }
}

#[derive(PartialEq)]
enum Kind {
    Scalar,
    Array,
    Complex,
}

/// Whether a (normalised) parameter schema is a scalar, an array of scalars, or something else.
fn scalar_kind(schema: &Value, defs: &BTreeMap<String, Value>) -> Kind {
    let Ok(schema) = crate::schema::resolve(schema, defs) else {
        return Kind::Complex;
    };
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .collect(),
        _ => vec!["string"],
    };
    let scalar = |t: &&str| matches!(*t, "string" | "integer" | "number" | "boolean");
    if types.iter().all(scalar) {
        Kind::Scalar
    } else if types == ["array"]
        && schema
            .get("items")
            .is_none_or(|i| scalar_kind(i, defs) == Kind::Scalar)
    {
        Kind::Array
    } else {
        Kind::Complex
    }
}

/// Why `value` does not fit the parameter `schema` (type and enum only), if it does not.
fn value_problem(schema: &Value, defs: &BTreeMap<String, Value>, value: &Value) -> Option<String> {
    let schema = crate::schema::resolve(schema, defs).ok()?;
    if let Some(Value::Array(allowed)) = schema.get("enum")
        && !allowed.contains(value)
    {
        let list = allowed
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        return Some(format!("is not one of the allowed values ({list})"));
    }
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => return None,
    };
    let fits = |t: &str| match t {
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "null" => value.is_null(),
        _ => true,
    };
    (!types.iter().any(|t| fits(t)))
        .then(|| format!("does not match the parameter type {}", types.join(" | ")))
}

fn is_json_media(media: &str) -> bool {
    let essence = media
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

fn path_placeholders(path: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = path;
    while let Some(start) = rest.find('{') {
        let after = &rest[start + 1..];
        let Some(end) = after.find('}') else { break };
        out.push(&after[..end]);
        rest = &after[end + 1..];
    }
    out
}

fn expand_server_variables(url: &str, variables: Option<&Value>) -> String {
    let mut out = url.to_string();
    if let Some(Value::Object(vars)) = variables {
        for (name, var) in vars {
            if let Some(default) = var.get("default").and_then(Value::as_str) {
                out = out.replace(&format!("{{{name}}}"), default);
            }
        }
    }
    out
}

fn check_collisions(
    origin: &Origin,
    cfg: &OpenApiConfig,
    tools: &[ToolPlan],
    report: &mut Reporter,
) {
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for tool in tools {
        if let Some(first) = seen.insert(&tool.name, &tool.ptc.operation_id) {
            let second = &tool.ptc.operation_id;
            let i = cfg
                .include_operations
                .iter()
                .position(|o| o == second)
                .unwrap_or(0);
            report.about(Some(origin.upstream), Some(second)).error(
                origin.config_file,
                &pointer_join(&pointer_join(origin.config_pointer, "include_operations"), &i.to_string()),
                format!("operations `{first}` and `{second}` both become tool `{}` after name normalisation", tool.name),
                Some(format!("give one a distinct name: operation_overrides.{second}.name")),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders() {
        assert_eq!(
            path_placeholders("/a/{id}/b/{step_id}"),
            vec!["id", "step_id"]
        );
        assert!(path_placeholders("/a").is_empty());
        assert_eq!(path_placeholders("/x/{}/{id}"), vec!["", "id"]);
        assert_eq!(path_placeholders("/x/{id"), Vec::<&str>::new());
    }

    #[test]
    fn json_media_types() {
        assert!(is_json_media("application/json"));
        assert!(is_json_media("application/json; charset=utf-8"));
        assert!(is_json_media("application/problem+json"));
        assert!(!is_json_media("text/plain"));
        assert!(!is_json_media("application/jsonl"));
    }

    #[test]
    fn param_kinds() {
        let none = BTreeMap::new();
        assert!(scalar_kind(&json!({"type": "string"}), &none) == Kind::Scalar);
        assert!(scalar_kind(&json!({"type": ["integer", "null"]}), &none) == Kind::Scalar);
        assert!(
            scalar_kind(
                &json!({"type": "array", "items": {"type": "string"}}),
                &none
            ) == Kind::Array
        );
        assert!(scalar_kind(&json!({"type": "object"}), &none) == Kind::Complex);
        let defs = BTreeMap::from([
            (
                "Status".to_string(),
                json!({"type": "string", "enum": ["ok", "error"]}),
            ),
            ("Filter".to_string(), json!({"type": "object"})),
        ]);
        let status = json!({"$ref": "#/$defs/Status"});
        assert!(scalar_kind(&status, &defs) == Kind::Scalar);
        assert!(scalar_kind(&json!({"type": "array", "items": status}), &defs) == Kind::Array);
        assert!(scalar_kind(&json!({"$ref": "#/$defs/Filter"}), &defs) == Kind::Complex);
        assert_eq!(
            value_problem(&status, &defs, &json!("nope")).as_deref(),
            Some("is not one of the allowed values (\"ok\", \"error\")")
        );
        assert_eq!(value_problem(&status, &defs, &json!("ok")), None);
    }

    /// A default argument's value against its parameter's type, one type or several.
    #[test]
    fn default_values_are_checked_against_the_parameter_type() {
        let defs = BTreeMap::new();
        let problem = |schema: Value, value: Value| value_problem(&schema, &defs, &value);
        let string = json!({"type": "string"});
        assert_eq!(problem(string.clone(), json!("x")), None);
        assert_eq!(
            problem(string, json!(5)).as_deref(),
            Some("does not match the parameter type string")
        );
        let int_or_null = json!({"type": ["integer", "null"]});
        assert_eq!(problem(int_or_null.clone(), json!(null)), None);
        assert_eq!(problem(int_or_null.clone(), json!(3)), None);
        assert_eq!(
            problem(int_or_null.clone(), json!(1.5)).as_deref(),
            Some("does not match the parameter type integer | null")
        );
        assert_eq!(
            problem(int_or_null, json!("3")).as_deref(),
            Some("does not match the parameter type integer | null")
        );
        assert_eq!(
            problem(json!({"type": "boolean"}), json!("true")).as_deref(),
            Some("does not match the parameter type boolean")
        );
        assert_eq!(problem(json!({"type": "number"}), json!(2.5)), None);
        assert_eq!(
            problem(json!({"type": "number"}), json!("2.5")).as_deref(),
            Some("does not match the parameter type number")
        );
        assert_eq!(problem(json!({"type": "integer"}), json!(-3)), None);
        assert_eq!(problem(json!({"type": "array"}), json!(["a"])), None);
        assert_eq!(
            problem(json!({"type": "array"}), json!("a")).as_deref(),
            Some("does not match the parameter type array")
        );
        assert_eq!(
            problem(json!({"type": "null"}), json!(0)).as_deref(),
            Some("does not match the parameter type null")
        );
        assert_eq!(problem(json!({}), json!({"any": 1})), None);
    }
}
