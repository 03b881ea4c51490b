//! TotpMethod ↔ `/v1/identity/mfa/method/totp[/:id]` (spec A §2.7, §4.5).
//!
//! The service assigns the method's UUID, so the driver records it in status the moment create
//! returns. A create whose response is lost leaves no id in status: a create is therefore
//! preceded by a search (list, then the settings of each method) for the method this resource
//! created, recognised by its `name`, which Quartet sets to `quartet-<resource uid>` on create
//! (the service keeps method names unique). The search is made once per Connection and process,
//! and again only for a resource the last one showed a method of or whose create had an unknown
//! outcome ([`crate::reconcile::lost`]): not a listing of every method before each of N
//! creates. Methods adopted through `spec.methodId` keep their own name.

use crate::api::secrets::totp::TotpMethod;
use crate::api::Service;
use crate::clients::secrets::totp::{TotpClient, TotpConfig, TotpMethodInfo};
use crate::clients::ClientError;
use crate::reconcile::{
    features, lost, managed_fields, Context, Created, Error, Managed, Reconciled, Result,
};

impl Managed for TotpMethod {
    const SERVICE: Service = Service::Secrets;
    managed_fields!();
}

/// What the method should be.
#[derive(Clone, Debug)]
pub struct Desired {
    /// The managed settings: `issuer` always, the others when the spec sets them.
    pub config: TotpConfig,
    /// The `method_name` this resource gives the methods it creates.
    pub marker: String,
    /// `spec.methodId`: the method to adopt.
    pub adopt: Option<String>,
}

/// The name Quartet gives a method created for the resource with this uid.
pub fn marker(uid: &str) -> String {
    format!("quartet-{uid}")
}

/// Managed fields that differ: `issuer`, and each other field the spec sets.
pub fn diff(desired: &TotpConfig, observed: &TotpConfig) -> Vec<&'static str> {
    let mut changed = Vec::new();
    if desired.issuer != observed.issuer {
        changed.push("issuer");
    }
    let ints = [
        ("periodSeconds", desired.period, observed.period),
        ("keySize", desired.key_size, observed.key_size),
        ("qrSize", desired.qr_size, observed.qr_size),
        ("digits", desired.digits, observed.digits),
        ("skew", desired.skew, observed.skew),
        (
            "maxValidationAttempts",
            desired.max_validation_attempts,
            observed.max_validation_attempts,
        ),
    ];
    for (name, want, have) in ints {
        if want.is_some() && want != have {
            changed.push(name);
        }
    }
    if let Some(a) = &desired.algorithm {
        if !observed
            .algorithm
            .as_deref()
            .is_some_and(|o| o.eq_ignore_ascii_case(a))
        {
            changed.push("algorithm");
        }
    }
    changed
}

/// The full settings to write on update: every write replaces all settings of a method, so the
/// ones the spec does not manage are sent as the service has them.
pub fn merged(desired: &TotpConfig, observed: &TotpConfig) -> TotpConfig {
    TotpConfig {
        issuer: desired.issuer.clone(),
        period: desired.period.or(observed.period),
        key_size: desired.key_size.or(observed.key_size),
        qr_size: desired.qr_size.or(observed.qr_size),
        algorithm: desired.algorithm.clone().or(observed.algorithm.clone()),
        digits: desired.digits.or(observed.digits),
        skew: desired.skew.or(observed.skew),
        max_validation_attempts: desired
            .max_validation_attempts
            .or(observed.max_validation_attempts),
    }
}

/// Whether a delete was refused because a login enforcement still uses the method. The real
/// service answers a plain 500 `methodID is still used by an enforcement configuration with ID:
/// <id>`; older sandboxes a 400 naming the enforcement.
pub fn is_in_use(e: &ClientError) -> bool {
    match e {
        ClientError::Status { message, .. } => {
            let m = message.to_lowercase();
            m.contains("still used by an enforcement") || m.contains("in use by login enforcement")
        }
        _ => false,
    }
}

impl TotpMethod {
    /// The method this resource created earlier whose create response was lost, found by its
    /// name among all methods (when a lost response is possible at all: see the module doc).
    async fn find_created(
        &self,
        client: &TotpClient,
        marker: &str,
    ) -> Result<Option<TotpMethodInfo>> {
        let scope = scope(client);
        if !lost::must_search(&scope, marker) {
            return Ok(None);
        }
        let listing = lost::listing(&scope);
        let mut names = Vec::new();
        let mut found = None;
        for (id, info) in client.list_totp().await? {
            let info = match info {
                Some(i) if !i.name.is_empty() || !i.config.issuer.is_empty() => Some(i),
                _ => client.read_totp(&id).await?,
            };
            let Some(i) = info else { continue };
            names.push(i.name.clone());
            if i.name == marker && found.is_none() {
                tracing::info!(method_id = %i.id, "found the method of an earlier create whose response was lost");
                found = Some(i);
            }
        }
        listing.done(names);
        Ok(found)
    }
}

/// Methods are unique per Connection (and its namespace): the scope of a search.
fn scope(client: &TotpClient) -> String {
    format!("totp-method {}", client.lost_scope())
}

impl Reconciled for TotpMethod {
    type Client = TotpClient;
    type Desired = Desired;
    type Observed = TotpMethodInfo;
    const SERVER_ASSIGNED_ID: bool = true;

    async fn desired(&self, ctx: &Context) -> Result<Desired> {
        features::require(ctx, self, features::MFA_TOTP).await?;
        let s = &self.spec;
        Ok(Desired {
            config: TotpConfig {
                issuer: s.issuer.clone(),
                period: s.period_seconds,
                key_size: s.key_size,
                qr_size: s.qr_size,
                algorithm: s.algorithm.clone(),
                digits: s.digits,
                skew: s.skew,
                max_validation_attempts: s.max_validation_attempts,
            },
            marker: marker(self.metadata.uid.as_deref().unwrap_or_default()),
            adopt: s.method_id.clone(),
        })
    }

    async fn observe(
        &self,
        client: &TotpClient,
        desired: &Desired,
        remote_id: Option<&str>,
    ) -> Result<Option<TotpMethodInfo>> {
        if let Some(id) = &desired.adopt {
            return match client.read_totp(id).await? {
                Some(m) => Ok(Some(m)),
                None => Err(Error::MissingReference(format!(
                    "TOTP method {id} (spec.methodId) does not exist in the service"
                ))),
            };
        }
        if let Some(id) = remote_id {
            if let Some(m) = client.read_totp(id).await? {
                lost::recorded(&scope(client), &desired.marker);
                return Ok(Some(m));
            }
        }
        // Nothing known, or deleted remotely: before creating (again), find a method whose
        // create response was lost.
        self.find_created(client, &desired.marker).await
    }

    fn diff(desired: &Desired, observed: &TotpMethodInfo) -> Vec<&'static str> {
        diff(&desired.config, &observed.config)
    }

    fn shown(
        desired: &Desired,
        observed: &TotpMethodInfo,
        field: &str,
    ) -> Option<(String, String)> {
        use crate::reconcile::show;
        let (d, o) = (&desired.config, &observed.config);
        let (have, want) = match field {
            "issuer" => return show::pair(show::text(&o.issuer), show::text(&d.issuer)),
            "algorithm" => return show::pair(show::opt(&o.algorithm), show::opt(&d.algorithm)),
            "periodSeconds" => (o.period, d.period),
            "keySize" => (o.key_size, d.key_size),
            "qrSize" => (o.qr_size, d.qr_size),
            "digits" => (o.digits, d.digits),
            "skew" => (o.skew, d.skew),
            "maxValidationAttempts" => (o.max_validation_attempts, d.max_validation_attempts),
            _ => return None,
        };
        show::pair(show::opt(&have), show::opt(&want))
    }

    async fn create(&self, client: &TotpClient, desired: &Desired) -> Result<Created> {
        // Unsure until the id is seen in status: a failed status write must search again.
        let attempt = lost::attempt(&scope(client), &desired.marker);
        let id = match client
            .create_totp(&desired.config, Some(&desired.marker))
            .await
        {
            Ok(id) => {
                attempt.until_recorded();
                id
            }
            Err(e) => {
                if !lost::outcome_unknown(&e) {
                    attempt.known();
                }
                return Err(e.into());
            }
        };
        Ok(Created {
            remote_id: id,
            complete: true,
        })
    }

    async fn update(
        &self,
        client: &TotpClient,
        desired: &Desired,
        observed: &TotpMethodInfo,
        _changed: &[&'static str],
    ) -> Result<()> {
        client
            .update_totp(&observed.id, &merged(&desired.config, &observed.config))
            .await?;
        Ok(())
    }

    async fn delete(&self, client: &TotpClient, remote_id: &str) -> Result<()> {
        client.delete_totp(remote_id).await.map_err(|e| {
            if is_in_use(&e) {
                tracing::info!(method_id = %remote_id, "the method is still used by a login enforcement");
            }
            Error::Remote(e)
        })
    }

    fn remote_id(observed: &TotpMethodInfo) -> String {
        observed.id.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Service;

    fn cfg() -> TotpConfig {
        TotpConfig {
            issuer: "Acme".into(),
            period: Some(30),
            key_size: Some(20),
            qr_size: Some(200),
            algorithm: Some("SHA1".into()),
            digits: Some(6),
            skew: Some(1),
            max_validation_attempts: Some(5),
        }
    }

    #[test]
    fn identical_settings_have_no_diff() {
        assert!(diff(&cfg(), &cfg()).is_empty());
    }

    #[test]
    fn fields_the_spec_leaves_out_are_not_managed() {
        let want = TotpConfig {
            issuer: "Acme".into(),
            ..Default::default()
        };
        let mut have = cfg();
        have.skew = Some(0);
        have.digits = Some(8);
        assert!(diff(&want, &have).is_empty());
    }

    #[test]
    fn each_changed_field_is_named_with_its_spec_name() {
        let want = cfg();
        let have = TotpConfig {
            issuer: "Other".into(),
            period: Some(60),
            key_size: Some(32),
            qr_size: Some(0),
            algorithm: Some("SHA512".into()),
            digits: Some(8),
            skew: Some(0),
            max_validation_attempts: Some(3),
        };
        assert_eq!(
            diff(&want, &have),
            vec![
                "issuer",
                "periodSeconds",
                "keySize",
                "qrSize",
                "digits",
                "skew",
                "maxValidationAttempts",
                "algorithm"
            ]
        );
    }

    #[test]
    fn an_absent_field_in_the_read_differs_from_a_set_one() {
        let mut have = cfg();
        have.max_validation_attempts = None;
        assert_eq!(diff(&cfg(), &have), vec!["maxValidationAttempts"]);
    }

    #[test]
    fn update_keeps_the_settings_the_spec_does_not_manage() {
        let want = TotpConfig {
            issuer: "New".into(),
            digits: Some(8),
            ..Default::default()
        };
        let mut have = cfg();
        have.skew = Some(0);
        let m = merged(&want, &have);
        assert_eq!(m.issuer, "New");
        assert_eq!(m.digits, Some(8));
        assert_eq!(m.skew, Some(0));
        assert_eq!(m.period, Some(30));
    }

    #[test]
    fn the_in_use_refusal_is_recognised_by_its_message() {
        let e = |status, message: &str| ClientError::Status {
            service: Service::Secrets,
            status,
            message: message.into(),
            retry_after: None,
        };
        assert!(is_in_use(&e(
            500,
            "methodID is still used by an enforcement configuration with ID: 123"
        )));
        assert!(is_in_use(&e(
            400,
            "unable to delete MFA method as it is in use by login enforcement(s): e"
        )));
        assert!(!is_in_use(&e(500, "internal error")));
    }
}
