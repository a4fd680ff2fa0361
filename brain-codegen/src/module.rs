//! One binding's module: its argument type, and its output type when it has an output schema.

use brain_config::ToolBinding;
use brain_config::ident::type_ident;
use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use typify::{TypeSpace, TypeSpaceSettings};

use crate::error::CodegenError;
use crate::schema::{for_typify, unfaithful};

/// The items of one binding's module, and the name of its argument type.
pub(crate) struct Module {
    pub(crate) tokens: TokenStream,
    /// The argument type's name as generated (typify may normalize the one asked for).
    pub(crate) args: String,
}

/// One schema of a binding, and the name of its type.
struct Schema<'a> {
    /// `input_schema` or `output_schema`.
    field: &'static str,
    schema: &'a serde_json::Value,
    name: String,
    /// Why it gets a JSON-object type instead of typify's, if it does.
    untyped: Option<String>,
}

/// The module of one binding: `<Name>Args`, and `<Name>Output` when it has an output
/// schema. Both share one typify `TypeSpace` (each space emits a `mod error`).
///
/// typify 0.8 panics on some schemas it cannot name types for (it says so in the panic). Such a
/// schema gets a JSON-object type, the panic's message its reason: generated code stays
/// faithful, and codegen does not crash on a server's schema.
pub(crate) fn binding_module(binding: &ToolBinding) -> Result<Module, CodegenError> {
    let ty = type_ident(&binding.name);
    let mut schemas: Vec<Schema<'_>> = [
        ("input_schema", Some(&binding.input_schema), "Args"),
        ("output_schema", binding.output_schema.as_ref(), "Output"),
    ]
    .into_iter()
    .filter_map(|(field, schema, suffix)| {
        let schema = schema?;
        Some(Schema {
            field,
            schema,
            name: format!("{ty}{suffix}"),
            untyped: unfaithful(schema),
        })
    })
    .collect();
    loop {
        let attempt = |schemas: &[Schema<'_>]| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                module_items(binding, schemas)
            }))
        };
        let panic = match attempt(&schemas) {
            Ok(module) => return module,
            Err(panic) => panic_message(&*panic),
        };
        // The first schema typify panics on alone gets a JSON-object type; then try again.
        let culprit = (0..schemas.len())
            .find(|&i| schemas[i].untyped.is_none() && attempt(&schemas[i..=i]).is_err());
        match culprit {
            Some(i) => schemas[i].untyped = Some(format!("typify 0.8 cannot type it: {panic}")),
            // Each alone is fine, together they are not (or typify panics on what is left).
            None => {
                return Err(CodegenError::Typify {
                    tool: binding.name.clone(),
                    field: match schemas.as_slice() {
                        [only] => only.field,
                        _ => "input_schema and output_schema",
                    },
                    message: panic,
                });
            }
        }
    }
}

/// What a panic said.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "it panicked".to_owned())
}

/// The items of a binding's module, typify's types for the schemas that are not `untyped`.
fn module_items(binding: &ToolBinding, schemas: &[Schema<'_>]) -> Result<Module, CodegenError> {
    let ty = type_ident(&binding.name);
    let mut items = Vec::new();
    let mut settings = TypeSpaceSettings::default();
    settings.with_attr("#[serde(crate = \"::brain_runtime::__codegen::serde\")]".to_owned());
    let mut space = TypeSpace::new(&settings);
    let mut typed = false;
    let mut args = format!("{ty}Args");
    for Schema {
        field,
        schema,
        name,
        untyped,
    } in schemas
    {
        let field = *field;
        let typify_error = |message: String| CodegenError::Typify {
            tool: binding.name.clone(),
            field,
            message,
        };
        if let Some(reason) = untyped {
            items.push(json_object(binding, field, name, reason));
            continue;
        }
        let root: schemars08::schema::RootSchema = serde_json::from_value(for_typify(schema, name))
            .map_err(|e| typify_error(e.to_string()))?;
        let id = space
            .add_root_schema(root)
            .map_err(|e| typify_error(e.to_string()))?
            .ok_or_else(|| typify_error("no root type".into()))?;
        if field == "input_schema" {
            args = space
                .get_type(&id)
                .map_err(|e| typify_error(e.to_string()))?
                .name();
        }
        typed = true;
    }
    if typed {
        // typify names `::serde` and `::serde_json`, as paths and inside serde's attributes
        // (`skip_serializing_if = "::serde_json::Map::is_empty"`); generated code reaches them
        // through the runtime, so that the bindings crate depends on brain-runtime alone.
        let code = space
            .to_stream()
            .to_string()
            .replace(":: serde ::", ":: brain_runtime :: __codegen :: serde ::")
            .replace(
                ":: serde_json ::",
                ":: brain_runtime :: __codegen :: serde_json ::",
            )
            .replace("\"::serde::", "\"::brain_runtime::__codegen::serde::")
            .replace(
                "\"::serde_json::",
                "\"::brain_runtime::__codegen::serde_json::",
            );
        let mut file: syn::File = syn::parse_str(&code).expect("typify's code still parses");
        prune_defaults(&mut file);
        syn::visit_mut::VisitMut::visit_file_mut(&mut KeepEmpty, &mut file);
        items.push(quote!(#file));
    }
    let tokens = quote! { #( #items )* };
    Ok(Module { tokens, args })
}

/// Removes the helpers of typify's `mod defaults` that nothing calls: typify always emits its
/// generic `default_i64` (and kin) beside the defaults it needs, and an unused one is dead code
/// under the bindings crate's lints. A helper is named as a path (`defaults::x()`) or inside a
/// serde attribute (`default = "defaults::x"`).
fn prune_defaults(file: &mut syn::File) {
    let Some(index) = file
        .items
        .iter()
        .position(|item| matches!(item, syn::Item::Mod(module) if module.ident == "defaults"))
    else {
        return;
    };
    let syn::Item::Mod(mut defaults) = file.items.remove(index) else {
        unreachable!("found above")
    };
    let rest = quote!(#file).to_string();
    if let Some((_, items)) = &mut defaults.content {
        items.retain(|item| match item {
            syn::Item::Fn(helper) => {
                let name = helper.sig.ident.to_string();
                ["defaults :: ", "defaults::"].iter().any(|path| {
                    let path = format!("{path}{name}");
                    rest.match_indices(&path).any(|(at, _)| {
                        !rest[at + path.len()..]
                            .starts_with(|c: char| c.is_alphanumeric() || c == '_')
                    })
                })
            }
            _ => true,
        });
        if items.is_empty() {
            return;
        }
    }
    file.items.insert(index, syn::Item::Mod(defaults));
}

/// typify types an optional array or map property without a default as `Vec<T>` (or a map)
/// that is left out when empty (`skip_serializing_if = "…::is_empty"`): an empty one given
/// would not be sent, and `"labels": []` ("no labels") would reach the server as "leave the
/// labels". Such a field becomes `Option<…>`, left out only when absent: what the caller gave
/// is what brain sends.
struct KeepEmpty;

impl syn::visit_mut::VisitMut for KeepEmpty {
    fn visit_field_mut(&mut self, field: &mut syn::Field) {
        for attr in &mut field.attrs {
            let syn::Meta::List(list) = &mut attr.meta else {
                continue;
            };
            if !list.path.is_ident("serde") {
                continue;
            }
            let options = list.tokens.to_string();
            let Some(start) = options.find("skip_serializing_if = \"") else {
                continue;
            };
            let value = start + "skip_serializing_if = \"".len();
            let Some(length) = options[value..].find('"') else {
                continue;
            };
            if !options[value..value + length].ends_with("::is_empty") {
                continue;
            }
            let options = format!(
                "{}::std::option::Option::is_none{}",
                &options[..value],
                &options[value + length..]
            );
            list.tokens = options.parse().expect("serde's options still parse");
            let ty = &field.ty;
            field.ty = syn::parse_quote!(::std::option::Option<#ty>);
        }
        syn::visit_mut::visit_field_mut(self, field);
    }
}

/// A schema typify would not represent faithfully: a JSON object, and why, in the doc.
fn json_object(binding: &ToolBinding, field: &str, name: &str, reason: &str) -> TokenStream {
    let ident = format_ident!("{name}");
    let doc = format!(
        " The `{field}` of `{}`, as a JSON object: typed fields would not be faithful to the \
         schema ({reason}). brain validates it against the schema all the same.",
        binding.name
    );
    quote! {
        #[doc = #doc]
        pub type #ident = ::brain_runtime::__codegen::serde_json::Map<
            ::std::string::String,
            ::brain_runtime::__codegen::serde_json::Value,
        >;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(input_schema: serde_json::Value) -> ToolBinding {
        let config = serde_json::json!({"tools": [{"name": "t", "description": "T.",
            "input_schema": input_schema, "url": "https://mcp.example.com/mcp", "mcp_tool": "t",
            "tenants": ["local"]}]});
        let mut config = brain_config::parse(config.to_string().as_bytes(), "host.json").unwrap();
        config.tools.remove(0)
    }

    /// A schema typify panics on gets a JSON-object type, the panic's message its reason.
    #[test]
    fn a_typify_panic_gives_a_json_object() {
        let mut tool = binding(serde_json::json!({"type": "object"}));
        // Not a schema the config rules pass (they reject the missing `$ref`): one typify 0.8
        // panics on, to prove the fallback that catches the panics `unfaithful` cannot foresee.
        tool.input_schema =
            serde_json::json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/missing"}}});
        let module = binding_module(&tool).unwrap();
        let code = module.tokens.to_string();
        assert!(code.contains("pub type TArgs"), "{code}");
        assert!(
            code.contains("typify 0.8 cannot type it: $ref #/definitions/missing is missing"),
            "{code}"
        );
    }

    /// An optional array or map without a default is an `Option`: an empty one is sent.
    #[test]
    fn empty_arrays_and_maps_are_kept() {
        let tool = binding(serde_json::json!({"type": "object", "properties": {
            "labels": {"type": "array", "items": {"type": "string"}},
            "meta": {"type": "object", "additionalProperties": {"type": "string"}},
            "tags": {"type": "array", "items": {"type": "string"}, "default": ["a"]}}}));
        let code = binding_module(&tool).unwrap().tokens.to_string();
        assert!(!code.contains("is_empty"), "{code}");
        assert!(
            code.contains("pub labels : :: std :: option :: Option < :: std :: vec :: Vec < :: std :: string :: String > >"),
            "{code}"
        );
        assert!(
            code.contains("pub meta : :: std :: option :: Option <"),
            "{code}"
        );
        // With a default other than `[]`, typify's `Vec` (filled by the default) is kept.
        assert!(code.contains("pub tags : :: std :: vec :: Vec <"), "{code}");
    }

    /// Only the default helpers the types call are kept.
    #[test]
    fn unused_default_helpers_are_pruned() {
        let tool = binding(serde_json::json!({"type": "object", "properties": {
            "count": {"type": "number", "default": 3}, "limit": {"type": "integer", "default": 10}}}));
        let code = binding_module(&tool).unwrap().tokens.to_string();
        assert!(code.contains("fn t_args_count"), "{code}");
        assert!(code.contains("fn default_u64"), "{code}");
        assert!(!code.contains("fn default_i64"), "{code}");
        let tool = binding(serde_json::json!({"type": "object", "properties": {
            "count": {"type": "number", "default": 3}}}));
        let code = binding_module(&tool).unwrap().tokens.to_string();
        assert!(!code.contains("fn default_"), "{code}");
    }
}
