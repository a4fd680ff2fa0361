//! brain as an OAuth resource server: `AccessTokenVerifier` against the test issuer
//! (`tests::issuer`) — the claims RFC 9068 and RFC 8725 ask for (`nbf`, `iat`, `sub`), and the
//! issuer's keys: refreshed in the background, never waited for while fresh, a withdrawn key
//! never used again, an unreachable issuer's keys used for `max_stale` only, and key ids the set
//! does not hold fetched at most once per `REFETCH_INTERVAL`.
#![allow(clippy::print_stderr)] // the measured waits, printed for the record

use std::time::{Duration, Instant};

use brain_runtime::auth::{AccessTokenVerifier, KEYS_WAIT, TokenRejected, VerifiedToken};
use serde_json::json;
use tests::issuer::{TestIssuer, now};

const RESOURCE: &str = "https://brain.example.com/mcp";

fn verifier(issuer: &TestIssuer) -> AccessTokenVerifier {
    AccessTokenVerifier::new(issuer.url(), RESOURCE, "tenant").expect("a verifier")
}

fn verifier_with(
    issuer: &TestIssuer,
    max_age: Duration,
    max_stale: Duration,
) -> AccessTokenVerifier {
    verifier(issuer).with_key_lifetimes(max_age, max_stale)
}

/// The message of an `Invalid` rejection; panics on anything else.
fn invalid(result: Result<VerifiedToken, TokenRejected>) -> String {
    match result {
        Err(TokenRejected::Invalid(why)) => why,
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[tokio::test]
async fn claims_nbf_iat_and_sub_are_checked() {
    let issuer = TestIssuer::start().await;
    let verifier = verifier(&issuer);
    let now = now();

    let verified = verifier
        .verify(&issuer.token("key-1", &issuer.claims(RESOURCE)))
        .await
        .expect("a valid token");
    assert_eq!(
        verified,
        VerifiedToken {
            tenant: "acme".into(),
            issuer: issuer.url().into(),
            subject: "user-1".into(),
            client_id: Some("client-1".into()),
        }
    );

    // `sub` is the subject even when there is a `client_id`, and `client_id` is optional.
    let mut claims = issuer.claims(RESOURCE);
    claims.remove("client_id");
    let verified = verifier
        .verify(&issuer.token("key-1", &claims))
        .await
        .expect("a token without client_id");
    assert_eq!(
        (verified.subject.as_str(), verified.client_id),
        ("user-1", None)
    );

    // Within the leeway (30 s): accepted.
    let mut claims = issuer.claims(RESOURCE);
    claims.insert("nbf".into(), json!(now + 10));
    claims.insert("iat".into(), json!(now + 10));
    verifier
        .verify(&issuer.token("key-1", &claims))
        .await
        .expect("nbf and iat within the leeway");

    // `nbf` in the future beyond the leeway.
    let mut claims = issuer.claims(RESOURCE);
    claims.insert("nbf".into(), json!(now + 120));
    let why = invalid(verifier.verify(&issuer.token("key-1", &claims)).await);
    assert!(
        why.contains("not valid yet") && why.contains("nbf"),
        "{why}"
    );

    // `iat` a day in the future.
    let mut claims = issuer.claims(RESOURCE);
    claims.insert("iat".into(), json!(now + 86_400));
    let why = invalid(verifier.verify(&issuer.token("key-1", &claims)).await);
    assert!(why.contains("iat"), "{why}");

    // A malformed `iat`.
    let mut claims = issuer.claims(RESOURCE);
    claims.insert("iat".into(), json!("yesterday"));
    let why = invalid(verifier.verify(&issuer.token("key-1", &claims)).await);
    assert!(why.contains("iat"), "{why}");

    // No `sub` (RFC 9068 §2.2), an empty one, one that is not a string.
    for sub in [None, Some(json!("")), Some(json!(42))] {
        let mut claims = issuer.claims(RESOURCE);
        claims.remove("sub");
        if let Some(sub) = sub {
            claims.insert("sub".into(), sub);
        }
        let why = invalid(verifier.verify(&issuer.token("key-1", &claims)).await);
        assert!(why.contains("`sub`"), "{why}");
    }

    // Expired beyond the leeway; another audience.
    let mut claims = issuer.claims(RESOURCE);
    claims.insert("exp".into(), json!(now - 120));
    let why = invalid(verifier.verify(&issuer.token("key-1", &claims)).await);
    assert!(why.contains("expired"), "{why}");
    let claims = issuer.claims("https://other.example.com/mcp");
    let why = invalid(verifier.verify(&issuer.token("key-1", &claims)).await);
    assert!(why.contains("aud"), "{why}");
    assert_eq!(issuer.jwks_fetches(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_issuer_never_delays_a_token_whose_key_is_held() {
    let issuer = TestIssuer::start().await;
    let verifier = std::sync::Arc::new(verifier(&issuer));
    let good = issuer.token("key-1", &issuer.claims(RESOURCE));
    verifier.verify(&good).await.expect("the first token");
    issuer.set_jwks_delay(Duration::from_secs(5));
    issuer.add_unpublished_key("made-up");
    let unknown = issuer.token("made-up", &issuer.claims(RESOURCE));

    let waiting = {
        let verifier = std::sync::Arc::clone(&verifier);
        tokio::spawn(async move {
            let started = Instant::now();
            let result = verifier.verify(&unknown).await;
            (started.elapsed(), result)
        })
    };
    // The unknown key id's fetch is in flight (5 s); tokens with a held key do not wait for it.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut slowest = Duration::ZERO;
    for _ in 0..20 {
        let started = Instant::now();
        verifier.verify(&good).await.expect("a held key");
        slowest = slowest.max(started.elapsed());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("slowest token with a held key during a 5 s JWKS fetch: {slowest:?}");
    assert!(slowest < Duration::from_millis(500), "{slowest:?}");

    let (waited, result) = waiting.await.expect("the waiting token");
    eprintln!("the token with an unknown key id waited {waited:?}");
    let why = invalid(result);
    assert!(why.contains("no key"), "{why}");
    assert!(
        waited >= KEYS_WAIT - Duration::from_millis(100)
            && waited < KEYS_WAIT + Duration::from_millis(800),
        "{waited:?}"
    );
    assert_eq!(issuer.jwks_fetches(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_waits_while_the_keys_are_fresh() {
    let issuer = TestIssuer::start().await;
    // Refreshed at 3.2 s, in 400 ms: done before the set expires at 4 s.
    let verifier = verifier_with(&issuer, Duration::from_secs(4), Duration::ZERO);
    let good = issuer.token("key-1", &issuer.claims(RESOURCE));
    let started = Instant::now();
    verifier.verify(&good).await.expect("the first token");
    issuer.set_jwks_delay(Duration::from_millis(400));
    let mut slowest = Duration::ZERO;
    let mut verified = 0;
    while started.elapsed() < Duration::from_millis(4500) {
        let one = Instant::now();
        verifier.verify(&good).await.expect("a fresh key");
        slowest = slowest.max(one.elapsed());
        verified += 1;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    eprintln!("{verified} tokens over 4.5 s with a 400 ms background refresh: slowest {slowest:?}");
    assert!(slowest < Duration::from_millis(200), "{slowest:?}");
    assert_eq!(
        issuer.jwks_fetches(),
        2,
        "refreshed once, in the background"
    );
}

#[tokio::test]
async fn an_expired_set_waits_at_most_keys_wait_for_its_refresh() {
    let issuer = TestIssuer::start().await;
    let verifier = verifier_with(&issuer, Duration::from_secs(1), Duration::from_secs(3600));
    let good = issuer.token("key-1", &issuer.claims(RESOURCE));
    verifier.verify(&good).await.expect("the first token");
    // The refresh at 0.8 s hangs; the set expires at 1 s.
    issuer.set_jwks_delay(Duration::from_secs(10));
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let started = Instant::now();
    let result = verifier.verify(&good).await;
    let waited = started.elapsed();
    eprintln!("a token after expiry, refresh hanging: {waited:?}");
    assert!(
        matches!(result, Err(TokenRejected::KeysUnavailable(_))),
        "{result:?}"
    );
    assert!(
        waited >= KEYS_WAIT - Duration::from_millis(100)
            && waited < KEYS_WAIT + Duration::from_millis(800),
        "{waited:?}"
    );
    assert_eq!(issuer.jwks_fetches(), 2, "one refresh, not one per token");
}

#[tokio::test]
async fn a_withdrawn_key_is_refused_within_max_age_and_never_used_again() {
    let issuer = TestIssuer::start().await;
    issuer.add_key("key-2");
    let verifier = verifier_with(&issuer, Duration::from_secs(5), Duration::from_secs(3600));
    let old = issuer.token("key-1", &issuer.claims(RESOURCE));
    let new = issuer.token("key-2", &issuer.claims(RESOURCE));
    verifier
        .verify(&old)
        .await
        .expect("key-1 before its withdrawal");
    verifier.verify(&new).await.expect("key-2");

    issuer.withdraw_key("key-1");
    let withdrawn = Instant::now();
    // Only tokens of key-1, whose id the set holds: nothing but the background refresh can
    // notice the withdrawal.
    let why = loop {
        match verifier.verify(&old).await {
            Ok(_) => {
                assert!(
                    withdrawn.elapsed() < Duration::from_secs(7),
                    "key-1 still accepted {:?} after its withdrawal",
                    withdrawn.elapsed()
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(rejected) => break invalid(Err(rejected)),
        }
    };
    eprintln!(
        "key-1 refused {:?} after its withdrawal",
        withdrawn.elapsed()
    );
    assert!(why.contains("withdrawn"), "{why}");
    verifier
        .verify(&new)
        .await
        .expect("key-2 after the refresh");
    let fetches = issuer.jwks_fetches();
    assert_eq!(fetches, 2, "the background refresh only");

    // Listed again: still never used.
    issuer.republish_key("key-1");
    let fresh = issuer.token("key-1", &issuer.claims(RESOURCE));
    let deadline = Instant::now() + Duration::from_secs(7);
    while issuer.jwks_fetches() == fetches {
        assert!(Instant::now() < deadline, "no refresh within 7 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let why = invalid(verifier.verify(&fresh).await);
    assert!(why.contains("withdrawn"), "{why}");
}

#[tokio::test]
async fn an_unreachable_issuer_keys_serve_until_max_stale() {
    let issuer = TestIssuer::start().await;
    let verifier = verifier_with(&issuer, Duration::from_secs(2), Duration::from_secs(2));
    let good = issuer.token("key-1", &issuer.claims(RESOURCE));
    let started = Instant::now();
    verifier.verify(&good).await.expect("the first token");
    issuer.stop();
    // The set expires at 2 s; it is used until 4 s, then no token can be checked.
    let mut last_accepted = Duration::ZERO;
    let mut first_refused = None;
    let mut slowest = Duration::ZERO;
    while started.elapsed() < Duration::from_millis(5500) {
        let one = Instant::now();
        let result = verifier.verify(&good).await;
        slowest = slowest.max(one.elapsed());
        match result {
            Ok(_) => {
                assert!(first_refused.is_none(), "accepted again after a refusal");
                last_accepted = started.elapsed();
            }
            Err(TokenRejected::KeysUnavailable(why)) => {
                first_refused.get_or_insert((started.elapsed(), why));
            }
            Err(other) => panic!("{other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (refused_at, why) = first_refused.expect("refused after max_stale");
    eprintln!(
        "issuer gone: last accepted at {last_accepted:?}, refused from {refused_at:?} ({why}); \
         slowest {slowest:?}"
    );
    assert!(why.contains("expired"), "{why}");
    assert!(
        last_accepted > Duration::from_millis(3500),
        "{last_accepted:?}"
    );
    assert!(
        refused_at > Duration::from_millis(3800) && refused_at < Duration::from_millis(5000),
        "{refused_at:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_key_ids_fetch_at_most_once_per_refetch_interval() {
    let issuer = TestIssuer::start().await;
    let verifier = std::sync::Arc::new(verifier(&issuer));
    let good = issuer.token("key-1", &issuer.claims(RESOURCE));
    verifier.verify(&good).await.expect("the first token");
    assert_eq!(issuer.jwks_fetches(), 1);

    // A key the issuer published since: its first token fetches the set.
    issuer.add_key("key-2");
    verifier
        .verify(&issuer.token("key-2", &issuer.claims(RESOURCE)))
        .await
        .expect("a newly published key");
    assert_eq!(issuer.jwks_fetches(), 2);

    // A flood of made-up key ids, at once and one after another: no more fetches, no waits.
    issuer.add_unpublished_key("signer");
    let started = Instant::now();
    let mut flood = tokio::task::JoinSet::new();
    for index in 0..200 {
        let token = issuer.token_as(
            "signer",
            Some(&format!("made-up-{index}")),
            &issuer.claims(RESOURCE),
        );
        let verifier = std::sync::Arc::clone(&verifier);
        flood.spawn(async move { verifier.verify(&token).await });
    }
    while let Some(result) = flood.join_next().await {
        let why = invalid(result.expect("a task"));
        assert!(why.contains("no key"), "{why}");
    }
    for index in 0..50 {
        let token = issuer.token_as(
            "signer",
            Some(&format!("again-{index}")),
            &issuer.claims(RESOURCE),
        );
        invalid(verifier.verify(&token).await);
    }
    eprintln!("250 unknown key ids refused in {:?}", started.elapsed());
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(issuer.jwks_fetches(), 2, "at most one fetch per 30 s");

    // Even a real new key waits for the interval; held keys are unaffected.
    issuer.add_key("key-3");
    invalid(
        verifier
            .verify(&issuer.token("key-3", &issuer.claims(RESOURCE)))
            .await,
    );
    verifier.verify(&good).await.expect("a held key");
    assert_eq!(issuer.jwks_fetches(), 2);
}

#[tokio::test]
async fn an_issuer_max_age_is_raised_to_a_minute_and_capped_by_the_config() {
    let issuer = TestIssuer::start().await;
    // The issuer's 1 s is raised to 60 s, then capped by the configured 3 s: refreshed at 2.4 s,
    // not every 0.8 s.
    issuer.set_max_age(Some(1));
    let verifier = verifier_with(&issuer, Duration::from_secs(3), Duration::from_secs(3600));
    let good = issuer.token("key-1", &issuer.claims(RESOURCE));
    verifier.verify(&good).await.expect("the first token");
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert_eq!(issuer.jwks_fetches(), 1);
    let deadline = Instant::now() + Duration::from_secs(2);
    while issuer.jwks_fetches() < 2 {
        assert!(Instant::now() < deadline, "not refreshed at 2.4 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(issuer.jwks_fetches(), 2);
    verifier.verify(&good).await.expect("after the refresh");
}

/// An issuer that serves an empty JWKS once (a bad deploy, a proxy) retires no key: the fetch
/// counts as a failed one, and the keys held are used on (within the stale window) and again
/// once the issuer lists them.
#[tokio::test]
async fn an_empty_key_set_retires_nothing() {
    let issuer = TestIssuer::start().await;
    let verifier = verifier_with(&issuer, Duration::from_secs(2), Duration::from_secs(3600));
    let token = issuer.token("key-1", &issuer.claims(RESOURCE));
    verifier.verify(&token).await.expect("key-1");
    let fetches = issuer.jwks_fetches();
    issuer.withdraw_key("key-1");
    let deadline = Instant::now() + Duration::from_secs(7);
    while issuer.jwks_fetches() == fetches {
        assert!(Instant::now() < deadline, "no refresh within 7 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    verifier
        .verify(&token)
        .await
        .expect("an empty set is a failed fetch: the held key is still used");
    issuer.republish_key("key-1");
    let refetched = issuer.jwks_fetches();
    let deadline = Instant::now() + Duration::from_secs(10);
    while issuer.jwks_fetches() == refetched {
        assert!(Instant::now() < deadline, "no retry within 10 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    verifier
        .verify(&token)
        .await
        .expect("key-1 listed again: never retired");
}
