//! Resolving paths written in a config.

use std::path::{Component, Path, PathBuf};

/// The folder the relative paths of the config at `config` resolve against: the config's own,
/// absolute and normalized (the current folder for a bare file name).
pub fn base_dir(config: &Path) -> PathBuf {
    let dir = match config.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    normalize(&std::path::absolute(&dir).unwrap_or(dir))
}

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

    #[test]
    fn the_base_folder_is_the_configs_own_made_absolute() {
        assert_eq!(
            base_dir(Path::new("/etc/ptc/x/../upstreams.json")),
            Path::new("/etc/ptc")
        );
        let here = std::env::current_dir().unwrap();
        assert_eq!(base_dir(Path::new("upstreams.json")), normalize(&here));
        assert_eq!(
            base_dir(Path::new("conf/u.json")),
            normalize(&here.join("conf"))
        );
    }
}
