//! A throwaway PostgreSQL cluster for the journal's tests: the Debian server binaries
//! (`initdb`, `pg_ctl`, run as the `postgres` user when the tests run as root), a free loopback
//! port, a temporary directory; stopped and removed when dropped. The server keeps its
//! durability defaults (`fsync`, `synchronous_commit` on).

use std::path::{Path, PathBuf};
use std::process::Command;

/// A running cluster.
#[derive(Debug)]
pub struct Cluster {
    /// `postgres://postgres@127.0.0.1:PORT/postgres`.
    pub url: String,
    dir: PathBuf,
    bin: PathBuf,
    running: bool,
}

/// Where the server binaries are: `$BRAIN_PG_BIN`, else the newest
/// `/usr/lib/postgresql/*/bin` with an `initdb`.
pub fn binaries() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("BRAIN_PG_BIN") {
        return Some(PathBuf::from(dir));
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| Some(entry.ok()?.path().join("bin")))
        .filter(|bin| bin.join("initdb").exists())
        .collect();
    found.sort_by_key(|bin| {
        bin.parent()
            .and_then(|v| v.file_name()?.to_str()?.parse::<u32>().ok())
            .unwrap_or(0)
    });
    found.pop()
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().next().map(|uid| uid == "0"))
        })
        .unwrap_or(false)
}

/// Runs `program args` as the `postgres` user when we are root, else as ourselves.
fn run(program: &Path, args: &[&str]) -> std::process::Output {
    let mut command = if is_root() {
        let mut line = shell_quote(&program.display().to_string());
        for arg in args {
            line.push(' ');
            line.push_str(&shell_quote(arg));
        }
        let mut su = Command::new("su");
        su.args(["postgres", "-s", "/bin/sh", "-c", &line]);
        su
    } else {
        let mut direct = Command::new(program);
        direct.args(args);
        direct
    };
    command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()))
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free loopback port")
}

impl Cluster {
    /// Creates and starts a cluster; panics saying how to install PostgreSQL when its binaries
    /// are missing.
    pub fn start() -> Cluster {
        let bin = binaries().expect(
            "PostgreSQL's server binaries are missing: install the `postgresql` package \
             (cargo xtask ci does), or set BRAIN_PG_BIN to their directory",
        );
        let dir =
            std::env::temp_dir().join(format!("brain-pg-{}-{}", std::process::id(), free_port()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        if is_root() {
            let status = Command::new("chown")
                .args(["postgres:postgres", &dir.display().to_string()])
                .status()
                .expect("chown runs");
            assert!(
                status.success(),
                "cannot give {} to postgres",
                dir.display()
            );
        }
        let data = dir.join("data").display().to_string();
        let initdb = run(
            &bin.join("initdb"),
            &[
                "-D",
                &data,
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        );
        assert!(
            initdb.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&initdb.stderr)
        );
        let mut cluster = Cluster {
            url: String::new(),
            dir,
            bin,
            running: false,
        };
        for _ in 0..5 {
            let port = free_port();
            let options = format!(
                "-p {port} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200",
                cluster.dir.display()
            );
            let log = cluster.dir.join("server.log").display().to_string();
            let started = run(
                &cluster.bin.join("pg_ctl"),
                &["-D", &data, "-o", &options, "-l", &log, "-w", "start"],
            );
            if started.status.success() {
                cluster.url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
                cluster.running = true;
                return cluster;
            }
        }
        panic!(
            "pg_ctl start failed: {}",
            std::fs::read_to_string(cluster.dir.join("server.log")).unwrap_or_default()
        );
    }

    /// Stops the server at once (`-m immediate`, as a crash would): the database goes away.
    pub fn stop(&mut self) {
        if self.running {
            let data = self.dir.join("data").display().to_string();
            run(
                &self.bin.join("pg_ctl"),
                &["-D", &data, "-m", "immediate", "-w", "stop"],
            );
            self.running = false;
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
