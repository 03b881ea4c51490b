//! Client of the secrets service's identity-provider auth method: local users and groups
//! (`/v1/auth/:mount/users/:name`, `/v1/auth/:mount/groups/:name`, spec A §2.3, §4.2).

use std::sync::Arc;

use serde_json::{json, Value};

use crate::clients::http::{ClientError, Http};

/// A user's or group's local settings as the service reports them (`groups` is always empty
/// for a group).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IdpEntry {
    /// The user's or group's name.
    pub name: String,
    /// Policies attached to it.
    pub policies: Vec<String>,
    /// The groups a user belongs to.
    pub groups: Vec<String>,
}

/// `users` or `groups`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A local user (`users/`).
    User,
    /// A local group (`groups/`).
    Group,
}

impl EntryKind {
    fn segment(self) -> &'static str {
        match self {
            EntryKind::User => "users",
            EntryKind::Group => "groups",
        }
    }
}

/// Calls of the identity-provider auth method at a given mount: config, users and groups.
#[derive(Clone, Debug)]
pub struct IdpClient {
    http: Arc<Http>,
}

impl From<Arc<Http>> for IdpClient {
    fn from(http: Arc<Http>) -> Self {
        Self { http }
    }
}

use crate::clients::http::encode_segment;

/// A mount path such as `idp` or `corp/idp`: each segment encoded, no surrounding slashes.
fn mount_path(mount: &str) -> String {
    mount
        .trim_matches('/')
        .split('/')
        .map(encode_segment)
        .collect::<Vec<_>>()
        .join("/")
}

fn entry_path(mount: &str, kind: EntryKind, name: &str) -> String {
    format!(
        "/v1/auth/{}/{}/{}",
        mount_path(mount),
        kind.segment(),
        encode_segment(name)
    )
}

/// A list field given as an array or a comma-separated string; `null` is empty.
pub fn list_field(d: &Value, key: &str) -> Vec<String> {
    match d.get(key) {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
        Some(Value::String(s)) => s
            .split(',')
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect(),
        _ => Vec::new(),
    }
}

impl IdpClient {
    /// Read a user or group; `None` when the mount has none of that name.
    pub async fn read_entry(
        &self,
        mount: &str,
        kind: EntryKind,
        name: &str,
    ) -> Result<Option<IdpEntry>, ClientError> {
        match self
            .http
            .call("GET", &entry_path(mount, kind, name), None)
            .await
        {
            Ok(resp) => {
                let Some(d) = resp.body.get("data").filter(|d| d.is_object()) else {
                    return Ok(None);
                };
                Ok(Some(IdpEntry {
                    name: name.to_string(),
                    policies: list_field(d, "policies"),
                    groups: list_field(d, "groups"),
                }))
            }
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Create or replace a user or group (every write replaces the entry's settings).
    pub async fn write_entry(
        &self,
        mount: &str,
        kind: EntryKind,
        e: &IdpEntry,
    ) -> Result<(), ClientError> {
        let mut body = json!({ "policies": e.policies });
        if kind == EntryKind::User {
            body["groups"] = json!(e.groups);
        }
        self.http
            .call("POST", &entry_path(mount, kind, &e.name), Some(&body))
            .await
            .map(|_| ())
    }

    /// Delete a user or group; an absent one counts as deleted.
    pub async fn delete_entry(
        &self,
        mount: &str,
        kind: EntryKind,
        name: &str,
    ) -> Result<(), ClientError> {
        match self
            .http
            .call("DELETE", &entry_path(mount, kind, name), None)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.status() == Some(404) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// The auth method's configuration as read (`data` of `GET auth/:mount/config`); absent and
/// `null` fields are their zero values.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IdpConfig {
    /// The mount it was read from (not a field of the service).
    pub mount: String,
    /// The identity provider's organization.
    pub org_name: String,
    /// The identity provider's base domain.
    pub base_url: String,
    /// `true` skips the identity provider's own MFA.
    pub bypass_idp_mfa: bool,
    /// Default lifetime of the tokens issued, in seconds.
    pub token_ttl: i64,
    /// Longest lifetime of the tokens after renewals, in seconds.
    pub token_max_ttl: i64,
    /// Hard cap on the tokens' lifetime, in seconds.
    pub token_explicit_max_ttl: i64,
    /// Period of periodic tokens, in seconds (0: not periodic).
    pub token_period: i64,
    /// Policies every token issued carries.
    pub token_policies: Vec<String>,
    /// CIDRs the tokens may be used from.
    pub token_bound_cidrs: Vec<String>,
    /// `true` leaves the `default` policy out of the tokens.
    pub token_no_default_policy: bool,
    /// How many uses a token has (0: unlimited).
    pub token_num_uses: i64,
    /// `service`, `batch` or `default`.
    pub token_type: String,
}

/// Seconds from a number, a numeric string or a duration string (`90s`, `1h30m`, `7d`).
pub fn seconds(v: Option<&Value>) -> i64 {
    match v {
        Some(Value::Number(n)) => n.as_i64().unwrap_or_default(),
        Some(Value::String(s)) => parse_duration(s).unwrap_or_default(),
        _ => 0,
    }
}

/// A duration string in seconds: a plain number, or number+unit groups with units `s`, `m`,
/// `h`, `d`.
pub fn parse_duration(s: &str) -> Option<i64> {
    let s = s.trim();
    if s.is_empty() {
        return Some(0);
    }
    if let Ok(n) = s.parse::<i64>() {
        return Some(n);
    }
    let (mut total, mut num) = (0i64, String::new());
    for c in s.chars() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let n: i64 = num.parse().ok()?;
        num.clear();
        total += n * match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86400,
            _ => return None,
        };
    }
    num.is_empty().then_some(total)
}

fn flag(d: &Value, key: &str) -> bool {
    d.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn text(d: &Value, key: &str) -> String {
    d.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

impl IdpClient {
    fn config_path(mount: &str) -> String {
        format!("/v1/auth/{}/config", mount_path(mount))
    }

    /// Read the configuration; `None` when there is none (or no such mount).
    pub async fn read_config(&self, mount: &str) -> Result<Option<IdpConfig>, ClientError> {
        match self.http.call("GET", &Self::config_path(mount), None).await {
            Ok(resp) => {
                let Some(d) = resp.body.get("data").filter(|d| d.is_object()) else {
                    return Ok(None);
                };
                let org = text(d, "org_name");
                Ok(Some(IdpConfig {
                    mount: mount.trim_matches('/').to_string(),
                    org_name: if org.is_empty() {
                        text(d, "organization")
                    } else {
                        org
                    },
                    base_url: text(d, "base_url"),
                    bypass_idp_mfa: flag(d, "bypass_idp_mfa") || flag(d, "bypass_okta_mfa"),
                    token_ttl: seconds(d.get("token_ttl")),
                    token_max_ttl: seconds(d.get("token_max_ttl")),
                    token_explicit_max_ttl: seconds(d.get("token_explicit_max_ttl")),
                    token_period: seconds(d.get("token_period")),
                    token_policies: list_field(d, "token_policies"),
                    token_bound_cidrs: list_field(d, "token_bound_cidrs"),
                    token_no_default_policy: flag(d, "token_no_default_policy"),
                    token_num_uses: d.get("token_num_uses").and_then(Value::as_i64).unwrap_or(0),
                    token_type: text(d, "token_type"),
                }))
            }
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Write the configuration (only the fields in `body`; the others keep their values).
    pub async fn write_config(&self, mount: &str, body: &Value) -> Result<(), ClientError> {
        self.http
            .call("POST", &Self::config_path(mount), Some(body))
            .await
            .map(|_| ())
    }

    /// Whether an auth method is enabled at `mount`.
    pub async fn auth_mounted(&self, mount: &str) -> Result<bool, ClientError> {
        let resp = self.http.call("GET", "/v1/sys/auth", None).await?;
        let key = format!("{}/", mount.trim_matches('/'));
        let d = resp
            .body
            .get("data")
            .filter(|d| d.is_object())
            .unwrap_or(&resp.body);
        Ok(d.get(&key).is_some_and(Value::is_object))
    }

    /// Enable the identity-provider auth method at `mount`.
    pub async fn enable_auth(&self, mount: &str) -> Result<(), ClientError> {
        self.http
            .call(
                "POST",
                &format!("/v1/sys/auth/{}", mount_path(mount)),
                Some(&json!({"type": "idp"})),
            )
            .await
            .map(|_| ())
    }

    /// Disable the auth method at `mount` (removes its users, groups and logins' tokens).
    pub async fn disable_auth(&self, mount: &str) -> Result<(), ClientError> {
        match self
            .http
            .call(
                "DELETE",
                &format!("/v1/sys/auth/{}", mount_path(mount)),
                None,
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.status() == Some(404) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_read_from_arrays_strings_and_null() {
        assert_eq!(
            list_field(&json!({"p": ["a", " b "]}), "p"),
            vec!["a".to_string(), "b".to_string()]
        );
        assert_eq!(list_field(&json!({"p": "a, b"}), "p"), vec!["a", "b"]);
        assert!(list_field(&json!({"p": null}), "p").is_empty());
    }

    #[test]
    fn durations_are_read_in_seconds() {
        assert_eq!(parse_duration("1h30m"), Some(5400));
        assert_eq!(parse_duration("7d"), Some(604800));
        assert_eq!(parse_duration("45"), Some(45));
        assert_eq!(parse_duration("1x"), None);
        assert_eq!(seconds(Some(&json!(60))), 60);
        assert_eq!(seconds(Some(&json!(null))), 0);
    }

    #[test]
    fn paths_encode_each_segment_of_the_mount_and_the_name() {
        assert_eq!(
            entry_path("/corp/idp/", EntryKind::Group, "ops team"),
            "/v1/auth/corp/idp/groups/ops%20team"
        );
    }
}
