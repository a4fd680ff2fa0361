//! Loading a host config: bytes → JSON → bindings read field by field → every rule, with each
//! diagnostic placed at its line:column.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::Path;

use serde_json::{Map, Value};

use crate::check::{Draft, Sections, check};
use crate::diagnostic::{Diagnostic, Diagnostics, Rule};
use crate::limits::TenantLimits;
use crate::model::{HostConfig, MAX_CONFIG_BYTES, ModelApi, ToolBinding};
use crate::policy::PolicyConfig;
use crate::schema::{FIELDS, Field};
use crate::serve::Serve;
use crate::source::{Location, SourceIndex, escape_token};

/// Why a config could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {file}: {source}")]
    Read {
        /// The file as the user named it.
        file: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file was read, and is invalid.
    #[error("{0}")]
    Invalid(Diagnostics),
}

/// Reads and validates the host config at `path`: every error at once, or the config.
pub fn load_file(path: &Path) -> Result<HostConfig, ConfigError> {
    let file = path.display().to_string();
    let read_error = |source| ConfigError::Read {
        file: file.clone(),
        source,
    };
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .map_err(read_error)?
        // One byte past the limit is enough to know it is too large; never read the rest.
        .take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    parse(&bytes, &file).map_err(ConfigError::Invalid)
}

/// Validates a host config held in memory; `file` names it in diagnostics.
pub fn parse(bytes: &[u8], file: &str) -> Result<HostConfig, Diagnostics> {
    let fail = |errors| Diagnostics {
        file: file.to_owned(),
        errors,
    };
    let text = decode(bytes).map_err(|d| fail(vec![*d]))?;
    let document: Value = serde_json::from_str(text).map_err(|e| fail(vec![json_error(&e)]))?;
    let index = SourceIndex::new(text);

    let mut errors: Vec<Diagnostic> = index
        .duplicate_keys()
        .map(|(pointer, location)| Diagnostic {
            location: Some(location),
            ..Diagnostic::new(
                Rule::DuplicateKey,
                pointer,
                "this key appears more than once in the same object; only the last one would count",
                "remove or rename one of them",
            )
        })
        .collect();
    let Document {
        schema,
        model_apis,
        serve,
        tenant_limits,
        mut policies,
        mut approvals,
        mut audit,
        drafts,
    } = read_document(document, &mut errors);
    let dir = Path::new(file).parent().unwrap_or(Path::new(""));
    if let Some(policies) = &mut policies {
        crate::policy::files::read(policies, dir, &mut errors);
    }
    if let Some(audit) = &mut audit {
        crate::audit::read_keys(audit, dir, &mut errors);
    }
    if let Some(approvals) = &mut approvals {
        crate::approvals::read_keys(approvals, dir, &mut errors);
    }
    errors.extend(check(
        &drafts,
        Sections {
            model_apis: model_apis.as_deref(),
            serve: serve.as_ref(),
            tenant_limits: tenant_limits.as_ref(),
            approvals: approvals.as_ref(),
            audit: audit.as_ref(),
        },
    ));

    let names: Vec<Option<&str>> = tool_names(&drafts);
    for diagnostic in &mut errors {
        if diagnostic.location.is_none() {
            diagnostic.location = index.locate(&diagnostic.pointer);
        }
        diagnostic.tool = tool_index(&diagnostic.pointer)
            .and_then(|i| names.get(i).copied().flatten())
            .map(str::to_owned);
    }
    if !errors.is_empty() {
        errors.sort_by_key(|d| d.location);
        return Err(fail(errors));
    }
    let config = HostConfig {
        schema,
        model_apis,
        serve,
        tenant_limits,
        policies,
        approvals,
        audit,
        tools: drafts.into_iter().map(|draft| draft.binding).collect(),
    };
    crate::policy::compile_in(&config, dir).map_err(|mut errors| {
        for diagnostic in &mut errors {
            if diagnostic.location.is_none() && diagnostic.file.is_none() {
                diagnostic.location = index.locate(&diagnostic.pointer);
            }
        }
        errors.sort_by(|a, b| (&a.file, a.location).cmp(&(&b.file, b.location)));
        fail(errors)
    })?;
    Ok(config)
}

/// The text of the file: UTF-8, a leading byte-order mark ignored, at most [`MAX_CONFIG_BYTES`].
fn decode(bytes: &[u8]) -> Result<&str, Box<Diagnostic>> {
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(Box::new(Diagnostic::new(
            Rule::TooLarge,
            "",
            format!(
                "the config is larger than the {} MiB limit",
                MAX_CONFIG_BYTES / (1024 * 1024)
            ),
            "is this the right file? a host config with hundreds of bindings is well under 1 MiB",
        )));
    }
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    std::str::from_utf8(bytes).map_err(|error| {
        let valid = std::str::from_utf8(&bytes[..error.valid_up_to()]).unwrap_or_default();
        let line = valid.matches('\n').count() + 1;
        let column = valid
            .rsplit('\n')
            .next()
            .unwrap_or_default()
            .chars()
            .count()
            + 1;
        Box::new(Diagnostic {
            location: Some(Location { line, column }),
            ..Diagnostic::new(
                Rule::InvalidUtf8,
                "",
                format!(
                    "the file is not UTF-8: byte 0x{:02X} at offset {} is invalid",
                    bytes[error.valid_up_to()],
                    error.valid_up_to()
                ),
                "save the file as UTF-8 (JSON text is UTF-8)",
            )
        })
    })
}

/// A diagnostic for text that serde_json rejected.
fn json_error(error: &serde_json::Error) -> Diagnostic {
    let text = error.to_string();
    let message = text
        .rsplit_once(" at line ")
        .map_or(text.as_str(), |(m, _)| m);
    let (rule, message, help) = if message.contains("recursion limit exceeded") {
        (
            Rule::TooDeep,
            "the JSON nests more than 128 levels deep".to_owned(),
            "flatten the structure; no host config or tool schema needs this depth",
        )
    } else {
        (
            Rule::Syntax,
            format!("the file is not valid JSON: {message}"),
            "fix the JSON syntax at this position (JSON allows no comments or trailing commas)",
        )
    };
    Diagnostic {
        location: Some(Location {
            line: error.line().max(1),
            column: error.column().max(1),
        }),
        ..Diagnostic::new(rule, "", message, help)
    }
}

/// The root's fields, and each binding.
#[derive(Default)]
struct Document {
    schema: Option<String>,
    model_apis: Option<Vec<ModelApi>>,
    serve: Option<Serve>,
    tenant_limits: Option<BTreeMap<String, TenantLimits>>,
    policies: Option<PolicyConfig>,
    approvals: Option<crate::approvals::ApprovalsConfig>,
    audit: Option<crate::audit::AuditConfig>,
    drafts: Vec<Draft>,
}

/// Reads the root object and each binding, reporting unknown, missing and mistyped fields.
fn read_document(document: Value, errors: &mut Vec<Diagnostic>) -> Document {
    let Value::Object(mut root) = document else {
        errors.push(Diagnostic::new(
            Rule::InvalidType,
            "",
            format!("the config is {}, not a JSON object", describe(&document)),
            "write `{\"tools\": [ ... ]}`",
        ));
        return Document::default();
    };
    unknown_fields(&mut root, "", &FIELDS.root, errors);
    let schema = match root.remove("$schema") {
        None => None,
        Some(Value::String(schema)) => Some(schema),
        Some(other) => {
            errors.push(Diagnostic::new(
                Rule::InvalidType,
                "/$schema",
                format!("`$schema` is {}, not a string", describe(&other)),
                "point it at the config's JSON Schema, e.g. \
                 `\"../brain-config/host-config.schema.json\"`, or remove it",
            ));
            None
        }
    };
    let model_apis = root
        .remove("model_apis")
        .map(|value| read_model_apis(value, errors));
    let serve = root.remove("serve").and_then(|value| {
        read_section::<Serve>(
            &value,
            "serve",
            "add it: a client needs `tenant` and `token_env`; `authorization` needs `issuer`, \
             `resource` and `tenant_claim`",
            errors,
        )
    });
    let tenant_limits = root.remove("tenant_limits").and_then(|value| {
        read_section::<BTreeMap<String, TenantLimits>>(
            &value,
            "tenant_limits",
            "write `{\"TENANT\": {\"calls\": N, \"per_seconds\": S, \"concurrent\": C}}`",
            errors,
        )
    });
    let policies = root
        .remove("policies")
        .and_then(|value| read_policies(value, errors));
    let approvals = root
        .remove("approvals")
        .and_then(|value| read_approvals(value, errors));
    let audit = root
        .remove("audit")
        .and_then(|value| read_audit(value, errors));
    let tools = match root.remove("tools") {
        Some(Value::Array(tools)) => tools,
        Some(other) => {
            errors.push(Diagnostic::new(
                Rule::InvalidType,
                "/tools",
                format!("`tools` is {}, not an array", describe(&other)),
                "make `tools` an array of bindings",
            ));
            Vec::new()
        }
        None => {
            errors.push(Diagnostic::new(
                Rule::MissingField,
                "",
                "the config has no `tools`",
                "add `\"tools\": [ ... ]` with one binding per tool (`cargo xtask discover` prints \
                 them)",
            ));
            Vec::new()
        }
    };
    let drafts = tools
        .into_iter()
        .enumerate()
        .filter_map(|(index, value)| read_binding(index, value, errors))
        .collect();
    Document {
        schema,
        model_apis,
        serve,
        tenant_limits,
        policies,
        approvals,
        audit,
        drafts,
    }
}

/// The `policies` section: the Cedar files it names (their text, `sources`, is brain's to read).
fn read_policies(value: Value, errors: &mut Vec<Diagnostic>) -> Option<PolicyConfig> {
    if value.get("sources").is_some() {
        errors.push(Diagnostic::new(
            Rule::UnknownField,
            "/policies/sources",
            "`policies.sources` is not written in a host config",
            "name the Cedar files in `policies.files`; brain reads their text when it loads \
             the config",
        ));
        return None;
    }
    read_section::<PolicyConfig>(
        &value,
        "policies",
        "write `{\"files\": [\"policies/*.cedar\"]}`",
        errors,
    )
}

/// The `approvals` section: the approvers, each with the file of its public key (whose text is
/// brain's to read) or a token's digest.
fn read_approvals(
    value: Value,
    errors: &mut Vec<Diagnostic>,
) -> Option<crate::approvals::ApprovalsConfig> {
    let approvers = value["approvers"].as_array().map(Vec::as_slice);
    if let Some(index) = approvers
        .unwrap_or_default()
        .iter()
        .position(|approver| approver.get("public_key_source").is_some())
    {
        errors.push(Diagnostic::new(
            Rule::UnknownField,
            format!("/approvals/approvers/{index}/public_key_source"),
            "`public_key_source` is not written in a host config",
            "name the approver's public key file in `public_key`; brain reads it when it \
             loads the config",
        ));
        return None;
    }
    read_section::<crate::approvals::ApprovalsConfig>(
        &value,
        "approvals",
        "an approver needs `name`, `tenants` and `public_key` (or `token_sha256`): write \
         `{\"approvers\": [{\"name\": \"ops\", \"tenants\": [\"TENANT\"], \"public_key\": \
         \"keys/ops.pub\"}]}`",
        errors,
    )
}

/// The `audit` section: the retention and the files of the audit keys (whose text is brain's to
/// read).
fn read_audit(value: Value, errors: &mut Vec<Diagnostic>) -> Option<crate::audit::AuditConfig> {
    if value.get("public_key_sources").is_some() {
        errors.push(Diagnostic::new(
            Rule::UnknownField,
            "/audit/public_key_sources",
            "`audit.public_key_sources` is not written in a host config",
            "name the public key files in `audit.public_keys`; brain reads them when it \
             loads the config",
        ));
        return None;
    }
    read_section::<crate::audit::AuditConfig>(
        &value,
        "audit",
        "write `{\"retention_days\": 400, \"public_keys\": [\"keys/audit.pub\"]}`",
        errors,
    )
}

/// A section beside the bindings (`serve`, `tenant_limits`), read whole: the first unknown,
/// missing or mistyped field in it is reported (and the rules about it then stay silent).
/// `missing`: the help for a missing field.
fn read_section<T: serde::de::DeserializeOwned>(
    value: &Value,
    name: &str,
    missing: &str,
    errors: &mut Vec<Diagnostic>,
) -> Option<T> {
    let error = match serde_path_to_error::deserialize::<_, T>(value) {
        Ok(section) => return Some(section),
        Err(error) => error,
    };
    let path = error.path().to_string();
    let pointer = match path_to_pointer(&path) {
        at if at.is_empty() => format!("/{name}"),
        at => format!("/{name}/{at}"),
    };
    let message = error.inner().to_string();
    let (rule, help) = if message.starts_with("unknown field") {
        (
            Rule::UnknownField,
            "remove it, or check its spelling against the message".to_owned(),
        )
    } else if message.starts_with("missing field") {
        (Rule::MissingField, missing.to_owned())
    } else {
        (
            Rule::InvalidType,
            format!("see the `{name}` section of the host config reference"),
        )
    };
    errors.push(Diagnostic::new(
        rule,
        pointer,
        format!("`{name}`: {message}"),
        help,
    ));
    None
}

/// `model_apis`: a list of API names; each unknown one reported (with the nearest known).
fn read_model_apis(value: Value, errors: &mut Vec<Diagnostic>) -> Vec<ModelApi> {
    let known = || {
        ModelApi::ALL
            .iter()
            .map(|api| format!("`\"{api}\"`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let Value::Array(names) = value else {
        errors.push(Diagnostic::new(
            Rule::ModelApiUnknown,
            "/model_apis",
            format!(
                "`model_apis` is {}, not a list of API names",
                describe(&value)
            ),
            format!(
                "write e.g. `\"model_apis\": [\"openai\", \"anthropic\"]`; the names: {}",
                known()
            ),
        ));
        return Vec::new();
    };
    let mut apis = Vec::new();
    for (index, name) in names.iter().enumerate() {
        match name.as_str().map(str::parse::<ModelApi>) {
            Some(Ok(api)) => apis.push(api),
            _ => {
                let near = name.as_str().and_then(|name| {
                    ModelApi::ALL
                        .iter()
                        .map(|api| (strsim::jaro_winkler(name, api.as_str()), api.as_str()))
                        .filter(|(score, _)| *score > 0.8)
                        .max_by(|a, b| a.0.total_cmp(&b.0))
                        .map(|(_, api)| api)
                });
                let help = match near {
                    Some(near) => format!("did you mean `\"{near}\"`? the names: {}", known()),
                    None => format!("use one of {}", known()),
                };
                errors.push(Diagnostic::new(
                    Rule::ModelApiUnknown,
                    format!("/model_apis/{index}"),
                    format!("{name} is not a model API brain knows"),
                    help,
                ));
            }
        }
    }
    apis
}

/// Reads one binding field by field: every unknown, missing and mistyped field is reported, and
/// the binding is still returned (with stand-ins) so the rules can check the rest of it.
fn read_binding(index: usize, value: Value, errors: &mut Vec<Diagnostic>) -> Option<Draft> {
    let pointer = format!("/tools/{index}");
    let Value::Object(mut object) = value else {
        errors.push(Diagnostic::new(
            Rule::InvalidType,
            pointer,
            format!("the binding is {}, not a JSON object", describe(&value)),
            "write each binding as an object, e.g. `{\"name\": ..., \"url\": ..., ...}`",
        ));
        return None;
    };
    unknown_fields(&mut object, &pointer, &FIELDS.binding, errors);
    let mut unusable = BTreeSet::new();
    for field in FIELDS.binding.iter().filter(|f| f.required) {
        if !object.contains_key(&field.name) {
            errors.push(Diagnostic::new(
                Rule::MissingField,
                &pointer,
                format!("the binding has no `{}`", field.name),
                format!("add `{}`: {}", field.name, field.description),
            ));
            unusable.insert(field.name.clone());
            object.insert(field.name.clone(), field.placeholder.clone());
        }
    }
    // Each pass reports the first mistyped field and sets it aside; the fields are finite.
    for _ in 0..=FIELDS.binding.len() {
        let error = match serde_path_to_error::deserialize::<_, ToolBinding>(&Value::Object(
            object.clone(),
        )) {
            Ok(binding) => {
                return Some(Draft {
                    index,
                    binding,
                    unusable,
                });
            }
            Err(error) => error,
        };
        let path = error.path().to_string();
        let name = path.split(['.', '[']).next().unwrap_or_default();
        let Some(field) = FIELDS
            .binding_field(name)
            .filter(|f| !unusable.contains(&f.name))
        else {
            break;
        };
        let value = object.get(&field.name).cloned().unwrap_or_default();
        errors.push(type_error(&pointer, field, &path, &value, error.inner()));
        unusable.insert(field.name.clone());
        if field.required {
            object.insert(field.name.clone(), field.placeholder.clone());
        } else {
            object.remove(&field.name);
        }
    }
    None
}

fn type_error(
    pointer: &str,
    field: &Field,
    path: &str,
    value: &Value,
    error: &serde_json::Error,
) -> Diagnostic {
    let pointer = format!("{pointer}/{}", path_to_pointer(path));
    if field.name == "transport" && value.is_string() {
        return Diagnostic::new(
            Rule::TransportUnknown,
            pointer,
            format!("`transport` is {value}, which brain does not know"),
            "use `\"http\"` (the default) or `\"sse\"`; MCP bindings have no `transport`",
        );
    }
    if field.name == "on_input_request" && value.is_string() {
        return Diagnostic::new(
            Rule::OnInputRequestUnknown,
            pointer,
            format!("`on_input_request` is {value}, which brain does not know"),
            "use `\"fail\"` (the default: the call fails, as the spec says) or `\"decline\"` \
             (elicitations are declined and the call goes on)",
        );
    }
    if field.name == "on_drift" && value.is_string() {
        return Diagnostic::new(
            Rule::OnDriftUnknown,
            pointer,
            format!("`on_drift` is {value}, which brain does not know"),
            "use `\"warn\"` (the default: a change to the tool's texts alone is reported and the \
             call goes on) or `\"refuse\"`; a change to anything else is always refused",
        );
    }
    Diagnostic::new(
        Rule::InvalidType,
        pointer,
        format!("`{path}` has the wrong type: {error}"),
        format!("`{}`: {}", field.name, field.description),
    )
}

/// Removes the fields `known` does not list, reporting each with the nearest known name.
fn unknown_fields(
    object: &mut Map<String, Value>,
    pointer: &str,
    known: &[Field],
    errors: &mut Vec<Diagnostic>,
) {
    object.retain(|key, _| {
        if known.iter().any(|field| field.name == *key) {
            return true;
        }
        let help = match did_you_mean(key, known) {
            Some(near) => format!("did you mean `{near}`?"),
            None => format!(
                "remove it; the fields are {}",
                known
                    .iter()
                    .map(|f| format!("`{}`", f.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        errors.push(Diagnostic::new(
            Rule::UnknownField,
            format!("{pointer}/{}", escape_token(key)),
            format!("unknown field `{key}`"),
            help,
        ));
        false
    });
}

/// The known field closest to `key`, if any is close enough to be what was meant.
fn did_you_mean<'a>(key: &str, known: &'a [Field]) -> Option<&'a str> {
    known
        .iter()
        .map(|field| (strsim::jaro_winkler(key, &field.name), field.name.as_str()))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, name)| name)
}

/// `tenants[2]` → `tenants/2`, `annotations.title` → `annotations/title`.
fn path_to_pointer(path: &str) -> String {
    path.replace('[', ".")
        .replace(']', "")
        .split('.')
        .filter(|segment| !segment.is_empty() && *segment != "?")
        .map(escape_token)
        .collect::<Vec<_>>()
        .join("/")
}

/// The binding index a pointer is inside, if any.
fn tool_index(pointer: &str) -> Option<usize> {
    pointer
        .strip_prefix("/tools/")?
        .split('/')
        .next()?
        .parse()
        .ok()
}

/// Each binding's name by index, where the name is usable.
fn tool_names(drafts: &[Draft]) -> Vec<Option<&str>> {
    let mut names = vec![None; drafts.last().map_or(0, |d| d.index + 1)];
    for draft in drafts {
        if !draft.unusable.contains("name") && !draft.binding.name.is_empty() {
            names[draft.index] = Some(draft.binding.name.as_str());
        }
    }
    names
}

/// "a string", "an array", ... for messages.
fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
