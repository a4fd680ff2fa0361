//! typed-host: typed bindings from the crate's own `build.rs` (see README.md), and two typed
//! calls.

#![allow(clippy::print_stdout)]

/// The typed bindings of `host.json`, written to `OUT_DIR` by `build.rs`.
mod tools {
    brain_runtime::include_bindings!();
}

use brain_runtime::{Runtime, Scope};
use tools::{ToolCall, echo::EchoArgs, long_task::LongTaskArgs};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runtime = Runtime::new(&tools::host_config())?;
    let scope = Scope {
        tenant_id: "local".into(),
        session_id: "typed-host".into(),
    };
    let calls = [
        ToolCall::Echo(EchoArgs {
            message: "hello from a typed call".into(),
        }),
        ToolCall::LongTask(LongTaskArgs {
            steps: std::num::NonZeroU64::new(2).ok_or("two steps")?,
            delay_ms: Some(10),
        }),
    ];
    for call in &calls {
        let result = runtime.call_typed(call, scope.clone(), None).result().await;
        println!(
            "{}: is_error {}, {}",
            call.name(),
            result.is_error,
            text(&result)
        );
        if result.is_error {
            return Err(format!("{} failed: {result:?}", call.name()).into());
        }
    }
    runtime.wait_for_cleanup().await;
    Ok(())
}

/// The result's text blocks, joined.
fn text(result: &brain_runtime::ToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| match block {
            brain_runtime::ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" ")
}
