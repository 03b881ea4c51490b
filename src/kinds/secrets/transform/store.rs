//! TransformStore ↔ `/v1/<mount>/stores/:name` and `/v1/<mount>/stores/:name/schema`
//! (spec C §4.1).
//!
//! The store's credentials are write-only (never returned): they are compared by keyed hash
//! and sent only when the Secret changes. `schemaInit` calls the schema endpoint once per change
//! of its own credentials (a DDL-capable user used for that call only). Both hashes are kept in
//! `status.writeOnlyHash` as `store=<hmac> schema=<hmac>`.

use kube::ResourceExt;
use serde_json::{json, Map, Value};

use super::{delete_err, err, same_set, spec_seconds, strings, text, value_seconds};
use crate::api::secrets::transform::{StoreCredentialsRef, TransformStore};
use crate::api::{SecretKeyRef, Service};
use crate::clients::secrets::transform::{encode_segment, TransformClient};
use crate::clients::SecretString;
use crate::reconcile::hash::keyed_hash;
use crate::reconcile::{managed_fields, Context, Created, Managed, Reconciled, Result};

/// A database login, from a Secret.
pub struct Credentials {
    /// The user name.
    pub username: SecretString,
    /// The password.
    pub password: SecretString,
}

/// What a store should be.
pub struct Desired {
    /// Its name in the service.
    pub name: String,
    /// `postgres`, `mysql` or `mssql`.
    pub driver: String,
    /// The database connection string, with `{{username}}` and `{{password}}` placeholders.
    pub connection_string: String,
    /// The login the service connects with.
    pub credentials: Credentials,
    /// Transformation types the store serves; `None`: not managed.
    pub supported_transformations: Option<Vec<String>>,
    /// The database schema; `None`: not managed.
    pub schema: Option<String>,
    /// Connection pool limit; `None`: not managed.
    pub max_open_connections: Option<i64>,
    /// Idle connections kept; `None`: not managed.
    pub max_idle_connections: Option<i64>,
    /// Longest connection lifetime, in seconds; `None`: not managed.
    pub max_connection_lifetime: Option<i64>,
    /// The login and transformation type to create the store's schema with, once.
    pub schema_init: Option<(Credentials, String)>,
    /// Keyed hash of the store credentials.
    pub store_hash: String,
    /// Keyed hash of the schemaInit credentials and transformation type.
    pub schema_hash: Option<String>,
}

/// A store as the service reads it back (the credentials are write-only and never read).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Remote {
    /// Its name in the service.
    pub name: String,
    /// `postgres`, `mysql` or `mssql`.
    pub driver: String,
    /// The database connection string.
    pub connection_string: String,
    /// Transformation types the store serves.
    pub supported_transformations: Vec<String>,
    /// The database schema.
    pub schema: String,
    /// Connection pool limit.
    pub max_open_connections: i64,
    /// Idle connections kept.
    pub max_idle_connections: i64,
    /// Longest connection lifetime, in seconds.
    pub max_connection_lifetime: i64,
}

impl Managed for TransformStore {
    const SERVICE: Service = Service::Secrets;
    managed_fields!();
    const WATCHES_SECRETS: bool = true;
    fn secret_refs(&self) -> Vec<String> {
        let mut v = vec![self.spec.credentials_secret_ref.name.clone()];
        if let Some(s) = &self.spec.schema_init {
            v.push(s.credentials_secret_ref.name.clone());
        }
        v
    }
}

/// A store named `name` from the `data` of its read.
pub fn parse(name: &str, d: &Value) -> Remote {
    let int = |k: &str| d.get(k).and_then(Value::as_i64).unwrap_or_default();
    Remote {
        name: name.to_string(),
        driver: text(d, "driver"),
        connection_string: text(d, "connection_string"),
        supported_transformations: strings(d.get("supported_transformations")),
        schema: text(d, "schema"),
        max_open_connections: int("max_open_connections"),
        max_idle_connections: int("max_idle_connections"),
        max_connection_lifetime: value_seconds(d.get("max_connection_lifetime")),
    }
}

/// Managed fields that differ (optional ones only when set; sets as sets; durations in seconds).
pub fn diff(d: &Desired, o: &Remote) -> Vec<&'static str> {
    let mut changed = Vec::new();
    if d.driver != o.driver {
        changed.push("driver");
    }
    if d.connection_string != o.connection_string {
        changed.push("connectionString");
    }
    if d.supported_transformations
        .as_ref()
        .is_some_and(|v| !same_set(v, &o.supported_transformations))
    {
        changed.push("supportedTransformations");
    }
    if d.schema.as_ref().is_some_and(|v| *v != o.schema) {
        changed.push("schema");
    }
    if d.max_open_connections
        .is_some_and(|v| v != o.max_open_connections)
    {
        changed.push("maxOpenConnections");
    }
    if d.max_idle_connections
        .is_some_and(|v| v != o.max_idle_connections)
    {
        changed.push("maxIdleConnections");
    }
    if d.max_connection_lifetime
        .is_some_and(|v| v != o.max_connection_lifetime)
    {
        changed.push("maxConnectionLifetime");
    }
    changed
}

/// The part of a `store=<h> schema=<h>` hash string named `part`.
fn hash_part<'a>(all: &'a str, part: &str) -> Option<&'a str> {
    all.split_whitespace()
        .find_map(|p| p.strip_prefix(part).and_then(|r| r.strip_prefix('=')))
}

impl TransformStore {
    async fn credentials(
        &self,
        ctx: &Context,
        r: &StoreCredentialsRef,
        what: &str,
    ) -> Result<Credentials> {
        let ns = self.namespace().unwrap_or_default();
        let key = |k: &str| SecretKeyRef {
            name: r.name.clone(),
            key: k.to_string(),
        };
        Ok(Credentials {
            username: ctx.secret_value(&ns, &key(&r.username_key), what).await?,
            password: ctx.secret_value(&ns, &key(&r.password_key), what).await?,
        })
    }

    fn recorded_hash(&self) -> String {
        self.status
            .as_ref()
            .and_then(|s| s.managed.write_only_hash.clone())
            .unwrap_or_default()
    }

    async fn init_schema(&self, client: &TransformClient, d: &Desired) -> Result<()> {
        let Some((c, tt)) = &d.schema_init else {
            return Ok(());
        };
        client
            .write(
                &self.spec.mount,
                &format!("stores/{}/schema", encode_segment(&d.name)),
                &json!({
                    "username": c.username.expose(),
                    "password": c.password.expose(),
                    "transformation_type": tt,
                }),
            )
            .await
            .map_err(err)
    }
}

fn hash_of(ctx: &Context, c: &Credentials) -> String {
    keyed_hash(
        ctx.settings.hash_key.expose().as_bytes(),
        &[
            c.username.expose().as_bytes(),
            c.password.expose().as_bytes(),
        ],
    )
}

impl Reconciled for TransformStore {
    type Client = TransformClient;
    type Desired = Desired;
    type Observed = Remote;

    async fn desired(&self, ctx: &Context) -> Result<Desired> {
        let s = &self.spec;
        let schema_init = match &s.schema_init {
            Some(si) => Some((
                self.credentials(
                    ctx,
                    &si.credentials_secret_ref,
                    "schemaInit.credentialsSecretRef",
                )
                .await?,
                si.transformation_type
                    .clone()
                    .unwrap_or_else(|| "tokenization".into()),
            )),
            None => None,
        };
        let mut d = Desired {
            name: self.remote_name(),
            driver: s.driver.as_str().to_string(),
            connection_string: s.connection_string.clone(),
            credentials: self
                .credentials(ctx, &s.credentials_secret_ref, "credentialsSecretRef")
                .await?,
            supported_transformations: s.supported_transformations.clone(),
            schema: s.schema.clone(),
            max_open_connections: s.max_open_connections,
            max_idle_connections: s.max_idle_connections,
            max_connection_lifetime: spec_seconds(
                &s.max_connection_lifetime,
                "maxConnectionLifetime",
            )?,
            store_hash: String::new(),
            schema_hash: None,
            schema_init,
        };
        d.store_hash = hash_of(ctx, &d.credentials);
        d.schema_hash = d
            .schema_init
            .as_ref()
            .map(|(c, tt)| format!("{}/{tt}", hash_of(ctx, c)));
        Ok(d)
    }

    async fn observe(
        &self,
        client: &TransformClient,
        desired: &Desired,
        _remote_id: Option<&str>,
    ) -> Result<Option<Remote>> {
        Ok(client
            .read(&self.spec.mount, "stores", &desired.name)
            .await
            .map_err(err)?
            .map(|d| parse(&desired.name, &d)))
    }

    fn diff(desired: &Desired, observed: &Remote) -> Vec<&'static str> {
        diff(desired, observed)
    }

    /// Spec fields only: the credentials are write-only (compared by their keyed hash).
    fn shown(d: &Desired, o: &Remote, field: &str) -> Option<(String, String)> {
        use crate::reconcile::show;
        match field {
            "driver" => show::pair(show::text(&o.driver), show::text(&d.driver)),
            "connectionString" => show::pair(
                show::text(&o.connection_string),
                show::text(&d.connection_string),
            ),
            "supportedTransformations" => show::pair(
                show::set(&o.supported_transformations),
                show::set(d.supported_transformations.as_deref().unwrap_or_default()),
            ),
            "schema" => show::pair(show::text(&o.schema), show::opt(&d.schema)),
            "maxOpenConnections" => show::pair(
                o.max_open_connections.to_string(),
                show::opt(&d.max_open_connections),
            ),
            "maxIdleConnections" => show::pair(
                o.max_idle_connections.to_string(),
                show::opt(&d.max_idle_connections),
            ),
            "maxConnectionLifetime" => show::pair(
                o.max_connection_lifetime.to_string(),
                show::opt(&d.max_connection_lifetime),
            ),
            _ => None,
        }
    }

    fn write_only_hash(desired: &Desired, _ctx: &Context) -> Option<String> {
        let mut h = format!("store={}", desired.store_hash);
        if let Some(sh) = &desired.schema_hash {
            h.push_str(&format!(" schema={sh}"));
        }
        Some(h)
    }

    async fn create(&self, client: &TransformClient, desired: &Desired) -> Result<Created> {
        write(self, client, desired).await?;
        self.init_schema(client, desired).await?;
        Ok(Created {
            remote_id: desired.name.clone(),
            complete: true,
        })
    }

    async fn update(
        &self,
        client: &TransformClient,
        desired: &Desired,
        _observed: &Remote,
        changed: &[&'static str],
    ) -> Result<()> {
        let recorded = self.recorded_hash();
        let fields = changed.iter().any(|c| !c.starts_with('('));
        if fields || hash_part(&recorded, "store") != Some(desired.store_hash.as_str()) {
            write(self, client, desired).await?;
        }
        if desired.schema_hash.is_some()
            && hash_part(&recorded, "schema") != desired.schema_hash.as_deref()
        {
            self.init_schema(client, desired).await?;
        }
        Ok(())
    }

    async fn delete(&self, client: &TransformClient, remote_id: &str) -> Result<()> {
        client
            .delete(&self.spec.mount, "stores", remote_id)
            .await
            .map_err(delete_err)
    }

    fn remote_id(observed: &Remote) -> String {
        observed.name.clone()
    }
}

async fn write(s: &TransformStore, client: &TransformClient, d: &Desired) -> Result<()> {
    let mut b = Map::new();
    b.insert("type".into(), json!("sql"));
    b.insert("driver".into(), json!(d.driver));
    b.insert("connection_string".into(), json!(d.connection_string));
    b.insert("username".into(), json!(d.credentials.username.expose()));
    b.insert("password".into(), json!(d.credentials.password.expose()));
    if let Some(v) = &d.supported_transformations {
        b.insert("supported_transformations".into(), json!(v));
    }
    if let Some(v) = &d.schema {
        b.insert("schema".into(), json!(v));
    }
    if let Some(v) = d.max_open_connections {
        b.insert("max_open_connections".into(), json!(v));
    }
    if let Some(v) = d.max_idle_connections {
        b.insert("max_idle_connections".into(), json!(v));
    }
    if let Some(v) = d.max_connection_lifetime {
        b.insert("max_connection_lifetime".into(), json!(v));
    }
    client
        .write(
            &s.spec.mount,
            &format!("stores/{}", encode_segment(&d.name)),
            &Value::Object(b),
        )
        .await
        .map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::secrets::transform::parse_duration;

    #[test]
    fn hash_parts_are_found_by_name() {
        let h = "store=hmac-sha256:aa schema=hmac-sha256:bb/tokenization";
        assert_eq!(hash_part(h, "store"), Some("hmac-sha256:aa"));
        assert_eq!(hash_part(h, "schema"), Some("hmac-sha256:bb/tokenization"));
        assert_eq!(hash_part("store=x", "schema"), None);
    }

    #[test]
    fn service_defaults_are_not_drift_and_durations_are_seconds() {
        let remote = parse(
            "s",
            &json!({"type": "sql", "driver": "postgres", "connection_string": "c",
                "supported_transformations": ["tokenization"], "schema": "public",
                "max_open_connections": 4, "max_idle_connections": 4, "max_connection_lifetime": 3600}),
        );
        let mut d = Desired {
            name: "s".into(),
            driver: "postgres".into(),
            connection_string: "c".into(),
            credentials: Credentials {
                username: SecretString::new("u"),
                password: SecretString::new("p"),
            },
            supported_transformations: None,
            schema: None,
            max_open_connections: None,
            max_idle_connections: None,
            max_connection_lifetime: parse_duration("1h"),
            schema_init: None,
            store_hash: String::new(),
            schema_hash: None,
        };
        assert!(diff(&d, &remote).is_empty());
        d.max_open_connections = Some(8);
        d.schema = Some("tokens".into());
        assert_eq!(diff(&d, &remote), vec!["schema", "maxOpenConnections"]);
    }
}
