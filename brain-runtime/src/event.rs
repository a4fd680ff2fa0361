//! What a call produces: zero or more `tool.progress` events, then exactly one `tool.result`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One event of a call, serialized as one JSON object with a `type` field.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type")]
pub enum Event {
    /// A progress notification from the server (live-only: never stored or replayed).
    #[serde(rename = "tool.progress")]
    Progress(Progress),
    /// The call's outcome. Always the last event.
    #[serde(rename = "tool.result")]
    Result(ToolResult),
}

/// A `tool.progress` event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Progress {
    /// The call it belongs to.
    pub call_id: String,
    /// How far the tool is; strictly increasing within a call.
    pub progress: f64,
    /// The total, when the server knows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    /// A human-readable message, when the server sent one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A `tool.result` event: what the model sees.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The call it belongs to.
    pub call_id: String,
    /// The tool failed, or brain could not complete the call.
    pub is_error: bool,
    /// The tool may or may not have run: the call failed after brain sent it. The model should
    /// check the resource with another tool rather than call this one again.
    pub unknown_outcome: bool,
    /// The result's content blocks.
    pub content: Vec<ContentBlock>,
    /// The tool's structured output, when it returned one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    /// The result comes from the call journal: this call id was called before, and this is
    /// that call's outcome (nothing was sent now). Serialized only when true.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replayed: bool,
}

/// A content block of a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ContentBlock {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image, base64-encoded.
    Image {
        /// The image's bytes, base64.
        data: String,
        /// Its media type, e.g. `image/png`.
        mime_type: String,
    },
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into() }
    }
}

impl ToolResult {
    /// A failed call: one text block saying what happened.
    pub(crate) fn failure(call_id: &str, unknown_outcome: bool, message: String) -> Self {
        ToolResult {
            call_id: call_id.to_owned(),
            is_error: true,
            unknown_outcome,
            content: vec![ContentBlock::text(message)],
            structured_content: None,
            replayed: false,
        }
    }

    /// The result's size as `max_output_bytes` counts it: the bytes of its content blocks' text,
    /// and of its images' base64 `data` and `mime_type`. Structured content counts once: through
    /// the text block that carries its JSON (the conversion always adds one), or, when no text
    /// block holds it, as its compact JSON.
    pub fn size(&self) -> usize {
        let content: usize = self.content.iter().map(ContentBlock::size).sum();
        let structured = match &self.structured_content {
            Some(value) if !self.carries_as_text(value) => value.to_string().len(),
            _ => 0,
        };
        content + structured
    }

    /// Whether a text block holds `value` as JSON.
    fn carries_as_text(&self, value: &Value) -> bool {
        self.content.iter().any(|block| match block {
            ContentBlock::Text { text } => {
                serde_json::from_str::<Value>(text).is_ok_and(|parsed| parsed == *value)
            }
            ContentBlock::Image { .. } => false,
        })
    }
}

impl ContentBlock {
    /// The block's bytes as `max_output_bytes` counts them.
    pub(crate) fn size(&self) -> usize {
        match self {
            ContentBlock::Text { text } => text.len(),
            ContentBlock::Image { data, mime_type } => data.len() + mime_type.len(),
        }
    }
}
