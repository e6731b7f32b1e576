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

/// How the sandbox's stderr line saying why the server ended begins.
pub(crate) const VERDICT: &str = "ptc sandbox: ";

/// A shell that runs the server (its arguments) and, when the server was killed for its CPU
/// time (SIGXCPU, 24: exit status 152), says so on stderr before it exits with the server's
/// status; `$0` holds the limit.
const REPORTER: &str = "\"$@\"; s=$?; [ $s -eq 152 ] && echo \"ptc sandbox: the server was killed \
     at its CPU time limit (sandbox.cpu_seconds = $0)\" >&2; exit $s";

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
    /// This process, for a server whose environment is the host's, then `plan.env`, then `env`
    /// (the order the transport applies them in, so the last `PATH` set is the one it gets).
    pub fn current(plan: &McpStdioPlan, env: &[(String, String)]) -> Host {
        use std::os::unix::fs::MetadataExt;
        // /proc/self belongs to the process's effective user; std has no geteuid.
        let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
        let path = plan
            .env
            .iter()
            .chain(env)
            .rfind(|(k, _)| k == "PATH")
            .map(|(_, v)| OsString::from(v))
            .or_else(|| std::env::var_os("PATH"));
        Host { root, path }
    }
}

/// Why a server cannot be started sandboxed; the message names the fix.
#[derive(Debug)]
pub(crate) struct SandboxError(pub String);

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
    // The shell stays the server's parent, outside its limits, to report a limit that killed it.
    args.extend(["/bin/sh".into(), "-c".into(), REPORTER.into()]);
    args.push(sandbox.limits.cpu_seconds.to_string().into());
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
        // SIGXCPU at the limit (which the reporter names), SIGKILL a second later if ignored.
        format!(
            "--cpu={}:{}",
            l.cpu_seconds,
            l.cpu_seconds.saturating_add(1)
        ),
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
    // In the view: a system folder, a mount, or inside one.
    let visible = |p: &Path| {
        SYSTEM.iter().any(|s| p.starts_with(s)) || mounts.iter().any(|m| p.starts_with(m.path()))
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
        .filter(|a| a.parent().is_some() && *a != Path::new("/tmp") && !visible(a))
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
        // Relative to its working folder (an absolute one stays as it is).
        let p = cwd.map_or_else(|| PathBuf::from(arg), |cwd| cwd.join(arg));
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
    out.sort_by(|a, b| order(a).cmp(&order(b)));
    out.dedup_by(|later, first| later.path() == first.path());
    Ok(out)
}

/// Where a mount goes in the list: by depth, then path, a write before a read of the same path.
fn order(m: &Mount) -> (usize, &Path, bool) {
    (
        m.path().components().count(),
        m.path(),
        matches!(m, Mount::Read(_)),
    )
}

/// The folders the command, its arguments and its working folder pass through before a `..`.
fn dot_dot_steps(plan: &McpStdioPlan) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let cwd = plan.cwd.as_deref().map(Path::new);
    let written = std::iter::once(plan.command.as_str())
        .chain(plan.args.iter().map(String::as_str))
        .chain(plan.cwd.as_deref());
    for w in written {
        let p = cwd.map_or_else(|| PathBuf::from(w), |cwd| cwd.join(w));
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
/// installation it lies in ([`installed_in`]); for a script, its interpreter's too.
fn installation(file: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let last = follow(&normalize(file), &mut out);
    // One level: an interpreter that is itself a script is not followed further.
    if let Some(interpreter) = interpreter(&last).filter(|i| *i != last) {
        follow(&interpreter, &mut out);
    }
    out
}

/// Adds the installation of `file` and of each file its symlinks lead to (at most 16); the
/// last of them.
fn follow(file: &Path, out: &mut Vec<PathBuf>) -> PathBuf {
    let mut step = file.to_path_buf();
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
    step
}

/// The interpreter a script's `#!` line names (absolute), if it has one.
fn interpreter(file: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(file).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|b| *b == b'\n')?];
    let path = std::str::from_utf8(line).ok()?.split_whitespace().next()?;
    Path::new(path).is_absolute().then(|| PathBuf::from(path))
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
        find_tools(&dirs)
    });
    found.as_ref().map_err(|e| SandboxError(e.clone()))
}

/// The tools in the first of `dirs` that has each, or which one is missing and how to get it.
fn find_tools(dirs: &[PathBuf]) -> Result<Tools, String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use ptc_plan::SandboxLimits;

    fn plan(command: &str, args: &[&str], cwd: Option<&str>) -> McpStdioPlan {
        McpStdioPlan {
            command: command.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: vec![],
            cwd: cwd.map(str::to_string),
            handshake_timeout_ms: 1,
            request_timeout_ms: 1,
            max_response_bytes: 1,
            tools: Default::default(),
            sandbox: Some(SandboxPlan::default()),
        }
    }

    fn strings(args: &[OsString]) -> Vec<String> {
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    /// A fresh folder, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            Scratch(ptc_tests::fresh_dir(&format!("sandbox-unit-{name}")))
        }

        fn file(&self, rel: &str) -> PathBuf {
            let p = self.0.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "").unwrap();
            p
        }

        fn dir(&self, rel: &str) -> PathBuf {
            let p = self.0.join(rel);
            std::fs::create_dir_all(&p).unwrap();
            p
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn the_limits_are_passed_to_prlimit_in_its_units() {
        let mut s = SandboxPlan {
            limits: SandboxLimits {
                memory_mb: 3,
                processes: 5,
                open_files: 7,
                cpu_seconds: 11,
            },
            ..SandboxPlan::default()
        };
        assert_eq!(
            limits(&s),
            [
                "--data=3145728",
                "--nproc=5",
                "--nofile=7",
                "--cpu=11:12",
                "--core=0"
            ]
        );
        s.limits.memory_mb = u64::MAX;
        assert_eq!(limits(&s)[0], format!("--data={}", u64::MAX), "saturates");
    }

    #[test]
    fn the_network_is_its_own_unless_granted_and_root_switches_users_inside() {
        let mut s = SandboxPlan::default();
        let has = |args: &[OsString], flag: &str| strings(args).iter().any(|a| a == flag);
        let user = namespaces(&s, false);
        assert!(has(&user, "--unshare-net") && has(&user, "--unshare-user"));
        assert!(!has(&user, "--cap-add"));
        for flag in [
            "--unshare-ipc",
            "--unshare-pid",
            "--unshare-uts",
            "--die-with-parent",
            "--new-session",
        ] {
            assert!(has(&user, flag), "{flag}");
        }
        let root = namespaces(&s, true);
        assert!(!has(&root, "--unshare-user"));
        assert!(has(&root, "CAP_SETUID") && has(&root, "CAP_SETGID"));
        s.network = true;
        assert!(!has(&namespaces(&s, false), "--unshare-net"));
    }

    #[test]
    fn an_installation_is_its_packages_or_prefix_never_a_home_or_the_root() {
        let home = std::env::var("HOME").unwrap_or_default();
        for (file, installed) in [
            ("/opt/venv/bin/python", "/opt/venv"),
            ("/opt/tool/sbin/tool", "/opt/tool"),
            (
                "/srv/app/node_modules/a/node_modules/b/index.js",
                "/srv/app/node_modules",
            ),
            ("/srv/app/server.py", "/srv/app"),
            ("/srv/server.py", "/srv"),
            ("/home/ada/server.py", "/home/ada/server.py"),
            ("/home/server.py", "/home/server.py"),
            ("/root/server.py", "/root/server.py"),
            ("/root/bin/server", "/root/bin/server"),
            ("/server", "/server"),
            ("/bin/server", "/bin/server"),
        ] {
            assert_eq!(
                installed_in(Path::new(file)),
                Path::new(installed),
                "{file}"
            );
        }
        if !home.is_empty() {
            let in_home = Path::new(&home).join("s.py");
            assert_eq!(installed_in(&in_home), in_home);
        }
        let scratch = Scratch::new("installed");
        let dir = scratch.dir("pkg");
        assert_eq!(installed_in(&dir), dir, "a folder is itself");
    }

    #[test]
    fn each_link_on_the_way_to_the_command_brings_its_installation() {
        let scratch = Scratch::new("links");
        let real = scratch.file("real/bin/python3.12");
        scratch.dir("venv/bin");
        let python = scratch.0.join("venv/bin/python");
        std::os::unix::fs::symlink("../../real/bin/python3.12", &python).unwrap();
        assert_eq!(
            installation(&python),
            [scratch.0.join("venv"), scratch.0.join("real")]
        );
        assert_eq!(installation(&real), [scratch.0.join("real")]);
        // A script brings its interpreter's installation (a venv's entry point, an npm bin).
        let tool = scratch.0.join("app/bin/tool");
        std::fs::create_dir_all(tool.parent().unwrap()).unwrap();
        std::fs::write(&tool, format!("#!{} -u\nprint(1)\n", python.display())).unwrap();
        assert_eq!(
            installation(&tool),
            [
                scratch.0.join("app"),
                scratch.0.join("venv"),
                scratch.0.join("real")
            ]
        );
        for (head, named) in [
            ("#!/usr/bin/env node\n", Some("/usr/bin/env")),
            ("#! /bin/sh\n", Some("/bin/sh")),
            ("#!python\n", None),
            ("#!/no/newline", None),
            ("\x7fELF", None),
        ] {
            std::fs::write(&tool, head).unwrap();
            assert_eq!(interpreter(&tool), named.map(PathBuf::from), "{head:?}");
        }
        // A loop ends.
        let a = scratch.0.join("loop/a");
        scratch.dir("loop");
        std::os::unix::fs::symlink("b", &a).unwrap();
        std::os::unix::fs::symlink("a", scratch.0.join("loop/b")).unwrap();
        assert_eq!(installation(&a).len(), 16);
    }

    #[test]
    fn a_path_written_with_dot_dot_needs_the_folders_it_passes() {
        let p = plan(
            "/a/b/../c/run",
            &["../d", "x", "/e/f/../../g"],
            Some("/w/v"),
        );
        assert_eq!(
            dot_dot_steps(&p),
            [
                PathBuf::from("/a/b"),
                PathBuf::from("/w/v"),
                PathBuf::from("/e/f"),
                PathBuf::from("/e")
            ]
        );
        assert!(dot_dot_steps(&plan("run", &["../x"], None)).is_empty());
    }

    #[test]
    fn mounts_put_parents_first_and_a_write_over_a_read_of_the_same_path() {
        let scratch = Scratch::new("mounts");
        let data = scratch.dir("data");
        let inner = scratch.dir("data/inner");
        let script = scratch.file("app/server.py");
        let mut p = plan("/usr/bin/python3", &[script.to_str().unwrap(), "-v"], None);
        let s = SandboxPlan {
            read_paths: vec![
                inner.display().to_string(),
                data.display().to_string(),
                "/usr/share".into(),
            ],
            write_paths: vec![data.display().to_string(), "/etc/app".into()],
            ..SandboxPlan::default()
        };
        std::fs::create_dir_all("/tmp").ok();
        let err = mounts(&p, &s, Path::new("/usr/bin/python3")).unwrap_err();
        assert_eq!(
            err.0,
            "`sandbox.write_paths` names `/etc/app`, which does not exist: create it or remove it from the list"
        );
        let s = SandboxPlan {
            write_paths: vec![data.display().to_string(), "/usr/share".into()],
            ..s
        };
        p.cwd = Some(scratch.0.display().to_string());
        let got = mounts(&p, &s, Path::new("/usr/bin/python3")).unwrap();
        assert_eq!(
            got,
            [
                Mount::Read(scratch.0.clone()),
                Mount::Write(PathBuf::from("/usr/share")),
                Mount::Read(scratch.0.join("app")),
                Mount::Write(data.clone()),
                Mount::Read(inner.clone()),
            ],
            "the system's own paths only when written"
        );
    }

    /// A relative argument names a file from the server's working folder.
    #[test]
    fn a_relative_argument_is_read_from_the_working_folder() {
        let scratch = Scratch::new("relative");
        let app = scratch.dir("app");
        scratch.file("lib/helper.py");
        let p = plan(
            "/usr/bin/python3",
            &["../lib/helper.py", "missing.py"],
            Some(app.to_str().unwrap()),
        );
        let got = mounts(&p, &SandboxPlan::default(), Path::new("/usr/bin/python3")).unwrap();
        assert_eq!(got, [Mount::Read(app), Mount::Read(scratch.0.join("lib"))]);
        let p = plan(
            "/usr/bin/python3",
            &["../lib/helper.py", "/no/such/folder/x.py"],
            None,
        );
        let got = mounts(&p, &SandboxPlan::default(), Path::new("/usr/bin/python3")).unwrap();
        assert!(
            got.is_empty(),
            "no working folder to read the first from; the second names nothing: {got:?}"
        );
    }

    #[test]
    fn hidden_paths_inside_the_view_are_masked_and_parents_made_traversable() {
        let scratch = Scratch::new("view");
        let shared = scratch.dir("shared");
        let secret = scratch.file("shared/secret.token");
        let other = scratch.dir("shared/other-server");
        let outside = scratch.file("elsewhere/key");
        let temp = scratch.dir("temp");
        let p = plan("/usr/bin/env", &[], None);
        let s = SandboxPlan {
            read_paths: vec![shared.display().to_string()],
            hidden: vec![
                secret.display().to_string(),
                other.display().to_string(),
                outside.display().to_string(),
                scratch.0.join("shared/gone").display().to_string(),
            ],
            ..SandboxPlan::default()
        };
        let args = strings(&view(&p, &s, Path::new("/usr/bin/env"), &temp).unwrap());
        let joined = args.join(" ");
        let masked = temp.join("masked");
        assert!(
            joined.contains(&format!(
                "--ro-bind {} {}",
                masked.display(),
                secret.display()
            )),
            "{joined}"
        );
        assert!(
            joined.contains(&format!("--tmpfs {}", other.display())),
            "{joined}"
        );
        assert!(!joined.contains("elsewhere"), "outside the view: {joined}");
        assert!(!joined.contains("gone"), "nothing there: {joined}");
        assert!(
            joined.contains(&format!("--bind {} /tmp", temp.join("tmp").display())),
            "{joined}"
        );
        // Every folder on the way to `shared` is made, readable to all; /tmp itself is the
        // server's own.
        for a in shared.ancestors().skip(1).filter(|a| a.parent().is_some()) {
            let made = args
                .windows(4)
                .any(|w| w[..3] == ["--perms", "0755", "--dir"] && Path::new(&w[3]) == a);
            assert_eq!(made, a != Path::new("/tmp"), "{}: {joined}", a.display());
        }
        // Nothing is made inside a mount: the mount brings its own folders.
        let deeper = scratch.dir("shared/deeper/still");
        let s = SandboxPlan {
            read_paths: vec![shared.display().to_string(), deeper.display().to_string()],
            ..SandboxPlan::default()
        };
        let nested = strings(&view(&p, &s, Path::new("/usr/bin/env"), &temp).unwrap());
        assert!(
            !nested.iter().any(|a| Path::new(a) == shared.join("deeper")),
            "{nested:?}"
        );
        // Masks come after the binds they cover.
        let bind = joined
            .find(&format!("--ro-bind {0} {0}", shared.display()))
            .unwrap();
        assert!(joined.find("--tmpfs").unwrap() > bind);
    }

    /// A bare command is looked up on the `PATH` the server gets: the last one set (the call's,
    /// the config's), else the host's; root is the effective user of this process.
    #[test]
    fn the_path_looked_up_is_the_servers_own() {
        use std::os::unix::fs::MetadataExt;
        let mut p = plan("tool", &[], None);
        p.env = vec![
            ("A".into(), "/not/path".into()),
            ("PATH".into(), "/srv/bin".into()),
        ];
        assert_eq!(Host::current(&p, &[]).path, Some("/srv/bin".into()));
        // The call's own variables come last, over the config's.
        let call = [("PATH".to_string(), "/opt/bin".to_string())];
        assert_eq!(Host::current(&p, &call).path, Some("/opt/bin".into()));
        p.env = vec![("A".into(), "/not/path".into())];
        assert_eq!(Host::current(&p, &[]).path, std::env::var_os("PATH"));
        let me = std::fs::metadata("/proc/self").unwrap().uid();
        assert_eq!(Host::current(&p, &[]).root, me == 0);
    }

    #[test]
    fn a_bare_command_is_found_on_path_and_must_be_runnable() {
        use std::os::unix::fs::PermissionsExt;
        let scratch = Scratch::new("path");
        let first = scratch.file("a/tool");
        let second = scratch.file("b/tool");
        std::fs::set_permissions(&second, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = std::env::join_paths([
            "relative",
            first.parent().unwrap().to_str().unwrap(),
            second.parent().unwrap().to_str().unwrap(),
        ])
        .unwrap();
        assert_eq!(
            find_command("tool", Some(&path)),
            Some(second.clone()),
            "the first runnable one"
        );
        assert_eq!(find_command("tool", None), None);
        assert_eq!(find_command(second.to_str().unwrap(), None), Some(second));
        assert_eq!(
            find_command(first.to_str().unwrap(), Some(&path)),
            None,
            "not runnable"
        );
    }

    #[test]
    fn a_missing_tool_is_named_with_its_package_and_the_opt_out() {
        let scratch = Scratch::new("tools");
        let e = find_tools(std::slice::from_ref(&scratch.0)).err().unwrap();
        assert_eq!(
            e,
            "a sandboxed stdio server needs `bwrap` (bubblewrap), which is not installed: install it \
             (Debian and Ubuntu: `apt-get install bubblewrap`), or set \"sandbox\": false on the \
             upstream to run it with the host's own rights"
        );
        for tool in ["bwrap", "prlimit", "unshare"] {
            scratch.file(tool);
        }
        let e = find_tools(std::slice::from_ref(&scratch.0)).err().unwrap();
        assert!(
            e.starts_with("a sandboxed stdio server needs `setpriv` (util-linux)"),
            "{e}"
        );
        scratch.file("setpriv");
        let t = find_tools(std::slice::from_ref(&scratch.0)).unwrap();
        assert_eq!(t.setpriv, scratch.0.join("setpriv"));
    }

    /// Root's command line switches to nobody inside, in a user namespace of its own, before the
    /// limits; another user's only gets the namespace and the limits.
    #[test]
    fn the_command_line_ends_with_the_switch_the_namespace_the_limits_and_the_server() {
        if tools().is_err() {
            return; // The tests that run servers need bubblewrap and say so.
        }
        let p = plan("/usr/bin/env", &["true"], None);
        let s = p.sandbox.clone().unwrap();
        // Making a folder nobody's needs root: the root form is only tried where the test is.
        let am_root = Host::current(&p, &[]).root;
        for root in [true, false].into_iter().filter(|r| am_root || !r) {
            let host = Host { root, path: None };
            let prepared = prepare("up", &p, &s, &host).unwrap();
            let args = strings(&prepared.args);
            let tail = args.iter().position(|a| a == "--chdir").unwrap();
            let tail: Vec<&str> = args[tail..]
                .iter()
                .map(|a| {
                    Path::new(a)
                        .file_name()
                        .map_or(a.as_str(), |n| n.to_str().unwrap())
                })
                .collect();
            let mut expected = vec!["--chdir", "tmp", "--"];
            if root {
                expected.extend([
                    "setpriv",
                    "--reuid=65534",
                    "--regid=65534",
                    "--clear-groups",
                    "--inh-caps=-all",
                    "--bounding-set=-all",
                    "--",
                ]);
            }
            expected.extend([
                "unshare",
                "--user",
                "--",
                "sh",
                "-c",
                REPORTER,
                "3600",
                "prlimit",
                "--data=1073741824",
                "--nproc=128",
                "--nofile=1024",
                "--cpu=3600:3601",
                "--core=0",
                "--",
                "env",
                "true",
            ]);
            assert_eq!(tail, expected, "root: {root}");
            assert_eq!(prepared.env, [("HOME", "/tmp"), ("TMPDIR", "/tmp")]);
            let temp = prepared.temp.0.clone();
            assert!(temp.join("tmp").is_dir() && temp.join("masked").is_file());
            drop(prepared);
            assert!(!temp.exists(), "removed when dropped");
        }
        let missing = plan("no-such-command-anywhere", &[], None);
        let host = Host {
            root: false,
            path: Some("/usr/bin".into()),
        };
        assert_eq!(
            prepare("up", &missing, &s, &host).err().unwrap().0,
            "`no-such-command-anywhere` is not found on PATH (a sandboxed server's command is looked up before it starts)"
        );
    }
}
