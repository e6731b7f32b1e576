//! Where the grants of upstreams called with OAuth live: one record per upstream and holder (the
//! caller's subject, or the deployment), in memory by default, or in a shared store (the host's
//! Redis session store) so replicas continue a person's grant. In a shared store every record is
//! sealed with AES-256-GCM (ring) under a key from a file, its name bound in as associated data:
//! a record copied under another caller's name does not open.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};
use sha2::{Digest, Sha256};

/// A boxed, sendable future.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// Bytes by name: what a grant store keeps. The error says what failed, without secrets.
pub trait GrantStore: Send + Sync {
    /// The record saved as `name`, if any.
    fn load<'a>(&'a self, name: &'a str) -> StoreFuture<'a, Option<Vec<u8>>>;
    /// Saves `bytes` as `name`, in place of what was there.
    fn save<'a>(&'a self, name: &'a str, bytes: Vec<u8>) -> StoreFuture<'a, ()>;
    /// Forgets `name`.
    fn forget<'a>(&'a self, name: &'a str) -> StoreFuture<'a, ()>;
}

/// Grants in this process's memory (the default): gone when it stops.
#[derive(Default)]
pub struct MemoryGrants(Mutex<HashMap<String, Vec<u8>>>);

impl GrantStore for MemoryGrants {
    fn load<'a>(&'a self, name: &'a str) -> StoreFuture<'a, Option<Vec<u8>>> {
        let found = self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned();
        Box::pin(std::future::ready(Ok(found)))
    }

    fn save<'a>(&'a self, name: &'a str, bytes: Vec<u8>) -> StoreFuture<'a, ()> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string(), bytes);
        Box::pin(std::future::ready(Ok(())))
    }

    fn forget<'a>(&'a self, name: &'a str) -> StoreFuture<'a, ()> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
        Box::pin(std::future::ready(Ok(())))
    }
}

/// The grants of a process: where they are kept and, in a shared store, the key that seals them.
pub struct Grants {
    store: Arc<dyn GrantStore>,
    seal: Option<LessSafeKey>,
}

impl Default for Grants {
    fn default() -> Self {
        Grants::in_memory()
    }
}

impl std::fmt::Debug for Grants {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grants")
            .field("sealed", &self.seal.is_some())
            .finish_non_exhaustive()
    }
}

/// The length of a grant key: AES-256.
pub const KEY_BYTES: usize = 32;

impl Grants {
    /// Grants in memory.
    pub fn in_memory() -> Self {
        Grants {
            store: Arc::new(MemoryGrants::default()),
            seal: None,
        }
    }

    /// Grants in `store`, sealed with `key` (32 bytes: `openssl rand 32 > grant.key`).
    pub fn sealed(store: Arc<dyn GrantStore>, key: &[u8]) -> Result<Self, String> {
        if key.len() != KEY_BYTES {
            return Err(format!(
                "a grant key is {KEY_BYTES} bytes (AES-256), this one is {}: make one with \
                 `openssl rand 32 > grant.key`",
                key.len()
            ));
        }
        let key = UnboundKey::new(&AES_256_GCM, key)
            .map_err(|_| "the grant key cannot be used for AES-256-GCM".to_string())?;
        Ok(Grants {
            store,
            seal: Some(LessSafeKey::new(key)),
        })
    }

    /// The rmcp credential store of `holder`'s grant of `upstream`.
    pub(crate) fn holder(self: &Arc<Self>, upstream: &str, holder: &str) -> HolderGrant {
        // Hashed: a name says nothing of who holds what, and no subject can run into the
        // upstream's name.
        let mut digest = Sha256::new();
        digest.update((upstream.len() as u64).to_le_bytes());
        digest.update(upstream.as_bytes());
        digest.update(holder.as_bytes());
        let name: String = digest
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        HolderGrant {
            grants: self.clone(),
            name: format!("grant:{name}"),
            read: Mutex::new(None),
        }
    }

    fn seal(&self, name: &str, plain: Vec<u8>) -> Result<Vec<u8>, String> {
        let Some(key) = &self.seal else {
            return Ok(plain);
        };
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| "no randomness for a nonce".to_string())?;
        let mut sealed = plain;
        key.seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(name.as_bytes()),
            &mut sealed,
        )
        .map_err(|_| "the grant could not be sealed".to_string())?;
        let mut out = nonce.to_vec();
        out.extend(sealed);
        Ok(out)
    }

    fn open(&self, name: &str, bytes: Vec<u8>) -> Result<Vec<u8>, String> {
        let Some(key) = &self.seal else {
            return Ok(bytes);
        };
        if bytes.len() < NONCE_LEN {
            return Err("a stored grant is too short to be sealed".into());
        }
        let (nonce, sealed) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce)
            .map_err(|_| "a stored grant has no nonce".to_string())?;
        let mut sealed = sealed.to_vec();
        let plain = key
            .open_in_place(nonce, Aad::from(name.as_bytes()), &mut sealed)
            .map_err(|_| {
                "a stored grant does not open with this grant key (another key, or not this \
                 holder's)"
                    .to_string()
            })?;
        Ok(plain.to_vec())
    }
}

/// One holder's grant of one upstream, as rmcp's OAuth client keeps it.
pub(crate) struct HolderGrant {
    grants: Arc<Grants>,
    name: String,
    /// The grant as last read or written, used again while its access token is fresh: rmcp
    /// reads the grant before every request, which in a shared store is a round trip and a
    /// decryption. Once the token nears its end the store is read again, so a refresh (and
    /// its rotated refresh token) another replica made is the one used.
    read: Mutex<Option<StoredCredentials>>,
}

/// Whether `grant`'s access token is still short of where rmcp refreshes it (`min(30,
/// lifetime / 2)` seconds before its end, at least 1) at `now`: until then a grant read once is
/// good. A token that does not say when it ends is never kept.
fn fresh(grant: &StoredCredentials, now: u64) -> bool {
    use oauth2::TokenResponse;
    let (Some(token), Some(received)) = (&grant.token_response, grant.token_received_at) else {
        return false;
    };
    let Some(lifetime) = token.expires_in().map(|d| d.as_secs()) else {
        return false;
    };
    let buffer = 30.min(lifetime / 2).max(1);
    now < (received + lifetime).saturating_sub(buffer)
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl HolderGrant {
    fn remember(&self, grant: Option<StoredCredentials>) {
        *self.read.lock().unwrap_or_else(|e| e.into_inner()) = grant;
    }
}

fn store_error(e: String) -> AuthError {
    AuthError::CredentialStoreError(e)
}

#[async_trait::async_trait]
impl CredentialStore for HolderGrant {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let read = self.read.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(grant) = read.filter(|g| fresh(g, now_secs())) {
            return Ok(Some(grant));
        }
        let Some(bytes) = self
            .grants
            .store
            .load(&self.name)
            .await
            .map_err(store_error)?
        else {
            self.remember(None);
            return Ok(None);
        };
        // A record that does not open or parse is no grant: the person is asked again.
        let grant = self.grants.open(&self.name, bytes).and_then(|plain| {
            serde_json::from_slice::<StoredCredentials>(&plain).map_err(|e| e.to_string())
        });
        match grant {
            Ok(grant) => {
                self.remember(Some(grant.clone()));
                Ok(Some(grant))
            }
            Err(why) => {
                tracing::warn!(%why, "a stored OAuth grant was set aside");
                Ok(None)
            }
        }
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let plain = serde_json::to_vec(&credentials)
            .map_err(|e| store_error(format!("a grant could not be written: {e}")))?;
        let sealed = self.grants.seal(&self.name, plain).map_err(store_error)?;
        self.remember(None);
        self.grants
            .store
            .save(&self.name, sealed)
            .await
            .map_err(store_error)?;
        self.remember(Some(credentials));
        Ok(())
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.remember(None);
        self.grants
            .store
            .forget(&self.name)
            .await
            .map_err(store_error)
    }

    /// A refresh token the server refused for good: the grant is dropped, so the next call asks
    /// the person again rather than try it once more.
    async fn on_refresh_token_rejected(
        &self,
        _credentials: &StoredCredentials,
    ) -> Result<(), AuthError> {
        self.clear().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(client: &str) -> StoredCredentials {
        StoredCredentials::new(client.into(), None, vec!["read".into()], Some(7))
    }

    #[tokio::test]
    async fn a_holder_s_grant_is_kept_under_a_name_of_their_own() {
        let grants = Arc::new(Grants::in_memory());
        let alice = grants.holder("linear", "alice");
        let bob = grants.holder("linear", "bob");
        alice.save(grant("c-alice")).await.unwrap();
        assert_eq!(alice.load().await.unwrap().unwrap().client_id, "c-alice");
        assert!(bob.load().await.unwrap().is_none());
        assert!(
            grants
                .holder("github", "alice")
                .load()
                .await
                .unwrap()
                .is_none()
        );
        alice.clear().await.unwrap();
        assert!(alice.load().await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_sealed_grant_opens_only_with_its_key_and_under_its_own_name() {
        let store: Arc<dyn GrantStore> = Arc::new(MemoryGrants::default());
        let grants = Arc::new(Grants::sealed(store.clone(), &[7u8; 32]).unwrap());
        let alice = grants.holder("linear", "alice");
        alice.save(grant("c-secret-client")).await.unwrap();
        let raw = store.load(&alice.name).await.unwrap().unwrap();
        assert!(
            !String::from_utf8_lossy(&raw).contains("c-secret-client"),
            "sealed at rest"
        );
        assert_eq!(
            alice.load().await.unwrap().unwrap().client_id,
            "c-secret-client"
        );

        // Copied under bob's name, it does not open for bob.
        let bob = grants.holder("linear", "bob");
        store.save(&bob.name, raw.clone()).await.unwrap();
        assert!(bob.load().await.unwrap().is_none());
        // Another key does not open it either.
        let other = Arc::new(Grants::sealed(store.clone(), &[8u8; 32]).unwrap());
        assert!(
            other
                .holder("linear", "alice")
                .load()
                .await
                .unwrap()
                .is_none()
        );
        // A record too short to hold a nonce is set aside, not read past its end.
        store.save(&alice.name, vec![1, 2, 3, 4, 5]).await.unwrap();
        assert!(alice.load().await.unwrap().is_none());
        // A key of the wrong length is refused at start.
        let short = Grants::sealed(store, &[1u8; 31]).unwrap_err();
        assert!(short.contains("32 bytes"), "{short}");
    }

    /// A store that counts its reads.
    #[derive(Default)]
    struct Counted(MemoryGrants, std::sync::atomic::AtomicUsize);

    impl GrantStore for Counted {
        fn load<'a>(&'a self, name: &'a str) -> StoreFuture<'a, Option<Vec<u8>>> {
            self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            self.0.load(name)
        }
        fn save<'a>(&'a self, name: &'a str, bytes: Vec<u8>) -> StoreFuture<'a, ()> {
            self.0.save(name, bytes)
        }
        fn forget<'a>(&'a self, name: &'a str) -> StoreFuture<'a, ()> {
            self.0.forget(name)
        }
    }

    fn with_token(lifetime: u64, received: u64) -> StoredCredentials {
        let token: rmcp::transport::auth::OAuthTokenResponse = serde_json::from_value(
            serde_json::json!({"access_token": "at-1", "token_type": "bearer",
                               "expires_in": lifetime}),
        )
        .unwrap();
        StoredCredentials::new("c".into(), Some(token), vec![], Some(received))
    }

    /// A grant whose token is fresh is read from the store once; one near its end is read again
    /// every time (another replica may have refreshed it).
    #[tokio::test]
    async fn a_fresh_grant_is_read_once_and_a_stale_one_every_time() {
        let store = Arc::new(Counted::default());
        let grants = Arc::new(Grants::sealed(store.clone(), &[3u8; 32]).unwrap());
        let reads = || store.1.load(std::sync::atomic::Ordering::SeqCst);
        let now = now_secs();
        grants
            .holder("linear", "alice")
            .save(with_token(3600, now))
            .await
            .unwrap();
        let alice = grants.holder("linear", "alice");
        for _ in 0..3 {
            assert!(alice.load().await.unwrap().is_some());
        }
        assert_eq!(reads(), 1, "read once, then kept");
        let bob = grants.holder("linear", "bob");
        bob.save(with_token(3600, now - 3600 + 10)).await.unwrap();
        let before = reads();
        for _ in 0..3 {
            assert!(bob.load().await.unwrap().is_some());
        }
        assert_eq!(reads(), before + 3, "near its end: read every time");
    }

    #[test]
    fn a_token_is_fresh_until_rmcp_would_refresh_it() {
        // 3600 s: refreshed 30 s before its end; 40 s: 20 s before; no lifetime: never kept.
        assert!(fresh(&with_token(3600, 1000), 1000 + 3569));
        assert!(!fresh(&with_token(3600, 1000), 1000 + 3570));
        assert!(fresh(&with_token(40, 1000), 1000 + 19));
        assert!(!fresh(&with_token(40, 1000), 1000 + 20));
        assert!(!fresh(&grant("c"), 1000));
    }

    #[tokio::test]
    async fn a_refused_refresh_token_drops_the_grant() {
        let grants = Arc::new(Grants::in_memory());
        let alice = grants.holder("linear", "alice");
        alice.save(grant("c")).await.unwrap();
        alice.on_refresh_token_rejected(&grant("c")).await.unwrap();
        assert!(alice.load().await.unwrap().is_none());
    }
}
