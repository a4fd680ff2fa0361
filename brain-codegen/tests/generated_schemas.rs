//! The generated code of `tests/fixtures/schemas.json` (in `tests/snapshots/schemas`) compiles
//! without a warning: `$defs`, enums, nested objects, an output type, and the JSON-object
//! fallbacks for `oneOf` and `additionalProperties: true`.
#![deny(warnings)]

// A private module of a test crate, as a host's `mod tools { include_bindings!(); }` is: the
// generated code allows `dead_code` and `unreachable_pub` itself. The snapshot is compared byte for byte with what codegen writes: rustfmt leaves it.
#[rustfmt::skip]
#[path = "snapshots/schemas/mod.rs"]
mod generated;

use brain_runtime::TypedCall;
use generated::{ToolCall, search, weather};

#[test]
fn the_generated_code_works() {
    let call = ToolCall::parse(
        "search",
        serde_json::json!({"query": "rust", "mode": "fast", "filters": [{"field": "lang", "value": "en"}]}),
    )
    .unwrap();
    let ToolCall::Search(args) = &call else {
        panic!("a search call")
    };
    assert_eq!(args.mode, Some(search::SearchArgsMode::Fast));
    assert_eq!(args.filters.as_ref().unwrap()[0].field, "lang");
    assert_eq!(call.arguments()["filters"][0]["value"], "en");

    // An empty optional array is sent as given, and an absent one stays absent.
    let call = ToolCall::parse("search", serde_json::json!({"query": "q", "filters": []})).unwrap();
    assert_eq!(call.arguments()["filters"], serde_json::json!([]));
    let call = ToolCall::parse("search", serde_json::json!({"query": "q"})).unwrap();
    assert!(call.arguments().get("filters").is_none());

    // Extra keys survive: `annotate` is a JSON object, not a struct that would drop them.
    let call = ToolCall::parse("annotate", serde_json::json!({"note": "n", "extra": 1})).unwrap();
    assert_eq!(call.arguments()["extra"], 1);
    // Both branches of `oneOf` are accepted.
    ToolCall::parse("pick", serde_json::json!({"choice": "a"})).unwrap();
    ToolCall::parse("pick", serde_json::json!({"choice": 2})).unwrap();
    // `additionalProperties: false` holds in the schema, before any typed parse.
    assert!(ToolCall::parse("strict", serde_json::json!({"id": "x", "more": 1})).is_err());

    let output: weather::WeatherOutput =
        serde_json::from_value(serde_json::json!({"city": "Oslo", "temperature": 21.5})).unwrap();
    assert_eq!(output.city, "Oslo");
}
