//! TotpEnrollment: a TOTP secret for one identity entity, through
//! `identity/mfa/method/totp/admin-generate` and `admin-destroy` (spec A §4.5).
//!
//! An operation, not an owned object: the service has no read of an entity's secret, and the
//! seed can be obtained only when it is generated. Each pass decides one step:
//! * the Secret holds the result for the recorded method and entity, and `spec.regenerate` was
//!   handled → in sync, no call;
//! * otherwise generate (after `admin-destroy` when a new `regenerate` value asks for it, or
//!   when an earlier generate's outcome is unknown), write `url` and `barcode.png` to the owned
//!   Secret, and record method, entity and the handled `regenerate` value in status.
//!
//! An entity that already holds a secret for the method (enrolled elsewhere) is not replaced
//! silently: `Ready=False`, reason `AlreadyEnrolled`, until `spec.regenerate` asks for it. The
//! otpauth URL carries the seed: it goes to the Secret only, never to status, logs, Events or
//! errors.

use std::time::Duration;

use base64::Engine;
use kube::ResourceExt;
use serde_json::{json, Map, Value};

use crate::api::secrets::totp::{TotpEnrollment, TotpMethod};
use crate::api::Service;
use crate::clients::secrets::totp::TotpClient;
use crate::clients::ClientError;
use crate::reconcile::owned_secret::{owned_secret_keys, QuartetSecret};
use crate::reconcile::{features, managed_fields, Context, Error, Managed, Operated, Result, Step};

/// Status field: an earlier generate may have happened without its result reaching the Secret.
const UNKNOWN_OUTCOME: &str = "generateOutcomeUnknown";

impl Managed for TotpEnrollment {
    const SERVICE: Service = Service::Secrets;
    managed_fields!();
}

/// Whether a failed call may still have been carried out by the service.
fn outcome_unknown(e: &ClientError) -> bool {
    matches!(
        e,
        ClientError::Unreachable { .. } | ClientError::Decode { .. }
    ) || e.status().is_some_and(|s| s >= 500)
}

/// Whether a 4xx of `admin-destroy` means there is nothing left to destroy (method or entity
/// gone).
fn nothing_to_destroy(e: &ClientError) -> bool {
    match e {
        ClientError::Status {
            status: 400 | 404,
            message,
            ..
        } => {
            let m = message.to_lowercase();
            m.contains("does not exist") || m.contains("invalid entity") || m.contains("not found")
        }
        _ => false,
    }
}

impl TotpEnrollment {
    async fn method_id(&self, ctx: &Context) -> Result<String> {
        if let Some(id) = &self.spec.method_id {
            return Ok(id.clone());
        }
        let Some(r) = &self.spec.method_ref else {
            return Err(Error::InvalidSpec(
                "one of methodRef and methodId must be set".into(),
            ));
        };
        let ns = self.namespace().unwrap_or_default();
        let method: TotpMethod = ctx.referenced(&ns, &r.name).await?;
        method
            .status
            .as_ref()
            .and_then(|s| s.managed.remote_id.clone())
            .ok_or_else(|| {
                Error::MissingReference(format!(
                    "TotpMethod {ns}/{} has no method id yet (waiting for it to be created)",
                    r.name
                ))
            })
    }

    async fn entity_id(&self, client: &TotpClient) -> Result<String> {
        if let Some(id) = &self.spec.entity_id {
            return Ok(id.clone());
        }
        let name = self.spec.entity_name.clone().unwrap_or_default();
        client.entity_id_by_name(&name).await?.ok_or_else(|| {
            Error::MissingReference(format!(
                "the secrets service has no identity entity named {name:?} (yet)"
            ))
        })
    }

    fn status_str(&self, key: &str) -> Option<String> {
        let s = self.status.as_ref()?;
        match key {
            "methodId" => s.method_id.clone(),
            "entityId" => s.entity_id.clone(),
            "handledRegenerate" => s.handled_regenerate.clone(),
            _ => None,
        }
    }

    fn unknown_outcome_recorded(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.generate_outcome_unknown)
            .unwrap_or(false)
    }

    /// The full set of kind status fields for a step.
    fn fields(
        &self,
        method: &str,
        entity: &str,
        handled: Option<&str>,
        unknown: bool,
    ) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("methodId".into(), json!(method));
        m.insert("entityId".into(), json!(entity));
        m.insert("secretName".into(), json!(self.result_secret_name()));
        if let Some(h) = handled {
            m.insert("handledRegenerate".into(), json!(h));
        }
        if unknown {
            m.insert(UNKNOWN_OUTCOME.into(), json!(true));
        }
        m
    }

    fn step_with(
        &self,
        step: Step,
        fields: Map<String, Value>,
        method: &str,
        entity: &str,
    ) -> Step {
        let mut step = step.remote_id(format!("{method}/{entity}"));
        step.fields = fields;
        step
    }
}

impl Operated for TotpEnrollment {
    type Client = TotpClient;

    async fn step(&self, ctx: &Context, client: &TotpClient) -> Result<Step> {
        features::require(ctx, self, features::MFA_TOTP).await?;
        let method = self.method_id(ctx).await?;
        let entity = self.entity_id(client).await?;
        let secret_name = self.result_secret_name();
        let wanted = self.spec.regenerate.as_deref().filter(|r| !r.is_empty());
        let handled = self.status_str("handledRegenerate");
        let same_target = self.status_str("methodId").as_deref() == Some(method.as_str())
            && self.status_str("entityId").as_deref() == Some(entity.as_str());
        let keys = owned_secret_keys(ctx, self, &secret_name).await?;
        let delivered = keys.as_ref().is_some_and(|k| k.iter().any(|k| k == "url"));
        let unknown = self.unknown_outcome_recorded();

        if same_target && delivered && !unknown && wanted == handled.as_deref() {
            let fields = self.fields(&method, &entity, handled.as_deref(), false);
            return Ok(self.step_with(
                Step::ready(
                    "Enrolled",
                    format!("entity {entity} holds a TOTP secret for method {method}; Secret {secret_name} has its url and barcode.png"),
                ),
                fields,
                &method,
                &entity,
            ));
        }

        // Destroy first when a new regenerate value asks for it, or when an earlier generate
        // may have stored a secret whose result never reached the Secret.
        let regenerate = wanted.is_some() && wanted != handled.as_deref();
        if regenerate || unknown {
            match client.admin_destroy(&method, &entity).await {
                Ok(()) => {}
                Err(e) if nothing_to_destroy(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let generated = match client.admin_generate(&method, &entity).await {
            Ok(g) => g,
            Err(e) if outcome_unknown(&e) => {
                // The service may hold a secret we never saw: replace it on the next pass.
                let fields = self.fields(&method, &entity, handled.as_deref(), true);
                return Ok(self.step_with(
                    Step::not_ready(
                        "ServiceUnavailable",
                        format!("generating the TOTP secret failed, will retry: {e}"),
                    )
                    .again(Duration::from_secs(5)),
                    fields,
                    &method,
                    &entity,
                ));
            }
            Err(e) => return Err(e.into()),
        };
        let Some(generated) = generated else {
            let fields = self.fields(&method, &entity, handled.as_deref(), false);
            return Ok(self.step_with(
                Step::not_ready(
                    "AlreadyEnrolled",
                    format!("entity {entity} already holds a TOTP secret for method {method}, which the service does not reveal again: set spec.regenerate to a new value to replace it"),
                ),
                fields,
                &method,
                &entity,
            ));
        };
        let barcode = base64::engine::general_purpose::STANDARD
            .decode(generated.barcode.expose().trim())
            .map_err(|_| ClientError::Decode {
                service: Service::Secrets,
                detail: "the generated barcode is not base64".into(),
            })?;
        let written: crate::reconcile::Result<_> = async {
            QuartetSecret::owned_by(self, &secret_name)?
                .value("url", generated.url.expose())
                .value("barcode.png", barcode)
                .apply::<Self>(&ctx.client)
                .await
        }
        .await;
        if let Err(e) = written {
            // The seed is lost with this pass: destroy and generate again next time.
            let fields = self.fields(&method, &entity, handled.as_deref(), true);
            return Ok(self.step_with(
                Step::not_ready(
                    e.reason(),
                    format!("writing Secret {secret_name} failed, will generate again: {e}"),
                )
                .again(Duration::from_secs(5)),
                fields,
                &method,
                &entity,
            ));
        }
        let fields = self.fields(&method, &entity, wanted, false);
        let what = if regenerate || delivered {
            "regenerated"
        } else {
            "generated"
        };
        Ok(self.step_with(
            Step::ready(
                "Enrolled",
                format!("entity {entity} holds a TOTP secret for method {method}; Secret {secret_name} has its url and barcode.png"),
            )
            .event(
                false,
                "Enrolled",
                format!("TOTP secret {what} for entity {entity} (method {method}) into Secret {secret_name}"),
            ),
            fields,
            &method,
            &entity,
        ))
    }

    async fn finish(&self, _ctx: &Context, client: &TotpClient) -> Result<()> {
        let (Some(method), Some(entity)) =
            (self.status_str("methodId"), self.status_str("entityId"))
        else {
            return Ok(());
        };
        match client.admin_destroy(&method, &entity).await {
            Ok(()) => Ok(()),
            Err(e) if nothing_to_destroy(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    fn holds_remote(&self) -> bool {
        self.status_str("entityId").is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, message: &str) -> ClientError {
        ClientError::Status {
            service: Service::Secrets,
            status: code,
            message: message.into(),
            retry_after: None,
        }
    }

    #[test]
    fn a_lost_or_failed_response_leaves_the_outcome_unknown_but_a_refusal_does_not() {
        assert!(outcome_unknown(&ClientError::Unreachable {
            service: Service::Secrets,
            detail: "connection broke".into()
        }));
        assert!(outcome_unknown(&status(500, "internal")));
        assert!(!outcome_unknown(&status(400, "invalid entity ID")));
    }

    #[test]
    fn destroying_for_a_gone_method_or_entity_counts_as_done() {
        assert!(nothing_to_destroy(&status(
            400,
            "configuration for method ID \"x\" does not exist"
        )));
        assert!(nothing_to_destroy(&status(400, "invalid entity ID")));
        assert!(!nothing_to_destroy(&status(403, "permission denied")));
    }
}
