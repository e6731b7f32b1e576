//! OAuth 2.1 for `mcp_http` upstreams, as the MCP authorization spec asks of a client: the access
//! token a hosted MCP server wants, obtained and kept fresh.
//!
//! The flows themselves are rmcp's (its `auth` feature, on the `oauth2` crate): discovery from
//! the upstream's `401` challenge (RFC 9728 protected resource metadata, then RFC 8414 or OpenID
//! configuration), the `resource` parameter (RFC 8707), PKCE S256, the `iss` check (RFC 9207)
//! and the metadata issuer check, Client ID Metadata Documents, Dynamic Client Registration
//! (RFC 7591), refresh with rotation. This module decides *when*: a request goes out with the
//! token held (refreshed first when it says it expired); a `401` with a challenge gets one
//! refresh, then a new grant; a `403 insufficient_scope` a new grant with the scopes it names
//! added, at most [`McpOAuthPlan::MAX_STEP_UPS`] times per call. A person's consent is asked
//! through the [`Consent`] of the call being made ([`asking`]).

mod consent;
mod grants;
mod hosted;

pub use consent::{
    Consent, ConsentCallback, ConsentFuture, LoopbackConsent, PersonConsent, asking, deliver,
};
pub use grants::{GrantStore, Grants, KEY_BYTES, MemoryGrants, StoreFuture};
pub use hosted::{HostedRoutes, hosted_routes};

use std::sync::Arc;

use ptc_plan::{CredentialBinding, McpOAuthPlan, OAuthClient, OAuthGrant, Secrets};
use rmcp::transport::AuthorizationManager;
use rmcp::transport::auth::AuthorizationMetadata;
use rmcp::transport::auth::{
    AuthError, AuthorizationRequest, AuthorizationSession, ClientCredentialsConfig,
    WWWAuthenticateParams,
};

use crate::call::contract::Reason;
use crate::credentials::binding;
use crate::credentials::redact::Redactor;

/// What an upstream answered that asks for (more) authorization: its `WWW-Authenticate`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Challenge {
    /// `401`: no token, or one the server no longer takes.
    Unauthorized(String),
    /// `403` with `error="insufficient_scope"`: a token without the scopes the call needs.
    InsufficientScope(String),
}

impl Challenge {
    /// The challenge in `header`, a `WWW-Authenticate` of the upstream at `resource`.
    pub(crate) fn of(header: &str, resource: &str) -> Challenge {
        let insufficient = url::Url::parse(resource)
            .is_ok_and(|base| WWWAuthenticateParams::parse(header, &base).is_insufficient_scope());
        match insufficient {
            true => Challenge::InsufficientScope(header.to_string()),
            false => Challenge::Unauthorized(header.to_string()),
        }
    }
}

/// Why a token could not be had: `auth_failed` (a refusal, a lying or broken authorization
/// server) or `auth_required` (a person must consent and none can be asked here). The message
/// names the rule (not the upstream: whoever reports it does) and has passed the redactor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OAuthError {
    pub reason: Reason,
    pub message: String,
}

/// One upstream's OAuth client and the grant it holds.
pub(crate) struct UpstreamOAuth {
    upstream: String,
    /// The MCP endpoint: the protected resource.
    url: String,
    plan: McpOAuthPlan,
    client_secret: Option<CredentialBinding>,
    secrets: Secrets,
    redactor: Redactor,
    /// Where the grant is kept, and whose it is (shared by every manager of this client, so a
    /// new authorization replaces the grant in one place).
    grants: Arc<Grants>,
    holder: String,
    /// The manager of the grant held, once there is one.
    manager: tokio::sync::Mutex<Option<AuthorizationManager>>,
    /// The client a dynamic registration made, and the authorization server (its issuer) it
    /// belongs to: used again for that server's next grants, never presented to another.
    registered: std::sync::Mutex<Option<Registration>>,
}

/// A client registered dynamically (RFC 7591) at one authorization server.
#[derive(Clone)]
struct Registration {
    issuer: String,
    client_id: String,
    client_secret: Option<String>,
}

impl UpstreamOAuth {
    /// The OAuth client of upstream `upstream` at `url`, for `holder` (a caller's subject, or
    /// empty for the deployment), whose grant is kept in `grants`. `credentials` and `secrets`
    /// resolve the client secret's binding.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        upstream: &str,
        url: &str,
        plan: &McpOAuthPlan,
        credentials: &[CredentialBinding],
        secrets: &Secrets,
        redactor: Redactor,
        grants: Arc<Grants>,
        holder: &str,
    ) -> Self {
        let client_secret = match &plan.client {
            OAuthClient::Registered {
                client_secret: Some(name),
                ..
            } => credentials.iter().find(|c| &c.name == name).cloned(),
            _ => None,
        };
        UpstreamOAuth {
            upstream: upstream.to_string(),
            url: url.to_string(),
            plan: plan.clone(),
            client_secret,
            secrets: secrets.clone(),
            redactor,
            grants,
            holder: holder.to_string(),
            manager: tokio::sync::Mutex::new(None),
            registered: std::sync::Mutex::new(None),
        }
    }

    /// The access token to send now (refreshed first when it says it has expired), registered
    /// with the redactor; `None` when no grant is held yet, so the request goes out without one
    /// and the server's challenge says how to get one.
    pub(crate) async fn token(&self) -> Result<Option<String>, OAuthError> {
        let manager = self.manager.lock().await;
        let Some(manager) = manager.as_ref() else {
            return Ok(None);
        };
        match manager.get_access_token().await {
            Ok(token) => {
                self.redactor.register(&token);
                Ok(Some(token))
            }
            // An expired grant without a refresh token (client credentials), or a refresh the
            // server refused: the request goes out bare and its challenge starts a new grant.
            Err(AuthError::AuthorizationRequired) => Ok(None),
            Err(e) => Err(self.failed("the token could not be refreshed", &e)),
        }
    }

    /// Obtains a grant that answers `challenge`: after a `401`, a refresh of the grant held if
    /// it has a refresh token (and `may_refresh`), else a new grant; after a
    /// `403 insufficient_scope`, a new grant with the scopes the challenge names added to those
    /// held.
    pub(crate) async fn authorize(
        &self,
        challenge: &Challenge,
        may_refresh: bool,
    ) -> Result<(), OAuthError> {
        let mut held = self.manager.lock().await;
        let (header, more_scopes) = match challenge {
            Challenge::Unauthorized(header) => {
                if may_refresh
                    && let Some(manager) = held.as_ref()
                    && let Ok(response) = manager.refresh_token().await
                {
                    use oauth2::TokenResponse;
                    self.redactor.register(response.access_token().secret());
                    return Ok(());
                }
                (header, false)
            }
            Challenge::InsufficientScope(header) => (header, true),
        };
        let (mut manager, metadata) = self.manager_for(header).await?;
        // A grant kept from before (another session of this holder, another replica) is used
        // if it still gives a token; only once per call, and never for more scopes.
        if held.is_none()
            && may_refresh
            && !more_scopes
            && let Some(token) = self.kept(&mut manager).await
        {
            self.redactor.register(&token);
            *held = Some(manager);
            return Ok(());
        }
        let mut scopes = self.plan.scopes.clone();
        if more_scopes {
            if let Some(old) = held.as_ref() {
                scopes.extend(old.get_current_scopes().await);
            }
            scopes.extend(challenge_scopes(header, &self.url));
            scopes.sort();
            scopes.dedup();
        }
        match self.plan.grant {
            OAuthGrant::ClientCredentials => {
                self.client_credentials(&mut manager, scopes).await?;
            }
            OAuthGrant::AuthorizationCode => {
                manager = self
                    .authorization_code(manager, &metadata, header, scopes)
                    .await?;
            }
        }
        *held = Some(manager);
        Ok(())
    }

    /// A new manager whose authorization server was discovered from `challenge`, its endpoints
    /// checked; and that server's metadata.
    async fn manager_for(
        &self,
        challenge: &str,
    ) -> Result<(AuthorizationManager, AuthorizationMetadata), OAuthError> {
        let mut manager = AuthorizationManager::new(self.url.as_str())
            .await
            .map_err(|e| self.failed("the OAuth client could not be set up", &e))?;
        manager.set_credential_store(self.grants.holder(&self.upstream, &self.holder));
        let resolution = manager
            .resolve_metadata_from_challenge(Some(challenge))
            .await
            .map_err(|e| self.failed("discovering the authorization server failed", &e))?;
        let metadata = resolution.metadata;
        for (what, endpoint) in [
            (
                "authorization_endpoint",
                Some(&metadata.authorization_endpoint),
            ),
            ("token_endpoint", Some(&metadata.token_endpoint)),
            (
                "registration_endpoint",
                metadata.registration_endpoint.as_ref(),
            ),
        ] {
            if let Some(endpoint) = endpoint.filter(|e| !e.is_empty())
                && !url::Url::parse(endpoint).is_ok_and(|u| ptc_plan::https_or_loopback(&u))
            {
                return Err(self.refused(format!(
                    "the authorization server's {what} `{endpoint}` is not https (http is \
                     allowed on a loopback address only): no secret is sent there"
                )));
            }
        }
        manager.set_metadata(metadata.clone());
        Ok((manager, metadata))
    }

    /// The access token of the grant kept for this holder, if there is one that gives one (its
    /// refresh token used if it expired).
    async fn kept(&self, manager: &mut AuthorizationManager) -> Option<String> {
        if !manager.initialize_from_store().await.ok()? {
            return None;
        }
        if let OAuthClient::Registered { client_id, .. } = &self.plan.client
            && let Some(secret) = self.secret().ok()?
        {
            let redirect = self.plan.redirect_uri.clone().unwrap_or_default();
            let config = rmcp::transport::auth::OAuthClientConfig::new(client_id.clone(), redirect)
                .with_client_secret(secret);
            manager.configure_client(config).ok()?;
        }
        manager.get_access_token().await.ok()
    }

    /// The client credentials grant: the deployment's own id and secret for a token.
    async fn client_credentials(
        &self,
        manager: &mut AuthorizationManager,
        scopes: Vec<String>,
    ) -> Result<(), OAuthError> {
        let OAuthClient::Registered { client_id, .. } = &self.plan.client else {
            return Err(self.refused(
                "the client_credentials grant needs a registered client id and secret".into(),
            ));
        };
        let secret = self.secret()?.unwrap_or_default();
        // None configured: those the challenge or the resource's metadata name (never every
        // scope the server supports; `offline_access` means nothing without a person).
        let scopes = match scopes.is_empty() {
            true => manager
                .select_initial_scopes(&[])
                .await
                .into_iter()
                .filter(|s| s != "offline_access")
                .collect(),
            false => scopes,
        };
        let config = ClientCredentialsConfig::ClientSecret {
            client_id: client_id.clone(),
            client_secret: secret,
            scopes,
            resource: Some(self.url.clone()),
        };
        manager
            .validate_client_credentials_metadata(&config)
            .and_then(|()| manager.configure_client_credentials(&config))
            .map_err(|e| self.failed("the client credentials grant cannot be used", &e))?;
        let response = manager
            .exchange_client_credentials(&config)
            .await
            .map_err(|e| self.failed("the client credentials grant was refused", &e))?;
        use oauth2::TokenResponse;
        self.redactor.register(response.access_token().secret());
        Ok(())
    }

    /// The authorization code grant: the person at `consent` opens the authorization URL and
    /// is sent back with a code, exchanged for the token (state, PKCE and issuer checked).
    async fn authorization_code(
        &self,
        mut manager: AuthorizationManager,
        metadata: &AuthorizationMetadata,
        challenge: &str,
        scopes: Vec<String>,
    ) -> Result<AuthorizationManager, OAuthError> {
        let redirect_uri = self.plan.redirect_uri.clone().unwrap_or_default();
        let mut request = AuthorizationRequest::new(redirect_uri.clone()).with_challenge(challenge);
        if !scopes.is_empty() {
            request = request.with_scopes(scopes);
        }
        request = match &self.plan.client {
            OAuthClient::Registered { client_id, .. } => {
                let request = request.with_preregistered_client(client_id.clone());
                match self.secret()? {
                    Some(secret) => request.with_client_secret(secret),
                    None => request,
                }
            }
            OAuthClient::MetadataDocument { url, .. } if takes_metadata_documents(metadata) => {
                request.with_client_metadata_url(url.clone())
            }
            OAuthClient::MetadataDocument { client_name, .. }
            | OAuthClient::Dynamic { client_name } => {
                let r = self
                    .registration(&mut manager, metadata, client_name, &redirect_uri)
                    .await?;
                let request = request.with_preregistered_client(r.client_id);
                match r.client_secret {
                    Some(secret) => request.with_client_secret(secret),
                    None => request,
                }
            }
        };
        let session = AuthorizationSession::new(manager, request)
            .await
            .map_err(|(_, e)| self.failed("the authorization could not start", &e))?;
        let url = session.get_authorization_url().to_string();
        let Some(consent) = consent::asker() else {
            return Err(OAuthError {
                reason: Reason::AuthRequired,
                message: self.redact(&format!(
                    "a person's OAuth consent is needed: open {url} (nobody can be asked from \
                     here; `ptc eval` asks at the terminal)"
                )),
            });
        };
        let callback = consent
            .consent(&self.upstream, &url, &redirect_uri)
            .await
            .map_err(|message| OAuthError {
                reason: Reason::AuthRequired,
                // The URL too: whoever reads this may consent another way (open it and run
                // the program again).
                message: self.redact(&format!(
                    "no OAuth consent was given: {message}; to consent, open {url}"
                )),
            })?;
        self.redactor.register(&callback.code);
        let response = session
            .handle_callback_with_issuer(
                &callback.code,
                &callback.state,
                callback.issuer.as_deref(),
            )
            .await
            .map_err(|e| self.failed("the authorization code could not be exchanged", &e))?;
        use oauth2::TokenResponse;
        self.redactor.register(response.access_token().secret());
        if let Some(refresh) = response.refresh_token() {
            self.redactor.register(refresh.secret());
        }
        Ok(session.auth_manager)
    }

    /// The client registered at `manager`'s authorization server: the one registered before
    /// if it belongs to that server, else a new registration (RFC 7591).
    async fn registration(
        &self,
        manager: &mut AuthorizationManager,
        metadata: &AuthorizationMetadata,
        client_name: &str,
        redirect_uri: &str,
    ) -> Result<Registration, OAuthError> {
        // The issuer was checked against the server asked; without one, the token endpoint
        // names the server.
        let issuer = metadata
            .issuer
            .clone()
            .unwrap_or_else(|| metadata.token_endpoint.clone());
        let known = self
            .registered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .filter(|r| r.issuer == issuer);
        if let Some(r) = known {
            return Ok(r);
        }
        let config = manager
            .register_client(client_name, redirect_uri, &[])
            .await
            .map_err(|e| self.failed("the client could not register", &e))?;
        if let Some(secret) = &config.client_secret {
            self.redactor.register(secret);
        }
        let r = Registration {
            issuer,
            client_id: config.client_id,
            client_secret: config.client_secret,
        };
        *self.registered.lock().unwrap_or_else(|e| e.into_inner()) = Some(r.clone());
        Ok(r)
    }

    /// The client secret, registered with the redactor (`None`: a public client).
    fn secret(&self) -> Result<Option<String>, OAuthError> {
        let Some(b) = &self.client_secret else {
            return Ok(None);
        };
        let secret = binding::resolve(b, &self.secrets)
            .map_err(|e| self.refused(format!("the client secret cannot be read: {}", e.0)))?;
        binding::register(&self.redactor, &secret);
        Ok(Some(secret.expose().to_string()))
    }

    /// `step` failed with `error`, whose causes are named too (rmcp's discovery error says
    /// where, its cause what).
    fn failed(&self, step: &str, error: &AuthError) -> OAuthError {
        let mut message = format!("{step}: {error}");
        let mut cause = std::error::Error::source(error);
        while let Some(c) = cause {
            message.push_str(&format!(": {c}"));
            cause = c.source();
        }
        self.refused(message)
    }

    fn refused(&self, message: String) -> OAuthError {
        OAuthError {
            reason: Reason::AuthFailed,
            message: self.redact(&message),
        }
    }

    fn redact(&self, text: &str) -> String {
        self.redactor.redact(text).into_owned()
    }
}

/// Whether the authorization server takes Client ID Metadata Documents (its metadata says so).
fn takes_metadata_documents(metadata: &AuthorizationMetadata) -> bool {
    metadata
        .additional_fields
        .get("client_id_metadata_document_supported")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false)
}

/// The scopes a challenge names (`scope="a b"`).
fn challenge_scopes(header: &str, resource: &str) -> Vec<String> {
    let Ok(base) = url::Url::parse(resource) else {
        return Vec::new();
    };
    WWWAuthenticateParams::parse(header, &base)
        .scope
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const RESOURCE: &str = "https://mcp.example.com/mcp";

    #[test]
    fn a_challenge_is_a_step_up_only_when_it_says_insufficient_scope() {
        let step_up = r#"Bearer error="insufficient_scope", scope="read admin""#;
        assert_eq!(
            Challenge::of(step_up, RESOURCE),
            Challenge::InsufficientScope(step_up.to_string())
        );
        for header in [
            r#"Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource""#,
            r#"Bearer error="invalid_token""#,
            "Bearer",
        ] {
            assert_eq!(
                Challenge::of(header, RESOURCE),
                Challenge::Unauthorized(header.to_string())
            );
        }
    }

    #[test]
    fn the_scopes_a_challenge_names_are_read_one_by_one() {
        assert_eq!(
            challenge_scopes(
                r#"Bearer error="insufficient_scope", scope="read  admin""#,
                RESOURCE
            ),
            ["read", "admin"]
        );
        assert!(challenge_scopes(r#"Bearer error="invalid_token""#, RESOURCE).is_empty());
        assert!(challenge_scopes(r#"Bearer scope="read""#, "not a url").is_empty());
    }

    #[test]
    fn metadata_documents_are_used_only_where_the_server_says_it_takes_them() {
        let metadata = |extra: serde_json::Value| -> AuthorizationMetadata {
            let mut m = serde_json::json!({
                "authorization_endpoint": "https://as.example.com/authorize",
                "token_endpoint": "https://as.example.com/token",
            });
            m.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            serde_json::from_value(m).unwrap()
        };
        assert!(takes_metadata_documents(&metadata(
            serde_json::json!({"client_id_metadata_document_supported": true})
        )));
        assert!(!takes_metadata_documents(&metadata(
            serde_json::json!({"client_id_metadata_document_supported": false})
        )));
        assert!(!takes_metadata_documents(&metadata(serde_json::json!({}))));
        assert!(!takes_metadata_documents(&metadata(
            serde_json::json!({"client_id_metadata_document_supported": "yes"})
        )));
    }
}
