//! Where a binding's server is: exactly one of `url` and `command`, and a `url` that brain can
//! send requests to.

use url::Url;

use super::context::Draft;
use crate::diagnostic::{Diagnostic, Rule};

/// A binding has exactly one of `url` (a remote server or HTTP tool) and `command` (a stdio
/// server).
pub(super) fn endpoint(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let binding = &draft.binding;
    match (&binding.url, &binding.command) {
        (None, None) if draft.usable("url") && draft.usable("command") => {
            out.push(draft.error(
                Rule::MissingEndpoint,
                "",
                "the binding has neither `url` nor `command`",
                "add `url` (the endpoint of a remote MCP server or HTTP tool, e.g. \
                 `https://mcp.example.com/mcp`) or `command` (an installed stdio MCP server, e.g. \
                 `[\"npx\", \"-y\", \"@modelcontextprotocol/server-memory\"]`)",
            ));
        }
        (Some(_), Some(_)) => out.push(draft.error(
            Rule::UrlAndCommand,
            "command",
            "the binding has both `url` and `command`",
            "keep `url` for a remote server, or `command` for a server brain starts as a process",
        )),
        _ => {}
    }
}

/// `url` is an absolute `http` or `https` URL, with no user name or password (use `token_env`)
/// and no fragment (it is never sent).
pub(super) fn url(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let Some(raw) = &draft.binding.url else {
        return;
    };
    if !draft.usable("url") {
        return;
    }
    let url = match Url::parse(raw) {
        Ok(url) if matches!(url.scheme(), "http" | "https") => url,
        Ok(url) => {
            out.push(draft.error(
                Rule::UrlInvalid,
                "url",
                format!("the url {raw:?} has scheme `{}`", url.scheme()),
                "use an `http://` or `https://` URL of the server's endpoint",
            ));
            return;
        }
        Err(error) => {
            out.push(draft.error(
                Rule::UrlInvalid,
                "url",
                format!("the url {raw:?} is not an absolute URL: {error}"),
                "write the full endpoint, e.g. `https://mcp.example.com/mcp`",
            ));
            return;
        }
    };
    if !url.username().is_empty() || url.password().is_some() {
        out.push(draft.error(
            Rule::UrlCredentials,
            "url",
            "the url carries a user name or password",
            "remove them from the url; put the API key in an environment variable and name it in \
             `token_env`",
        ));
    }
    if let Some(fragment) = url.fragment() {
        out.push(draft.error(
            Rule::UrlFragment,
            "url",
            format!("the url has a fragment `#{fragment}`, which is never sent to the server"),
            "remove the `#...` part",
        ));
    }
}

/// `ca_file` trusts a CA for a TLS connection: it needs an `https` url, and names a file.
pub(super) fn ca_file(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let Some(path) = &draft.binding.ca_file else {
        return;
    };
    if !draft.usable("ca_file") || !draft.usable("url") {
        return;
    }
    if path.trim().is_empty() {
        out.push(draft.error(
            Rule::CaFileNotHttps,
            "ca_file",
            "`ca_file` is empty",
            "name the PEM file of the CA that issued the server's certificate, or remove \
             `ca_file`",
        ));
        return;
    }
    let https = draft
        .binding
        .url
        .as_deref()
        .and_then(|raw| Url::parse(raw).ok())
        .is_some_and(|url| url.scheme() == "https");
    if !https {
        out.push(draft.error(
            Rule::CaFileNotHttps,
            "ca_file",
            match &draft.binding.url {
                Some(url) => format!("`ca_file` is set but the url {url:?} is not `https`"),
                None => "`ca_file` is set on a stdio binding (`command`)".to_owned(),
            },
            "use an `https://` url for a server whose certificate the CA issued, or remove \
             `ca_file`",
        ));
    }
}
