//! Every rule has an invalid fixture under `tests/fixtures/invalid/<rule-id>.json`, and its
//! rendered diagnostics are pinned in `tests/snapshots/<rule-id>.txt`.
//!
//! Update the snapshots with `EXPECTORATE=overwrite cargo test -p brain-config --test rules`,
//! then review the diff.

use std::path::{Path, PathBuf};

use brain_config::{Rule, parse};

/// Rules that cannot have a committed fixture, and the test that covers each instead.
const NO_FIXTURE: &[(Rule, &str)] = &[
    (Rule::TooLarge, "robustness::fifty_megabytes"),
    (
        Rule::PolicyFiles,
        "policies::every_invalid_case_is_pinned (glob-matches-nothing)",
    ),
    (
        Rule::PolicySyntax,
        "policies::every_invalid_case_is_pinned (syntax)",
    ),
    (
        Rule::PolicyInvalid,
        "policies::every_invalid_case_is_pinned (typo-attribute)",
    ),
    (
        Rule::PolicyTrap,
        "policies::every_invalid_case_is_pinned (has-guarded-forbid)",
    ),
    (
        Rule::PolicyAnnotation,
        "policies::every_invalid_case_is_pinned (annotations)",
    ),
    (
        Rule::PolicyTest,
        "policies::every_invalid_case_is_pinned (failing-test)",
    ),
    (
        Rule::ApprovalWithoutApprover,
        "policies::every_invalid_case_is_pinned (approval-without-approver)",
    ),
    (
        Rule::SandboxOff,
        "rules::sandbox_off_warns_and_loads: a warning, the config loads",
    ),
    (
        Rule::PolicyLookAlike,
        "policies::every_warned_case_is_pinned (warn-look-alike-forbid): a warning, the config loads",
    ),
];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

#[test]
fn every_rule_has_a_fixture_and_a_snapshot() {
    let mut missing = Vec::new();
    for &rule in Rule::ALL {
        if NO_FIXTURE.iter().any(|(r, _)| *r == rule) {
            continue;
        }
        let name = format!("invalid/{}.json", rule.id());
        let Ok(bytes) = std::fs::read(fixtures().join(&name)) else {
            missing.push(name);
            continue;
        };
        let errors =
            parse(&bytes, &format!("fixtures/{name}")).expect_err("an invalid fixture is rejected");
        assert!(
            errors.errors.iter().any(|d| d.rule == rule),
            "fixture {name} does not trigger {rule}:\n{errors}"
        );
        let snapshot = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/snapshots")
            .join(format!("{}.txt", rule.id()));
        expectorate::assert_contents(snapshot, &format!("{errors}\n"));
    }
    assert!(
        missing.is_empty(),
        "rules without a fixture (add tests/fixtures/<file>): {missing:?}"
    );
}

#[test]
fn every_fixture_names_a_rule() {
    for entry in std::fs::read_dir(fixtures().join("invalid")).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_str().unwrap();
        assert!(
            Rule::ALL.iter().any(|rule| rule.id() == stem),
            "{} does not name a rule",
            path.display()
        );
    }
}

#[test]
fn valid_fixtures_load() {
    for entry in std::fs::read_dir(fixtures().join("valid")).unwrap() {
        let path = entry.unwrap().path();
        if let Err(error) = brain_config::load_file(&path) {
            panic!("{error}");
        }
    }
}

/// `"sandbox": false` loads, and warns with the binding's name; the default and an object do not.
#[test]
fn sandbox_off_warns_and_loads() {
    let config = brain_config::load_file(&fixtures().join("valid/stdio.json")).unwrap();
    let warnings = brain_config::sandbox_warnings(&config);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].rule, Rule::SandboxOff);
    assert_eq!(warnings[0].tool.as_deref(), Some("time_now"));
    assert_eq!(warnings[0].pointer, "/tools/1/sandbox");
    assert!(
        warnings[0]
            .render("stdio.json")
            .starts_with("warning[sandbox-off]")
    );
}
