//! The identity-provider auth method: its config and mount in [`auth`]; here its users and
//! groups.
//!
//! IdpUser ↔ `/v1/auth/:mount/users/:name`, IdpGroup ↔ `/v1/auth/:mount/groups/:name`
//! (spec A §2.3, §4.2). Name-keyed: a user or group that already exists is adopted, and a write
//! whose response was lost is found again by name.
//!
//! Every write replaces the entry, so the lists the spec does not manage are sent as the service
//! has them. Lists are sets compared without regard to order, duplicates or case (the service
//! lower-cases group names and group policies, and matches groups without regard to case).

pub mod auth;

use kube::ResourceExt;

use crate::api::secrets::idp::{IdpGroup, IdpUser};
use crate::api::Service;
use crate::clients::secrets::idp::{EntryKind, IdpClient, IdpEntry};
use crate::reconcile::{features, managed_fields, Context, Created, Managed, Reconciled, Result};

/// What a user or group should be: `None` lists are not managed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Desired {
    /// The auth method's mount.
    pub mount: String,
    /// The user's or group's name.
    pub name: String,
    /// Policies attached to it.
    pub policies: Option<Vec<String>>,
    /// The groups a user belongs to.
    pub groups: Option<Vec<String>>,
}

fn normalised(list: &[String]) -> Vec<String> {
    let mut v: Vec<String> = list
        .iter()
        .map(|s| s.trim().to_lowercase())
        .filter(|s| !s.is_empty())
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Managed lists that differ (as sets, without regard to case).
pub fn diff(desired: &Desired, observed: &IdpEntry) -> Vec<&'static str> {
    let mut changed = Vec::new();
    if let Some(p) = &desired.policies {
        if normalised(p) != normalised(&observed.policies) {
            changed.push("policies");
        }
    }
    if let Some(g) = &desired.groups {
        if normalised(g) != normalised(&observed.groups) {
            changed.push("groups");
        }
    }
    changed
}

/// The entry to write: the desired lists, and the service's for the lists not managed.
pub fn merged(desired: &Desired, observed: Option<&IdpEntry>) -> IdpEntry {
    IdpEntry {
        name: desired.name.clone(),
        policies: desired
            .policies
            .clone()
            .or_else(|| observed.map(|o| o.policies.clone()))
            .unwrap_or_default(),
        groups: desired
            .groups
            .clone()
            .or_else(|| observed.map(|o| o.groups.clone()))
            .unwrap_or_default(),
    }
}

macro_rules! idp_entry_kind {
    ($kind:ty, $entry:expr, $name_field:ident, $groups:expr) => {
        impl Managed for $kind {
            const SERVICE: Service = Service::Secrets;
            managed_fields!();
        }

        impl Reconciled for $kind {
            type Client = IdpClient;
            type Desired = Desired;
            type Observed = IdpEntry;

            async fn desired(&self, ctx: &Context) -> Result<Desired> {
                features::require(ctx, self, features::IDP).await?;
                let groups: fn(&Self) -> Option<Vec<String>> = $groups;
                Ok(Desired {
                    mount: self.spec.mount.trim_matches('/').to_string(),
                    name: self
                        .spec
                        .$name_field
                        .clone()
                        .unwrap_or_else(|| self.name_any()),
                    policies: self.spec.policies.clone(),
                    groups: groups(self),
                })
            }

            async fn observe(
                &self,
                client: &IdpClient,
                desired: &Desired,
                _remote_id: Option<&str>,
            ) -> Result<Option<IdpEntry>> {
                Ok(client
                    .read_entry(&desired.mount, $entry, &desired.name)
                    .await?)
            }

            fn diff(desired: &Desired, observed: &IdpEntry) -> Vec<&'static str> {
                diff(desired, observed)
            }

            fn shown(
                desired: &Desired,
                observed: &IdpEntry,
                field: &str,
            ) -> Option<(String, String)> {
                let (want, have) = match field {
                    "policies" => (desired.policies.as_ref()?, &observed.policies),
                    "groups" => (desired.groups.as_ref()?, &observed.groups),
                    _ => return None,
                };
                Some((normalised(have).join(", "), normalised(want).join(", ")))
            }

            async fn create(&self, client: &IdpClient, desired: &Desired) -> Result<Created> {
                client
                    .write_entry(&desired.mount, $entry, &merged(desired, None))
                    .await?;
                Ok(Created {
                    remote_id: desired.name.clone(),
                    complete: true,
                })
            }

            async fn update(
                &self,
                client: &IdpClient,
                desired: &Desired,
                observed: &IdpEntry,
                _changed: &[&'static str],
            ) -> Result<()> {
                client
                    .write_entry(&desired.mount, $entry, &merged(desired, Some(observed)))
                    .await?;
                Ok(())
            }

            async fn delete(&self, client: &IdpClient, remote_id: &str) -> Result<()> {
                let mount = self.spec.mount.trim_matches('/').to_string();
                client.delete_entry(&mount, $entry, remote_id).await?;
                Ok(())
            }

            fn remote_id(observed: &IdpEntry) -> String {
                observed.name.clone()
            }
        }
    };
}

idp_entry_kind!(IdpUser, EntryKind::User, username, |u: &IdpUser| u
    .spec
    .groups
    .clone());
idp_entry_kind!(IdpGroup, EntryKind::Group, name, |_: &IdpGroup| None);

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(policies: &[&str], groups: &[&str]) -> IdpEntry {
        IdpEntry {
            name: "u".into(),
            policies: policies.iter().map(|s| s.to_string()).collect(),
            groups: groups.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn desired(policies: Option<&[&str]>, groups: Option<&[&str]>) -> Desired {
        Desired {
            mount: "idp".into(),
            name: "u".into(),
            policies: policies.map(|p| p.iter().map(|s| s.to_string()).collect()),
            groups: groups.map(|g| g.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn lists_are_sets_compared_without_regard_to_order_or_case() {
        let want = desired(Some(&["b", "A"]), Some(&["Ops", "dev"]));
        assert!(diff(&want, &entry(&["a", "b", "b"], &["dev", "ops"])).is_empty());
        assert_eq!(
            diff(&want, &entry(&["a"], &["dev"])),
            vec!["policies", "groups"]
        );
    }

    #[test]
    fn lists_the_spec_leaves_out_are_kept_on_write_and_not_diffed() {
        let want = desired(Some(&["a"]), None);
        let have = entry(&["x"], &["keep"]);
        assert_eq!(diff(&want, &have), vec!["policies"]);
        let m = merged(&want, Some(&have));
        assert_eq!(m.policies, vec!["a"]);
        assert_eq!(m.groups, vec!["keep"]);
        assert!(merged(&want, None).groups.is_empty());
    }
}
