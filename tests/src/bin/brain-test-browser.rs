//! A browser for tests of `brain-harness login` (set as `BROWSER`): given an authorization URL,
//! it follows the authorization server's login and consent redirects with cookies (the test
//! server approves at once), then requests the redirect URI it ends at, as a user's browser
//! would: the harness's loopback listener receives the code.

#![allow(clippy::print_stderr)]

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let Some(url) = std::env::args().nth(1) else {
        eprintln!("usage: brain-test-browser AUTHORIZATION_URL");
        return ExitCode::from(2);
    };
    let redirect_uri = url::Url::parse(&url).ok().and_then(|parsed| {
        parsed
            .query_pairs()
            .find(|(key, _)| key == "redirect_uri")
            .map(|(_, value)| value.into_owned())
    });
    let Some(redirect_uri) = redirect_uri else {
        eprintln!("brain-test-browser: {url} has no redirect_uri");
        return ExitCode::FAILURE;
    };
    let callback = match tests::oauth::follow(&url, &redirect_uri).await {
        Ok(callback) => callback,
        Err(error) => {
            eprintln!("brain-test-browser: {error}");
            return ExitCode::FAILURE;
        }
    };
    match reqwest::get(&callback).await {
        Ok(response) if response.status().is_success() => ExitCode::SUCCESS,
        Ok(response) => {
            eprintln!("brain-test-browser: {callback}: HTTP {}", response.status());
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("brain-test-browser: {callback}: {error}");
            ExitCode::FAILURE
        }
    }
}
