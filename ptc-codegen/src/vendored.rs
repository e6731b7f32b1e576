//! Vendored copies of `schema_url` documents: the build reads these and never the network
//! (sqlx's offline model). `ptc vendor` writes them, `ptc vendor --check` compares them with
//! the live documents.

use std::path::{Path, PathBuf};

use ptc_plan::{DocumentRequest, DocumentSource, FileSource, SchemaLocation};

pub use ptc_plan::pins::FOLDER;

/// Where the vendored document of `upstream` lives for the config at `config`.
pub fn path(config: &Path, upstream: &str) -> PathBuf {
    config
        .parent()
        .unwrap_or(Path::new("."))
        .join(FOLDER)
        .join(format!("{upstream}.openapi.json"))
}

/// Reads `schema_file`s as they are and each `schema_url` from its vendored copy.
pub struct VendoredSource {
    config: PathBuf,
}

impl VendoredSource {
    /// The source for the config at `config`.
    pub fn new(config: &Path) -> Self {
        VendoredSource {
            config: config.to_path_buf(),
        }
    }
}

impl DocumentSource for VendoredSource {
    fn fetch(&self, request: &DocumentRequest) -> Result<Vec<u8>, String> {
        let SchemaLocation::Url(url) = request.location else {
            return FileSource.fetch(request);
        };
        let copy = path(&self.config, request.upstream);
        if !copy.is_file() {
            return Err(format!(
                "schema_url `{url}` has no vendored copy at `{}`; run `ptc vendor {}` (the build never uses the network)",
                copy.display(),
                self.config.display()
            ));
        }
        FileSource.fetch(&DocumentRequest {
            location: &SchemaLocation::File(copy.display().to_string()),
            ..*request
        })
    }
}
