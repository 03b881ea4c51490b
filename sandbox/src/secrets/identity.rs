//! A minimal identity store: entities with aliases, created by logins (one entity per auth
//! mount and user name) or through `identity/entity`, as the real service does. They carry
//! the TOTP secrets of the MFA methods.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::fields;
use super::http::{ApiError, Resp};
use super::route::Route;
use super::{now, Ctx, Store};

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Entity {
    pub id: String,
    pub name: String,
    pub aliases: Vec<Alias>,
    pub policies: Vec<String>,
    pub metadata: BTreeMap<String, String>,
    pub creation_time: i64,
    /// MFA method id -> TOTP secret (base32) stored on the entity.
    #[serde(default)]
    pub totp_secrets: BTreeMap<String, String>,
    /// Time of the last write (0 for entities saved before this field existed).
    #[serde(default)]
    pub last_update_time: i64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Alias {
    pub id: String,
    pub mount_accessor: String,
    pub name: String,
}

pub fn routes() -> Vec<Route> {
    let mut r = vec![
        Route::new("entity")
            .write(create_entity)
            .doc("Create an entity.", ""),
        Route::new("entity/id")
            .list(list_ids)
            .doc("List entity ids.", ""),
        Route::new("entity/id/:id")
            .read(read_by_id)
            .write(update_by_id)
            .delete(delete_by_id)
            .doc("Manage an entity by id.", ""),
        Route::new("entity/name")
            .list(list_names)
            .doc("List entity names.", ""),
        // hvac's `create_or_update_entity_by_name` / `delete_entity_by_name` use these.
        Route::new("entity/name/:name")
            .read(read_by_name)
            .write(write_by_name)
            .delete(delete_by_name)
            .doc("Manage an entity by name.", ""),
        Route::new("lookup/entity")
            .write(lookup_entity)
            .doc("Look up an entity by id or name.", ""),
    ];
    r.extend(crate::secrets::totp::routes());
    r
}

/// The entity of an alias, created on first login.
pub fn entity_for_alias(store: &mut Store, mount_accessor: &str, name: &str) -> String {
    if let Some(e) = store.entities.values().find(|e| {
        e.aliases
            .iter()
            .any(|a| a.mount_accessor == mount_accessor && a.name == name)
    }) {
        return e.id.clone();
    }
    let id = uuid::Uuid::new_v4().to_string();
    let e = Entity {
        id: id.clone(),
        name: format!("entity_{}", &id[..8]),
        aliases: vec![Alias {
            id: uuid::Uuid::new_v4().to_string(),
            mount_accessor: mount_accessor.into(),
            name: name.into(),
        }],
        creation_time: now(),
        ..Default::default()
    };
    store.entities.insert(id.clone(), e);
    id
}

fn ts(t: i64) -> String {
    chrono::DateTime::from_timestamp(t, 0)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}

/// An entity as OpenBao 2.7 reads it: with its group IDs (direct, inherited, all), merged
/// entity IDs (null when none) and `last_update_time`.
fn entity_json(e: &Entity) -> Value {
    let updated = if e.last_update_time > 0 {
        e.last_update_time
    } else {
        e.creation_time
    };
    json!({
        "direct_group_ids": [],
        "group_ids": [],
        "inherited_group_ids": [],
        "merged_entity_ids": Value::Null,
        "last_update_time": ts(updated),
        "id": e.id,
        "name": e.name,
        "aliases": e.aliases.iter().map(|a| json!({"id": a.id, "mount_accessor": a.mount_accessor, "name": a.name, "canonical_id": e.id})).collect::<Vec<_>>(),
        "policies": e.policies,
        "metadata": if e.metadata.is_empty() { Value::Null } else { json!(e.metadata) },
        "disabled": false,
        "namespace_id": "root",
        "creation_time": ts(e.creation_time),
    })
}

fn apply(e: &mut Entity, d: &fields::Data) -> Result<(), ApiError> {
    e.last_update_time = now();
    if let Some(p) = fields::comma_list(d, "policies")? {
        e.policies = fields::policy_list(p);
    }
    if let Some(Value::Object(m)) = d.get("metadata") {
        e.metadata = m
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
            .collect();
    }
    Ok(())
}

fn create_entity(c: &mut Ctx) -> Result<Resp, ApiError> {
    let d = c.data.clone();
    let name = fields::string_or(&d, "name", "")?;
    let id_given = fields::string_or(&d, "id", "")?;
    let store = c.store();
    let existing = store
        .entities
        .values()
        .find(|e| {
            (!name.is_empty() && e.name == name) || (!id_given.is_empty() && e.id == id_given)
        })
        .map(|e| e.id.clone());
    if let Some(id) = existing {
        let e = store
            .entities
            .get_mut(&id)
            .ok_or_else(ApiError::not_found)?;
        apply(e, &d)?;
        return Ok(Resp::no_content());
    }
    let id = uuid::Uuid::new_v4().to_string();
    let mut e = Entity {
        id: id.clone(),
        name: if name.is_empty() {
            format!("entity_{}", &id[..8])
        } else {
            name
        },
        creation_time: now(),
        ..Default::default()
    };
    apply(&mut e, &d)?;
    let out = json!({ "id": e.id, "name": e.name, "aliases": Value::Null });
    store.entities.insert(id, e);
    Ok(Resp::data(out))
}

/// `LIST identity/entity/id` answers `keys` and `key_info` (ID -> name, and aliases when the
/// entity has any), as the real service does.
fn list_ids(c: &mut Ctx) -> Result<Resp, ApiError> {
    let entities: Vec<Entity> = c.store().entities.values().cloned().collect();
    if entities.is_empty() {
        return Err(ApiError::not_found());
    }
    let keys: Vec<&String> = entities.iter().map(|e| &e.id).collect();
    let info: serde_json::Map<String, Value> = entities
        .iter()
        .map(|e| {
            let mut v = json!({ "name": e.name });
            if !e.aliases.is_empty() {
                v["aliases"] = json!(e
                    .aliases
                    .iter()
                    .map(
                        |a| json!({"id": a.id, "mount_accessor": a.mount_accessor, "name": a.name})
                    )
                    .collect::<Vec<_>>());
            }
            (e.id.clone(), v)
        })
        .collect();
    Ok(Resp::data(json!({ "keys": keys, "key_info": info })))
}

fn list_names(c: &mut Ctx) -> Result<Resp, ApiError> {
    let mut names: Vec<String> = c
        .store()
        .entities
        .values()
        .map(|e| e.name.clone())
        .collect();
    names.sort();
    Resp::list(names)
}

fn read_by_id(c: &mut Ctx) -> Result<Resp, ApiError> {
    let id = c.param("id");
    c.store()
        .entities
        .get(&id)
        .map(|e| Resp::data(entity_json(e)))
        .ok_or_else(ApiError::not_found)
}

fn read_by_name(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    c.store()
        .entities
        .values()
        .find(|e| e.name == n)
        .map(|e| Resp::data(entity_json(e)))
        .ok_or_else(ApiError::not_found)
}

/// Creates (200 with `id` and `name`) or updates (204) the entity of that name, as the real
/// service does.
fn write_by_name(c: &mut Ctx) -> Result<Resp, ApiError> {
    let name = c.param("name");
    c.data.insert("name".into(), Value::String(name));
    c.data.remove("id");
    create_entity(c)
}

fn delete_by_name(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    c.store().entities.retain(|_, e| e.name != n);
    Ok(Resp::no_content())
}

/// `identity/lookup/entity`: by `id` or `name` (exactly one); nothing found answers 204 as in
/// the real service.
fn lookup_entity(c: &mut Ctx) -> Result<Resp, ApiError> {
    let id = fields::string_or(&c.data, "id", "")?;
    let name = fields::string_or(&c.data, "name", "")?;
    let found = match (id.is_empty(), name.is_empty()) {
        (false, true) => c.store().entities.get(&id).cloned(),
        (true, false) => c
            .store()
            .entities
            .values()
            .find(|e| e.name == name)
            .cloned(),
        (true, true) => return Err(ApiError::bad_request("missing type of lookup")),
        (false, false) => {
            return Err(ApiError::bad_request(
                "only one of 'id' or 'name' can be given",
            ))
        }
    };
    Ok(found
        .map(|e| Resp::data(entity_json(&e)))
        .unwrap_or_else(Resp::no_content))
}

fn update_by_id(c: &mut Ctx) -> Result<Resp, ApiError> {
    let id = c.param("id");
    let d = c.data.clone();
    let e = c
        .store()
        .entities
        .get_mut(&id)
        .ok_or_else(ApiError::not_found)?;
    apply(e, &d)?;
    Ok(Resp::no_content())
}

fn delete_by_id(c: &mut Ctx) -> Result<Resp, ApiError> {
    let id = c.param("id");
    c.store().entities.remove(&id);
    Ok(Resp::no_content())
}
