//! Client of the secrets service's directory engine (spec C §4.2) and of the lease endpoints a
//! check-out needs (spec A). Passwords are returned as [`SecretString`]; borrower client tokens
//! of a set's status are never read.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::clients::http::{ClientError, Http, SecretString};

/// Calls of the directory engine (config, roles, library sets, check-outs) at a given mount.
#[derive(Clone, Debug)]
pub struct AdClient {
    http: Arc<Http>,
}

impl From<Arc<Http>> for AdClient {
    fn from(http: Arc<Http>) -> Self {
        Self { http }
    }
}

/// A role as the service reads it back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoleRead {
    /// The directory account the role manages.
    pub service_account_name: String,
    /// Password lifetime in seconds (0: the engine's default).
    pub ttl: i64,
    /// When the engine last rotated the password (RFC 3339), if it has.
    pub last_vault_rotation: Option<String>,
    /// When the directory last saw the password set (RFC 3339), if known.
    pub password_last_set: Option<String>,
}

/// A role's credentials.
#[derive(Clone, Debug)]
pub struct Creds {
    /// The account's login name.
    pub username: String,
    /// The password valid now.
    pub current_password: SecretString,
    /// The password before the last rotation, while the engine keeps it.
    pub last_password: Option<SecretString>,
}

/// A library set as the service reads it back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SetRead {
    /// The accounts the set lends out.
    pub service_account_names: Vec<String>,
    /// Default check-out lifetime in seconds.
    pub ttl: i64,
    /// Longest check-out lifetime in seconds.
    pub max_ttl: i64,
    /// `true` lets any caller check an account in, not only its borrower.
    pub disable_check_in_enforcement: bool,
}

/// One account of a set's status: name, available, borrower entity (the token is dropped).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccountStatus {
    /// The account's name.
    pub name: String,
    /// `true` when the account is not checked out.
    pub available: bool,
    /// The identity entity that borrowed it, when the service reports one.
    pub borrower_entity_id: Option<String>,
}

/// A check-out: the account, its password, and the lease.
#[derive(Clone, Debug)]
pub struct CheckedOut {
    /// The account lent.
    pub service_account_name: String,
    /// Its password, valid until the check-in.
    pub password: SecretString,
    /// The lease of the check-out (revoking it checks the account in).
    pub lease_id: String,
    /// Lifetime of the lease in seconds.
    pub lease_duration: i64,
}

/// A lease as `sys/leases/lookup` shows it.
#[derive(Clone, Debug)]
pub struct LeaseInfo {
    /// Seconds the lease has left.
    pub ttl: i64,
}

/// Outcome of a rotation: done, or a rotation already running (the service's warning).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rotation {
    /// The password was rotated.
    Done,
    /// Another rotation was already running: the service's warning.
    Busy(String),
}

use crate::clients::http::encode_segment as enc;

fn mount_path(mount: &str) -> String {
    mount
        .trim_matches('/')
        .split('/')
        .map(enc)
        .collect::<Vec<_>>()
        .join("/")
}

/// Read results from `data` only.
fn data(body: &Value) -> &Value {
    body.get("data").unwrap_or(&Value::Null)
}

fn int(v: &Value) -> i64 {
    v.as_i64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or(0)
}

fn opt_str(v: &Value) -> Option<String> {
    v.as_str().filter(|s| !s.is_empty()).map(str::to_string)
}

fn warning(body: &Value) -> Option<String> {
    body.get("warnings")
        .and_then(Value::as_array)
        .and_then(|w| w.iter().filter_map(Value::as_str).next())
        .map(str::to_string)
}

impl AdClient {
    /// The Connection and address a search for lost responses is scoped to
    /// ([`crate::reconcile::lost`]).
    pub fn lost_scope(&self) -> String {
        format!("{} {}", self.http.connection(), self.http.base_url())
    }

    fn p(&self, mount: &str, rest: &str) -> String {
        format!("/v1/{}/{rest}", mount_path(mount))
    }

    async fn read(&self, path: &str) -> Result<Option<Value>, ClientError> {
        match self.http.call("GET", path, None).await {
            Ok(r) => Ok(Some(r.body)),
            Err(e) if e.status() == Some(404) && !unmounted(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn delete(&self, path: &str) -> Result<(), ClientError> {
        match self.http.call("DELETE", path, None).await {
            Ok(_) => Ok(()),
            Err(e) if e.status() == Some(404) && !unmounted(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `GET <mount>/config`: the config's fields (never the bind password), `None` when unset.
    pub async fn read_config(
        &self,
        mount: &str,
    ) -> Result<Option<Map<String, Value>>, ClientError> {
        Ok(self
            .read(&self.p(mount, "config"))
            .await?
            .map(|b| data(&b).as_object().cloned().unwrap_or_default()))
    }

    /// `POST <mount>/config`.
    pub async fn write_config(&self, mount: &str, body: &Value) -> Result<(), ClientError> {
        self.http
            .call("POST", &self.p(mount, "config"), Some(body))
            .await
            .map(|_| ())
    }

    /// `DELETE <mount>/config`.
    pub async fn delete_config(&self, mount: &str) -> Result<(), ClientError> {
        self.delete(&self.p(mount, "config")).await
    }

    /// `POST <mount>/rotate-root`.
    pub async fn rotate_root(&self, mount: &str) -> Result<Rotation, ClientError> {
        let r = self
            .http
            .call("POST", &self.p(mount, "rotate-root"), None)
            .await?;
        Ok(match warning(&r.body) {
            Some(w) if r.status.as_u16() == 200 => Rotation::Busy(w),
            _ => Rotation::Done,
        })
    }

    /// `GET <mount>/roles/:name`; `None` when the role does not exist.
    pub async fn read_role(
        &self,
        mount: &str,
        name: &str,
    ) -> Result<Option<RoleRead>, ClientError> {
        Ok(self
            .read(&self.p(mount, &format!("roles/{}", enc(name))))
            .await?
            .map(|b| {
                let d = data(&b);
                RoleRead {
                    service_account_name: d["service_account_name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    ttl: int(&d["ttl"]),
                    last_vault_rotation: opt_str(&d["last_vault_rotation"]),
                    password_last_set: opt_str(&d["password_last_set"]),
                }
            }))
    }

    /// `POST <mount>/roles/:name`: create or update the role of `account`.
    pub async fn write_role(
        &self,
        mount: &str,
        name: &str,
        account: &str,
        ttl: Option<i64>,
    ) -> Result<(), ClientError> {
        let mut body = json!({ "service_account_name": account });
        if let Some(t) = ttl {
            body["ttl"] = json!(t);
        }
        self.http
            .call(
                "POST",
                &self.p(mount, &format!("roles/{}", enc(name))),
                Some(&body),
            )
            .await
            .map(|_| ())
    }

    /// `DELETE <mount>/roles/:name`.
    pub async fn delete_role(&self, mount: &str, name: &str) -> Result<(), ClientError> {
        self.delete(&self.p(mount, &format!("roles/{}", enc(name))))
            .await
    }

    /// `GET <mount>/creds/:role` (may rotate the password, as the service does after the ttl).
    pub async fn creds(&self, mount: &str, name: &str) -> Result<Option<Creds>, ClientError> {
        let path = self.p(mount, &format!("creds/{}", enc(name)));
        // A read of the credentials may rotate them (after the ttl) and brings a password into
        // the process: a read-only client (a plan) reports it instead of doing it.
        if self.http.read_only() {
            return Err(ClientError::ReadOnly {
                verb: "GET".into(),
                path,
            });
        }
        Ok(self.read(&path).await?.map(|b| {
            let d = data(&b);
            Creds {
                username: d["username"].as_str().unwrap_or_default().to_string(),
                current_password: SecretString::new(
                    d["current_password"].as_str().unwrap_or_default(),
                ),
                last_password: opt_str(&d["last_password"]).map(SecretString::new),
            }
        }))
    }

    /// `POST <mount>/rotate-role/:role`.
    pub async fn rotate_role(&self, mount: &str, name: &str) -> Result<Rotation, ClientError> {
        let r = self
            .http
            .call(
                "POST",
                &self.p(mount, &format!("rotate-role/{}", enc(name))),
                None,
            )
            .await?;
        Ok(match warning(&r.body) {
            Some(w) if r.status.as_u16() == 200 => Rotation::Busy(w),
            _ => Rotation::Done,
        })
    }

    /// `GET <mount>/library/:name`; `None` when the set does not exist.
    pub async fn read_set(&self, mount: &str, name: &str) -> Result<Option<SetRead>, ClientError> {
        Ok(self
            .read(&self.p(mount, &format!("library/{}", enc(name))))
            .await?
            .map(|b| {
                let d = data(&b);
                SetRead {
                    service_account_names: d["service_account_names"]
                        .as_array()
                        .map(|a| {
                            a.iter()
                                .filter_map(Value::as_str)
                                .map(str::to_string)
                                .collect()
                        })
                        .unwrap_or_default(),
                    ttl: int(&d["ttl"]),
                    max_ttl: int(&d["max_ttl"]),
                    disable_check_in_enforcement: d["disable_check_in_enforcement"]
                        .as_bool()
                        .unwrap_or(false),
                }
            }))
    }

    /// `POST <mount>/library/:name`: create or update the set.
    pub async fn write_set(&self, mount: &str, name: &str, s: &SetRead) -> Result<(), ClientError> {
        let body = json!({
            "service_account_names": s.service_account_names,
            "ttl": s.ttl,
            "max_ttl": s.max_ttl,
            "disable_check_in_enforcement": s.disable_check_in_enforcement,
        });
        self.http
            .call(
                "POST",
                &self.p(mount, &format!("library/{}", enc(name))),
                Some(&body),
            )
            .await
            .map(|_| ())
    }

    /// `DELETE <mount>/library/:name`.
    pub async fn delete_set(&self, mount: &str, name: &str) -> Result<(), ClientError> {
        self.delete(&self.p(mount, &format!("library/{}", enc(name))))
            .await
    }

    /// `GET <mount>/library/:set/status`, sorted by account. Only `available` and the
    /// borrower's entity are kept: the borrower's client token is never read into memory we
    /// keep.
    pub async fn set_status(
        &self,
        mount: &str,
        name: &str,
    ) -> Result<Vec<AccountStatus>, ClientError> {
        let r = self
            .http
            .call(
                "GET",
                &self.p(mount, &format!("library/{}/status", enc(name))),
                None,
            )
            .await?;
        let mut out: Vec<AccountStatus> = data(&r.body)
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| AccountStatus {
                        name: k.clone(),
                        available: v["available"].as_bool().unwrap_or(false),
                        borrower_entity_id: opt_str(&v["borrower_entity_id"]),
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// `POST <mount>/library/:set/check-out`.
    pub async fn check_out(
        &self,
        mount: &str,
        set: &str,
        ttl: Option<i64>,
    ) -> Result<CheckedOut, ClientError> {
        let body = match ttl {
            Some(t) => json!({ "ttl": t }),
            None => json!({}),
        };
        let r = self
            .http
            .call(
                "POST",
                &self.p(mount, &format!("library/{}/check-out", enc(set))),
                Some(&body),
            )
            .await?;
        let d = data(&r.body);
        Ok(CheckedOut {
            service_account_name: d["service_account_name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            password: SecretString::new(d["password"].as_str().unwrap_or_default()),
            lease_id: r.body["lease_id"].as_str().unwrap_or_default().to_string(),
            lease_duration: int(&r.body["lease_duration"]),
        })
    }

    /// `POST <mount>/library/:set/check-in` of one account; returns the accounts checked in.
    pub async fn check_in(
        &self,
        mount: &str,
        set: &str,
        account: &str,
    ) -> Result<Vec<String>, ClientError> {
        let body = json!({ "service_account_names": [account] });
        let r = self
            .http
            .call(
                "POST",
                &self.p(mount, &format!("library/{}/check-in", enc(set))),
                Some(&body),
            )
            .await?;
        Ok(data(&r.body)["check_ins"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default())
    }

    /// `PUT sys/leases/lookup`: `None` when the lease is unknown (expired or revoked). A read,
    /// whatever its method: not in the change log.
    pub async fn lookup_lease(&self, lease_id: &str) -> Result<Option<LeaseInfo>, ClientError> {
        match self
            .http
            .call_read(
                "PUT",
                "/v1/sys/leases/lookup",
                Some(&json!({ "lease_id": lease_id })),
            )
            .await
        {
            Ok(r) => Ok(Some(LeaseInfo {
                ttl: int(&data(&r.body)["ttl"]),
            })),
            Err(ClientError::Status {
                status: 400,
                message,
                ..
            }) if message.contains("invalid lease") => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `PUT sys/leases/renew` without increment (a check-out then gets its set's ttl); returns
    /// the new lease duration, `None` when the lease is gone.
    pub async fn renew_lease(&self, lease_id: &str) -> Result<Option<i64>, ClientError> {
        match self
            .http
            .call(
                "PUT",
                "/v1/sys/leases/renew",
                Some(&json!({ "lease_id": lease_id })),
            )
            .await
        {
            Ok(r) => Ok(Some(int(&r.body["lease_duration"]))),
            Err(ClientError::Status {
                status: 400,
                message,
                ..
            }) if message.contains("lease not found")
                || message.contains("invalid lease")
                || message.contains("lease expired") =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}

/// Whether a 404 means the engine is not mounted at all (a server without the directory engine,
/// such as OpenBao, or a wrong mount) rather than "no such object".
pub fn unmounted(e: &ClientError) -> bool {
    match e {
        ClientError::Status {
            status: 404,
            message,
            ..
        } => message.contains("no handler for route") || message.contains("unsupported path"),
        _ => false,
    }
}
