//! `brain-harness login` and `logout`: a tenant's OAuth grant for a binding whose `auth.type`
//! is `authorization_code`, in the state's store.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use brain_config::{HostConfig, ToolBinding};
use brain_runtime::auth::LoopbackAgent;

use crate::journal::{state_store, tokio};
use crate::output;

/// How long `login` waits for the user to approve.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);

/// The binding `name`, which must have `auth`.
fn oauth_binding<'a>(config: &'a HostConfig, name: &str) -> Result<&'a ToolBinding, String> {
    let binding = config
        .tools
        .iter()
        .find(|binding| binding.name == name)
        .ok_or_else(|| {
            format!("there is no tool named {name:?} (`brain-harness tools` lists them)")
        })?;
    match &binding.auth {
        Some(auth) if auth.grant == brain_config::Grant::AuthorizationCode => Ok(binding),
        Some(auth) => Err(format!(
            "{name} gets its tokens with the {} grant, without a user: there is nothing to log in to",
            auth.grant.as_str()
        )),
        None => Err(format!("{name} has no `auth`: it needs no login")),
    }
}

pub(crate) fn login(
    config: &HostConfig,
    state: Option<&str>,
    tenant: &str,
    name: &str,
) -> ExitCode {
    let tokio = tokio();
    let prepared = oauth_binding(config, name)
        .and_then(|binding| Ok((binding, tokio.block_on(state_store(config, state))?)));
    let (binding, journal) = match prepared {
        Ok(prepared) => prepared,
        Err(message) => {
            output::error(&message);
            return ExitCode::from(2);
        }
    };
    if !binding.tenants.iter().any(|t| t == tenant) {
        output::error(&format!("tenant {tenant:?} may not call {name:?}"));
        return ExitCode::from(2);
    }
    let agent = match LoopbackAgent::bind(open_in_browser) {
        Ok(agent) => agent,
        Err(error) => {
            output::error(&format!(
                "cannot listen on a loopback port for the redirect: {error}"
            ));
            return ExitCode::FAILURE;
        }
    };
    let env = |var: &str| std::env::var(var).ok();
    let work = brain_runtime::auth::login(binding, tenant, journal.grants(), Arc::new(agent), env);
    match tokio.block_on(async { tokio::time::timeout(LOGIN_TIMEOUT, work).await }) {
        Ok(Ok(line)) => {
            output::note(&format!("{line}, in {}", journal.describe()));
            ExitCode::SUCCESS
        }
        Ok(Err(message)) => {
            // The authorization server's words among them: escaped.
            output::error(&format!("login failed: {message}"));
            ExitCode::FAILURE
        }
        Err(_) => {
            eprintln!(
                "error: no authorization arrived within {} s; run login again",
                LOGIN_TIMEOUT.as_secs()
            );
            ExitCode::FAILURE
        }
    }
}

/// Prints the authorization URL and opens it: `$BROWSER`, else the desktop's opener.
fn open_in_browser(url: &str) {
    eprintln!("Open this URL to authorize brain (waiting for the redirect):");
    output::note(&format!("  {url}"));
    let opener = match std::env::var("BROWSER") {
        Ok(browser) if !browser.trim().is_empty() => Some(browser),
        _ if cfg!(target_os = "macos") => Some("open".to_owned()),
        _ if std::env::var_os("DISPLAY").is_some()
            || std::env::var_os("WAYLAND_DISPLAY").is_some() =>
        {
            Some("xdg-open".to_owned())
        }
        _ => None,
    };
    if let Some(opener) = opener {
        let started = std::process::Command::new(&opener)
            .arg(url)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn();
        if let Err(error) = started {
            eprintln!("(could not start {opener}: {error}; open the URL yourself)");
        }
    }
}

pub(crate) fn logout(
    config: &HostConfig,
    state: Option<&str>,
    tenant: &str,
    name: &str,
) -> ExitCode {
    let env = |var: &str| std::env::var(var).ok();
    let removed = oauth_binding(config, name).and_then(|binding| {
        tokio().block_on(async {
            let journal = state_store(config, state).await?;
            brain_runtime::auth::logout(binding, tenant, journal.grants(), env)
                .await
                .map_err(|error| error.to_string())
        })
    });
    match removed {
        Ok(true) => {
            output::note(&format!("removed the tokens of tenant {tenant} for {name}"));
            ExitCode::SUCCESS
        }
        Ok(false) => {
            output::note(&format!(
                "no tokens were stored for tenant {tenant} and {name}"
            ));
            ExitCode::SUCCESS
        }
        Err(message) => {
            output::error(&message);
            ExitCode::from(2)
        }
    }
}
