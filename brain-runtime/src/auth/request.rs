//! The HTTP requests the OAuth code makes over `crate::http`, and the URL rules they follow:
//! bodies are bounded, every exchange has a timeout, redirects are never followed, and secrets
//! travel over https (or to loopback) only.

use std::time::Duration;

use crate::http::Body;
use bytes::Bytes;
use http::StatusCode;
use http::header::{ACCEPT, HeaderMap};
use http_body_util::{BodyExt, Limited};
use serde_json::Value;

use crate::http::HttpClient;

/// Bound on a response body from an authorization server.
const BODY_LIMIT: usize = 1024 * 1024;
/// Bound on one request to an authorization server.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A response: status, headers, body (bounded).
pub(super) struct Answer {
    pub(super) status: StatusCode,
    pub(super) headers: HeaderMap,
    pub(super) body: Bytes,
}

pub(super) async fn send(
    http: &HttpClient,
    request: http::Request<Body>,
) -> Result<Answer, String> {
    let url = request.uri().to_string();
    let exchange = async {
        let response = http
            .request(request)
            .await
            .map_err(|error| format!("{url}: {}", crate::http::error_chain(&error)))?;
        let (parts, body) = response.into_parts();
        let body = Limited::new(body, BODY_LIMIT)
            .collect()
            .await
            .map_err(|error| format!("{url}: the response could not be read: {error}"))?
            .to_bytes();
        Ok(Answer {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    };
    tokio::time::timeout(REQUEST_TIMEOUT, exchange)
        .await
        .map_err(|_| format!("{url} did not answer within {}s", REQUEST_TIMEOUT.as_secs()))?
}

/// GETs a JSON metadata document: `None` when the server has none there (any status but 2xx,
/// or a body that is not a JSON object).
pub(crate) async fn get_json(http: &HttpClient, url: &str) -> Result<Option<Value>, String> {
    let request = http::Request::get(url)
        .header(ACCEPT, "application/json")
        .body(Body::from(Bytes::new()))
        .map_err(|error| format!("{url:?} cannot be requested: {error}"))?;
    let answer = send(http, request).await?;
    if !answer.status.is_success() {
        tracing::debug!(url, status = %answer.status, "no metadata");
        return Ok(None);
    }
    Ok(serde_json::from_slice::<Value>(&answer.body)
        .ok()
        .filter(Value::is_object))
}

/// `https://host:port` and the path (without query) of an absolute URL, as written.
pub(crate) fn split_url(url: &str) -> Result<(String, String), String> {
    let parsed = url::Url::parse(url).map_err(|error| format!("{url:?} is not a URL: {error}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("{url:?} is not an http(s) URL"));
    }
    let origin = parsed.origin().ascii_serialization();
    let after_scheme = url.split_once("://").map_or("", |(_, rest)| rest);
    let path = match after_scheme.find(['/', '?', '#']) {
        Some(start) if after_scheme[start..].starts_with('/') => {
            let path = &after_scheme[start..];
            path.split(['?', '#']).next().unwrap_or_default().to_owned()
        }
        _ => String::new(),
    };
    Ok((origin, path))
}

/// Refuses a URL that secrets would travel to in clear text: `http` is allowed to loopback hosts
/// only (`localhost`, 127.0.0.0/8, `::1`), as for a binding's `token_env`.
pub(crate) fn require_secure(url: &str, what: &str) -> Result<(), String> {
    let parsed =
        url::Url::parse(url).map_err(|error| format!("{what} {url:?} is not a URL: {error}"))?;
    let loopback = match parsed.host() {
        Some(url::Host::Domain(domain)) => {
            domain.eq_ignore_ascii_case("localhost")
                || domain.to_ascii_lowercase().ends_with(".localhost")
        }
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    match parsed.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        _ => Err(format!(
            "{what} {url} is not https: brain sends no credentials there in clear text"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_travel_over_https_or_to_loopback_only() {
        assert!(require_secure("https://as.example/token", "t").is_ok());
        assert!(require_secure("http://127.0.0.1:5/token", "t").is_ok());
        assert!(require_secure("http://localhost:5/token", "t").is_ok());
        assert!(require_secure("http://[::1]:5/token", "t").is_ok());
        let refused = require_secure("http://as.example/token", "the token endpoint").unwrap_err();
        assert!(refused.contains("not https"), "{refused}");
        assert!(require_secure("ftp://as.example/token", "t").is_err());
    }

    #[test]
    fn splits_urls_without_normalizing_the_path() {
        assert_eq!(
            split_url("http://localhost:5").unwrap(),
            ("http://localhost:5".into(), String::new())
        );
        assert_eq!(
            split_url("https://a.example/t1/?x=1").unwrap(),
            ("https://a.example".into(), "/t1/".into())
        );
        assert_eq!(
            split_url("http://h.example?x=/y").unwrap(),
            ("http://h.example".into(), String::new())
        );
    }
}
