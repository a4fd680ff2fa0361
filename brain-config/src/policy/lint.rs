//! The traps in a policy that Cedar's validator accepts, read from the policy's JSON form (EST):
//! a `forbid` guarded by `has` on an argument, `context.call.approval` outside an `@approval`
//! policy, and an `@approval` permit that does not test `granted == true` (errors); a `forbid`
//! that names one binding of an upstream tool another binding calls too (a warning).

use cedar_policy::{Effect, Policy};
use serde_json::Value;

use super::upstream::upstream_id;
use crate::model::ToolBinding;

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

/// Bindings that call one upstream tool: its server (the URL, or the command) and the tool
/// there (`mcp_tool`; an HTTP tool is its URL alone).
pub(crate) struct LookAlikes<'a> {
    /// How a message names the tool.
    shown: String,
    /// The bindings, in the config's order (two or more), each with its upstream id (the
    /// resource, and the action group `upstream:<id>`).
    bindings: Vec<(&'a ToolBinding, String)>,
}

/// The upstream tools two or more bindings call, in the config's order.
pub(crate) fn look_alike_groups(bindings: &[ToolBinding]) -> Vec<LookAlikes<'_>> {
    let mut groups: Vec<(String, LookAlikes<'_>)> = Vec::new();
    let mut index = std::collections::HashMap::new();
    for binding in bindings {
        let server = match (&binding.url, &binding.command) {
            (Some(url), _) => url::Url::parse(url).map_or_else(|_| url.clone(), String::from),
            (None, Some(command)) => format!("stdio:{command:?}"),
            (None, None) => continue,
        };
        let shown = match (&binding.url, &binding.command) {
            (Some(url), _) => url.clone(),
            (_, command) => format!("`{}`", command.as_deref().unwrap_or_default().join(" ")),
        };
        let (key, shown) = match &binding.mcp_tool {
            Some(tool) => (
                format!("{server} {tool}"),
                format!("the tool {tool:?} of {shown}"),
            ),
            None => (server, format!("the HTTP tool at {shown}")),
        };
        let at = *index.entry(key.clone()).or_insert_with(|| {
            groups.push((
                key,
                LookAlikes {
                    shown,
                    bindings: Vec::new(),
                },
            ));
            groups.len() - 1
        });
        groups[at].1.bindings.push((binding, upstream_id(binding)));
    }
    groups
        .into_iter()
        .map(|(_, group)| group)
        .filter(|group| group.bindings.len() > 1)
        .collect()
}

/// A `forbid` that names some bindings of an upstream tool and not the others (`groups`, from
/// [`look_alike_groups`]): each binding left out, as a warning's message and help. The actions
/// a forbid's scope covers: `action`, `action == A`, `action in [A, B]`, `action in <group>`
/// (the groups `all_tools` and `upstream:<id>` hold their bindings).
pub(crate) fn look_alikes(policy: &Policy, groups: &[LookAlikes<'_>]) -> Vec<(String, String)> {
    if policy.effect() != Effect::Forbid || groups.is_empty() {
        return Vec::new();
    }
    let Ok(est) = policy.to_json() else {
        return Vec::new();
    };
    let scope = &est["action"];
    let entities: Vec<&Value> = match scope["op"].as_str() {
        Some("==" | "in") => match (&scope["entity"], scope["entities"].as_array()) {
            (Value::Null, Some(entities)) => entities.iter().collect(),
            (entity, _) => vec![entity],
        },
        _ => return Vec::new(),
    };
    let named = |(binding, upstream): &(&ToolBinding, String)| {
        entities.iter().any(|entity| {
            let id = entity["id"].as_str().unwrap_or_default();
            id == "all_tools"
                || id.strip_prefix("tool:") == Some(binding.name.as_str())
                || id.strip_prefix("upstream:") == Some(upstream.as_str())
        })
    };
    let mut found = Vec::new();
    for group in groups {
        let (forbidden, left_out): (Vec<_>, Vec<_>) = group.bindings.iter().partition(|b| named(b));
        if forbidden.is_empty() {
            continue;
        }
        let forbidden = match forbidden.as_slice() {
            [(one, _)] => format!("the binding {:?}", one.name),
            many => format!(
                "the bindings {}",
                many.iter()
                    .map(|(b, _)| format!("{:?}", b.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let actions: Vec<String> = (group.bindings.iter())
            .map(|(binding, _)| format!("Brain::Action::\"tool:{}\"", binding.name))
            .collect();
        for (binding, upstream) in left_out {
            found.push((
                format!(
                    "this `forbid` names {forbidden} and not {:?}, which calls the same upstream \
                     tool ({}): a call through {:?} is not forbidden",
                    binding.name, group.shown, binding.name
                ),
                format!(
                    "forbid every binding of that tool: `action in [{}]`, or remove the \
                     look-alike binding; the action group `Brain::Action::\"upstream:{upstream}\"` \
                     and the resource `Brain::Upstream::\"{upstream}\"` cover every tool of that \
                     server, not this one alone",
                    actions.join(", ")
                ),
            ));
        }
    }
    found
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
