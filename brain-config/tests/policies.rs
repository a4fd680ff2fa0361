//! Policies: every diagnostic on a fixture (`tests/fixtures/policies/<case>/`, its `policies`
//! section in `policies.json`, the shared bindings in `tools.json` and the case's own, if any,
//! in `<case>/tools.json`), pinned in `tests/snapshots/policies/<case>.txt`: an invalid case's
//! errors, a `warn-*` case's warnings (it loads); and the decisions of the valid fixture.
//!
//! Update the snapshots with `EXPECTORATE=overwrite cargo test -p brain-config --test policies`.

use std::path::Path;

use brain_config::policy::{Decision, Policies, PolicyRequest, Principal, Via};
use serde_json::{Value, json};

const FIXTURES: &str = "tests/fixtures/policies";

/// The host config of a case, parsed as if it were `<case>/host.json`.
fn load(case: &str) -> Result<brain_config::HostConfig, brain_config::Diagnostics> {
    let read = |file: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(format!("{FIXTURES}/{file}")).unwrap())
            .unwrap()
    };
    let mut tools = read("tools.json");
    if Path::new(FIXTURES).join(case).join("tools.json").exists() {
        let own = read(&format!("{case}/tools.json"));
        tools
            .as_array_mut()
            .unwrap()
            .extend(own.as_array().unwrap().clone());
    }
    let config = json!({"policies": read(&format!("{case}/policies.json")), "tools": tools});
    brain_config::parse(
        serde_json::to_string_pretty(&config).unwrap().as_bytes(),
        &format!("{FIXTURES}/{case}/host.json"),
    )
}

#[test]
fn every_invalid_case_is_pinned() {
    let mut cases: Vec<String> = std::fs::read_dir(FIXTURES)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name != "valid" && !name.ends_with(".json") && !name.starts_with("warn-"))
        .collect();
    cases.sort();
    assert!(cases.len() >= 12, "{cases:?}");
    for case in cases {
        let errors = load(&case).expect_err(&case);
        let snapshot = Path::new("tests/snapshots/policies").join(format!("{case}.txt"));
        expectorate::assert_contents(snapshot, &format!("{errors}\n"));
    }
}

/// A `warn-*` case loads, and its warnings (`warning[id]`, rendered as `cargo xtask check`
/// prints them) are pinned; the valid fixture warns of nothing.
#[test]
fn every_warned_case_is_pinned() {
    let mut cases: Vec<String> = std::fs::read_dir(FIXTURES)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.starts_with("warn-"))
        .collect();
    cases.sort();
    assert!(!cases.is_empty());
    for case in cases {
        let config = load(&case).unwrap_or_else(|e| panic!("{case}: {e}"));
        let dir = Path::new(FIXTURES).join(&case);
        let policies = Policies::compile_in(&config, &dir).unwrap().unwrap();
        let file = format!("{FIXTURES}/{case}/host.json");
        let warnings: String = policies
            .warnings()
            .iter()
            .map(|w| w.render(&file))
            .collect();
        assert!(!warnings.is_empty(), "{case} warns of nothing");
        assert!(
            policies.warnings().iter().all(|w| w.rule.is_warning()),
            "{case}"
        );
        let snapshot = Path::new("tests/snapshots/policies").join(format!("{case}.txt"));
        expectorate::assert_contents(snapshot, &warnings);
    }
    assert!(valid().warnings().is_empty());
}

fn valid() -> Policies {
    let config = load("valid").unwrap_or_else(|e| panic!("{e}"));
    Policies::compile_in(&config, Path::new(FIXTURES).join("valid").as_path())
        .unwrap()
        .expect("the config has policies")
}

fn decide(policies: &Policies, principal: &Principal, binding: &str, arguments: Value) -> Decision {
    policies.decide(&PolicyRequest {
        principal,
        binding,
        arguments: &arguments,
        via: Via::Rust,
        session: "s1",
        granted: false,
        subject: None,
    })
}

#[test]
fn decisions_name_the_policies_that_decided_them() {
    let policies = valid();
    let acme = Principal::Tenant("acme".into());
    let refund =
        |amount: i64, order: &str| json!({"order": order, "amount": amount, "currency": "usd"});
    assert_eq!(
        decide(&policies, &acme, "refund", refund(100, "o")),
        Decision::Allow
    );
    let Decision::Deny { reason, approvable } =
        decide(&policies, &acme, "refund", refund(101, "o"))
    else {
        panic!()
    };
    assert_eq!(
        reason,
        "refused by policy: no policy permits \"refund\" for Brain::Tenant::\"acme\""
    );
    assert!(!approvable);
    let Decision::Deny { reason, .. } = decide(&policies, &acme, "refund", refund(1, "blocked-1"))
    else {
        panic!()
    };
    assert_eq!(
        reason,
        "refused by policy: forbid \"no-refunds-of-blocked-orders\""
    );
    // The same call, the same decision: nothing but the call and the policies decides.
    for _ in 0..3 {
        assert_eq!(
            decide(&policies, &acme, "refund", refund(100, "o")),
            Decision::Allow
        );
    }
}

/// A `forbid` whose evaluation errors (an overflow at `i64::MAX`) is skipped by Cedar, which
/// would let globex's permit through: brain denies instead, naming the error. The same forbid
/// without the error forbids as written.
#[test]
fn a_policy_that_errors_denies() {
    let policies = valid();
    let globex = Principal::Tenant("globex".into());
    let refund = |amount: i64| {
        json!({"order": "o", "amount": amount, "currency": "usd",
        "at": "2026-03-01T09:30:00Z", "tags": ["finance"]})
    };
    assert_eq!(
        decide(&policies, &globex, "refund", refund(5)),
        Decision::Allow
    );
    let Decision::Deny { reason, .. } = decide(&policies, &globex, "refund", refund(i64::MAX))
    else {
        panic!("an erroring forbid must not fail open")
    };
    assert!(reason.contains("overflow"), "{reason}");
    assert!(
        reason.contains("a policy that cannot be evaluated denies"),
        "{reason}"
    );
    let Decision::Deny { reason, .. } = decide(&policies, &globex, "refund", refund(2_000_000_000))
    else {
        panic!()
    };
    assert_eq!(
        reason,
        "refused by policy: forbid \"no-absurd-refunds\" (no ledger holds that much)"
    );
}

#[test]
fn dates_sets_and_absent_arguments() {
    let policies = valid();
    let acme = Principal::Tenant("acme".into());
    // More than 3 fractional digits: denied with the reason, never rounded.
    let Decision::Deny { reason, .. } = decide(
        &policies,
        &acme,
        "refund",
        json!({"order": "o", "amount": 1, "currency": "usd", "at": "2026-12-04T10:00:00.1234Z"}),
    ) else {
        panic!()
    };
    assert!(reason.contains("4 fractional digits"), "{reason}");
    assert_eq!(
        decide(
            &policies,
            &acme,
            "refund",
            json!({"order": "o", "amount": 1, "currency": "usd", "at": "2026-12-04T10:00:00.12+01:00", "tags": ["a"], "ratio": 0.5}),
        ),
        Decision::Allow
    );
    // An optional argument absent is not an error: `in` is absent, ops may drop.
    let ops = Principal::Tenant("ops".into());
    assert_eq!(
        decide(&policies, &ops, "drop-table", json!({"table": "t"})),
        Decision::Allow
    );
    assert!(matches!(
        decide(
            &policies,
            &ops,
            "drop-table",
            json!({"table": "t", "in": "prod"})
        ),
        Decision::Deny { .. }
    ));
}

#[test]
fn tools_list_hides_only_by_scope_and_context_free_forbids() {
    let policies = valid();
    let acme = Principal::Tenant("acme".into());
    let globex = Principal::Tenant("globex".into());
    // acme's and globex's refunds depend on the arguments: listed.
    assert!(policies.visible(&acme, "refund"));
    assert!(policies.visible(&globex, "refund"));
    let ops = Principal::Tenant("ops".into());
    // A forbid that never reads `context` hides; one that does (blocked orders) never does.
    assert!(policies.visible(&acme, "delete_file"));
    assert!(!policies.visible(&ops, "delete_file"));
    // No permit's scope matches acme for drop-table.
    assert!(!policies.visible(&acme, "drop-table"));
    assert!(policies.visible(&Principal::Tenant("ops".into()), "drop-table"));
}

#[test]
fn the_schema_is_written_for_editors() {
    let schema = valid().cedar_schema();
    assert!(schema.contains("namespace Brain"), "{schema}");
    assert!(schema.contains("refund_currency"), "{schema}");
    assert!(schema.contains("\"tool:drop-table\""), "{schema}");
}

/// Policies compiled from `text`, over one `refund` binding (`amount` an integer, `order` a
/// string, no `minimum`).
fn refund_policies(text: &str) -> Policies {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("p.cedar"), text).unwrap();
    let config = json!({"policies": {"files": ["p.cedar"]}, "tools": [{"name": "refund",
        "description": "Refund an order.", "url": "https://pay.example.com/mcp",
        "mcp_tool": "refund", "tenants": ["acme"], "input_schema": {"type": "object",
        "required": ["order", "amount"], "properties": {"order": {"type": "string"},
        "amount": {"type": "integer"}}}}]});
    std::fs::write(dir.path().join("host.json"), config.to_string()).unwrap();
    let config = brain_config::load_file(&dir.path().join("host.json")).unwrap();
    Policies::compile(&config).unwrap().unwrap()
}

/// What the policies guide says of ranges and `like`: a range with one end permits every
/// negative amount, both ends do not; `like` folds no case and normalises nothing.
#[test]
fn ranges_need_both_ends_and_like_is_case_and_code_point_exact() {
    let acme = Principal::Tenant("acme".into());
    let allowed = |policies: &Policies, order: &str, amount: i64| {
        decide(
            policies,
            &acme,
            "refund",
            json!({"order": order, "amount": amount}),
        ) == Decision::Allow
    };
    let permit = |condition: &str| {
        format!(
            "@id(\"refunds\")\npermit (principal, action == Brain::Action::\"tool:refund\", \
             resource)\nwhen {{ {condition} }};\n"
        )
    };
    let one_end = refund_policies(&permit("context.input.amount <= 100"));
    assert!(allowed(&one_end, "o", 40) && allowed(&one_end, "o", -5000));
    let both = refund_policies(&permit(
        "context.input.amount > 0 && context.input.amount <= 100",
    ));
    assert!(allowed(&both, "o", 40));
    assert!(!allowed(&both, "o", -5000) && !allowed(&both, "o", 0) && !allowed(&both, "o", 101));

    let forbids = refund_policies(&format!(
        "{}\n@id(\"blocked\")\nforbid (principal, action == Brain::Action::\"tool:refund\", \
         resource)\nwhen {{ context.input.order like \"blocked-*\" || context.input.order like \
         \"caf\u{e9}-*\" }};\n",
        permit("true")
    ));
    for forbidden in ["blocked-1", "caf\u{e9}-1"] {
        assert!(!allowed(&forbids, forbidden, 1), "{forbidden}");
    }
    // Another case, a full-width letter, `é` as `e` and a combining accent: not matched.
    for through in [
        "BLOCKED-1",
        "Blocked-1",
        "\u{ff42}locked-1",
        "cafe\u{301}-1",
        "CAF\u{c9}-1",
    ] {
        assert!(allowed(&forbids, through, 1), "{through}");
    }
}
