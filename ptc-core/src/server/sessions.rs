//! MCP sessions that name the replica holding them.
//!
//! A legacy-era session lives in the replica that answered `initialize`, and the load balancer
//! sees only the `Mcp-Session-Id` header of later requests. Hashing that header sends them to
//! a replica chosen by the hash, not to the one holding the session. With a replica id, every
//! session id starts with `<replica-id>-`, so a balancer routes by that prefix (nginx: a `map`
//! on `$http_mcp_session_id`, docs/operations.md) and the `initialize` itself may go anywhere.

use futures_util::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::WorkerTransport;
use rmcp::transport::common::server_side_http::session_id;
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker, create_local_session,
};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId};

/// Longest replica id: it travels in every request's `Mcp-Session-Id` header.
pub const MAX_REPLICA_ID_CHARS: usize = 32;

/// Why a replica id cannot be used, or `None` when it can: 1 to 32 ASCII letters, digits, `_`,
/// so it is safe in a header and needs no escaping in a balancer's pattern.
pub fn replica_id_problem(id: &str) -> Option<String> {
    if id.is_empty() || id.chars().count() > MAX_REPLICA_ID_CHARS {
        return Some(format!(
            "the replica id `{id}` must have 1 to {MAX_REPLICA_ID_CHARS} characters"
        ));
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_'))
    {
        return Some(format!(
            "the replica id `{id}` contains {c:?}; use ASCII letters, digits and `_` only"
        ));
    }
    None
}

/// rmcp's in-memory sessions, with ids that start with the replica id.
#[derive(Debug, Default)]
pub struct ReplicaSessions {
    prefix: String,
    local: LocalSessionManager,
}

impl ReplicaSessions {
    /// Sessions whose ids start with `<replica_id>-` (no prefix when `None`).
    pub fn new(replica_id: Option<&str>) -> Self {
        ReplicaSessions {
            prefix: replica_id.map(|r| format!("{r}-")).unwrap_or_default(),
            local: LocalSessionManager::default(),
        }
    }
}

impl SessionManager for ReplicaSessions {
    type Error = LocalSessionManagerError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let id: SessionId = format!("{}{}", self.prefix, session_id()).into();
        let (handle, worker) = create_local_session(id.clone(), self.local.session_config.clone());
        self.local.sessions.write().await.insert(id.clone(), handle);
        Ok((id, WorkerTransport::spawn(worker)))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.local.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.local.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.local.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.local.create_stream(id, message).await
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.local.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.local.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.local.resume(id, last_event_id).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn session_ids_start_with_the_replica_id() {
        let sessions = ReplicaSessions::new(Some("r1"));
        let (id, _transport) = sessions.create_session().await.unwrap();
        assert!(id.starts_with("r1-"), "{id}");
        assert!(id.len() > "r1-".len() + 30, "{id}");
        assert!(sessions.has_session(&id).await.unwrap());
        sessions.close_session(&id).await.unwrap();
        assert!(!sessions.has_session(&id).await.unwrap());
    }

    /// Messages a client posts to a session reach rmcp's session, and one that names no live
    /// session is refused rather than dropped.
    #[tokio::test]
    async fn posted_messages_go_to_the_session_they_name() {
        let sessions = ReplicaSessions::new(Some("r1"));
        let notification: ClientJsonRpcMessage = serde_json::from_value(serde_json::json!(
            {"jsonrpc": "2.0", "method": "notifications/initialized"}
        ))
        .expect("a client notification");
        let unknown: SessionId = "r1-no-such-session".to_string().into();
        let refused = |r: Result<(), LocalSessionManagerError>| match r {
            Err(LocalSessionManagerError::SessionNotFound(id)) => id.to_string(),
            other => panic!("not refused as an unknown session: {other:?}"),
        };
        let err = sessions
            .accept_message(&unknown, notification.clone())
            .await;
        assert_eq!(refused(err), "r1-no-such-session");
        let (id, _transport) = sessions.create_session().await.unwrap();
        sessions.close_session(&id).await.unwrap();
        let err = sessions.accept_message(&id, notification).await;
        assert_eq!(refused(err), id.to_string());
    }

    #[tokio::test]
    async fn without_a_replica_id_session_ids_are_plain() {
        let sessions = ReplicaSessions::new(None);
        let (id, _transport) = sessions.create_session().await.unwrap();
        assert!(uuid_like(&id), "{id}");
    }

    fn uuid_like(id: &str) -> bool {
        id.len() == 36 && id.chars().filter(|c| *c == '-').count() == 4
    }

    #[test]
    fn replica_ids_are_short_header_safe_names() {
        assert_eq!(replica_id_problem("r1"), None);
        assert_eq!(replica_id_problem("eu_west_2"), None);
        assert_eq!(replica_id_problem(&"a".repeat(32)), None);
        assert_eq!(
            replica_id_problem(&"a".repeat(33)).unwrap(),
            format!(
                "the replica id `{}` must have 1 to 32 characters",
                "a".repeat(33)
            )
        );
        assert_eq!(
            replica_id_problem("").unwrap(),
            "the replica id `` must have 1 to 32 characters"
        );
        assert_eq!(
            replica_id_problem("r-1").unwrap(),
            "the replica id `r-1` contains '-'; use ASCII letters, digits and `_` only"
        );
        assert_eq!(
            replica_id_problem("r\n1").unwrap(),
            "the replica id `r\n1` contains '\\n'; use ASCII letters, digits and `_` only"
        );
    }
}
