//! The model APIs a config names (`model_apis`): a binding one of them would reject, and a
//! binding that demands `strict` where it cannot be strict.

use super::context::Draft;
use crate::diagnostic::{Diagnostic, Rule};
use crate::model::ModelApi;
use crate::model_api::{NoteKind, project};

/// A model API that `model_apis` names would reject the binding, and brain cannot repair it
/// without loss (a Gemini function name that starts with a digit, ...).
pub(super) fn rejects(draft: &Draft, apis: Option<&[ModelApi]>, out: &mut Vec<Diagnostic>) {
    if !draft.usable("name") || !draft.usable("input_schema") {
        return;
    }
    for &api in apis.unwrap_or_default() {
        let projection = project(api, &draft.binding);
        for note in projection
            .notes
            .iter()
            .filter(|n| n.kind == NoteKind::Rejected)
        {
            let (field, help) = if note.pointer.is_empty() {
                ("name", "rename the binding".to_owned())
            } else {
                (
                    "input_schema",
                    format!(
                        "change the schema, or remove \"{api}\" from `model_apis` (then \
                         `brain-harness tools --format {api}` leaves the tool out)"
                    ),
                )
            };
            out.push(draft.error(
                Rule::ModelApiRejects,
                &format!("{field}{}", note.pointer),
                format!("{api} would reject this tool: {}", note.message),
                help,
            ));
        }
    }
}

/// The binding says `"strict": true`, and its schema cannot be made strict faithfully for a
/// model API with a strict mode (those `model_apis` names, else OpenAI's and Anthropic's).
pub(super) fn strict(draft: &Draft, apis: Option<&[ModelApi]>, out: &mut Vec<Diagnostic>) {
    if draft.binding.strict != Some(true) || !draft.usable("input_schema") {
        return;
    }
    let apis: Vec<ModelApi> = match apis {
        Some(apis) => apis
            .iter()
            .copied()
            .filter(|a| a.has_strict_mode())
            .collect(),
        None => vec![ModelApi::OpenAi, ModelApi::Anthropic],
    };
    for api in apis {
        if api == ModelApi::OpenAiChat && out_has(out, draft, ModelApi::OpenAi) {
            continue;
        }
        let projection = project(api, &draft.binding);
        if projection.strict {
            continue;
        }
        let why = projection
            .notes
            .iter()
            .find(|n| n.kind == NoteKind::NotStrict)
            .map(|n| (n.pointer.clone(), n.message.clone()))
            .unwrap_or_default();
        out.push(draft.error(
            Rule::StrictNotFaithful,
            &format!("input_schema{}", why.0),
            format!(
                "`strict` is true, and {api} cannot take this tool strict: {}",
                why.1
            ),
            "change the schema there, or remove `\"strict\": true` (the tool is then sent \
             non-strict, and the gate still validates every call)",
        ));
    }
}

/// Whether a strict error for `api` was reported for this binding already (OpenAI's two APIs
/// share their rules: one error says it).
fn out_has(out: &[Diagnostic], draft: &Draft, api: ModelApi) -> bool {
    let prefix = draft.pointer("input_schema");
    out.iter().any(|d| {
        d.rule == Rule::StrictNotFaithful
            && d.pointer.starts_with(&prefix)
            && d.message.contains(&format!("and {api} cannot"))
    })
}
