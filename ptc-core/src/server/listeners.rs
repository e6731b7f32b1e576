//! The client sessions told when the host's tool list changes. A catalog refresh that adds,
//! removes or changes a tool changes `lisp_eval`'s definition (its description holds the inline
//! catalog), so each open session is sent `notifications/tools/list_changed`: a session of the
//! older protocol era on the session itself, one of the newer era (2026-07-28) on the
//! `subscriptions/listen` stream it opened for it.

use std::sync::Mutex;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::service::{Peer, SubscriptionSink};
use tokio_util::sync::CancellationToken;

/// How long one session may take to accept the notification: a client that stopped reading
/// must not hold up the refresh that tells the others.
const SEND_TIMEOUT: Duration = Duration::from_secs(2);

/// Where one session hears of a change.
#[derive(Clone)]
enum Listener {
    /// An older-era session, which may be sent notifications at any time.
    Session(Peer<RoleServer>),
    /// A newer-era `subscriptions/listen` stream that asked for `tools/list_changed`.
    Subscription(SubscriptionSink),
}

impl Listener {
    fn closed(&self) -> bool {
        match self {
            Listener::Session(peer) => peer.is_transport_closed(),
            Listener::Subscription(_) => false,
        }
    }

    async fn tell(&self, within: Duration) -> bool {
        let sent = async {
            match self {
                Listener::Session(peer) => peer.notify_tool_list_changed().await.is_ok(),
                Listener::Subscription(sink) => sink.notify_tool_list_changed().await.is_ok(),
            }
        };
        tokio::time::timeout(within, sent).await.unwrap_or(false)
    }
}

/// The sessions to tell, each under a key of its own.
///
/// A listener holds its session's sender, and rmcp ends a session only once every sender is
/// dropped (or after a drain of up to 5 s): so the host lets them all go when it stops
/// ([`Self::stop`]), at the end of stdio's input or at the HTTP host's shutdown.
pub(crate) struct Listeners {
    inner: Mutex<Registry>,
    stopping: CancellationToken,
    /// [`SEND_TIMEOUT`]; shorter in tests.
    send_timeout: Duration,
}

impl Default for Listeners {
    fn default() -> Self {
        Listeners {
            inner: Mutex::default(),
            stopping: CancellationToken::new(),
            send_timeout: SEND_TIMEOUT,
        }
    }
}

#[derive(Default)]
struct Registry {
    next: u64,
    listening: Vec<(u64, Listener)>,
}

impl Listeners {
    /// The registry, also after a panic elsewhere left its lock poisoned (it holds no invariant
    /// a panic could break).
    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds an older-era session (at its `notifications/initialized`).
    pub(crate) fn add_session(&self, peer: Peer<RoleServer>) {
        self.add(Listener::Session(peer));
    }

    /// Adds a newer-era subscription until [`Self::remove`] is called with the key returned.
    pub(crate) fn add_subscription(&self, sink: SubscriptionSink) -> u64 {
        self.add(Listener::Subscription(sink))
    }

    fn add(&self, listener: Listener) -> u64 {
        let mut registry = self.lock();
        let key = registry.next;
        registry.next += 1;
        if self.stopping.is_cancelled() {
            return key;
        }
        // Sessions that ended since are dropped here too, so the list does not grow with every
        // session a long-lived host has seen.
        registry.listening.retain(|(_, l)| !l.closed());
        registry.listening.push((key, listener));
        key
    }

    /// Removes the listener added under `key` (a subscription that ended).
    pub(crate) fn remove(&self, key: u64) {
        let mut registry = self.lock();
        registry.listening.retain(|(k, _)| *k != key);
    }

    /// Lets every listener go, and takes no more: the host is stopping.
    pub(crate) fn stop(&self) {
        self.stopping.cancel();
        let mut registry = self.lock();
        registry.listening.clear();
    }

    /// Completes when the host stops (a subscription's stream ends then).
    pub(crate) async fn stopped(&self) {
        self.stopping.cancelled().await;
    }

    /// Sends `notifications/tools/list_changed` to every listener at once; those that cannot
    /// take it any more are dropped. How many were told.
    pub(crate) async fn tell_all(&self) -> usize {
        let listening: Vec<(u64, Listener)> = {
            let registry = self.lock();
            registry.listening.clone()
        };
        let told = futures_util::future::join_all(
            listening
                .iter()
                .map(|(key, l)| async move { (*key, l.tell(self.send_timeout).await) }),
        )
        .await;
        let gone: Vec<u64> = told.iter().filter(|(_, ok)| !ok).map(|(k, _)| *k).collect();
        if !gone.is_empty() {
            let mut registry = self.lock();
            registry.listening.retain(|(k, _)| !gone.contains(k));
        }
        told.len() - gone.len()
    }
}

#[cfg(test)]
mod tests {
    use super::{Listener, Listeners};
    use rmcp::service::{RoleClient, RunningService};
    use rmcp::{RoleServer, ServerHandler, ServiceExt};

    /// A server that only answers the handshake.
    struct Quiet;
    impl ServerHandler for Quiet {}

    /// A session over an in-memory pipe: the server's side (whose peer is told) and the
    /// client's (which ends it).
    async fn session() -> (
        RunningService<RoleServer, Quiet>,
        RunningService<RoleClient, ()>,
    ) {
        let (a, b) = tokio::io::duplex(64 * 1024);
        let server = tokio::spawn(async move { Quiet.serve(tokio::io::split(a)).await.unwrap() });
        let client = ().serve(tokio::io::split(b)).await.unwrap();
        (server.await.unwrap(), client)
    }

    impl Listeners {
        fn len(&self) -> usize {
            self.lock().listening.len()
        }
    }

    #[tokio::test]
    async fn a_session_that_ended_is_not_told_and_is_dropped() {
        let listeners = Listeners::default();
        let (first, first_client) = session().await;
        let (second, _second_client) = session().await;
        listeners.add_session(first.peer().clone());
        listeners.add_session(second.peer().clone());
        assert_eq!(listeners.tell_all().await, 2);

        first_client.cancel().await.unwrap();
        first.waiting().await.unwrap();
        // Told no more, and dropped for it.
        assert_eq!(listeners.tell_all().await, 1);
        assert_eq!(listeners.len(), 1);

        // One that ended unseen is dropped when the next is added.
        let (third, third_client) = session().await;
        listeners.add_session(third.peer().clone());
        assert_eq!(listeners.len(), 2);
        third_client.cancel().await.unwrap();
        third.waiting().await.unwrap();
        let (fourth, _fourth_client) = session().await;
        listeners.add_session(fourth.peer().clone());
        assert_eq!(
            listeners.len(),
            2,
            "the ended session went when the next came"
        );
        assert_eq!(listeners.tell_all().await, 2);
    }

    #[tokio::test]
    async fn a_session_that_stopped_reading_is_given_up_on_without_holding_up_the_others() {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
        let listeners = Listeners {
            send_timeout: std::time::Duration::from_millis(200),
            ..Listeners::default()
        };
        // A client that completes the handshake and then reads nothing: the pipe holds less
        // than one notification, so the server's write waits for good.
        let (a, b) = tokio::io::duplex(32);
        let server = tokio::spawn(async move { Quiet.serve(tokio::io::split(a)).await.unwrap() });
        let (read, mut write) = tokio::io::split(b);
        let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"stalled","version":"1"}}}"#;
        write
            .write_all(format!("{init}\n").as_bytes())
            .await
            .unwrap();
        let mut answer = String::new();
        tokio::io::BufReader::new(read)
            .read_line(&mut answer)
            .await
            .unwrap();
        assert!(answer.contains(r#""id":0"#), "{answer}");
        write
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .await
            .unwrap();
        let stalled = server.await.unwrap();
        let (healthy, _client) = session().await;
        listeners.add_session(stalled.peer().clone());
        listeners.add_session(healthy.peer().clone());

        assert_eq!(listeners.tell_all().await, 1, "the reading session only");
        assert_eq!(listeners.len(), 1, "the stalled one is given up on");
        assert_eq!(listeners.tell_all().await, 1);
    }

    #[tokio::test]
    async fn a_removed_listener_is_not_told_and_a_stopped_host_tells_nobody() {
        let listeners = Listeners::default();
        let (first, _a) = session().await;
        let (second, _b) = session().await;
        let (third, _c) = session().await;
        let key = listeners.add(Listener::Session(first.peer().clone()));
        listeners.add(Listener::Session(second.peer().clone()));
        listeners.add(Listener::Session(third.peer().clone()));
        listeners.remove(key);
        assert_eq!(listeners.tell_all().await, 2, "only the ones not removed");

        listeners.stop();
        listeners.stopped().await;
        assert_eq!(listeners.len(), 0, "every sender let go");
        listeners.add_session(first.peer().clone());
        assert_eq!(listeners.tell_all().await, 0, "none taken after the stop");
    }
}
