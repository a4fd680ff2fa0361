//! Bounded memory: a 200 MB response under a 1 MiB `max_output_bytes` fails with
//! `unknown_outcome: true`, and this process's peak RSS grows by less than 32 MB. The server runs
//! as its own process so that its 200 MB do not count; this file holds one test so that nothing
//! else shares the process.

#![allow(clippy::print_stderr)]

use brain_runtime::{CallRequest, Runtime, Scope};
use serde_json::json;
use tests::process::ServerProcess;

/// Peak resident set size of this process, in bytes (Linux `VmHWM`).
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_200_mb_response_under_a_1_mib_limit() {
    let server =
        ServerProcess::start(env!("CARGO_BIN_EXE_brain-test-server").as_ref(), &[]).unwrap();
    let url = server.url.as_str();

    let text = json!({"tools": [{
        "name": "huge", "description": "Text of `bytes` bytes.",
        "input_schema": {"type": "object", "properties": {"bytes": {"type": "integer", "minimum": 0}}, "required": ["bytes"]},
        "url": url, "mcp_tool": "huge", "tenants": ["local"],
        "timeout_seconds": 120, "max_output_bytes": 1_048_576
    }]})
    .to_string();
    let config = brain_config::parse(text.as_bytes(), "memory.json").unwrap();
    let runtime = Runtime::new(&config).unwrap();
    let call = |bytes: u64| {
        runtime
            .call(CallRequest::new(
                "huge",
                Scope {
                    tenant_id: "local".into(),
                    session_id: "memory".into(),
                },
                json!({ "bytes": bytes }),
            ))
            .result()
    };
    // Warm up: the runtime, the pool and the allocator at their steady size.
    let small = call(100_000).await;
    assert!(!small.is_error, "{small:?}");
    let before = peak_rss();

    let result = call(200_000_000).await;
    let growth = peak_rss().saturating_sub(before);
    eprintln!(
        "peak RSS before {:.1} MB, growth {:.1} MB during a 200 MB response",
        before as f64 / 1e6,
        growth as f64 / 1e6
    );
    assert!(result.is_error && result.unknown_outcome, "{result:?}");
    assert!(growth < 32 * 1024 * 1024, "peak RSS grew by {growth} bytes");
}
