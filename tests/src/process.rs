//! Test servers as processes of their own (so that their memory and file descriptors are not
//! counted with the client's), and this process's memory figures.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A running `brain-test-server` process; killed when dropped.
#[derive(Debug)]
pub struct ServerProcess {
    child: Child,
    /// The MCP endpoint it printed, `http://127.0.0.1:PORT/mcp`.
    pub url: String,
}

impl ServerProcess {
    /// Starts the server binary at `path` with `flags` and waits for its URL.
    pub fn start(path: &Path, flags: &[&str]) -> std::io::Result<ServerProcess> {
        let mut child = Command::new(path)
            .args(flags)
            .stdout(Stdio::piped())
            .spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("no stdout"))?;
        let mut url = String::new();
        BufReader::new(stdout).read_line(&mut url)?;
        Ok(ServerProcess {
            child,
            url: url.trim().to_owned(),
        })
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Starts the `brain-test-server` built next to the running executable.
    pub fn start_sibling(flags: &[&str]) -> std::io::Result<ServerProcess> {
        let exe = std::env::current_exe()?;
        let dir = exe
            .parent()
            .ok_or_else(|| std::io::Error::other("no parent"))?;
        Self::start(&dir.join("brain-test-server"), flags)
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `brain-test-server` binary the workspace built (`CARGO_TARGET_DIR`, else `target/`, in
/// its debug profile): cargo builds the workspace's binaries before its tests run.
pub fn test_server_binary() -> std::path::PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| crate::workspace_root().join("target"));
    target.join("debug/brain-test-server")
}

/// A field of `/proc/self/status` in MB: `VmRSS:` (resident now), `RssAnon:` (the anonymous part:
/// heap and stacks, not mapped files) or `VmHWM:` (peak); `None`
/// when it cannot be read (not Linux): not measured, never 0.
pub fn memory_mb(field: &str) -> Option<f64> {
    memory_mb_of("self", field)
}

/// [`memory_mb`] of the process `pid` (`self` for this one).
pub fn memory_mb_of(pid: &str, field: &str) -> Option<f64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with(field))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0)
}

/// The state letter of process `pid` (`R`, `S`, `Z`, ...), or `None` when there is none.
fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid ...`: the command may hold spaces and parentheses.
    stat.rsplit(')').next()?.trim_start().chars().next()
}

/// Whether process `pid` no longer runs: gone, or a zombie waiting to be reaped.
pub fn gone(pid: u32) -> bool {
    matches!(state(pid), None | Some('Z' | 'X'))
}

/// Waits (bounded, 2 s) until process `pid` no longer runs; whether it stopped.
pub async fn eventually_gone(pid: u32) -> bool {
    for _ in 0..100 {
        if gone(pid) {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    gone(pid)
}

/// The running (not zombie) processes whose parent is this process.
pub fn children() -> Vec<u32> {
    let me = std::process::id().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            let mut fields = stat.rsplit(')').next().unwrap_or("").split_whitespace();
            let state = fields.next().unwrap_or("");
            fields.next() == Some(me.as_str()) && state != "Z"
        })
        .collect()
}

/// Waits until something accepts connections on 127.0.0.1:`port`, for at most `within`; whether
/// it did.
pub fn wait_for_listener(port: u16, within: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + within;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    true
}
