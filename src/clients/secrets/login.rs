//! A Connection's login (`spec.auth.idp`): one client token per Connection, shared by every
//! resource that uses it.
//!
//! The token is obtained once (`POST /v1/auth/<mount>/login/<username>`, spec A §4.2), renewed
//! with `auth/token/renew-self` at 2/3 of its lease, and replaced by a new login only when the
//! service refuses it (a 403 that `lookup-self` confirms), refuses to renew it (a changed
//! password or changed policies: the method re-authenticates at renewal), or its maximum
//! lifetime is reached. Concurrent callers wait on one mutex, so N reconciles that find no
//! token make one login, not N. A refused login is not retried before a backoff (5 s doubling
//! to 5 min), so a wrong password cannot flood the service. The token is revoked
//! (`revoke-self`) when the session ends (Connection deleted, its login changed, shutdown).
//!
//! Neither the password, the passcode, the seed nor the token ever reaches a log line or an
//! error: they are [`SecretString`]s, and the errors carry only the service's own message.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::api::Service;
use crate::clients::http::{ClientError, Http, SecretString};
use crate::metrics::Metrics;

/// What a login sends (from the Connection's `spec.auth.idp` and its Secrets).
#[derive(Clone, Debug)]
pub struct IdpCredentials {
    /// Mount of the identity-provider auth method.
    pub mount: String,
    /// The user to log in as.
    pub username: String,
    /// The user's password.
    pub password: SecretString,
    /// Base32 seed of the verification-app factor.
    pub totp_seed: Option<SecretString>,
    /// The verification-app factor's provider name, when the service asks for one.
    pub provider: Option<String>,
}

/// What the Connection's status shows of the login (no secret in it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoginState {
    /// Mount logged in through.
    pub mount: String,
    /// The user logged in as.
    pub username: String,
    /// When the current token expires; `None` for a token that does not.
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Whether the token can be renewed.
    pub renewable: bool,
}

/// A token held by a session.
struct Held {
    token: SecretString,
    renewable: bool,
    /// The lease granted at login: a renewal that grants less has hit the maximum lifetime.
    login_lease: Duration,
    /// When to renew (2/3 of the lease); `None` for a token that does not expire.
    renew_at: Option<Instant>,
    expires: Option<Instant>,
    expires_at: Option<chrono::DateTime<chrono::Utc>>,
    /// The last renewal was capped by the maximum lifetime: log in again when due instead.
    capped: bool,
}

#[derive(Default)]
struct State {
    held: Option<Held>,
    /// Consecutive failed logins, and when the next attempt is allowed.
    failures: u32,
    retry_at: Option<Instant>,
    /// The error of the last failed login: (refused by the service, message).
    last_error: Option<(bool, String)>,
}

/// A Connection's login: holds the token, renews it before it expires and logs in again when it
/// cannot.
pub struct Session {
    /// `namespace/name` of the Connection (metric label, log field).
    connection: String,
    header: String,
    creds: IdpCredentials,
    /// Calls of the session itself (login, renew, revoke, lookup): no token of its own.
    http: Http,
    metrics: Arc<Metrics>,
    state: tokio::sync::Mutex<State>,
    snapshot: std::sync::Mutex<Option<LoginState>>,
    /// Set when the session ended: it never logs in again.
    closed: AtomicBool,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("connection", &self.connection)
            .field("mount", &self.creds.mount)
            .field("username", &self.creds.username)
            .finish()
    }
}

/// How long to wait before the next login after `failures` refused ones.
fn login_backoff(failures: u32, refused: bool) -> Duration {
    let base = if refused { 5 } else { 1 };
    Duration::from_secs((base << failures.saturating_sub(1).min(10)).min(300))
}

/// The verification app's current passcode for a base32 seed (SHA1, 6 digits, 30 s: what the
/// provider's verification-app factor uses).
pub fn passcode(seed: &str) -> Result<String, ClientError> {
    let cleaned: String = seed
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '=' && *c != '-')
        .collect::<String>()
        .to_uppercase();
    let bytes = totp_rs::Secret::Encoded(cleaned).to_bytes().map_err(|_| {
        ClientError::Config("the TOTP seed of the Connection's login is not base32".into())
    })?;
    totp_rs::TOTP::new_unchecked(totp_rs::Algorithm::SHA1, 6, 1, 30, bytes)
        .generate_current()
        .map_err(|_| ClientError::Config("the system clock is before 1970".into()))
}

use crate::clients::http::encode_segment;

impl Session {
    /// `http` must be configured without a token ([`crate::clients::http::Auth::None`]); `header`
    /// is
    /// the header the token travels in.
    pub fn new(
        connection: String,
        header: String,
        creds: IdpCredentials,
        http: Http,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            connection,
            header,
            creds,
            http,
            metrics,
            state: tokio::sync::Mutex::new(State::default()),
            snapshot: std::sync::Mutex::new(None),
            closed: AtomicBool::new(false),
        }
    }

    /// The header the token is sent in.
    pub fn header(&self) -> &str {
        &self.header
    }

    /// The login as the Connection's status shows it; `None` before the first login.
    pub fn state(&self) -> Option<LoginState> {
        self.snapshot
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// How long until the token must be renewed (or replaced); `None` when nothing is due.
    pub async fn next_due(&self) -> Option<Duration> {
        let st = self.state.lock().await;
        st.held
            .as_ref()
            .and_then(|h| h.renew_at)
            .map(|at| at.saturating_duration_since(Instant::now()))
    }

    /// The token to send: the held one, renewed first when due; a new login when there is none
    /// (or it can no longer be renewed).
    pub async fn token(&self) -> Result<SecretString, ClientError> {
        let mut st = self.state.lock().await;
        if self.closed.load(Ordering::SeqCst) {
            return Err(ClientError::Login {
                service: Service::Secrets,
                message: "the Connection's login was replaced; retrying with the new one".into(),
            });
        }
        let now = Instant::now();
        let mut old = None;
        if let Some(h) = &mut st.held {
            match h.renew_at {
                Some(at) if now >= at => {}
                _ => return Ok(h.token.clone()),
            }
            if h.renewable && !h.capped {
                match self.renew(&h.token).await {
                    Ok(auth) => {
                        let lease =
                            Duration::from_secs(auth["lease_duration"].as_u64().unwrap_or(0));
                        h.capped = lease < h.login_lease;
                        h.renewable = auth["renewable"].as_bool().unwrap_or(h.renewable);
                        set_lease(h, lease);
                        tracing::debug!(connection = %self.connection, lease_seconds = lease.as_secs(), capped = h.capped, "renewed the Connection's token");
                        let token = h.token.clone();
                        self.publish(&st);
                        return Ok(token);
                    }
                    // Only when the service could not answer: any answer that declines the
                    // renewal (even a 500 such as `policies have changed, not renewing`) means
                    // this token will not be renewed, and a new login is what it asks for.
                    Err(e)
                        if matches!(
                            e,
                            ClientError::Unreachable { .. }
                                | ClientError::Status { status: 429, .. }
                        ) && h.expires.is_none_or(|x| now < x) =>
                    {
                        // Try again soon, still before the token expires.
                        let left = h.expires.map(|x| x.saturating_duration_since(now));
                        let wait = left
                            .map(|l| (l / 3).min(Duration::from_secs(5)))
                            .unwrap_or(Duration::from_secs(5));
                        h.renew_at = Some(now + wait);
                        tracing::info!(connection = %self.connection, error = %e, "renewing the Connection's token failed; keeping it and retrying");
                        return Ok(h.token.clone());
                    }
                    Err(e) => {
                        tracing::info!(connection = %self.connection, error = %e, "the service refused to renew the Connection's token: logging in again");
                    }
                }
            }
            old = st.held.take();
        }
        let token = self.login_locked(&mut st, now).await;
        if let (Ok(_), Some(old)) = (&token, old) {
            // Still valid until it expires: revoke it rather than leave it behind.
            self.revoke_token(&old.token).await;
        }
        token
    }

    /// A call with `token` was refused (403). Returns whether to retry with a new token: true
    /// when the token itself is no longer valid (`lookup-self` refuses it too) or was already
    /// replaced; false when the token is fine and the call is simply not allowed.
    pub async fn refused(&self, token: &SecretString) -> bool {
        let mut st = self.state.lock().await;
        match &st.held {
            Some(h) if h.token == *token => {}
            // Another caller already replaced it.
            Some(_) => return true,
            None => return !self.closed.load(Ordering::SeqCst),
        }
        match self
            .http
            .call_as(
                "GET",
                "/v1/auth/token/lookup-self",
                None,
                Some((&self.header, token)),
            )
            .await
        {
            Err(ClientError::Status {
                status: 401 | 403, ..
            }) => {
                tracing::info!(connection = %self.connection, "the service no longer accepts the Connection's token: logging in again");
                st.held = None;
                true
            }
            _ => false,
        }
    }

    /// End the session: revoke the token and never log in again.
    pub async fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let mut st = self.state.lock().await;
        if let Some(h) = st.held.take() {
            self.revoke_token(&h.token).await;
            tracing::info!(connection = %self.connection, "revoked the Connection's token");
        }
        *self.snapshot.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    async fn login_locked(
        &self,
        st: &mut State,
        now: Instant,
    ) -> Result<SecretString, ClientError> {
        if let (Some(at), Some((refused, message))) = (st.retry_at, &st.last_error) {
            if now < at {
                return Err(self.error(*refused, message.clone()));
            }
        }
        match self.login().await {
            Ok(h) => {
                self.metrics.login(&self.connection, true);
                tracing::info!(connection = %self.connection, mount = %self.creds.mount, username = %self.creds.username, "logged in");
                let token = h.token.clone();
                st.held = Some(h);
                st.failures = 0;
                st.retry_at = None;
                st.last_error = None;
                self.publish(st);
                Ok(token)
            }
            Err(e) => {
                self.metrics.login(&self.connection, false);
                let refused = matches!(e, ClientError::Login { .. } | ClientError::Config(_));
                st.failures += 1;
                st.retry_at = Some(now + login_backoff(st.failures, refused));
                // What `error` wraps again when the failure is told later: the detail only, or
                // the message would say "secrets is unreachable: secrets is unreachable: ...".
                let message = match &e {
                    ClientError::Login { message, .. } => message.clone(),
                    ClientError::Unreachable { detail, .. } => detail.clone(),
                    other => other.to_string(),
                };
                st.last_error = Some((refused, message));
                *self.snapshot.lock().unwrap_or_else(|e| e.into_inner()) = None;
                tracing::warn!(connection = %self.connection, username = %self.creds.username, error = %e, failures = st.failures, "login failed");
                Err(e)
            }
        }
    }

    fn error(&self, refused: bool, message: String) -> ClientError {
        if refused {
            ClientError::Login {
                service: Service::Secrets,
                message,
            }
        } else {
            ClientError::Unreachable {
                service: Service::Secrets,
                detail: message,
            }
        }
    }

    async fn login(&self) -> Result<Held, ClientError> {
        let mut body = json!({ "password": self.creds.password.expose() });
        if let Some(seed) = &self.creds.totp_seed {
            body["totp"] = json!(passcode(seed.expose())?);
        }
        if let Some(p) = &self.creds.provider {
            body["provider"] = json!(p.to_uppercase());
        }
        let path = format!(
            "/v1/auth/{}/login/{}",
            self.creds
                .mount
                .trim_matches('/')
                .split('/')
                .map(encode_segment)
                .collect::<Vec<_>>()
                .join("/"),
            encode_segment(&self.creds.username)
        );
        let resp = self
            .http
            .call_as("POST", &path, Some(&body), None)
            .await
            .map_err(|e| match e {
                ClientError::Status {
                    status, message, ..
                } if (400..500).contains(&status) && status != 429 => ClientError::Login {
                    service: Service::Secrets,
                    message,
                },
                e => e,
            })?;
        let auth = &resp.body["auth"];
        let token = auth["client_token"]
            .as_str()
            .filter(|t| !t.is_empty())
            .ok_or_else(|| ClientError::Decode {
                service: Service::Secrets,
                detail: "the login answer has no auth.client_token".into(),
            })?;
        let lease = Duration::from_secs(auth["lease_duration"].as_u64().unwrap_or(0));
        let mut h = Held {
            token: SecretString::new(token),
            renewable: auth["renewable"].as_bool().unwrap_or(false),
            login_lease: lease,
            renew_at: None,
            expires: None,
            expires_at: None,
            capped: false,
        };
        set_lease(&mut h, lease);
        Ok(h)
    }

    async fn renew(&self, token: &SecretString) -> Result<Value, ClientError> {
        let resp = self
            .http
            .call_as(
                "POST",
                "/v1/auth/token/renew-self",
                Some(&json!({})),
                Some((&self.header, token)),
            )
            .await?;
        Ok(resp.body["auth"].clone())
    }

    async fn revoke_token(&self, token: &SecretString) {
        if let Err(e) = self
            .http
            .call_as(
                "POST",
                "/v1/auth/token/revoke-self",
                None,
                Some((&self.header, token)),
            )
            .await
        {
            tracing::info!(connection = %self.connection, error = %e, "revoking the Connection's previous token failed (it expires by itself)");
        }
    }

    fn publish(&self, st: &State) {
        let snap = st.held.as_ref().map(|h| LoginState {
            mount: self.creds.mount.clone(),
            username: self.creds.username.clone(),
            expires_at: h.expires_at,
            renewable: h.renewable,
        });
        *self.snapshot.lock().unwrap_or_else(|e| e.into_inner()) = snap;
    }
}

/// Record a lease of `lease` starting now: renew at 2/3 of it.
fn set_lease(h: &mut Held, lease: Duration) {
    let now = Instant::now();
    if lease.is_zero() {
        h.renew_at = None;
        h.expires = None;
        h.expires_at = None;
    } else {
        h.renew_at = Some(now + lease * 2 / 3);
        h.expires = Some(now + lease);
        h.expires_at = chrono::Utc::now()
            .checked_add_signed(chrono::Duration::seconds(lease.as_secs() as i64));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passcode_matches_the_rfc_6238_sha1_vector_format() {
        // The RFC 4226 test key "12345678901234567890" in base32.
        let code = passcode("GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ").unwrap();
        assert_eq!(code.len(), 6);
        assert!(code.chars().all(|c| c.is_ascii_digit()));
        assert!(passcode("not base32 at all!").is_err());
    }

    #[test]
    fn login_backoff_grows_and_is_capped() {
        assert_eq!(login_backoff(1, true), Duration::from_secs(5));
        assert_eq!(login_backoff(2, true), Duration::from_secs(10));
        assert_eq!(login_backoff(30, true), Duration::from_secs(300));
        assert_eq!(login_backoff(1, false), Duration::from_secs(1));
    }
}
