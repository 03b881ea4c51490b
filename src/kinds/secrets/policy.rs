//! SecretsPolicy ↔ `/v1/sys/policies/{acl,rgp,egp}/:name` (spec A §4.3).

use crate::api::secrets::policy::PolicyType;
use crate::api::{SecretsPolicy, Service};
use crate::clients::secrets::policy::{Policy, PolicyClient};
use crate::clients::ClientError;
use crate::reconcile::{managed_fields, Context, Created, Error, Managed, Reconciled, Result};

impl Managed for SecretsPolicy {
    const SERVICE: Service = Service::Secrets;
    managed_fields!();
}

impl SecretsPolicy {
    fn kind_path(&self) -> &'static str {
        self.spec.type_.as_str()
    }

    /// RGP and EGP need a premium licence. A server without it answers their endpoints as
    /// unknown paths (404 on a write) or names the licence; either is terminal, not retried.
    fn licence_error(&self, e: ClientError) -> Error {
        let gated = self.spec.type_ != PolicyType::Acl;
        match &e {
            ClientError::Status { status, message, .. }
                if gated && (*status == 404 || message.to_lowercase().contains("licens") || message.contains("unsupported path")) =>
            {
                Error::Unsupported(format!("{} policies are not available on this server (needs a premium licence): {message}", self.kind_path()))
            }
            _ => Error::Remote(e),
        }
    }
}

/// Managed fields that differ. EGP paths are a set: order is not significant.
pub fn diff(desired: &Policy, observed: &Policy) -> Vec<&'static str> {
    let mut changed = Vec::new();
    if desired.policy != observed.policy {
        changed.push("policy");
    }
    if desired.enforcement_level.is_some()
        && desired.enforcement_level != observed.enforcement_level
    {
        changed.push("enforcementLevel");
    }
    if let Some(paths) = &desired.paths {
        let mut want = paths.clone();
        let mut have = observed.paths.clone().unwrap_or_default();
        want.sort();
        want.dedup();
        have.sort();
        have.dedup();
        if want != have {
            changed.push("paths");
        }
    }
    changed
}

impl Reconciled for SecretsPolicy {
    type Client = PolicyClient;
    type Desired = Policy;
    type Observed = Policy;

    async fn desired(&self, _ctx: &Context) -> Result<Policy> {
        Ok(Policy {
            name: self.policy_name(),
            policy: self.spec.policy.clone(),
            enforcement_level: self.spec.enforcement_level.map(|l| l.as_str().to_string()),
            paths: (self.spec.type_ == PolicyType::Egp)
                .then(|| self.spec.paths.clone().unwrap_or_default()),
        })
    }

    async fn observe(
        &self,
        client: &PolicyClient,
        desired: &Policy,
        _remote_id: Option<&str>,
    ) -> Result<Option<Policy>> {
        client
            .read_policy(self.kind_path(), &desired.name)
            .await
            .map_err(|e| self.licence_error(e))
    }

    fn diff(desired: &Policy, observed: &Policy) -> Vec<&'static str> {
        diff(desired, observed)
    }

    fn shown(desired: &Policy, observed: &Policy, field: &str) -> Option<(String, String)> {
        let opt = |v: &Option<String>| v.clone().unwrap_or_default();
        let list = |v: &Option<Vec<String>>| v.clone().unwrap_or_default().join(", ");
        match field {
            "policy" => Some((observed.policy.clone(), desired.policy.clone())),
            "enforcementLevel" => Some((
                opt(&observed.enforcement_level),
                opt(&desired.enforcement_level),
            )),
            "paths" => Some((list(&observed.paths), list(&desired.paths))),
            _ => None,
        }
    }

    async fn create(&self, client: &PolicyClient, desired: &Policy) -> Result<Created> {
        client
            .write_policy(self.kind_path(), desired)
            .await
            .map_err(|e| self.licence_error(e))?;
        Ok(Created {
            remote_id: desired.name.clone(),
            complete: true,
        })
    }

    async fn update(
        &self,
        client: &PolicyClient,
        desired: &Policy,
        _observed: &Policy,
        _changed: &[&'static str],
    ) -> Result<()> {
        client
            .write_policy(self.kind_path(), desired)
            .await
            .map_err(|e| self.licence_error(e))
    }

    async fn delete(&self, client: &PolicyClient, remote_id: &str) -> Result<()> {
        client
            .delete_policy(self.kind_path(), remote_id)
            .await
            .map_err(|e| self.licence_error(e))
    }

    fn remote_id(observed: &Policy) -> String {
        observed.name.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(text: &str, level: Option<&str>, paths: Option<&[&str]>) -> Policy {
        Policy {
            name: "p".into(),
            policy: text.into(),
            enforcement_level: level.map(Into::into),
            paths: paths.map(|p| p.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn identical_policies_have_no_diff() {
        let p = policy("path \"a/*\" {}", Some("advisory"), Some(&["a/*", "b"]));
        assert!(diff(&p, &p).is_empty());
    }

    #[test]
    fn egp_path_order_is_not_a_change() {
        let want = policy("x", Some("advisory"), Some(&["a/*", "b"]));
        let have = policy("x", Some("advisory"), Some(&["b", "a/*"]));
        assert!(diff(&want, &have).is_empty());
    }

    #[test]
    fn each_changed_field_is_named() {
        let want = policy("x", Some("hard-mandatory"), Some(&["a"]));
        let have = policy("y", Some("advisory"), Some(&["b"]));
        assert_eq!(
            diff(&want, &have),
            vec!["policy", "enforcementLevel", "paths"]
        );
    }

    #[test]
    fn acl_ignores_fields_it_does_not_manage() {
        let want = policy("x", None, None);
        let have = policy("x", Some("advisory"), Some(&["b"]));
        assert!(diff(&want, &have).is_empty());
    }
}
