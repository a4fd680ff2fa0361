//! `brain-harness serve` tried as a hostile client would, over loopback against a real serve
//! process and the fault-injecting test server upstream, counted at that server: sessions owned
//! whatever a header says, caps decided in one step, tenants apart under one OAuth app, ids
//! bounded, nothing internal in what a client reads, and a policy's principal taken from the
//! verified JWT alone, approvals kept per tenant. An unauthenticated flood:
//! `serve_flood.rs`; keys and claims: `serve_keys.rs`; sessions' ends: `serve_lifecycle.rs`.

use std::time::Duration;

use proptest::prelude::*;
use serde_json::{Value, json};

mod serving;

use serving::hostile::*;
use serving::*;

/// An `initialize` body under a header naming another method opens a session only as the body
/// says: owned by its client, counted against its cap, out of another tenant's reach (POST, GET
/// stream, DELETE), at both eras' headers. Was: any number of ownerless sessions.
#[test]
fn header_tricks_never_open_an_ownerless_or_uncounted_session() {
    let upstream = upstream();
    let config = hostile_config(upstream.dir.path(), &upstream.server.url, |serve| {
        serve["sessions_per_client"] = json!(3);
    });
    let serving = Serving::start(&config, &upstream.state, &[]);
    let authority = serving.authority();
    let acme = format!("Bearer {ACME}");
    let mut opened = Vec::new();
    let mut refused = 0;
    for version_header in [None, Some("2025-11-25"), Some("2026-07-28")] {
        for method in [None, Some("ping"), Some("tools/list"), Some("Initialize")] {
            let mut headers = vec![("Authorization", acme.as_str())];
            if let Some(version) = version_header {
                headers.push(("MCP-Protocol-Version", version));
            }
            if let Some(method) = method {
                headers.push(("Mcp-Method", method));
            }
            let body = initialize_body(version_header.unwrap_or("2025-11-25"));
            let (status, head, body) = post_body(&authority, &headers, &body);
            match maybe_session(&head) {
                Some(session) => {
                    assert_eq!(status, 200, "{head}{body}");
                    opened.push(session);
                }
                None if status == 429 => refused += 1,
                None => {}
            }
        }
    }
    assert_eq!(opened.len(), 3, "the cap counts every session: {opened:?}");
    assert!(refused > 0, "the sessions over the cap were refused");
    for session in &opened {
        // Another tenant: as if the session did not exist, whatever it does.
        assert_eq!(ping(&authority, GLOBEX, session), 404);
        let (status, _, _) = raw(
            &authority,
            format!(
                "GET /mcp HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {GLOBEX}\r\n\
                 Accept: text/event-stream\r\nMcp-Session-Id: {session}\r\n\
                 Connection: close\r\n\r\n"
            )
            .as_bytes(),
        );
        assert_eq!(status, 404);
        assert_eq!(delete(&authority, GLOBEX, session), 404);
        assert_eq!(ping(&authority, ACME, session), 200, "still the owner's");
    }
    // The owner's DELETE frees a place under the cap.
    assert!((200..300).contains(&delete(&authority, ACME, &opened[0])));
    let (status, _, _) = post(&authority, &[("Authorization", &acme)]);
    assert_eq!(status, 200);
}

/// 40 simultaneous initializes at `sessions_per_client: 2` open exactly 2. Was: 14 to 23.
#[test]
fn simultaneous_initializes_open_exactly_the_cap() {
    let upstream = upstream();
    let config = hostile_config(upstream.dir.path(), &upstream.server.url, |serve| {
        serve["sessions_per_client"] = json!(2);
    });
    let serving = Serving::start(&config, &upstream.state, &[]);
    let authority = serving.authority();
    let statuses: Vec<u16> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..40)
            .map(|_| {
                let authority = &authority;
                scope.spawn(move || {
                    let acme = format!("Bearer {ACME}");
                    post(authority, &[("Authorization", &acme)]).0
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        2,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        38,
        "{statuses:?}"
    );
}

/// Arbitrary `Mcp-Method`, `MCP-Protocol-Version` and bodies (a property test over one serve,
/// which is stopped with the test): a session is only ever opened with an owner, and another
/// owner never reaches it.
#[test]
fn no_header_and_body_opens_an_ownerless_session() {
    use proptest::test_runner::{Config, TestRunner};
    let upstream = upstream();
    let config = hostile_config(upstream.dir.path(), &upstream.server.url, |serve| {
        serve["sessions_per_client"] = json!(1000);
    });
    let serving = Serving::start(&config, &upstream.state, &[]);
    let authority = serving.authority();
    let strategy = (
        prop::option::of(prop::sample::select(vec![
            "initialize",
            "Initialize",
            "ping",
            "tools/list",
            "tools/call",
            "INITIALIZE",
            "",
        ])),
        prop::option::of(prop::sample::select(vec![
            "2025-11-25",
            "2025-06-18",
            "2026-07-28",
            "2099-01-01",
            "1999",
        ])),
        prop::sample::select(vec![
            "initialize",
            "ping",
            "tools/list",
            "batch",
            "not-json",
            "duplicate",
        ]),
        prop::sample::select(vec!["2025-11-25", "2026-07-28", "2025-03-26"]),
    );
    let opened = std::cell::Cell::new(0);
    let mut runner = TestRunner::new(Config {
        cases: 128,
        ..Config::default()
    });
    let result = runner.run(
        &strategy,
        |(method, version, body_method, params_version)| {
            let init = initialize_body(params_version);
            let body = match body_method {
                "initialize" => init,
                "batch" => format!("[{init}]"),
                "not-json" => format!("{init}}}"),
                // Two `method` keys: whichever a parser keeps, the answer decides.
                "duplicate" => init.replacen(
                    "\"method\":\"initialize\"",
                    "\"method\":\"ping\",\"method\":\"initialize\"",
                    1,
                ),
                other => json!({"jsonrpc": "2.0", "id": 1, "method": other}).to_string(),
            };
            let acme = format!("Bearer {ACME}");
            let mut headers = vec![("Authorization", acme.as_str())];
            if let Some(version) = version {
                headers.push(("MCP-Protocol-Version", version));
            }
            if let Some(method) = method {
                headers.push(("Mcp-Method", method));
            }
            let (_, head, _) = post_body(&authority, &headers, &body);
            if let Some(session) = maybe_session(&head) {
                opened.set(opened.get() + 1);
                prop_assert_eq!(ping(&authority, GLOBEX, &session), 404);
                prop_assert_eq!(delete(&authority, GLOBEX, &session), 404);
                prop_assert_ne!(ping(&authority, ACME, &session), 404);
                prop_assert!((200..300).contains(&delete(&authority, ACME, &session)));
            }
            Ok(())
        },
    );
    result.unwrap();
    assert!(opened.get() > 0, "some cases opened a session");
}

/// A call id or session id longer than 256 bytes, or holding control characters, is refused
/// before the journal and the log; no log line can be forged. Was: a 1 MB id journaled, logged
/// and forwarded; CR/LF forged lines.
#[test]
fn ids_are_bounded_and_cannot_forge_log_lines() {
    let upstream = upstream();
    let config = hostile_config(upstream.dir.path(), &upstream.server.url, |_| {});
    let serving = Serving::start(&config, &upstream.state, &[]);
    let authority = serving.authority();
    for meta in [
        json!({"brain.dev/call_id": "x".repeat(1024 * 1024)}),
        json!({"brain.dev/call_id": "c1\ntools/call forged tenant=globex"}),
        json!({"brain.dev/session_id": "s\r\nforged"}),
        json!({"brain.dev/session_id": "y".repeat(257)}),
    ] {
        let result = call(&authority, ACME, "echo", json!({"message": "m"}), meta);
        assert_eq!(result["isError"], json!(true), "{result}");
        assert_eq!(
            result["_meta"]["brain.dev/outcome"]["error_type"],
            json!("refused")
        );
        assert_eq!(
            result["_meta"]["brain.dev/outcome"]["reason"],
            json!("invalid_id")
        );
        assert_eq!(
            result["_meta"]["brain.dev/outcome"]["unknown_outcome"],
            json!(false)
        );
    }
    // Arguments that do not match: the reason a client acts on.
    let bad = call(&authority, ACME, "echo", json!({"message": 7}), json!({}));
    assert_eq!(
        bad["_meta"]["brain.dev/outcome"]["reason"],
        json!("invalid_arguments"),
        "{bad}"
    );
    // 256 bytes is still an id.
    let fine = call(
        &authority,
        ACME,
        "echo",
        json!({"message": "m"}),
        json!({"brain.dev/call_id": "z".repeat(256)}),
    );
    assert_eq!(fine["isError"], json!(false), "{fine}");
    assert_eq!(tests::server::Stats::get(&upstream.server.stats.calls), 1);
    std::thread::sleep(Duration::from_millis(200));
    let log = serving.stderr();
    assert!(
        !log.lines()
            .any(|line| line.starts_with("tools/call forged")),
        "{log}"
    );
    assert!(!log.contains("forged tenant"), "{log}");
    assert!(log.len() < 64 * 1024, "no megabyte id in the log");
}

/// What a client reads names the binding and what it may do, never the upstream URL or
/// address, nor brain's derived upstream call id; the operator's log has the detail, joined by
/// the call id. Was: `could not connect to http://127.0.0.1:…/internal-mcp`, the derived id in
/// the journal-conflict refusal.
#[test]
fn a_client_reads_nothing_internal() {
    let upstream = upstream();
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_url = format!("http://{}/internal-mcp", dead.local_addr().unwrap());
    drop(dead);
    let mut tools = tests::server::bindings_json(&upstream.server.url, |_, binding| {
        binding["tenants"] = json!(["acme"]);
    });
    let mut gone = tools
        .iter()
        .find(|tool| tool["name"] == "echo")
        .unwrap()
        .clone();
    gone["name"] = json!("gone");
    gone["url"] = json!(dead_url);
    tools.push(gone);
    let config = json!({"serve": {"clients": [
        {"tenant": "acme", "token_env": "BRAIN_SERVE_TOKEN_ACME"}]}, "tools": tools});
    let path = upstream.dir.path().join("host.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let serving = Serving::start(path.to_str().unwrap(), &upstream.state, &[]);
    let authority = serving.authority();
    let text = |result: &Value| {
        result["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };

    let unreachable = call(
        &authority,
        ACME,
        "gone",
        json!({"message": "m"}),
        json!({"brain.dev/call_id": "unreachable-1"}),
    );
    let told = text(&unreachable);
    assert_eq!(
        unreachable["_meta"]["brain.dev/outcome"]["error_type"],
        json!("not_sent")
    );
    assert!(told.starts_with("gone: not sent"), "{told}");
    assert!(
        !told.contains("127.0.0.1") && !told.contains("internal-mcp"),
        "{told}"
    );

    let first = call(
        &authority,
        ACME,
        "echo",
        json!({"message": "one"}),
        json!({"brain.dev/call_id": "conflict-1"}),
    );
    assert_eq!(first["isError"], json!(false));
    let conflict = call(
        &authority,
        ACME,
        "echo",
        json!({"message": "another"}),
        json!({"brain.dev/call_id": "conflict-1"}),
    );
    assert_eq!(
        conflict["_meta"]["brain.dev/outcome"]["error_type"],
        json!("journal_conflict")
    );
    std::thread::sleep(Duration::from_millis(200));
    let log = serving.stderr();
    let upstream_id = log
        .lines()
        .filter(|line| line.contains("conflict-1"))
        .find_map(|line| {
            let line: Value = serde_json::from_str(line).ok()?;
            line["upstream_call_id"].as_str().map(str::to_owned)
        })
        .expect("the log names the upstream call id");
    let told = text(&conflict);
    assert!(!told.contains(&upstream_id), "{told}");
    assert!(told.starts_with("echo: refused"), "{told}");
    // The operator's log has the detail, on the line of the client's call id.
    let detail = log
        .lines()
        .find(|line| line.contains("unreachable-1"))
        .expect("a line for the call");
    assert!(detail.contains("internal-mcp"), "{detail}");
}

/// alice (acme) and bob (globex) log in through the same OAuth app (code + PKCE at the test
/// authorization server): each session is its user's, each cap and bound is its user's. Was:
/// keyed by the app's `client_id`, so bob used alice's session, alice deleted bob's, and one
/// user's call made the other's `limited`.
#[test]
fn two_tenants_through_one_oauth_app_stay_apart() {
    use tests::oauth::{AuthorizationServer, jwt_claims};
    let (port, resource) = free_resource();
    let authorization =
        AuthorizationServer::start_with(&resource, 300, &[("BRAIN_TEST_AS_JWT", "1")]);
    let upstream = upstream();
    let config = hostile_config(upstream.dir.path(), &upstream.server.url, |serve| {
        *serve = json!({"authorization": {"issuer": authorization.issuer,
            "resource": resource, "tenant_claim": "tenant"},
            "sessions_per_client": 1, "concurrent_calls_per_client": 1});
    });
    let serving = Serving::start_at(&format!("127.0.0.1:{port}"), &config, &upstream.state, &[]);
    let authority = serving.authority();
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let alice = tokio.block_on(authorization.user_token(&resource, "alice"));
    let bob = tokio.block_on(authorization.user_token(&resource, "bob"));
    let (a, b) = (jwt_claims(&alice), jwt_claims(&bob));
    assert_eq!(a["client_id"], b["client_id"], "one OAuth app");
    assert_eq!(
        (a["tenant"].as_str(), b["tenant"].as_str()),
        (Some("acme"), Some("globex"))
    );

    let open = |token: &str| {
        let bearer = format!("Bearer {token}");
        let (status, head, body) = post(&authority, &[("Authorization", &bearer)]);
        assert_eq!(status, 200, "{head}{body}");
        session_id(&head)
    };
    let alices = open(&alice);
    // bob's cap is his own: alice's one session does not use it up.
    let bobs = open(&bob);
    let bearer = format!("Bearer {alice}");
    assert_eq!(
        post(&authority, &[("Authorization", &bearer)]).0,
        429,
        "alice's cap is 1"
    );
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    let on = |token: &str, session: &str| {
        let bearer = format!("Bearer {token}");
        post_body(
            &authority,
            &[
                ("Authorization", &bearer),
                ("Mcp-Session-Id", session),
                ("MCP-Protocol-Version", "2025-11-25"),
            ],
            &list,
        )
    };
    let (status, _, body) = on(&bob, &alices);
    assert_eq!(status, 404, "bob cannot use alice's session: {body}");
    assert!(!body.contains("\"tools\""), "{body}");
    assert_eq!(delete(&authority, &bob, &alices), 404);
    assert_eq!(delete(&authority, &alice, &bobs), 404);
    assert_eq!(on(&alice, &alices).0, 200);
    assert_eq!(on(&bob, &bobs).0, 200);

    // alice's call in flight does not count against bob's bound.
    let slow = std::thread::scope(|scope| {
        let authority = &authority;
        let alice = &alice;
        let running =
            scope.spawn(move || call(authority, alice, "slow", json!({"seconds": 2}), json!({})));
        wait_for(&upstream.server.stats.calls, 1, "alice's call");
        let bobs_call = call(
            authority,
            &bob,
            "echo",
            json!({"message": "bob"}),
            json!({}),
        );
        assert_eq!(bobs_call["isError"], json!(false), "{bobs_call}");
        let alices_second = call(authority, alice, "echo", json!({"message": "a"}), json!({}));
        assert_eq!(
            alices_second["_meta"]["brain.dev/outcome"]["error_type"],
            json!("limited"),
            "alice's own bound is 1: {alices_second}"
        );
        running.join().unwrap()
    });
    assert_eq!(slow["isError"], json!(false), "{slow}");
}

/// alice and carol, two users of acme, log in through one OAuth app; a policy names alice as
/// the principal (`Brain::User::"<iss>|alice"`, built from the verified JWT only). Only alice
/// sees and calls `echo`: carol's `tools/list` leaves it out, her call is `policy_denied`
/// whatever her `_meta` says, and the server counts one call.
#[test]
fn a_policy_on_the_principal_tells_two_users_of_one_tenant_apart() {
    use tests::oauth::{ALICE, AuthorizationServer, CAROL, jwt_claims};
    let (port, resource) = free_resource();
    let authorization =
        AuthorizationServer::start_with(&resource, 300, &[("BRAIN_TEST_AS_JWT", "1")]);
    let upstream = upstream();
    let config = hostile_config(upstream.dir.path(), &upstream.server.url, |serve| {
        *serve = json!({"authorization": {"issuer": authorization.issuer,
            "resource": resource, "tenant_claim": "tenant"}});
    });
    let policy = format!(
        "@id(\"alice-echoes\")\npermit (principal == Brain::User::\"{}|{ALICE}\", \
         action == Brain::Action::\"tool:echo\", resource);\n",
        authorization.issuer
    );
    std::fs::write(upstream.dir.path().join("echo.cedar"), policy).unwrap();
    let mut host: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    host["policies"] = json!({"files": ["echo.cedar"]});
    std::fs::write(&config, host.to_string()).unwrap();
    let serving = Serving::start_at(&format!("127.0.0.1:{port}"), &config, &upstream.state, &[]);
    let authority = serving.authority();
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let alice = tokio.block_on(authorization.user_token(&resource, ALICE));
    let carol = tokio.block_on(authorization.user_token(&resource, CAROL));
    let (a, c) = (jwt_claims(&alice), jwt_claims(&carol));
    assert_eq!(
        (a["tenant"].as_str(), c["tenant"].as_str()),
        (Some("acme"), Some("acme"))
    );

    let listed = |token: &str| {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}})
        .to_string();
        let bearer = format!("Bearer {token}");
        let (status, _, body) = post_body(
            &authority,
            &[
                ("Authorization", &bearer),
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/list"),
            ],
            &body,
        );
        assert_eq!(status, 200, "{body}");
        let listed = message(&body)["result"].clone();
        names(&listed)
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
    };
    assert!(listed(&alice).contains(&"echo".to_owned()));
    assert!(
        !listed(&carol).contains(&"echo".to_owned()),
        "hidden by scope"
    );

    let alices = call(
        &authority,
        &alice,
        "echo",
        json!({"message": "a"}),
        json!({}),
    );
    assert_eq!(alices["isError"], json!(false), "{alices}");
    // carol claims alice's identity where a client may write: it is never read.
    let carols = call(
        &authority,
        &carol,
        "echo",
        json!({"message": "c"}),
        json!({"brain.dev/scope": {"principal": format!("{}|{ALICE}", authorization.issuer)}}),
    );
    assert_eq!(carols["isError"], json!(true), "{carols}");
    let outcome = &carols["_meta"]["brain.dev/outcome"];
    assert_eq!(outcome["error_type"], json!("policy_denied"), "{carols}");
    assert_eq!(outcome["unknown_outcome"], json!(false), "{carols}");
    let told = carols["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        told.contains("no policy permits \"echo\" for Brain::User::"),
        "{told}"
    );
    assert_eq!(
        upstream
            .server
            .stats
            .calls
            .load(std::sync::atomic::Ordering::SeqCst),
        1,
        "one call reached the server"
    );
}

/// Through serve, a call an `@approval` policy holds comes back `approval_required` with its
/// approval id in `_meta["brain.dev/outcome"]`, nothing sent. globex, retrying acme's call id
/// with acme's arguments, asks its own approval; globex's approver neither lists, shows nor
/// approves acme's. Approved by acme's approver, acme's retry runs once; globex's stays held.
#[test]
fn serve_hands_out_approval_ids_and_keeps_tenants_apart() {
    use sha2::{Digest, Sha256};
    const OPS: &str = "acme-approver-token";
    const GLOBEX_OPS: &str = "globex-approver-token";
    let hex = |token: &str| -> String {
        Sha256::digest(token.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let upstream = upstream();
    let config = hostile_config(upstream.dir.path(), &upstream.server.url, |_| {});
    std::fs::write(
        upstream.dir.path().join("refunds.cedar"),
        "@id(\"refunds-need-a-person\")\n@approval\npermit (principal, \
         action == Brain::Action::\"tool:echo\", resource)\n\
         when { context.call.approval.granted == true };\n",
    )
    .unwrap();
    let mut host: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    host["policies"] = json!({"files": ["refunds.cedar"]});
    host["approvals"] = json!({"approvers": [
        {"name": "ops", "tenants": ["acme"], "token_sha256": hex(OPS)},
        {"name": "globex-ops", "tenants": ["globex"], "token_sha256": hex(GLOBEX_OPS)},
    ]});
    std::fs::write(&config, host.to_string()).unwrap();
    let serving = Serving::start(&config, &upstream.state, &[]);
    let authority = serving.authority();
    let counted = || {
        upstream
            .server
            .stats
            .calls
            .load(std::sync::atomic::Ordering::SeqCst)
    };
    let refund = json!({"message": "refund 10"});
    let meta = json!({"brain.dev/call_id": "refund-1"});
    let held = |result: &Value| -> String {
        assert_eq!(result["isError"], json!(true), "{result}");
        let outcome = &result["_meta"]["brain.dev/outcome"];
        assert_eq!(
            outcome["error_type"],
            json!("approval_required"),
            "{result}"
        );
        assert_eq!(outcome["unknown_outcome"], json!(false), "{result}");
        outcome["approval_id"]
            .as_str()
            .unwrap_or_else(|| panic!("no approval id: {result}"))
            .to_owned()
    };
    let acmes = held(&call(
        &authority,
        ACME,
        "echo",
        refund.clone(),
        meta.clone(),
    ));
    let globexs = held(&call(
        &authority,
        GLOBEX,
        "echo",
        refund.clone(),
        meta.clone(),
    ));
    assert_ne!(acmes, globexs, "one tenant's call is not another's");
    assert_eq!(counted(), 0, "a held call is never sent");

    let approvals = |token: &str, args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_brain-harness"))
            .args(["--config", &config, "--state", &upstream.state, "approvals"])
            .args(args)
            .env_remove("RUST_LOG")
            .env("BRAIN_APPROVER_TOKEN", token)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let listed = approvals(GLOBEX_OPS, &["list", "--all", "--json"]);
    assert!(listed.status.success(), "{listed:?}");
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.contains(&globexs), "{listed}");
    assert!(
        !listed.contains(&acmes),
        "globex's approver sees acme's: {listed}"
    );
    for verb in ["show", "approve", "deny"] {
        let tried = approvals(GLOBEX_OPS, &[verb, &acmes]);
        assert_eq!(tried.status.code(), Some(2), "{verb}: {tried:?}");
        assert!(
            String::from_utf8_lossy(&tried.stderr).contains("is not pending for this approver"),
            "{verb}: {tried:?}"
        );
    }
    let scoped = approvals(GLOBEX_OPS, &["list", "--tenant", "acme"]);
    assert_eq!(scoped.status.code(), Some(2), "{scoped:?}");

    assert!(approvals(OPS, &["approve", &acmes]).status.success());
    let ran = call(&authority, ACME, "echo", refund.clone(), meta.clone());
    assert_eq!(ran["isError"], json!(false), "{ran}");
    assert_eq!(counted(), 1);
    assert_eq!(
        held(&call(
            &authority,
            GLOBEX,
            "echo",
            refund.clone(),
            meta.clone()
        )),
        globexs,
        "acme's approval is not globex's"
    );
    let replayed = call(&authority, ACME, "echo", refund, meta);
    assert_eq!(
        replayed["_meta"]["brain.dev/outcome"]["replayed"],
        json!(true),
        "{replayed}"
    );
    assert_eq!(counted(), 1, "ran once");
}

/// serve answers a well-formed 2026-07-28 `tools/call` or `tools/list` itself (its stateless
/// path, without rmcp's per-request service) and leaves anything else to rmcp: both answer
/// alike. An allowed `Origin` is rmcp's to judge, so each request goes once without one (serve's
/// own path) and once with one (rmcp's); statuses and messages match, progress streams and
/// errors included, and the upstream counts each call once.
#[test]
fn the_stateless_path_answers_as_rmcp_does() {
    let upstream = upstream_with(
        |_| {},
        |name, binding| {
            if name == "slow" {
                binding["tenants"] = json!(["globex"]);
            }
        },
    );
    let serving = Serving::start(&upstream.config, &upstream.state, &[]);
    let authority = serving.authority();
    let bearer = format!("Bearer {ACME}");
    let meta = |call_id: &str| {
        json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "progressToken": format!("token-{call_id}"), "brain.dev/call_id": call_id})
    };
    // (status, the messages of the body: JSON, or each SSE `data:`), with the client's call id
    // and progress token made one.
    let send = |method: &str, name: Option<&str>, params: Value, rmcp: bool| {
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
        let mut headers = vec![
            ("Authorization", bearer.as_str()),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", method),
        ];
        if let Some(name) = name {
            headers.push(("Mcp-Name", name));
        }
        if rmcp {
            headers.push(("Origin", "http://localhost:3000"));
        }
        let (status, _, body) = post_body(&authority, &headers, &body.to_string());
        let messages: Vec<Value> = match serde_json::from_str(&body) {
            Ok(message) => vec![message],
            Err(_) => body
                .lines()
                .filter_map(|line| line.strip_prefix("data: "))
                .filter_map(|data| serde_json::from_str(data).ok())
                .collect(),
        };
        let text = serde_json::to_string(&messages)
            .unwrap()
            .replace("-rmcp", "");
        (status, serde_json::from_str::<Value>(&text).unwrap())
    };
    // (method, `Mcp-Name`, the tool in the body, its arguments, whether `_meta` is whole).
    let cases = [
        ("tools/list", None, None, json!(null), true),
        (
            "tools/call",
            Some("echo"),
            Some("echo"),
            json!({"message": "hi"}),
            true,
        ),
        (
            "tools/call",
            Some("progress"),
            Some("progress"),
            json!({"steps": 2}),
            true,
        ),
        // Another tenant's tool, as one that does not exist.
        (
            "tools/call",
            Some("slow"),
            Some("slow"),
            json!({"seconds": 0}),
            true,
        ),
        // Refused by the gate: arguments off the schema.
        (
            "tools/call",
            Some("echo"),
            Some("echo"),
            json!({"message": 5}),
            true,
        ),
        // rmcp's own refusals, which the stateless path leaves to it.
        (
            "tools/call",
            Some("other"),
            Some("echo"),
            json!({"message": "hi"}),
            true,
        ),
        (
            "tools/call",
            Some("echo"),
            Some("echo"),
            json!({"message": "hi"}),
            false,
        ),
    ];
    let params = |tool: Option<&str>, arguments: &Value, whole: bool, id: &str| {
        let mut meta = meta(id);
        if !whole {
            meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"});
        }
        match tool {
            Some(tool) => json!({"name": tool, "arguments": arguments, "_meta": meta}),
            None => json!({"_meta": meta}),
        }
    };
    let calls = &upstream.server.stats.calls;
    for (n, (method, name, tool, arguments, whole)) in cases.into_iter().enumerate() {
        let own = send(
            method,
            name,
            params(tool, &arguments, whole, &format!("case-{n}")),
            false,
        );
        let id = format!("case-{n}-rmcp");
        let rmcp = send(method, name, params(tool, &arguments, whole, &id), true);
        assert_eq!(
            own, rmcp,
            "{method} {name:?}: serve's own answer, then rmcp's"
        );
        assert!(own.0 == 200 || own.0 == 400, "{own:?}");
    }
    // echo and progress, each once through each path.
    assert_eq!(tests::server::Stats::get(calls), 4);
}
