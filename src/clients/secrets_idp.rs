//! Client of the secrets service's identity-provider auth method: local users and groups
//! (`/v1/auth/:mount/users/:name`, `/v1/auth/:mount/groups/:name`, spec A §2.3, §4.2).

use std::sync::Arc;

use serde_json::{json, Value};

use super::http::{ClientError, Http};

/// A user's or group's local settings as the service reports them (`groups` is always empty
/// for a group).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IdpEntry {
    pub name: String,
    pub policies: Vec<String>,
    pub groups: Vec<String>,
}

/// `users` or `groups`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    User,
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

#[derive(Clone, Debug)]
pub struct SecretsIdpClient {
    http: Arc<Http>,
}

impl From<Arc<Http>> for SecretsIdpClient {
    fn from(http: Arc<Http>) -> Self {
        Self { http }
    }
}

fn encode_segment(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

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

impl SecretsIdpClient {
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
    fn paths_encode_each_segment_of_the_mount_and_the_name() {
        assert_eq!(
            entry_path("/corp/idp/", EntryKind::Group, "ops team"),
            "/v1/auth/corp/idp/groups/ops%20team"
        );
    }
}
