//! IdpAuthMethod ↔ `/v1/auth/:mount/config` (spec A §2.2, §4.2), and with `enableMount` the
//! mount itself (`/v1/sys/auth/:mount`).
//!
//! Config writes are partial on the service (fields not sent keep their values), so only the
//! fields the spec sets are sent and compared. The API token is write-only: it is compared by a
//! keyed hash of the Secret's value kept in status and sent only on create or when that hash
//! changes. Durations are compared in seconds, lists as sets.

use kube::ResourceExt;
use serde_json::{json, Map, Value};

use crate::api::secrets::idp::IdpAuthMethod;
use crate::api::{DeletionPolicy, Service};
use crate::clients::secrets::idp::{parse_duration, IdpClient, IdpConfig};
use crate::clients::SecretString;
use crate::reconcile::hash::keyed_hash;
use crate::reconcile::{
    features, managed_fields, Context, Created, Error, Managed, Reconciled, Result,
};

/// Marker the driver adds to the changed fields when the write-only hash differs.
const WRITE_ONLY: &str = "(write-only fields)";

impl Managed for IdpAuthMethod {
    const SERVICE: Service = Service::Secrets;
    managed_fields!(connection_ref, managed_status);
    const WATCHES_SECRETS: bool = true;
    /// Without `enableMount` the service has no delete for the configuration: it is always
    /// left in place (the driver's `Retained` Event says so).
    fn deletion_policy(&self) -> DeletionPolicy {
        if self.spec.enable_mount {
            self.spec.deletion_policy
        } else {
            DeletionPolicy::Retain
        }
    }
    /// Why the configuration stays: said in the `Retained` Event.
    fn retain_note(&self) -> String {
        if self.spec.enable_mount {
            "deletionPolicy Retain".into()
        } else {
            "the service has no delete for an auth method's configuration; with enableMount the \
             whole auth method is disabled on delete instead"
                .into()
        }
    }
    fn secret_refs(&self) -> Vec<String> {
        self.spec
            .api_token_secret_ref
            .iter()
            .map(|r| r.name.clone())
            .collect()
    }
}

/// What the configuration should be; `None` fields are not managed.
#[derive(Clone, Debug, Default)]
pub struct Desired {
    /// The auth method's mount.
    pub mount: String,
    /// `true` enables the mount when it is absent (and disables it on deletion).
    pub enable_mount: bool,
    /// The identity provider's organization.
    pub org_name: String,
    /// The identity provider's base domain.
    pub base_url: Option<String>,
    /// `true` skips the identity provider's own MFA.
    pub bypass_idp_mfa: Option<bool>,
    /// Default lifetime of the tokens issued, in seconds.
    pub ttl: Option<i64>,
    /// Longest lifetime of the tokens after renewals, in seconds.
    pub max_ttl: Option<i64>,
    /// Hard cap on the tokens' lifetime, in seconds.
    pub explicit_max_ttl: Option<i64>,
    /// Period of periodic tokens, in seconds.
    pub period: Option<i64>,
    /// Policies every token issued carries.
    pub policies: Option<Vec<String>>,
    /// CIDRs the tokens may be used from.
    pub bound_cidrs: Option<Vec<String>>,
    /// `true` leaves the `default` policy out of the tokens.
    pub no_default_policy: Option<bool>,
    /// How many uses a token has (0: unlimited).
    pub num_uses: Option<i64>,
    /// `service`, `batch` or `default`.
    pub token_type: Option<String>,
    /// The identity provider's API token, from its Secret (write-only in the service).
    pub api_token: Option<SecretString>,
}

fn set_of(list: &[String], f: fn(&str) -> String) -> Vec<String> {
    let mut v: Vec<String> = list
        .iter()
        .map(|s| f(s.trim()))
        .filter(|s| !s.is_empty())
        .collect();
    v.sort();
    v.dedup();
    v
}

/// A CIDR as the service reports it: a bare address is its /32 (or /128).
fn cidr(s: &str) -> String {
    if s.contains('/') {
        s.to_lowercase()
    } else if s.contains(':') {
        format!("{}/128", s.to_lowercase())
    } else {
        format!("{s}/32")
    }
}

/// Managed fields that differ (named as in the spec).
pub fn diff(d: &Desired, o: &IdpConfig) -> Vec<&'static str> {
    let mut changed = Vec::new();
    if d.org_name != o.org_name {
        changed.push("orgName");
    }
    if d.base_url.as_ref().is_some_and(|b| *b != o.base_url) {
        changed.push("baseUrl");
    }
    if d.bypass_idp_mfa.is_some_and(|b| b != o.bypass_idp_mfa) {
        changed.push("bypassIdpMfa");
    }
    let durations = [
        ("token.ttl", d.ttl, o.token_ttl),
        ("token.maxTtl", d.max_ttl, o.token_max_ttl),
        (
            "token.explicitMaxTtl",
            d.explicit_max_ttl,
            o.token_explicit_max_ttl,
        ),
        ("token.period", d.period, o.token_period),
        ("token.numUses", d.num_uses, o.token_num_uses),
    ];
    for (name, want, have) in durations {
        if want.is_some_and(|w| w != have) {
            changed.push(name);
        }
    }
    if let Some(p) = &d.policies {
        if set_of(p, str::to_lowercase) != set_of(&o.token_policies, str::to_lowercase) {
            changed.push("token.policies");
        }
    }
    if let Some(c) = &d.bound_cidrs {
        if set_of(c, cidr) != set_of(&o.token_bound_cidrs, cidr) {
            changed.push("token.boundCidrs");
        }
    }
    if d.no_default_policy
        .is_some_and(|b| b != o.token_no_default_policy)
    {
        changed.push("token.noDefaultPolicy");
    }
    if let Some(t) = &d.token_type {
        let have = if o.token_type.is_empty() {
            "default"
        } else {
            o.token_type.as_str()
        };
        if t != have {
            changed.push("token.type");
        }
    }
    changed
}

/// The write body: `org_name` and every field the spec sets; the API token when asked.
pub fn body(d: &Desired, with_token: bool) -> Value {
    let mut m = Map::new();
    m.insert("org_name".into(), json!(d.org_name));
    if let Some(v) = &d.base_url {
        m.insert("base_url".into(), json!(v));
    }
    if let Some(v) = d.bypass_idp_mfa {
        m.insert("bypass_idp_mfa".into(), json!(v));
    }
    let ints = [
        ("token_ttl", d.ttl),
        ("token_max_ttl", d.max_ttl),
        ("token_explicit_max_ttl", d.explicit_max_ttl),
        ("token_period", d.period),
        ("token_num_uses", d.num_uses),
    ];
    for (k, v) in ints {
        if let Some(v) = v {
            m.insert(k.into(), json!(v));
        }
    }
    if let Some(v) = &d.policies {
        m.insert("token_policies".into(), json!(v));
    }
    if let Some(v) = &d.bound_cidrs {
        m.insert("token_bound_cidrs".into(), json!(v));
    }
    if let Some(v) = d.no_default_policy {
        m.insert("token_no_default_policy".into(), json!(v));
    }
    if let Some(v) = &d.token_type {
        m.insert("token_type".into(), json!(v));
    }
    if with_token {
        if let Some(t) = &d.api_token {
            m.insert("api_token".into(), json!(t.expose()));
        }
    }
    Value::Object(m)
}

fn duration(field: &str, v: &Option<String>) -> Result<Option<i64>> {
    match v {
        None => Ok(None),
        Some(s) => parse_duration(s)
            .map(Some)
            .ok_or_else(|| Error::InvalidSpec(format!("{field} {s:?} is not a duration"))),
    }
}

impl Reconciled for IdpAuthMethod {
    type Client = IdpClient;
    type Desired = Desired;
    type Observed = IdpConfig;

    async fn desired(&self, ctx: &Context) -> Result<Desired> {
        let s = &self.spec;
        if !s.enable_mount {
            features::require(ctx, self, features::IDP).await?;
        }
        let ns = self.namespace().unwrap_or_default();
        let api_token = match &s.api_token_secret_ref {
            Some(r) => Some(
                ctx.secret_value(&ns, r, "apiTokenSecretRef of the IdpAuthMethod")
                    .await?,
            ),
            None => None,
        };
        let t = s.token.clone().unwrap_or_default();
        Ok(Desired {
            mount: s.mount.trim_matches('/').to_string(),
            enable_mount: s.enable_mount,
            org_name: s.org_name.clone(),
            base_url: s.base_url.clone(),
            bypass_idp_mfa: s.bypass_idp_mfa,
            ttl: duration("token.ttl", &t.ttl)?,
            max_ttl: duration("token.maxTtl", &t.max_ttl)?,
            explicit_max_ttl: duration("token.explicitMaxTtl", &t.explicit_max_ttl)?,
            period: duration("token.period", &t.period)?,
            policies: t.policies.clone(),
            bound_cidrs: t.bound_cidrs.clone(),
            no_default_policy: t.no_default_policy,
            num_uses: t.num_uses,
            token_type: t.type_.clone(),
            api_token,
        })
    }

    async fn observe(
        &self,
        client: &IdpClient,
        desired: &Desired,
        _remote_id: Option<&str>,
    ) -> Result<Option<IdpConfig>> {
        Ok(client.read_config(&desired.mount).await?)
    }

    fn diff(desired: &Desired, observed: &IdpConfig) -> Vec<&'static str> {
        diff(desired, observed)
    }

    /// Configuration fields only: the API token is write-only (compared by its keyed hash).
    fn shown(d: &Desired, o: &IdpConfig, field: &str) -> Option<(String, String)> {
        use crate::reconcile::show;
        let list = |v: &Option<Vec<String>>| show::set(v.as_deref().unwrap_or_default());
        let (have, want) = match field {
            "orgName" => return show::pair(show::text(&o.org_name), show::text(&d.org_name)),
            "baseUrl" => return show::pair(show::text(&o.base_url), show::opt(&d.base_url)),
            "bypassIdpMfa" => {
                return show::pair(o.bypass_idp_mfa.to_string(), show::opt(&d.bypass_idp_mfa))
            }
            "token.policies" => return show::pair(show::set(&o.token_policies), list(&d.policies)),
            "token.boundCidrs" => {
                return show::pair(show::set(&o.token_bound_cidrs), list(&d.bound_cidrs))
            }
            "token.noDefaultPolicy" => {
                return show::pair(
                    o.token_no_default_policy.to_string(),
                    show::opt(&d.no_default_policy),
                )
            }
            "token.type" => return show::pair(show::text(&o.token_type), show::opt(&d.token_type)),
            "token.ttl" => (o.token_ttl, d.ttl),
            "token.maxTtl" => (o.token_max_ttl, d.max_ttl),
            "token.explicitMaxTtl" => (o.token_explicit_max_ttl, d.explicit_max_ttl),
            "token.period" => (o.token_period, d.period),
            "token.numUses" => (o.token_num_uses, d.num_uses),
            _ => return None,
        };
        show::pair(have.to_string(), show::opt(&want))
    }

    async fn create(&self, client: &IdpClient, desired: &Desired) -> Result<Created> {
        if desired.enable_mount && !client.auth_mounted(&desired.mount).await? {
            client.enable_auth(&desired.mount).await?;
        }
        client
            .write_config(&desired.mount, &body(desired, true))
            .await?;
        Ok(Created {
            remote_id: desired.mount.clone(),
            complete: true,
        })
    }

    async fn update(
        &self,
        client: &IdpClient,
        desired: &Desired,
        _observed: &IdpConfig,
        changed: &[&'static str],
    ) -> Result<()> {
        // An adopted configuration gets the token too: its value in the service is unknown.
        let with_token = changed.contains(&WRITE_ONLY)
            || self
                .status
                .as_ref()
                .is_none_or(|s| s.managed.write_only_hash.is_none());
        client
            .write_config(&desired.mount, &body(desired, with_token))
            .await?;
        Ok(())
    }

    async fn delete(&self, client: &IdpClient, remote_id: &str) -> Result<()> {
        if self.spec.enable_mount {
            client.disable_auth(remote_id).await?;
        }
        Ok(())
    }

    fn remote_id(observed: &IdpConfig) -> String {
        observed.mount.clone()
    }

    fn write_only_hash(desired: &Desired, ctx: &Context) -> Option<String> {
        desired.api_token.as_ref().map(|t| {
            keyed_hash(
                ctx.settings.hash_key.expose().as_bytes(),
                &[b"idp api_token", t.expose().as_bytes()],
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observed() -> IdpConfig {
        IdpConfig {
            org_name: "acme".into(),
            token_ttl: 3600,
            token_policies: vec!["b".into(), "a".into()],
            token_bound_cidrs: vec!["10.0.0.1/32".into()],
            token_type: "default".into(),
            ..Default::default()
        }
    }

    #[test]
    fn durations_lists_and_defaults_are_normalised_before_comparing() {
        let d = Desired {
            org_name: "acme".into(),
            ttl: parse_duration("1h"),
            policies: Some(vec!["A".into(), "b".into(), "a".into()]),
            bound_cidrs: Some(vec!["10.0.0.1".into()]),
            token_type: Some("default".into()),
            ..Default::default()
        };
        assert!(diff(&d, &observed()).is_empty());
        let mut o = observed();
        o.token_type = String::new();
        assert!(diff(&d, &o).is_empty(), "an unset type reads as default");
    }

    #[test]
    fn each_changed_field_is_named_and_unset_fields_are_not_managed() {
        let d = Desired {
            org_name: "other".into(),
            base_url: Some("example.com".into()),
            bypass_idp_mfa: Some(true),
            ttl: Some(60),
            num_uses: Some(3),
            token_type: Some("service".into()),
            ..Default::default()
        };
        assert_eq!(
            diff(&d, &observed()),
            vec![
                "orgName",
                "baseUrl",
                "bypassIdpMfa",
                "token.ttl",
                "token.numUses",
                "token.type"
            ]
        );
    }

    #[test]
    fn the_api_token_is_sent_only_when_asked() {
        let d = Desired {
            org_name: "acme".into(),
            api_token: Some(SecretString::new("s3cret")),
            ..Default::default()
        };
        assert!(body(&d, false).get("api_token").is_none());
        assert_eq!(body(&d, true)["api_token"], "s3cret");
    }
}
