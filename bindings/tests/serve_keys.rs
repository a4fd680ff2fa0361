//! `brain-harness serve` as an OAuth resource server (`serve.authorization`), tried against a
//! real serve process with the test issuer (`tests::issuer`) and the fault-injecting test server
//! upstream, counted at the issuer (JWKS fetches) and upstream (calls): a slow issuer and made-up
//! key ids never delay a token whose key is held, a withdrawn key is refused within the
//! configured `jwks_max_age_seconds` and never used again, `nbf`, `iat` and `sub` are checked
//! (the 401 names the reason, never the token), and the session cap counts principals (tenant,
//! `iss`, `sub`), never OAuth apps. The verifier alone: `tests/tests/access_tokens.rs`.

#![allow(clippy::print_stderr)] // the measured latencies and counts, for the record

use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tests::issuer::{TestIssuer, now};

mod serving;

use serving::*;

/// A serve whose only clients are the test issuer's tokens, the issuer, and the test server
/// upstream. Dropped in this order: serve, the issuer, the upstream (and its runtime).
struct Protected {
    serving: Serving,
    issuer: TestIssuer,
    upstream: Upstream,
    resource: String,
    authority: String,
}

/// The test server's tools for acme; `serve` is `authorization` (the test issuer, this serve's
/// resource, the `tenant` claim) with `authorization_patch` applied, then `serve_patch`.
fn keys_config(
    dir: &std::path::Path,
    upstream_url: &str,
    issuer: &str,
    resource: &str,
    authorization_patch: impl Fn(&mut Value),
    serve_patch: impl Fn(&mut Value),
) -> String {
    let tools = tests::server::bindings_json(upstream_url, |_, binding| {
        binding["tenants"] = json!(["acme"]);
    });
    let mut authorization =
        json!({"issuer": issuer, "resource": resource, "tenant_claim": "tenant"});
    authorization_patch(&mut authorization);
    let mut serve = json!({"authorization": authorization});
    serve_patch(&mut serve);
    let config = json!({"serve": serve, "tools": tools});
    let path = dir.join("host.json");
    std::fs::write(&path, config.to_string()).unwrap();
    path.display().to_string()
}

fn protected(
    authorization_patch: impl Fn(&mut Value),
    serve_patch: impl Fn(&mut Value),
) -> Protected {
    let upstream = upstream();
    let issuer = upstream.tokio.block_on(TestIssuer::start());
    let (port, resource) = free_resource();
    let config = keys_config(
        upstream.dir.path(),
        &upstream.server.url,
        issuer.url(),
        &resource,
        authorization_patch,
        serve_patch,
    );
    let serving = Serving::start_at(&format!("127.0.0.1:{port}"), &config, &upstream.state, &[]);
    let authority = serving.authority();
    Protected {
        serving,
        issuer,
        upstream,
        resource,
        authority,
    }
}

impl Protected {
    /// The issuer's valid claims for this serve (`sub` user-1, `client_id` client-1, tenant
    /// acme).
    fn claims(&self) -> Map<String, Value> {
        self.issuer.claims(&self.resource)
    }

    /// A valid token signed with `kid`.
    fn token(&self, kid: &str) -> String {
        self.issuer.token(kid, &self.claims())
    }

    /// An `initialize` as `token`: (status, head, body, how long it took).
    fn initialize(&self, token: &str) -> (u16, String, String, Duration) {
        let bearer = format!("Bearer {token}");
        let started = Instant::now();
        let (status, head, body) = post(&self.authority, &[("Authorization", &bearer)]);
        (status, head, body, started.elapsed())
    }

    /// A 2026-07-28 `tools/call` of `echo` as `token`: (status, head, the JSON-RPC message or
    /// body, how long it took).
    fn echo(&self, token: &str, message: &str) -> (u16, String, Value, Duration) {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"message": message}, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}}})
        .to_string();
        let bearer = format!("Bearer {token}");
        let started = Instant::now();
        let (status, head, body) = post_body(
            &self.authority,
            &[
                ("Authorization", &bearer),
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "echo"),
            ],
            &body,
        );
        (status, head, json_rpc(&body), started.elapsed())
    }

    /// Asserts that `echo` as `token` answers `message`; how long it took.
    fn echo_ok(&self, token: &str, message: &str) -> Duration {
        let (status, head, answer, took) = self.echo(token, message);
        assert_eq!(status, 200, "{head}{answer}");
        assert_eq!(
            answer["result"]["content"][0]["text"],
            json!(message),
            "{answer}"
        );
        took
    }

    fn upstream_calls(&self) -> usize {
        tests::server::Stats::get(&self.upstream.server.stats.calls)
    }
}

/// The `WWW-Authenticate` value of a response head.
fn www_authenticate(head: &str) -> Option<String> {
    head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("www-authenticate")
            .then(|| value.trim().to_owned())
    })
}

/// Asserts a 401 that challenges the bearer token (`invalid_token`, the resource metadata) and
/// says `why`; returns the refusal's message.
fn assert_refused(
    serving: &Protected,
    (status, head, body): (u16, &str, &str),
    why: &str,
) -> String {
    assert_eq!(status, 401, "{head}\r\n\r\n{body}");
    let challenge = www_authenticate(head).unwrap_or_else(|| panic!("no WWW-Authenticate: {head}"));
    let metadata = format!(
        "http://{}/.well-known/oauth-protected-resource/mcp",
        serving.authority
    );
    assert!(
        challenge.starts_with("Bearer")
            && challenge.contains(&format!("resource_metadata=\"{metadata}\""))
            && challenge.contains("error=\"invalid_token\""),
        "{challenge}"
    );
    let message = json_rpc(body)["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("a JSON-RPC error: {body}"))
        .to_owned();
    assert!(message.contains(why), "{message}");
    message
}

/// A slow issuer (5 s per JWKS answer) and tokens naming made-up key ids: a token whose key is
/// held never waits (its `initialize` and `tools/call` answer within 1 s, was 19.5 s); each
/// made-up key id waits at most `KEYS_WAIT` (2 s) for the one fetch it may prompt, then 401;
/// once that fetch has ended, more made-up key ids are refused at once, with no fetch: at the
/// issuer, one fetch at the first token and one for all the made-up key ids.
#[test]
fn a_slow_issuer_and_a_made_up_kid_never_delay_a_valid_token() {
    let serving = protected(|_| {}, |_| {});
    let good = serving.token("key-1");
    let (status, head, body, first) = serving.initialize(&good);
    assert_eq!(status, 200, "{head}{body}");
    assert_eq!(serving.issuer.jwks_fetches(), 1);
    serving.echo_ok(&good, "warm");
    serving.issuer.set_jwks_delay(Duration::from_secs(5));
    serving.issuer.add_unpublished_key("signer");
    let made_up = |wave: &str, n: usize| {
        serving.issuer.token_as(
            "signer",
            Some(&format!("made-up-{wave}-{n}")),
            &serving.claims(),
        )
    };
    let wave_1: Vec<String> = (0..8).map(|n| made_up("1", n)).collect();
    let wave_2: Vec<String> = (0..8).map(|n| made_up("2", n)).collect();

    let started = Instant::now();
    let (refusals, slowest_initialize, slowest_call, valid) = std::thread::scope(|scope| {
        let attackers: Vec<_> = wave_1
            .iter()
            .map(|token| {
                let serving = &serving;
                scope.spawn(move || serving.initialize(token))
            })
            .collect();
        // The made-up key ids' fetch is in flight (5 s): tokens whose key is held do not wait.
        std::thread::sleep(Duration::from_millis(150));
        let (mut slowest_initialize, mut slowest_call, mut valid) =
            (Duration::ZERO, Duration::ZERO, 0);
        while started.elapsed() < Duration::from_millis(2500) {
            let (status, head, body, took) = serving.initialize(&good);
            assert_eq!(status, 200, "{head}{body}");
            slowest_initialize = slowest_initialize.max(took);
            slowest_call = slowest_call.max(serving.echo_ok(&good, &format!("during-{valid}")));
            valid += 1;
            std::thread::sleep(Duration::from_millis(100));
        }
        let refusals: Vec<_> = attackers.into_iter().map(|a| a.join().unwrap()).collect();
        (refusals, slowest_initialize, slowest_call, valid)
    });
    let mut slowest_refusal = Duration::ZERO;
    let mut fastest_refusal = Duration::MAX;
    for (status, head, body, took) in &refusals {
        assert_refused(
            &serving,
            (*status, head, body),
            "no key of the issuer signed it",
        );
        slowest_refusal = slowest_refusal.max(*took);
        fastest_refusal = fastest_refusal.min(*took);
    }
    eprintln!(
        "first token (cold fetch): {first:?}; during a 5 s JWKS fetch: {valid} valid initialize + \
         tools/call, slowest {slowest_initialize:?} / {slowest_call:?}; 8 made-up key ids \
         refused (401) in {fastest_refusal:?}..{slowest_refusal:?}; JWKS fetches {}",
        serving.issuer.jwks_fetches()
    );
    assert!(valid >= 5, "{valid}");
    assert!(
        slowest_initialize < Duration::from_secs(1),
        "{slowest_initialize:?}"
    );
    assert!(slowest_call < Duration::from_secs(1), "{slowest_call:?}");
    assert!(
        fastest_refusal >= Duration::from_millis(1900)
            && slowest_refusal < Duration::from_millis(3500),
        "{fastest_refusal:?}..{slowest_refusal:?}"
    );
    assert_eq!(
        serving.issuer.jwks_fetches(),
        2,
        "one fetch for eight made-up key ids"
    );
    assert_eq!(serving.upstream_calls(), 1 + valid);

    // The slow fetch has ended (5 s): more made-up key ids within the 30 s are refused at once,
    // and fetch nothing.
    while started.elapsed() < Duration::from_millis(5600) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut slowest_second = Duration::ZERO;
    for token in &wave_2 {
        let (status, head, body, took) = serving.initialize(token);
        assert_refused(
            &serving,
            (status, &head, &body),
            "no key of the issuer signed it",
        );
        slowest_second = slowest_second.max(took);
    }
    let took = serving.echo_ok(&good, "after");
    eprintln!(
        "8 more made-up key ids after the fetch: slowest refusal {slowest_second:?}; a valid \
         call {took:?}; JWKS fetches {}",
        serving.issuer.jwks_fetches()
    );
    assert!(
        slowest_second < Duration::from_millis(500),
        "{slowest_second:?}"
    );
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert_eq!(
        serving.issuer.jwks_fetches(),
        2,
        "at most one fetch per 30 s for key ids the set does not hold"
    );
}

/// `jwks_max_age_seconds: 5`: once the issuer withdraws key-1, its tokens are refused within
/// 5 s (the background refresh at 4 s; no unknown key id prompts a fetch), key-2's still work,
/// and key-1 stays refused when the issuer lists it again.
#[test]
fn a_key_rotated_out_is_refused_within_its_max_age() {
    let serving = protected(
        |authorization| authorization["jwks_max_age_seconds"] = json!(5),
        |_| {},
    );
    serving.issuer.add_key("key-2");
    let old = serving.token("key-1");
    let new = serving.token("key-2");
    serving.echo_ok(&old, "key-1");
    let fetched = Instant::now();
    serving.echo_ok(&new, "key-2");
    assert_eq!(serving.issuer.jwks_fetches(), 1);

    serving.issuer.withdraw_key("key-1");
    let withdrawn = Instant::now();
    let mut accepted = 0;
    let refused = loop {
        let (status, head, answer, _) = serving.echo(&old, "still?");
        if status == 200 {
            assert!(
                withdrawn.elapsed() < Duration::from_secs(10),
                "key-1 still accepted {:?} after its withdrawal",
                withdrawn.elapsed()
            );
            accepted += 1;
            std::thread::sleep(Duration::from_millis(250));
            continue;
        }
        break (status, head, answer);
    };
    let after = withdrawn.elapsed();
    let (status, head, answer) = refused;
    assert_refused(
        &serving,
        (status, &head, &answer.to_string()),
        "withdrawn by the issuer",
    );
    eprintln!(
        "key-1 accepted {accepted} times, then refused {after:?} after its withdrawal ({:?} after \
         the first fetch); JWKS fetches {}",
        fetched.elapsed(),
        serving.issuer.jwks_fetches()
    );
    assert!(
        fetched.elapsed() < Duration::from_millis(6500),
        "{:?}",
        fetched.elapsed()
    );
    assert_eq!(
        serving.issuer.jwks_fetches(),
        2,
        "the background refresh only"
    );
    serving.echo_ok(&new, "key-2 after the refresh");
    assert_eq!(serving.upstream_calls(), 2 + accepted + 1);

    // Listed again: still refused, after the next refresh took the set with it.
    serving.issuer.republish_key("key-1");
    let deadline = Instant::now() + Duration::from_secs(7);
    while serving.issuer.jwks_fetches() == 2 {
        assert!(Instant::now() < deadline, "no refresh within 7 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(300));
    let fresh = serving.token("key-1");
    let (status, head, answer, _) = serving.echo(&fresh, "again?");
    assert_refused(
        &serving,
        (status, &head, &answer.to_string()),
        "withdrawn by the issuer",
    );
    let (status, head, body, _) = serving.initialize(&old);
    assert_refused(&serving, (status, &head, &body), "withdrawn by the issuer");
    serving.echo_ok(&new, "key-2 still");
    eprintln!(
        "key-1 listed again: refused; JWKS fetches {}; upstream calls {}",
        serving.issuer.jwks_fetches(),
        serving.upstream_calls()
    );
    assert_eq!(serving.issuer.jwks_fetches(), 3);
    assert_eq!(serving.upstream_calls(), 2 + accepted + 2);
}

/// `nbf` an hour ahead, `iat` a day ahead, no `sub`, `exp` past: 401, the message naming the
/// claim, and neither the message, the response nor serve's log holding the token; `nbf` and
/// `iat` within the 30 s leeway: accepted. Nothing reaches upstream but the accepted call.
#[test]
fn nbf_iat_and_sub_are_checked_by_serve() {
    let serving = protected(|_| {}, |_| {});
    let now = now();
    let with = |patch: &dyn Fn(&mut Map<String, Value>)| {
        let mut claims = serving.claims();
        patch(&mut claims);
        serving.issuer.token("key-1", &claims)
    };
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "nbf in an hour",
            with(&|claims| {
                claims.insert("nbf".into(), json!(now + 3600));
            }),
            "not valid yet (`nbf`)",
        ),
        (
            "iat in a day",
            with(&|claims| {
                claims.insert("iat".into(), json!(now + 86_400));
            }),
            "issued in the future (`iat`)",
        ),
        (
            "no sub",
            with(&|claims| {
                claims.remove("sub");
            }),
            "`sub`",
        ),
        (
            "an empty sub",
            with(&|claims| {
                claims.insert("sub".into(), json!(""));
            }),
            "`sub`",
        ),
        (
            "expired two minutes ago",
            with(&|claims| {
                claims.insert("exp".into(), json!(now - 120));
            }),
            "expired",
        ),
    ];
    for (case, token, why) in &cases {
        let (status, head, body, took) = serving.initialize(token);
        let message = assert_refused(&serving, (status, &head, &body), why);
        eprintln!("{case}: {status} in {took:?}: {message}");
        let signature = token.rsplit('.').next().unwrap();
        let payload = token.split('.').nth(1).unwrap();
        for part in [token.as_str(), signature, payload] {
            assert!(
                !head.contains(part) && !body.contains(part),
                "{case}: the token is in the answer"
            );
        }
        let (status, head, answer, _) = serving.echo(token, "refused");
        assert_refused(&serving, (status, &head, &answer.to_string()), why);
    }
    let within = with(&|claims| {
        claims.insert("nbf".into(), json!(now + 10));
        claims.insert("iat".into(), json!(now + 10));
    });
    let (status, head, body, _) = serving.initialize(&within);
    assert_eq!(status, 200, "nbf and iat within the leeway: {head}{body}");
    serving.echo_ok(&within, "within the leeway");
    assert_eq!(serving.upstream_calls(), 1, "refused tokens reach nothing");
    assert_eq!(serving.issuer.jwks_fetches(), 1);
    std::thread::sleep(Duration::from_millis(200));
    let log = serving.serving.stderr();
    for (case, token, _) in &cases {
        let signature = token.rsplit('.').next().unwrap();
        assert!(
            !log.contains(token.as_str()) && !log.contains(signature),
            "{case}: the token is in serve's log"
        );
    }
}

/// `sessions_per_client: 1`: two users through one OAuth app (`client_id` client-1) each open
/// their own session; a second from user-1 is 429, through another app too (the cap counts
/// (tenant, `iss`, `sub`)), and neither user reaches the other's session.
#[test]
fn tokens_of_one_app_name_separate_principals() {
    let serving = protected(|_| {}, |serve| serve["sessions_per_client"] = json!(1));
    let as_user = |sub: &str, client_id: &str| {
        let mut claims = serving.claims();
        claims.insert("sub".into(), json!(sub));
        claims.insert("client_id".into(), json!(client_id));
        serving.issuer.token("key-1", &claims)
    };
    let user_1 = as_user("user-1", "client-1");
    let user_2 = as_user("user-2", "client-1");
    let (status, head, body, _) = serving.initialize(&user_1);
    assert_eq!(status, 200, "{head}{body}");
    let first = session_id(&head);
    let (status, head, body, _) = serving.initialize(&user_2);
    assert_eq!(status, 200, "user-2's cap is its own: {head}{body}");
    let second = session_id(&head);
    assert_ne!(first, second);

    let (status, _, body, _) = serving.initialize(&as_user("user-1", "client-1"));
    assert_eq!(status, 429, "user-1's cap is 1: {body}");
    let (status, _, body, _) = serving.initialize(&as_user("user-1", "another-app"));
    assert_eq!(status, 429, "another app does not give user-1 more: {body}");

    let ping = |token: &str, session: &str| {
        let bearer = format!("Bearer {token}");
        post_body(
            &serving.authority,
            &[
                ("Authorization", &bearer),
                ("Mcp-Session-Id", session),
                ("MCP-Protocol-Version", "2025-11-25"),
            ],
            &json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}).to_string(),
        )
        .0
    };
    assert_eq!(ping(&user_2, &first), 404, "user-2 cannot use user-1's");
    assert_eq!(ping(&user_1, &second), 404, "user-1 cannot use user-2's");
    assert_eq!(ping(&user_1, &first), 200);
    assert_eq!(ping(&user_2, &second), 200);
    assert_eq!(serving.issuer.jwks_fetches(), 1);
}
