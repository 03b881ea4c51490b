//! NoCodeModule ↔ `/no-code-modules` (spec B §2.5, §4.5).
//!
//! An operation-shaped kind ([`Operated`]) so that an organization token is reported as
//! `Ready=False` with reason `Forbidden` naming the token kind needed (the service answers such
//! calls with a plain 404). Each pass: observe the module (by the id in status, by
//! `spec.noCodeModuleId`, or through its registry module, which lists its no-code module: that
//! also finds a module whose enable response was lost), then enable or update it.
//!
//! `enabled` is always sent (the spec documents `false` as the default, the live service
//! `true`); an empty `versionPin` floats (sent as `""` only to unpin a pinned module).

use std::collections::BTreeMap;

use kube::ResourceExt;
use serde_json::{json, Map, Value};

use crate::api::workspaces::nocode::{NoCodeModule, VariableOption};
use crate::api::{ConnectionRef, Service};
use crate::clients::workspaces::nocode::{NoCodeClient, OptionSet, RemoteModule};
use crate::clients::ClientError;
use crate::reconcile::{
    conditions, managed_fields, Context, Error, Managed, Operated, Result, Step,
};

impl Managed for NoCodeModule {
    const SERVICE: Service = Service::Workspaces;
    managed_fields!();
}

/// The message of `Ready=False, reason Forbidden` for an organization token.
pub const ORG_TOKEN: &str = "the Connection's token is an organization token, which cannot manage no-code modules or provision workspaces from them: use a user or team token";

/// Whether a 404 from a no-code endpoint comes from an organization token (which gets 404 on
/// these endpoints) rather than a missing object.
pub async fn org_token_refusal(client: &NoCodeClient, e: &ClientError) -> Result<bool> {
    if e.status() != Some(404) {
        return Ok(false);
    }
    Ok(client.is_organization_token().await?)
}

/// The organization of a workspace-service resource: its own, else the Connection's.
pub fn organization(
    ctx: &Context,
    ns: &str,
    cref: Option<&ConnectionRef>,
    own: Option<&str>,
) -> Result<String> {
    if let Some(o) = own {
        return Ok(o.to_string());
    }
    let conn = ctx.connection_for("", ns, cref, Service::Workspaces)?;
    conn.spec.organization.clone().ok_or_else(|| {
        Error::InvalidSpec(
            "no organization: set the Connection's spec.organization (spec.organization is \
             immutable: giving it means creating this NoCodeModule again with it)"
                .into(),
        )
    })
}

/// The pin to compare and send: `None` floats.
fn wanted_pin(spec: Option<&str>) -> Option<&str> {
    spec.filter(|p| !p.is_empty())
}

/// Managed fields that differ (pure).
pub fn diff(
    enabled: bool,
    pin: Option<&str>,
    options: Option<&[VariableOption]>,
    observed: &RemoteModule,
) -> Vec<&'static str> {
    let mut changed = Vec::new();
    if enabled != observed.enabled {
        changed.push("enabled");
    }
    match wanted_pin(pin) {
        // `latest` resolves to a concrete version in the service: never drift.
        Some("latest") => {}
        Some(p) if p != observed.version_pin => changed.push("versionPin"),
        None if !observed.version_pin.is_empty() => changed.push("versionPin"),
        _ => {}
    }
    if let Some(opts) = options {
        let differs =
            opts.iter().any(
                |o| match observed.options.iter().find(|r| r.name == o.name) {
                    None => true,
                    Some(r) => {
                        let mut want = o.options.clone();
                        let mut have = r.options.clone();
                        want.sort();
                        have.sort();
                        r.type_ != o.type_ || want != have
                    }
                },
            );
        if differs {
            changed.push("variableOptions");
        }
    }
    changed
}

/// Variable-option sets to send: each with the id of the set of the same name, so the service
/// replaces it instead of adding a duplicate.
fn options_to_send(
    opts: &[VariableOption],
    remote: Option<&RemoteModule>,
    known: &BTreeMap<String, String>,
) -> Vec<OptionSet> {
    opts.iter()
        .map(|o| {
            let id = remote
                .and_then(|r| r.options.iter().find(|x| x.name == o.name))
                .map(|x| x.id.clone())
                .or_else(|| known.get(&o.name).cloned());
            (id, o.name.clone(), o.type_.clone(), o.options.clone())
        })
        .collect()
}

impl NoCodeModule {
    fn status_ids(&self) -> BTreeMap<String, String> {
        self.status
            .as_ref()
            .and_then(|s| s.variable_option_ids.clone())
            .unwrap_or_default()
    }

    /// Status fields for the module as observed.
    async fn fields(&self, client: &NoCodeClient, m: &RemoteModule) -> Result<Map<String, Value>> {
        let pin = if m.version_pin.is_empty() {
            // Floating: the latest version of the registry module.
            client
                .registry_modules(&m.organization)
                .await?
                .into_iter()
                .find(|r| r.id == m.registry_module)
                .and_then(|r| newest(&r.versions))
        } else {
            Some(m.version_pin.clone())
        };
        let ids: BTreeMap<String, String> = m
            .options
            .iter()
            .map(|o| (o.name.clone(), o.id.clone()))
            .collect();
        let mut f = Map::new();
        f.insert("noCodeModuleId".into(), json!(m.id));
        f.insert("organization".into(), json!(m.organization));
        if let Some(p) = pin {
            f.insert("versionPin".into(), json!(p));
        }
        f.insert("variableOptionIds".into(), json!(ids));
        Ok(f)
    }

    fn drifting(&self) -> bool {
        let Some(st) = self.status.as_ref() else {
            return false;
        };
        conditions::get(&st.managed.conditions, conditions::READY)
            .is_some_and(|c| c.status == "True" && c.generation() == self.metadata.generation)
    }
}

/// The newest of `versions` (semantic versions; others sort first).
pub fn newest(versions: &[String]) -> Option<String> {
    let key = |v: &String| -> Vec<u64> {
        v.split(['.', '-'])
            .take(3)
            .map(|p| p.parse().unwrap_or(0))
            .collect()
    };
    versions.iter().max_by_key(|v| key(v)).cloned()
}

impl Operated for NoCodeModule {
    type Client = NoCodeClient;

    async fn step(&self, ctx: &Context, client: &NoCodeClient) -> Result<Step> {
        let ns = self.namespace().unwrap_or_default();
        let org = organization(
            ctx,
            &ns,
            self.spec.connection_ref.as_deref(),
            self.spec.organization.as_deref(),
        )?;
        let known_id = self
            .status
            .as_ref()
            .and_then(|s| s.no_code_module_id.clone());
        let adopt_id = self.spec.no_code_module_id.clone();
        let forbidden = |e: ClientError| async move {
            if org_token_refusal(client, &e).await? {
                Ok(Step::not_ready("Forbidden", ORG_TOKEN))
            } else {
                Err(Error::Remote(e))
            }
        };

        // Observe.
        let mut adopted = false;
        let observed = match known_id.as_deref().or(adopt_id.as_deref()) {
            Some(id) => {
                let m = match client.read_module(id).await {
                    Ok(m) => m,
                    Err(e) => return forbidden(e).await,
                };
                if m.is_some() && known_id.is_none() {
                    adopted = true;
                }
                if m.is_none() && known_id.is_none() {
                    return Err(Error::MissingReference(format!(
                        "no-code module {id} (spec.noCodeModuleId) does not exist"
                    )));
                }
                m
            }
            None => {
                // A module enabled earlier (by hand, or by a create whose response was lost) is
                // listed by its registry module.
                let registry = client.registry_modules(&org).await?;
                match registry
                    .iter()
                    .find(|r| r.id == self.spec.registry_module_id)
                    .and_then(|r| r.no_code_modules.first())
                {
                    Some(id) => {
                        adopted = true;
                        client.read_module(id).await?
                    }
                    None => None,
                }
            }
        };

        let ids = self.status_ids();
        let Some(observed) = observed else {
            let opts = options_to_send(
                self.spec.variable_options.as_deref().unwrap_or_default(),
                None,
                &BTreeMap::new(),
            );
            let created = match client
                .enable(
                    &org,
                    &self.spec.registry_module_id,
                    self.spec.enabled,
                    wanted_pin(self.spec.version_pin.as_deref()),
                    &opts,
                )
                .await
            {
                Ok(m) => m,
                Err(e) => return forbidden(e).await,
            };
            let (reason, note) = if known_id.is_some() {
                (
                    "DriftCorrected",
                    format!("{} was gone from the service; enabled again", created.id),
                )
            } else {
                ("Created", format!("enabled no-code module {}", created.id))
            };
            // The enable answer does not include the variable-options sets: read them back.
            let created = client.read_module(&created.id).await?.unwrap_or(created);
            let fields = self.fields(client, &created).await?;
            let mut step = Step::ready("InSync", format!("{} matches the spec", created.id))
                .remote_id(created.id.clone())
                .event(false, reason, note);
            step.fields = fields;
            return Ok(step);
        };

        let changed = diff(
            self.spec.enabled,
            self.spec.version_pin.as_deref(),
            self.spec.variable_options.as_deref(),
            &observed,
        );
        let mut events = Vec::new();
        if adopted {
            events.push(("Adopted", format!("adopted existing {}", observed.id)));
        }
        let mut observed = observed;
        let mut drifted = None;
        if !changed.is_empty() {
            let opts = self
                .spec
                .variable_options
                .as_deref()
                .filter(|_| changed.contains(&"variableOptions"))
                .map(|o| options_to_send(o, Some(&observed), &ids));
            let pin = if changed.contains(&"versionPin") {
                Some(wanted_pin(self.spec.version_pin.as_deref()).unwrap_or(""))
            } else {
                None
            };
            if let Err(e) = client
                .update_module(
                    &observed.id,
                    &self.spec.registry_module_id,
                    self.spec.enabled,
                    pin,
                    opts.as_deref(),
                )
                .await
            {
                return forbidden(e).await;
            }
            if let Some(m) = client.read_module(&observed.id).await? {
                observed = m;
            }
            if !adopted && self.drifting() {
                events.push((
                    "DriftCorrected",
                    format!(
                        "{} was changed outside Quartet; restored {}",
                        observed.id,
                        changed.join(", ")
                    ),
                ));
                drifted = Some(changed.clone());
            } else {
                events.push((
                    "Updated",
                    format!("updated {}: {}", observed.id, changed.join(", ")),
                ));
            }
        }
        let mut fields = self.fields(client, &observed).await?;
        if let Some(d) = drifted {
            fields.insert("driftedFields".into(), json!(d));
        }
        let mut step = Step::ready("InSync", format!("{} matches the spec", observed.id))
            .remote_id(observed.id.clone());
        step.fields = fields;
        for (reason, note) in events {
            step = step.event(false, reason, note);
        }
        Ok(step)
    }

    async fn finish(&self, _ctx: &Context, client: &NoCodeClient) -> Result<()> {
        let Some(id) = self
            .status
            .as_ref()
            .and_then(|s| s.no_code_module_id.clone())
        else {
            return Ok(());
        };
        // No delete endpoint is documented: deleting the resource disables provisioning.
        match client.read_module(&id).await? {
            None => Ok(()),
            Some(m) if !m.enabled => Ok(()),
            Some(m) => client
                .update_module(&id, &m.registry_module, false, None, None)
                .await
                .map_err(Error::Remote),
        }
    }

    fn holds_remote(&self) -> bool {
        self.status
            .as_ref()
            .is_some_and(|s| s.no_code_module_id.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::workspaces::nocode::RemoteOptions;

    fn remote(enabled: bool, pin: &str, opts: &[(&str, &[&str])]) -> RemoteModule {
        RemoteModule {
            id: "nocode-1".into(),
            organization: "org".into(),
            registry_module: "mod-1".into(),
            enabled,
            version_pin: pin.into(),
            options: opts
                .iter()
                .map(|(n, o)| RemoteOptions {
                    id: format!("ncvaropt-{n}"),
                    name: n.to_string(),
                    type_: "string".into(),
                    options: o.iter().map(|s| s.to_string()).collect(),
                })
                .collect(),
        }
    }

    fn opt(name: &str, o: &[&str]) -> VariableOption {
        VariableOption {
            name: name.into(),
            type_: "string".into(),
            options: o.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn floating_module_is_in_sync_with_an_empty_pin_and_latest_never_drifts() {
        assert!(diff(true, None, None, &remote(true, "", &[])).is_empty());
        assert!(diff(true, Some(""), None, &remote(true, "", &[])).is_empty());
        assert!(diff(true, Some("latest"), None, &remote(true, "1.0.0", &[])).is_empty());
        assert_eq!(
            diff(true, None, None, &remote(true, "1.0.0", &[])),
            vec!["versionPin"]
        );
    }

    #[test]
    fn enabled_pin_and_options_are_named_when_they_differ() {
        let want = [opt("region", &["a", "b"])];
        assert_eq!(
            diff(
                false,
                Some("1.1.0"),
                Some(&want),
                &remote(true, "1.0.0", &[("region", &["a"])])
            ),
            vec!["enabled", "versionPin", "variableOptions"]
        );
    }

    #[test]
    fn option_order_is_not_a_change_and_unmanaged_sets_are_ignored() {
        let want = [opt("region", &["b", "a"])];
        let have = remote(true, "", &[("region", &["a", "b"]), ("size", &["s"])]);
        assert!(diff(true, None, Some(&want), &have).is_empty());
        assert!(diff(true, None, None, &have).is_empty());
    }

    #[test]
    fn options_are_sent_with_the_id_of_the_set_they_replace() {
        let have = remote(true, "", &[("region", &["a"])]);
        let mut known = BTreeMap::new();
        known.insert("size".to_string(), "ncvaropt-old".to_string());
        let sent = options_to_send(
            &[opt("region", &["b"]), opt("size", &["s"]), opt("new", &[])],
            Some(&have),
            &known,
        );
        assert_eq!(sent[0].0.as_deref(), Some("ncvaropt-region"));
        assert_eq!(sent[1].0.as_deref(), Some("ncvaropt-old"));
        assert_eq!(sent[2].0, None);
    }

    #[test]
    fn newest_version_compares_numerically() {
        let v: Vec<String> = ["1.9.0", "1.10.0", "1.2.3"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(newest(&v).as_deref(), Some("1.10.0"));
    }
}
