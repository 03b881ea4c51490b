//! TransformAlphabet ↔ `/v1/<mount>/alphabet/:name` (spec C §4.1).

use serde_json::json;

use super::{delete_err, err, text};
use crate::api::secrets::transform::TransformAlphabet;
use crate::api::Service;
use crate::clients::secrets::transform::TransformClient;
use crate::reconcile::{managed_fields, Context, Created, Managed, Reconciled, Result};

/// An alphabet as the spec wants it or the service has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alphabet {
    /// Its name in the service.
    pub name: String,
    /// Its characters.
    pub alphabet: String,
}

impl Managed for TransformAlphabet {
    const SERVICE: Service = Service::Secrets;
    managed_fields!();
}

/// The fields of `observed` that differ from `desired` (only `alphabet` can).
pub fn diff(desired: &Alphabet, observed: &Alphabet) -> Vec<&'static str> {
    if desired.alphabet == observed.alphabet {
        vec![]
    } else {
        vec!["alphabet"]
    }
}

impl Reconciled for TransformAlphabet {
    type Client = TransformClient;
    type Desired = Alphabet;
    type Observed = Alphabet;

    async fn desired(&self, _ctx: &Context) -> Result<Alphabet> {
        Ok(Alphabet {
            name: self.remote_name(),
            alphabet: self.spec.alphabet.clone(),
        })
    }

    async fn observe(
        &self,
        client: &TransformClient,
        desired: &Alphabet,
        _remote_id: Option<&str>,
    ) -> Result<Option<Alphabet>> {
        let data = client
            .read(&self.spec.mount, "alphabet", &desired.name)
            .await
            .map_err(err)?;
        Ok(data.map(|d| Alphabet {
            name: desired.name.clone(),
            alphabet: text(&d, "alphabet"),
        }))
    }

    fn diff(desired: &Alphabet, observed: &Alphabet) -> Vec<&'static str> {
        diff(desired, observed)
    }

    fn shown(desired: &Alphabet, observed: &Alphabet, field: &str) -> Option<(String, String)> {
        use crate::reconcile::show;
        (field == "alphabet").then(|| {
            (
                show::text(&observed.alphabet),
                show::text(&desired.alphabet),
            )
        })
    }

    async fn create(&self, client: &TransformClient, desired: &Alphabet) -> Result<Created> {
        self.update(client, desired, desired, &[]).await?;
        Ok(Created {
            remote_id: desired.name.clone(),
            complete: true,
        })
    }

    async fn update(
        &self,
        client: &TransformClient,
        desired: &Alphabet,
        _observed: &Alphabet,
        _changed: &[&'static str],
    ) -> Result<()> {
        client
            .write(
                &self.spec.mount,
                &format!(
                    "alphabet/{}",
                    crate::clients::secrets::transform::encode_segment(&desired.name)
                ),
                &json!({ "alphabet": desired.alphabet }),
            )
            .await
            .map_err(err)
    }

    async fn delete(&self, client: &TransformClient, remote_id: &str) -> Result<()> {
        client
            .delete(&self.spec.mount, "alphabet", remote_id)
            .await
            .map_err(delete_err)
    }

    fn remote_id(observed: &Alphabet) -> String {
        observed.name.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_different_alphabet_is_a_change() {
        let a = Alphabet {
            name: "a".into(),
            alphabet: "0123".into(),
        };
        let b = Alphabet {
            name: "a".into(),
            alphabet: "01234".into(),
        };
        assert!(diff(&a, &a).is_empty());
        assert_eq!(diff(&a, &b), vec!["alphabet"]);
    }
}
