//! Bounded memory under a progress flood: a call whose server sends 100,000 progress
//! notifications (about 9 MB of stream) before its result, under a 64 KiB `max_output_bytes`,
//! succeeds with every event delivered in order, and this process's peak RSS grows by less
//! than 4 MB: each message is read under its own bound and the event channel holds the server
//! back while the caller catches up. The server runs as its own process so that its memory does
//! not count; this file holds one test so that nothing else shares the process.

#![allow(clippy::print_stderr)]

use brain_runtime::{CallRequest, Event, Runtime, Scope};
use futures_util::StreamExt;
use serde_json::json;
use tests::process::{ServerProcess, memory_mb, test_server_binary};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_progress_flood_leaves_rss_flat() {
    let server = ServerProcess::start(&test_server_binary(), &[]).unwrap();
    let text = json!({"tools": [{
        "name": "chatty", "description": "Progress, then a result.",
        "input_schema": {"type": "object", "properties": {"progress": {"type": "integer", "minimum": 0}, "pings": {"type": "integer", "minimum": 0}, "notification_bytes": {"type": "integer", "minimum": 0}}},
        "url": server.url, "mcp_tool": "chatty", "tenants": ["local"],
        "timeout_seconds": 120, "max_output_bytes": 65_536, "protocol_version": "2025-11-25"
    }]})
    .to_string();
    let config = brain_config::parse(text.as_bytes(), "flood.json").unwrap();
    let runtime = Runtime::new(&config).unwrap();
    let runtime = &runtime;
    let flood = |progress: u32| async move {
        let mut call = runtime.call(CallRequest::new(
            "chatty",
            Scope {
                tenant_id: "local".into(),
                session_id: "flood".into(),
            },
            json!({ "progress": progress }),
        ));
        let (mut steps, mut result) = (Vec::new(), None);
        while let Some(event) = call.next().await {
            match event {
                Event::Progress(event) => steps.push(event.progress),
                Event::Result(done) => result = Some(done),
                other => panic!("unexpected: {other:?}"),
            }
        }
        (steps, result.unwrap())
    };
    // Warm up: the runtime, the pool and the allocator at their steady size.
    let (steps, result) = flood(2_000).await;
    assert!(!result.is_error && steps.len() == 2_000, "{result:?}");
    let before = memory_mb("VmHWM:").expect("Linux: /proc/self/status");

    let (steps, result) = flood(100_000).await;
    let growth = memory_mb("VmHWM:").unwrap() - before;
    eprintln!("peak RSS before {before:.1} MB, growth {growth:.2} MB during 100,000 progress");
    assert!(!result.is_error, "{result:?}");
    assert!(
        steps.iter().copied().eq((1..=100_000).map(f64::from)),
        "{} progress events, not 1..=100000 in order",
        steps.len()
    );
    // The steps themselves (800 KB of f64s, kept by this test) are in the growth.
    assert!(growth < 4.0, "peak RSS grew by {growth:.2} MB");
}
