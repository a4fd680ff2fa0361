//! A binding's `input_schema` as Cedar types, and its arguments as Cedar values.
//!
//! Only what has a faithful Cedar type is mapped: integer → Long, boolean → Bool, string →
//! String (a string `enum` → an enum entity type, `date-time` → datetime, `ipv4`/`ipv6` →
//! ipaddr), array → Set, object with `properties` → record. Everything else is left out of the
//! schema, with the reason, and its arguments are dropped before the context is built: a schema
//! is never loosened into a type that compares wrongly.

use std::collections::BTreeMap;
use std::str::FromStr;

use cedar_policy::{EntityId, EntityTypeName, EntityUid, RestrictedExpression};
use serde_json::{Map, Value, json};

/// The Cedar namespace of every type and action brain declares.
pub(crate) const NAMESPACE: &str = "Brain";

/// A Cedar type an argument maps to.
#[derive(Debug, Clone)]
pub(crate) enum Shape {
    Long,
    Bool,
    String,
    /// A string `enum`: an entity of this enum entity type (its name in [`NAMESPACE`]).
    Enum(String),
    DateTime,
    Ip,
    Set(Box<Shape>),
    /// The properties with a Cedar type, each with whether it is required.
    Record(BTreeMap<String, (Shape, bool)>),
}

/// An argument (or a part of one) the schema leaves out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LeftOut {
    /// JSON pointer inside the arguments (`/options/size`).
    pub(crate) pointer: String,
    /// Why it has no faithful Cedar type.
    pub(crate) why: String,
}

/// The enum entity types of all the bindings, by name, with their values.
#[derive(Debug, Default)]
pub(crate) struct Enums {
    pub(crate) types: BTreeMap<String, Vec<String>>,
}

impl Enums {
    /// A new enum entity type for `binding`'s argument at `path`: `<binding>_<path>`, each
    /// character Cedar cannot spell in an identifier written `_`, a digit first prefixed with
    /// `_`, `_2`, `_3`, ... appended where two would collide (in config order, so the names are
    /// stable).
    fn add(&mut self, binding: &str, path: &[String], values: Vec<String>) -> String {
        let mut base = std::iter::once(binding)
            .chain(path.iter().map(String::as_str))
            .map(|part| {
                part.chars()
                    .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("_");
        if base.starts_with(|c: char| c.is_ascii_digit()) || base.is_empty() {
            base.insert(0, '_');
        }
        let mut name = base.clone();
        let mut n = 1;
        while self.types.contains_key(&name) || ["Tenant", "User", "Upstream"].contains(&&*name) {
            n += 1;
            name = format!("{base}_{n}");
        }
        self.types.insert(name.clone(), values);
        name
    }
}

/// The Cedar shape of a binding's input schema (always a record; a root without `properties`
/// is the empty record), and what it leaves out.
pub(crate) fn input_shape(
    binding: &str,
    schema: &Value,
    enums: &mut Enums,
) -> (Shape, Vec<LeftOut>) {
    let mut left_out = Vec::new();
    let shape = match schema.get("properties") {
        Some(_) => shape_of(binding, schema, &mut Vec::new(), enums, &mut left_out),
        None => Some(Shape::Record(BTreeMap::new())),
    };
    (shape.unwrap_or(Shape::Record(BTreeMap::new())), left_out)
}

fn shape_of(
    binding: &str,
    schema: &Value,
    path: &mut Vec<String>,
    enums: &mut Enums,
    left_out: &mut Vec<LeftOut>,
) -> Option<Shape> {
    let mut leave = |why: String| {
        left_out.push(LeftOut {
            pointer: pointer(path),
            why,
        });
        None
    };
    let Some(object) = schema.as_object() else {
        return leave("its schema accepts any value".to_owned());
    };
    for keyword in ["anyOf", "oneOf", "allOf", "not", "$ref", "if"] {
        if object.contains_key(keyword) {
            return leave(format!("`{keyword}` has no faithful Cedar type"));
        }
    }
    let ty = match object.get("type") {
        Some(Value::String(ty)) => ty.as_str(),
        Some(Value::Array(_)) => {
            return leave(
                "a list of types (such as `[\"string\", \"null\"]`) has no faithful Cedar type"
                    .to_owned(),
            );
        }
        Some(_) => return leave("its `type` is not a string".to_owned()),
        None if object.contains_key("properties") => "object",
        None if object.get("enum").is_some() => "string",
        None => return leave("it has no `type`".to_owned()),
    };
    match ty {
        "integer" => Some(Shape::Long),
        "boolean" => Some(Shape::Bool),
        "number" => leave(
            "`number` may hold fractions and values beyond Cedar's Long (64-bit integers)"
                .to_owned(),
        ),
        "null" => leave("`null` has no Cedar type".to_owned()),
        "string" => match string_shape(binding, object, path, enums) {
            Ok(shape) => Some(shape),
            Err(why) => leave(why),
        },
        "array" => match object.get("items") {
            Some(items @ Value::Object(_)) if !object.contains_key("prefixItems") => {
                path.push("items".to_owned());
                let element = shape_of(binding, items, path, enums, left_out);
                path.pop();
                element.map(|element| Shape::Set(Box::new(element)))
            }
            Some(Value::Object(_)) | Some(Value::Array(_)) => {
                leave("a tuple (`prefixItems`, or `items` as a list) has no Cedar type".to_owned())
            }
            _ => leave("an array without `items` holds values of any type".to_owned()),
        },
        "object" => {
            let Some(properties) = object.get("properties").and_then(Value::as_object) else {
                return leave(
                    "a free-form object (no `properties`) has no Cedar record type".to_owned(),
                );
            };
            let required: Vec<&str> = object
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut record = BTreeMap::new();
            for (name, property) in properties {
                path.push(name.clone());
                if let Some(shape) = shape_of(binding, property, path, enums, left_out) {
                    record.insert(name.clone(), (shape, required.contains(&name.as_str())));
                }
                path.pop();
            }
            Some(Shape::Record(record))
        }
        other => leave(format!("`type: {other}` is not a JSON Schema type")),
    }
}

/// The Cedar type of a string property: an enum of its values (named after `binding` and
/// `path`), a datetime, an IP address or a string; `Err` says why it has none.
fn string_shape(
    binding: &str,
    object: &Map<String, Value>,
    path: &[String],
    enums: &mut Enums,
) -> Result<Shape, String> {
    if let Some(values) = object.get("enum") {
        let strings: Option<Vec<String>> = values
            .as_array()
            .map(|values| {
                values
                    .iter()
                    .map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or(None);
        return match strings {
            Some(values) if !values.is_empty() => Ok(Shape::Enum(enums.add(binding, path, values))),
            _ => Err("an `enum` that is not a list of strings".to_owned()),
        };
    }
    Ok(match object.get("format").and_then(Value::as_str) {
        Some("date-time") => Shape::DateTime,
        Some("ipv4" | "ipv6") => Shape::Ip,
        _ => Shape::String,
    })
}

/// The uid of entity `id` of type `ty` in brain's namespace.
pub(super) fn entity_uid(ty: &str, id: &str) -> EntityUid {
    EntityUid::from_type_name_and_id(
        EntityTypeName::from_str(&format!("{NAMESPACE}::{ty}")).expect("a Cedar name"),
        EntityId::new(id),
    )
}

fn pointer(path: &[String]) -> String {
    path.iter()
        .map(|p| format!("/{}", p.replace('~', "~0").replace('/', "~1")))
        .collect()
}

impl Shape {
    /// The type in Cedar's JSON schema format.
    pub(crate) fn cedar_type(&self) -> Value {
        match self {
            Shape::Long => json!({"type": "Long"}),
            Shape::Bool => json!({"type": "Boolean"}),
            Shape::String => json!({"type": "String"}),
            Shape::Enum(name) => json!({"type": "Entity", "name": format!("{NAMESPACE}::{name}")}),
            Shape::DateTime => json!({"type": "Extension", "name": "datetime"}),
            Shape::Ip => json!({"type": "Extension", "name": "ipaddr"}),
            Shape::Set(element) => json!({"type": "Set", "element": element.cedar_type()}),
            Shape::Record(fields) => {
                let attributes: Map<String, Value> = fields
                    .iter()
                    .map(|(name, (shape, required))| {
                        let mut ty = shape.cedar_type();
                        ty["required"] = Value::Bool(*required);
                        (name.clone(), ty)
                    })
                    .collect();
                json!({"type": "Record", "attributes": attributes})
            }
        }
    }

    /// `value` (valid for the binding's schema) as a Cedar value, the arguments the schema leaves
    /// out dropped. An error says where and why a value cannot be given to the policies.
    pub(crate) fn lower(
        &self,
        value: &Value,
        at: &mut String,
    ) -> Result<RestrictedExpression, String> {
        match (self, value) {
            (Shape::Long, Value::Number(n)) => n
                .as_i64()
                .or_else(|| {
                    n.as_f64()
                        .filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18)
                        .map(|f| f as i64)
                })
                .map(RestrictedExpression::new_long)
                .ok_or_else(|| format!("`{at}` is {n}, outside Cedar's Long (64-bit integers)")),
            (Shape::Bool, Value::Bool(b)) => Ok(RestrictedExpression::new_bool(*b)),
            (Shape::String, Value::String(s)) => Ok(RestrictedExpression::new_string(s.clone())),
            (Shape::Enum(name), Value::String(s)) => {
                let ty: EntityTypeName = format!("{NAMESPACE}::{name}")
                    .parse()
                    .map_err(|_| format!("`{at}`: enum type {name} is not a Cedar name"))?;
                Ok(RestrictedExpression::new_entity_uid(
                    EntityUid::from_type_name_and_id(ty, EntityId::new(s)),
                ))
            }
            (Shape::DateTime, Value::String(s)) => datetime(s)
                .map(RestrictedExpression::new_datetime)
                .map_err(|why| format!("`{at}` is {s:?}: {why}")),
            (Shape::Ip, Value::String(s)) => Ok(RestrictedExpression::new_ip(s)),
            (Shape::Set(element), Value::Array(items)) => {
                let mut values = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    let len = at.len();
                    at.push_str(&format!("/{i}"));
                    values.push(element.lower(item, at)?);
                    at.truncate(len);
                }
                Ok(RestrictedExpression::new_set(values))
            }
            (Shape::Record(fields), Value::Object(object)) => {
                let mut pairs = Vec::with_capacity(fields.len());
                for (name, (shape, _)) in fields {
                    if let Some(value) = object.get(name) {
                        let len = at.len();
                        at.push('/');
                        at.push_str(&name.replace('~', "~0").replace('/', "~1"));
                        pairs.push((name.clone(), shape.lower(value, at)?));
                        at.truncate(len);
                    }
                }
                RestrictedExpression::new_record(pairs).map_err(|e| format!("`{at}`: {e}"))
            }
            (_, value) => Err(format!(
                "`{at}` is {value}, which its schema does not allow (validate the arguments first)"
            )),
        }
    }
}

/// An RFC 3339 `date-time` in Cedar's form: `YYYY-MM-DDThh:mm:ss[.SSS](Z|(+|-)hhmm)`. The offset
/// loses its colon, a fraction of 1–3 digits is padded to 3; more than 3 digits is an error
/// (Cedar's datetime holds milliseconds, and brain never rounds).
pub(crate) fn datetime(text: &str) -> Result<String, String> {
    let bad = || "not an RFC 3339 date-time (`2026-12-04T10:00:00Z`)".to_owned();
    let (date, rest) = text.split_at_checked(10).ok_or_else(bad)?;
    let rest = rest.strip_prefix(['T', 't']).ok_or_else(bad)?;
    let (time, rest) = rest.split_at_checked(8).ok_or_else(bad)?;
    let (fraction, zone) = match rest.strip_prefix('.') {
        Some(rest) => {
            let digits = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            (&rest[..digits], &rest[digits..])
        }
        None => ("", rest),
    };
    if fraction.len() > 3 {
        return Err(format!(
            "{} fractional digits: Cedar's datetime holds milliseconds (3 digits), and brain \
             does not round",
            fraction.len()
        ));
    }
    if rest.starts_with('.') && fraction.is_empty() {
        return Err(bad());
    }
    let zone = match zone {
        "Z" | "z" => "Z".to_owned(),
        z if z.len() == 6 && (z.starts_with('+') || z.starts_with('-')) && &z[3..4] == ":" => {
            format!("{}{}", &z[..3], &z[4..])
        }
        _ => return Err(bad()),
    };
    let fraction = if fraction.is_empty() {
        String::new()
    } else {
        format!(".{fraction:0<3}")
    };
    Ok(format!("{date}T{time}{fraction}{zone}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_times_take_cedars_form_and_are_never_rounded() {
        assert_eq!(
            datetime("2026-12-04T10:00:00Z").unwrap(),
            "2026-12-04T10:00:00Z"
        );
        assert_eq!(
            datetime("2026-12-04t10:00:00.5z").unwrap(),
            "2026-12-04T10:00:00.500Z"
        );
        assert_eq!(
            datetime("2026-12-04T10:00:00.123+02:00").unwrap(),
            "2026-12-04T10:00:00.123+0200"
        );
        assert!(
            datetime("2026-12-04T10:00:00.1234Z")
                .unwrap_err()
                .contains("4 fractional digits")
        );
        assert!(datetime("2026-12-04").is_err());
        assert!(datetime("2026-12-04T10:00:00+0200").is_err());
    }

    #[test]
    fn only_faithful_types_are_mapped() {
        let mut enums = Enums::default();
        let schema = json!({"type": "object", "properties": {
            "amount": {"type": "integer"}, "ratio": {"type": "number"},
            "currency": {"type": "string", "enum": ["usd", "eur"]},
            "when": {"type": "string", "format": "date-time"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "free": {"type": "object"},
            "maybe": {"type": ["string", "null"]}
        }, "required": ["amount"]});
        let (shape, left_out) = input_shape("refund-it", &schema, &mut enums);
        let Shape::Record(fields) = shape else {
            panic!()
        };
        assert_eq!(
            fields.keys().collect::<Vec<_>>(),
            ["amount", "currency", "tags", "when"]
        );
        assert!(fields["amount"].1 && !fields["currency"].1);
        assert_eq!(
            left_out
                .iter()
                .map(|l| l.pointer.as_str())
                .collect::<Vec<_>>(),
            ["/ratio", "/either", "/free", "/maybe"],
            "in the schema's order"
        );
        assert_eq!(
            enums.types.keys().collect::<Vec<_>>(),
            ["refund_it_currency"]
        );
    }
}
