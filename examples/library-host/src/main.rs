//! library-host: brain as a library (see README.md). A runtime from a config file with the SQLite
//! call journal and policies; a call's events printed; the same call id answered from the
//! journal; a refused call's kind, and a call the policies refuse; `wait_for_cleanup` before exit.

#![allow(clippy::print_stdout)]

use brain_runtime::journal::{Durability, Journal};
use brain_runtime::{CallRequest, Event, OutcomeKind, Runtime, Scope, ToolResult};
use futures_util::StreamExt;
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/host.json").to_owned());
    // Every error at once, each with file:line:column, the JSON pointer and how to fix it.
    let config = brain_config::load_file(path.as_ref())?;

    // The call journal: a call id is sent at most once, even across a crash and a retry.
    let state = std::env::temp_dir().join(format!("library-host-{}.sqlite", std::process::id()));
    let journal = Journal::sqlite(&state, Durability::Normal)?;
    let runtime = Runtime::builder(&config).journal(journal).build()?;
    println!("journal: {}", state.display());

    let scope = Scope {
        tenant_id: "local".into(),
        session_id: "library-host".into(),
    };
    let call_id = format!("library-host-{}", std::process::id());
    let request = CallRequest::new(
        "long_task",
        scope.clone(),
        json!({"steps": 3, "delay_ms": 50}),
    )
    .with_call_id(&call_id);

    // A call's events: progress as the server reports it, then exactly one result.
    let mut call = runtime.call(request.clone());
    let mut first = None;
    while let Some(event) = call.next().await {
        println!("event: {}", serde_json::to_string(&event)?);
        if let Event::Result(result) = event {
            first = Some(result);
        }
    }
    let first = first.ok_or("the call ended without a result")?;
    show("first call", &first);

    // The same call id again (a retry after a timeout, a crash, a second replica): answered from
    // the journal, nothing is sent.
    let again = runtime.call(request).result().await;
    show("retry of the same call id", &again);
    if !again.replayed || again.content != first.content {
        return Err("the retry was not answered from the journal".into());
    }

    // A call the gate refuses (this tenant may not call `echo`): no I/O, and a kind to match on.
    let intruder = Scope {
        tenant_id: "intruder".into(),
        session_id: "library-host".into(),
    };
    let refused = runtime
        .call(CallRequest::new("echo", intruder, json!({"message": "hi"})))
        .result()
        .await;
    show("refused call", &refused);
    if refused.kind != Some(OutcomeKind::Refused) {
        return Err(format!("expected a refusal, got {refused:?}").into());
    }

    // A call the host config's policies refuse (`policies/calls.cedar`: at most 10 steps): decided
    // before the journal, nothing sent, and the text names why.
    let too_long = runtime
        .call(CallRequest::new("long_task", scope, json!({"steps": 50})))
        .result()
        .await;
    show("call a policy refuses", &too_long);
    if too_long.kind != Some(OutcomeKind::PolicyDenied) {
        return Err(format!("expected a policy's refusal, got {too_long:?}").into());
    }

    // Session closes and cancellations run off the caller's path: let them finish.
    runtime.wait_for_cleanup().await;
    drop(runtime);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", state.display()));
    }
    Ok(())
}

fn show(what: &str, result: &ToolResult) {
    let kind = result.kind.map_or("ok", OutcomeKind::as_str);
    println!(
        "{what}: {kind}, is_error {}, unknown_outcome {}, replayed {}",
        result.is_error, result.unknown_outcome, result.replayed
    );
}
