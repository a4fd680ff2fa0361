//! agent-loop: an agent host's turn loop with brain running the tools (see README.md). The model
//! is scripted: `ScriptedModel` stands in for an LLM API, and is shown the tools in that API's
//! format (`openai`, the default, or `anthropic`: `cargo run -p agent-loop -- anthropic`). One
//! of its calls is held by a policy for a person's approval: the host approves it, as a person
//! would in its UI, and runs the same call again.

#![allow(clippy::print_stdout)]

use brain_runtime::journal::Journal;
use brain_runtime::{
    Approver, CallRequest, ContentBlock, Event, ModelApi, OutcomeKind, Runtime, Scope, ToolResult,
};
use futures_util::StreamExt;
use serde_json::{Value, json};

/// One message of the transcript the model reads.
#[derive(Debug, Clone)]
enum Message {
    /// The user's words.
    User(String),
    /// The model's words, or the tool calls it asks for.
    Assistant {
        text: Option<String>,
        tool_calls: Vec<ToolCall>,
    },
    /// A tool's result, for the call with this id.
    Tool {
        call_id: String,
        text: String,
        is_error: bool,
        unknown_outcome: bool,
    },
}

/// A tool call the model asks for.
#[derive(Debug, Clone)]
struct ToolCall {
    id: String,
    name: String,
    arguments: Value,
}

/// The tools as the model API's request carries them: `{"tools": [...]}` in its format.
struct Tools {
    api: ModelApi,
    document: Value,
}

impl Tools {
    /// The definition of the tool `name`, if the model was shown it.
    fn get(&self, name: &str) -> Option<&Value> {
        self.document["tools"]
            .as_array()?
            .iter()
            .find(|tool| tool["name"] == name)
    }
}

/// The approver's token of this example (its SHA-256 is in `host.json`'s `approvals`). A real
/// host never embeds one: a person presents it, and brain only ever sees its hash.
const DEMO_APPROVER_TOKEN: &str = "agent-loop-demo-approver";

/// Stands in for an LLM API: **scripted, not a model**. First turn: asks for `echo` (twice: a
/// status, and a refund a policy holds for a person) and `long_task` (when it was shown them);
/// once the transcript has their results: a text answer.
/// Like a model in strict mode, it gives every property a strict definition requires, and
/// `null` for the ones it has no value for.
struct ScriptedModel;

impl ScriptedModel {
    fn respond(&self, tools: &Tools, transcript: &[Message]) -> Message {
        let results: Vec<&Message> = transcript
            .iter()
            .filter(|m| matches!(m, Message::Tool { .. }))
            .collect();
        if results.is_empty() {
            let offered = |name: &str| tools.get(name).is_some();
            let mut tool_calls = Vec::new();
            if offered("echo") {
                tool_calls.push(ToolCall {
                    id: "turn1-echo".into(),
                    name: "echo".into(),
                    arguments: json!({"message": "the user asked for a status report"}),
                });
                tool_calls.push(ToolCall {
                    id: "turn1-refund".into(),
                    name: "echo".into(),
                    arguments: json!({"message": "refund order o-1"}),
                });
            }
            if let Some(tool) = tools.get("long_task") {
                let mut arguments = json!({"steps": 3});
                // OpenAI's strict definition requires `delay_ms` (nullable): the model says
                // "no value" with null, and brain maps it back to absent.
                let required = &tool["parameters"]["required"];
                if required
                    .as_array()
                    .is_some_and(|r| r.contains(&json!("delay_ms")))
                {
                    arguments["delay_ms"] = Value::Null;
                }
                tool_calls.push(ToolCall {
                    id: "turn1-long-task".into(),
                    name: "long_task".into(),
                    arguments,
                });
            }
            return Message::Assistant {
                text: None,
                tool_calls,
            };
        }
        let failed = results
            .iter()
            .filter(|m| matches!(m, Message::Tool { is_error: true, .. }))
            .count();
        Message::Assistant {
            text: Some(format!(
                "The tools answered ({} of {} failed); here is the report.",
                failed,
                results.len()
            )),
            tool_calls: Vec::new(),
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config =
        brain_config::load_file(concat!(env!("CARGO_MANIFEST_DIR"), "/host.json").as_ref())?;
    // Approvals live in the call journal (in memory here; SQLite or PostgreSQL across
    // processes): a runtime with an `@approval` policy and no journal does not build.
    let journal = Journal::memory();
    let runtime = Runtime::builder(&config).journal(journal.clone()).build()?;
    let approver = Approver::new(&config, journal, DEMO_APPROVER_TOKEN)?;
    let api: ModelApi = match std::env::args().nth(1) {
        Some(name) => name.parse()?,
        None => ModelApi::OpenAi,
    };
    let scope = Scope {
        tenant_id: "local".into(),
        session_id: "agent-loop".into(),
    };
    // The model sees only the tools this tenant may call, as its API takes them (computed
    // once, on first use; strict where faithful, each note says why not).
    let definitions = runtime.definitions(api, Some(&scope.tenant_id));
    for note in definitions.notes() {
        println!("note: {note}");
    }
    let tools = Tools {
        api,
        document: definitions.document.clone(),
    };
    println!(
        "tools shown to the model ({}): {}",
        tools.api, tools.document
    );

    let model = ScriptedModel;
    let mut transcript = vec![Message::User("Give me a status report.".into())];
    for turn in 1..=4 {
        let reply = model.respond(&tools, &transcript);
        transcript.push(reply.clone());
        let Message::Assistant { text, tool_calls } = reply else {
            unreachable!("the model answers as the assistant")
        };
        if tool_calls.is_empty() {
            println!(
                "turn {turn}: the model answers: {}",
                text.unwrap_or_default()
            );
            runtime.wait_for_cleanup().await;
            print_transcript(&transcript);
            return Ok(());
        }
        println!(
            "turn {turn}: the model asks for {} tool calls",
            tool_calls.len()
        );
        // The calls run at once; each one's progress is printed as it arrives.
        let mut results = futures_util::future::join_all(
            tool_calls
                .iter()
                .map(|call| run(&runtime, &scope, api, call)),
        )
        .await;
        // A call held for a person's approval: the host shows it (here, approves it as the
        // person would), then runs the same call — same call id, same arguments — once.
        for (call, result) in tool_calls.iter().zip(results.iter_mut()) {
            if result.kind == Some(OutcomeKind::ApprovalRequired)
                && let Some(id) = result.approval_id.clone()
            {
                let held = approver.show(&id).await?;
                println!(
                    "  {} held for approval {id}: {} with {}",
                    call.name,
                    held.binding,
                    held.arguments.as_deref().unwrap_or("")
                );
                approver.approve(&id).await?;
                println!("  approved by {}; running it again", approver.name());
                *result = run(&runtime, &scope, api, call).await;
                if result.is_error {
                    return Err(format!("the approved call failed: {}", text_of(result)).into());
                }
            }
        }
        for (call, result) in tool_calls.iter().zip(results) {
            transcript.push(Message::Tool {
                call_id: call.id.clone(),
                text: text_of(&result),
                is_error: result.is_error,
                unknown_outcome: result.unknown_outcome,
            });
        }
    }
    Err("the model did not answer within 4 turns".into())
}

/// Runs one tool call through brain, printing its progress; its one result. `from`: the API
/// whose definitions the model's arguments follow (brain maps them back to the binding's schema).
async fn run(runtime: &Runtime, scope: &Scope, api: ModelApi, call: &ToolCall) -> ToolResult {
    let request = CallRequest::new(&call.name, scope.clone(), call.arguments.clone())
        .with_call_id(&call.id)
        .with_from(api);
    let mut events = runtime.call(request);
    while let Some(event) = events.next().await {
        match event {
            Event::Progress(progress) => println!(
                "  {} progress {}{}{}",
                call.name,
                progress.progress,
                progress.total.map(|t| format!("/{t}")).unwrap_or_default(),
                progress
                    .message
                    .map(|m| format!(" {m}"))
                    .unwrap_or_default()
            ),
            Event::Result(result) => {
                println!(
                    "  {} result: is_error {}, unknown_outcome {}: {}",
                    call.name,
                    result.is_error,
                    result.unknown_outcome,
                    text_of(&result)
                );
                return result;
            }
            _ => {}
        }
    }
    unreachable!("a call always ends with its result")
}

/// The transcript as the next model request would carry it.
fn print_transcript(transcript: &[Message]) {
    println!("transcript:");
    for message in transcript {
        match message {
            Message::User(text) => println!("  user: {text}"),
            Message::Assistant { text, tool_calls } => {
                for call in tool_calls {
                    println!(
                        "  assistant: call {} {}({})",
                        call.id, call.name, call.arguments
                    );
                }
                if let Some(text) = text {
                    println!("  assistant: {text}");
                }
            }
            Message::Tool {
                call_id,
                text,
                is_error,
                unknown_outcome,
            } => println!(
                "  tool {call_id} (is_error {is_error}, unknown_outcome {unknown_outcome}): {text}"
            ),
        }
    }
}

/// The result's text blocks, as the model reads them.
fn text_of(result: &ToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}
