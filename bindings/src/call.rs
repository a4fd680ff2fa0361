//! `brain-harness call`: the request (the arguments, the model API they came from, the user's
//! token for a binding on behalf of users), and the call run with its events printed, SIGINT or
//! SIGTERM cancelling it.

// The call's events and result on stdout.
#![allow(clippy::print_stdout)]

use std::io::Read;
use std::time::Duration;

use brain_runtime::{CallRequest, ContentBlock, Event, Runtime, Scope, ToolResult};
use futures_util::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;

use crate::output::text;

/// A signal interrupted the call: the process has less time left to exit.
pub(crate) static INTERRUPTED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// `brain-harness call`'s request: `tool` by `scope` with the arguments `args` (JSON, or `-`
/// for stdin) produced from the model API `from`'s definitions, if any, and the user's token
/// when `subject_token_env` names its variable. An error is bad input (exit 2).
pub(crate) fn call_request(
    tool: String,
    scope: Scope,
    args: &str,
    from: Option<brain_config::ModelApi>,
    subject_token_env: Option<&str>,
) -> Result<CallRequest, String> {
    let arguments = arguments(args)?;
    let mut request = CallRequest::new(tool, scope, arguments).with_via(brain_runtime::Via::Call);
    if let Some(api) = from {
        request = request.with_from(api);
    }
    Ok(match subject_token_env.map(subject_token).transpose()? {
        Some(subject) => request.with_subject_token(subject),
        None => request,
    })
}

/// The user's token named by `--subject-token-env VAR`: brain has not verified it, so it is
/// keyed by its digest ([`brain_runtime::SubjectToken::new`]).
pub(crate) fn subject_token(var: &str) -> Result<brain_runtime::SubjectToken, String> {
    match std::env::var(var) {
        Ok(token) if !token.trim().is_empty() => Ok(brain_runtime::SubjectToken::new(token.trim())),
        Ok(_) => Err(format!(
            "--subject-token-env: {var} is empty; set it to the calling user's access token"
        )),
        Err(_) => Err(format!(
            "--subject-token-env: {var} is not set; set it to the calling user's access token"
        )),
    }
}

/// The arguments: a JSON object, or `-` to read it from stdin.
fn arguments(text: &str) -> Result<Value, String> {
    let text = if text == "-" {
        let mut input = String::new();
        std::io::stdin()
            .read_to_string(&mut input)
            .map_err(|error| format!("cannot read the arguments from stdin: {error}"))?;
        input
    } else {
        text.to_owned()
    };
    match serde_json::from_str(&text) {
        Ok(Value::Object(map)) => Ok(Value::Object(map)),
        Ok(_) => Err("the arguments must be a JSON object, e.g. '{\"query\": \"rust\"}'".into()),
        Err(error) => Err(format!("the arguments are not JSON: {error}")),
    }
}

/// A signal that interrupted a call.
#[derive(Clone, Copy)]
pub(crate) enum Interrupt {
    Int,
    Term,
}

impl Interrupt {
    /// 128 + the signal's number, as shells report it.
    pub(crate) fn exit_code(self) -> u8 {
        match self {
            Interrupt::Int => 130,
            Interrupt::Term => 143,
        }
    }
}

/// How long the harness waits, after the result, for the call's cleanup (the cancellation and
/// the session's close) to reach the server.
const CLEANUP_BOUND: Duration = Duration::from_millis(1500);

/// Runs the call and prints its events; SIGINT or SIGTERM cancels it (the result still comes,
/// and is printed). Returns the result, and the signal if one came.
pub(crate) async fn call(
    runtime: &Runtime,
    request: CallRequest,
    json: bool,
) -> (ToolResult, Option<Interrupt>) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut sigint = signal(SignalKind::interrupt()).expect("SIGINT can be handled");
    let mut sigterm = signal(SignalKind::terminate()).expect("SIGTERM can be handled");
    let mut interrupted = None;
    let mut call = runtime.call(request);
    let bar = (!json).then(|| {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {prefix} [{bar:30}] {pos}/{len} {msg}")
                .expect("a valid template")
                .progress_chars("=> "),
        );
        bar.set_prefix(text(call.call_id()).into_owned());
        bar
    });
    loop {
        let event = tokio::select! {
            event = call.next() => event,
            _ = sigint.recv(), if interrupted.is_none() => {
                interrupted = Some(Interrupt::Int);
                INTERRUPTED.store(true, std::sync::atomic::Ordering::Relaxed);
                call.cancel();
                continue;
            }
            _ = sigterm.recv(), if interrupted.is_none() => {
                interrupted = Some(Interrupt::Term);
                INTERRUPTED.store(true, std::sync::atomic::Ordering::Relaxed);
                call.cancel();
                continue;
            }
        };
        let Some(event) = event else { break };
        if json {
            crate::output::json(&event);
        }
        match event {
            Event::Progress(progress) => {
                if let Some(bar) = &bar {
                    if let Some(total) = progress.total {
                        bar.set_length(total as u64);
                    }
                    bar.set_position(progress.progress as u64);
                    let message = progress.message.unwrap_or_default();
                    bar.set_message(text(&message).into_owned());
                }
            }
            Event::Result(result) => {
                if let Some(bar) = &bar {
                    bar.finish_and_clear();
                    print_readable(&result);
                }
                let _ = tokio::time::timeout(CLEANUP_BOUND, runtime.wait_for_cleanup()).await;
                return (result, interrupted);
            }
            // An event this harness does not know yet: shown with --json, skipped on a terminal.
            _ => {}
        }
    }
    // The runtime always ends a call with its result; should its task ever die, say so.
    let result = ToolResult::ended_without_result(call.call_id());
    if json {
        crate::output::json(&Event::Result(result.clone()));
    }
    (result, interrupted)
}

fn print_readable(result: &ToolResult) {
    let status = match (result.is_error, result.unknown_outcome) {
        (false, _) => "ok".to_owned(),
        (true, false) => "error (the tool did not run, or reported the error itself)".to_owned(),
        (true, true) => {
            "error, unknown outcome: the tool may have run; check before retrying".to_owned()
        }
    };
    println!("{} {status}", text(&result.call_id));
    for block in &result.content {
        match block {
            // A server's text, a line at a time: its line breaks kept, all else escaped.
            ContentBlock::Text { text: content } => {
                for line in content.lines() {
                    println!("{}", text(line));
                }
            }
            ContentBlock::Image { data, mime_type } => {
                println!("[image {}, {} bytes base64]", text(mime_type), data.len());
            }
            other => println!("[{}]", crate::output::json_text(other)),
        }
    }
}
