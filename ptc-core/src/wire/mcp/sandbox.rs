//! Isolating a stdio server (its `sandbox`): bubblewrap gives it namespaces of its own (no
//! network unless granted, its own processes) and a file system view, util-linux's `prlimit` its
//! limits.
//!
//! Why these tools: bubblewrap is the well-kept, unprivileged sandbox Flatpak runs on, packaged
//! everywhere (Debian `bubblewrap`); it needs no daemon and no container runtime. Limits are
//! rlimits set inside the sandbox, because they work without privileges and without a delegated
//! cgroup. The process limit counts per user (and user namespace): a host running as root would
//! be exempt from it, so there the server runs as `nobody`, in a user namespace of its own so
//! its processes are counted apart from every other `nobody` process.
//!
//! The view: the system folders read-only, the server's command and its runtime read-only, each
//! argument that names a file (with the package it belongs to), its working folder, the
//! configured `read_paths` read-only and `write_paths` writable, and a private temp folder at
//! `/tmp` (also `HOME`), removed when the server stops. The plan's `hidden` paths (secrets, the
//! config, other servers' folders) are masked wherever they fall inside that view.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use ptc_plan::{McpStdioPlan, SandboxPlan};

/// System folders every server may read (those the host has).
const SYSTEM: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc"];

/// The user a root host runs servers as: the process limit exempts root.
const NOBODY: u32 = 65534;

/// The tools the sandbox runs on, found on the host.
struct Tools {
    bwrap: PathBuf,
    prlimit: PathBuf,
    unshare: PathBuf,
    setpriv: PathBuf,
}

/// A server's command line inside its sandbox, and the private temp folder it writes to (removed
/// when this is dropped).
pub(crate) struct Sandboxed {
    /// `bwrap`.
    pub program: PathBuf,
    /// Its arguments, ending with the server's own command line.
    pub args: Vec<OsString>,
    /// Variables set over the server's environment (`HOME`, `TMPDIR`).
    pub env: Vec<(&'static str, &'static str)>,
    /// The private temp folder.
    pub temp: PrivateTemp,
}

/// A folder removed when dropped.
pub(crate) struct PrivateTemp(PathBuf);

impl Drop for PrivateTemp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What the host is: whether it runs as root, and where a server's command is looked up.
pub(crate) struct Host {
    /// Whether the host runs as root.
    pub root: bool,
    /// `PATH` as the server would see it.
    pub path: Option<OsString>,
}

impl Host {
    /// This process.
    pub fn current(plan: &McpStdioPlan) -> Host {
        use std::os::unix::fs::MetadataExt;
        // /proc/self belongs to the process's effective user; std has no geteuid.
        let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
        let path = plan
            .env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| OsString::from(v))
            .or_else(|| std::env::var_os("PATH"));
        Host { root, path }
    }
}

/// Why a server cannot be started sandboxed; the message names the fix.
#[derive(Debug)]
pub(crate) struct SandboxError(pub String);

impl std::fmt::Display for SandboxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The command line that runs `plan`'s server in `sandbox`, with its private temp folder made.
pub(crate) fn prepare(
    upstream: &str,
    plan: &McpStdioPlan,
    sandbox: &SandboxPlan,
    host: &Host,
) -> Result<Sandboxed, SandboxError> {
    let tools = tools()?;
    let command = find_command(&plan.command, host.path.as_deref()).ok_or_else(|| {
        SandboxError(format!(
            "`{}` is not found on PATH (a sandboxed server's command is looked up before it starts)",
            plan.command
        ))
    })?;
    let temp = private_temp(upstream, host.root)?;
    let mut args = namespaces(sandbox, host.root);
    args.extend(view(plan, sandbox, &command, &temp.0)?);
    let cwd = plan
        .cwd
        .as_deref()
        .map_or("/tmp".into(), |c| normalize(Path::new(c)));
    args.extend(["--chdir".into(), cwd.into(), "--".into()]);
    if host.root {
        args.push(tools.setpriv.clone().into_os_string());
        for a in [
            format!("--reuid={NOBODY}"),
            format!("--regid={NOBODY}"),
            "--clear-groups".into(),
            "--inh-caps=-all".into(),
            "--bounding-set=-all".into(),
            "--".into(),
        ] {
            args.push(a.into());
        }
    }
    // A user namespace of its own: the process limit counts the processes in it.
    args.extend([
        tools.unshare.clone().into_os_string(),
        "--user".into(),
        "--".into(),
    ]);
    args.push(tools.prlimit.clone().into_os_string());
    args.extend(limits(sandbox).into_iter().map(OsString::from));
    args.push("--".into());
    args.push(command.into_os_string());
    args.extend(plan.args.iter().map(OsString::from));
    Ok(Sandboxed {
        program: tools.bwrap.clone(),
        args,
        env: vec![("HOME", "/tmp"), ("TMPDIR", "/tmp")],
        temp,
    })
}

/// The namespaces: all of its own but the network when granted, and the user's when the host is
/// root (root's bubblewrap needs none; it lets the server's start switch to `nobody`).
fn namespaces(sandbox: &SandboxPlan, root: bool) -> Vec<OsString> {
    let mut args: Vec<&str> = vec![
        "--unshare-ipc",
        "--unshare-pid",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
    ];
    if !sandbox.network {
        args.push("--unshare-net");
    }
    if root {
        args.extend(["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]);
    } else {
        args.push("--unshare-user");
    }
    args.into_iter().map(OsString::from).collect()
}

/// The `prlimit` options of `sandbox`'s limits; no core files.
fn limits(sandbox: &SandboxPlan) -> Vec<String> {
    let l = &sandbox.limits;
    vec![
        format!("--data={}", l.memory_mb.saturating_mul(1024 * 1024)),
        format!("--nproc={}", l.processes),
        format!("--nofile={}", l.open_files),
        format!("--cpu={}", l.cpu_seconds),
        "--core=0".into(),
    ]
}

/// A path the server sees, and how.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Mount {
    Read(PathBuf),
    Write(PathBuf),
}

impl Mount {
    fn path(&self) -> &Path {
        match self {
            Mount::Read(p) | Mount::Write(p) => p,
        }
    }
}

/// The file system options: folders made, trees bound, hidden paths masked.
fn view(
    plan: &McpStdioPlan,
    sandbox: &SandboxPlan,
    command: &Path,
    temp: &Path,
) -> Result<Vec<OsString>, SandboxError> {
    let mounts = mounts(plan, sandbox, command)?;
    let mut args: Vec<OsString> = Vec::new();
    for dir in SYSTEM {
        args.extend(["--ro-bind-try".into(), (*dir).into(), (*dir).into()]);
    }
    args.extend(["--proc", "/proc", "--dev", "/dev", "--bind"].map(OsString::from));
    args.extend([temp.join("tmp").into_os_string(), "/tmp".into()]);
    let bound = |p: &Path| {
        SYSTEM.iter().any(|s| p.starts_with(s))
            || p == Path::new("/tmp")
            || mounts
                .iter()
                .any(|m| p != m.path() && p.starts_with(m.path()))
    };
    // Folders on the way to a mount are made readable to everyone: bubblewrap would copy a
    // private parent's mode (a root host's /root), and the server runs as nobody there.
    // So are the folders a path written with `..` passes through (`/srv/app/../data` needs
    // `/srv/app`), which would otherwise not exist in the view.
    let passed = dot_dot_steps(plan);
    let mut parents: Vec<&Path> = mounts
        .iter()
        .flat_map(|m| m.path().ancestors().skip(1))
        .chain(passed.iter().flat_map(|p| p.ancestors()))
        .filter(|a| a.parent().is_some() && !bound(a) && !mounts.iter().any(|m| m.path() == *a))
        .collect();
    parents.sort_by_key(|p| p.components().count());
    parents.dedup();
    for p in parents {
        args.extend(["--perms".into(), "0755".into(), "--dir".into(), p.into()]);
    }
    for m in &mounts {
        let flag = match m {
            Mount::Read(_) => "--ro-bind",
            Mount::Write(_) => "--bind",
        };
        args.extend([flag.into(), m.path().into(), m.path().into()]);
    }
    let visible = |p: &Path| {
        SYSTEM.iter().any(|s| p.starts_with(s)) || mounts.iter().any(|m| p.starts_with(m.path()))
    };
    for hidden in &sandbox.hidden {
        let p = &normalize(Path::new(hidden));
        if !visible(p) {
            continue;
        }
        match std::fs::metadata(p) {
            Ok(m) if m.is_dir() => args.extend(["--tmpfs".into(), p.into()]),
            Ok(_) => args.extend(["--ro-bind".into(), temp.join("masked").into(), p.into()]),
            // Nothing there now: nothing to see. A file made later is outside the view the
            // server got at its start only if its folder is; the config's folders are not
            // writable to it unless granted.
            Err(_) => {}
        }
    }
    Ok(args)
}

/// What is bound besides the system folders, parents before what they hold.
fn mounts(
    plan: &McpStdioPlan,
    sandbox: &SandboxPlan,
    command: &Path,
) -> Result<Vec<Mount>, SandboxError> {
    let mut out: Vec<Mount> = installation(command).into_iter().map(Mount::Read).collect();
    let cwd = plan.cwd.as_deref().map(Path::new);
    for arg in &plan.args {
        let p = Path::new(arg);
        let p = match cwd {
            Some(cwd) if p.is_relative() => cwd.join(p),
            _ => p.to_path_buf(),
        };
        if p.is_absolute() && p.exists() {
            out.extend(installation(&p).into_iter().map(Mount::Read));
        }
    }
    if let Some(cwd) = cwd {
        out.push(Mount::Read(normalize(cwd)));
    }
    for (paths, key, make) in [
        (
            &sandbox.read_paths,
            "read_paths",
            Mount::Read as fn(PathBuf) -> Mount,
        ),
        (&sandbox.write_paths, "write_paths", Mount::Write),
    ] {
        for p in paths {
            if !Path::new(p).exists() {
                return Err(SandboxError(format!(
                    "`sandbox.{key}` names `{p}`, which does not exist: create it or remove it from the list"
                )));
            }
            out.push(make(normalize(Path::new(p))));
        }
    }
    // Already visible through the system folders: not bound again (a read-only bind over a
    // writable one would take the grant back).
    out.retain(|m| matches!(m, Mount::Write(_)) || !SYSTEM.iter().any(|s| m.path().starts_with(s)));
    // A write grant wins over a read of the same path; a deeper path is bound after its parent.
    out.sort_by(|a, b| {
        (
            a.path().components().count(),
            a.path(),
            matches!(a, Mount::Read(_)),
        )
            .cmp(&(
                b.path().components().count(),
                b.path(),
                matches!(b, Mount::Read(_)),
            ))
    });
    out.dedup_by(|later, first| later.path() == first.path());
    Ok(out)
}

/// The folders the command, its arguments and its working folder pass through before a `..`.
fn dot_dot_steps(plan: &McpStdioPlan) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let cwd = plan.cwd.as_deref().map(Path::new);
    let written = std::iter::once(plan.command.as_str())
        .chain(plan.args.iter().map(String::as_str))
        .chain(plan.cwd.as_deref());
    for w in written {
        let p = Path::new(w);
        let p = match cwd {
            Some(cwd) if p.is_relative() => cwd.join(p),
            _ => p.to_path_buf(),
        };
        if !p.is_absolute() {
            continue;
        }
        let mut so_far = PathBuf::new();
        for c in p.components() {
            if c == std::path::Component::ParentDir {
                out.push(normalize(&so_far));
            }
            so_far.push(c);
        }
    }
    out
}

fn normalize(p: &Path) -> PathBuf {
    ptc_plan::paths::normalize(p)
}

/// What running `file` needs to read: for the file and each file its symlinks lead to, the
/// installation it lies in ([`installed_in`]).
fn installation(file: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut step = normalize(file);
    for _ in 0..16 {
        out.push(installed_in(&step));
        let Ok(target) = std::fs::read_link(&step) else {
            break;
        };
        step = match step.parent() {
            Some(dir) => normalize(&dir.join(target)),
            None => target,
        };
    }
    out
}

/// The installation `file` belongs to: the outermost `node_modules` it lies in (a Node package
/// needs its dependencies beside it), else the folder above its `bin` (a venv, a language's
/// prefix), else its own folder (a script's modules sit beside it). Never a home folder or `/`
/// whole: then only the file itself.
fn installed_in(file: &Path) -> PathBuf {
    if let Some(modules) = file
        .ancestors()
        .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
        .last()
    {
        return modules.to_path_buf();
    }
    if file.is_dir() {
        return file.to_path_buf();
    }
    let dir = file.parent().unwrap_or(Path::new("/"));
    let prefix = match dir.file_name().and_then(|n| n.to_str()) {
        Some("bin" | "sbin") => dir.parent().unwrap_or(dir),
        _ => dir,
    };
    if too_wide(prefix) {
        file.to_path_buf()
    } else {
        prefix.to_path_buf()
    }
}

/// A folder never bound whole: `/`, a home folder, or a folder holding home folders.
fn too_wide(dir: &Path) -> bool {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    dir.parent().is_none()
        || dir == Path::new("/root")
        || dir == Path::new("/home")
        || dir.parent() == Some(Path::new("/home"))
        || home.as_deref() == Some(dir)
}

/// `command` as the server's start would find it: a path as written, a bare name on `path`.
fn find_command(command: &str, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if command.contains('/') {
        let p = PathBuf::from(command);
        return runnable(&p).then_some(p);
    }
    std::env::split_paths(path?)
        .map(|dir| dir.join(command))
        .find(|p| p.is_absolute() && runnable(p))
}

/// The tools, looked up once on the host's PATH and in the system folders.
fn tools() -> Result<&'static Tools, SandboxError> {
    static TOOLS: std::sync::OnceLock<Result<Tools, String>> = std::sync::OnceLock::new();
    let found = TOOLS.get_or_init(|| {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
        dirs.extend(["/usr/bin", "/bin", "/usr/sbin", "/sbin"].map(PathBuf::from));
        let find = |name: &str, package: &str| {
            dirs.iter()
                .map(|d| d.join(name))
                .find(|p| p.is_file())
                .ok_or_else(|| {
                    format!(
                        "a sandboxed stdio server needs `{name}` ({package}), which is not installed: \
                         install it (Debian and Ubuntu: `apt-get install {package}`), or set \
                         \"sandbox\": false on the upstream to run it with the host's own rights"
                    )
                })
        };
        Ok(Tools {
            bwrap: find("bwrap", "bubblewrap")?,
            prlimit: find("prlimit", "util-linux")?,
            unshare: find("unshare", "util-linux")?,
            setpriv: find("setpriv", "util-linux")?,
        })
    });
    found.as_ref().map_err(|e| SandboxError(e.clone()))
}

/// A new folder holding the server's temp folder (`tmp`, private to it, and owned by `nobody`
/// on a root host, whose servers run as nobody) and the file hidden paths are masked with
/// (`masked`: empty, and nobody may open it).
fn private_temp(upstream: &str, root: bool) -> Result<PrivateTemp, SandboxError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let safe: String = upstream
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let dir = std::env::temp_dir().join(format!(
        "ptc-sandbox-{safe}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let made = (|| {
        let mut private = std::fs::DirBuilder::new();
        private.mode(0o700);
        private.create(&dir)?;
        private.create(dir.join("tmp"))?;
        if root {
            std::os::unix::fs::chown(dir.join("tmp"), Some(NOBODY), Some(NOBODY))?;
        }
        std::fs::write(dir.join("masked"), "")?;
        std::fs::set_permissions(dir.join("masked"), std::fs::Permissions::from_mode(0o000))
    })();
    let temp = PrivateTemp(dir);
    made.map_err(|e| {
        SandboxError(format!(
            "cannot make the server's private temp folder in {}: {e}",
            temp.0.display()
        ))
    })?;
    Ok(temp)
}
