// The generated code of tests/fixtures/names.json compiles without a warning. (`dead_code` is
// allowed because this is a binary: the generated items are `pub` in a library.)
#![deny(warnings)]
#![allow(dead_code)]

#[path = "../snapshots/names/mod.rs"]
mod generated;

use generated::{ToolCall, ToolName};

fn main() {
    let call = ToolCall::GetPage(generated::get_page::GetPageArgs {
        url: "https://example.com".to_owned(),
    });
    assert_eq!(call.name(), ToolName::GetPage);
    let _ = generated::r#type::TypeArgs {
        type_: "x".to_owned(),
        self_: None,
    };
    assert_eq!(ToolName::ALL.len(), 5);
    assert_eq!("3d-render".parse::<ToolName>().ok(), Some(ToolName::X3dRender));
    assert_eq!(generated::BINDINGS[0].name, "get-page");
    let parsed = ToolCall::parse("self", serde_json::json!({})).unwrap();
    assert_eq!(parsed.name(), ToolName::SelfTool);
}
