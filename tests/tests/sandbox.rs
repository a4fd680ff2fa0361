//! The stdio sandbox against a hostile server (`tests/interop/hostile_stdio.py`, the official
//! Python SDK): under the default sandbox a planted secret, a write outside, a loopback
//! listener, a program outside and `ptrace`/`unshare`/`mount` are each refused by the kernel
//! (the listener counts no connection), while `/etc/hostname` and a listed `write` path work;
//! `"network": {"connect": [PORT]}` lets that port through; `memory_mb` fails a large
//! allocation and the next call works; `"sandbox": false` reads the secret (the probe works).

use std::net::TcpListener;
use std::path::Path;

use brain_runtime::{CallRequest, Runtime, Scope};
use serde_json::{Value, json};

fn interop(file: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("interop")
        .join(file)
        .display()
        .to_string()
}

/// A runtime with a binding per hostile tool (as discovered), under `sandbox`.
fn runtime(sandbox: Value) -> Runtime {
    let command = vec![interop(".venv/bin/python"), interop("hostile_stdio.py")];
    let discovery = {
        let command = command.clone();
        std::thread::spawn(move || tests::peers::discover_command(&command))
            .join()
            .unwrap()
    };
    let tools: Vec<Value> = (discovery.tools.iter())
        .map(|tool| {
            json!({"name": tool["name"], "description": tool["description"],
                "input_schema": tool["inputSchema"], "output_schema": tool["outputSchema"],
                "pin": brain_config::ToolPin::of(tool),
                "command": command, "mcp_tool": tool["name"], "tenants": ["local"],
                "timeout_seconds": 30, "sandbox": sandbox})
        })
        .collect();
    let config = brain_config::parse(
        json!({ "tools": tools }).to_string().as_bytes(),
        "host.json",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    Runtime::new(&config).unwrap()
}

/// The text of `tool`'s answer to `arguments`.
async fn call(runtime: &Runtime, tool: &str, arguments: Value) -> String {
    let scope = Scope {
        tenant_id: "local".into(),
        session_id: "sandbox".into(),
    };
    let result = runtime
        .call(CallRequest::new(tool, scope, arguments))
        .result()
        .await;
    assert!(!result.is_error, "{tool}: {result:?}");
    match &result.content[0] {
        brain_runtime::ContentBlock::Text { text } => text.clone(),
        other => panic!("{other:?}"),
    }
}

/// A home with a secret and a program in it, a directory the server may write, a listener.
struct Scene {
    dir: tempfile::TempDir,
    listener: TcpListener,
}

impl Scene {
    fn new() -> Scene {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home/.ssh")).unwrap();
        std::fs::write(dir.path().join("home/.ssh/id_ed25519"), "SECRET KEY").unwrap();
        std::fs::create_dir_all(dir.path().join("allowed")).unwrap();
        let program = dir.path().join("home/run.sh");
        std::fs::write(&program, "#!/bin/sh\necho ran\n").unwrap();
        std::fs::set_permissions(
            &program,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        Scene { dir, listener }
    }

    fn path(&self, rest: &str) -> String {
        self.dir.path().join(rest).display().to_string()
    }

    fn port(&self) -> u16 {
        self.listener.local_addr().unwrap().port()
    }

    /// Connections the listener accepted so far.
    fn accepted(&self) -> usize {
        std::iter::from_fn(|| self.listener.accept().ok()).count()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_sandbox_refuses_every_escape_and_allows_what_it_lists() {
    let scene = Scene::new();
    let runtime = runtime(json!({"write": [scene.path("allowed")], "memory_mb": 128}));
    let secret = call(
        &runtime,
        "read",
        json!({"path": scene.path("home/.ssh/id_ed25519")}),
    )
    .await;
    assert!(secret.starts_with("denied errno=13 EACCES"), "{secret}");
    let hostname = call(&runtime, "read", json!({"path": "/etc/hostname"})).await;
    assert!(hostname.starts_with("ok"), "{hostname}");
    let inside = json!({"path": scene.path("allowed/out.txt"), "text": "mine"});
    assert_eq!(call(&runtime, "write", inside).await, "ok written");
    assert_eq!(
        std::fs::read_to_string(scene.path("allowed/out.txt")).unwrap(),
        "mine"
    );
    let outside = json!({"path": scene.path("home/planted.txt"), "text": "x"});
    let outside = call(&runtime, "write", outside).await;
    assert!(outside.starts_with("denied errno=13"), "{outside}");
    assert!(!Path::new(&scene.path("home/planted.txt")).exists());
    let connected = call(&runtime, "connect", json!({"port": scene.port()})).await;
    assert!(connected.starts_with("denied"), "{connected}");
    assert_eq!(scene.accepted(), 0, "the listener saw no connection");
    let ran = call(
        &runtime,
        "run",
        json!({"program": scene.path("home/run.sh")}),
    )
    .await;
    assert!(ran.starts_with("denied errno=13"), "{ran}");
    let big = call(&runtime, "allocate", json!({"mb": 512})).await;
    assert_eq!(big, "denied MemoryError");
    let small = call(&runtime, "allocate", json!({"mb": 8})).await;
    assert_eq!(small, "ok allocated 8 MiB", "the next call works");
    let syscalls = call(&runtime, "syscalls", json!({})).await;
    assert_eq!(syscalls, "ptrace=EPERM unshare=EPERM mount=EPERM");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listed_port_is_reachable_and_no_sandbox_reads_the_secret() {
    let scene = Scene::new();
    let listed = runtime(json!({"network": {"connect": [scene.port()]}}));
    let connected = call(&listed, "connect", json!({"port": scene.port()})).await;
    assert_eq!(connected, "ok connected");
    assert_eq!(scene.accepted(), 1);
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = other.local_addr().unwrap().port();
    let refused = call(&listed, "connect", json!({"port": port})).await;
    assert!(refused.starts_with("denied"), "{refused}");

    let unconfined = runtime(json!(false));
    let secret = call(
        &unconfined,
        "read",
        json!({"path": scene.path("home/.ssh/id_ed25519")}),
    )
    .await;
    assert_eq!(
        secret, "ok SECRET KEY",
        "the probe reads what the sandbox refuses"
    );
}
