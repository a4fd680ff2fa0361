//! Harness processes that share one state store (the default SQLite file, or a throwaway
//! PostgreSQL cluster), for the tests that start several and count at the server.

use std::process::{Child, Command, Output, Stdio};

use serde_json::{Value, json};

/// Where the harness processes of one test keep their journal.
pub(crate) enum State {
    /// No flag: `$XDG_STATE_HOME/brain/state.db`.
    Default(tempfile::TempDir),
    Postgres(tests::postgres::Cluster),
}

impl State {
    pub(crate) fn command(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_brain-harness"));
        command
            .env_remove("RUST_LOG")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("BRAIN_STATE_URL");
        match self {
            State::Default(dir) => command.env("XDG_STATE_HOME", dir.path()),
            State::Postgres(cluster) => command.env("BRAIN_STATE_URL", &cluster.url),
        };
        command
    }

    /// An attacker with the store's own client (`sqlite3`, `psql`) runs `sql` on it; what it
    /// printed (rows as `a|b`).
    pub(crate) fn sql(&self, sql: &str) -> String {
        let output = match self {
            State::Default(dir) => Command::new("sqlite3")
                .arg(dir.path().join("brain/state.db"))
                .arg(sql)
                .output(),
            State::Postgres(cluster) => Command::new("psql")
                .args([
                    cluster.url.as_str(),
                    "-v",
                    "ON_ERROR_STOP=1",
                    "-At",
                    "-c",
                    sql,
                ])
                .output(),
        }
        .expect("the store's client runs");
        assert!(output.status.success(), "{sql}: {output:?}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// `brain-harness call` of `tool` with `call_id`, started.
    pub(crate) fn start(&self, config: &str, call_id: &str, tool: &str, args: &str) -> Child {
        self.start_as("local", config, call_id, tool, args)
    }

    /// The same, as `tenant`.
    pub(crate) fn start_as(
        &self,
        tenant: &str,
        config: &str,
        call_id: &str,
        tool: &str,
        args: &str,
    ) -> Child {
        self.command()
            .args(["--config", config, "call", "--tenant", tenant])
            .args(["--call-id", call_id, tool, args])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("brain-harness starts")
    }
}

pub(crate) fn sqlite() -> State {
    State::Default(tempfile::tempdir().unwrap())
}

pub(crate) fn postgres() -> State {
    State::Postgres(tests::postgres::Cluster::start())
}

/// The process's `tool.result`.
pub(crate) fn result(output: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_else(|| {
        panic!(
            "no output; stderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let result: Value = serde_json::from_str(last).unwrap();
    assert_eq!(result["type"], json!("tool.result"), "{stdout}");
    result
}

pub(crate) async fn wait(child: Child) -> Output {
    tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap()
}

/// Waits until the server runs the tool (`running` > 0).
pub(crate) async fn until_running(server: &tests::server::TestServer) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while tests::server::Stats::get(&server.stats.running) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the tool never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Each `async fn NAME(state: State)` named, as a test on the default SQLite file (`mod sqlite`)
/// and as one on a throwaway PostgreSQL cluster (`mod postgres`).
#[allow(unused_macros)] // only the test files of several processes use it
macro_rules! on_each_state {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::sqlite()).await
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::postgres()).await
                }
            )*
        }
    };
}
#[allow(unused_imports)]
pub(crate) use on_each_state;
