//! P12: the policy step. The decision alone for twenty policies (`tests::policies`: the
//! `is_authorized` of a one-argument call, ≤ 50 µs at p50); the whole step — lowering the
//! arguments, building the context, both passes — on the codegen corpus's largest argument
//! objects under policies that read them (≤ 250 µs at p50); and calls with policies on against
//! off, the same `echo` calls at 2026-07-28, against the Python SDK server (≥ 0.95× at c = 32)
//! and the fast test server.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use brain_config::policy::{Decision, Policies, PolicyRequest, Principal, Via};
use brain_runtime::Runtime;
use serde_json::{Map, Value, json};

use crate::harness::{Driver, Plan, Target, compare, echo_config, python_peer};

/// The corpus tools with the largest argument objects (the most properties, nested included).
const LARGEST: [&str; 3] = [
    "firecrawl_firecrawl_crawl",
    "firecrawl_firecrawl_search",
    "firecrawl_firecrawl_interact",
];

/// P12's rows.
pub(crate) async fn targets(
    plan: &Plan,
    test_server: &str,
    targets: &mut Vec<Target>,
) -> anyhow::Result<()> {
    decisions(targets)?;
    if let Some(peer) = python_peer("P12", "policies on vs off, Python SDK server", targets) {
        ratios(plan, "Python SDK server", &peer.url, true, targets).await?;
    }
    ratios(plan, "test server", test_server, false, targets).await
}

/// The p50 of `decide` over `rounds` runs, in µs; the decision must be `expected`.
fn p50(policies: &Policies, request: &PolicyRequest<'_>, allow: bool) -> anyhow::Result<f64> {
    let runs = crate::harness::scaled(2000);
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        let decision = std::hint::black_box(policies.decide(request));
        times.push(started.elapsed().as_secs_f64() * 1e6);
        if (decision == Decision::Allow) != allow {
            anyhow::bail!("P12: an unexpected decision: {decision:?}");
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(times[runs / 2])
}

fn decisions(targets: &mut Vec<Target>) -> anyhow::Result<()> {
    let local = Principal::Tenant("local".into());
    let config = tests::policies::with_twenty(
        echo_config("http://127.0.0.1:9/mcp", "2026-07-28", "echo")?,
        "echo",
    );
    let policies = compiled(&config)?;
    let small = json!({"message": "hello"});
    targets.push(Target::below(
        "P12",
        &format!(
            "a decision, {} policies (is_authorized, one argument)",
            tests::policies::POLICIES
        ),
        p50(&policies, &request(&local, "echo", &small), true)?,
        "us",
        50.0,
    ));

    // The corpus, with policies that read its largest tools' arguments.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../brain-codegen/corpus/host.json");
    let mut corpus = brain_config::parse(&std::fs::read(&path)?, &path.display().to_string())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut text = String::new();
    for tool in LARGEST {
        text += &format!(
            "@id(\"{tool}-urls\")\npermit (principal, action == Brain::Action::\"tool:{tool}\", \
             resource) when {{ if context.input has url then context.input.url like \"*.com\" \
             else true }};\n"
        );
        text += &format!(
            "@id(\"{tool}-no-screenshots\")\nforbid (principal, action == Brain::Action::\"tool:{tool}\", \
             resource) unless {{ context.input has scrapeOptions && context.input.scrapeOptions has formats \
             && context.input.scrapeOptions.formats.contains(Brain::{tool}_scrapeOptions_formats_items::\"markdown\") }};\n"
        );
    }
    corpus.policies = Some(brain_config::policy::PolicyConfig {
        files: vec!["corpus.cedar".into()],
        tests: Vec::new(),
        sources: vec![brain_config::policy::PolicySource {
            path: "corpus.cedar".into(),
            kind: brain_config::policy::SourceKind::Policies,
            text,
        }],
    });
    let policies = compiled(&corpus)?;
    let mut worst: f64 = 0.0;
    let mut properties = 0;
    for tool in LARGEST {
        let binding = corpus
            .tools
            .iter()
            .find(|b| b.name == tool)
            .ok_or_else(|| anyhow::anyhow!("the corpus has no {tool}"))?;
        let arguments = full(&binding.input_schema);
        let validator = brain_config::compile_schema(&binding.input_schema)
            .map_err(|e| anyhow::anyhow!("{tool}: {e:?}"))?;
        if let Some(error) = validator.iter_errors(&arguments).next() {
            anyhow::bail!("P12: the arguments made for {tool} are invalid: {error}");
        }
        properties = properties.max(arguments.to_string().matches("\":").count());
        worst = worst.max(p50(&policies, &request(&local, tool, &arguments), true)?);
    }
    targets.push(Target::below(
        "P12",
        &format!(
            "the whole policy step, the corpus's largest argument objects (up to {properties} \
             keys): lowering, context, decision"
        ),
        worst,
        "us",
        250.0,
    ));
    Ok(())
}

fn request<'a>(
    principal: &'a Principal,
    binding: &'a str,
    arguments: &'a Value,
) -> PolicyRequest<'a> {
    PolicyRequest {
        principal,
        binding,
        arguments,
        via: Via::Rust,
        session: "bench",
        granted: false,
        subject: None,
    }
}

fn compiled(config: &brain_config::HostConfig) -> anyhow::Result<Policies> {
    Policies::compile(config)
        .map_err(|errors| anyhow::anyhow!("{errors:?}"))?
        .ok_or_else(|| anyhow::anyhow!("no policies"))
}

/// A full instance of `schema`: every property, arrays of two, the first enum value, strings a
/// domain name (so that the corpus's patterns accept them), numbers 1.
fn full(schema: &Value) -> Value {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return values[0].clone();
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("object") => {
            let mut object = Map::new();
            for (name, property) in schema
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                object.insert(name.clone(), full(property));
            }
            Value::Object(object)
        }
        Some("array") => {
            let item = schema.get("items").map(full).unwrap_or(Value::Null);
            if schema.pointer("/items/enum").is_some() || item.is_object() {
                json!([item])
            } else {
                json!([item.clone(), item])
            }
        }
        Some("string") => json!("example.com"),
        Some("integer" | "number") => json!(1),
        Some("boolean") => json!(true),
        _ => json!({}),
    }
}

/// On against off at c = 32 and c = 1.
async fn ratios(
    plan: &Plan,
    name: &str,
    upstream: &str,
    gated: bool,
    targets: &mut Vec<Target>,
) -> anyhow::Result<()> {
    let config = echo_config(upstream, "2026-07-28", "echo")?;
    let on = Runtime::new(&tests::policies::with_twenty(config.clone(), "echo"))?;
    let on = Arc::new(Driver::Brain(on));
    let off = Arc::new(Driver::Brain(Runtime::new(&config)?));
    for concurrency in [32, 1] {
        eprintln!("P12: policies on vs off, {name}, c={concurrency}...");
        let calls = plan.calls(concurrency);
        let (with, without) = compare(&on, &off, calls, concurrency, plan.rounds).await?;
        let what = format!(
            "{} policies on vs off, {name}, 2026-07-28, c={concurrency}",
            tests::policies::POLICIES
        );
        targets.push(if gated && concurrency == 32 {
            Target::ratio_of("P12", what, &with, &without, 0.95)
        } else {
            Target::info("P12", what, with.median_rate() / without.median_rate())
        });
    }
    Ok(())
}
