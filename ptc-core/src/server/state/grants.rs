//! OAuth grants in the session store: what lets replicas continue a person's grant. Each grant is
//! one record under a key no session can have ([`StateKey::grant`]), sealed by
//! [`crate::credentials::upstream_oauth::Grants`] before it gets here; a grant unused for
//! [`GRANT_TTL`] is dropped (the person is asked again).

use std::sync::Arc;
use std::time::Duration;

use super::{StateKey, StateStore};
use crate::credentials::upstream_oauth::{GrantStore, StoreFuture};

/// How long an unused grant is kept: a refresh token outlives its access token by weeks at most
/// authorization servers.
pub const GRANT_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

/// A session store holding grants.
pub struct StoredGrants(pub Arc<dyn StateStore>);

impl StoredGrants {
    fn key(name: &str) -> StateKey {
        StateKey::grant(name)
    }
}

impl GrantStore for StoredGrants {
    fn load<'a>(&'a self, name: &'a str) -> StoreFuture<'a, Option<Vec<u8>>> {
        Box::pin(async move {
            self.0
                .load(&Self::key(name), GRANT_TTL)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn save<'a>(&'a self, name: &'a str, bytes: Vec<u8>) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.0
                .save(&Self::key(name), bytes, GRANT_TTL)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn forget<'a>(&'a self, name: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.0
                .forget(&Self::key(name))
                .await
                .map_err(|e| e.to_string())
        })
    }
}
