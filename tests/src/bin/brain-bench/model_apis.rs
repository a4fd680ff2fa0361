//! M1, M2: each model API's tool definitions of the codegen corpus (13 real servers, 192 tools):
//! the projection in process, and what `brain-harness tools --format openai` adds to `tools`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use brain_config::ModelApi;

use crate::harness::Target;

/// The median of `runs` timings of `work`.
fn median(runs: usize, mut work: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            work();
            started.elapsed()
        })
        .collect();
    times.sort();
    times[runs / 2]
}

fn at_most(id: &'static str, what: String, measured: Duration, bound: Duration) -> Target {
    Target {
        id,
        what,
        measured: format!("{:.2} ms", measured.as_secs_f64() * 1000.0),
        target: format!("<= {} ms", bound.as_millis()),
        met: Some(measured <= bound),
        info: false,
        spread: None,
    }
}

pub(crate) fn targets(targets: &mut Vec<Target>) -> anyhow::Result<()> {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../brain-codegen/corpus/host.json");
    let config = brain_config::load_file(&corpus)?;
    // M1: the slowest API's projection of every tool (the document included), median of 21.
    let (mut slowest, mut which) = (Duration::ZERO, ModelApi::Mcp);
    for &api in ModelApi::ALL {
        let time = median(21, || {
            std::hint::black_box(brain_config::model_api::definitions(api, &config.tools));
        });
        if time > slowest {
            (slowest, which) = (time, api);
        }
    }
    targets.push(at_most(
        "M1",
        format!("model API definitions of 192 tools in process (slowest: {which})"),
        slowest,
        Duration::from_millis(5),
    ));
    // M2: the harness beside this binary (the same release build), median of 10 runs each.
    let harness = std::env::current_exe()?
        .parent()
        .context("brain-bench has a directory")?
        .join("brain-harness");
    let run = |format: &str| {
        let status = Command::new(&harness)
            .env("BRAIN_STATE_URL", "memory:")
            .arg("--config")
            .arg(&corpus)
            .args(["tools", "--format", format])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        assert!(
            status.is_ok_and(|s| s.success()),
            "{} tools --format {format}",
            harness.display()
        );
    };
    run("table");
    let table = median(10, || run("table"));
    let openai = median(10, || run("openai"));
    targets.push(at_most(
        "M2",
        format!(
            "`brain-harness tools --format openai` minus `tools` on 192 tools ({:.1} vs {:.1} ms)",
            openai.as_secs_f64() * 1000.0,
            table.as_secs_f64() * 1000.0
        ),
        openai.saturating_sub(table),
        Duration::from_millis(10),
    ));
    Ok(())
}
