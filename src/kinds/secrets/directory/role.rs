//! AdRole ↔ `<mount>/roles/:name`, `creds/:name`, `rotate-role/:name` (spec C §2.2, §4.2).
//!
//! Status carries `lastVaultRotation` (present only once the service rotated the password) and
//! `passwordLastSet` from the role read. With `credentialsSecret`, the credentials are read
//! only when they may have changed (a rotation Quartet did not see yet, the role's ttl passed,
//! or the Secret is missing) and written to the owned Secret when the password differs from
//! the one last written (compared by keyed hash, never stored).

use kube::ResourceExt;
use serde_json::{json, Map, Value};

use super::{ad_error, epoch, secret_exists};
use crate::api::secrets::directory::{duration_secs, AdRole};
use crate::api::Service;
use crate::clients::secrets::directory::{AdClient, RoleRead, Rotation};
use crate::clients::SecretString;
use crate::reconcile::hash::keyed_hash;
use crate::reconcile::owned_secret::QuartetSecret;
use crate::reconcile::{managed_fields, Context, Created, Managed, Reconciled, Result};

impl Managed for AdRole {
    const SERVICE: Service = Service::Secrets;
    managed_fields!();
}

/// What a role should be.
pub struct Desired {
    /// The engine's mount.
    pub mount: String,
    /// The role's name in the service.
    pub name: String,
    /// The directory account it manages.
    pub account: String,
    /// Password lifetime in seconds; `None`: not managed.
    pub ttl: Option<i64>,
    /// For the credentials Secret (written while observing).
    pub kube: kube::Client,
    /// Key of the hashes of the credentials written to the Secret.
    pub hash_key: SecretString,
}

/// A role as read, with what status says of its rotations and credentials.
pub struct Observed {
    /// The engine's mount.
    pub mount: String,
    /// The role's name in the service.
    pub name: String,
    /// The role as the service reads it back.
    pub role: RoleRead,
    /// The last `rotateRequest` handled.
    pub handled: Option<String>,
    /// Keyed hash of the credentials last written to the Secret.
    pub credentials_hash: Option<String>,
    /// Why the object is not settled yet (a rotation in progress or waiting).
    pub pending: Option<String>,
}

impl AdRole {
    /// The role's name in the service (lower-cased by the service).
    pub fn role_name(&self) -> String {
        self.name_any().to_lowercase()
    }

    /// Whether the credentials may differ from those in the Secret.
    fn creds_may_have_changed(&self, role: &RoleRead, now: i64) -> bool {
        let st = self.status.as_ref();
        let seen = st.and_then(|s| s.last_vault_rotation.clone());
        if role.last_vault_rotation.is_none() || role.last_vault_rotation != seen {
            return true;
        }
        if st.and_then(|s| s.credentials_hash.as_ref()).is_none() {
            return true;
        }
        // After the ttl the next read rotates the password.
        match role.last_vault_rotation.as_deref().and_then(epoch) {
            Some(t) => now >= t + role.ttl.max(1),
            None => true,
        }
    }
}

/// Managed fields that differ (`ttl` only when the spec sets it).
pub fn diff(account: &str, ttl: Option<i64>, observed: &RoleRead) -> Vec<&'static str> {
    let mut changed = Vec::new();
    if account != observed.service_account_name {
        changed.push("serviceAccountName");
    }
    if ttl.is_some_and(|t| t != 0 && t != observed.ttl) {
        changed.push("ttl");
    }
    changed
}

impl AdRole {
    /// Read the credentials and write them to the Secret `name` unless the password's keyed
    /// hash is `known`; returns the hash (`None` when the role is gone).
    async fn write_credentials(
        &self,
        client: &AdClient,
        desired: &Desired,
        name: &str,
        known: Option<&str>,
    ) -> Result<Option<String>> {
        let m = &desired.mount;
        let Some(creds) = client
            .creds(m, &desired.name)
            .await
            .map_err(|e| ad_error(m, e))?
        else {
            return Ok(None);
        };
        let hash = keyed_hash(
            desired.hash_key.expose().as_bytes(),
            &[
                b"ad-role-password",
                creds.current_password.expose().as_bytes(),
            ],
        );
        if known != Some(hash.as_str()) {
            let last = creds.last_password.unwrap_or_else(|| SecretString::new(""));
            QuartetSecret::owned_by(self, name)?
                .value("username", creds.username)
                .value("password", creds.current_password.expose())
                .value("lastPassword", last.expose())
                .apply::<Self>(&desired.kube)
                .await?;
            tracing::info!(secret = %name, "role credentials written");
        }
        Ok(Some(hash))
    }
}

impl Reconciled for AdRole {
    type Client = AdClient;
    type Desired = Desired;
    type Observed = Observed;

    async fn desired(&self, ctx: &Context) -> Result<Desired> {
        Ok(Desired {
            mount: self.spec.mount.clone(),
            name: self.role_name(),
            account: self.spec.service_account_name.clone(),
            ttl: self.spec.ttl.as_deref().and_then(duration_secs),
            kube: ctx.client.clone(),
            hash_key: ctx.settings.hash_key.clone(),
        })
    }

    async fn observe(
        &self,
        client: &AdClient,
        desired: &Desired,
        _remote_id: Option<&str>,
    ) -> Result<Option<Observed>> {
        let m = &desired.mount;
        let Some(mut role) = client
            .read_role(m, &desired.name)
            .await
            .map_err(|e| ad_error(m, e))?
        else {
            return Ok(None);
        };
        let st = self.status.as_ref();
        let mut obs = Observed {
            mount: m.clone(),
            name: desired.name.clone(),
            role: role.clone(),
            handled: st.and_then(|s| s.handled_rotate_request.clone()),
            credentials_hash: st.and_then(|s| s.credentials_hash.clone()),
            pending: None,
        };
        // The role must manage the desired account before rotating or reading credentials.
        if role.service_account_name != desired.account {
            return Ok(Some(obs));
        }
        // A rotation Quartet just made always refreshes the Secret: the role's
        // `last_vault_rotation` alone cannot tell it apart from the previous one when both fall
        // within the timestamp's resolution.
        let mut rotated = false;
        if let Some(req) = &self.spec.rotate_request {
            if obs.handled.as_ref() != Some(req) {
                match client
                    .rotate_role(m, &desired.name)
                    .await
                    .map_err(|e| ad_error(m, e))?
                {
                    Rotation::Done => {
                        obs.handled = Some(req.clone());
                        rotated = true;
                        if let Some(r) = client
                            .read_role(m, &desired.name)
                            .await
                            .map_err(|e| ad_error(m, e))?
                        {
                            role = r;
                        }
                    }
                    Rotation::Busy(w) => obs.pending = Some(format!("{w} Retrying later.")),
                }
            }
        }
        if let Some(secret) = &self.spec.credentials_secret {
            let ns = self.namespace().unwrap_or_default();
            let now = chrono::Utc::now().timestamp();
            let missing = !secret_exists(&desired.kube, &ns, &secret.name).await?;
            if missing || rotated || self.creds_may_have_changed(&role, now) {
                let known = if missing {
                    None
                } else {
                    obs.credentials_hash.clone()
                };
                if let Some(hash) = self
                    .write_credentials(client, desired, &secret.name, known.as_deref())
                    .await?
                {
                    obs.credentials_hash = Some(hash);
                    // The read may have rotated the password: show the role as it is now.
                    if let Some(r) = client
                        .read_role(m, &desired.name)
                        .await
                        .map_err(|e| ad_error(m, e))?
                    {
                        role = r;
                    }
                }
            }
        }
        obs.role = role;
        Ok(Some(obs))
    }

    fn diff(desired: &Desired, observed: &Observed) -> Vec<&'static str> {
        diff(&desired.account, desired.ttl, &observed.role)
    }

    fn shown(desired: &Desired, observed: &Observed, field: &str) -> Option<(String, String)> {
        use crate::reconcile::show;
        match field {
            "serviceAccountName" => show::pair(
                show::text(&observed.role.service_account_name),
                show::text(&desired.account),
            ),
            "ttl" => show::pair(observed.role.ttl.to_string(), show::opt(&desired.ttl)),
            _ => None,
        }
    }

    async fn create(&self, client: &AdClient, desired: &Desired) -> Result<Created> {
        let m = &desired.mount;
        client
            .write_role(m, &desired.name, &desired.account, desired.ttl)
            .await
            .map_err(|e| ad_error(m, e))?;
        // The credentials Secret exists once the role is Ready.
        if let Some(secret) = &self.spec.credentials_secret {
            self.write_credentials(client, desired, &secret.name, None)
                .await?;
        }
        Ok(Created {
            remote_id: format!("{m}/roles/{}", desired.name),
            // The next pass reads the role into status (and writes the credentials Secret).
            complete: false,
        })
    }

    async fn update(
        &self,
        client: &AdClient,
        desired: &Desired,
        _observed: &Observed,
        _changed: &[&'static str],
    ) -> Result<()> {
        let m = &desired.mount;
        client
            .write_role(m, &desired.name, &desired.account, desired.ttl)
            .await
            .map_err(|e| ad_error(m, e))
    }

    async fn delete(&self, client: &AdClient, _remote_id: &str) -> Result<()> {
        let m = &self.spec.mount;
        client
            .delete_role(m, &self.role_name())
            .await
            .map_err(|e| ad_error(m, e))
    }

    fn remote_id(observed: &Observed) -> String {
        format!("{}/roles/{}", observed.mount, observed.name)
    }

    /// A plain read: observe may rotate or read credentials, never wanted on deletion.
    async fn find_unrecorded(
        &self,
        client: &AdClient,
        desired: &Desired,
    ) -> Result<Option<String>> {
        let m = &desired.mount;
        let role = client
            .read_role(m, &desired.name)
            .await
            .map_err(|e| ad_error(m, e))?;
        Ok(role.map(|_| format!("{m}/roles/{}", desired.name)))
    }

    fn pending(observed: &Observed) -> Option<String> {
        observed.pending.clone()
    }

    fn status_fields(&self, observed: &Observed) -> Map<String, Value> {
        let mut m = Map::new();
        if let Some(t) = &observed.role.last_vault_rotation {
            m.insert("lastVaultRotation".into(), json!(t));
        }
        if let Some(t) = &observed.role.password_last_set {
            m.insert("passwordLastSet".into(), json!(t));
        }
        if let Some(h) = &observed.handled {
            m.insert("handledRotateRequest".into(), json!(h));
        }
        if let Some(h) = &observed.credentials_hash {
            m.insert("credentialsHash".into(), json!(h));
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(account: &str, ttl: i64) -> RoleRead {
        RoleRead {
            service_account_name: account.into(),
            ttl,
            ..Default::default()
        }
    }

    #[test]
    fn the_ttl_is_managed_only_when_set() {
        assert!(diff("a@x", None, &role("a@x", 100)).is_empty());
        assert_eq!(diff("a@x", Some(50), &role("a@x", 100)), vec!["ttl"]);
        assert_eq!(
            diff("b@x", None, &role("a@x", 100)),
            vec!["serviceAccountName"]
        );
    }
}
