//! Credentials: reading a binding's secret (per use, so a rotated file or variable is picked up
//! without a restart) and turning `auth` emitters into request headers.
//!
//! Secret values live only in [`Secret`] and in the headers built here; errors name the binding
//! and where it is read from, never the value.

use std::fmt;

use base64::Engine as _;
use ptc_plan::{AuthEmitter, CredentialBinding, CredentialSource, Secrets};

use crate::credentials::redact::Redactor;

/// A secret value. `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value read from a source.
    pub(crate) fn new(value: &str) -> Self {
        Secret(value.to_string())
    }

    /// The value, for building a header. Keep the result out of logs and errors.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([REDACTED])")
    }
}

/// Why a credential could not be used. Never contains the secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialError(pub String);

impl fmt::Display for CredentialError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CredentialError {}

/// The secrets of one call's per-caller bindings, read before its headers are built
/// ([`crate::credentials::per_caller::for_call`]).
#[derive(Default)]
pub(crate) struct CallerSecrets(pub(crate) Vec<(String, Secret)>);

impl CallerSecrets {
    /// The secret of binding `name`, when it depends on the caller.
    pub(crate) fn get(&self, name: &str) -> Option<&Secret> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, s)| s)
    }
}

/// Reads `binding`'s secret now: env and file sources are read on every call, an exec source's
/// output is used for its `cache_ttl_ms`.
pub fn resolve(binding: &CredentialBinding, secrets: &Secrets) -> Result<Secret, CredentialError> {
    let name = &binding.name;
    let value = match &binding.source {
        CredentialSource::Env { var } => std::env::var(var).map_err(|_| {
            CredentialError(format!(
                "credential `{name}`: environment variable {var} is not set"
            ))
        })?,
        CredentialSource::File { path } => std::fs::read_to_string(path)
            .map_err(|e| {
                CredentialError(format!(
                    "credential `{name}`: cannot read {path}: {}",
                    e.kind()
                ))
            })?
            .trim_end()
            .to_string(),
        CredentialSource::Literal => secrets
            .literal(name)
            .ok_or_else(|| {
                CredentialError(format!("credential `{name}`: literal value is missing"))
            })?
            .to_string(),
        CredentialSource::Exec(src) => {
            crate::credentials::exec::read(name, src).map_err(CredentialError)?
        }
        CredentialSource::CallerTokenExchange(_) | CredentialSource::PerCaller { .. } => {
            return Err(CredentialError(format!(
                "credential `{name}` depends on the caller and is read for a call made for one"
            )));
        }
    };
    if value.is_empty() {
        return Err(CredentialError(format!("credential `{name}` is empty")));
    }
    if value.contains(['\r', '\n']) {
        return Err(CredentialError(format!(
            "credential `{name}` contains a line break"
        )));
    }
    Ok(Secret(value))
}

/// The headers `emitters` produce, in order, with secrets read now from `credentials`. Every
/// value read (and every header value built from it) is registered with `redactor` before use.
pub fn auth_headers(
    emitters: &[AuthEmitter],
    credentials: &[CredentialBinding],
    secrets: &Secrets,
    redactor: &Redactor,
) -> Result<Vec<(String, Secret)>, CredentialError> {
    auth_headers_with(
        emitters,
        credentials,
        secrets,
        redactor,
        &CallerSecrets::default(),
    )
}

/// [`auth_headers`] with the per-caller secrets of this call already read.
pub(crate) fn auth_headers_with(
    emitters: &[AuthEmitter],
    credentials: &[CredentialBinding],
    secrets: &Secrets,
    redactor: &Redactor,
    per_caller: &CallerSecrets,
) -> Result<Vec<(String, Secret)>, CredentialError> {
    emitters
        .iter()
        .map(|e| {
            let binding = credentials
                .iter()
                .find(|c| c.name == e.binding())
                .ok_or_else(|| {
                    CredentialError(format!("unknown credential binding `{}`", e.binding()))
                })?;
            let caller_secret = per_caller.get(&binding.name);
            let secret = match caller_secret {
                Some(s) => s.clone(),
                None => resolve(binding, secrets)?,
            };
            register(redactor, &secret);
            let (value, holds_secret) = match e {
                AuthEmitter::Bearer { .. } => (format!("Bearer {}", secret.0), true),
                AuthEmitter::Basic { .. } => {
                    (format!("Basic {}", basic(&binding.name, &secret)?), false)
                }
                AuthEmitter::CustomHeader { .. } => (secret.0, true),
            };
            // A header that holds a caller's secret as it is needs no entry of its own: the
            // secret's masks it, and is forgotten when the secret leaves its cache.
            if caller_secret.is_none() || !holds_secret {
                redactor.register(&value);
            }
            Ok((e.header(), Secret(value)))
        })
        .collect()
}

/// After a 401: the next read of every binding `emitters` use gets a fresh value (an exec
/// source runs its command again; other sources are read on every use anyway).
pub fn refresh(emitters: &[AuthEmitter], credentials: &[CredentialBinding]) {
    for e in emitters {
        if let Some(CredentialBinding {
            name,
            source: CredentialSource::Exec(src),
            ..
        }) = credentials.iter().find(|c| c.name == e.binding())
        {
            crate::credentials::exec::forget(name, src);
        }
    }
}

/// Registers a secret and its parts an upstream might echo alone (the password of `user:pass`).
pub fn register(redactor: &Redactor, secret: &Secret) {
    let raw = secret.expose();
    redactor.register(raw);
    if let Some((_, pass)) = raw.split_once(':') {
        redactor.register(pass);
    }
    if let Ok(serde_json::Value::Object(m)) = serde_json::from_str::<serde_json::Value>(raw)
        && let Some(pass) = m.get("pass").and_then(|p| p.as_str())
    {
        redactor.register(pass);
    }
}

/// `user:pass` or `{"user": .., "pass": ..}`, base64-encoded.
fn basic(name: &str, secret: &Secret) -> Result<String, CredentialError> {
    let raw = secret.expose();
    let pair = if raw.trim_start().starts_with('{') {
        let v: serde_json::Value = serde_json::from_str(raw).map_err(|_| {
            CredentialError(format!(
                "credential `{name}`: basic credential JSON is malformed"
            ))
        })?;
        match (
            v.get("user").and_then(|u| u.as_str()),
            v.get("pass").and_then(|p| p.as_str()),
        ) {
            (Some(u), Some(p)) if !u.is_empty() => format!("{u}:{p}"),
            _ => {
                return Err(CredentialError(format!(
                    "credential `{name}`: basic credential JSON must contain user and pass"
                )));
            }
        }
    } else {
        match raw.split_once(':') {
            Some((u, _)) if !u.is_empty() => raw.to_string(),
            _ => {
                return Err(CredentialError(format!(
                    "credential `{name}`: basic credential must be user:pass"
                )));
            }
        }
    };
    Ok(base64::engine::general_purpose::STANDARD.encode(pair))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ptc_plan::SchemeHint;

    fn binding(name: &str, source: CredentialSource) -> CredentialBinding {
        CredentialBinding {
            name: name.into(),
            source,
            scheme_hint: None::<SchemeHint>,
        }
    }

    #[test]
    fn file_credentials_are_read_on_every_use() {
        let path = std::env::temp_dir().join(format!("ptc-core-cred-{}", std::process::id()));
        std::fs::write(&path, "first-token\n").unwrap();
        let b = binding(
            "t",
            CredentialSource::File {
                path: path.to_string_lossy().into(),
            },
        );
        let secrets = Secrets::default();
        assert_eq!(resolve(&b, &secrets).unwrap().expose(), "first-token");
        std::fs::write(&path, "rotated-token").unwrap();
        assert_eq!(resolve(&b, &secrets).unwrap().expose(), "rotated-token");
        std::fs::remove_file(&path).unwrap();
        let e = resolve(&b, &secrets).unwrap_err();
        assert!(e.0.contains("credential `t`: cannot read"), "{e}");
    }

    #[test]
    fn emitters_build_headers_and_errors_never_hold_secrets() {
        let p = [
            binding(
                "tok",
                CredentialSource::File {
                    path: write_temp("tok", "s3cret-token"),
                },
            ),
            binding(
                "up",
                CredentialSource::File {
                    path: write_temp("up", "u:p"),
                },
            ),
            binding(
                "bad",
                CredentialSource::File {
                    path: write_temp("bad", "no-colon-s3cret"),
                },
            ),
        ];
        let secrets = Secrets::default();
        let headers = auth_headers(
            &[
                AuthEmitter::Bearer {
                    binding: "tok".into(),
                },
                AuthEmitter::Basic {
                    binding: "up".into(),
                },
                AuthEmitter::CustomHeader {
                    binding: "tok".into(),
                    header: "X-Api-Token".into(),
                },
            ],
            &p,
            &secrets,
            &Redactor::new(),
        )
        .unwrap();
        let shown: Vec<(String, &str)> = headers
            .iter()
            .map(|(h, v)| (h.clone(), v.expose()))
            .collect();
        assert_eq!(
            shown,
            [
                ("authorization".to_string(), "Bearer s3cret-token"),
                ("authorization".to_string(), "Basic dTpw"),
                ("x-api-token".to_string(), "s3cret-token"),
            ]
        );
        assert!(!format!("{headers:?}").contains("s3cret"));
        let e = auth_headers(
            &[AuthEmitter::Basic {
                binding: "bad".into(),
            }],
            &p,
            &secrets,
            &Redactor::new(),
        )
        .unwrap_err();
        assert_eq!(e.0, "credential `bad`: basic credential must be user:pass");
    }

    #[cfg(unix)]
    #[test]
    fn refresh_forgets_only_the_exec_bindings_the_emitters_use() {
        use crate::credentials::exec::tests::{COUNTING, script, source};
        let (used_cmd, _d1) = script("refresh-used", COUNTING);
        let (other_cmd, _d2) = script("refresh-other", COUNTING);
        // The binding the emitter does not use comes first: a lookup that matched the wrong
        // name would forget it instead.
        let p = [
            binding(
                "other",
                CredentialSource::Exec(source(&other_cmd, 3_600_000)),
            ),
            binding("used", CredentialSource::Exec(source(&used_cmd, 3_600_000))),
        ];
        let secrets = Secrets::default();
        let read = |i: usize| resolve(&p[i], &secrets).unwrap().expose().to_string();
        assert_eq!((read(0), read(1)), ("token-1".into(), "token-1".into()));
        refresh(
            &[AuthEmitter::Bearer {
                binding: "used".into(),
            }],
            &p,
        );
        assert_eq!((read(0), read(1)), ("token-1".into(), "token-2".into()));
    }

    #[test]
    fn a_callers_secret_is_used_as_read_and_masked_through_the_secret_alone() {
        let shared = binding(
            "shared",
            CredentialSource::File {
                path: write_temp("shared-bearer", "shared-s3cret"),
            },
        );
        let mine = binding(
            "mine",
            CredentialSource::PerCaller {
                files: Default::default(),
            },
        );
        let credentials = [shared, mine];
        let emitters = [
            AuthEmitter::Bearer {
                binding: "shared".into(),
            },
            AuthEmitter::Bearer {
                binding: "mine".into(),
            },
        ];
        let redactor = Redactor::new();
        let per_caller = CallerSecrets(vec![("mine".into(), Secret::new("caller-s3cret"))]);
        let headers = auth_headers_with(
            &emitters,
            &credentials,
            &Secrets::default(),
            &redactor,
            &per_caller,
        )
        .unwrap();
        let shown: Vec<(&str, &str)> = headers
            .iter()
            .map(|(h, v)| (h.as_str(), v.expose()))
            .collect();
        assert_eq!(
            shown,
            [
                ("authorization", "Bearer shared-s3cret"),
                ("authorization", "Bearer caller-s3cret")
            ]
        );
        // The deployment's header is masked whole; a caller's secret is masked as itself, so
        // forgetting it (when it leaves its cache) leaves no other entry behind.
        assert_eq!(redactor.redact("Bearer shared-s3cret"), "[REDACTED]");
        assert_eq!(redactor.redact("Bearer caller-s3cret"), "Bearer [REDACTED]");
        redactor.forget("caller-s3cret");
        assert_eq!(
            redactor.redact("Bearer caller-s3cret"),
            "Bearer caller-s3cret"
        );
        // Without its per-caller secret, such a binding is refused, not read.
        let e =
            auth_headers(&emitters[1..], &credentials, &Secrets::default(), &redactor).unwrap_err();
        assert_eq!(
            e.0,
            "credential `mine` depends on the caller and is read for a call made for one"
        );
    }

    fn write_temp(name: &str, value: &str) -> String {
        let path = std::env::temp_dir().join(format!("ptc-core-{name}-{}", std::process::id()));
        std::fs::write(&path, value).unwrap();
        path.to_string_lossy().into()
    }
}
