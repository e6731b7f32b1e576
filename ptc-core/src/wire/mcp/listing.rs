//! The generation of an MCP client's tool listing: bumped on every new session and on every
//! `notifications/tools/list_changed`, at the moment the transport reads it.
//!
//! rmcp hands notifications to their handler (and to a subscription's channel) on tasks of their
//! own, so a handler may run after the response the server sent next has been delivered: a
//! program's next call could then be sent as if the listing had not moved. Reading the
//! notification in the transport, before rmcp sees any later message, keeps the order the server
//! wrote: once a response is in, every change announced before it has been counted.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::RoleClient;
use rmcp::model::{JsonRpcMessage, ServerNotification};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::{IntoTransport, Transport};

use super::Inner;

/// The generation and a wake-up for whoever compares it.
#[derive(Default)]
pub(super) struct Listing {
    generation: AtomicU64,
    pub(super) changed: tokio::sync::Notify,
}

impl Listing {
    /// The current generation: a listing taken at an older one may be stale.
    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub(super) fn bump(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        // A permit is kept when nobody waits, so a change during a comparison is not lost.
        self.changed.notify_one();
    }
}

/// Waits for changes of a client's tool listing without keeping the client alive.
pub struct ListingWatch {
    pub(super) client: std::sync::Weak<Inner>,
    pub(super) listing: Arc<Listing>,
}

impl ListingWatch {
    /// The client, once its listing changed again; `None` once the client is gone.
    pub async fn changed(&self) -> Option<super::McpClient> {
        self.listing.changed.notified().await;
        self.client
            .upgrade()
            .map(|inner| super::McpClient { inner })
    }
}

/// A transport that bumps `listing` as it reads a `tools/list_changed` notification, of either
/// protocol era (the newer one sends it on the `subscriptions/listen` stream).
pub(super) struct Watched<T> {
    inner: T,
    listing: Arc<Listing>,
}

/// `transport`, watched for changes of the tool listing.
pub(super) fn watched<T, E, A>(
    transport: T,
    listing: Arc<Listing>,
) -> Watched<impl Transport<RoleClient, Error = E>>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    Watched {
        inner: transport.into_transport(),
        listing,
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Watched<T> {
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await?;
        if let JsonRpcMessage::Notification(n) = &message
            && matches!(
                n.notification,
                ServerNotification::ToolListChangedNotification(_)
            )
        {
            self.listing.bump();
        }
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
