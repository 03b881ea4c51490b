//! The sandbox's own identity provider (what the `idp` auth method talks to) and its setup
//! through the admin API.
//!
//! Admin API (under `/_sandbox/secrets/idp/`, shared by every secrets cluster of the sandbox):
//! * `PUT /_sandbox/secrets/idp/users/:username` — create or replace a user:
//!   `{"password": "...", "groups": ["eng"], "status": "ACTIVE" | "PASSWORD_EXPIRED" |
//!   "LOCKED_OUT", "totp": {"provider": "OKTA" | "GOOGLE", "secret": "<base32, optional>"},
//!   "push": {"provider": "OKTA", "response": "approve" | "reject" | "timeout" | "manual",
//!   "delay_ms": 0, "number_challenge": true, "correct_answer": 42}}`. Answers
//!   `{"username", "totp_secret"}` (a TOTP secret is generated when none is given).
//! * `GET /_sandbox/secrets/idp/users` — `{"users": [names]}`;
//!   `GET /_sandbox/secrets/idp/users/:username` — the user without its password;
//!   `DELETE /_sandbox/secrets/idp/users/:username`.
//! * `GET /_sandbox/secrets/idp/users/:username/totp` — `{"code": "123456"}`, the verification
//!   app's current passcode.
//! * `GET /_sandbox/secrets/idp/push` — pending push challenges
//!   `{"challenges": [{"username", "correct_answer"}]}`;
//!   `POST /_sandbox/secrets/idp/push/:username` `{"answer": "approve" | "reject" | 42}` answers
//!   the user's pending push (a number must equal the challenge's correct answer to approve).
//!
//! Group membership from the provider is only consulted when the auth method has an
//! `api_token` (any non-empty value is accepted), as with the real provider.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::otp;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Provider {
    pub users: BTreeMap<String, ProviderUser>,
    #[serde(skip)]
    pub challenges: HashMap<u64, Challenge>,
    #[serde(skip)]
    pub next_challenge: u64,
    /// Nonce -> correct answer of a number challenge, for `verify/:nonce`.
    #[serde(skip)]
    pub verify_cache: HashMap<String, i64>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ProviderUser {
    pub password: String,
    #[serde(default)]
    pub groups: Vec<String>,
    #[serde(default = "active")]
    pub status: String,
    #[serde(default)]
    pub totp: Option<TotpFactor>,
    #[serde(default)]
    pub push: Option<PushFactor>,
}

fn active() -> String {
    "ACTIVE".into()
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TotpFactor {
    #[serde(default = "okta")]
    pub provider: String,
    #[serde(default)]
    pub secret: String,
}

fn okta() -> String {
    "OKTA".into()
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PushFactor {
    #[serde(default = "okta")]
    pub provider: String,
    #[serde(default = "approve")]
    pub response: String,
    #[serde(default)]
    pub delay_ms: u64,
    #[serde(default = "yes")]
    pub number_challenge: bool,
    #[serde(default)]
    pub correct_answer: Option<i64>,
}

fn approve() -> String {
    "approve".into()
}
fn yes() -> bool {
    true
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChallengeState {
    Waiting,
    Approved,
    Rejected,
    Timeout,
}

#[derive(Clone, Debug)]
pub struct Challenge {
    pub username: String,
    pub correct_answer: Option<i64>,
    pub state: ChallengeState,
    /// When the automatic response (approve/reject/timeout) takes effect.
    pub auto_at: Option<(Instant, ChallengeState)>,
    pub deadline: Instant,
}

impl Provider {
    /// Starts a push verification for a user; returns the challenge id.
    pub fn start_push(&mut self, username: &str, f: &PushFactor) -> (u64, Option<i64>) {
        let id = self.next_challenge;
        self.next_challenge += 1;
        let correct = f.number_challenge.then(|| {
            f.correct_answer
                .unwrap_or_else(|| rand::rng().random_range(1..100))
        });
        let at = Instant::now() + Duration::from_millis(f.delay_ms);
        let auto = match f.response.as_str() {
            "approve" => Some((at, ChallengeState::Approved)),
            "reject" => Some((at, ChallengeState::Rejected)),
            "timeout" => Some((at, ChallengeState::Timeout)),
            _ => None,
        };
        self.challenges.insert(
            id,
            Challenge {
                username: username.to_string(),
                correct_answer: correct,
                state: ChallengeState::Waiting,
                auto_at: auto,
                deadline: Instant::now() + Duration::from_secs(60),
            },
        );
        (id, correct)
    }

    /// The current state of a challenge, applying automatic answers and the deadline.
    pub fn poll(&mut self, id: u64) -> ChallengeState {
        let Some(c) = self.challenges.get_mut(&id) else {
            return ChallengeState::Timeout;
        };
        if c.state == ChallengeState::Waiting {
            if let Some((at, st)) = &c.auto_at {
                if Instant::now() >= *at {
                    c.state = st.clone();
                }
            }
            if c.state == ChallengeState::Waiting && Instant::now() >= c.deadline {
                c.state = ChallengeState::Timeout;
            }
        }
        c.state.clone()
    }

    pub fn finish(&mut self, id: u64) {
        self.challenges.remove(&id);
    }
}

/// Handles `/_sandbox/secrets/idp/...`; `rest` is the path after `idp/`.
pub fn admin(p: &mut Provider, method: &str, rest: &str, body: &Value) -> (u16, Value) {
    let parts: Vec<&str> = rest.trim_matches('/').split('/').collect();
    match (method, parts.as_slice()) {
        ("GET", ["users"]) => (200, json!({ "users": p.users.keys().collect::<Vec<_>>() })),
        ("PUT" | "POST", ["users", name]) => {
            let mut u: ProviderUser = match serde_json::from_value(body.clone()) {
                Ok(u) => u,
                Err(e) => return (400, json!({ "errors": [e.to_string()] })),
            };
            if let Some(t) = &mut u.totp {
                t.provider = t.provider.to_uppercase();
                if t.secret.is_empty() {
                    let key: [u8; 20] = rand::rng().random();
                    t.secret = otp::base32_encode(&key);
                } else if otp::base32_decode(&t.secret).is_none() {
                    return (400, json!({ "errors": ["totp.secret must be base32"] }));
                }
            }
            if let Some(f) = &mut u.push {
                f.provider = f.provider.to_uppercase();
            }
            let secret = u.totp.as_ref().map(|t| t.secret.clone());
            p.users.insert(name.to_string(), u);
            (200, json!({ "username": name, "totp_secret": secret }))
        }
        ("GET", ["users", name]) => match p.users.get(*name) {
            Some(u) => (
                200,
                json!({ "username": name, "groups": u.groups, "status": u.status,
                        "totp": u.totp.as_ref().map(|t| json!({"provider": t.provider})),
                        "push": u.push }),
            ),
            None => (404, json!({ "errors": [] })),
        },
        ("DELETE", ["users", name]) => {
            p.users.remove(*name);
            (204, Value::Null)
        }
        ("GET", ["users", name, "totp"]) => {
            match p.users.get(*name).and_then(|u| u.totp.as_ref()) {
                Some(t) => {
                    let key = otp::base32_decode(&t.secret).unwrap_or_default();
                    (
                        200,
                        json!({ "code": otp::totp(otp::Algorithm::Sha1, &key, super::now(), 30, 6) }),
                    )
                }
                None => (404, json!({ "errors": ["user has no TOTP factor"] })),
            }
        }
        ("GET", ["push"]) => {
            let list: Vec<Value> = p
                .challenges
                .values()
                .filter(|c| c.state == ChallengeState::Waiting)
                .map(|c| json!({ "username": c.username, "correct_answer": c.correct_answer }))
                .collect();
            (200, json!({ "challenges": list }))
        }
        ("POST" | "PUT", ["push", name]) => {
            let Some(c) = p
                .challenges
                .values_mut()
                .find(|c| c.username == *name && c.state == ChallengeState::Waiting)
            else {
                return (404, json!({ "errors": ["no pending push for this user"] }));
            };
            c.state = match &body["answer"] {
                Value::String(s) if s == "approve" => ChallengeState::Approved,
                Value::String(s) if s == "reject" => ChallengeState::Rejected,
                Value::Number(n) => {
                    if c.correct_answer.is_none_or(|a| Some(a) == n.as_i64()) {
                        ChallengeState::Approved
                    } else {
                        ChallengeState::Rejected
                    }
                }
                _ => {
                    return (
                        400,
                        json!({ "errors": ["answer must be approve, reject or a number"] }),
                    )
                }
            };
            (204, Value::Null)
        }
        _ => (404, json!({ "errors": ["unknown sandbox admin path"] })),
    }
}
