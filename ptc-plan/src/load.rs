//! The loader: config text + documents → [`Plan`], collecting every problem on the way.

use std::path::{Path, PathBuf};

use crate::config::{self, OpenApiConfig, Secrets, UpstreamKind};
use crate::diagnostic::{Diagnostic, Diagnostics, Reporter, pointer_join};
use crate::openapi::{self, compile::Origin};
use crate::plan::{
    CredentialBinding, HttpSettings, OpenApiPlan, Plan, SchemaLocation, Transport, UpstreamPlan,
};

/// What a [`DocumentSource`] is asked for: one upstream's document, with what it needs to fetch
/// a private `schema_url` the way the upstream's own requests are made.
pub struct DocumentRequest<'a> {
    /// The upstream's name.
    pub upstream: &'a str,
    /// Where the document is.
    pub location: &'a SchemaLocation,
    /// At most this many bytes may be read.
    pub max_bytes: u64,
    /// The upstream's HTTP settings (auth emitters, static headers, timeouts, insecure opt-ins).
    pub http: &'a HttpSettings,
    /// Every credential binding of the config.
    pub credentials: &'a [CredentialBinding],
    /// Literal credential values.
    pub secrets: &'a Secrets,
}

/// Supplies OpenAPI documents. ptc-plan reads files; a runtime that may use the network
/// supplies one that also fetches `schema_url`s.
pub trait DocumentSource {
    /// The document's bytes, at most `request.max_bytes` of them; an error message otherwise.
    fn fetch(&self, request: &DocumentRequest) -> Result<Vec<u8>, String>;
}

/// Reads `schema_file` documents from disk and refuses `schema_url` (ptc-plan never uses the network).
#[derive(Debug, Default, Clone, Copy)]
pub struct FileSource;

impl DocumentSource for FileSource {
    fn fetch(&self, request: &DocumentRequest) -> Result<Vec<u8>, String> {
        match request.location {
            SchemaLocation::File(path) => read_capped(Path::new(path), request.max_bytes),
            SchemaLocation::Url(url) => Err(format!(
                "cannot fetch schema_url `{url}` here: this loader reads local files only"
            )),
        }
    }
}

/// Reads a file, checking its size before reading so a huge file is refused without loading it.
fn read_capped(path: &Path, max_bytes: u64) -> Result<Vec<u8>, String> {
    let meta =
        std::fs::metadata(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("`{}` is not a file", path.display()));
    }
    if meta.len() > max_bytes {
        return Err(format!(
            "`{}` is {} bytes, over the {max_bytes}-byte cap (schema_max_bytes)",
            path.display(),
            meta.len()
        ));
    }
    std::fs::read(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))
}

/// A loaded deployment: the plan, the literal secrets kept apart from it, and every file read
/// (so the compile-time macro can make cargo rebuild when one changes).
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The validated plan.
    pub plan: Plan,
    /// Literal credential values; never part of the plan.
    pub secrets: Secrets,
    /// Files read, in order: the config, its documents, its MCP upstreams' vendored tool lists
    /// and its programs.
    pub files: Vec<PathBuf>,
}

/// Loads and compiles the config at `path`, reading documents from disk.
pub fn load(path: &Path) -> Result<Loaded, Diagnostics> {
    load_with(path, &FileSource)
}

/// Loads and compiles the config at `path`, getting documents through `source`.
pub fn load_with(path: &Path, source: &dyn DocumentSource) -> Result<Loaded, Diagnostics> {
    load_str(&read_config(path)?, path, source)
}

/// Loads the config at `path` the way [`load_with`] does, but reads no vendored MCP tool list:
/// what `ptc vendor` is about to replace (a stale or damaged list must not stop it).
pub fn load_unpinned(path: &Path, source: &dyn DocumentSource) -> Result<Loaded, Diagnostics> {
    compile(&read_config(path)?, path, source, false)
}

fn read_config(path: &Path) -> Result<String, Diagnostics> {
    std::fs::read_to_string(path).map_err(|e| {
        Diagnostics(vec![
            Diagnostic::new(path, "", format!("cannot read config: {e}")).help("check the path"),
        ])
    })
}

/// Compiles config `text` that was read from `path`, fetching documents through `source`.
///
/// Every problem is reported at once, across stages: a config problem in one upstream (an
/// unknown field, say) does not stop the documents of the upstreams that could be read from
/// being compiled and checked.
pub fn load_str(
    text: &str,
    path: &Path,
    source: &dyn DocumentSource,
) -> Result<Loaded, Diagnostics> {
    compile(text, path, source, true)
}

fn compile(
    text: &str,
    path: &Path,
    source: &dyn DocumentSource,
    pinned: bool,
) -> Result<Loaded, Diagnostics> {
    let base_dir = crate::paths::base_dir(path);
    let mut diags = Diagnostics::default();
    let Some((config, secrets)) = config::parse(text, path, &base_dir, &mut diags) else {
        diags.locate_in(path, text);
        return Err(diags);
    };
    let config_ok = diags.is_empty();
    let mut files = vec![path.to_path_buf()];
    let mut upstreams = Vec::with_capacity(config.upstreams.len());
    let configured: Vec<String> = config.upstreams.iter().map(|u| u.name.clone()).collect();
    for up in config.upstreams {
        let mut description = up.description;
        let transport = match up.kind {
            UpstreamKind::McpStdio(mut p) => {
                if pinned {
                    crate::pins::attach(
                        path,
                        &up.name,
                        &up.pointer,
                        &mut p.tools,
                        &mut diags,
                        &mut files,
                    );
                }
                Transport::McpStdio(p)
            }
            UpstreamKind::McpHttp(mut p) => {
                if pinned {
                    crate::pins::attach(
                        path,
                        &up.name,
                        &up.pointer,
                        &mut p.tools,
                        &mut diags,
                        &mut files,
                    );
                }
                Transport::McpHttp(p)
            }
            UpstreamKind::Openapi(cfg) => {
                let upstream = Upstream {
                    name: &up.name,
                    pointer: &up.pointer,
                    config_file: path,
                    credentials: &config.credentials,
                    secrets: &secrets,
                };
                if let SchemaLocation::File(p) = &cfg.schema {
                    files.push(PathBuf::from(p));
                }
                // A network fetch uses the upstream's auth and headers; with a broken config
                // it would only add a consequence of problems already reported.
                if !config_ok && matches!(cfg.schema, SchemaLocation::Url(_)) {
                    continue;
                }
                match compile_openapi(&upstream, cfg, source, &mut diags) {
                    Some((plan, title)) => {
                        // An upstream the config leaves undescribed is shown by its API's title.
                        if description.trim().is_empty() {
                            description = title.unwrap_or_default();
                        }
                        Transport::Openapi(plan)
                    }
                    None => continue,
                }
            }
        };
        upstreams.push(UpstreamPlan {
            name: up.name,
            description,
            transport,
        });
    }
    // Calls of an upstream with problems are not checked: they are reported already, and a
    // call of an operation that did not compile would only repeat them.
    let failed: Vec<String> = configured
        .into_iter()
        .filter(|name| {
            !upstreams.iter().any(|u| &u.name == name)
                || diags.iter().any(|d| d.upstream.as_ref() == Some(name))
        })
        .collect();
    let programs: Vec<_> = config
        .programs
        .iter()
        .filter_map(|p| {
            crate::programs::compile(p, path, &upstreams, &failed, &mut diags, &mut files)
        })
        .collect();
    if !diags.is_empty() {
        diags.locate_in(path, text);
        return Err(diags);
    }
    let mut plan = Plan {
        credentials: config.credentials,
        upstreams,
        approval_webhook: config.approval_webhook,
        programs,
    };
    config::sandbox::hide(&mut plan, Some(path));
    Ok(Loaded {
        plan,
        secrets,
        files,
    })
}

/// One OpenAPI upstream, with what fetching and compiling its document needs from the config.
struct Upstream<'a> {
    name: &'a str,
    /// Pointer of the upstream's entry in the config.
    pointer: &'a str,
    config_file: &'a Path,
    credentials: &'a [CredentialBinding],
    secrets: &'a Secrets,
}

/// Fetches, parses and compiles one OpenAPI upstream's document, with the document's
/// `info.title`. Problems go into `diags` (located in the document's text); `None` when the
/// document could not be read at all.
fn compile_openapi(
    up: &Upstream,
    cfg: OpenApiConfig,
    source: &dyn DocumentSource,
    diags: &mut Diagnostics,
) -> Option<(OpenApiPlan, Option<String>)> {
    let (doc_name, field) = match &cfg.schema {
        SchemaLocation::File(p) => (PathBuf::from(p), "schema_file"),
        SchemaLocation::Url(u) => (PathBuf::from(u), "schema_url"),
    };
    let mut report = Reporter::new(diags);
    report.set_upstream(Some(up.name));
    let fetched = source.fetch(&DocumentRequest {
        upstream: up.name,
        location: &cfg.schema,
        max_bytes: cfg.schema_max_bytes,
        http: &cfg.http,
        credentials: up.credentials,
        secrets: up.secrets,
    });
    let bytes = match fetched {
        Ok(bytes) => bytes,
        Err(m) => {
            report.error(
                up.config_file,
                &pointer_join(up.pointer, field),
                m,
                Some(format!("fix `{field}` or raise `schema_max_bytes`")),
            );
            return None;
        }
    };
    let doc = match openapi::document::parse(&bytes, &doc_name) {
        Ok(doc) => doc,
        Err(d) => {
            diags.push(d.upstream(up.name));
            return None;
        }
    };
    let origin = Origin {
        upstream: up.name,
        config_file: up.config_file,
        config_pointer: up.pointer,
        doc_file: &doc_name,
    };
    let compiled = openapi::compile::compile(&origin, &cfg, &doc, &mut report);
    if let Ok(text) = std::str::from_utf8(&bytes) {
        diags.locate_in(&doc_name, text);
    }
    let title = doc
        .root
        .pointer("/info/title")
        .and_then(serde_json::Value::as_str)
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty());
    let plan = OpenApiPlan {
        base_url: cfg.base_url,
        schema: cfg.schema,
        schema_max_bytes: cfg.schema_max_bytes,
        http: cfg.http,
        tools: compiled.tools,
        idempotency_header: cfg.idempotency_header,
        definitions: compiled.definitions,
    };
    Some((plan, title))
}
