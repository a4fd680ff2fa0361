//! The OAuth grants' store: the same tests against each backend (memory, SQLite, and
//! PostgreSQL in a throwaway cluster the test starts). Each "process" is another handle on the
//! same store (another connection, as another process or replica would have): generations are
//! compared and swapped, one refresher at a time holds the claim, an expired claim is taken
//! over, a logout's tombstone is never overwritten by a refresher finishing late, and tokens
//! issued on behalf of users are pruned once long expired.

use std::sync::Arc;
use std::time::Duration;

use brain_runtime::auth::{Expected, GrantKey, GrantState, GrantWrite, TokenStore};
use brain_runtime::journal::{Durability, Journal};

/// Where a test's grants live.
enum Backend {
    Memory(Journal),
    Sqlite(tempfile::TempDir),
    Postgres(tests::postgres::Cluster),
}

impl Backend {
    fn memory() -> Backend {
        Backend::Memory(Journal::memory())
    }

    fn sqlite() -> Backend {
        Backend::Sqlite(tempfile::tempdir().unwrap())
    }

    fn postgres() -> Backend {
        Backend::Postgres(tests::postgres::Cluster::start())
    }

    /// Another process's handle on the backend's store.
    async fn process(&self) -> Arc<dyn TokenStore> {
        self.journal().await.grants()
    }

    /// Another process's journal on the backend's store.
    async fn journal(&self) -> Journal {
        match self {
            Backend::Memory(journal) => journal.clone(),
            Backend::Sqlite(dir) => {
                Journal::sqlite(&dir.path().join("state.db"), Durability::Normal).unwrap()
            }
            Backend::Postgres(cluster) => Journal::postgres(&cluster.url).await.unwrap(),
        }
    }
}

fn key(tenant: &str) -> GrantKey {
    GrantKey {
        grant: "sha256:grant-of-the-test".into(),
        tenant: tenant.into(),
    }
}

fn tokens(sealed: &str) -> GrantWrite {
    GrantWrite {
        state: GrantState::Valid,
        binding: "search".into(),
        resource: "http://127.0.0.1:9/mcp".into(),
        scopes: vec!["mcp:basic".into(), "offline_access".into()],
        expires_at: Some(1_900_000_000),
        rotates: Some(true),
        sealed: Some(sealed.into()),
    }
}

fn claimed(generation: i64, owner: &str) -> Expected {
    Expected::Claimed {
        generation,
        owner: owner.into(),
    }
}

async fn a_write_bumps_the_generation_and_a_stale_one_is_refused(backend: Backend) {
    let a = backend.process().await;
    let b = backend.process().await;
    assert!(a.load(&key("t")).await.unwrap().is_none());
    assert_eq!(
        a.write(&key("t"), &Expected::Generation(0), &tokens("one"))
            .await
            .unwrap(),
        Some(1)
    );
    // B read generation 0 before A wrote: its write is refused.
    assert_eq!(
        b.write(&key("t"), &Expected::Generation(0), &tokens("two"))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        b.write(&key("t"), &Expected::Generation(1), &tokens("two"))
            .await
            .unwrap(),
        Some(2)
    );
    assert_eq!(
        b.write(&key("t"), &Expected::Generation(5), &tokens("three"))
            .await
            .unwrap(),
        None,
        "a generation the row never had"
    );
    let grant = a.load(&key("t")).await.unwrap().expect("the row");
    assert_eq!(grant.generation, 2);
    assert_eq!(grant.written, tokens("two"));
    assert_eq!(grant.refresher, None);
    // Another tenant's grant is another row.
    assert!(a.load(&key("other")).await.unwrap().is_none());
    assert_eq!(
        a.write(&key("other"), &Expected::Any, &tokens("other"))
            .await
            .unwrap(),
        Some(1)
    );
    assert_eq!(
        a.load(&key("t")).await.unwrap().unwrap().written.sealed,
        Some("two".into())
    );
}

async fn one_refresher_at_a_time_and_only_it_writes(backend: Backend) {
    let a = backend.process().await;
    let b = backend.process().await;
    assert!(a.claim(&key("t"), 0, "a", 60_000).await.unwrap());
    // The first claim made the row, empty, at generation 0.
    let grant = b.load(&key("t")).await.unwrap().expect("the claimed row");
    assert_eq!(grant.generation, 0);
    assert_eq!(grant.written.sealed, None);
    assert_eq!(grant.refresher.as_deref(), Some("a"));
    assert!(
        grant
            .claim_left_ms
            .is_some_and(|left| left > 50_000 && left <= 60_000)
    );
    assert!(!b.claim(&key("t"), 0, "b", 60_000).await.unwrap());
    assert!(
        a.claim(&key("t"), 0, "a", 60_000).await.unwrap(),
        "renewed by its holder"
    );
    assert_eq!(
        b.write(&key("t"), &claimed(0, "b"), &tokens("b's"))
            .await
            .unwrap(),
        None,
        "not b's claim"
    );
    assert_eq!(
        a.write(&key("t"), &claimed(0, "a"), &tokens("a's"))
            .await
            .unwrap(),
        Some(1)
    );
    let grant = b.load(&key("t")).await.unwrap().unwrap();
    assert_eq!(
        (grant.generation, grant.refresher),
        (1, None),
        "the write ends the claim"
    );
    assert!(
        !b.claim(&key("t"), 0, "b", 60_000).await.unwrap(),
        "a stale generation"
    );
    assert!(b.claim(&key("t"), 1, "b", 60_000).await.unwrap());
    // A failed token request gives the claim up for the next process.
    a.release(&key("t"), 1, "a").await.unwrap();
    assert_eq!(
        a.load(&key("t"))
            .await
            .unwrap()
            .unwrap()
            .refresher
            .as_deref(),
        Some("b"),
        "only its holder releases a claim"
    );
    b.release(&key("t"), 1, "b").await.unwrap();
    assert_eq!(a.load(&key("t")).await.unwrap().unwrap().refresher, None);
    assert!(a.claim(&key("t"), 1, "a", 60_000).await.unwrap());
}

async fn an_expired_claim_is_taken_over_and_its_holder_cannot_write(backend: Backend) {
    let a = backend.process().await;
    let b = backend.process().await;
    assert_eq!(
        a.write(&key("t"), &Expected::Any, &tokens("first"))
            .await
            .unwrap(),
        Some(1)
    );
    assert!(a.claim(&key("t"), 1, "a", 300).await.unwrap());
    assert!(!b.claim(&key("t"), 1, "b", 60_000).await.unwrap());
    tokio::time::sleep(Duration::from_millis(600)).await;
    let grant = b.load(&key("t")).await.unwrap().unwrap();
    assert_eq!(grant.refresher, None, "an expired claim is no one's");
    assert!(b.claim(&key("t"), 1, "b", 60_000).await.unwrap());
    assert_eq!(
        a.write(&key("t"), &claimed(1, "a"), &tokens("late"))
            .await
            .unwrap(),
        None,
        "overtaken"
    );
    assert_eq!(
        b.write(&key("t"), &claimed(1, "b"), &tokens("b's"))
            .await
            .unwrap(),
        Some(2)
    );
}

async fn racing_claimers_have_one_winner(backend: Backend) {
    let mut racers = Vec::new();
    for i in 0..8 {
        let store = backend.process().await;
        racers.push(tokio::spawn(async move {
            store
                .claim(&key("t"), 0, &format!("process-{i}"), 60_000)
                .await
                .unwrap()
        }));
    }
    let mut winners = 0;
    for racer in racers {
        winners += usize::from(racer.await.unwrap());
    }
    assert_eq!(winners, 1);
}

async fn a_logout_is_not_undone_by_a_late_refresher(backend: Backend) {
    let refresher = backend.process().await;
    let user = backend.process().await;
    assert_eq!(
        user.write(&key("t"), &Expected::Any, &tokens("logged in"))
            .await
            .unwrap(),
        Some(1)
    );
    assert!(refresher.claim(&key("t"), 1, "r", 60_000).await.unwrap());
    let tombstone = GrantWrite {
        state: GrantState::LoggedOut,
        sealed: None,
        ..tokens("")
    };
    assert_eq!(
        user.write(&key("t"), &Expected::Any, &tombstone)
            .await
            .unwrap(),
        Some(2)
    );
    assert_eq!(
        refresher
            .write(&key("t"), &claimed(1, "r"), &tokens("refreshed"))
            .await
            .unwrap(),
        None
    );
    let grant = user.load(&key("t")).await.unwrap().unwrap();
    assert_eq!(grant.written.state, GrantState::LoggedOut);
    assert_eq!(grant.written.sealed, None);
}

async fn the_listing_shows_no_tokens(backend: Backend) {
    let store = backend.process().await;
    for tenant in ["b", "a"] {
        store
            .write(&key(tenant), &Expected::Any, &tokens("secret-tokens"))
            .await
            .unwrap();
    }
    let grants = store.list().await.unwrap();
    let tenants: Vec<&str> = grants.iter().map(|g| g.key.tenant.as_str()).collect();
    assert_eq!(tenants, ["a", "b"]);
    assert!(grants.iter().all(|g| g.written.sealed.is_none()));
    assert_eq!(grants[0].written.scopes, ["mcp:basic", "offline_access"]);
    let debug = format!("{grants:?} {:?}", tokens("secret-tokens"));
    assert!(!debug.contains("secret-tokens"), "{debug}");
}

/// Tokens issued on behalf of users are a kind of their own: the journal's pruning deletes
/// those expired for longer than its retention, and leaves the live ones and every other grant.
async fn issued_tokens_long_expired_are_pruned(backend: Backend) {
    let journal = backend.journal().await.retention(Duration::from_secs(60));
    let store = journal.grants();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let issued = |user: &str| GrantKey {
        grant: format!("{}sha256:{user}", GrantKey::ISSUED),
        tenant: "acme".into(),
    };
    let expiring = |at: i64| GrantWrite {
        expires_at: Some(at),
        ..tokens("sealed")
    };
    for (key, at) in [
        (issued("alice"), now - 3600),
        (issued("bob"), now + 3600),
        (issued("carol"), now - 30),
        (key("acme"), now - 3600),
    ] {
        store
            .write(&key, &Expected::Any, &expiring(at))
            .await
            .unwrap();
    }
    journal.prune().await.unwrap();
    let mut left: Vec<String> = (store.list().await.unwrap().into_iter())
        .map(|grant| grant.key.grant)
        .collect();
    left.sort();
    assert_eq!(
        left,
        [
            "issued:sha256:bob",
            "issued:sha256:carol",
            "sha256:grant-of-the-test"
        ],
        "alice's, expired an hour ago, went; carol's is within the retention"
    );
}

macro_rules! tests {
    ($backend:ident: $($name:ident),* $(,)?) => {
        mod $backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Backend::$backend()).await
                }
            )*
        }
    };
}

tests!(memory:
    a_write_bumps_the_generation_and_a_stale_one_is_refused,
    one_refresher_at_a_time_and_only_it_writes,
    an_expired_claim_is_taken_over_and_its_holder_cannot_write,
    racing_claimers_have_one_winner,
    a_logout_is_not_undone_by_a_late_refresher,
    the_listing_shows_no_tokens,
);
tests!(sqlite:
    issued_tokens_long_expired_are_pruned,
    a_write_bumps_the_generation_and_a_stale_one_is_refused,
    one_refresher_at_a_time_and_only_it_writes,
    an_expired_claim_is_taken_over_and_its_holder_cannot_write,
    racing_claimers_have_one_winner,
    a_logout_is_not_undone_by_a_late_refresher,
    the_listing_shows_no_tokens,
);
tests!(postgres:
    issued_tokens_long_expired_are_pruned,
    a_write_bumps_the_generation_and_a_stale_one_is_refused,
    one_refresher_at_a_time_and_only_it_writes,
    an_expired_claim_is_taken_over_and_its_holder_cannot_write,
    racing_claimers_have_one_winner,
    a_logout_is_not_undone_by_a_late_refresher,
    the_listing_shows_no_tokens,
);
