//! A real `redis-server` for tests (Debian's `redis-server` package, which `scripts/test` checks
//! for): started on a free loopback port and a Unix socket in a fresh directory, with the
//! append-only file synced on every write, so that [`RedisServer::stop`] then
//! [`RedisServer::restart`] keeps what was written, as a Redis restart in production does.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long a starting Redis has to answer PING (it starts in milliseconds; replaying the
/// append-only file of a test is as quick; a loaded 2-core machine is slower).
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// How often a port taken between choosing it and Redis binding it is chosen again.
const PORT_ATTEMPTS: u32 = 3;

/// A running `redis-server`, killed and its directory removed when dropped.
pub struct RedisServer {
    /// Its TCP port on 127.0.0.1.
    pub port: u16,
    /// `redis://127.0.0.1:<port>/0`.
    pub url: String,
    /// Its Unix socket, when the directory's path is short enough for one (a socket path has
    /// at most 107 bytes).
    pub socket: Option<PathBuf>,
    /// Its working directory: the append-only file and the log (`redis.log`).
    pub dir: PathBuf,
    binary: PathBuf,
    child: Option<Child>,
}

/// `redis-server` on `PATH`, or Debian's.
fn binary() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("redis-server"))
            .find(|candidate| candidate.is_file())
    });
    on_path.or_else(|| {
        let debian = PathBuf::from("/usr/bin/redis-server");
        debian.is_file().then_some(debian)
    })
}

/// A new empty directory for one server.
fn fresh_dir() -> PathBuf {
    static COUNT: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!(
        "ptc-redis-{}-{}-{nanos}",
        std::process::id(),
        COUNT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

/// Whether Redis at `port` answers PING with PONG now (not while it loads its data: it answers
/// `-LOADING` then).
fn answers_ping(port: u16) -> bool {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    if stream.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut answer = [0u8; 7];
    let mut read = 0;
    while read < answer.len() {
        match stream.read(&mut answer[read..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => read += n,
        }
    }
    answer.starts_with(b"+PONG")
}

/// Starts a `redis-server` on a free port in a fresh directory and waits until it answers PING;
/// `None` after [`crate::skip`] says how to install it when there is none. Panics, with its
/// log, when it exits or stays silent for 20 seconds.
pub fn start() -> Option<RedisServer> {
    let Some(binary) = binary() else {
        crate::skip(
            "redis-server is not installed (Debian package redis-server, or a redis-server of 6.2 \
             or later on PATH; scripts/test names what is missing)",
        );
        return None;
    };
    let dir = fresh_dir();
    let socket = dir.join("redis.sock");
    let socket = (socket.as_os_str().len() < 100).then_some(socket);
    let mut server = RedisServer {
        port: 0,
        url: String::new(),
        socket,
        dir,
        binary,
        child: None,
    };
    for attempt in 1..=PORT_ATTEMPTS {
        server.port = crate::free_port();
        server.url = format!("redis://127.0.0.1:{}/0", server.port);
        match server.launch() {
            Ok(()) => return Some(server),
            Err(log) if attempt < PORT_ATTEMPTS && log.contains("Address already in use") => {}
            Err(log) => panic!(
                "redis-server ({}) did not answer PING on port {} within {START_TIMEOUT:?}; its \
                 log:\n{log}",
                server.binary.display(),
                server.port
            ),
        }
    }
    unreachable!("the last attempt returns or panics")
}

impl RedisServer {
    /// Starts the process on `self.port` in `self.dir` and waits for PING; `Err(log)` when it
    /// exits or does not answer in time (then it is killed).
    fn launch(&mut self) -> Result<(), String> {
        let mut cmd = Command::new(&self.binary);
        cmd.args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "yes"])
            .args(["--appendfsync", "always"])
            .args(["--daemonize", "no"])
            .args(["--logfile", "redis.log"])
            .arg("--dir")
            .arg(&self.dir);
        if let Some(socket) = &self.socket {
            cmd.arg("--unixsocket")
                .arg(socket)
                .args(["--unixsocketperm", "700"]);
        }
        let child = cmd
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.binary.display()));
        self.child = Some(child);
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if answers_ping(self.port) {
                return Ok(());
            }
            let exited = self
                .child
                .as_mut()
                .and_then(|child| child.try_wait().ok().flatten());
            if exited.is_some() || Instant::now() >= deadline {
                self.stop();
                return Err(format!("(exit: {exited:?})\n{}", self.log()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What the server logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("redis.log"))
            .unwrap_or_else(|e| format!("(no log: {e})"))
    }

    /// Whether it answers PING now.
    pub fn answers(&self) -> bool {
        answers_ping(self.port)
    }

    /// Kills the process (SIGKILL: what it wrote is in the append-only file already) and waits
    /// for it to end; nothing happens when it is not running.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and directory (it reads back its append-only file) and
    /// waits until it answers PING; stops it first when it runs. Panics, with its log, when it
    /// does not come back.
    pub fn restart(&mut self) {
        self.stop();
        if let Err(log) = self.launch() {
            panic!(
                "redis-server did not answer PING on port {} within {START_TIMEOUT:?} after a \
                 restart; its log:\n{log}",
                self.port
            );
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
