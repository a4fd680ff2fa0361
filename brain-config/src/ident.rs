//! The Rust identifiers a binding's name becomes in generated code.
//!
//! `brain-codegen` names each binding's module with [`module_ident`] and its types with
//! [`type_ident`] (`<type_ident>Args`, a `ToolName::<type_ident>` variant). The config rule
//! `ident-collision` uses the same two functions, so two bindings that would generate the same
//! item are rejected before any code is generated.

use heck::{ToSnakeCase, ToUpperCamelCase};

/// The snake_case identifier of a binding's module: `get-page` → `get_page`, `type` → `r#type`,
/// `self` → `self_`, `3d` → `_3d`.
pub fn module_ident(name: &str) -> String {
    let snake = name.to_snake_case();
    let ident = fix_start(snake);
    match ident.as_str() {
        // Keywords that cannot be raw identifiers.
        "self" | "super" | "crate" => format!("{ident}_"),
        _ if is_keyword(&ident) => format!("r#{ident}"),
        _ => ident,
    }
}

/// The UpperCamelCase identifier of a binding's types and variant: `get-page` → `GetPage`,
/// `3d-render` → `X3dRender` (as typify spells it), `self` → `SelfTool`, `-` → `Tool`. Appending
/// `Args` keeps it UpperCamelCase.
pub fn type_ident(name: &str) -> String {
    let camel = name.to_upper_camel_case();
    match camel.chars().next() {
        None => "Tool".to_owned(),
        Some(first) if first.is_ascii_digit() => format!("X{camel}"),
        // `Self` is the only UpperCamelCase keyword.
        Some(_) if camel == "Self" => "SelfTool".to_owned(),
        Some(_) => camel,
    }
}

/// Identifiers must not start with a digit, and must not be empty or a lone `_`.
fn fix_start(ident: String) -> String {
    match ident.chars().next() {
        None => "_tool".to_owned(),
        Some(first) if first.is_ascii_digit() => format!("_{ident}"),
        Some('_') if ident.len() == 1 => "_tool".to_owned(),
        Some(_) => ident,
    }
}

fn is_keyword(ident: &str) -> bool {
    // Strict and reserved keywords of edition 2024 that can be raw identifiers.
    const KEYWORDS: &[&str] = &[
        "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "do",
        "dyn", "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl", "in",
        "let", "loop", "macro", "match", "mod", "move", "mut", "override", "priv", "pub", "ref",
        "return", "static", "struct", "trait", "true", "try", "type", "typeof", "unsafe",
        "unsized", "use", "virtual", "where", "while", "yield",
    ];
    KEYWORDS.contains(&ident)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(name: &str, module: &str, ty: &str) {
        assert_eq!(module_ident(name), module, "module of {name:?}");
        assert_eq!(type_ident(name), ty, "type of {name:?}");
    }

    #[test]
    fn idents() {
        check("docs_search", "docs_search", "DocsSearch");
        check("get-page", "get_page", "GetPage");
        check("foo-bar", "foo_bar", "FooBar");
        check("fooBar", "foo_bar", "FooBar");
        check("type", "r#type", "Type");
        check("self", "self_", "SelfTool");
        check("3d-render", "_3d_render", "X3dRender");
        check("_", "_tool", "Tool");
        check("-", "_tool", "Tool");
    }
}
