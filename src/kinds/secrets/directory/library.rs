//! AdLibrarySet ↔ `<mount>/library/:name` and its `/status` (spec C §2.2, §4.2).
//!
//! The set's accounts and their availability are read from `/status` at every pass and kept in
//! `status.accounts` / `status.availableCount`. `/status` also names the borrower's client
//! token: the client never keeps it (only the entity id), so it cannot reach status, logs or
//! Events.

use kube::ResourceExt;
use serde_json::{json, Map, Value};

use super::ad_error;
use crate::api::secrets::directory::{duration_secs, AdLibrarySet};
use crate::api::Service;
use crate::clients::secrets::directory::{AccountStatus, AdClient, SetRead};
use crate::reconcile::{managed_fields, Context, Created, Managed, Reconciled, Result};

/// The service's default for a set's `ttl` and `max_ttl`.
const DEFAULT_TTL: i64 = 24 * 3600;

impl Managed for AdLibrarySet {
    const SERVICE: Service = Service::Secrets;
    managed_fields!();
}

/// What a library set should be.
pub struct SetDesired {
    /// The engine's mount.
    pub mount: String,
    /// The set's name in the service.
    pub name: String,
    /// Its accounts and check-out settings.
    pub set: SetRead,
}

/// A library set as read, with its accounts' check-out state.
pub struct SetObserved {
    /// The engine's mount.
    pub mount: String,
    /// The set's name in the service.
    pub name: String,
    /// Its accounts and check-out settings.
    pub set: SetRead,
    /// Each account's check-out state (`/status`).
    pub accounts: Vec<AccountStatus>,
}

impl AdLibrarySet {
    /// The set's name in the service (lower-cased by the service).
    pub fn set_name(&self) -> String {
        self.name_any().to_lowercase()
    }
}

/// Managed fields that differ; the accounts are a set.
pub fn diff(desired: &SetRead, observed: &SetRead) -> Vec<&'static str> {
    let mut changed = Vec::new();
    let mut want = desired.service_account_names.clone();
    let mut have = observed.service_account_names.clone();
    want.sort();
    want.dedup();
    have.sort();
    have.dedup();
    if want != have {
        changed.push("serviceAccountNames");
    }
    if desired.ttl != observed.ttl {
        changed.push("ttl");
    }
    if desired.max_ttl != observed.max_ttl {
        changed.push("maxTtl");
    }
    if desired.disable_check_in_enforcement != observed.disable_check_in_enforcement {
        changed.push("disableCheckInEnforcement");
    }
    changed
}

impl Reconciled for AdLibrarySet {
    type Client = AdClient;
    type Desired = SetDesired;
    type Observed = SetObserved;

    async fn desired(&self, _ctx: &Context) -> Result<SetDesired> {
        let s = &self.spec;
        let d = |v: &Option<String>| v.as_deref().and_then(duration_secs).unwrap_or(DEFAULT_TTL);
        let mut names = s.service_account_names.clone();
        names.sort();
        names.dedup();
        Ok(SetDesired {
            mount: s.mount.clone(),
            name: self.set_name(),
            set: SetRead {
                service_account_names: names,
                ttl: d(&s.ttl),
                max_ttl: d(&s.max_ttl),
                disable_check_in_enforcement: s.disable_check_in_enforcement.unwrap_or(false),
            },
        })
    }

    async fn observe(
        &self,
        client: &AdClient,
        desired: &SetDesired,
        _remote_id: Option<&str>,
    ) -> Result<Option<SetObserved>> {
        let m = &desired.mount;
        let Some(set) = client
            .read_set(m, &desired.name)
            .await
            .map_err(|e| ad_error(m, e))?
        else {
            return Ok(None);
        };
        let accounts = client
            .set_status(m, &desired.name)
            .await
            .map_err(|e| ad_error(m, e))?;
        Ok(Some(SetObserved {
            mount: m.clone(),
            name: desired.name.clone(),
            set,
            accounts,
        }))
    }

    fn diff(desired: &SetDesired, observed: &SetObserved) -> Vec<&'static str> {
        diff(&desired.set, &observed.set)
    }

    fn shown(
        desired: &SetDesired,
        observed: &SetObserved,
        field: &str,
    ) -> Option<(String, String)> {
        use crate::reconcile::show;
        let (want, have) = (&desired.set, &observed.set);
        match field {
            "serviceAccountNames" => show::pair(
                show::set(&have.service_account_names),
                show::set(&want.service_account_names),
            ),
            "ttl" => show::pair(have.ttl.to_string(), want.ttl.to_string()),
            "maxTtl" => show::pair(have.max_ttl.to_string(), want.max_ttl.to_string()),
            "disableCheckInEnforcement" => show::pair(
                have.disable_check_in_enforcement.to_string(),
                want.disable_check_in_enforcement.to_string(),
            ),
            _ => None,
        }
    }

    async fn create(&self, client: &AdClient, desired: &SetDesired) -> Result<Created> {
        let m = &desired.mount;
        client
            .write_set(m, &desired.name, &desired.set)
            .await
            .map_err(|e| ad_error(m, e))?;
        Ok(Created {
            remote_id: format!("{m}/library/{}", desired.name),
            // The next pass reads the accounts' availability into status.
            complete: false,
        })
    }

    async fn update(
        &self,
        client: &AdClient,
        desired: &SetDesired,
        _observed: &SetObserved,
        _changed: &[&'static str],
    ) -> Result<()> {
        let m = &desired.mount;
        client
            .write_set(m, &desired.name, &desired.set)
            .await
            .map_err(|e| ad_error(m, e))
    }

    async fn delete(&self, client: &AdClient, _remote_id: &str) -> Result<()> {
        let m = &self.spec.mount;
        client
            .delete_set(m, &self.set_name())
            .await
            .map_err(|e| ad_error(m, e))
    }

    fn remote_id(observed: &SetObserved) -> String {
        format!("{}/library/{}", observed.mount, observed.name)
    }

    fn status_fields(&self, observed: &SetObserved) -> Map<String, Value> {
        status_fields(&observed.accounts)
    }
}

/// `accounts` and `availableCount` from a set's status.
pub fn status_fields(accounts: &[AccountStatus]) -> Map<String, Value> {
    let list: Vec<Value> = accounts
        .iter()
        .map(|a| {
            let mut v = json!({"name": a.name, "available": a.available});
            if let Some(e) = &a.borrower_entity_id {
                v["borrowerEntityId"] = json!(e);
            }
            v
        })
        .collect();
    let mut m = Map::new();
    m.insert(
        "availableCount".into(),
        json!(accounts.iter().filter(|a| a.available).count()),
    );
    m.insert("accounts".into(), Value::Array(list));
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str], ttl: i64) -> SetRead {
        SetRead {
            service_account_names: names.iter().map(|s| s.to_string()).collect(),
            ttl,
            max_ttl: ttl,
            disable_check_in_enforcement: false,
        }
    }

    #[test]
    fn account_order_is_not_a_change() {
        assert!(diff(&set(&["a", "b"], 60), &set(&["b", "a"], 60)).is_empty());
    }

    #[test]
    fn each_changed_field_is_named() {
        assert_eq!(
            diff(&set(&["a"], 60), &set(&["b"], 120)),
            vec!["serviceAccountNames", "ttl", "maxTtl"]
        );
    }

    #[test]
    fn status_counts_available_accounts_and_keeps_no_token() {
        let f = status_fields(&[
            AccountStatus {
                name: "a".into(),
                available: true,
                borrower_entity_id: None,
            },
            AccountStatus {
                name: "b".into(),
                available: false,
                borrower_entity_id: Some("ent".into()),
            },
        ]);
        assert_eq!(f["availableCount"], 1);
        assert_eq!(f["accounts"][1]["borrowerEntityId"], "ent");
        assert!(!Value::Object(f).to_string().contains("token"));
    }
}
