//! The routing headers of MCP 2026-07-28 (SEP-2243): `Mcp-Method`, `Mcp-Name`, and the
//! `Mcp-Param-*` headers computed from the pinned schema's `x-mcp-header` annotations, with values
//! that cannot travel as they are Base64-wrapped.

use base64::Engine;
use base64::prelude::BASE64_STANDARD;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use crate::revision::PROTOCOL_HEADER;
use crate::revision::STATELESS;

/// An argument promoted to a header: the property path from the schema root, and the header.
#[derive(Debug, Clone)]
pub(crate) struct ParamHeader {
    path: Vec<String>,
    header: HeaderName,
}

/// Every `x-mcp-header` annotation along `properties` chains of `schema`.
pub(crate) fn param_headers(schema: &Value) -> Vec<ParamHeader> {
    let mut out = Vec::new();
    let mut stack: Vec<(Vec<String>, &Value)> = vec![(Vec::new(), schema)];
    while let Some((path, schema)) = stack.pop() {
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
            continue;
        };
        for (name, property) in properties {
            let mut path = path.clone();
            path.push(name.clone());
            if let Some(header) = property.get("x-mcp-header").and_then(Value::as_str)
                && let Ok(header) = HeaderName::from_bytes(format!("mcp-param-{header}").as_bytes())
            {
                out.push(ParamHeader {
                    path: path.clone(),
                    header,
                });
            }
            stack.push((path, property));
        }
    }
    out
}

/// The headers of a request about a task (`tasks/get`, `tasks/update`, `tasks/cancel`; the
/// tasks extension): `Mcp-Method` its method, `Mcp-Name` the task's id, so that a load balancer
/// routes it to the instance that holds the task.
pub(crate) fn task_headers(method: &str, task_id: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        HeaderName::from_static(PROTOCOL_HEADER),
        HeaderValue::from_static(STATELESS),
    );
    for (name, value) in [("mcp-method", method), ("mcp-name", task_id)] {
        if let Ok(value) = HeaderValue::from_str(&encode(value)) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
    headers
}

/// The headers of a `tools/call` POST.
pub(crate) fn headers(tool: &str, arguments: &Value, params: &[ParamHeader]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        HeaderName::from_static(PROTOCOL_HEADER),
        HeaderValue::from_static(STATELESS),
    );
    headers.insert(
        HeaderName::from_static("mcp-method"),
        HeaderValue::from_static("tools/call"),
    );
    if let Ok(value) = HeaderValue::from_str(&encode(tool)) {
        headers.insert(HeaderName::from_static("mcp-name"), value);
    }
    for param in params {
        let value = param
            .path
            .iter()
            .try_fold(arguments, |value, key| value.get(key));
        let text = match value {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Bool(b)) => b.to_string(),
            Some(Value::Number(n)) => n.to_string(),
            _ => continue,
        };
        if let Ok(value) = HeaderValue::from_str(&encode(&text)) {
            headers.insert(param.header.clone(), value);
        }
    }
    headers
}

/// A header value as SEP-2243 sends it: as is, or `=?base64?...?=` when it could not travel.
fn encode(value: &str) -> String {
    let edges = [value.chars().next(), value.chars().last()];
    let needs_base64 = edges.iter().any(|c| matches!(c, Some(' ' | '\t')))
        || value.chars().any(|c| !(' '..='~').contains(&c))
        || (value.starts_with("=?base64?") && value.ends_with("?="));
    if needs_base64 {
        format!("=?base64?{}?=", BASE64_STANDARD.encode(value))
    } else {
        value.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn encoding() {
        assert_eq!(encode("eu-west"), "eu-west");
        assert_eq!(encode("a b"), "a b");
        assert_eq!(encode(" a"), "=?base64?IGE=?=");
        assert_eq!(encode("é"), "=?base64?w6k=?=");
        assert_eq!(encode("x\r\ny"), "=?base64?eA0KeQ==?=");
    }

    #[test]
    fn param_headers_follow_properties_chains() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "options": {"type": "object", "properties": {"tier": {"type": "integer", "x-mcp-header": "Tier"}}},
            "plain": {"type": "string"}
        }});
        let params = param_headers(&schema);
        let headers = headers(
            "deploy",
            &json!({"region": "eu-west", "options": {"tier": 2}, "plain": "x"}),
            &params,
        );
        assert_eq!(headers["mcp-param-region"], "eu-west");
        assert_eq!(headers["mcp-param-tier"], "2");
        assert_eq!(headers["mcp-name"], "deploy");
        assert_eq!(headers["mcp-method"], "tools/call");
        assert_eq!(headers.len(), 5);
    }

    /// What a server does with a header value: the text, or the Base64 inside `=?base64?...?=`.
    fn decode(value: &str) -> String {
        match value
            .strip_prefix("=?base64?")
            .and_then(|rest| rest.strip_suffix("?="))
        {
            Some(encoded) => String::from_utf8(BASE64_STANDARD.decode(encoded).unwrap()).unwrap(),
            None => value.to_owned(),
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 1024, failure_persistence: None, ..Default::default() })]

        /// Any string argument travels: the header is sent, its value is visible ASCII (and
        /// spaces, never at an edge), and it decodes back to the argument exactly.
        #[test]
        fn any_string_travels_as_visible_ascii_and_decodes_back(
            region in proptest::prelude::any::<String>(),
            name in "[a-zA-Z0-9_-]{1,20}",
        ) {
            let schema = json!({"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"}
            }});
            let headers = headers(&name, &json!({"region": region}), &param_headers(&schema));
            let value = headers.get("mcp-param-region").expect("the header is sent");
            let text = value.to_str().expect("visible ASCII");
            proptest::prop_assert!(text.bytes().all(|b| (0x20..=0x7e).contains(&b)), "{text:?}");
            proptest::prop_assert!(!text.starts_with(' ') && !text.ends_with(' '), "{text:?}");
            proptest::prop_assert_eq!(decode(text), region);
            proptest::prop_assert_eq!(decode(headers["mcp-name"].to_str().unwrap()), name);
        }
    }
}
