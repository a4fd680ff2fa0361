//! The client for the official MCP conformance suite (`conformance client --command
//! brain-conformance-client`): the scenario server's URL is the last argument, the scenario in
//! `MCP_CONFORMANCE_SCENARIO`. It discovers the server's tools and calls each through
//! brain-runtime as the harness would, with arguments sampled from its input schema; events go
//! to stdout as JSON Lines.
//!
//! Authorization scenarios (`auth/*`): the context's credentials (client id and secret, private
//! key, IdP tokens, workload JWT) become the binding's `auth`, as a deployment would write it, and
//! the authorization code flow runs headlessly against the suite's auto-approving server (the
//! authorization URL is requested and its redirect read, not followed: `tests::oauth::Browser`).

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;
use std::time::Duration;

use brain_config::HostConfig;
use brain_config::discovery::{BindingSettings, binding_from_tool};
use std::collections::BTreeMap;
use std::sync::Arc;

use brain_config::{Auth, Grant};
use brain_runtime::auth::{MemoryTokenStore, TokenStore, UserAgent};
use brain_runtime::discover::{DiscoverAuth, DiscoverOptions, discover};
use brain_runtime::{CallRequest, Runtime, Scope};
use futures_util::StreamExt;
use serde_json::{Map, Value, json};

#[tokio::main]
async fn main() -> ExitCode {
    let Some(url) = std::env::args().skip(1).last() else {
        eprintln!("usage: brain-conformance-client URL");
        return ExitCode::from(2);
    };
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    eprintln!("scenario {scenario:?} at {url}");
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|context| serde_json::from_str(&context).ok())
        .unwrap_or_default();
    let auth = scenario
        .starts_with("auth/")
        .then(|| auth_for(&scenario, &context));
    let store: Arc<dyn TokenStore> = Arc::new(MemoryTokenStore::default());
    // The suite's authorization server approves at once and redirects: the browser reads the
    // redirect, and never requests it.
    let agent: Arc<dyn UserAgent> = Arc::new(tests::oauth::Browser);
    let options = DiscoverOptions {
        url: url.clone(),
        token: None,
        auth: auth.clone().map(|(config, secrets)| DiscoverAuth {
            config,
            secrets,
            tenant: "conformance".into(),
            store: Some(store.clone()),
            agent: Some(agent.clone()),
            subject: None,
        }),
        timeout: Duration::from_secs(20),
        ca_file: None,
    };
    let discovery = match discover(&options).await {
        Ok(discovery) => discovery,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "discovered {} tools at protocol revision {}",
        discovery.tools.len(),
        discovery.protocol_version
    );
    let settings = BindingSettings {
        server: brain_config::discovery::Server::Url(url),
        token_env: None,
        tenants: vec!["conformance".into()],
        timeout_seconds: 20,
        max_output_bytes: brain_config::DEFAULT_MAX_OUTPUT_BYTES,
        protocol_version: discovery.protocol_version.clone(),
        // The spec's rule, except where a scenario is about continuing after a declined
        // elicitation: there the binding opts in, as a deployment would.
        on_input_request: (scenario == "sep-2322-client-request-state")
            .then_some(brain_config::OnInputRequest::Decline),
        auth: auth.as_ref().map(|(config, _)| config.clone()),
        server_tasks: discovery.server_tasks,
        ca_file: None,
    };
    let mut bindings = Vec::new();
    for tool in &discovery.tools {
        let mut binding = binding_from_tool(tool, &settings);
        binding.name = model_name(&binding.name, bindings.len());
        if binding.description.trim().is_empty() {
            binding.description = format!("{} (no description)", binding.name);
        }
        bindings.push(binding);
    }
    // A tool whose binding breaks a rule (an invalid `x-mcp-header`, a remote `$ref`, ...) is
    // excluded, as `cargo xtask check` would refuse it.
    let errors = brain_config::validate(&HostConfig {
        serve: None,
        tenant_limits: None,
        policies: None,
        approvals: None,
        audit: None,
        model_apis: None,
        schema: None,
        tools: bindings.clone(),
    });
    let mut rejected = std::collections::BTreeSet::new();
    for error in &errors {
        eprintln!("excluded: {}", error.render("discovered tools"));
        if let Some(index) = error
            .pointer
            .strip_prefix("/tools/")
            .and_then(|rest| rest.split('/').next())
            .and_then(|index| index.parse::<usize>().ok())
        {
            rejected.insert(index);
        }
    }
    let config = HostConfig {
        serve: None,
        tenant_limits: None,
        policies: None,
        approvals: None,
        audit: None,
        model_apis: None,
        schema: None,
        tools: bindings
            .into_iter()
            .enumerate()
            .filter(|(index, _)| !rejected.contains(index))
            .map(|(_, binding)| binding)
            .collect(),
    };
    let secrets = auth.map(|(_, secrets)| secrets).unwrap_or_default();
    let runtime = match Runtime::builder(&config)
        .env(|var| secrets.get(var).cloned())
        .token_store(store)
        .user_agent(agent)
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    for (tool, arguments) in planned_calls(&scenario, &config) {
        let mut call = runtime.call(CallRequest::new(
            tool,
            Scope {
                tenant_id: "conformance".into(),
                session_id: "conformance".into(),
            },
            arguments,
        ));
        while let Some(event) = call.next().await {
            println!("{}", serde_json::to_string(&event).unwrap_or_default());
        }
    }
    ExitCode::SUCCESS
}

/// The calls a scenario asks for: those its context names (`MCP_CONFORMANCE_CONTEXT`
/// `toolCalls`, with their arguments), else one call of every tool with arguments sampled
/// from its schema. `json-schema-2020-12-preservation` wants the schema brain pinned for its
/// focal tool echoed back.
fn planned_calls(scenario: &str, config: &HostConfig) -> Vec<(String, Value)> {
    let binding_of = |mcp_name: &str| {
        config
            .tools
            .iter()
            .find(|binding| binding.mcp_tool.as_deref() == Some(mcp_name))
    };
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|context| serde_json::from_str(&context).ok())
        .unwrap_or_default();
    if let Some(calls) = context.get("toolCalls").and_then(Value::as_array) {
        return calls
            .iter()
            .filter_map(|call| {
                let name = call.get("name")?.as_str()?;
                let Some(binding) = binding_of(name) else {
                    eprintln!("context names {name:?}, which has no binding");
                    return None;
                };
                let arguments = call.get("arguments").cloned().unwrap_or(json!({}));
                Some((
                    binding.name.clone(),
                    without_invalid_nulls(arguments, &binding.input_schema),
                ))
            })
            .collect();
    }
    if scenario == "json-schema-2020-12-preservation"
        && let (Some(focal), Some(echo)) = (
            binding_of("json_schema_2020_12_tool"),
            binding_of("json_schema_echo"),
        )
    {
        return vec![(
            echo.name.clone(),
            json!({"schema": focal.input_schema.clone()}),
        )];
    }
    config
        .tools
        .iter()
        .map(|binding| (binding.name.clone(), sample(&binding.input_schema)))
        .collect()
}

/// The arguments without `null` for optional properties whose type excludes it: brain's gate
/// refuses such arguments as invalid (they are), where the suite means "not provided".
fn without_invalid_nulls(mut arguments: Value, schema: &Value) -> Value {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(object) = arguments.as_object_mut() {
        object.retain(|name, value| {
            let excludes_null = schema
                .pointer(&format!("/properties/{name}/type"))
                .and_then(Value::as_str)
                .is_some_and(|kind| kind != "null");
            !(value.is_null() && excludes_null && !required.contains(&name.as_str()))
        });
    }
    arguments
}

/// A name model APIs accept, unique by index.
fn model_name(name: &str, index: usize) -> String {
    if brain_config::is_valid_name(name) {
        return name.to_owned();
    }
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(56)
        .collect();
    format!("{cleaned}_{index}")
}

/// Arguments that satisfy a simple schema: its default, first enum value, or a value per type.
fn sample(schema: &Value) -> Value {
    if let Some(default) = schema.get("default") {
        return default.clone();
    }
    if let Some(constant) = schema.get("const") {
        return constant.clone();
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("string") => json!("test"),
        Some("integer") | Some("number") => json!(1),
        Some("boolean") => json!(true),
        Some("array") => json!([]),
        Some("null") => Value::Null,
        _ => {
            let mut object = Map::new();
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (name, property) in properties {
                    if required.contains(&name.as_str()) {
                        object.insert(name.clone(), sample(property));
                    }
                }
            }
            Value::Object(object)
        }
    }
}

/// The client ID metadata document URL the suite expects a client to use where the
/// authorization server supports them (the suite never fetches it from the client).
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

/// The binding's `auth` for an authorization scenario, from its context, and the values of the
/// variables it names: the grant the context's credentials are for, as a deployment would
/// configure it.
fn auth_for(scenario: &str, context: &Value) -> (Auth, BTreeMap<String, String>) {
    let text = |key: &str| context.get(key).and_then(Value::as_str).map(str::to_owned);
    let mut secrets = BTreeMap::new();
    let mut secret = |var: &str, key: &str| {
        let value = text(key)?;
        secrets.insert(var.to_owned(), value);
        Some(var.to_owned())
    };
    let mut auth = Auth {
        grant: Grant::AuthorizationCode,
        client_id: None,
        client_secret_env: None,
        private_key_env: None,
        signing_algorithm: None,
        scopes: None,
        assertion_env: None,
        id_token_env: None,
        idp_token_endpoint: None,
        idp_client_id: None,
        client_metadata_url: None,
        token_endpoint: None,
        audience: None,
        resource: None,
        dpop: None,
    };
    if context.get("idp_id_token").is_some() {
        auth.grant = Grant::EnterpriseManaged;
        auth.client_id = text("client_id");
        auth.client_secret_env = secret("CONFORMANCE_CLIENT_SECRET", "client_secret");
        auth.id_token_env = secret("CONFORMANCE_ID_TOKEN", "idp_id_token");
        auth.idp_token_endpoint = text("idp_token_endpoint");
        auth.idp_client_id = text("idp_client_id");
    } else if context.get("valid_jwt").is_some() {
        auth.grant = Grant::JwtBearer;
        auth.client_id = text("client_id");
        auth.assertion_env = secret("CONFORMANCE_WORKLOAD_JWT", "valid_jwt");
    } else if context.get("private_key_pem").is_some() {
        auth.grant = Grant::ClientCredentials;
        auth.client_id = text("client_id");
        auth.private_key_env = secret("CONFORMANCE_PRIVATE_KEY", "private_key_pem");
        auth.signing_algorithm = Some(brain_config::SigningAlgorithm::ES256);
    } else if scenario.contains("client-credentials") {
        auth.grant = Grant::ClientCredentials;
        auth.client_id = text("client_id");
        auth.client_secret_env = secret("CONFORMANCE_CLIENT_SECRET", "client_secret");
    } else if context.get("client_id").is_some() {
        // A client registered in advance.
        auth.client_id = text("client_id");
        auth.client_secret_env = secret("CONFORMANCE_CLIENT_SECRET", "client_secret");
    } else {
        auth.client_metadata_url = Some(CLIENT_METADATA_URL.to_owned());
    }
    if scenario.starts_with("auth/dpop") {
        auth.dpop = Some(true);
    }
    (auth, secrets)
}
