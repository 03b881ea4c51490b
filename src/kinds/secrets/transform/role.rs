//! TransformRole ↔ `/v1/<mount>/role/:name` (spec C §4.1).
//!
//! A role works only if each of its transformations lists it in `allowed_roles`. The role is
//! written whatever its transformations say (the service does not check), and the condition
//! `TransformationsAllowed` reports, from the operator's own reads, which transformations do
//! not exist yet or do not list the role. While one does not exist yet the role is polled
//! (`Ready=False`, `Waiting`, naming it), so a role applied together with its
//! transformations converges in any order; while one does not list the role it stays `Ready`
//! and is looked at again every 10 s.

use serde_json::{json, Map, Value};

use super::{delete_err, err, same_set, strings};
use crate::api::secrets::transform::TransformRole;
use crate::api::{Condition, ManagedStatus, Service};
use crate::clients::secrets::transform::{encode_segment, TransformClient};
use crate::reconcile::conditions;
use crate::reconcile::{managed_fields, Context, Created, Managed, Reconciled, Result};

/// The condition that says whether every transformation of the spec exists and allows the role.
pub const TRANSFORMATIONS_ALLOWED: &str = "TransformationsAllowed";

/// A role as the spec wants it or the service has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Role {
    /// Its name in the service.
    pub name: String,
    /// The transformations it may use.
    pub transformations: Vec<String>,
}

/// A role as read, with what is missing for it to work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    /// The role as the service reads it back.
    pub role: Role,
    /// Transformations of the spec the service does not have (yet).
    pub missing: Vec<String>,
    /// Transformations of the spec that do not list the role in `allowed_roles`.
    pub not_allowing: Vec<String>,
}

impl Managed for TransformRole {
    const SERVICE: Service = Service::Secrets;
    managed_fields!();
    /// The status, with the `TransformationsAllowed` condition derived from the kind's status
    /// fields (`transformationsMissing`, `transformationsNotAllowing`), keeping its
    /// `lastTransitionTime` while its status does not change.
    fn status_json(&self, managed: &ManagedStatus) -> Value {
        let mut v = serde_json::to_value(managed).unwrap_or(Value::Null);
        let Some(fields) = (!managed.fields.is_empty()).then_some(&managed.fields) else {
            return v;
        };
        let missing = strings(fields.get("transformationsMissing"));
        let not_allowing = strings(fields.get("transformationsNotAllowing"));
        let mut conds: Vec<Condition> = managed.conditions.clone();
        let (ok, reason, message) = allowed_condition(&self.remote_name(), &missing, &not_allowing);
        conditions::set(
            &mut conds,
            TRANSFORMATIONS_ALLOWED,
            ok,
            reason,
            message,
            self.metadata.generation,
        );
        if let Some(o) = v.as_object_mut() {
            o.insert("conditions".into(), json!(conds));
        }
        v
    }
}

/// Status, reason and message of `TransformationsAllowed`.
pub fn allowed_condition(
    role: &str,
    missing: &[String],
    not_allowing: &[String],
) -> (bool, &'static str, String) {
    if missing.is_empty() && not_allowing.is_empty() {
        return (
            true,
            "AllAllowed",
            format!("every transformation lists role {role:?} in allowed_roles"),
        );
    }
    let mut parts = Vec::new();
    if !missing.is_empty() {
        parts.push(format!("not in the service yet: {}", missing.join(", ")));
    }
    if !not_allowing.is_empty() {
        parts.push(format!(
            "not listing role {role:?} in allowed_roles: {}",
            not_allowing.join(", ")
        ));
    }
    (
        false,
        if missing.is_empty() {
            "NotAllowed"
        } else {
            "TransformationMissing"
        },
        format!(
            "encode and decode with this role will fail for transformation(s) {}",
            parts.join("; ")
        ),
    )
}

/// The fields of `observed` that differ from `desired` (the transformations, compared as sets).
pub fn diff(desired: &Role, observed: &Role) -> Vec<&'static str> {
    if same_set(&desired.transformations, &observed.transformations) {
        vec![]
    } else {
        vec!["transformations"]
    }
}

impl Reconciled for TransformRole {
    type Client = TransformClient;
    type Desired = Role;
    type Observed = Observed;

    async fn desired(&self, _ctx: &Context) -> Result<Role> {
        Ok(Role {
            name: self.remote_name(),
            transformations: self.spec.transformations.clone(),
        })
    }

    async fn observe(
        &self,
        client: &TransformClient,
        desired: &Role,
        _remote_id: Option<&str>,
    ) -> Result<Option<Observed>> {
        let mount = &self.spec.mount;
        let Some(d) = client
            .read(mount, "role", &desired.name)
            .await
            .map_err(err)?
        else {
            return Ok(None);
        };
        let mut missing = Vec::new();
        let mut not_allowing = Vec::new();
        let mut seen = desired.transformations.clone();
        seen.sort();
        seen.dedup();
        for t in &seen {
            match client.read(mount, "transformation", t).await.map_err(err)? {
                None => missing.push(t.clone()),
                Some(td) => {
                    if !strings(td.get("allowed_roles"))
                        .iter()
                        .any(|r| *r == desired.name || r == "*")
                    {
                        not_allowing.push(t.clone());
                    }
                }
            }
        }
        Ok(Some(Observed {
            role: Role {
                name: desired.name.clone(),
                transformations: strings(d.get("transformations")),
            },
            missing,
            not_allowing,
        }))
    }

    fn diff(desired: &Role, observed: &Observed) -> Vec<&'static str> {
        diff(desired, &observed.role)
    }

    fn shown(desired: &Role, observed: &Observed, field: &str) -> Option<(String, String)> {
        use crate::reconcile::show;
        (field == "transformations").then(|| {
            (
                show::set(&observed.role.transformations),
                show::set(&desired.transformations),
            )
        })
    }

    const PENDING_REASON: &'static str = "Waiting";

    fn pending(observed: &Observed) -> Option<String> {
        (!observed.missing.is_empty()).then(|| {
            format!(
                "role written; waiting for transformation(s) {} (not in the service yet)",
                observed.missing.join(", ")
            )
        })
    }

    /// While a transformation does not list the role, look again every 10 s (the role cannot
    /// watch the service), so fixing `allowedRoles` shows at once, not at the next resync.
    fn recheck(observed: &Observed) -> Option<std::time::Duration> {
        (!observed.not_allowing.is_empty()).then_some(std::time::Duration::from_secs(10))
    }

    fn status_fields(&self, observed: &Observed) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("transformationsMissing".into(), json!(observed.missing));
        m.insert(
            "transformationsNotAllowing".into(),
            json!(observed.not_allowing),
        );
        // Also the condition's message, so a status that lacks the condition (the list fields
        // are defaulted by the API server) differs and is written once.
        let (_, _, message) = allowed_condition(
            &self.remote_name(),
            &observed.missing,
            &observed.not_allowing,
        );
        m.insert("transformationsAllowedMessage".into(), json!(message));
        m
    }

    async fn create(&self, client: &TransformClient, desired: &Role) -> Result<Created> {
        write(self, client, desired).await?;
        Ok(Created {
            remote_id: desired.name.clone(),
            // Observe at once, to report TransformationsAllowed.
            complete: false,
        })
    }

    async fn update(
        &self,
        client: &TransformClient,
        desired: &Role,
        _observed: &Observed,
        _changed: &[&'static str],
    ) -> Result<()> {
        write(self, client, desired).await
    }

    async fn delete(&self, client: &TransformClient, remote_id: &str) -> Result<()> {
        client
            .delete(&self.spec.mount, "role", remote_id)
            .await
            .map_err(delete_err)
    }

    fn remote_id(observed: &Observed) -> String {
        observed.role.name.clone()
    }
}

async fn write(r: &TransformRole, client: &TransformClient, desired: &Role) -> Result<()> {
    client
        .write(
            &r.spec.mount,
            &format!("role/{}", encode_segment(&desired.name)),
            &json!({ "transformations": desired.transformations }),
        )
        .await
        .map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transformations_are_a_set() {
        let a = Role {
            name: "r".into(),
            transformations: vec!["x".into(), "y".into()],
        };
        let b = Role {
            name: "r".into(),
            transformations: vec!["y".into(), "x".into()],
        };
        assert!(diff(&a, &b).is_empty());
    }

    #[test]
    fn the_condition_names_what_is_missing_and_what_does_not_allow_the_role() {
        let (ok, reason, msg) = allowed_condition("payments", &["tok".into()], &["fpe".into()]);
        assert!(!ok);
        assert_eq!(reason, "TransformationMissing");
        assert!(msg.contains("tok") && msg.contains("fpe") && msg.contains("payments"));
        assert!(allowed_condition("payments", &[], &[]).0);
    }
}
