//! The Redis session store against a real `redis-server` (`ptc_tests::redis`): round trips of
//! arbitrary bytes, Redis' own expiry and its refresh on load, isolation of callers, failing fast
//! and clearly while Redis is down, recovering (with the state kept) once it is back, and never a
//! password in what the store says.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ptc_core::server::state::redis::redis_key;
use ptc_core::server::state::{StateKey, StateStore, open};
use ptc_tests::redis::RedisServer;

/// A TTL long enough never to expire during a test.
const LONG: Duration = Duration::from_secs(600);

/// How long a failing operation may take while Redis is down (connection refused: at once).
const FAIL_FAST: Duration = Duration::from_secs(3);

fn store(url: &str) -> Arc<dyn StateStore> {
    open(url).unwrap_or_else(|e| panic!("open {url}: {e}"))
}

/// A plain connection, to look at what the store wrote.
async fn raw(server: &RedisServer) -> redis::aio::MultiplexedConnection {
    redis::Client::open(server.url.as_str())
        .expect("a Redis URL")
        .get_multiplexed_async_connection()
        .await
        .unwrap_or_else(|e| panic!("connect to {}: {e}", server.url))
}

async fn pttl(server: &RedisServer, key: &StateKey) -> i64 {
    redis::cmd("PTTL")
        .arg(redis_key(key))
        .query_async(&mut raw(server).await)
        .await
        .expect("PTTL")
}

async fn exists(server: &RedisServer, key: &StateKey) -> bool {
    redis::cmd("EXISTS")
        .arg(redis_key(key))
        .query_async::<i64>(&mut raw(server).await)
        .await
        .expect("EXISTS")
        == 1
}

#[tokio::test]
async fn any_bytes_round_trip_and_a_missing_session_is_none() {
    let Some(server) = ptc_tests::redis::start() else {
        return;
    };
    let store = store(&server.url);
    assert_eq!(
        store.describe(),
        format!("redis://127.0.0.1:{}/0", server.port)
    );
    let key = StateKey::new("alice", "s1");
    assert_eq!(store.load(&key, LONG).await.unwrap(), None);
    assert!(
        !exists(&server, &key).await,
        "a load of nothing creates nothing"
    );

    let every_byte: Vec<u8> = (0..=255u8).chain([0xff, 0xfe, 0x00, 0xc3]).collect();
    assert!(String::from_utf8(every_byte.clone()).is_err());
    let large: Vec<u8> = (0..1 << 20).map(|i: u32| (i * 7 % 251) as u8).collect();
    for bytes in [every_byte, Vec::new(), large] {
        store.save(&key, bytes.clone(), LONG).await.unwrap();
        assert_eq!(store.load(&key, LONG).await.unwrap(), Some(bytes));
    }
}

#[tokio::test]
async fn keys_are_the_versioned_hash_never_the_names() {
    let Some(server) = ptc_tests::redis::start() else {
        return;
    };
    let store = store(&server.url);
    let key = StateKey::new("alice@example.com", "my-session");
    store.save(&key, b"x".to_vec(), LONG).await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut raw(&server).await)
        .await
        .unwrap();
    assert_eq!(keys, vec![format!("ptc:state:v1:{}", key.id())]);
}

#[tokio::test]
async fn state_expires_after_its_ttl_and_a_load_starts_the_ttl_again() {
    let Some(server) = ptc_tests::redis::start() else {
        return;
    };
    let store = store(&server.url);

    // Expiry: Redis drops the key by itself after the TTL.
    let short = StateKey::new("alice", "short");
    let saved = Instant::now();
    store
        .save(&short, b"x".to_vec(), Duration::from_millis(300))
        .await
        .unwrap();
    let left = pttl(&server, &short).await;
    assert!(
        (1..=300).contains(&left),
        "PTTL {left} after a save with 300 ms"
    );
    // Polled without the store (its load would start the TTL again), for at most 5 s.
    while exists(&server, &short).await {
        assert!(
            saved.elapsed() < Duration::from_secs(5),
            "still there after 5 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        saved.elapsed() >= Duration::from_millis(290),
        "gone too early"
    );
    assert_eq!(store.load(&short, LONG).await.unwrap(), None);

    // Refresh: a load sets the TTL it is given.
    let key = StateKey::new("alice", "refreshed");
    store
        .save(&key, b"x".to_vec(), Duration::from_secs(60))
        .await
        .unwrap();
    let after_save = pttl(&server, &key).await;
    assert!((50_000..=60_000).contains(&after_save), "{after_save}");
    assert!(store.load(&key, LONG).await.unwrap().is_some());
    let after_load = pttl(&server, &key).await;
    assert!(
        (590_000..=600_000).contains(&after_load),
        "PTTL {after_load} after a load with 600 s"
    );
    // And a short TTL given to a load shortens it: the TTL is the idle time from the last use.
    assert!(
        store
            .load(&key, Duration::from_secs(30))
            .await
            .unwrap()
            .is_some()
    );
    let shortened = pttl(&server, &key).await;
    assert!((20_000..=30_000).contains(&shortened), "{shortened}");
}

#[tokio::test]
async fn a_zero_or_huge_ttl_is_kept_within_what_redis_accepts() {
    let Some(server) = ptc_tests::redis::start() else {
        return;
    };
    let store = store(&server.url);
    let key = StateKey::new("alice", "ttl");
    store
        .save(&key, b"x".to_vec(), Duration::ZERO)
        .await
        .unwrap();
    store
        .save(&key, b"x".to_vec(), Duration::MAX)
        .await
        .unwrap();
    let max = pttl(&server, &key).await;
    let cap = ptc_core::server::state::MAX_TTL.as_millis() as i64;
    assert!(max > cap - 60_000 && max <= cap, "{max}");
    assert!(store.load(&key, Duration::MAX).await.unwrap().is_some());
    assert!(store.load(&key, Duration::ZERO).await.unwrap().is_some());
}

#[tokio::test]
async fn forget_removes_the_state() {
    let Some(server) = ptc_tests::redis::start() else {
        return;
    };
    let store = store(&server.url);
    let (a, b) = (StateKey::new("alice", "a"), StateKey::new("alice", "b"));
    store.save(&a, b"a".to_vec(), LONG).await.unwrap();
    store.save(&b, b"b".to_vec(), LONG).await.unwrap();
    store.forget(&a).await.unwrap();
    assert_eq!(store.load(&a, LONG).await.unwrap(), None);
    assert!(!exists(&server, &a).await);
    assert_eq!(store.load(&b, LONG).await.unwrap(), Some(b"b".to_vec()));
    store
        .forget(&a)
        .await
        .expect("forgetting nothing is no error");
}

#[tokio::test]
async fn one_session_name_of_two_callers_is_two_sessions() {
    let Some(server) = ptc_tests::redis::start() else {
        return;
    };
    let store = store(&server.url);
    let (alice, bob) = (StateKey::new("alice", "s"), StateKey::new("bob", "s"));
    store.save(&alice, b"alice's".to_vec(), LONG).await.unwrap();
    assert_eq!(store.load(&bob, LONG).await.unwrap(), None);
    store.save(&bob, b"bob's".to_vec(), LONG).await.unwrap();
    store.forget(&bob).await.unwrap();
    assert_eq!(
        store.load(&alice, LONG).await.unwrap(),
        Some(b"alice's".to_vec())
    );
}

#[tokio::test]
async fn two_stores_on_one_redis_share_sessions_as_replicas_do() {
    let Some(server) = ptc_tests::redis::start() else {
        return;
    };
    let (replica_a, replica_b) = (store(&server.url), store(&server.url));
    let key = StateKey::new("alice", "s");
    replica_a.save(&key, b"v1".to_vec(), LONG).await.unwrap();
    assert_eq!(
        replica_b.load(&key, LONG).await.unwrap(),
        Some(b"v1".to_vec())
    );
    replica_b.save(&key, b"v2".to_vec(), LONG).await.unwrap();
    assert_eq!(
        replica_a.load(&key, LONG).await.unwrap(),
        Some(b"v2".to_vec())
    );
}

#[tokio::test]
async fn while_redis_is_down_requests_fail_fast_and_after_a_restart_the_state_is_there() {
    let Some(mut server) = ptc_tests::redis::start() else {
        return;
    };
    let store = store(&server.url);
    let key = StateKey::new("alice", "survives");
    store.save(&key, b"before".to_vec(), LONG).await.unwrap();

    server.stop();
    let expected = format!(
        "the session store redis://127.0.0.1:{}/0 cannot be reached: ",
        server.port
    );
    for round in 0..2 {
        let started = Instant::now();
        let load = store.load(&key, LONG).await.expect_err("a load while down");
        let save = store
            .save(&key, b"during".to_vec(), LONG)
            .await
            .expect_err("a save while down");
        let forget = store.forget(&key).await.expect_err("a forget while down");
        for e in [&load, &save, &forget] {
            assert!(e.0.starts_with(&expected), "round {round}: {e}");
            assert!(e.0.len() > expected.len(), "the cause is named: {e}");
        }
        assert!(
            started.elapsed() < FAIL_FAST,
            "round {round}: three failures took {:?}",
            started.elapsed()
        );
    }

    server.restart();
    assert_eq!(
        store
            .load(&key, LONG)
            .await
            .expect("the first load after the restart"),
        Some(b"before".to_vec()),
        "kept in the append-only file"
    );
    store.save(&key, b"after".to_vec(), LONG).await.unwrap();
    assert_eq!(
        store.load(&key, LONG).await.unwrap(),
        Some(b"after".to_vec())
    );

    // A restart while the store is connected and idle: the next request still succeeds.
    server.restart();
    assert_eq!(
        store
            .load(&key, LONG)
            .await
            .expect("the first load after a second restart"),
        Some(b"after".to_vec())
    );
}

#[tokio::test]
async fn a_store_opened_while_redis_is_down_works_once_it_is_up() {
    let Some(mut server) = ptc_tests::redis::start() else {
        return;
    };
    server.stop();
    let store = store(&server.url);
    let key = StateKey::new("alice", "s");
    let e = store.load(&key, LONG).await.expect_err("down");
    assert!(e.0.contains("cannot be reached"), "{e}");
    server.restart();
    store.save(&key, b"x".to_vec(), LONG).await.unwrap();
    assert_eq!(store.load(&key, LONG).await.unwrap(), Some(b"x".to_vec()));
}

#[tokio::test]
async fn the_password_never_appears_in_what_the_store_says() {
    const CANARY: &str = "s3cret-canary";
    // Nothing listens on port 1: the connection is refused.
    let unreachable = store(&format!("redis://:{CANARY}@127.0.0.1:1/0"));
    assert_eq!(unreachable.describe(), "redis://127.0.0.1:1/0");
    let key = StateKey::new("alice", "s");
    let errors = [
        unreachable.load(&key, LONG).await.expect_err("refused"),
        unreachable
            .save(&key, vec![1], LONG)
            .await
            .expect_err("refused"),
        unreachable.forget(&key).await.expect_err("refused"),
    ];
    for e in &errors {
        assert!(
            e.0.starts_with("the session store redis://127.0.0.1:1/0 cannot be reached: "),
            "{e}"
        );
        assert!(!e.to_string().contains(CANARY), "{e}");
        assert!(!format!("{e:?}").contains(CANARY), "{e:?}");
    }

    // A real Redis that refuses the password (it has none set; and no user `someone`).
    let Some(server) = ptc_tests::redis::start() else {
        return;
    };
    for url in [
        format!("redis://:{CANARY}@127.0.0.1:{}/0", server.port),
        format!("redis://someone:{CANARY}@127.0.0.1:{}/0", server.port),
    ] {
        let refused = store(&url);
        assert!(!refused.describe().contains(CANARY));
        for _ in 0..2 {
            let e = refused
                .load(&key, LONG)
                .await
                .expect_err("a refused password");
            assert!(
                e.0.starts_with(&format!(
                    "the session store redis://127.0.0.1:{}/0 ",
                    server.port
                )),
                "{e}"
            );
            assert!(!e.to_string().contains(CANARY), "{e}");
        }
    }
}

#[tokio::test]
async fn a_unix_socket_url_reaches_the_same_redis() {
    let Some(server) = ptc_tests::redis::start() else {
        return;
    };
    let Some(socket) = &server.socket else {
        ptc_tests::skip("the temporary directory's path is too long for a Unix socket");
        return;
    };
    let url = format!("redis+unix://{}?db=0", socket.display());
    let over_socket = store(&url);
    assert_eq!(over_socket.describe(), url);
    let key = StateKey::new("alice", "s");
    over_socket.save(&key, b"x".to_vec(), LONG).await.unwrap();
    assert_eq!(
        store(&server.url).load(&key, LONG).await.unwrap(),
        Some(b"x".to_vec())
    );
}

#[tokio::test]
async fn a_redis_that_never_answers_fails_the_request_within_seconds() {
    // Connections complete (the kernel's backlog) but nothing ever answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener");
    let port = silent.local_addr().expect("its address").port();
    let store = store(&format!("redis://:s3cret-canary@127.0.0.1:{port}/0"));
    let key = StateKey::new("alice", "s");
    let started = Instant::now();
    let e = store.load(&key, LONG).await.expect_err("no answer");
    let took = started.elapsed();
    assert!(
        e.0.starts_with(&format!(
            "the session store redis://127.0.0.1:{port}/0 cannot be reached: "
        )),
        "{e}"
    );
    assert!(!e.0.contains("s3cret-canary"), "{e}");
    assert!(e.0.contains("no answer within"), "{e}");
    assert!(took < Duration::from_secs(7), "took {took:?}");
}
