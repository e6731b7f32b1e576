//! Credential values as they are read at use time: every source (env, file, literal), empty
//! values and values with line breaks, each refused with a message naming the binding and never
//! the value.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use ptc_core::credentials::binding::{auth_headers, resolve};
use ptc_core::credentials::redact::Redactor;
use ptc_plan::{AuthEmitter, CredentialBinding, CredentialSource, Secrets};

fn binding(name: &str, source: CredentialSource) -> CredentialBinding {
    CredentialBinding {
        name: name.into(),
        source,
        scheme_hint: None,
    }
}

fn temp_file(contents: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let path = std::env::temp_dir().join(format!(
        "ptc-core-credential-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, contents).unwrap();
    path
}

fn file_binding(contents: &str) -> (CredentialBinding, PathBuf) {
    let path = temp_file(contents);
    (
        binding(
            "t",
            CredentialSource::File {
                path: path.to_string_lossy().into(),
            },
        ),
        path,
    )
}

fn resolve_file(contents: &str) -> Result<String, String> {
    let (b, path) = file_binding(contents);
    let r = resolve(&b, &Secrets::default())
        .map(|s| s.expose().to_string())
        .map_err(|e| e.to_string());
    std::fs::remove_file(path).ok();
    r
}

/// Bindings and literal secrets as the config loader makes them.
fn from_config(credentials: &str) -> (Vec<CredentialBinding>, Secrets) {
    let text = format!(r#"{{"credentials": {credentials}, "upstreams": {{}}}}"#);
    let loaded = ptc_plan::load_str(
        &text,
        std::path::Path::new("upstreams.json"),
        &ptc_plan::FileSource,
    )
    .unwrap_or_else(|d| panic!("{d}"));
    (loaded.plan.credentials, loaded.secrets)
}

#[test]
fn file_values_lose_trailing_line_ends_only() {
    assert_eq!(resolve_file("tok\n").as_deref(), Ok("tok"));
    assert_eq!(resolve_file("tok\r\n").as_deref(), Ok("tok"));
    assert_eq!(resolve_file("  tok").as_deref(), Ok("  tok"));
    assert_eq!(resolve_file("t").as_deref(), Ok("t"));
}

#[test]
fn file_values_with_line_breaks_are_refused() {
    for value in [
        "to\nk-s3cret",
        "to\rk-s3cret",
        "to\r\nk-s3cret\n",
        "\ns3cret",
    ] {
        assert_eq!(
            resolve_file(value),
            Err("credential `t` contains a line break".to_string()),
            "{value:?}"
        );
    }
}

#[test]
fn empty_file_values_are_refused() {
    for value in ["", "\n", "\r\n", " \n"] {
        assert_eq!(
            resolve_file(value),
            Err("credential `t` is empty".to_string()),
            "{value:?}"
        );
    }
}

#[test]
fn missing_file_is_named_without_a_value() {
    let b = binding(
        "t",
        CredentialSource::File {
            path: "/nonexistent/ptc/token".into(),
        },
    );
    assert_eq!(
        resolve(&b, &Secrets::default()).unwrap_err().to_string(),
        "credential `t`: cannot read /nonexistent/ptc/token: entity not found"
    );
}

#[test]
fn literal_values_come_from_the_config() {
    let (bindings, secrets) =
        from_config(r#"{"lit": {"source": "literal", "value": "lit-s3cret"}}"#);
    assert_eq!(bindings.len(), 1);
    assert_eq!(bindings[0].source, CredentialSource::Literal);
    assert_eq!(
        resolve(&bindings[0], &secrets).unwrap().expose(),
        "lit-s3cret"
    );
    // Literal values are never in the plan's Debug output.
    assert!(!format!("{secrets:?}").contains("s3cret"), "{secrets:?}");
    // Without the config's secrets, the literal is missing, not empty.
    assert_eq!(
        resolve(&bindings[0], &Secrets::default())
            .unwrap_err()
            .to_string(),
        "credential `lit`: literal value is missing"
    );
}

#[test]
fn literal_values_with_line_breaks_are_refused_at_use() {
    for value in [r#"a\r\nX-Injected: 1"#, r#"a\nb"#, r#"a\rb"#] {
        let (bindings, secrets) = from_config(&format!(
            r#"{{"lit": {{"source": "literal", "value": "{value}"}}}}"#
        ));
        let e = resolve(&bindings[0], &secrets).unwrap_err().to_string();
        assert_eq!(e, "credential `lit` contains a line break", "{value}");
        // ... and so no header is built from them.
        let e = auth_headers(
            &[AuthEmitter::Bearer {
                binding: "lit".into(),
            }],
            &bindings,
            &secrets,
            &Redactor::new(),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "credential `lit` contains a line break");
    }
}

#[test]
fn unset_env_variable_is_named() {
    let b = binding(
        "e",
        CredentialSource::Env {
            var: "PTC_TEST_NEVER_SET_3F9A".into(),
        },
    );
    assert_eq!(
        resolve(&b, &Secrets::default()).unwrap_err().to_string(),
        "credential `e`: environment variable PTC_TEST_NEVER_SET_3F9A is not set"
    );
}

/// Env values are checked in a child run of this test binary, which sets the variables itself
/// (changing the environment of a running multi-threaded test process is unsound).
#[test]
fn env_values_are_read_and_checked() {
    if std::env::var_os("PTC_CRED_CHILD").is_none() {
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "env_values_are_read_and_checked", "--nocapture"])
            .env("PTC_CRED_CHILD", "1")
            .env("PTC_CRED_OK", "env-s3cret")
            .env("PTC_CRED_EMPTY", "")
            .env("PTC_CRED_CRLF", "env-s3cret\r\nX-Injected: 1")
            .env("PTC_CRED_LF", "env\ns3cret")
            .output()
            .expect("child test runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "child run failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    let env = |var: &str| binding("e", CredentialSource::Env { var: var.into() });
    let secrets = Secrets::default();
    assert_eq!(
        resolve(&env("PTC_CRED_OK"), &secrets).unwrap().expose(),
        "env-s3cret"
    );
    assert_eq!(
        resolve(&env("PTC_CRED_EMPTY"), &secrets)
            .unwrap_err()
            .to_string(),
        "credential `e` is empty"
    );
    for var in ["PTC_CRED_CRLF", "PTC_CRED_LF"] {
        assert_eq!(
            resolve(&env(var), &secrets).unwrap_err().to_string(),
            "credential `e` contains a line break",
            "{var}"
        );
    }
}

#[test]
fn auth_headers_need_a_known_binding() {
    let e = auth_headers(
        &[AuthEmitter::Bearer {
            binding: "nope".into(),
        }],
        &[],
        &Secrets::default(),
        &Redactor::new(),
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "unknown credential binding `nope`");
}

#[test]
fn basic_credentials_accept_pairs_and_json_and_refuse_the_rest() {
    let headers = |value: &str| {
        let (b, path) = file_binding(value);
        let r = auth_headers(
            &[AuthEmitter::Basic {
                binding: "t".into(),
            }],
            &[b],
            &Secrets::default(),
            &Redactor::new(),
        )
        .map(|h| {
            h.into_iter()
                .map(|(k, v)| format!("{k}: {}", v.expose()))
                .collect::<Vec<_>>()
        })
        .map_err(|e| e.to_string());
        std::fs::remove_file(path).ok();
        r
    };
    assert_eq!(headers("u:p"), Ok(vec!["authorization: Basic dTpw".into()]));
    assert_eq!(headers("u:"), Ok(vec!["authorization: Basic dTo=".into()]));
    assert_eq!(
        headers(r#"{"user": "u", "pass": "p"}"#),
        Ok(vec!["authorization: Basic dTpw".into()])
    );
    for (value, why) in [
        (":s3cret", "basic credential must be user:pass"),
        ("s3cret", "basic credential must be user:pass"),
        ("{s3cret", "basic credential JSON is malformed"),
        (
            r#"{"user": "", "pass": "s3cret"}"#,
            "basic credential JSON must contain user and pass",
        ),
        (
            r#"{"user": "u"}"#,
            "basic credential JSON must contain user and pass",
        ),
    ] {
        assert_eq!(
            headers(value),
            Err(format!("credential `t`: {why}")),
            "{value}"
        );
    }
}

#[test]
fn secrets_and_the_redactor_never_show_values_in_debug_output() {
    let (b, path) = file_binding("dbg-s3cret");
    let secret = resolve(&b, &Secrets::default()).unwrap();
    std::fs::remove_file(path).ok();
    assert_eq!(secret.expose(), "dbg-s3cret");
    assert_eq!(format!("{secret:?}"), "Secret([REDACTED])");
    let redactor = ptc_core::credentials::redact::Redactor::new();
    redactor.register(secret.expose());
    assert_eq!(format!("{redactor:?}"), "Redactor([REDACTED])");
    assert_eq!(
        redactor.redact("token=dbg-s3cret; again dbg-s3cret"),
        "token=[REDACTED]; again [REDACTED]"
    );
}

#[test]
fn redactor_masks_values_of_exactly_the_minimum_length() {
    use ptc_core::credentials::redact::{MIN_SECRET_LEN, Redactor};
    let r = Redactor::new();
    let at = "k".repeat(MIN_SECRET_LEN);
    let under = "q".repeat(MIN_SECRET_LEN - 1);
    r.register(&at);
    r.register(&under);
    r.register(&at); // registering twice changes nothing
    assert_eq!(
        r.redact(&format!("{at} {under}")),
        format!("[REDACTED] {under}")
    );
}

/// Building the auth headers registers every form of the secret an upstream might echo: the
/// header value, the raw secret, and a basic credential's password alone (from `user:pass` and
/// from JSON), so each is masked wherever it shows up later.
#[test]
fn auth_headers_register_every_form_an_upstream_might_echo() {
    let masked = |emitter: AuthEmitter, value: &str, echoes: &[&str]| {
        let (b, path) = file_binding(value);
        let redactor = Redactor::new();
        let headers = auth_headers(&[emitter], &[b], &Secrets::default(), &redactor).unwrap();
        std::fs::remove_file(path).ok();
        let header = headers[0].1.expose().to_string();
        for echo in echoes.iter().copied().chain([header.as_str()]) {
            assert_eq!(
                redactor.redact(&format!("<{echo}>")),
                "<[REDACTED]>",
                "{echo}"
            );
        }
    };
    let bearer = AuthEmitter::Bearer {
        binding: "t".into(),
    };
    masked(bearer, "tok-s3cret", &["tok-s3cret"]);
    let custom = AuthEmitter::CustomHeader {
        binding: "t".into(),
        header: "x-api-key".into(),
    };
    masked(custom, "key-s3cret", &["key-s3cret"]);
    let basic = || AuthEmitter::Basic {
        binding: "t".into(),
    };
    masked(basic(), "admin:pa55word", &["admin:pa55word", "pa55word"]);
    masked(
        basic(),
        r#"{"user": "admin", "pass": "pa55word"}"#,
        &["pa55word"],
    );
}
