//! The record directory (`--record-dir`): one run file per program run, written without
//! replacing any other.

use std::sync::Arc;

use ptc_lisp::{Limits, LispError, Value};
use serde_json::{Map, Value as Json};

use crate::call::upstreams::Upstreams;
use std::path::{Path, PathBuf};

use super::{Answer, Recorder, Settings};
use crate::call::upstreams::StartSettings;

/// One evaluation, as its run file records it.
pub struct Evaluated<'a> {
    /// The program text.
    pub program: &'a str,
    /// The declared program it was, when called as its tool.
    pub tool: Option<&'a str>,
    /// Its context (`data/<key>`).
    pub context: Option<&'a Map<String, Json>>,
    /// What it printed.
    pub prints: &'a str,
    /// Its value or error.
    pub result: &'a Result<Value, LispError>,
}

/// Where `serve --record-dir` writes one run file per evaluation.
#[derive(Clone, Debug)]
pub struct RecordDir {
    dir: PathBuf,
    start: StartSettings,
}

impl RecordDir {
    /// Run files go to `dir` (created when missing), recording a process started with `start`.
    pub fn new(dir: PathBuf, start: StartSettings) -> Result<Self, String> {
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("--record-dir {}: cannot create it: {e}", dir.display()))?;
        if !dir.is_dir() {
            return Err(format!("--record-dir {}: not a directory", dir.display()));
        }
        Ok(RecordDir { dir, start })
    }

    /// A recorder for one evaluation under `limits`.
    pub fn recorder(&self, limits: &Limits) -> Recorder {
        Recorder::new(Settings::new(limits, self.start))
    }

    /// Writes the run file of one evaluation (off the async threads), named by the time and the
    /// program's hash so the files sort; a failure is logged, never the evaluation's.
    pub async fn save(
        &self,
        upstreams: Arc<Upstreams>,
        recorder: Recorder,
        run: Evaluated<'_>,
    ) -> Option<PathBuf> {
        let answer = Answer::of(run.result, upstreams.redactor());
        let context = run.context.and_then(|c| serde_json::to_string(c).ok());
        let (program, prints, dir) = (
            run.program.to_string(),
            run.prints.to_string(),
            self.dir.clone(),
        );
        let tool = run.tool.map(str::to_string);
        let written = tokio::task::spawn_blocking(move || {
            let mut file =
                recorder.run_file(&upstreams, &program, context.as_deref(), &prints, answer);
            file.tool = tool;
            let millis = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis());
            write_new(
                &dir,
                millis,
                &crate::program::program_hash(&program),
                &file.to_json()?,
            )
        })
        .await
        .unwrap_or_else(|e| Err(format!("the writing task stopped: {e}")));
        match written {
            Ok(path) => {
                tracing::info!(target: "ptc::server", file = %path.display(), "run recorded");
                Some(path)
            }
            Err(e) => {
                tracing::warn!(target: "ptc::server", "run not recorded: {e}");
                None
            }
        }
    }
}

/// Writes `bytes` to a new file in `dir` named `<unix ms>-<hash prefix>.json` for a run that
/// ended at `millis` (a `-N` suffix when two runs of one program end in the same millisecond).
pub(super) fn write_new(
    dir: &Path,
    millis: u128,
    hash: &str,
    bytes: &[u8],
) -> Result<PathBuf, String> {
    use std::io::Write;
    let stem = format!("{millis:013}-{}", &hash[..hash.len().min(12)]);
    for n in 0..100 {
        let name = if n == 0 {
            format!("{stem}.json")
        } else {
            format!("{stem}-{n}.json")
        };
        let path = dir.join(name);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(mut f) => {
                return f
                    .write_all(bytes)
                    .map(|()| path.clone())
                    .map_err(|e| format!("cannot write {}: {e}", path.display()));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("cannot create {}: {e}", path.display())),
        }
    }
    Err(format!(
        "cannot create a new file {stem}*.json in {}: too many",
        dir.display()
    ))
}
