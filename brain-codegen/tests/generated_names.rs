//! The generated code of `tests/fixtures/names.json` (in `tests/snapshots/names`) compiles
//! without a warning, and its names work: reserved words, names that start with a digit, kebab
//! case.
#![deny(warnings)]

// A private module of a test crate, as a host's `mod tools { include_bindings!(); }` is: the
// generated code allows `dead_code` and `unreachable_pub` itself. The snapshot is compared byte for byte with what codegen writes: rustfmt leaves it.
#[rustfmt::skip]
#[path = "snapshots/names/mod.rs"]
mod generated;

use generated::{ToolCall, ToolName};

#[test]
fn the_generated_code_works() {
    let call = ToolCall::GetPage(generated::get_page::GetPageArgs {
        url: "https://example.com".to_owned(),
    });
    assert_eq!(call.name(), ToolName::GetPage);
    let _ = generated::r#type::TypeArgs {
        type_: "x".to_owned(),
        self_: None,
    };
    assert_eq!(ToolName::ALL.len(), 5);
    assert_eq!(
        "3d-render".parse::<ToolName>().ok(),
        Some(ToolName::X3dRender)
    );
    assert_eq!(generated::BINDINGS[0].name, "get-page");
    let parsed = ToolCall::parse("self", serde_json::json!({})).unwrap();
    assert_eq!(parsed.name(), ToolName::SelfTool);
}
