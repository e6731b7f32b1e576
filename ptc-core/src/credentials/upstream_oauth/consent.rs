//! Asking a person for consent: they open the authorization URL, and the authorization server
//! sends their browser back to ptc's redirect URI with a code.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// What the authorization server sent the person back with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsentCallback {
    /// The authorization code.
    pub code: String,
    /// The `state` ptc sent (checked against the one it keeps).
    pub state: String,
    /// The issuer the server named (`iss`, RFC 9207), when it did.
    pub issuer: Option<String>,
}

/// A future that is `Send`, boxed so [`Consent`] can be a trait object.
pub type ConsentFuture<'a> =
    Pin<Box<dyn Future<Output = Result<ConsentCallback, String>> + Send + 'a>>;

/// Someone who can be asked to consent: shown `url`, their browser comes back to `redirect_uri`.
/// The error says why no consent came (declined, timed out, nobody to ask).
pub trait Consent: Send + Sync + std::fmt::Debug {
    /// Asks for consent to upstream `upstream`.
    fn consent<'a>(
        &'a self,
        upstream: &'a str,
        url: &'a str,
        redirect_uri: &'a str,
    ) -> ConsentFuture<'a>;
}

tokio::task_local! {
    /// Who is asked for consent during the call this task is making (see [`asking`]).
    static ASKER: Option<Arc<dyn Consent>>;
}

/// Runs `call` (an upstream call, a listing) with `consent` as who is asked should the upstream
/// need a person's consent on the way. Who to ask belongs to the call (its caller's session,
/// the terminal), not to the connection that happens to serve it, so it travels with the call
/// as its trace context does.
pub async fn asking<F: Future>(consent: Option<Arc<dyn Consent>>, call: F) -> F::Output {
    ASKER.scope(consent, call).await
}

/// Who the current call asks for consent (none outside [`asking`]).
pub(crate) fn asker() -> Option<Arc<dyn Consent>> {
    ASKER.try_with(Clone::clone).ok().flatten()
}

/// Shows a person an authorization URL: `(upstream, url)`.
type Show = dyn Fn(&str, &str) + Send + Sync;

/// The command line's consent: the URL is shown (by `show`), and ptc receives the redirect
/// itself on the redirect URI, which must be `http://` on a loopback address.
pub struct LoopbackConsent {
    show: Box<Show>,
    wait: Duration,
}

impl std::fmt::Debug for LoopbackConsent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopbackConsent")
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

impl LoopbackConsent {
    /// Shows each authorization URL with `show(upstream, url)` and waits at most `wait` for the
    /// person's browser to come back.
    pub fn new(show: impl Fn(&str, &str) + Send + Sync + 'static, wait: Duration) -> Self {
        LoopbackConsent {
            show: Box::new(show),
            wait,
        }
    }
}

impl Consent for LoopbackConsent {
    fn consent<'a>(
        &'a self,
        upstream: &'a str,
        url: &'a str,
        redirect_uri: &'a str,
    ) -> ConsentFuture<'a> {
        Box::pin(async move {
            let back = Redirect::loopback(redirect_uri).await?;
            (self.show)(upstream, url);
            back.wait(redirect_uri, self.wait).await
        })
    }
}

/// A person reached through a host's client (its elicitation, or its request rounds): shown
/// the URL with a message, their browser comes back to ptc's own listener when the redirect URI
/// is on loopback (a host on the person's machine), else to the host's callback route
/// ([`deliver`]).
pub struct PersonConsent {
    person: Arc<dyn crate::call::approval::Approver>,
    wait: Duration,
}

impl std::fmt::Debug for PersonConsent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersonConsent")
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

impl PersonConsent {
    /// Asks through `person`, who has `wait` to consent and come back.
    pub fn new(person: Arc<dyn crate::call::approval::Approver>, wait: Duration) -> Self {
        PersonConsent { person, wait }
    }
}

impl Consent for PersonConsent {
    fn consent<'a>(
        &'a self,
        upstream: &'a str,
        url: &'a str,
        redirect_uri: &'a str,
    ) -> ConsentFuture<'a> {
        use crate::call::approval::Decision;
        Box::pin(async move {
            // A loopback redirect URI the host itself listens on (its own port) is its route.
            let back = match Redirect::loopback(redirect_uri).await {
                Ok(back) => back,
                Err(_) => Redirect::to_host(url)?,
            };
            let message = format!(
                "The upstream `{upstream}` needs your consent before ptc can call it as you. \
                 Open the link, sign in and allow access; the program continues once you are \
                 sent back."
            );
            match self
                .person
                .open_url(message, url.to_string(), self.wait)
                .await
            {
                Decision::Approved => back.wait(redirect_uri, self.wait).await,
                Decision::Declined(why) | Decision::Unavailable(why) => Err(why),
            }
        })
    }
}

/// Where the person's browser comes back with the code.
enum Redirect {
    /// To ptc's own listener on the loopback redirect URI.
    Loopback {
        server: tokio::task::JoinHandle<Result<(), std::io::Error>>,
        rx: tokio::sync::oneshot::Receiver<Result<ConsentCallback, String>>,
    },
    /// To the HTTP host's callback route, which hands it over by `state`.
    Host(Pending),
}

impl Redirect {
    /// Listens on `redirect_uri`, which must be `http://` on a loopback address.
    async fn loopback(redirect_uri: &str) -> Result<Redirect, String> {
        let (addr, path) = loopback_target(redirect_uri)?;
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
            format!("cannot listen on {addr} for the redirect to {redirect_uri}: {e}")
        })?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let tx = Arc::new(Mutex::new(Some(tx)));
        let app = axum::Router::new().route(
            &path,
            axum::routing::get(
                move |axum::extract::Query(query): axum::extract::Query<
                    std::collections::HashMap<String, String>,
                >| async move {
                    let outcome = callback_of(&query);
                    let page = page(&outcome);
                    if let Some(tx) = tx.lock().unwrap_or_else(|e| e.into_inner()).take() {
                        let _ = tx.send(outcome);
                    }
                    page
                },
            ),
        );
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(Redirect::Loopback { server, rx })
    }

    /// Waits at the host's callback route for the redirect of the authorization at `url`
    /// (matched by its `state`).
    fn to_host(url: &str) -> Result<Redirect, String> {
        let state = url::Url::parse(url)
            .ok()
            .and_then(|u| {
                u.query_pairs()
                    .find(|(k, _)| k == "state")
                    .map(|(_, v)| v.into_owned())
            })
            .ok_or("the authorization URL carries no state")?;
        Ok(Redirect::Host(Pending::new(state)))
    }

    /// The redirect's code, at most `wait` from now.
    async fn wait(self, redirect_uri: &str, wait: Duration) -> Result<ConsentCallback, String> {
        let late = || {
            format!(
                "the browser did not come back to {redirect_uri} within {} s",
                wait.as_secs()
            )
        };
        match self {
            Redirect::Loopback { server, rx } => {
                let outcome = tokio::time::timeout(wait, rx).await;
                server.abort();
                match outcome {
                    Err(_) => Err(late()),
                    Ok(Err(_)) => Err("the redirect listener stopped".into()),
                    Ok(Ok(outcome)) => outcome,
                }
            }
            Redirect::Host(mut pending) => {
                match tokio::time::timeout(wait, &mut pending.rx).await {
                    Err(_) => Err(late()),
                    Ok(Err(_)) => Err("the host stopped waiting for the redirect".into()),
                    Ok(Ok(outcome)) => outcome,
                }
            }
        }
    }
}

/// The page the person's browser shows after the redirect.
fn page(outcome: &Result<ConsentCallback, String>) -> &'static str {
    match outcome {
        Ok(_) => "ptc received the authorization. You can close this page.",
        Err(_) => "ptc did not receive an authorization. See where you ran ptc.",
    }
}

type Waiting = HashMap<String, tokio::sync::oneshot::Sender<Result<ConsentCallback, String>>>;

/// Authorizations whose redirect the HTTP host's callback route waits for, by `state`: one
/// table per process, as the route is.
fn waiting() -> &'static Mutex<Waiting> {
    static WAITING: OnceLock<Mutex<Waiting>> = OnceLock::new();
    WAITING.get_or_init(Mutex::default)
}

/// One authorization waiting at the host's callback route; forgotten when dropped.
struct Pending {
    state: String,
    rx: tokio::sync::oneshot::Receiver<Result<ConsentCallback, String>>,
}

impl Pending {
    fn new(state: String) -> Self {
        let (tx, rx) = tokio::sync::oneshot::channel();
        waiting()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(state.clone(), tx);
        Pending { state, rx }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        waiting()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.state);
    }
}

/// What the HTTP host's callback route does with a redirect (its query): hands it to the
/// authorization waiting for its `state`, and answers the page the browser shows. A redirect
/// whose `state` nobody waits for is refused (it expired, or was made up).
pub fn deliver(query: &HashMap<String, String>) -> Result<&'static str, &'static str> {
    let sender = query.get("state").and_then(|state| {
        waiting()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(state)
    });
    let Some(sender) = sender else {
        return Err(
            "No authorization of ptc is waiting for this (it may have expired). \
                    Start again from your agent.",
        );
    };
    let outcome = callback_of(query);
    let shown = page(&outcome);
    let _ = sender.send(outcome);
    Ok(shown)
}

/// The code, state and issuer of a redirect, or the error the server sent instead.
fn callback_of(query: &HashMap<String, String>) -> Result<ConsentCallback, String> {
    if let Some(error) = query.get("error") {
        let description = query
            .get("error_description")
            .map(|d| format!(": {d}"))
            .unwrap_or_default();
        return Err(format!(
            "the authorization server answered `{error}`{description}"
        ));
    }
    match (query.get("code"), query.get("state")) {
        (Some(code), Some(state)) => Ok(ConsentCallback {
            code: code.clone(),
            state: state.clone(),
            issuer: query.get("iss").cloned(),
        }),
        _ => Err("the redirect carried no `code` and `state`".into()),
    }
}

/// Where to listen for `redirect_uri`: its loopback address and port, and its path.
fn loopback_target(redirect_uri: &str) -> Result<(SocketAddr, String), String> {
    let url = url::Url::parse(redirect_uri)
        .map_err(|e| format!("the redirect URI `{redirect_uri}` is not a URL: {e}"))?;
    let ip = match url.host() {
        Some(url::Host::Ipv4(ip)) if ip.is_loopback() => std::net::IpAddr::V4(ip),
        Some(url::Host::Ipv6(ip)) if ip.is_loopback() => std::net::IpAddr::V6(ip),
        Some(url::Host::Domain("localhost")) => std::net::IpAddr::from([127, 0, 0, 1]),
        _ => {
            return Err(format!(
                "the redirect URI `{redirect_uri}` is not on a loopback address, so this \
                 command cannot receive it: use an upstream whose redirect_uri is \
                 http://127.0.0.1:PORT/PATH here, or consent through ptc's HTTP host"
            ));
        }
    };
    if url.scheme() != "http" {
        return Err(format!(
            "the redirect URI `{redirect_uri}` must be http:// to be received on loopback"
        ));
    }
    let port = url.port().unwrap_or(80);
    Ok((SocketAddr::new(ip, port), url.path().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A redirect reaches the authorization waiting for its `state`, once; one nobody waits for
    /// (made up, or after the wait ended) is refused.
    #[tokio::test]
    async fn the_host_s_route_hands_a_redirect_to_the_authorization_of_its_state() {
        let query = |state: &str| {
            HashMap::from([
                ("code".to_string(), "c-1".to_string()),
                ("state".to_string(), state.to_string()),
            ])
        };
        let Redirect::Host(pending) =
            Redirect::to_host("https://as.example/authorize?client_id=x&state=s-41").unwrap()
        else {
            panic!("a host redirect")
        };
        assert_eq!(
            deliver(&query("s-other")),
            Err(
                "No authorization of ptc is waiting for this (it may have expired). Start again \
                 from your agent."
            )
        );
        assert_eq!(
            deliver(&query("s-41")),
            Ok("ptc received the authorization. You can close this page.")
        );
        let got = Redirect::Host(pending)
            .wait("https://ptc.example/cb", Duration::from_secs(1))
            .await
            .unwrap();
        assert_eq!((got.code.as_str(), got.state.as_str()), ("c-1", "s-41"));
        assert!(deliver(&query("s-41")).is_err(), "delivered once");

        // An authorization that stopped waiting leaves nothing behind.
        let Redirect::Host(pending) =
            Redirect::to_host("https://as.example/authorize?state=s-42").unwrap()
        else {
            panic!("a host redirect")
        };
        drop(pending);
        assert!(deliver(&query("s-42")).is_err());
        // A redirect carrying the server's error is handed over as that error.
        let _waiting = Redirect::to_host("https://as.example/authorize?state=s-43").unwrap();
        let denied = HashMap::from([
            ("error".to_string(), "access_denied".to_string()),
            ("state".to_string(), "s-43".to_string()),
        ]);
        assert_eq!(
            deliver(&denied),
            Ok("ptc did not receive an authorization. See where you ran ptc.")
        );
        assert!(Redirect::to_host("https://as.example/authorize?client_id=x").is_err());
    }

    #[tokio::test]
    async fn who_is_asked_travels_with_the_call_and_only_with_it() {
        let someone: Arc<dyn Consent> =
            Arc::new(LoopbackConsent::new(|_, _| {}, Duration::from_secs(1)));
        assert!(asker().is_none());
        let inside = asking(Some(someone), async { asker().is_some() }).await;
        assert!(inside);
        assert!(asker().is_none());
    }

    #[test]
    fn only_an_http_loopback_redirect_is_received_here() {
        assert_eq!(
            loopback_target("http://127.0.0.1:8765/oauth/callback"),
            Ok(("127.0.0.1:8765".parse().unwrap(), "/oauth/callback".into()))
        );
        assert_eq!(
            loopback_target("http://localhost:3000/cb").map(|(a, _)| a),
            Ok("127.0.0.1:3000".parse().unwrap())
        );
        assert_eq!(
            loopback_target("http://[::1]:8765/cb").map(|(a, _)| a),
            Ok("[::1]:8765".parse().unwrap())
        );
        assert!(loopback_target("http://[2001:db8::1]:8765/cb").is_err());
        assert!(loopback_target("https://ptc.example.com/oauth/callback").is_err());
        assert!(loopback_target("https://127.0.0.1:8765/cb").is_err());
        assert!(loopback_target("http://10.0.0.1:8765/cb").is_err());
    }

    #[test]
    fn a_redirect_without_a_code_or_with_an_error_gives_no_consent() {
        let q = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<std::collections::HashMap<_, _>>()
        };
        assert_eq!(
            callback_of(&q(&[("code", "c"), ("state", "s"), ("iss", "https://as")])),
            Ok(ConsentCallback {
                code: "c".into(),
                state: "s".into(),
                issuer: Some("https://as".into())
            })
        );
        assert!(callback_of(&q(&[("code", "c")])).is_err());
        let declined = callback_of(&q(&[
            ("error", "access_denied"),
            ("error_description", "the user said no"),
        ]))
        .unwrap_err();
        assert!(
            declined.contains("`access_denied`: the user said no"),
            "{declined}"
        );
    }
}
