//! One replica of a host for the tests of shared OAuth grants: a process with its own runtime,
//! whose tokens live in the state's store at STATE_URL (`BRAIN_STATE_KEY` from the
//! environment), making ROUNDS rounds of CALLS concurrent calls of TOOL for tenant `local`,
//! PAUSE_MS apart. With `BRAIN_REPLICA_SUBJECT_TOKEN` set, each call carries it as the
//! caller's own token (for a binding on behalf of users).
//!
//! Usage: `brain-replica CONFIG STATE_URL TOOL CALLS ROUNDS PAUSE_MS`. Prints each failed
//! call's result and exits 1 when any failed.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use brain_runtime::journal::Journal;
use brain_runtime::{CallRequest, Runtime, Scope, SubjectToken};
use serde_json::json;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<ExitCode> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [config, state, tool, calls, rounds, pause] = args.as_slice() else {
        anyhow::bail!("usage: brain-replica CONFIG STATE_URL TOOL CALLS ROUNDS PAUSE_MS");
    };
    let calls: usize = calls.parse().context("CALLS")?;
    let rounds: usize = rounds.parse().context("ROUNDS")?;
    let pause = Duration::from_millis(pause.parse().context("PAUSE_MS")?);
    let config = brain_config::load_file(std::path::Path::new(config))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let journal = Journal::open(state).await?;
    let runtime = Runtime::builder(&config)
        .token_store(journal.grants())
        .build()?;
    let subject = std::env::var("BRAIN_REPLICA_SUBJECT_TOKEN")
        .ok()
        .map(SubjectToken::new);
    let mut failed = 0;
    for round in 0..rounds {
        if round > 0 {
            tokio::time::sleep(pause).await;
        }
        let handles: Vec<_> = (0..calls)
            .map(|i| {
                let runtime = runtime.clone();
                let message = format!("round {round} call {i}");
                let request = CallRequest::new(
                    tool.clone(),
                    Scope {
                        tenant_id: "local".into(),
                        session_id: "replica".into(),
                    },
                    json!({ "message": message }),
                );
                let request = match &subject {
                    Some(subject) => request.with_subject_token(subject.clone()),
                    None => request,
                };
                tokio::spawn(async move { runtime.call(request).result().await })
            })
            .collect();
        for handle in handles {
            let result = handle.await?;
            if result.is_error {
                failed += 1;
                println!("{}", serde_json::to_string(&result)?);
            }
        }
    }
    runtime.wait_for_cleanup().await;
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
