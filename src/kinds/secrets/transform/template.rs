//! TransformTemplate ↔ `/v1/<mount>/template/:name` (spec C §4.1).
//!
//! The service does not check that the alphabet exists when the template is written: the
//! template is written anyway and `Ready=False` (`Waiting`) names the missing alphabet until
//! it appears (polled).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::{delete_err, err, missing, text};
use crate::api::secrets::transform::TransformTemplate;
use crate::api::Service;
use crate::clients::secrets::transform::{encode_segment, TransformClient};
use crate::reconcile::{managed_fields, Context, Created, Managed, Reconciled, Result};

/// A template as the spec wants it or the service has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    /// Its name in the service.
    pub name: String,
    /// The regular expression whose groups are transformed.
    pub pattern: String,
    /// The alphabet of the transformed characters.
    pub alphabet: Option<String>,
    /// How to reassemble the groups on encode.
    pub encode_format: Option<String>,
    /// Named formats to reassemble the groups on decode.
    pub decode_formats: Option<BTreeMap<String, String>>,
}

/// A template as read, with what is missing for it to work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    /// The template as the service reads it back.
    pub template: Template,
    /// The alphabet named by the spec when the service does not have it (yet).
    pub missing: Vec<String>,
}

impl Managed for TransformTemplate {
    const SERVICE: Service = Service::Secrets;
    managed_fields!();
}

/// Managed fields that differ; optional fields only when the spec sets them.
pub fn diff(desired: &Template, observed: &Template) -> Vec<&'static str> {
    let mut changed = Vec::new();
    if desired.pattern != observed.pattern {
        changed.push("pattern");
    }
    if desired.alphabet.is_some() && desired.alphabet != observed.alphabet {
        changed.push("alphabet");
    }
    if desired.encode_format.is_some() && desired.encode_format != observed.encode_format {
        changed.push("encodeFormat");
    }
    if desired.decode_formats.is_some() && desired.decode_formats != observed.decode_formats {
        changed.push("decodeFormats");
    }
    changed
}

fn parse(name: &str, d: &Value) -> Template {
    Template {
        name: name.to_string(),
        pattern: text(d, "pattern"),
        alphabet: Some(text(d, "alphabet")),
        encode_format: Some(text(d, "encode_format")),
        decode_formats: Some(
            d.get("decode_formats")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                        .collect()
                })
                .unwrap_or_default(),
        ),
    }
}

impl TransformTemplate {
    fn references(&self) -> Vec<String> {
        self.spec.alphabet.iter().cloned().collect()
    }
}

impl Reconciled for TransformTemplate {
    type Client = TransformClient;
    type Desired = Template;
    type Observed = Observed;

    async fn desired(&self, _ctx: &Context) -> Result<Template> {
        Ok(Template {
            name: self.remote_name(),
            pattern: self.spec.pattern.clone(),
            alphabet: self.spec.alphabet.clone(),
            encode_format: self.spec.encode_format.clone(),
            decode_formats: self.spec.decode_formats.clone(),
        })
    }

    async fn observe(
        &self,
        client: &TransformClient,
        desired: &Template,
        _remote_id: Option<&str>,
    ) -> Result<Option<Observed>> {
        let mount = &self.spec.mount;
        let Some(d) = client
            .read(mount, "template", &desired.name)
            .await
            .map_err(err)?
        else {
            return Ok(None);
        };
        Ok(Some(Observed {
            template: parse(&desired.name, &d),
            missing: missing(client, mount, "alphabet", &self.references()).await?,
        }))
    }

    fn diff(desired: &Template, observed: &Observed) -> Vec<&'static str> {
        diff(desired, &observed.template)
    }

    fn shown(desired: &Template, observed: &Observed, field: &str) -> Option<(String, String)> {
        use crate::reconcile::show;
        let have = &observed.template;
        let formats = |m: &Option<BTreeMap<String, String>>| {
            let pairs: Vec<String> = m
                .iter()
                .flatten()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            show::set(&pairs)
        };
        match field {
            "pattern" => show::pair(show::text(&have.pattern), show::text(&desired.pattern)),
            "alphabet" => show::pair(show::opt(&have.alphabet), show::opt(&desired.alphabet)),
            "encodeFormat" => show::pair(
                show::opt(&have.encode_format),
                show::opt(&desired.encode_format),
            ),
            "decodeFormats" => show::pair(
                formats(&have.decode_formats),
                formats(&desired.decode_formats),
            ),
            _ => None,
        }
    }

    const PENDING_REASON: &'static str = "Waiting";

    fn pending(observed: &Observed) -> Option<String> {
        (!observed.missing.is_empty()).then(|| {
            format!(
                "waiting for alphabet {} (TransformAlphabet): not in the service yet",
                observed.missing.join(", ")
            )
        })
    }

    async fn create(&self, client: &TransformClient, desired: &Template) -> Result<Created> {
        write(self, client, desired).await?;
        Ok(Created {
            remote_id: desired.name.clone(),
            // Observe once more at once to report an alphabet that does not exist yet.
            complete: self.references().iter().all(|a| a.starts_with("builtin/")),
        })
    }

    async fn update(
        &self,
        client: &TransformClient,
        desired: &Template,
        _observed: &Observed,
        _changed: &[&'static str],
    ) -> Result<()> {
        write(self, client, desired).await
    }

    async fn delete(&self, client: &TransformClient, remote_id: &str) -> Result<()> {
        client
            .delete(&self.spec.mount, "template", remote_id)
            .await
            .map_err(delete_err)
    }

    fn remote_id(observed: &Observed) -> String {
        observed.template.name.clone()
    }
}

async fn write(t: &TransformTemplate, client: &TransformClient, desired: &Template) -> Result<()> {
    let mut body = json!({ "type": "regex", "pattern": desired.pattern });
    if let Some(a) = &desired.alphabet {
        body["alphabet"] = json!(a);
    }
    if let Some(e) = &desired.encode_format {
        body["encode_format"] = json!(e);
    }
    if let Some(d) = &desired.decode_formats {
        body["decode_formats"] = json!(d);
    }
    client
        .write(
            &t.spec.mount,
            &format!("template/{}", encode_segment(&desired.name)),
            &body,
        )
        .await
        .map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(pattern: &str, alphabet: Option<&str>) -> Template {
        Template {
            name: "t".into(),
            pattern: pattern.into(),
            alphabet: alphabet.map(Into::into),
            encode_format: None,
            decode_formats: None,
        }
    }

    #[test]
    fn unset_fields_are_not_managed_and_service_defaults_are_not_drift() {
        let observed = parse(
            "t",
            &json!({"type": "regex", "pattern": "(\\d+)", "alphabet": "x", "encode_format": "", "decode_formats": {}}),
        );
        assert!(diff(&t("(\\d+)", None), &observed).is_empty());
        assert!(diff(&t("(\\d+)", Some("x")), &observed).is_empty());
        assert_eq!(
            diff(&t("(\\d)", Some("y")), &observed),
            vec!["pattern", "alphabet"]
        );
    }

    #[test]
    fn decode_formats_are_compared_as_a_map() {
        let observed = parse(
            "t",
            &json!({"pattern": "p", "decode_formats": {"a": "$1", "b": "$2"}}),
        );
        let mut want = t("p", None);
        want.decode_formats = Some(
            [
                ("b".to_string(), "$2".to_string()),
                ("a".to_string(), "$1".to_string()),
            ]
            .into(),
        );
        assert!(diff(&want, &observed).is_empty());
    }
}
