//! The Secrets Quartet writes for its resources (an enrollment's QR code, checked-out
//! credentials, a login or bootstrap token, the DR ceremony's state): one shape for all of them,
//! [`QuartetSecret`], and what reads them back.

use std::collections::BTreeMap;

use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{PartialObjectMeta, Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};

use super::{Context, Error, Result};

/// A Secret written by server-side apply with a kind's field manager (`quartet/<kind>`),
/// labelled `app.kubernetes.io/managed-by: quartet`, type `Opaque`.
///
/// Values go under `data`, never `stringData`: apply then owns each `data` key, so a key the
/// kind stops writing is removed by the next apply. A real API server tracks a `stringData` key
/// as `stringData`'s, which it never stores, so dropping one from an apply leaves the value
/// behind (kubernetes/kubernetes#108008; the dev API server does the same).
pub struct QuartetSecret {
    namespace: String,
    name: String,
    owner: Option<OwnerReference>,
    annotations: BTreeMap<String, String>,
    data: BTreeMap<String, Vec<u8>>,
}

impl QuartetSecret {
    /// The Secret `name` in `namespace`, owned by nothing (it outlives the resource).
    pub fn new(namespace: &str, name: &str) -> Self {
        QuartetSecret {
            namespace: namespace.to_string(),
            name: name.to_string(),
            owner: None,
            annotations: BTreeMap::new(),
            data: BTreeMap::new(),
        }
    }

    /// Owned by `owner` as its controller, in the owner's namespace: garbage-collected with it.
    pub fn owned_by<K: Resource<DynamicType = ()>>(owner: &K, name: &str) -> Result<Self> {
        let owner_ref = owner
            .controller_owner_ref(&())
            .ok_or_else(|| Error::InvalidSpec("the resource has no uid yet".into()))?;
        let mut secret = Self::new(&owner.namespace().unwrap_or_default(), name);
        secret.owner = Some(owner_ref);
        Ok(secret)
    }

    /// With this annotation.
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.annotations.insert(key.to_string(), value.to_string());
        self
    }

    /// With this key and value.
    pub fn value(mut self, key: &str, value: impl Into<Vec<u8>>) -> Self {
        self.data.insert(key.to_string(), value.into());
        self
    }

    /// With these keys and values.
    pub fn values<V: Into<Vec<u8>>>(mut self, data: impl IntoIterator<Item = (String, V)>) -> Self {
        self.data
            .extend(data.into_iter().map(|(k, v)| (k, v.into())));
        self
    }

    /// Apply it with kind `K`'s field manager. Only the metadata comes back: the whole answer
    /// would carry the values just written. Values never reach logs or errors.
    pub async fn apply<K: Resource<DynamicType = ()>>(
        self,
        client: &kube::Client,
    ) -> Result<PartialObjectMeta<Secret>> {
        let b64 = base64::engine::general_purpose::STANDARD;
        let data: BTreeMap<String, String> = self
            .data
            .iter()
            .map(|(k, v)| (k.clone(), b64.encode(v)))
            .collect();
        let mut metadata = serde_json::json!({
            "name": self.name,
            "namespace": self.namespace,
            "labels": {"app.kubernetes.io/managed-by": "quartet"},
        });
        if !self.annotations.is_empty() {
            metadata["annotations"] = serde_json::json!(self.annotations);
        }
        if let Some(owner) = &self.owner {
            metadata["ownerReferences"] = serde_json::json!([owner]);
        }
        let secret = serde_json::json!({
            "apiVersion": "v1", "kind": "Secret", "metadata": metadata,
            "type": "Opaque", "data": data,
        });
        if let Some(owner) = &self.owner {
            self.refuse_taking_over::<K>(client, owner).await?;
        }
        let manager = format!("quartet/{}", K::kind(&()).to_lowercase());
        Ok(Api::<Secret>::namespaced(client.clone(), &self.namespace)
            .patch_metadata(
                &self.name,
                &PatchParams::apply(&manager).force(),
                &Patch::Apply(&secret),
            )
            .await?)
    }
}

impl QuartetSecret {
    /// An owned Secret is written only where no Secret is, or into the owner's own
    /// ([`ensure_ours`]).
    async fn refuse_taking_over<K: Resource<DynamicType = ()>>(
        &self,
        client: &kube::Client,
        owner: &OwnerReference,
    ) -> Result<()> {
        let Some(existing) = Api::<Secret>::namespaced(client.clone(), &self.namespace)
            .get_metadata_opt(&self.name)
            .await?
        else {
            return Ok(());
        };
        check_owner(
            &K::kind(&()),
            owner,
            &self.namespace,
            &self.name,
            existing
                .metadata
                .owner_references
                .as_deref()
                .unwrap_or_default(),
        )
    }
}

/// That the existing Secret whose metadata is `meta` is `owner`'s own: a Secret of that name
/// made by someone else (a user's configuration, the resource's own input such as a bearer
/// token) is never read as the owner's, overwritten, and then deleted with the resource. One
/// of an earlier resource of the same kind and name, which the garbage collector is deleting,
/// is waited for.
pub fn ensure_ours<K: Resource<DynamicType = ()>>(
    owner: &K,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Result<()> {
    let owner_ref = owner
        .controller_owner_ref(&())
        .ok_or_else(|| Error::InvalidSpec("the resource has no uid yet".into()))?;
    check_owner(
        &K::kind(&()),
        &owner_ref,
        &meta.namespace.clone().unwrap_or_default(),
        &meta.name.clone().unwrap_or_default(),
        meta.owner_references.as_deref().unwrap_or_default(),
    )
}

fn check_owner(
    kind: &str,
    owner: &OwnerReference,
    ns: &str,
    name: &str,
    refs: &[OwnerReference],
) -> Result<()> {
    if refs.iter().any(|r| r.uid == owner.uid) {
        return Ok(());
    }
    if refs
        .iter()
        .any(|r| r.kind == owner.kind && r.name == owner.name && r.controller == Some(true))
    {
        return Err(Error::MissingReference(format!(
            "Secret {ns}/{name} still belongs to an earlier {kind} named {}, which is being \
             deleted: waiting for it to go",
            owner.name
        )));
    }
    Err(Error::InvalidSpec(format!(
        "Secret {ns}/{name} already exists and is not this {kind}'s: Quartet never overwrites \
         a Secret it did not make (it would delete it with the {kind}); give the {kind} another \
         Secret name or delete that Secret"
    )))
}

/// Which keys the Secret `name` in the owner's namespace holds, when it exists and is owned by
/// `owner` (`None` when absent). A Secret of that name owned by something else is an error: it
/// is never taken over.
pub async fn owned_secret_keys<K>(
    ctx: &Context,
    owner: &K,
    name: &str,
) -> Result<Option<Vec<String>>>
where
    K: Resource<DynamicType = ()>,
{
    let ns = owner.namespace().unwrap_or_default();
    let Some(secret) = Api::<Secret>::namespaced(ctx.client.clone(), &ns)
        .get_opt(name)
        .await?
    else {
        return Ok(None);
    };
    let uid = owner.meta().uid.clone().unwrap_or_default();
    let owned = secret
        .metadata
        .owner_references
        .as_ref()
        .is_some_and(|refs| refs.iter().any(|r| r.uid == uid));
    if !owned {
        return Err(Error::InvalidSpec(format!(
            "Secret {ns}/{name} already exists and is not owned by this {}: choose another secretName",
            K::kind(&())
        )));
    }
    Ok(Some(
        secret
            .data
            .map(|d| {
                d.into_iter()
                    .filter(|(_, v)| !v.0.is_empty())
                    .map(|(k, _)| k)
                    .collect()
            })
            .unwrap_or_default(),
    ))
}
