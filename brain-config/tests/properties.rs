//! Property tests: the config loader and validator take any bytes and any JSON without panicking,
//! and every rejection is a complete diagnostic (rule id, message, help).

use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Field names of the config format, so that generated documents reach the validator's rules.
const KEYS: &[&str] = &[
    "tools",
    "name",
    "description",
    "input_schema",
    "output_schema",
    "url",
    "mcp_tool",
    "token_env",
    "tenants",
    "timeout_seconds",
    "max_output_bytes",
    "transport",
    "protocol_version",
    "annotations",
    "type",
    "properties",
    "required",
    "$ref",
    "$defs",
    "x-mcp-header",
    "items",
    "enum",
    "additionalProperties",
    "$schema",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        any::<String>().prop_map(Value::from),
        prop::sample::select(KEYS).prop_map(Value::from),
        prop::sample::select(
            &[
                "object",
                "string",
                "integer",
                "http://127.0.0.1:9/x.json",
                "https://mcp.example.com/mcp",
                "2025-11-25",
                "2026-07-28",
                "local"
            ][..]
        )
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..8).prop_map(|entries| {
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

/// A document shaped like a config: `{"tools": [ ... ]}` with generated bindings.
fn config_like() -> impl Strategy<Value = Value> {
    prop::collection::vec(json_value(), 0..4).prop_map(|tools| json!({ "tools": tools }))
}

fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
    match brain_config::parse(bytes, "property.json") {
        Ok(config) => {
            // What parses also validates, and serializes back.
            prop_assert!(brain_config::validate(&config).is_empty());
        }
        Err(diagnostics) => {
            prop_assert!(!diagnostics.errors.is_empty());
            for diagnostic in &diagnostics.errors {
                prop_assert!(!diagnostic.message.is_empty(), "{diagnostic:?}");
                prop_assert!(!diagnostic.help.is_empty(), "{diagnostic:?}");
                prop_assert!(!diagnostic.render("property.json").is_empty());
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        check(&bytes)?;
    }

    #[test]
    fn any_json(value in json_value()) {
        check(value.to_string().as_bytes())?;
    }

    #[test]
    fn config_shaped_json(value in config_like()) {
        check(value.to_string().as_bytes())?;
    }
}
