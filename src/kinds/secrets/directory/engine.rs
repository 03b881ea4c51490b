//! AdEngine ↔ `<mount>/config` and `<mount>/rotate-root` (spec C §2.2, §4.2).
//!
//! The config read returns neither the bind password nor when it was rotated, so a root
//! rotation cannot be seen from outside. The rule that keeps a rotated password in force:
//! `bindpass` is sent only when the Secret's keyed hash differs from the one in status (the
//! first write, or the user changed the Secret); every other write leaves it out and the
//! service keeps the one it has. The connection and request timeouts are write-only too (the
//! read does not return them): they are sent only when they change in the spec.
//!
//! Root rotation is a step taken while observing (after the config holds our bind password),
//! so that its time is recorded in status in the same pass; a rotation already in progress (200
//! with a warning) is reported as `InProgress` and retried, not counted as done.

use kube::ResourceExt;
use serde_json::{json, Map, Value};

use super::{ad_error, epoch, now_rfc3339};
use crate::api::secrets::directory::{duration_secs, AdEngine, RotateRootPolicy};
use crate::api::Service;
use crate::clients::secrets::directory::{AdClient, Rotation};
use crate::clients::SecretString;
use crate::reconcile::hash::keyed_hash;
use crate::reconcile::{managed_fields, Context, Created, Managed, Reconciled, Result};

impl Managed for AdEngine {
    const SERVICE: Service = Service::Secrets;
    managed_fields!();
    const WATCHES_SECRETS: bool = true;
    fn secret_refs(&self) -> Vec<String> {
        vec![self.spec.bindpass_secret_ref.name.clone()]
    }
}

/// What the config should be.
pub struct Desired {
    /// The engine's mount.
    pub mount: String,
    /// Managed, readable fields (service names and JSON values).
    pub fields: Map<String, Value>,
    /// The bind password, from its Secret.
    pub bindpass: SecretString,
    /// Keyed hash of the bind DN and password, to tell whether they changed since last sent.
    pub bind_hash: String,
    /// `connection_timeout` / `request_timeout` as set in the spec (seconds).
    pub timeouts: Map<String, Value>,
    /// Keyed hash of the timeouts, to tell whether they changed since last sent.
    pub timeouts_hash: String,
    /// The write-only hashes last sent (from status).
    pub sent: (Option<String>, Option<String>),
    /// When to rotate the bind password.
    pub rotation: RotationPlan,
}

/// What status says about rotations, and what the spec asks.
#[derive(Clone, Debug, Default)]
pub struct RotationPlan {
    /// `spec.rotateRootPolicy`.
    pub policy: RotateRootPolicy,
    /// Seconds between rotations, with the `Interval` policy.
    pub interval: Option<i64>,
    /// `spec.rotateRequest`: a value not handled yet asks for a rotation now.
    pub request: Option<String>,
    /// When the last rotation ran (RFC 3339), from status.
    pub last: Option<String>,
    /// The last `rotateRequest` handled, from status.
    pub handled: Option<String>,
}

impl RotationPlan {
    /// Whether a rotation is due at `now` (seconds).
    pub fn due(&self, now: i64) -> bool {
        let scheduled = match self.policy {
            RotateRootPolicy::Never => false,
            RotateRootPolicy::OnCreate => self.last.is_none(),
            RotateRootPolicy::Interval => match self.last.as_deref().and_then(epoch) {
                None => true,
                Some(t) => now >= t + self.interval.unwrap_or(i64::MAX / 2),
            },
        };
        let requested = self.request.is_some() && self.request != self.handled;
        scheduled || requested
    }
}

/// The engine's config as read, and the rotation state of status.
pub struct Observed {
    /// The engine's mount.
    pub mount: String,
    /// The config as the service reads it back (`data`).
    pub config: Map<String, Value>,
    /// When the last rotation ran (RFC 3339).
    pub last: Option<String>,
    /// The last `rotateRequest` handled.
    pub handled: Option<String>,
    /// Why the object is not settled yet (a rotation in progress or waiting).
    pub pending: Option<String>,
}

fn split_hash(h: Option<&str>) -> (Option<String>, Option<String>) {
    match h.and_then(|h| h.split_once('/')) {
        Some((a, b)) => (Some(a.to_string()), Some(b.to_string())),
        None => (None, None),
    }
}

impl AdEngine {
    fn desired_fields(&self) -> Map<String, Value> {
        let s = &self.spec;
        let mut m = Map::new();
        m.insert("binddn".into(), json!(s.binddn));
        for (k, v) in [
            ("url", &s.url),
            ("userdn", &s.userdn),
            ("upndomain", &s.upndomain),
            ("certificate", &s.certificate),
            ("password_policy", &s.password_policy),
            ("formatter", &s.formatter),
        ] {
            if let Some(v) = v {
                m.insert(k.into(), json!(v));
            }
        }
        for (k, v) in [("starttls", s.starttls), ("insecure_tls", s.insecure_tls)] {
            if let Some(v) = v {
                m.insert(k.into(), json!(v));
            }
        }
        for (k, v) in [
            ("ttl", &s.ttl),
            ("max_ttl", &s.max_ttl),
            ("last_rotation_tolerance", &s.last_rotation_tolerance),
        ] {
            if let Some(secs) = v.as_deref().and_then(duration_secs) {
                m.insert(k.into(), json!(secs));
            }
        }
        if let Some(l) = s.length {
            m.insert("length".into(), json!(l));
        }
        m
    }

    fn timeouts(&self) -> Map<String, Value> {
        let mut m = Map::new();
        for (k, v) in [
            ("connection_timeout", &self.spec.connection_timeout),
            ("request_timeout", &self.spec.request_timeout),
        ] {
            if let Some(secs) = v.as_deref().and_then(duration_secs) {
                m.insert(k.into(), json!(secs));
            }
        }
        m
    }
}

/// Managed fields that differ. `ttl`/`max_ttl` of 0 take the service's default, which is not
/// drift.
pub fn diff(desired: &Map<String, Value>, observed: &Map<String, Value>) -> Vec<&'static str> {
    const NAMES: [(&str, &str); 13] = [
        ("binddn", "binddn"),
        ("url", "url"),
        ("userdn", "userdn"),
        ("upndomain", "upndomain"),
        ("certificate", "certificate"),
        ("starttls", "starttls"),
        ("insecure_tls", "insecureTls"),
        ("ttl", "ttl"),
        ("max_ttl", "maxTtl"),
        ("last_rotation_tolerance", "lastRotationTolerance"),
        ("password_policy", "passwordPolicy"),
        ("length", "length"),
        ("formatter", "formatter"),
    ];
    let mut changed = Vec::new();
    for (k, name) in NAMES {
        let Some(want) = desired.get(k) else {
            continue;
        };
        let have = observed.get(k).unwrap_or(&Value::Null);
        let same = match (want, have) {
            (Value::Number(_), _) if (k == "ttl" || k == "max_ttl") && want.as_i64() == Some(0) => {
                true
            }
            (Value::Number(a), Value::Number(b)) => a.as_i64() == b.as_i64(),
            (Value::String(a), Value::String(b)) if k == "binddn" => a.eq_ignore_ascii_case(b),
            (Value::String(a), Value::String(b)) if k == "certificate" => a.trim() == b.trim(),
            _ => want == have,
        };
        if !same {
            changed.push(name);
        }
    }
    changed
}

impl Reconciled for AdEngine {
    type Client = AdClient;
    type Desired = Desired;
    type Observed = Observed;

    async fn desired(&self, ctx: &Context) -> Result<Desired> {
        let ns = self.namespace().unwrap_or_default();
        let bindpass = ctx
            .secret_value(&ns, &self.spec.bindpass_secret_ref, "bind password")
            .await?;
        let key = ctx.settings.hash_key.expose().as_bytes();
        let bind_hash = keyed_hash(key, &[b"ad-bindpass", bindpass.expose().as_bytes()]);
        let timeouts = self.timeouts();
        let timeouts_hash = keyed_hash(
            key,
            &[
                b"ad-timeouts",
                Value::Object(timeouts.clone()).to_string().as_bytes(),
            ],
        );
        let st = self.status.as_ref();
        let rotation = RotationPlan {
            policy: self
                .spec
                .rotate_root
                .as_ref()
                .map(|r| r.policy)
                .unwrap_or_default(),
            interval: self
                .spec
                .rotate_root
                .as_ref()
                .and_then(|r| r.interval.as_deref())
                .and_then(duration_secs),
            request: self.spec.rotate_root_request.clone(),
            last: st.and_then(|s| s.last_root_rotation.clone()),
            handled: st.and_then(|s| s.handled_rotate_root_request.clone()),
        };
        Ok(Desired {
            mount: self.spec.mount.clone(),
            fields: self.desired_fields(),
            bindpass,
            bind_hash,
            timeouts,
            timeouts_hash,
            sent: split_hash(st.and_then(|s| s.managed.write_only_hash.as_deref())),
            rotation,
        })
    }

    async fn observe(
        &self,
        client: &AdClient,
        desired: &Desired,
        _remote_id: Option<&str>,
    ) -> Result<Option<Observed>> {
        let m = &desired.mount;
        let Some(config) = client.read_config(m).await.map_err(|e| ad_error(m, e))? else {
            return Ok(None);
        };
        let plan = &desired.rotation;
        let mut obs = Observed {
            mount: m.clone(),
            config,
            last: plan.last.clone(),
            handled: plan.handled.clone(),
            pending: None,
        };
        if plan.due(chrono::Utc::now().timestamp()) {
            // Only once the service holds the bind password of our Secret: rotating before
            // would be undone by the write that follows.
            if desired.sent.0.as_deref() != Some(desired.bind_hash.as_str()) {
                obs.pending =
                    Some("root rotation waits for the bind password to be written".into());
                return Ok(Some(obs));
            }
            // Due by the policy's schedule at a resync: a rotation in the change log (a pass
            // for `rotateRootRequest` keeps its `request` trigger).
            let _rotation = crate::changes::rotation();
            match client.rotate_root(m).await.map_err(|e| ad_error(m, e))? {
                Rotation::Done => {
                    obs.last = Some(now_rfc3339());
                    if plan.request.is_some() {
                        obs.handled = plan.request.clone();
                    }
                    tracing::info!(mount = %m, "root password rotated");
                }
                Rotation::Busy(w) => {
                    obs.pending = Some(format!("{w} Retrying later."));
                }
            }
        }
        Ok(Some(obs))
    }

    fn diff(desired: &Desired, observed: &Observed) -> Vec<&'static str> {
        let mut changed = diff(&desired.fields, &observed.config);
        if desired.sent.1.as_deref() != Some(desired.timeouts_hash.as_str())
            && !desired.timeouts.is_empty()
        {
            changed.push("connectionTimeout/requestTimeout");
        }
        changed
    }

    /// The timeouts are not read back (compared by hash): their old value is not known.
    fn shown(desired: &Desired, observed: &Observed, field: &str) -> Option<(String, String)> {
        use crate::reconcile::show;
        if field == "connectionTimeout/requestTimeout" {
            let t = |k: &str| show::json(desired.timeouts.get(k));
            return show::pair(
                "(not read back)",
                format!("{}/{}", t("connection_timeout"), t("request_timeout")),
            );
        }
        let key = show::snake(field);
        show::pair(
            show::json(observed.config.get(&key)),
            show::json(desired.fields.get(&key)),
        )
    }

    async fn create(&self, client: &AdClient, desired: &Desired) -> Result<Created> {
        let mut body = desired.fields.clone();
        body.insert("bindpass".into(), json!(desired.bindpass.expose()));
        body.extend(desired.timeouts.clone());
        let m = &desired.mount;
        client
            .write_config(m, &Value::Object(body))
            .await
            .map_err(|e| ad_error(m, e))?;
        Ok(Created {
            remote_id: format!("{m}/config"),
            // A rotation right after the first write follows in the next pass.
            complete: !desired.rotation.due(chrono::Utc::now().timestamp()),
        })
    }

    async fn update(
        &self,
        client: &AdClient,
        desired: &Desired,
        _observed: &Observed,
        _changed: &[&'static str],
    ) -> Result<()> {
        // Every write sends the managed fields (the service takes the password settings from
        // each write); the bind password only when the Secret changed, the timeouts only when
        // the spec's changed.
        let mut body = desired.fields.clone();
        if desired.sent.0.as_deref() != Some(desired.bind_hash.as_str()) {
            body.insert("bindpass".into(), json!(desired.bindpass.expose()));
        }
        if desired.sent.1.as_deref() != Some(desired.timeouts_hash.as_str()) {
            body.extend(desired.timeouts.clone());
        }
        let m = &desired.mount;
        client
            .write_config(m, &Value::Object(body))
            .await
            .map_err(|e| ad_error(m, e))
    }

    async fn delete(&self, client: &AdClient, _remote_id: &str) -> Result<()> {
        let m = &self.spec.mount;
        client.delete_config(m).await.map_err(|e| ad_error(m, e))
    }

    fn remote_id(observed: &Observed) -> String {
        format!("{}/config", observed.mount)
    }

    /// A plain read: observe may rotate the root password when due, never wanted on deletion.
    async fn find_unrecorded(
        &self,
        client: &AdClient,
        desired: &Desired,
    ) -> Result<Option<String>> {
        let m = &desired.mount;
        let config = client.read_config(m).await.map_err(|e| ad_error(m, e))?;
        Ok(config.map(|_| format!("{m}/config")))
    }

    fn pending(observed: &Observed) -> Option<String> {
        observed.pending.clone()
    }

    fn write_only_hash(desired: &Desired, _ctx: &Context) -> Option<String> {
        Some(format!("{}/{}", desired.bind_hash, desired.timeouts_hash))
    }

    fn status_fields(&self, observed: &Observed) -> Map<String, Value> {
        let mut m = Map::new();
        if let Some(t) = &observed.last {
            m.insert("lastRootRotation".into(), json!(t));
        }
        if let Some(h) = &observed.handled {
            m.insert("handledRotateRootRequest".into(), json!(h));
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn only_fields_the_spec_sets_are_compared() {
        let want = map(json!({"binddn": "CN=a", "url": "ldap://x"}));
        let have =
            map(json!({"binddn": "cn=A", "url": "ldap://x", "userdn": "DC=x", "ttl": 2764800}));
        assert!(diff(&want, &have).is_empty());
    }

    #[test]
    fn each_changed_field_is_named() {
        let want =
            map(json!({"binddn": "CN=a", "url": "ldap://y", "ttl": 60, "insecure_tls": true}));
        let have =
            map(json!({"binddn": "CN=a", "url": "ldap://x", "ttl": 120, "insecure_tls": false}));
        assert_eq!(diff(&want, &have), vec!["url", "insecureTls", "ttl"]);
    }

    #[test]
    fn a_zero_ttl_takes_the_service_default() {
        let want = map(json!({"binddn": "a", "ttl": 0}));
        let have = map(json!({"binddn": "a", "ttl": 2764800}));
        assert!(diff(&want, &have).is_empty());
    }

    #[test]
    fn rotation_is_due_once_on_create_and_per_request() {
        let mut p = RotationPlan {
            policy: RotateRootPolicy::OnCreate,
            ..Default::default()
        };
        assert!(p.due(0));
        p.last = Some("2026-01-01T00:00:00Z".into());
        assert!(!p.due(i64::MAX / 4));
        p.request = Some("1".into());
        assert!(p.due(0));
        p.handled = Some("1".into());
        assert!(!p.due(0));
    }

    #[test]
    fn interval_rotation_is_due_after_the_interval() {
        let p = RotationPlan {
            policy: RotateRootPolicy::Interval,
            interval: Some(3600),
            last: Some("1970-01-01T01:00:00Z".into()),
            ..Default::default()
        };
        assert!(!p.due(3600 + 10));
        assert!(p.due(7200));
    }
}
