//! `ptc login`: the person at the terminal consents to an upstream calling as them (the test
//! plays their browser, opening the URL ptc prints), and the grant is kept, sealed, in the Redis
//! the hosts share, where a host then finds it for that caller without asking anyone. Against the
//! real test issuer, an MCP server that takes only its tokens, and a real `redis-server`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use ptc_core::call::upstreams::{CallOptions, StartOptions, Upstreams};
use ptc_core::credentials::identity::Caller;
use ptc_core::credentials::upstream_oauth::Grants;
use ptc_core::server::state::{RedisStore, grants::StoredGrants};
use ptc_core::{Reason, ToolOutput};
use ptc_tests::issuer::{self, Issuer};
use ptc_tests::oauth_mcp::OAuthMcp;
use serde_json::{Value, json};

const KEY: [u8; 32] = [42; 32];

/// A folder with the upstreams.json of `hosted` (the authorization code grant) and the key.
fn setup(server: &OAuthMcp, name: &str) -> PathBuf {
    let dir = ptc_tests::fresh_dir(name);
    let config = json!({"upstreams": {"hosted": {
        "transport": "mcp_http", "url": server.url,
        "allow_insecure_http": true, "allow_insecure_auth": true,
        "oauth": {"grant": "authorization_code",
                  "redirect_uri": format!("http://127.0.0.1:{}/oauth/callback", ptc_tests::free_port())},
    }}});
    std::fs::write(dir.join("upstreams.json"), config.to_string()).unwrap();
    std::fs::write(dir.join("grant.key"), KEY).unwrap();
    dir
}

/// Runs `ptc login hosted` with `args`, opening every URL it prints as a browser would.
fn login(dir: &Path, args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ptc"))
        .args(["login", "hosted", "--config"])
        .arg(dir.join("upstreams.json"))
        .args(args)
        .env_remove("PTC_SESSION_STORE")
        .env_remove("PTC_GRANT_KEY_FILE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ptc starts");
    let stderr = child.stderr.take().unwrap();
    let browser = std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let mut seen = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(url) = line.strip_prefix("  http") {
                let url = format!("http{url}");
                let _ = rt.block_on(issuer::http_client().get(url).send());
            }
            seen.push_str(&line);
            seen.push('\n');
        }
        seen
    });
    let stdout = child.wait_with_output().unwrap();
    Output {
        stderr: browser.join().unwrap().into_bytes(),
        ..stdout
    }
}

fn peers() -> Option<(Issuer, OAuthMcp, ptc_tests::redis::RedisServer)> {
    let issuer = issuer::start(&[])?;
    let server = OAuthMcp::start(&issuer.url, &[])?;
    let redis = ptc_tests::redis::start()?;
    Some((issuer, server, redis))
}

#[test]
fn a_grant_given_at_the_terminal_serves_the_caller_in_a_host() {
    let Some((issuer, server, redis)) = peers() else {
        return;
    };
    let dir = setup(&server, "login-kept");
    let key = dir.join("grant.key");
    let out = login(
        &dir,
        &[
            "--caller",
            "alice@example.com",
            "--session-store",
            &redis.url,
            "--grant-key-file",
            key.to_str().unwrap(),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("upstream `hosted` needs your consent"),
        "{stderr}"
    );
    assert!(
        stdout.contains("consent given for `alice@example.com` (4 tools listed)")
            && stdout.contains("sealed with the grant key"),
        "{stdout}"
    );

    // A host sharing the Redis and the key serves alice with that grant: nobody is asked (it
    // has nobody to ask), though the issuer would now sign in someone else.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(issuer.set_user("mallory", false));
    let config = std::fs::read_to_string(dir.join("upstreams.json")).unwrap();
    let loaded =
        ptc_plan::load_str(&config, &dir.join("upstreams.json"), &ptc_plan::FileSource).unwrap();
    let store = Arc::new(RedisStore::open(&redis.url).unwrap());
    let grants = Arc::new(Grants::sealed(Arc::new(StoredGrants(store)), &KEY).unwrap());
    let answer = rt.block_on(async {
        let options = StartOptions {
            grants,
            catalog: ptc_core::CatalogLoad::OnFirstUse,
            ..StartOptions::default()
        };
        let upstreams = Upstreams::start(loaded.plan, loaded.secrets, options)
            .await
            .unwrap();
        let as_alice = CallOptions {
            caller: Some(Arc::new(Caller {
                subject: "alice@example.com".into(),
                ..Caller::local()
            })),
            ..CallOptions::default()
        };
        let alice = upstreams
            .call("hosted", "whoami", Default::default(), as_alice)
            .await;
        let bob = CallOptions {
            caller: Some(Arc::new(Caller {
                subject: "bob".into(),
                ..Caller::local()
            })),
            ..CallOptions::default()
        };
        let bob = upstreams
            .call("hosted", "whoami", Default::default(), bob)
            .await;
        (alice, bob)
    });
    let whoami = |out: ToolOutput| -> Value {
        match out {
            ToolOutput::Json(bytes) => serde_json::from_slice(&bytes).unwrap(),
            ToolOutput::Text(t) => serde_json::from_str(&t).unwrap(),
            ToolOutput::Empty => Value::Null,
        }
    };
    assert_eq!(whoami(answer.0.unwrap())["sub"], "alice");
    // Bob never consented: his call needs a person, and this host has nobody to ask.
    assert_eq!(answer.1.unwrap_err().reason, Reason::AuthRequired);
}

#[test]
fn a_login_that_cannot_keep_or_get_the_grant_says_why() {
    let Some((issuer, server, redis)) = peers() else {
        return;
    };
    let dir = setup(&server, "login-refused");
    // A shared store without the hosts' key: refused before anything is asked.
    let out = login(&dir, &["--session-store", &redis.url]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--grant-key-file is needed"), "{stderr}");
    assert!(!stderr.contains("needs your consent"), "{stderr}");

    // The person says no.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(issuer.set_user("alice", true));
    let out = login(&dir, &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("access_denied"), "{stderr}");

    // In memory, the consent is a trial: it says where the grant is not kept.
    rt.block_on(issuer.set_user("alice", false));
    let out = login(&dir, &[]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("this process's memory only"), "{stdout}");
}
