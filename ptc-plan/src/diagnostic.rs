//! Diagnostics: every problem found in a config or a schema, with where it is and how to fix it.
//!
//! The loader never stops at the first problem: it collects them all so a user fixes a config in
//! one pass instead of one error per run.

use std::fmt;
use std::path::{Path, PathBuf};

/// One problem, located in a file by JSON pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file the problem is in: the config or an OpenAPI document.
    pub file: PathBuf,
    /// JSON pointer (RFC 6901) to the offending value inside `file` (`""` is the whole document).
    pub pointer: String,
    /// The upstream the problem belongs to, when there is one.
    pub upstream: Option<String>,
    /// The OpenAPI operationId the problem belongs to, when there is one.
    pub operation: Option<String>,
    /// The declared program the problem is in, when there is one.
    pub program: Option<String>,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub help: Option<String>,
    /// 1-based line and column of the offending value, when the file is JSON text we have.
    pub position: Option<(usize, usize)>,
}

impl Diagnostic {
    /// A problem at `pointer` in `file`.
    pub fn new(file: &Path, pointer: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            file: file.to_path_buf(),
            pointer: pointer.into(),
            upstream: None,
            operation: None,
            program: None,
            message: message.into(),
            help: None,
            position: None,
        }
    }

    /// Attaches the upstream name.
    pub fn upstream(mut self, name: &str) -> Self {
        self.upstream = Some(name.to_string());
        self
    }

    /// Attaches the operationId.
    pub fn operation(mut self, id: &str) -> Self {
        self.operation = Some(id.to_string());
        self
    }

    /// Attaches the program name.
    pub fn program(mut self, name: &str) -> Self {
        self.program = Some(name.to_string());
        self
    }

    /// Attaches a 1-based line and column.
    pub fn at(mut self, line: usize, col: usize) -> Self {
        self.position = Some((line, col));
        self
    }

    /// Attaches a fix.
    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("error: ")?;
        if let Some(p) = &self.program {
            write!(f, "program '{p}': ")?;
        }
        match (&self.upstream, &self.operation) {
            (Some(u), Some(o)) => write!(f, "upstream '{u}', operation '{o}': ")?,
            (Some(u), None) => write!(f, "upstream '{u}': ")?,
            (None, Some(o)) => write!(f, "operation '{o}': ")?,
            (None, None) => {}
        }
        writeln!(f, "{}", self.message)?;
        write!(f, "  --> {}", self.file.display())?;
        if let Some((line, col)) = self.position {
            write!(f, ":{line}:{col}")?;
        }
        if !self.pointer.is_empty() {
            write!(f, " #{}", self.pointer)?;
        }
        if let Some(help) = &self.help {
            write!(f, "\n  = help: {help}")?;
        }
        Ok(())
    }
}

/// All problems found in one load, in the order they were found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    /// Adds a problem.
    pub fn push(&mut self, d: Diagnostic) {
        self.0.push(d);
    }

    /// True when nothing is wrong.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Number of problems.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The problems.
    pub fn iter(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter()
    }

    /// Fills in line and column for the problems located in `file`, whose text is `text`.
    pub fn locate_in(&mut self, file: &Path, text: &str) {
        let unlocated =
            |d: &&mut Diagnostic| d.file == file && d.position.is_none() && !d.pointer.is_empty();
        for d in self.0.iter_mut().filter(unlocated) {
            d.position = crate::locate::locate(text, &d.pointer);
        }
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.0 {
            writeln!(f, "{d}")?;
        }
        let n = self.0.len();
        write!(f, "{n} error{} found", if n == 1 { "" } else { "s" })
    }
}

impl std::error::Error for Diagnostics {}

/// The one way problems are recorded, by the config parser and the operation compiler alike:
/// it stamps each problem with the upstream and operation it is about and counts what it
/// recorded, so a stage can tell whether its own part failed.
pub(crate) struct Reporter<'a> {
    diags: &'a mut Diagnostics,
    upstream: Option<String>,
    operation: Option<String>,
    reported: usize,
}

impl<'a> Reporter<'a> {
    /// Records into `diags`, about nothing in particular until [`Reporter::about`] says.
    pub fn new(diags: &'a mut Diagnostics) -> Self {
        Self {
            diags,
            upstream: None,
            operation: None,
            reported: 0,
        }
    }

    /// A reporter into the same list whose problems are about `upstream` (and `operation`).
    pub fn about(&mut self, upstream: Option<&str>, operation: Option<&str>) -> Reporter<'_> {
        Reporter {
            diags: self.diags,
            upstream: upstream.map(str::to_string),
            operation: operation.map(str::to_string),
            reported: 0,
        }
    }

    /// Changes the upstream later problems are about.
    pub fn set_upstream(&mut self, upstream: Option<&str>) {
        self.upstream = upstream.map(str::to_string);
    }

    /// Records a problem at `pointer` in `file`, with a fix when one is known.
    pub fn error(
        &mut self,
        file: &Path,
        pointer: &str,
        message: impl Into<String>,
        help: Option<String>,
    ) {
        let mut d = Diagnostic::new(file, pointer, message);
        d.upstream.clone_from(&self.upstream);
        d.operation.clone_from(&self.operation);
        d.help = help;
        self.diags.push(d);
        self.reported += 1;
    }

    /// How many problems this reporter recorded.
    pub fn reported(&self) -> usize {
        self.reported
    }
}

/// Appends one reference token to a JSON pointer, escaping `~` and `/` as RFC 6901 requires.
pub fn pointer_join(base: &str, token: &str) -> String {
    let mut out = String::with_capacity(base.len() + token.len() + 1);
    out.push_str(base);
    out.push('/');
    for c in token.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointer_tokens_are_escaped() {
        assert_eq!(pointer_join("/paths", "/api/{id}"), "/paths/~1api~1{id}");
        assert_eq!(pointer_join("", "a~b"), "/a~0b");
    }

    #[test]
    fn display_names_upstream_operation_location_and_fix() {
        let d = Diagnostic::new(Path::new("x.json"), "/a", "is bad")
            .upstream("obs")
            .operation("op")
            .help("fix it");
        assert_eq!(
            d.to_string(),
            "error: upstream 'obs', operation 'op': is bad\n  --> x.json #/a\n  = help: fix it"
        );
    }
}
