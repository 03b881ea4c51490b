//! Result Secrets with binary values (an enrollment's QR code as a PNG), next to
//! [`Context::apply_owned_secret`] which takes text.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};

use super::{Context, Error, Result};

/// Write `data` (raw bytes per key) to the Secret `name` in the owner's namespace, owned by
/// `owner` (garbage-collected with it). Server-side apply with the owner kind's field manager:
/// idempotent, and a key no longer written disappears. Values never reach logs or errors.
pub async fn apply_owned_secret_bytes<K>(
    ctx: &Context,
    owner: &K,
    name: &str,
    data: BTreeMap<String, Vec<u8>>,
) -> Result<()>
where
    K: Resource<DynamicType = ()>,
{
    let ns = owner.namespace().unwrap_or_default();
    let owner_ref = owner
        .controller_owner_ref(&())
        .ok_or_else(|| Error::InvalidSpec("owner has no uid yet".into()))?;
    let data: BTreeMap<String, ByteString> =
        data.into_iter().map(|(k, v)| (k, ByteString(v))).collect();
    let secret = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {"app.kubernetes.io/managed-by": "quartet"},
            "ownerReferences": [owner_ref],
        },
        "type": "Opaque",
        "data": data,
    });
    let manager = format!("quartet/{}", K::kind(&()).to_lowercase());
    // Only the metadata comes back: the whole answer would carry the values just written.
    Api::<Secret>::namespaced(ctx.client.clone(), &ns)
        .patch_metadata(
            name,
            &PatchParams::apply(&manager).force(),
            &Patch::Apply(&secret),
        )
        .await?;
    Ok(())
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
