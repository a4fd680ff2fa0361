//! One binding's module: its argument type, and its output type when it has an output schema.

use brain_config::ToolBinding;
use brain_config::ident::type_ident;
use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use typify::{TypeSpace, TypeSpaceSettings};

use crate::CodegenError;
use crate::schema::{for_typify, unfaithful};

/// One binding's module file, and the name of its argument type.
pub(crate) struct Module {
    pub(crate) tokens: TokenStream,
    /// The argument type's name as generated (typify may normalize the one asked for).
    pub(crate) args: String,
}

/// The module file of one binding: `<Name>Args`, and `<Name>Output` when it has an output
/// schema. Both share one typify `TypeSpace` (each space emits a `mod error`).
pub(crate) fn binding_module(binding: &ToolBinding) -> Result<Module, CodegenError> {
    let ty = type_ident(&binding.name);
    let schemas = [
        (
            "input_schema",
            Some(&binding.input_schema),
            format!("{ty}Args"),
        ),
        (
            "output_schema",
            binding.output_schema.as_ref(),
            format!("{ty}Output"),
        ),
    ];
    let mut items = Vec::new();
    let mut settings = TypeSpaceSettings::default();
    settings.with_attr("#[serde(crate = \"::brain_runtime::__codegen::serde\")]".to_owned());
    let mut space = TypeSpace::new(&settings);
    let mut typed = false;
    let mut args = format!("{ty}Args");
    for (field, schema, name) in schemas {
        let Some(schema) = schema else { continue };
        let typify_error = |message: String| CodegenError::Typify {
            tool: binding.name.clone(),
            field,
            message,
        };
        if let Some(reason) = unfaithful(schema) {
            items.push(json_object(binding, field, &name, &reason));
            continue;
        }
        let root: schemars08::schema::RootSchema =
            serde_json::from_value(for_typify(schema, &name))
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
        // typify names `::serde` and `::serde_json`; generated code reaches them through the
        // runtime, so that the bindings crate depends on brain-runtime alone.
        let code = space
            .to_stream()
            .to_string()
            .replace(":: serde ::", ":: brain_runtime :: __codegen :: serde ::")
            .replace(
                ":: serde_json ::",
                ":: brain_runtime :: __codegen :: serde_json ::",
            );
        items.push(code.parse().expect("typify's code still parses"));
    }
    let doc = format!(
        " Binding `{}`: {}",
        binding.name,
        binding.description.lines().next().unwrap_or_default()
    );
    let tokens = quote! {
        #![doc = #doc]
        #![allow(clippy::all, missing_docs, unused_imports, irrefutable_let_patterns, unused_qualifications)]
        #( #items )*
    };
    Ok(Module { tokens, args })
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
