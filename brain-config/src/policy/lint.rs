//! The traps in a policy that Cedar's validator accepts, read from the policy's JSON form (EST):
//! a `forbid` guarded by `has` on an argument, `context.call.approval` outside an `@approval`
//! policy, and an `@approval` permit that does not test `granted == true`.

use cedar_policy::{Effect, Policy};
use serde_json::Value;

/// The traps Cedar's validator accepts.
pub(crate) fn policy(policy: &Policy, id: &str, report: &mut impl FnMut(String, &str)) {
    let Ok(est) = policy.to_json() else {
        return;
    };
    let approval = policy.annotation("approval").is_some();
    let forbid = policy.effect() == Effect::Forbid;
    if forbid && let Some(argument) = has_guard(&est) {
        report(
            format!(
                "this `forbid` is guarded by `has {argument}`: it silently does not fire when \
                 `{argument}` is absent"
            ),
            "say what an absent argument means: `forbid (...) unless { context.input has X && \
             <allowed> }` also forbids a call without it; or allow it in a `permit` condition",
        );
    }
    if mentions_approval(&est) && !approval {
        report(
            "`context.call.approval` is read by a policy not annotated `@approval`".to_owned(),
            "annotate the policy `@approval` (a permit a person's approval completes), or do \
             not read `context.call.approval`",
        );
    }
    if approval && forbid {
        report(
            "`@approval` is on a `forbid`".to_owned(),
            "`@approval` marks a permit that a person's approval completes; remove it here",
        );
    }
    if approval && !forbid && !tests_granted(&est) {
        report(
            format!(
                "the `@approval` permit {id:?} does not test `context.call.approval.granted == true`"
            ),
            "add `context.call.approval.granted == true` to its `when` condition (joined with \
             `&&`): without it, the policy permits without any approval",
        );
    }
}

/// Whether `expr` reads `context` anywhere.
pub(crate) fn mentions_context(expr: &Value) -> bool {
    walk(expr, &mut |node| {
        node.get("Var").and_then(Value::as_str) == Some("context")
    })
}

/// Whether the policy reads `context.call.approval` (or tests for it with `has`).
pub(crate) fn mentions_approval(policy: &Value) -> bool {
    walk(policy, &mut |node| {
        [".", "has"].iter().any(|op| {
            node.get(*op).is_some_and(|access| {
                access.get("attr").and_then(Value::as_str) == Some("approval")
                    && is_path(&access["left"], &["call"])
            })
        })
    })
}

/// The argument a `forbid`'s `when` condition guards with `has`, if one does: the forbid then
/// silently does not fire when that argument is absent.
pub(crate) fn has_guard(policy: &Value) -> Option<String> {
    let mut found = None;
    for condition in when_bodies(policy) {
        walk(condition, &mut |node| {
            if let Some(has) = node.get("has")
                && mentions_context(&has["left"])
                && found.is_none()
            {
                found = has.get("attr").and_then(Value::as_str).map(str::to_owned);
            }
            false
        });
    }
    found
}

/// Whether one of the top-level conjuncts of a `when` is `context.call.approval.granted == true`.
pub(crate) fn tests_granted(policy: &Value) -> bool {
    when_bodies(policy).any(|body| {
        let mut conjuncts = vec![body];
        while let Some(expr) = conjuncts.pop() {
            if let Some(and) = expr.get("&&") {
                conjuncts.push(&and["left"]);
                conjuncts.push(&and["right"]);
                continue;
            }
            if let Some(eq) = expr.get("==") {
                let granted = |e: &Value| {
                    e.get(".").is_some_and(|a| {
                        a["attr"] == "granted" && is_path(&a["left"], &["call", "approval"])
                    })
                };
                let yes = |e: &Value| e.get("Value") == Some(&Value::Bool(true));
                if (granted(&eq["left"]) && yes(&eq["right"]))
                    || (yes(&eq["left"]) && granted(&eq["right"]))
                {
                    return true;
                }
            }
        }
        false
    })
}

/// The arguments a policy reads or tests with `has`, as JSON pointers (`/options/size`).
pub(crate) fn input_pointers(policy: &Value) -> Vec<String> {
    let mut found = Vec::new();
    walk(policy, &mut |node| {
        for op in [".", "has"] {
            if let Some(access) = node.get(op)
                && let Some(path) = input_path(access)
            {
                found.push(
                    path.iter()
                        .map(|p| format!("/{}", p.replace('~', "~0").replace('/', "~1")))
                        .collect(),
                );
            }
        }
        false
    });
    found.sort();
    found.dedup();
    found
}

/// The path below `context.input` of an access (`{"left": ..., "attr": ...}`), if it is one.
fn input_path(access: &Value) -> Option<Vec<String>> {
    let attr = access.get("attr")?.as_str()?.to_owned();
    let left = &access["left"];
    if is_path(left, &["input"]) {
        return Some(vec![attr]);
    }
    let mut path = input_path(left.get(".")?)?;
    path.push(attr);
    Some(path)
}

/// Whether `expr` is `context.<path...>` (by `.` accesses).
fn is_path(expr: &Value, path: &[&str]) -> bool {
    match path.split_last() {
        None => expr.get("Var").and_then(Value::as_str) == Some("context"),
        Some((last, rest)) => expr
            .get(".")
            .is_some_and(|a| a["attr"] == *last && is_path(&a["left"], rest)),
    }
}

fn when_bodies(policy: &Value) -> impl Iterator<Item = &Value> {
    policy["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["kind"] == "when")
        .map(|c| &c["body"])
}

/// Visits every node of a JSON tree, iteratively; true as soon as `visit` says so.
fn walk(root: &Value, visit: &mut impl FnMut(&Value) -> bool) -> bool {
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        if visit(node) {
            return true;
        }
        match node {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(text: &str) -> Value {
        Policy::parse(None, text).unwrap().to_json().unwrap()
    }

    #[test]
    fn the_traps_are_seen_in_the_policy_json() {
        let guarded = est(
            "forbid(principal, action, resource) when { context.input has path && \
             context.input.path like \"/etc/*\" };",
        );
        assert_eq!(has_guard(&guarded).as_deref(), Some("path"));
        let unless = est("forbid(principal, action, resource) unless { context.input has path };");
        assert_eq!(has_guard(&unless), None);
        let approval = est(
            "permit(principal, action, resource) when { context.input.n > 1 && \
             context.call.approval.granted == true };",
        );
        assert!(mentions_approval(&approval) && tests_granted(&approval));
        let loose = est(
            "permit(principal, action, resource) when { context.call.approval.granted || true };",
        );
        assert!(mentions_approval(&loose) && !tests_granted(&loose));
        assert!(!mentions_context(&est(
            "permit(principal, action, resource);"
        )));
    }
}
