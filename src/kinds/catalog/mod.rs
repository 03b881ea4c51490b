//! Kinds of the catalog's ACL system (spec C §4.3).

pub mod acl_bootstrap;
pub mod acl_token;

use std::sync::Arc;

use crate::api::{ConnectionRef, SecretKeyRef, Service};
use crate::clients::catalog::CatalogClient;
use crate::reconcile::{Context, Result};

/// A catalog client presenting the token in Secret `secret` key `key` of namespace `ns` (the
/// Connection's address, header and CA; the token from the resource's own Secret).
pub async fn client_with_token_in(
    ctx: &Context,
    ns: &str,
    cref: Option<&ConnectionRef>,
    secret: &str,
    key: &str,
) -> Result<CatalogClient> {
    let conn = ctx.connection_for("", ns, cref, Service::Catalog)?;
    let mut conn = (*conn).clone();
    let conn_ns = conn.metadata.namespace.clone().unwrap_or_default();
    if conn_ns != ns {
        // The CA Secret lives with the Connection; the token Secret with the resource.
        conn.spec.ca_secret_ref = None;
    }
    conn.metadata.namespace = Some(ns.to_string());
    conn.spec.token_secret_ref = Some(SecretKeyRef {
        name: secret.to_string(),
        key: key.to_string(),
    });
    conn.spec.auth = None;
    let http = ctx.build_http(&conn).await?;
    Ok(CatalogClient::from(Arc::new(http)))
}
