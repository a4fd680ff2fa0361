//! Property tests of the runtime's own parsing without the network: any arguments through the
//! gate (argument validation, and at 2026-07-28 the `Mcp-Param-*` header encoding of any string),
//! and any `tools/call` result through the conversion — no panic, and a refusal or failure is an
//! answer, not a crash. That the header values themselves are visible ASCII and decode back to
//! the argument is `routing.rs`'s property test
//! (`any_string_travels_as_visible_ascii_and_decodes_back`).

use brain_runtime::{CallRequest, Runtime, Scope};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn runtime(revision: &str) -> Runtime {
    let text = json!({"tools": [{
        "name": "routed", "description": "A tool with a header parameter.",
        "input_schema": {
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "count": {"type": "integer", "x-mcp-header": "Count"},
                "flag": {"type": "boolean", "x-mcp-header": "Flag"},
                "note": {"type": "string"}
            },
            "required": ["region"]
        },
        "output_schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
        "url": "http://127.0.0.1:9/mcp", "mcp_tool": "routed", "tenants": ["local"],
        "protocol_version": revision, "max_output_bytes": 4096
    }]})
    .to_string();
    Runtime::new(&brain_config::parse(text.as_bytes(), "properties.json").unwrap()).unwrap()
}

fn request(arguments: Value) -> CallRequest {
    CallRequest::new(
        "routed",
        Scope {
            tenant_id: "local".into(),
            session_id: "properties".into(),
        },
        arguments,
    )
    .with_call_id("p-1")
}

const KEYS: &[&str] = &[
    "content",
    "type",
    "text",
    "data",
    "mimeType",
    "structuredContent",
    "isError",
    "resultType",
    "ok",
    "region",
    "count",
    "flag",
    "note",
    "_meta",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        any::<String>().prop_map(Value::from),
        prop::sample::select(
            &[
                "text",
                "image",
                "audio",
                "resource_link",
                "resource",
                "image/png",
                "aGVsbG8="
            ][..]
        )
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..6).prop_map(|entries| {
                Value::Object(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k.to_owned(), v))
                        .collect::<Map<_, _>>(),
                )
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_arguments(arguments in json_value()) {
        let result = json!({"content": [{"type": "text", "text": "{\"ok\":true}"}], "structuredContent": {"ok": true}});
        for revision in ["2025-11-25", "2026-07-28"] {
            let _ = brain_runtime::__bench::per_call_work(&runtime(revision), &request(arguments.clone()), &result);
        }
    }

    #[test]
    fn any_header_values(region in any::<String>(), note in any::<String>(), count in any::<i64>(), flag in any::<bool>()) {
        let arguments = json!({"region": region, "note": note, "count": count, "flag": flag});
        let result = json!({"content": [{"type": "text", "text": "{\"ok\":true}"}], "structuredContent": {"ok": true}});
        let converted = brain_runtime::__bench::per_call_work(&runtime("2026-07-28"), &request(arguments), &result);
        prop_assert!(converted.is_some(), "valid arguments must pass the gate");
    }

    #[test]
    fn any_result(result in json_value()) {
        let arguments = json!({"region": "eu"});
        for revision in ["2025-11-25", "2026-07-28"] {
            if let Some(converted) = brain_runtime::__bench::per_call_work(&runtime(revision), &request(arguments.clone()), &result) {
                // A converted result stays within max_output_bytes (plus the JSON around it).
                let size = serde_json::to_vec(&converted.content).unwrap().len();
                prop_assert!(size <= 4096 + 1024, "{size} bytes");
            }
        }
    }
}
