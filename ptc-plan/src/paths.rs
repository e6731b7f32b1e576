//! Resolving paths written in a config.

use std::path::{Component, Path, PathBuf};

/// Resolves `path` against `base_dir` (the config file's folder) unless it is absolute, and
/// folds `.` and `..` so the same file always has the same name in the plan.
pub fn resolve(base_dir: &Path, path: &str) -> String {
    let p = Path::new(path);
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        base_dir.join(p)
    };
    normalize(&joined).to_string_lossy().into_owned()
}

/// Lexically removes `.` and `..` components (no file system access, symlinks untouched).
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_resolve_against_the_config_folder() {
        assert_eq!(
            resolve(Path::new("/etc/ptc"), "schema.json"),
            "/etc/ptc/schema.json"
        );
        assert_eq!(
            resolve(Path::new("/etc/ptc/x"), "../s/./a.json"),
            "/etc/ptc/s/a.json"
        );
        assert_eq!(resolve(Path::new("/etc/ptc"), "/abs/a.json"), "/abs/a.json");
    }
}
