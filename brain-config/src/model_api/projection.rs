//! What every projection shares: its notes, one tool's result, why a tool is not strict, and
//! the helpers that write keywords into the description and build objects. A leaf: the API
//! modules and the module root use it, it uses none of them.

use serde_json::{Map, Value};

use super::schema::{Unresolved, owned, self_contained};

/// What a projection did to one tool beyond copying it, or why it did not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// The binding's name.
    pub tool: String,
    /// What kind of note.
    pub kind: NoteKind,
    /// Where, as a JSON pointer into the binding's `input_schema` (empty: the whole tool).
    pub pointer: String,
    /// What, and why.
    pub message: String,
}

/// The kinds of [`Note`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum NoteKind {
    /// The tool is not strict: making it strict would not be faithful (or a limit is passed).
    NotStrict,
    /// A lossless repair (e.g. `items: {}` on an array without `items`).
    Repaired,
    /// A keyword the API refuses and the gate enforces was dropped: brain still validates every
    /// call against the original schema before any I/O.
    Dropped,
    /// A keyword the gate does not enforce (`default`, `examples`, a `format`) was moved into
    /// the description.
    Moved,
    /// The API cannot take the tool: it is left out of the definitions.
    Rejected,
}

impl NoteKind {
    /// A word for messages: `not strict`, `repaired`, `dropped`, `moved`, `left out`.
    pub fn as_str(self) -> &'static str {
        match self {
            NoteKind::NotStrict => "not strict",
            NoteKind::Repaired => "repaired",
            NoteKind::Dropped => "dropped",
            NoteKind::Moved => "moved",
            NoteKind::Rejected => "left out",
        }
    }
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.tool, self.kind.as_str())?;
        if !self.pointer.is_empty() {
            write!(f, " at {}", self.pointer)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// One tool projected for one API.
#[derive(Debug, Clone, PartialEq)]
pub struct Projection {
    /// The binding's name (the name the model sees).
    pub name: String,
    /// The tool definition, exactly as the API's `tools` takes it; `None` when the API cannot
    /// take the tool.
    pub definition: Option<Value>,
    /// Whether the definition is strict (the model's arguments constrained to the schema).
    pub strict: bool,
    /// Everything the projection changed, and why it is not strict.
    pub notes: Vec<Note>,
}

/// Keywords nothing enforces (the gate validates with them as annotations): a projection that
/// cannot pass them on moves them into the description.
pub(crate) const ANNOTATIONS: &[&str] =
    &["default", "examples", "deprecated", "readOnly", "writeOnly"];

/// Appends `moved` keywords to `schema`'s description as `(key: value; …)`, with a note each.
pub(crate) fn describe_moved(
    schema: &mut Map<String, Value>,
    moved: &[(String, Value)],
    pointer: &str,
    notes: &mut Notes<'_>,
) {
    if moved.is_empty() {
        return;
    }
    let said: Vec<String> = moved.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    let description = match schema.get("description").and_then(Value::as_str) {
        Some(description) if !description.is_empty() => {
            format!("{description} ({})", said.join("; "))
        }
        _ => format!("({})", said.join("; ")),
    };
    schema.insert("description".into(), Value::String(description));
    for (key, _) in moved {
        notes.push(
            NoteKind::Moved,
            &format!("{pointer}/{}", crate::source::escape_token(key)),
            format!("`{key}` moved into the description (nothing enforces it)"),
        );
    }
}

/// The notes of one tool's projection, as it goes.
pub(crate) struct Notes<'a> {
    pub(crate) tool: &'a str,
    pub(crate) notes: Vec<Note>,
}

impl Notes<'_> {
    pub(crate) fn push(&mut self, kind: NoteKind, pointer: &str, message: impl Into<String>) {
        self.notes.push(Note {
            tool: self.tool.to_owned(),
            kind,
            pointer: pointer.to_owned(),
            message: message.into(),
        });
    }
}

/// A JSON object of `fields`, moved in (`json!` would serialize each value again).
pub(crate) fn object<'a>(fields: impl IntoIterator<Item = (&'a str, Value)>) -> Value {
    Value::Object(
        fields
            .into_iter()
            .map(|(key, value)| (key.to_owned(), value))
            .collect(),
    )
}

/// Why a tool cannot be strict: where, and what.
pub(crate) struct NotStrict {
    pub(crate) pointer: String,
    pub(crate) why: String,
}

/// A tool's schema for a strict-mode API: what `attempt` makes of it (its changes noted), when
/// strict mode is `allowed` and the schema can be made self-contained; otherwise the schema
/// itself (self-contained where it can be), passed through `fallback`, with a `not strict` note.
pub(crate) fn strict_or_not(
    input_schema: &Value,
    allowed: Result<(), &str>,
    notes: &mut Notes<'_>,
    attempt: impl FnOnce(&Value, &mut Notes<'_>) -> Result<Value, NotStrict>,
    fallback: impl FnOnce(&mut Value, &mut Notes<'_>),
) -> (Value, bool) {
    let inlined = self_contained(input_schema);
    let mut changes = Notes {
        tool: notes.tool,
        notes: Vec::new(),
    };
    let strict = match (&inlined, allowed) {
        (_, Err(why)) => Err(not_strict("", why)),
        (Ok(schema), Ok(())) => attempt(schema, &mut changes),
        (Err(Unresolved { pointer, why }), Ok(())) => Err(not_strict(pointer, why.clone())),
    };
    match strict {
        Ok(schema) => {
            notes.notes.extend(changes.notes);
            (schema, true)
        }
        Err(NotStrict { pointer, why }) => {
            notes.push(NoteKind::NotStrict, &pointer, why);
            let mut schema = inlined.map_or_else(|_| input_schema.clone(), owned);
            fallback(&mut schema, notes);
            (schema, false)
        }
    }
}

/// Why the schema at `pointer` cannot be strict.
pub(crate) fn not_strict(pointer: &str, why: impl Into<String>) -> NotStrict {
    NotStrict {
        pointer: pointer.to_owned(),
        why: why.into(),
    }
}

/// A union's key and branches, when the schema is one: `anyOf`, else `oneOf`, which strict
/// modes write as `anyOf` (noted: the gate still requires exactly one branch).
pub(crate) fn union<'a>(
    map: &'a Map<String, Value>,
    pointer: &str,
    notes: &mut Notes<'_>,
) -> Result<Option<(&'static str, &'a [Value])>, NotStrict> {
    let Some((key, union)) = map
        .get("anyOf")
        .map(|union| ("anyOf", union))
        .or_else(|| map.get("oneOf").map(|union| ("oneOf", union)))
    else {
        return Ok(None);
    };
    let Value::Array(branches) = union else {
        return Err(not_strict(pointer, format!("`{key}` is not an array")));
    };
    if key == "oneOf" {
        notes.push(
            NoteKind::Dropped,
            &format!("{pointer}/oneOf"),
            "`oneOf` became `anyOf` (the gate still requires exactly one branch)",
        );
    }
    Ok(Some((key, branches)))
}
