//! Opening a session: the transport, then the handshake of the newer era (`server/discover`)
//! or the older one (`initialize`), and the OAuth challenges an upstream answers either with,
//! each answered by the upstream's OAuth client before the attempt is made again.

use std::sync::atomic::Ordering;
use std::time::Instant;

use rmcp::model::ProtocolVersion;
use rmcp::service::{ClientLifecycleMode, ClientServiceExt};

use super::result::{self, Subject};
use super::{Connector, Live, McpClient, listing, stdio, with_stderr};
use crate::call::contract::{Reason, ToolError};
use crate::credentials::upstream_oauth::Challenge;

impl McpClient {
    /// One connection: [`McpClient::attempt`] with the newer era's probe, then, when the server
    /// answered the probe with something that is not a discover answer (some servers answer a
    /// method they do not know with an empty result instead of an error), once more with the
    /// `initialize` handshake on a fresh connection; such a server is then spoken to in the older
    /// era on every reconnection. A handshake the server refused with an OAuth challenge is
    /// tried again once the upstream's OAuth client has answered it.
    pub(super) async fn connect(
        &self,
        subject: &Subject<'_>,
        deadline: Instant,
        timed_out: ToolError,
    ) -> Result<Live, ToolError> {
        let mut authorizations = 0;
        loop {
            let legacy = self.inner.legacy_only.load(Ordering::Acquire);
            match self.attempt(subject, deadline, &timed_out, legacy).await {
                Ok(live) => return Ok(live),
                Err(Attempt::NotADiscoverAnswer) if !legacy => {
                    self.inner.legacy_only.store(true, Ordering::Release);
                }
                Err(Attempt::NotADiscoverAnswer) => {
                    return Err(subject.error(
                        Reason::UpstreamUnavailable,
                        "the handshake failed: the server answered `initialize` with something \
                         that is not an initialize result",
                    ));
                }
                Err(Attempt::Challenged(challenge, refused)) => {
                    self.answer(subject, &challenge, &mut authorizations)
                        .await
                        .map_err(|e| e.unwrap_or(refused))?;
                }
                Err(Attempt::Failed(error)) => return Err(error),
            }
        }
    }

    /// The OAuth challenge a failed request carries, when the upstream is reached over HTTP.
    pub(super) fn challenge_of(&self, error: &rmcp::ServiceError) -> Option<Challenge> {
        let Connector::Http(setup) = &self.inner.connector else {
            return None;
        };
        error
            .auth_challenge()
            .map(|c| Challenge::of(c, setup.url()))
    }

    /// Answers an upstream's OAuth challenge with its OAuth client, at most
    /// `1 +` [`McpOAuthPlan::MAX_STEP_UPS`] times per connection or call (`authorizations`
    /// counts them). `Err(None)`: the upstream has no OAuth client, or the count is spent; the
    /// refusal itself is the error.
    pub(super) async fn answer(
        &self,
        subject: &Subject<'_>,
        challenge: &Challenge,
        authorizations: &mut u32,
    ) -> Result<(), Option<ToolError>> {
        let Connector::Http(setup) = &self.inner.connector else {
            return Err(None);
        };
        let Some(oauth) = setup.oauth() else {
            return Err(None);
        };
        if *authorizations > ptc_plan::McpOAuthPlan::MAX_STEP_UPS {
            return Err(None);
        }
        // A refresh is tried first only once: a refreshed token refused again needs a new grant
        // (the server may have moved to another authorization server).
        let may_refresh = *authorizations == 0;
        *authorizations += 1;
        oauth
            .authorize(challenge, may_refresh)
            .await
            .map_err(|e| Some(subject.error(e.reason, e.message)))
    }

    /// One connection attempt: spawn or open, then the handshake (`legacy`: the `initialize`
    /// handshake only).
    async fn attempt(
        &self,
        subject: &Subject<'_>,
        deadline: Instant,
        timed_out: &ToolError,
        legacy: bool,
    ) -> Result<Live, Attempt> {
        let lifecycle = if legacy {
            ClientLifecycleMode::Initialize
        } else {
            ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: None,
            }
        };
        match &self.inner.connector {
            Connector::Stdio { plan, env } => {
                let (transport, tail) = stdio::spawn(
                    &self.inner.upstream,
                    plan,
                    env,
                    &self.inner.redactor,
                    self.inner.refusals.clone(),
                )
                .map_err(|e| {
                    Attempt::Failed(subject.error(
                        Reason::UpstreamUnavailable,
                        format!("cannot start `{}`: {e}", plan.command),
                    ))
                })?;
                let watched = listing::watched(transport, self.inner.listing.clone());
                let serve = self.handler().serve_with_lifecycle(watched, lifecycle);
                match tokio::time::timeout_at(deadline.into(), serve).await {
                    Err(_) => Err(Attempt::Failed(with_stderr(
                        timed_out.clone(),
                        &tail,
                        &self.inner.redactor,
                    ))),
                    Ok(Err(e)) if not_a_discover_answer(&e) => Err(Attempt::NotADiscoverAnswer),
                    Ok(Err(e)) => Err(Attempt::Failed(with_stderr(
                        subject.error(
                            Reason::UpstreamUnavailable,
                            format!("the handshake failed: {}", result::bounded(&e.to_string())),
                        ),
                        &tail,
                        &self.inner.redactor,
                    ))),
                    Ok(Ok(service)) => Ok(Live {
                        service,
                        stderr: Some(tail),
                    }),
                }
            }
            Connector::Http(setup) => {
                let watched = listing::watched(setup.transport(), self.inner.listing.clone());
                let serve = self.handler().serve_with_lifecycle(watched, lifecycle);
                match tokio::time::timeout_at(deadline.into(), serve).await {
                    Err(_) => Err(Attempt::Failed(timed_out.clone())),
                    Ok(Err(e)) if not_a_discover_answer(&e) => Err(Attempt::NotADiscoverAnswer),
                    Ok(Err(e)) => match e.auth_challenge().map(|c| Challenge::of(c, setup.url())) {
                        Some(challenge) => {
                            Err(Attempt::Challenged(challenge, init_error(subject, e)))
                        }
                        None => Err(Attempt::Failed(init_error(subject, e))),
                    },
                    Ok(Ok(service)) => Ok(Live {
                        service,
                        stderr: None,
                    }),
                }
            }
        }
    }
}

/// How a connection attempt failed.
enum Attempt {
    /// The server answered the `server/discover` probe (or `initialize`) with a result of
    /// another kind: it does not speak the era asked for.
    NotADiscoverAnswer,
    /// The server refused the handshake with an OAuth challenge (and this refusal).
    Challenged(Challenge, ToolError),
    Failed(ToolError),
}

/// Whether the handshake got an answer of the wrong kind (a `{}` for `server/discover`), which
/// is how some older servers answer a method they do not know.
fn not_a_discover_answer(error: &rmcp::service::ClientInitializeError) -> bool {
    matches!(
        error,
        rmcp::service::ClientInitializeError::ExpectedInitResult(Some(_))
    )
}

fn init_error(subject: &Subject, error: rmcp::service::ClientInitializeError) -> ToolError {
    use rmcp::service::ClientInitializeError as E;
    let handshake = Subject {
        step: Some("the handshake failed"),
        ..*subject
    };
    match &error {
        E::TransportError { error: e, .. } => result::transport_error(&handshake, e.error.as_ref()),
        _ => handshake.error(
            Reason::UpstreamUnavailable,
            result::bounded(&error.to_string()),
        ),
    }
}
