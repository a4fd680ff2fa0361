//! Policies as code on every call and its arguments, in Cedar: the Cedar schema brain derives
//! from the pinned bindings, strict validation rendered as brain's own diagnostics, the traps
//! Cedar accepts refused, the policy tests run, and the decision the gate takes — pure, no I/O,
//! failing closed.
//!
//! The request for a call: principal `Brain::Tenant::"acme"` (or `Brain::User::"<iss>|<sub>"`
//! in that tenant, for a user serve authenticated), action `Brain::Action::"tool:<binding>"` (in
//! the groups `all_tools` and `upstream:<id>`), resource `Brain::Upstream::"<id>"`, context
//! `{input, call: {via, session, approval: {granted}}}`, and for a binding on behalf of users
//! `upstream: {subject, actor}`.
//!
//! ```
//! use brain_config::policy::{Decision, Policies, PolicyRequest, Principal, Via};
//!
//! let dir = std::env::temp_dir().join(format!("brain-policy-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! std::fs::write(dir.join("refund.cedar"), r#"
//!     @id("refunds-up-to-100")
//!     permit(principal == Brain::Tenant::"acme", action == Brain::Action::"tool:refund", resource)
//!     when { context.input.amount > 0 && context.input.amount <= 100 };
//! "#).unwrap();
//! std::fs::write(dir.join("host.json"), r#"{"policies": {"files": ["*.cedar"]}, "tools": [{
//!     "name": "refund", "description": "Refund an order.", "url": "https://pay.example/mcp",
//!     "mcp_tool": "refund", "tenants": ["acme"], "input_schema": {"type": "object",
//!     "properties": {"amount": {"type": "integer"}}, "required": ["amount"]}}]}"#).unwrap();
//! let config = brain_config::load_file(&dir.join("host.json")).unwrap();
//! let policies = Policies::compile(&config).unwrap().unwrap();
//! let acme = Principal::Tenant("acme".into());
//! let decide = |amount: i64| policies.decide(&PolicyRequest {
//!     principal: &acme, binding: "refund", via: Via::Rust, session: "s1", granted: false,
//!     subject: None,
//!     arguments: &serde_json::json!({"amount": amount}),
//! });
//! assert_eq!(decide(40), Decision::Allow);
//! assert!(matches!(decide(400), Decision::Deny { .. }));
//! assert!(matches!(decide(-400), Decision::Deny { .. }));
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

pub(crate) mod files;
mod lint;
mod render;
mod request;
mod suite;
mod types;
mod upstream;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::str::FromStr;

use cedar_policy::{
    Authorizer, Context, Effect, Entities, EntityUid, Policy, PolicyId, PolicySet, Request,
    RestrictedExpression, Schema, SchemaFragment, ValidationMode, Validator,
};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

pub use crate::policy_config::{PolicyConfig, PolicySource, SourceKind};
pub use files::MAX_POLICY_FILE_BYTES;
pub use request::{Decision, PolicyRequest, Principal, UnreadablePrincipal, Via};
pub use upstream::upstream_id;

use crate::diagnostic::{Diagnostic, Rule};
use crate::model::{HostConfig, ToolBinding};
use render::{from_cedar, policy_diagnostic};
use request::principal_entity;
use types::{Enums, LeftOut, NAMESPACE, Shape, entity_uid};

/// The annotations a policy may carry.
const ANNOTATIONS: &[&str] = &["id", "reason", "approval"];

/// What brain knows of one binding for its policies.
#[derive(Debug)]
struct Tool {
    action: EntityUid,
    resource: EntityUid,
    input: Shape,
    left_out: Vec<LeftOut>,
    /// On behalf of users (`token_exchange`): the client brain exchanges as, the actor of
    /// `context.upstream`.
    actor: Option<String>,
}

/// Where a policy came from.
#[derive(Debug, Clone)]
struct Origin {
    source: usize,
    offset: Option<usize>,
}

/// A host config's policies, validated and ready to decide calls. Built by [`Policies::compile`]
/// (every load of a config with `policies` already did, and reported every error).
#[derive(Debug)]
pub struct Policies {
    set: PolicySet,
    /// The `permit`s reduced to their scope, and the `forbid`s that never read `context`: what
    /// `tools/list` may hide a tool by.
    listing: PolicySet,
    schema: Schema,
    schema_json: Value,
    tools: HashMap<String, Tool>,
    actions: Entities,
    authorizer: Authorizer,
    digest: String,
    /// The first policy annotated `@approval`, if any (else a denial needs no second pass).
    approval: Option<String>,
    /// Each `@approval` policy as a held call names it: its id, with its `@reason` (looked up
    /// here once: `PolicySet::annotation` parses its key each time).
    approvals: HashMap<PolicyId, String>,
    /// What the policies may not mean (`policy-look-alike`): they load, and `cargo xtask
    /// check` shows them.
    warnings: Vec<Diagnostic>,
}

impl Policies {
    /// Compiles a config's policies: `None` when it has none. The config must have been loaded
    /// ([`crate::load_file`] reads the files into `sources`); the same checks as at load time
    /// run again, so a config no build checked is never trusted.
    pub fn compile(config: &HostConfig) -> Result<Option<Policies>, Vec<Diagnostic>> {
        compile_in(config, Path::new(""))
    }

    /// [`Policies::compile`], naming the policy files in diagnostics as `dir` (the host config's
    /// directory) joined with their paths.
    pub fn compile_in(
        config: &HostConfig,
        dir: &Path,
    ) -> Result<Option<Policies>, Vec<Diagnostic>> {
        compile_in(config, dir)
    }

    /// The decision for one call: pure, deterministic, failing closed.
    pub fn decide(&self, request: &PolicyRequest<'_>) -> Decision {
        let deny = |reason: String| Decision::Deny {
            reason,
            approvable: false,
        };
        let Some(tool) = self.tools.get(request.binding) else {
            return deny(format!(
                "refused by policy: the binding {:?} is not in the policies' schema",
                request.binding
            ));
        };
        let outcome = match self.evaluate(tool, request) {
            Ok(outcome) => outcome,
            Err(reason) => return deny(reason),
        };
        if outcome.decision() == cedar_policy::Decision::Allow {
            return Decision::Allow;
        }
        // Pass B: the same call as if a person had approved it. The @approval permits that
        // would then decide it are named, with their @reason, for the caller and the approver.
        let approvers: Option<Vec<String>> = (self.approval.is_some() && !request.granted)
            .then(|| {
                self.evaluate(
                    tool,
                    &PolicyRequest {
                        granted: true,
                        ..*request
                    },
                )
            })
            .and_then(Result::ok)
            .filter(|r| r.decision() == cedar_policy::Decision::Allow)
            .map(|r| {
                let mut permits: Vec<String> = r
                    .diagnostics()
                    .reason()
                    .filter_map(|id| self.approvals.get(id).cloned())
                    .collect();
                permits.sort();
                permits
            });
        let approvable = approvers.is_some();
        let mut forbids: Vec<String> = outcome
            .diagnostics()
            .reason()
            .map(|id| match self.set.annotation(id, "reason") {
                Some(reason) => format!("forbid {:?} ({reason})", id.to_string()),
                None => format!("forbid {:?}", id.to_string()),
            })
            .collect();
        forbids.sort();
        let mut reason = if forbids.is_empty() {
            format!(
                "refused by policy: no policy permits {:?} for {}",
                request.binding, request.principal
            )
        } else {
            format!("refused by policy: {}", forbids.join(", "))
        };
        if let Some(permits) = &approvers {
            let which = match permits.as_slice() {
                [] => "an @approval policy".to_owned(),
                permits => format!("the @approval policy {}", permits.join(", ")),
            };
            reason += &format!("; {which} would permit it once a person approves this call");
        }
        Decision::Deny { reason, approvable }
    }

    /// The Cedar response, or why the call cannot be evaluated (an error denies).
    fn evaluate(
        &self,
        tool: &Tool,
        request: &PolicyRequest<'_>,
    ) -> Result<cedar_policy::Response, String> {
        let input = tool
            .input
            .lower(request.arguments, &mut String::new())
            .map_err(|why| {
                format!("refused by policy: the arguments cannot be given to the policies: {why}")
            })?;
        let call = RestrictedExpression::new_record([
            (
                "via".to_owned(),
                RestrictedExpression::new_string(request.via.as_str().to_owned()),
            ),
            (
                "session".to_owned(),
                RestrictedExpression::new_string(request.session.to_owned()),
            ),
            (
                "approval".to_owned(),
                RestrictedExpression::new_record([(
                    "granted".to_owned(),
                    RestrictedExpression::new_bool(request.granted),
                )])
                .map_err(|e| e.to_string())?,
            ),
        ])
        .map_err(|e| e.to_string())?;
        let mut pairs = vec![("input".to_owned(), input), ("call".to_owned(), call)];
        if let Some(actor) = &tool.actor {
            pairs.push(("upstream".to_owned(), request.upstream(actor)?));
        }
        let context = Context::from_pairs(pairs)
            .map_err(|e| format!("refused by policy: the call's context: {e}"))?;
        let (principal, user) = principal_entity(request.principal);
        let entities;
        let entities = match user {
            Some(user) => {
                entities = self
                    .actions
                    .clone()
                    .add_entities([user], None)
                    .map_err(|e| format!("refused by policy: the principal: {e}"))?;
                &entities
            }
            None => &self.actions,
        };
        let cedar_request = Request::new(
            principal,
            tool.action.clone(),
            tool.resource.clone(),
            context,
            Some(&self.schema),
        )
        .map_err(|e| format!("refused by policy: the request does not match the schema: {e}"))?;
        let response = self
            .authorizer
            .is_authorized(&cedar_request, &self.set, entities);
        if let Some(error) = response.diagnostics().errors().next() {
            return Err(format!(
                "refused by policy: {error}; a policy that cannot be evaluated denies"
            ));
        }
        Ok(response)
    }

    /// Whether `tools/list` shows `binding` to `principal`. Never reads `context`: the tool is
    /// hidden only when a `forbid` that never mentions `context` applies, or when no `permit`'s
    /// scope can match the principal and the action.
    pub fn visible(&self, principal: &Principal, binding: &str) -> bool {
        let Some(tool) = self.tools.get(binding) else {
            return false;
        };
        let (principal, user) = principal_entity(principal);
        let with_user;
        let entities = match user {
            Some(user) => match self.actions.clone().add_entities([user], None) {
                Ok(entities) => {
                    with_user = entities;
                    &with_user
                }
                Err(_) => return false,
            },
            None => &self.actions,
        };
        let Ok(request) = Request::new(
            principal,
            tool.action.clone(),
            tool.resource.clone(),
            Context::empty(),
            None,
        ) else {
            return false;
        };
        self.authorizer
            .is_authorized(&request, &self.listing, entities)
            .decision()
            == cedar_policy::Decision::Allow
    }

    /// The Cedar schema brain derived from the bindings, in Cedar's schema syntax (what
    /// `cargo xtask policy schema` writes, for editors and review).
    pub fn cedar_schema(&self) -> String {
        print_schema(&self.schema_json)
    }

    /// The id of a policy annotated `@approval`, when there is one: such a policy holds calls
    /// for a person's approval, which needs a journal to keep it.
    pub fn approval_policy(&self) -> Option<&str> {
        self.approval.as_deref()
    }

    /// SHA-256 (hex) of the policy files' paths and texts (RFC 8785 JSON): the policy set's
    /// identity.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// The warnings about the policies, in the files' order: a `forbid` that names one binding
    /// of an upstream tool another binding calls too ([`Rule::PolicyLookAlike`]).
    pub fn warnings(&self) -> &[Diagnostic] {
        &self.warnings
    }

    /// The ids of the policies, sorted.
    pub fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.set.policies().map(|p| p.id().to_string()).collect();
        ids.sort();
        ids
    }
}

/// The Cedar schema of `config`'s bindings, in Cedar's schema syntax, whether or not the config
/// has policies yet (what `cargo xtask policy schema` writes, to write the first ones against).
pub fn cedar_schema(config: &HostConfig) -> String {
    print_schema(&derive_schema(&config.tools).0)
}

fn print_schema(json: &Value) -> String {
    let fragment = SchemaFragment::from_json_value(json.clone())
        .unwrap_or_else(|e| panic!("brain derives a valid schema: {e}"));
    fragment
        .to_cedarschema()
        .unwrap_or_else(|e| panic!("the derived schema prints: {e}"))
}

/// The Cedar schema of the bindings (JSON format), and what brain knows of each binding.
fn derive_schema(bindings: &[ToolBinding]) -> (Value, HashMap<String, Tool>) {
    let mut enums = Enums::default();
    let mut tools = HashMap::new();
    let mut actions = Map::new();
    actions.insert("all_tools".to_owned(), json!({}));
    for binding in bindings {
        let upstream = upstream_id(binding);
        let group = format!("upstream:{upstream}");
        let (input, left_out) =
            types::input_shape(&binding.name, &binding.input_schema, &mut enums);
        actions.entry(group.clone()).or_insert_with(|| json!({}));
        let mut input_type = input.cedar_type();
        input_type["required"] = Value::Bool(true);
        let action = format!("tool:{}", binding.name);
        let mut context = json!({"type": "Record", "attributes": {
            "input": input_type,
            "call": {"type": "Record", "attributes": {
                "via": {"type": "String"},
                "session": {"type": "String"},
                "approval": {"type": "Record", "attributes": {
                    "granted": {"type": "Boolean"}
                }}
            }}
        }});
        let actor = (binding.auth.as_ref())
            .filter(|auth| auth.on_behalf_of_users())
            .map(|auth| auth.client_id.clone().unwrap_or_default());
        if actor.is_some() {
            context["attributes"]["upstream"] = json!({"type": "Record", "attributes": {
                "subject": {"type": "String"},
                "actor": {"type": "String"}
            }});
        }
        actions.insert(
            action.clone(),
            json!({
                "memberOf": [{"id": "all_tools"}, {"id": group}],
                "appliesTo": {
                    "principalTypes": ["Tenant", "User"],
                    "resourceTypes": ["Upstream"],
                    "context": context
                }
            }),
        );
        tools.insert(
            binding.name.clone(),
            Tool {
                action: entity_uid("Action", &action),
                resource: entity_uid("Upstream", &upstream),
                input,
                left_out,
                actor,
            },
        );
    }
    let mut entity_types = Map::new();
    entity_types.insert("Tenant".to_owned(), json!({}));
    entity_types.insert("User".to_owned(), json!({"memberOfTypes": ["Tenant"]}));
    entity_types.insert("Upstream".to_owned(), json!({}));
    for (name, values) in enums.types {
        entity_types.insert(name, json!({"enum": values}));
    }
    (
        json!({NAMESPACE: {"entityTypes": entity_types, "actions": actions}}),
        tools,
    )
}

/// [`Policies::compile`], with the policy files' paths shown relative to `dir`.
pub(crate) fn compile_in(
    config: &HostConfig,
    dir: &Path,
) -> Result<Option<Policies>, Vec<Diagnostic>> {
    let Some(policy_config) = &config.policies else {
        return Ok(None);
    };
    let sources = &policy_config.sources;
    if !sources.iter().any(|s| s.kind == SourceKind::Policies) {
        return Err(vec![Diagnostic::new(
            Rule::PolicyFiles,
            "/policies/files",
            "`policies` holds no policy file's text",
            "load the config with `brain_config::load_file` (it reads `policies.files`), or \
             name at least one Cedar file in `policies.files`",
        )]);
    }
    let (schema_json, tools) = derive_schema(&config.tools);
    let schema = match Schema::from_json_value(schema_json.clone()) {
        Ok(schema) => schema,
        Err(e) => {
            return Err(vec![Diagnostic::new(
                Rule::PolicyInvalid,
                "/policies",
                format!("the Cedar schema brain derived from the bindings is invalid: {e}"),
                "report this as a bug of brain, with the bindings' names and schemas",
            )]);
        }
    };

    let mut compiling = Compiling {
        sources,
        dir,
        tools: &tools,
        look_alikes: lint::look_alike_groups(&config.tools),
        set: PolicySet::new(),
        origins: BTreeMap::new(),
        explained: BTreeSet::new(),
        errors: Vec::new(),
        warnings: Vec::new(),
    };
    for (index, source) in sources.iter().enumerate() {
        if source.kind == SourceKind::Policies {
            compiling.read(index);
        }
    }
    compiling.validate(&schema);

    let Compiling {
        set,
        mut errors,
        warnings,
        ..
    } = compiling;
    let policies = match build(set, schema, schema_json, tools, sources) {
        Ok(policies) => Policies {
            warnings,
            ..policies
        },
        Err(e) => {
            errors.push(Diagnostic::new(
                Rule::PolicyInvalid,
                "/policies",
                e,
                "report this",
            ));
            return Err(errors);
        }
    };
    let approvers = config.approvals.as_ref().map_or(0, |a| a.approvers.len());
    if let (Some(policy), 0) = (&policies.approval, approvers) {
        errors.push(Diagnostic::new(
            Rule::ApprovalWithoutApprover,
            "/policies",
            format!(
                "the @approval policy {policy:?} holds calls for a person's approval, and \
                 `approvals` names no approver"
            ),
            "add `\"approvals\": {\"approvers\": [{\"name\": \"ops\", \"tenants\": \
             [\"TENANT\"], \"token_sha256\": \"<hex>\"}]}` (the SHA-256 of the approver's \
             token), or remove `@approval`",
        ));
    }
    if errors.is_empty() {
        suite::run(
            &|request| policies.decide(request),
            config,
            dir,
            &mut errors,
        );
    }
    if errors.is_empty() {
        Ok(Some(policies))
    } else {
        Err(errors)
    }
}

/// The policy set as [`compile_in`] builds it from the policy files, with what it found wrong.
struct Compiling<'a> {
    sources: &'a [PolicySource],
    dir: &'a Path,
    tools: &'a HashMap<String, Tool>,
    look_alikes: Vec<lint::LookAlikes<'a>>,
    set: PolicySet,
    /// Where each policy id was first written.
    origins: BTreeMap<String, Origin>,
    /// The policies whose validation errors a trap already explains (an argument left out).
    explained: BTreeSet<String>,
    errors: Vec<Diagnostic>,
    warnings: Vec<Diagnostic>,
}

impl Compiling<'_> {
    /// Policy file `index`'s path as diagnostics name it.
    fn display(&self, index: usize) -> String {
        self.dir
            .join(&self.sources[index].path)
            .display()
            .to_string()
    }

    /// Parses policy file `index` (no templates) and adds its policies in the order written.
    fn read(&mut self, index: usize) {
        let source = &self.sources[index];
        let file = self.display(index);
        let parsed = match PolicySet::from_str(&source.text) {
            Ok(parsed) => parsed,
            Err(parse_errors) => {
                for error in parse_errors.iter() {
                    self.errors.push(from_cedar(
                        Rule::PolicySyntax,
                        error,
                        &file,
                        &source.text,
                        None,
                        None,
                        "fix the Cedar syntax here (https://docs.cedarpolicy.com/policies/syntax-policy.html)",
                    ));
                }
                return;
            }
        };
        if parsed.templates().next().is_some() {
            self.errors.push(policy_diagnostic(
                Rule::PolicyInvalid,
                &file,
                &source.text,
                None,
                None,
                "the file holds a template (`?principal` or `?resource`)".to_owned(),
                "write static policies: brain links no templates".to_owned(),
            ));
        }
        let mut policies: Vec<(Option<usize>, &Policy)> = parsed
            .policies()
            .map(|p| {
                let offset = p.to_cedar().and_then(|text| source.text.find(&text));
                (offset, p)
            })
            .collect();
        policies.sort_by_key(|(offset, _)| *offset);
        for (offset, policy) in policies {
            self.add(index, &file, offset, policy);
        }
    }

    /// Adds `policy` (of policy file `index`, named `file`, at `offset`) to the set under its
    /// `@id`, once its annotations, its id and the traps Cedar accepts are checked.
    fn add(&mut self, index: usize, file: &str, offset: Option<usize>, policy: &Policy) {
        let diagnostic = |rule, id: Option<&str>, message: String, help: &str| {
            policy_diagnostic(
                rule,
                file,
                &self.sources[index].text,
                offset,
                id,
                message,
                help.to_owned(),
            )
        };
        for (key, _) in policy.annotations() {
            if !ANNOTATIONS.contains(&key) {
                self.errors.push(diagnostic(
                    Rule::PolicyAnnotation,
                    policy.annotation("id"),
                    format!("brain does not know the annotation `@{key}`"),
                    "use only `@id(\"...\")`, `@reason(\"...\")` and `@approval`",
                ));
            }
        }
        let id = match policy.annotation("id") {
            Some(id) if !id.trim().is_empty() => id.to_owned(),
            _ => {
                self.errors.push(diagnostic(
                    Rule::PolicyAnnotation,
                    None,
                    "this policy has no `@id`".to_owned(),
                    "put `@id(\"refund-limit\")` (a name unique among the policies) above it: \
                         a refusal names the policies that decided it",
                ));
                return;
            }
        };
        if let Some(first) = self.origins.get(&id) {
            let at = first
                .offset
                .map(|o| format!(":{}", render::location(&self.sources[first.source].text, o)))
                .unwrap_or_default();
            self.errors.push(diagnostic(
                Rule::PolicyAnnotation,
                Some(&id),
                format!(
                    "the id is also the id of a policy at {}{at}",
                    self.display(first.source)
                ),
                "give every policy its own `@id`",
            ));
            return;
        }
        lint::policy(policy, &id, &mut |message, help| {
            self.errors
                .push(diagnostic(Rule::PolicyTrap, Some(&id), message, help));
        });
        for (message, help) in lint::look_alikes(policy, &self.look_alikes) {
            self.warnings
                .push(diagnostic(Rule::PolicyLookAlike, Some(&id), message, &help));
        }
        let read = policy
            .to_json()
            .map(|est| lint::input_pointers(&est))
            .unwrap_or_default();
        for (name, left) in self
            .tools
            .iter()
            .flat_map(|(n, t)| t.left_out.iter().map(move |l| (n, l)))
        {
            if read.contains(&left.pointer) {
                self.explained.insert(id.clone());
                self.errors.push(diagnostic(
                        Rule::PolicyTrap,
                        Some(&id),
                        format!(
                            "reads the argument `{}` of {name:?}, which the Cedar schema leaves out: {}",
                            left.pointer, left.why
                        ),
                        "a policy cannot test an argument without a faithful Cedar type; narrow the \
                         tool's input schema (an integer, a string enum, a record with \
                         `properties`), or decide on other arguments",
                    ));
            }
        }
        if let Err(e) = self.set.add(policy.new_id(PolicyId::new(&id))) {
            self.errors.push(diagnostic(
                Rule::PolicyInvalid,
                Some(&id),
                e.to_string(),
                "report this",
            ));
        }
        self.origins.insert(
            id,
            Origin {
                source: index,
                offset,
            },
        );
    }

    /// Validates the set strictly against the bindings' `schema`: each error and warning at the
    /// policy it is about (none for a policy a trap already explains).
    fn validate(&mut self, schema: &Schema) {
        let validation = Validator::new(schema.clone()).validate(&self.set, ValidationMode::Strict);
        let found = validation
            .validation_errors()
            .map(|e| (e.policy_id().to_string(), e as &dyn miette::Diagnostic))
            .chain(
                validation
                    .validation_warnings()
                    .map(|w| (w.policy_id().to_string(), w as &dyn miette::Diagnostic)),
            );
        for (id, diagnostic) in found {
            let Some(origin) = self
                .origins
                .get(&id)
                .filter(|_| !self.explained.contains(&id))
            else {
                continue;
            };
            let source = &self.sources[origin.source];
            let rendered = from_cedar(
                Rule::PolicyInvalid,
                diagnostic,
                &self.display(origin.source),
                &source.text,
                Some(&id),
                origin.offset,
                "fix the policy to match the bindings' schema (`cargo xtask policy schema` writes it)",
            );
            self.errors.push(rendered);
        }
    }
}

fn build(
    set: PolicySet,
    schema: Schema,
    schema_json: Value,
    tools: HashMap<String, Tool>,
    sources: &[PolicySource],
) -> Result<Policies, String> {
    let mut listing = PolicySet::new();
    for policy in set.policies() {
        let mut est = policy.to_json().map_err(|e| e.to_string())?;
        match policy.effect() {
            Effect::Permit => {
                est["conditions"] = json!([]);
                let scope_only =
                    Policy::from_json(Some(policy.id().clone()), est).map_err(|e| e.to_string())?;
                listing.add(scope_only).map_err(|e| e.to_string())?;
            }
            Effect::Forbid if !lint::mentions_context(&est["conditions"]) => {
                listing.add(policy.clone()).map_err(|e| e.to_string())?;
            }
            Effect::Forbid => {}
        }
    }
    let actions = schema.action_entities().map_err(|e| e.to_string())?;
    let mut files: Vec<(&str, &str)> = sources
        .iter()
        .filter(|s| s.kind == SourceKind::Policies)
        .map(|s| (s.path.as_str(), s.text.as_str()))
        .collect();
    files.sort();
    let canonical = serde_jcs::to_vec(&files).map_err(|e| e.to_string())?;
    let digest = Sha256::digest(&canonical)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let held = set
        .policies()
        .find(|policy| policy.annotation("approval").is_some());
    let approval = held.map(|policy| policy.id().to_string());
    let approvals = set
        .policies()
        .filter(|policy| policy.annotation("approval").is_some())
        .map(|policy| {
            let named = match policy.annotation("reason") {
                Some(reason) => format!("{:?} ({reason})", policy.id().to_string()),
                None => format!("{:?}", policy.id().to_string()),
            };
            (policy.id().clone(), named)
        })
        .collect();
    Ok(Policies {
        approval,
        approvals,
        set,
        listing,
        schema,
        schema_json,
        tools,
        actions,
        authorizer: Authorizer::new(),
        digest,
        warnings: Vec::new(),
    })
}
