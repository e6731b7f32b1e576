//! A host process a test starts (`serve --http`), read line by line from its stderr, with every
//! wait bounded: a host that never says what a test waits for, or never exits, fails the test
//! with what it did say instead of hanging the run.

use std::io::BufRead;
use std::process::{Child, ExitStatus};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long a test waits for a line or an exit. Far above what a loaded CI machine needs (well
/// under a second); it only turns a hang into a failure that says where it stopped.
const PATIENCE: Duration = Duration::from_secs(90);

/// How many of the last stderr lines a failure shows.
const SHOWN: usize = 40;

/// A host process started by a test (`serve --http`), killed when dropped, with its stderr
/// lines to read.
pub struct HostProcess {
    /// The process.
    pub child: Child,
    /// Where it listens (`127.0.0.1:port`).
    pub addr: String,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl HostProcess {
    /// Starts `bin serve --http 127.0.0.1:0 args...` and waits until it says where it listens.
    pub fn serve(bin: &str, args: &[&str]) -> Self {
        let mut child = std::process::Command::new(bin)
            .args(["serve", "--http", "127.0.0.1:0"])
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"));
        let stderr = child.stderr.take().expect("piped stderr");
        let (send, lines) = std::sync::mpsc::channel();
        // The channel closes when stderr does: when the process has exited.
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let mut host = HostProcess {
            child,
            addr: String::new(),
            lines,
            seen: Vec::new(),
        };
        let line = host.line_with("listening on http://");
        host.addr = line
            .split("listening on http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_default()
            .to_string();
        host
    }

    /// The next stderr line containing `text` (the lines before it are skipped).
    pub fn line_with(&mut self, text: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(text) {
                        return line;
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.fail(&format!("the host ended before saying `{text}`"))
                }
                Err(RecvTimeoutError::Timeout) => self.fail(&format!(
                    "the host did not say `{text}` within {PATIENCE:?}"
                )),
            }
        }
    }

    /// Sends the process SIGTERM and waits for it to exit, reading what it says meanwhile.
    #[cfg(unix)]
    pub fn terminate(&mut self) -> ExitStatus {
        self.signal("-TERM");
        self.read_to_end("SIGTERM");
        self.child.wait().expect("the host's exit status")
    }

    /// Kills the process and returns every stderr line it wrote, from its first to its last.
    pub fn kill(&mut self) -> Vec<String> {
        let _ = self.child.kill();
        self.read_to_end("SIGKILL");
        self.seen.clone()
    }

    /// Reads stderr until it closes (the process has exited), after `signal` was sent.
    fn read_to_end(&mut self, signal: &str) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(RecvTimeoutError::Disconnected) => return,
                Err(RecvTimeoutError::Timeout) => self.fail(&format!(
                    "the host did not exit within {PATIENCE:?} of {signal}"
                )),
            }
        }
    }

    /// Sends the process SIGHUP (a catalog refresh).
    #[cfg(unix)]
    pub fn hangup(&self) {
        self.signal("-HUP");
    }

    #[cfg(unix)]
    fn signal(&self, which: &str) {
        let sent = std::process::Command::new("kill")
            .args([which, &self.child.id().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(sent, "kill {which} failed");
    }

    fn fail(&self, what: &str) -> ! {
        let from = self.seen.len().saturating_sub(SHOWN);
        panic!(
            "{what}; its last stderr lines:\n{}",
            self.seen[from..].join("\n")
        )
    }
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
