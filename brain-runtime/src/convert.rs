//! MCP `CallToolResult` → brain's `tool.result` (spec, "Results and errors").

use serde_json::Value;

use crate::event::{ContentBlock, ToolResult};
use crate::outcome::{Fact, Failure};

/// Converts a `tools/call` result. `output` validates `structuredContent` of non-error results;
/// `max_output_bytes` bounds the converted result.
pub(crate) fn convert(
    call_id: &str,
    result: &Value,
    output: Option<&jsonschema::Validator>,
    max_output_bytes: u64,
) -> Result<ToolResult, Failure> {
    let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
    let mut content = Vec::new();
    let blocks = match result.get("content") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(blocks)) => blocks.as_slice(),
        Some(_) => {
            return Err(Failure::new(
                Fact::Unconvertible,
                "the result's `content` is not an array",
            ));
        }
    };
    for (i, block) in blocks.iter().enumerate() {
        content.push(content_block(i, block)?);
    }
    let structured = result
        .get("structuredContent")
        .filter(|value| !value.is_null())
        .cloned();
    if let Some(structured) = &structured {
        let already_there = content.iter().any(|block| match block {
            ContentBlock::Text { text } => {
                serde_json::from_str::<Value>(text).is_ok_and(|value| value == *structured)
            }
            ContentBlock::Image { .. } => false,
        });
        if !already_there {
            content.push(ContentBlock::text(structured.to_string()));
        }
    }
    if let (Some(validator), false) = (output, is_error) {
        let Some(structured) = &structured else {
            return Err(Failure::new(
                Fact::Unconvertible,
                "the tool has an output_schema but its result has no structuredContent",
            ));
        };
        if let Some(error) = validator.iter_errors(structured).next() {
            let at = error.instance_path().to_string();
            let at = if at.is_empty() { "/" } else { at.as_str() };
            return Err(Failure::new(
                Fact::Unconvertible,
                format!(
                    "the result's structuredContent does not match output_schema at `{at}`: {error}"
                ),
            ));
        }
    }
    let result = ToolResult {
        call_id: call_id.to_owned(),
        is_error,
        unknown_outcome: false,
        content,
        structured_content: structured,
        replayed: false,
        kind: None,
        reason: None,
        retry_after_ms: None,
        approval_id: None,
    };
    // The structured content travels in a text block now (above): it counts once.
    let size: u64 = result.content.iter().map(|b| b.size() as u64).sum();
    if size > max_output_bytes {
        return Err(Failure::new(
            Fact::Unconvertible,
            format!("the result is {size} bytes, over max_output_bytes ({max_output_bytes})"),
        ));
    }
    Ok(result)
}

fn content_block(index: usize, block: &Value) -> Result<ContentBlock, Failure> {
    let kind = block
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let field = |name: &str| {
        block.get(name).and_then(Value::as_str).ok_or_else(|| {
            Failure::new(
                Fact::Unconvertible,
                format!("content block {index} of type `{kind}` has no string `{name}`"),
            )
        })
    };
    match kind {
        "text" => Ok(ContentBlock::text(field("text")?)),
        "image" => Ok(ContentBlock::Image {
            data: field("data")?.to_owned(),
            mime_type: field("mimeType")?.to_owned(),
        }),
        other => Err(Failure::new(
            Fact::Unconvertible,
            format!(
                "the result has a content block of type `{other}`, which brain does not support \
             (text, image and structured content only)"
            ),
        )),
    }
}
