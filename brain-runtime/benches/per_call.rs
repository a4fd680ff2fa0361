//! P4, the runtime's own work per call without the network (target < 20 µs): the gate (tool,
//! tenant, argument validation), the `tools/call` message serialized as the binding's revision
//! sends it, and the conversion of the result. `cargo bench -p brain-runtime`.

#![allow(missing_docs)]

use brain_runtime::{CallRequest, Runtime, Scope};
use serde_json::{Value, json};

fn main() {
    divan::main();
}

fn runtime(revision: &str) -> Runtime {
    let text = json!({"tools": [{
        "name": "echo", "description": "Echo a message back.",
        "input_schema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
        "output_schema": {"type": "object", "properties": {"echoed": {"type": "string"}}, "required": ["echoed"]},
        "url": "http://127.0.0.1:9/mcp", "mcp_tool": "echo", "tenants": ["local"],
        "protocol_version": revision
    }]})
    .to_string();
    Runtime::new(&brain_config::parse(text.as_bytes(), "bench.json").unwrap()).unwrap()
}

fn request() -> CallRequest {
    CallRequest::new(
        "echo",
        Scope {
            tenant_id: "local".into(),
            session_id: "bench".into(),
        },
        json!({"message": "hello"}),
    )
    .with_call_id("call-1")
}

fn result() -> Value {
    json!({
        "content": [{"type": "text", "text": "{\"echoed\":\"hello\"}"}],
        "structuredContent": {"echoed": "hello"}
    })
}

#[divan::bench(args = ["2025-11-25", "2026-07-28"])]
fn per_call_work(bencher: divan::Bencher<'_, '_>, revision: &str) {
    let runtime = runtime(revision);
    let request = request();
    let result = result();
    bencher.bench_local(|| {
        brain_runtime::__bench::per_call_work(&runtime, &request, &result)
            .expect("the gate lets the call through")
    });
}

#[divan::bench]
fn refused_by_the_gate(bencher: divan::Bencher<'_, '_>) {
    let runtime = runtime("2025-11-25");
    let mut request = request();
    request.arguments = json!({"message": 42});
    let result = result();
    bencher.bench_local(|| brain_runtime::__bench::per_call_work(&runtime, &request, &result));
}
