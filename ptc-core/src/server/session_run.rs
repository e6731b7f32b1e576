//! An evaluation in a session: the definitions its session kept are loaded before the program
//! runs and what it leaves is saved after, in the deployment's [`StateStore`] (memory, or Redis
//! shared by replicas), under the caller's subject and the session's name, so no caller reaches
//! another's state.
//!
//! The program sees nothing of this but its definitions and `session/vars`/`session/forget`;
//! the reply says what was kept (`session` in the structured content).

use std::sync::Arc;
use std::time::Duration;

use ptc_lisp::SessionState;

use crate::server::outcome::{EvalError, HostReason, NotKept, SessionReport};
use crate::server::state::{StateKey, StateStore};

/// Longest session name a client may give.
pub const MAX_NAME_CHARS: usize = 128;

/// How the deployment keeps sessions (`--sessions`).
#[derive(Clone)]
pub struct SessionOptions {
    /// Where state lives.
    pub store: Arc<dyn StateStore>,
    /// How long a session unused is kept.
    pub ttl: Duration,
    /// Largest saved state, in bytes.
    pub max_bytes: usize,
}

impl SessionOptions {
    /// Sessions in `store`, kept and bounded as the limits table says.
    pub fn new(store: Arc<dyn StateStore>) -> Self {
        SessionOptions {
            store,
            ttl: crate::program::limits::SESSION_TTL,
            max_bytes: crate::program::limits::SESSION_MAX_BYTES,
        }
    }
}

impl std::fmt::Debug for SessionOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionOptions")
            .field("store", &self.store.describe())
            .field("ttl", &self.ttl)
            .field("max_bytes", &self.max_bytes)
            .finish()
    }
}

/// A session name a client gave: 1 to 128 of letters, digits, `.`, `_`, `-`.
pub fn check_name(name: &str) -> Result<(), String> {
    let n = name.chars().count();
    if n == 0 || n > MAX_NAME_CHARS {
        return Err(format!(
            "`session` must be 1 to {MAX_NAME_CHARS} characters, got {n}"
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "`session` may hold letters, digits, `.`, `_` and `-`, not {c:?}"
        ));
    }
    Ok(())
}

/// One evaluation's session: where its state is and what was in it.
pub(crate) struct Opened {
    options: SessionOptions,
    key: StateKey,
    /// What the session held when the program started.
    pub(crate) state: SessionState,
}

/// Loads `caller`'s session `name`: its state (empty when new or expired), or the refusal when
/// the store cannot be reached or holds state this host cannot read. The program must not run
/// without the state it expects: it would fail on names it defined, for a reason it cannot see.
pub(crate) async fn open(
    options: &SessionOptions,
    caller: &str,
    name: &str,
) -> Result<Opened, EvalError> {
    let key = StateKey::new(caller, name);
    let bytes = options.store.load(&key, options.ttl).await.map_err(|e| {
        EvalError::host(
            HostReason::SessionUnavailable,
            format!("{e}; the program did not run"),
        )
    })?;
    let state = match bytes {
        None => SessionState::default(),
        Some(b) => SessionState::decode(&b).map_err(|e| {
            EvalError::host(
                HostReason::SessionUnreadable,
                format!(
                    "the state of session `{name}` cannot be read by this host: {e}; the program \
                     did not run"
                ),
            )
        })?,
    };
    Ok(Opened {
        options: options.clone(),
        key,
        state,
    })
}

impl Opened {
    /// Saves `after` (what the program left) and says what was kept. Nothing is saved when it
    /// is past the size limit or the store fails: the session keeps what it had.
    pub(crate) async fn save(self, after: &SessionState) -> SessionReport {
        let bytes = after.encode();
        let mut report = SessionReport {
            name: self.key.session.clone(),
            kept: after.names().map(str::to_string).collect(),
            not_kept: after
                .not_kept()
                .map(|(name, why)| NotKept {
                    name: name.to_string(),
                    why: why.to_string(),
                })
                .collect(),
            bytes: bytes.len(),
            saved: false,
            error: None,
        };
        if bytes.len() > self.options.max_bytes {
            report.error = Some(format!(
                "the definitions take {} bytes, more than the session's limit of {}; the session \
                 keeps what it had (forget large ones with (session/forget 'name))",
                bytes.len(),
                self.options.max_bytes
            ));
            return report;
        }
        match self
            .options
            .store
            .save(&self.key, bytes, self.options.ttl)
            .await
        {
            Ok(()) => report.saved = true,
            Err(e) => report.error = Some(e.to_string()),
        }
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn state_at_the_size_limit_is_saved_and_one_byte_past_it_is_not() {
        let mut interp = ptc_lisp::Interpreter::new(ptc_lisp::Limits::default());
        interp.eval_str("(def x [1 2 3])").unwrap();
        let state = interp.session_state();
        let size = state.encode().len();
        let mut options = SessionOptions::new(crate::server::state::open("memory").unwrap());
        options.max_bytes = size;
        let at = open(&options, "alice", "s")
            .await
            .unwrap()
            .save(&state)
            .await;
        assert!(at.saved && at.error.is_none(), "{at:?}");
        assert_eq!(
            (at.bytes, at.kept.as_slice()),
            (size, ["x".to_string()].as_slice())
        );
        options.max_bytes = size - 1;
        let past = open(&options, "alice", "t")
            .await
            .unwrap()
            .save(&state)
            .await;
        assert!(!past.saved);
        assert!(past.error.unwrap().starts_with(&format!(
            "the definitions take {size} bytes, more than the session's limit of {}",
            size - 1
        )));
        // The saved state comes back; the refused one left nothing.
        let back = open(&options, "alice", "s").await.unwrap();
        assert_eq!(back.state.names().collect::<Vec<_>>(), ["x"]);
        assert!(open(&options, "alice", "t").await.unwrap().state.is_empty());
        let shown = format!("{options:?}");
        assert!(
            shown.contains("store: \"memory\"")
                && shown.contains(&format!("max_bytes: {}", size - 1)),
            "{shown}"
        );
    }

    #[test]
    fn session_names_at_their_limits() {
        assert!(check_name("a").is_ok());
        assert!(check_name(&"a".repeat(MAX_NAME_CHARS)).is_ok());
        assert_eq!(
            check_name(&"a".repeat(MAX_NAME_CHARS + 1)).unwrap_err(),
            "`session` must be 1 to 128 characters, got 129"
        );
        assert_eq!(
            check_name("").unwrap_err(),
            "`session` must be 1 to 128 characters, got 0"
        );
        assert!(check_name("Investigation-2026_12.04").is_ok());
        assert_eq!(
            check_name("a b").unwrap_err(),
            "`session` may hold letters, digits, `.`, `_` and `-`, not ' '"
        );
        assert!(check_name("é").is_err());
        assert!(check_name("a/b").is_err());
    }
}
