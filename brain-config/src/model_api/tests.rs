//! The projections against the codegen corpus (13 real servers, 192 tools): the property tree
//! kept, round trips of generated instances, the notes; and the cases the rules name.

use serde_json::{Map, Value, json};

use super::schema::{property_tree, self_contained};
use super::{ModelApi, definitions, project, unproject};
use crate::model::{HostConfig, ToolBinding};

fn corpus() -> HostConfig {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../brain-codegen/corpus/host.json"
    );
    crate::load_file(std::path::Path::new(path)).expect("the corpus config loads")
}

/// The schema a projection carries, from its definition.
fn projected_schema(api: ModelApi, definition: &Value) -> &Value {
    match api {
        ModelApi::Mcp => &definition["inputSchema"],
        ModelApi::OpenAi => &definition["parameters"],
        ModelApi::OpenAiChat => &definition["function"]["parameters"],
        ModelApi::Anthropic => &definition["input_schema"],
        ModelApi::Gemini => &definition["parametersJsonSchema"],
    }
}

/// The names along `properties` and `items` must be the original's, for every tool and API:
/// a projection that threw the schema away (`{}`, which every validator accepts) fails here.
#[test]
fn every_projection_keeps_the_property_tree() {
    let config = corpus();
    let mut compared = 0;
    for &api in ModelApi::ALL {
        for binding in &config.tools {
            let projection = project(api, binding);
            let definition = projection.definition.expect("the corpus fits every API");
            let Ok(original) = self_contained(&binding.input_schema) else {
                continue;
            };
            let projected = projected_schema(api, &definition);
            let projected = self_contained(projected)
                .map_or_else(|_| projected.clone(), std::borrow::Cow::into_owned);
            assert_eq!(
                property_tree(&projected),
                property_tree(&original),
                "{api} {}",
                binding.name
            );
            compared += 1;
        }
    }
    assert!(compared >= 5 * 190, "{compared}");
    // The check can fail: an empty schema keeps no property.
    let search = config
        .tools
        .iter()
        .find(|b| b.name == "fetch_fetch")
        .unwrap();
    assert_ne!(
        property_tree(&json!({})),
        property_tree(&search.input_schema)
    );
}

/// A valid instance of `schema` (self-contained), deterministic: every required property, and
/// the optional ones when `optional` is set; `None` when no simple instance exists.
fn instance(schema: &Value, optional: bool) -> Option<Value> {
    let map = schema.as_object()?;
    if let Some(Value::Array(values)) = map.get("enum") {
        return values.first().cloned();
    }
    if let Some(constant) = map.get("const") {
        return Some(constant.clone());
    }
    for union in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = map.get(union) {
            return branches.iter().find_map(|b| instance(b, optional));
        }
    }
    let kind = match map.get("type") {
        Some(Value::String(kind)) => kind.as_str(),
        Some(Value::Array(kinds)) => kinds.first().and_then(Value::as_str).unwrap_or("null"),
        _ if map.contains_key("properties") => "object",
        _ => "string",
    };
    Some(match kind {
        "object" => {
            let required: Vec<&str> = map
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut out = Map::new();
            for (name, property) in map.get("properties").and_then(Value::as_object)? {
                if optional || required.contains(&name.as_str()) {
                    out.insert(name.clone(), instance(property, optional)?);
                }
            }
            Value::Object(out)
        }
        "array" => match map.get("items") {
            Some(items) if items.is_object() => json!([instance(items, optional)?]),
            _ => json!([]),
        },
        "integer" | "number" => map.get("minimum").cloned().unwrap_or(json!(1)),
        "boolean" => json!(true),
        "null" => Value::Null,
        _ => match map.get("format").and_then(Value::as_str) {
            Some("uri" | "url") => json!("https://example.com/a"),
            Some("date-time") => json!("2026-12-03T10:00:00Z"),
            Some("date") => json!("2026-12-03"),
            Some("email") => json!("a@example.com"),
            Some("uuid") => json!("6f1c1d3a-54a6-4a0b-9d6e-2b3c4d5e6f70"),
            _ => json!(
                "x".repeat(map.get("minLength").and_then(Value::as_u64).unwrap_or(1) as usize)
            ),
        },
    })
}

/// What a model says for an absent optional property under strict OpenAI: `null`, at every
/// depth of `properties` and `items`.
fn with_nulls(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Object(properties)) = schema.get("properties") {
                for (name, property) in properties {
                    match map.get_mut(name) {
                        Some(child) => with_nulls(property, child),
                        None => {
                            map.insert(name.clone(), Value::Null);
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(items_schema) = schema.get("items").filter(|i| i.is_object()) {
                for item in items {
                    with_nulls(items_schema, item);
                }
            }
        }
        _ => {}
    }
}

/// Instances of each original schema (optional properties present, then absent), as a strict
/// OpenAI model would send them (absent ones `null`), validate against the projection, map
/// back to exactly the instance, and validate against the original.
#[test]
fn strict_round_trips_over_the_corpus() {
    let config = corpus();
    let (mut trips, mut strict) = (0, 0);
    for binding in &config.tools {
        let projection = project(ModelApi::OpenAi, binding);
        if !projection.strict {
            continue;
        }
        strict += 1;
        let parameters = &projection.definition.as_ref().unwrap()["parameters"];
        let projected = crate::compile_schema(parameters).expect("a projection compiles");
        let original = crate::compile_schema(&binding.input_schema).unwrap();
        let inlined = self_contained(&binding.input_schema).unwrap();
        for optional in [true, false] {
            let Some(valid) = instance(&inlined, optional).filter(|i| original.is_valid(i)) else {
                continue;
            };
            let mut sent = valid.clone();
            with_nulls(&inlined, &mut sent);
            let errors: Vec<String> = projected
                .iter_errors(&sent)
                .map(|e| e.to_string())
                .collect();
            assert!(
                errors.is_empty(),
                "{}: {sent} against the projection: {errors:?}",
                binding.name
            );
            unproject(&binding.input_schema, &mut sent);
            assert_eq!(sent, valid, "{}", binding.name);
            assert!(original.is_valid(&sent));
            trips += 1;
        }
    }
    assert!(strict > 150, "{strict}");
    assert!(
        trips > 2 * 130,
        "{trips} round trips of {strict} strict tools"
    );
}

fn binding(name: &str, input_schema: Value) -> ToolBinding {
    serde_json::from_value(
        json!({"name": name, "description": "A tool.", "input_schema": input_schema,
        "url": "https://mcp.example.com/mcp", "mcp_tool": name, "tenants": ["local"]}),
    )
    .unwrap()
}

#[test]
fn a_required_property_that_accepts_null_keeps_its_null() {
    let schema = json!({"type": "object", "required": ["parent"], "properties": {
        "parent": {"type": ["string", "null"]}, "note": {"type": "string"}}});
    let projection = project(ModelApi::OpenAi, &binding("move", schema.clone()));
    assert!(projection.strict, "{:?}", projection.notes);
    let mut arguments = json!({"parent": null, "note": null});
    unproject(&schema, &mut arguments);
    assert_eq!(arguments, json!({"parent": null}));
}

#[test]
fn unfaithful_cases_stay_non_strict_with_the_reason() {
    let cases = [
        // n8n: operations whose fields depend on their type.
        (
            json!({"type": "object", "properties": {"operations": {"type": "array", "items": {
            "type": "object", "additionalProperties": true}}}}),
            "/properties/operations/items",
            "free-form",
        ),
        (
            json!({"type": "object", "properties": {"tag": {"type": ["string", "null"]}}}),
            "/properties/tag",
            "already accepts `null`",
        ),
        (
            json!({"type": "object", "properties": {"shape": {"anyOf": [
            {"type": "object", "properties": {"r": {"type": "number"}}},
            {"type": "object", "properties": {"w": {"type": "number"}}}]}}, "required": ["shape"]}),
            "/properties/shape/anyOf/0/properties/r",
            "union branch",
        ),
    ];
    for (schema, pointer, why) in cases {
        for api in [ModelApi::OpenAi, ModelApi::Anthropic] {
            let projection = project(api, &binding("t", schema.clone()));
            let expect_strict = api == ModelApi::Anthropic && why != "free-form";
            assert_eq!(projection.strict, expect_strict, "{api} {schema}");
            if !expect_strict {
                let note = &projection.notes[0];
                assert_eq!(
                    (note.pointer.as_str(), note.message.contains(why)),
                    (pointer, true),
                    "{note}"
                );
            }
        }
    }
}

#[test]
fn keywords_are_dropped_moved_or_kept_and_noted() {
    let schema = json!({"type": "object", "required": ["q"], "properties": {
        "q": {"type": "string", "maxLength": 50, "default": "rust", "format": "uri"},
        "n": {"type": "integer", "minimum": 1, "const": 3}}});
    let tool = binding("search", schema);
    let openai = project(ModelApi::OpenAi, &tool);
    let q = &openai.definition.as_ref().unwrap()["parameters"]["properties"]["q"];
    assert_eq!(
        q,
        &json!({"type": "string", "description": "(default: \"rust\"; format: \"uri\")"})
    );
    let kinds: Vec<_> = openai
        .notes
        .iter()
        .map(|n| (n.kind, n.pointer.as_str()))
        .collect();
    assert!(
        kinds.contains(&(super::NoteKind::Dropped, "/properties/q/maxLength")),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&(super::NoteKind::Moved, "/properties/q/default")),
        "{kinds:?}"
    );
    let gemini = project(ModelApi::Gemini, &tool);
    let n = &gemini.definition.as_ref().unwrap()["parametersJsonSchema"]["properties"]["n"];
    assert_eq!(n, &json!({"type": "integer", "minimum": 1, "enum": [3]}));
    let anthropic = project(ModelApi::Anthropic, &tool);
    let q = &anthropic.definition.as_ref().unwrap()["input_schema"]["properties"]["q"];
    assert_eq!(
        q,
        &json!({"type": "string", "format": "uri", "description": "(default: \"rust\")"})
    );
}

#[test]
fn anthropic_limits_apply_per_request_in_config_order() {
    let tools: Vec<ToolBinding> = (0..25)
        .map(|i| {
            binding(
                &format!("t{i}"),
                json!({"type": "object", "required": ["a"],
            "properties": {"a": {"type": "string"}}}),
            )
        })
        .collect();
    let all = definitions(ModelApi::Anthropic, &tools);
    let strict: Vec<bool> = all.tools.iter().map(|t| t.strict).collect();
    assert_eq!(strict.iter().filter(|s| **s).count(), 20);
    assert!(strict[..20].iter().all(|s| *s) && !strict[20]);
    assert!(all.tools[20].notes[0].message.contains("20 strict tools"));
    assert_eq!(all.document["tools"][20].get("strict"), None);
}

#[test]
fn gemini_names_and_the_documents() {
    let render = binding("3d_render", json!({"type": "object", "properties": {}}));
    let gemini = definitions(ModelApi::Gemini, [&render]);
    assert_eq!(gemini.document, json!({"tools": []}));
    assert_eq!(gemini.tools[0].notes[0].kind, super::NoteKind::Rejected);
    let ok = binding("render_3d", json!({"type": "object", "properties": {}}));
    let gemini = definitions(ModelApi::Gemini, [&ok]);
    assert_eq!(
        gemini.document,
        json!({"tools": [{"functionDeclarations": [{"name": "render_3d", "description": "A tool.",
            "parametersJsonSchema": {"type": "object", "properties": {}}}]}]})
    );
    let chat = definitions(ModelApi::OpenAiChat, [&ok]);
    assert_eq!(chat.document["tools"][0]["type"], "function");
    assert_eq!(chat.document["tools"][0]["function"]["strict"], true);
}

#[test]
fn strict_false_opts_a_binding_out() {
    let mut tool = binding(
        "search",
        json!({"type": "object", "required": ["q"],
        "properties": {"q": {"type": "string"}}}),
    );
    assert!(project(ModelApi::OpenAi, &tool).strict);
    tool.strict = Some(false);
    for api in [ModelApi::OpenAi, ModelApi::OpenAiChat, ModelApi::Anthropic] {
        let projection = project(api, &tool);
        assert!(!projection.strict, "{api}");
        assert!(
            projection.notes[0].message.contains("strict\": false"),
            "{:?}",
            projection.notes
        );
    }
}

/// A binding a model API would reject fails the check only when `model_apis` names that API.
#[test]
fn a_rejected_binding_fails_only_where_its_api_is_named() {
    let config = |apis: &str| {
        format!(
            r#"{{"model_apis": {apis}, "tools": [{{"name": "3d_render", "description": "Render.",
            "input_schema": {{"type": "object", "properties": {{}}}}, "url": "https://mcp.example.com/mcp",
            "mcp_tool": "render", "tenants": ["local"]}}]}}"#
        )
    };
    for passes in [r#"["openai", "anthropic"]"#, r#"["mcp"]"#] {
        crate::parse(config(passes).as_bytes(), "host.json").expect(passes);
    }
    let errors =
        crate::parse(config(r#"["openai", "gemini"]"#).as_bytes(), "host.json").unwrap_err();
    assert_eq!(errors.errors.len(), 1, "{errors}");
    assert_eq!(errors.errors[0].rule, crate::Rule::ModelApiRejects);
    assert_eq!(errors.errors[0].pointer, "/tools/0/name");
    assert!(errors.errors[0].help.contains("rename the binding"));
}
