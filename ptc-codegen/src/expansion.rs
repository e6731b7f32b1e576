//! Config file → generated code, the way `ptc_upstreams!` does it: the only file access of this
//! crate, shared by the macro and `ptc expand` so they cannot disagree.

use std::path::{Path, PathBuf};

use proc_macro2::TokenStream;
use ptc_plan::{Diagnostic, SchemaLocation, Transport};

use crate::vendored::{self, VendoredSource};

/// Generated code and the files it was made from (for rebuild tracking).
pub struct Expansion {
    /// The generated items.
    pub tokens: TokenStream,
    /// Every file read: the config, each `schema_file`, each vendored `schema_url` copy and
    /// each MCP upstream's vendored tool list (what a copy of the config needs beside it).
    pub files: Vec<PathBuf>,
}

/// Loads the config at `config` (vendored copies standing in for `schema_url`s) and generates
/// its code; every problem is returned at once.
pub fn expand(config: &Path) -> Result<Expansion, Vec<Diagnostic>> {
    expand_typed(config, None)
}

/// [`expand`], with typed code only for the tools `typed` names (see
/// [`crate::generate_typed`]).
pub fn expand_typed(
    config: &Path,
    typed: Option<&std::collections::BTreeSet<String>>,
) -> Result<Expansion, Vec<Diagnostic>> {
    let loaded = ptc_plan::load_with(config, &VendoredSource::new(config)).map_err(|d| d.0)?;
    let tokens = crate::generate_typed(&loaded.plan, config, typed).map_err(|diags| {
        let mut diags = ptc_plan::Diagnostics(diags);
        if let Ok(text) = std::fs::read_to_string(config) {
            diags.locate_in(config, &text);
        }
        diags.0
    })?;
    let mut files = loaded.files;
    for up in &loaded.plan.upstreams {
        if let Transport::Openapi(api) = &up.transport
            && let SchemaLocation::Url(_) = api.schema
        {
            files.push(vendored::path(config, &up.name));
        }
    }
    Ok(Expansion { tokens, files })
}
