//! DR replication across the sandbox's secrets clusters (`sys/replication/dr/...`, spec A §2.8,
//! §2.9, §3, §4.6).
//!
//! Every cluster of one sandbox (`--secrets-clusters N`) lives in the same [`World`], so
//! "replication" is a copy of the primary's storage to its connected secondaries after every
//! write (the primary's `last_wal` advances with each write; a secondary's `last_remote_wal`
//! follows). `merkle_root` is a SHA-1 over a canonical form of the replicated storage, so a
//! synced secondary reports the primary's root.
//!
//! Behaviour where the spec is silent, following the real service:
//! * a DR secondary answers every path except the DR status and the `secondary/` endpoints with
//!   `400 {"errors": ["path disabled in replication DR secondary mode"]}`; on a secondary those
//!   endpoints authorize with `dr_operation_token` (or, for the generation attempt and the
//!   public key, need nothing), not with a token header;
//! * transitions answer 200 with a warning, like the real service; refused transitions 400;
//! * the activation token is a wrapping token in `wrap_info` (a JWT-shaped string), valid for
//!   `ttl` (default `30m`) and usable once; with `secondary_public_key` the token is returned in
//!   `data.token` instead (the sandbox does not encrypt it; the secondary accepts it as is);
//! * operation-token generation uses the sandbox's unseal key shares (5 shares, threshold 3),
//!   read through `GET /_sandbox/secrets/keys`; shares are hex or base64; as with the real
//!   Shamir combination, a wrong share is only detected at the threshold (400 `root generation
//!   aborted: ...`, progress reset), a repeated one answers 400 at once; a caller-given `otp`
//!   must be 28 characters and is not echoed; the encoded token is `base64(token XOR otp)` (unpadded, as the real
//!   service), or, with `pgp_key`, the token encrypted to that OpenPGP key (base64 of the binary
//!   message) with `pgp_fingerprint` set;
//! * licence: without an enterprise licence (edition `community`) none of these paths exist
//!   (404 `unsupported path`, as on the community edition of the real service);
//! * every path but `status` is restricted to the root namespace.
//!
//! Sandbox admin API: `GET /_sandbox/secrets/keys` (key shares), `POST
//! /_sandbox/secrets/dr/corrupt` (marks this cluster's Merkle tree corrupted, for merkle-check
//! and reindex tests).

use std::collections::BTreeMap;

use base64::Engine;
use rand::distr::Alphanumeric;
use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha1::Digest;

use super::fields;
use super::http::{ApiError, Resp};
use super::route::{Licence, Route};
use super::{now, Ctx, Store, World};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    #[default]
    Disabled,
    Primary,
    Secondary,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SecondaryInfo {
    pub id: String,
    pub cluster: usize,
    pub connected: bool,
    pub last_heartbeat: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Activation {
    pub id: String,
    pub expires: i64,
    pub used: bool,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Attempt {
    pub nonce: String,
    pub otp: Option<String>,
    pub pgp_key: Option<Vec<u8>>,
    pub pgp_fingerprint: String,
    pub provided: Vec<String>,
}

/// DR state of one cluster (not replicated).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DrState {
    pub mode: Mode,
    pub cluster_id: String,
    pub last_wal: u64,
    pub primary_cluster_addr: String,
    pub secondaries: BTreeMap<String, SecondaryInfo>,
    pub activation: BTreeMap<String, Activation>,
    /// Secondary: index of the primary cluster it streams from.
    pub primary: Option<usize>,
    pub primary_api_addr: String,
    pub known_primary_cluster_addrs: Vec<String>,
    pub secondary_id: String,
    pub last_remote_wal: u64,
    /// Set when a primary was demoted (no primary until update-primary with a token).
    pub demoted: bool,
    pub attempt: Option<Attempt>,
    pub op_tokens: Vec<String>,
    pub corrupted: bool,
    pub last_corruption_check: Option<i64>,
    pub public_key: String,
}

pub const SHARES: usize = 5;
pub const THRESHOLD: usize = 3;
const OTP_LEN: usize = 28;

pub fn new_key_shares() -> Vec<String> {
    (0..SHARES)
        .map(|_| hex(&rand::rng().random::<[u8; 32]>()))
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn random(n: usize) -> String {
    rand::rng()
        .sample_iter(&Alphanumeric)
        .take(n)
        .map(char::from)
        .collect()
}

pub fn routes() -> Vec<Route> {
    let e = Licence::Enterprise;
    let sec = |r: Route| r.licence(e).root_ns().dr_secondary().unauth();
    let pri = |r: Route| r.licence(e).root_ns();
    vec![
        Route::new("replication/dr/status")
            .read(status)
            .unauth()
            .dr_secondary()
            .licence(e)
            .doc("DR replication status.", "Mode, cluster id, WAL positions, Merkle root and peers of this cluster."),
        Route::new("replication/status")
            .read(overall_status)
            .unauth()
            .dr_secondary()
            .licence(e)
            .doc("Replication status.", "DR and performance replication status of this cluster (performance replication is not emulated)."),
        pri(Route::new("replication/dr/primary/enable").write(primary_enable)
            .doc("Enable DR replication as primary.", "Turns a cluster that is not a secondary into a DR primary.")),
        pri(Route::new("replication/dr/primary/demote").write(primary_demote)
            .doc("Demote a DR primary to a secondary.", "Keeps the cluster ID and data; it connects to no primary until update-primary.")),
        pri(Route::new("replication/dr/primary/disable").write(primary_disable)
            .doc("Disable DR replication on the primary.", "Secondaries can no longer connect; re-enabling changes the cluster ID.")),
        pri(Route::new("replication/dr/primary/secondary-token").write(secondary_token).sudo()
            .doc("Generate a secondary activation token.", "Returns a response-wrapped activation token for the secondary with the given id.")),
        pri(Route::new("replication/dr/primary/revoke-secondary").write(revoke_secondary)
            .doc("Revoke a secondary.", "Disconnects the secondary; it needs a new activation token to reconnect.")),
        sec(Route::new("replication/dr/secondary/generate-public-key").write(generate_public_key)
            .doc("Generate a public key for encrypting the activation token.", "")),
        pri(Route::new("replication/dr/secondary/enable").write(secondary_enable)
            .doc("Enable DR replication as secondary.", "Clears all data of this cluster and starts streaming from the primary of the activation token.")),
        sec(Route::new("replication/dr/secondary/promote").write(promote)
            .doc("Promote a DR secondary to primary.", "Needs a DR operation token; refused while the primary is active unless force.")),
        sec(Route::new("replication/dr/secondary/disable").write(secondary_disable)
            .doc("Disable DR replication on a secondary.", "Needs a DR operation token.")),
        sec(Route::new("replication/dr/secondary/update-primary").write(update_primary)
            .doc("Point a DR secondary at a new primary.", "Needs a DR operation token and either token or update_primary_addrs.")),
        sec(Route::new("replication/dr/secondary/generate-operation-token/attempt")
            .read(attempt_read)
            .write(attempt_start)
            .delete(attempt_cancel)
            .doc("Manage the DR operation token generation attempt.", "One attempt at a time; returns a nonce and an OTP or PGP fingerprint.")),
        sec(Route::new("replication/dr/secondary/generate-operation-token/update").write(attempt_update)
            .doc("Provide a key share to the DR operation token generation.", "Returns the encoded token once enough shares are given.")),
        sec(Route::new("replication/dr/secondary/operation-token/delete").write(op_token_delete)
            .doc("Revoke a DR operation token.", "")),
        sec(Route::new("replication/dr/secondary/reindex").write(reindex)
            .doc("Reindex the local storage.", "Rebuilds the Merkle index; diff checks key by key, force scans only stored data.")),
        sec(Route::new("replication/dr/secondary/merkle-check").write(merkle_check)
            .doc("Check the Merkle tree for corruption.", "Returns data.merkle_corruption_report.")),
    ]
}

fn me<'a>(c: &'a mut Ctx) -> &'a mut DrState {
    &mut c.world.clusters[c.cluster].dr
}

fn addr_of(world: &World, i: usize) -> (String, String) {
    let host = &world.clusters[i].host;
    (format!("http://{host}"), format!("https://{host}"))
}

/// SHA-1 over a canonical (key-sorted) JSON form of the replicated storage.
pub fn merkle_root(store: &Store) -> String {
    fn canon(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for k in keys {
                    out.push_str(&serde_json::to_string(k).unwrap_or_default());
                    out.push(':');
                    canon(&m[k], out);
                    out.push(',');
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for x in a {
                    canon(x, out);
                    out.push(',');
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let v = serde_json::to_value(store).unwrap_or(Value::Null);
    let mut s = String::new();
    canon(&v, &mut s);
    hex(&sha1::Sha1::digest(s.as_bytes()))
}

/// Called after every successful write on a cluster: a primary advances its WAL and streams
/// its storage to its connected secondaries.
pub fn after_write(world: &mut World, cluster: usize) {
    if world.clusters[cluster].dr.mode != Mode::Primary {
        return;
    }
    world.clusters[cluster].dr.last_wal += 1;
    sync_secondaries(world, cluster);
}

fn sync_secondaries(world: &mut World, primary: usize) {
    let wal = world.clusters[primary].dr.last_wal;
    let store = world.clusters[primary].store.clone();
    let n = now();
    let targets: Vec<usize> = world.clusters[primary]
        .dr
        .secondaries
        .values()
        .filter(|s| s.connected)
        .map(|s| s.cluster)
        .collect();
    for j in targets {
        let d = &world.clusters[j].dr;
        if d.mode == Mode::Secondary && d.primary == Some(primary) {
            world.clusters[j].store = store.clone();
            world.clusters[j].dr.last_remote_wal = wal;
        }
    }
    for s in world.clusters[primary].dr.secondaries.values_mut() {
        if s.connected {
            s.last_heartbeat = n;
        }
    }
}

fn rfc3339(t: i64) -> String {
    chrono::DateTime::from_timestamp(t, 0)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn status(c: &mut Ctx) -> Result<Resp, ApiError> {
    let i = c.cluster;
    let d = c.world.clusters[i].dr.clone();
    let root = merkle_root(&c.world.clusters[i].store);
    let epoch = d
        .last_corruption_check
        .map(|t| t.to_string())
        .unwrap_or_else(|| "-62135596800".into());
    match d.mode {
        Mode::Disabled => Ok(Resp::data(json!({ "mode": "disabled" }))),
        Mode::Primary => {
            let secs: Vec<Value> = d
                .secondaries
                .values()
                .map(|s| {
                    let (api, cl) = addr_of(c.world, s.cluster);
                    let still = s.connected
                        && c.world.clusters[s.cluster].dr.mode == Mode::Secondary
                        && c.world.clusters[s.cluster].dr.primary == Some(i);
                    json!({
                        "api_address": api,
                        "cluster_address": cl,
                        "connection_status": if still { "connected" } else { "disconnected" },
                        "last_heartbeat": rfc3339(s.last_heartbeat),
                        "node_id": s.id,
                    })
                })
                .collect();
            Ok(Resp::data(json!({
                "cluster_id": d.cluster_id,
                "known_secondaries": d.secondaries.keys().collect::<Vec<_>>(),
                "corrupted_merkle_tree": d.corrupted,
                "last_corruption_check_epoch": epoch,
                "last_wal": d.last_wal,
                "last_reindex_epoch": "0",
                "merkle_root": root,
                "mode": "primary",
                "primary_cluster_addr": d.primary_cluster_addr,
                "secondaries": secs,
                "state": "running",
            })))
        }
        Mode::Secondary => {
            let connected = d.primary.is_some_and(|p| {
                let pd = &c.world.clusters[p].dr;
                pd.mode == Mode::Primary
                    && pd
                        .secondaries
                        .get(&d.secondary_id)
                        .is_some_and(|s| s.connected && s.cluster == i)
            });
            let primaries: Vec<Value> = d
                .primary
                .map(|p| {
                    let (api, cl) = addr_of(c.world, p);
                    let hb = c.world.clusters[p]
                        .dr
                        .secondaries
                        .get(&d.secondary_id)
                        .map(|s| s.last_heartbeat)
                        .unwrap_or(0);
                    vec![json!({
                        "api_address": api,
                        "cluster_address": cl,
                        "connection_status": if connected { "connected" } else { "disconnected" },
                        "last_heartbeat": rfc3339(hb),
                    })]
                })
                .unwrap_or_default();
            Ok(Resp::data(json!({
                "cluster_id": d.cluster_id,
                "known_primary_cluster_addrs": d.known_primary_cluster_addrs,
                "last_remote_wal": d.last_remote_wal,
                "last_reindex_epoch": "0",
                "corrupted_merkle_tree": d.corrupted,
                "last_corruption_check_epoch": epoch,
                "merkle_root": root,
                "mode": "secondary",
                "primaries": primaries,
                "primary_cluster_addr": d.primary.map(|p| addr_of(c.world, p).1).unwrap_or_default(),
                "secondary_id": d.secondary_id,
                "state": if connected { "stream-wals" } else { "idle" },
            })))
        }
    }
}

/// `sys/replication/status`: the DR status with performance replication disabled.
fn overall_status(c: &mut Ctx) -> Result<Resp, ApiError> {
    let dr = status(c)?.data.unwrap_or(Value::Null);
    Ok(Resp::data(
        json!({ "dr": dr, "performance": { "mode": "disabled" } }),
    ))
}

fn warn(msg: &str) -> Resp {
    Resp::no_content().warn(msg)
}

fn primary_enable(c: &mut Ctx) -> Result<Resp, ApiError> {
    let addr = fields::string_or(&c.data, "primary_cluster_addr", "")?;
    let d = me(c);
    match d.mode {
        Mode::Secondary => {
            return Err(ApiError::bad_request(
                "cannot enable DR primary: this cluster is a DR secondary",
            ))
        }
        Mode::Primary => {
            return Err(ApiError::bad_request(
                "DR replication is already enabled as primary",
            ))
        }
        Mode::Disabled => {}
    }
    d.mode = Mode::Primary;
    if d.cluster_id.is_empty() {
        d.cluster_id = uuid::Uuid::new_v4().to_string();
    }
    d.primary_cluster_addr = addr;
    d.secondaries.clear();
    d.activation.clear();
    d.demoted = false;
    Ok(warn("This cluster is being enabled as a primary for replication. Vault will be unavailable for a brief period and will resume service shortly."))
}

fn require_primary(c: &mut Ctx) -> Result<(), ApiError> {
    if me(c).mode != Mode::Primary {
        return Err(ApiError::bad_request("this cluster is not a DR primary"));
    }
    Ok(())
}

fn primary_demote(c: &mut Ctx) -> Result<Resp, ApiError> {
    require_primary(c)?;
    let d = me(c);
    d.mode = Mode::Secondary;
    d.demoted = true;
    d.primary = None;
    d.known_primary_cluster_addrs.clear();
    d.secondaries.clear();
    d.activation.clear();
    Ok(warn("This cluster is being demoted to a replication secondary. Vault will be unavailable for a brief period and will resume service shortly."))
}

fn primary_disable(c: &mut Ctx) -> Result<Resp, ApiError> {
    require_primary(c)?;
    let d = me(c);
    d.mode = Mode::Disabled;
    // Re-enabling later gets a new cluster ID.
    d.cluster_id.clear();
    d.secondaries.clear();
    d.activation.clear();
    d.primary_cluster_addr.clear();
    Ok(warn("This cluster is having replication disabled. Vault will be unavailable for a brief period and will resume service shortly."))
}

/// An activation token: JWT-shaped and opaque to clients.
fn activation_token(cluster: usize, id: &str, exp: i64) -> String {
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    format!(
        "{}.{}.{}",
        b64(&json!({"alg": "ES512", "typ": "wrapping"})),
        b64(
            &json!({"accessor": "", "addr": format!("cluster-{cluster}"), "exp": exp, "id": id, "jti": random(16), "type": "dr"})
        ),
        random(86)
    )
}

fn secondary_token(c: &mut Ctx) -> Result<Resp, ApiError> {
    require_primary(c)?;
    let id = fields::string_or(&c.data, "id", "")?;
    if id.is_empty() {
        return Err(ApiError::bad_request("missing id"));
    }
    let ttl_s = fields::string_or(&c.data, "ttl", "30m")?;
    let ttl = fields::parse_duration(&ttl_s)
        .map_err(|e| ApiError::bad_request(format!("invalid ttl: {e}")))?;
    if ttl <= 0 {
        return Err(ApiError::bad_request("ttl must be positive"));
    }
    let public_key = fields::string_or(&c.data, "secondary_public_key", "")?;
    let cluster = c.cluster;
    let n = now();
    let d = me(c);
    d.activation.retain(|_, a| !a.used && a.expires > n);
    if d.secondaries.contains_key(&id) || d.activation.values().any(|a| a.id == id) {
        return Err(ApiError::bad_request(format!(
            "a secondary with the id {id:?} already exists"
        )));
    }
    let tok = activation_token(cluster, &id, n + ttl);
    d.activation.insert(
        tok.clone(),
        Activation {
            id,
            expires: n + ttl,
            used: false,
        },
    );
    if !public_key.is_empty() {
        return Ok(Resp::data(json!({ "token": tok })));
    }
    Ok(Resp {
        wrap_info: Some(json!({
            "token": tok,
            "accessor": "",
            "ttl": ttl,
            "creation_time": chrono::Utc::now().to_rfc3339(),
            "creation_path": "sys/replication/dr/primary/secondary-token",
            "wrapped_accessor": "",
        })),
        ..Resp::default()
    })
}

fn revoke_secondary(c: &mut Ctx) -> Result<Resp, ApiError> {
    require_primary(c)?;
    let id = fields::string_or(&c.data, "id", "")?;
    if id.is_empty() {
        return Err(ApiError::bad_request("missing id"));
    }
    let d = me(c);
    if let Some(s) = d.secondaries.remove(&id) {
        let sd = &mut c.world.clusters[s.cluster].dr;
        if sd.primary == Some(c.cluster) && sd.secondary_id == id {
            sd.primary = None;
        }
    }
    d_cleanup(c, &id);
    Ok(Resp::no_content())
}

fn d_cleanup(c: &mut Ctx, id: &str) {
    me(c).activation.retain(|_, a| a.id != id);
}

fn generate_public_key(c: &mut Ctx) -> Result<Resp, ApiError> {
    let key = base64::engine::general_purpose::STANDARD.encode(rand::rng().random::<[u8; 32]>());
    me(c).public_key = key.clone();
    Ok(Resp::data(json!({ "secondary_public_key": key })))
}

/// Finds the primary that issued an activation token; marks it used.
fn redeem(world: &mut World, token: &str) -> Result<(usize, String), ApiError> {
    let token = token.trim();
    // A token returned in data.token (public-key mode) may come base64-encoded by clients.
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(token)
        .ok()
        .and_then(|b| String::from_utf8(b).ok());
    let n = now();
    for (i, cl) in world.clusters.iter_mut().enumerate() {
        if cl.dr.mode != Mode::Primary {
            continue;
        }
        let key = if cl.dr.activation.contains_key(token) {
            token.to_string()
        } else if let Some(d) = decoded
            .as_ref()
            .filter(|d| cl.dr.activation.contains_key(d.as_str()))
        {
            d.clone()
        } else {
            continue;
        };
        let a = cl
            .dr
            .activation
            .get_mut(&key)
            .ok_or_else(|| ApiError::bad_request("invalid activation token"))?;
        if a.used {
            return Err(ApiError::bad_request(
                "activation token has already been used",
            ));
        }
        if a.expires <= n {
            return Err(ApiError::bad_request("activation token has expired"));
        }
        a.used = true;
        return Ok((i, a.id.clone()));
    }
    Err(ApiError::bad_request("invalid activation token"))
}

/// Connects cluster `me_idx` as secondary `id` of `primary` and streams the primary's data.
fn connect(world: &mut World, me_idx: usize, primary: usize, id: &str) {
    let n = now();
    world.clusters[primary].dr.secondaries.insert(
        id.to_string(),
        SecondaryInfo {
            id: id.to_string(),
            cluster: me_idx,
            connected: true,
            last_heartbeat: n,
        },
    );
    let (_, cl_addr) = addr_of(world, primary);
    let pid = world.clusters[primary].dr.cluster_id.clone();
    let d = &mut world.clusters[me_idx].dr;
    d.mode = Mode::Secondary;
    d.primary = Some(primary);
    d.secondary_id = id.to_string();
    d.cluster_id = pid;
    d.demoted = false;
    d.known_primary_cluster_addrs = vec![cl_addr];
    world.clusters[me_idx].store = world.clusters[primary].store.clone();
    world.clusters[me_idx].dr.last_remote_wal = world.clusters[primary].dr.last_wal;
}

fn secondary_enable(c: &mut Ctx) -> Result<Resp, ApiError> {
    let token = fields::string_or(&c.data, "token", "")?;
    if token.is_empty() {
        return Err(ApiError::bad_request("missing token"));
    }
    let api = fields::string_or(&c.data, "primary_api_addr", "")?;
    match me(c).mode {
        Mode::Primary => return Err(ApiError::bad_request(
            "cannot enable DR secondary: this cluster is a DR primary; demote or disable it first",
        )),
        Mode::Secondary => {
            return Err(ApiError::bad_request(
                "this cluster is already a DR secondary",
            ))
        }
        Mode::Disabled => {}
    }
    let (p, id) = redeem(c.world, &token)?;
    if p == c.cluster {
        return Err(ApiError::bad_request(
            "a cluster cannot be its own secondary",
        ));
    }
    connect(c.world, c.cluster, p, &id);
    me(c).primary_api_addr = api;
    Ok(warn("Vault has successfully found secondary information; it may take a while to perform setup tasks. Vault will be unavailable until these tasks and initial sync complete."))
}

fn require_secondary(c: &mut Ctx) -> Result<(), ApiError> {
    if me(c).mode != Mode::Secondary {
        return Err(ApiError::bad_request("this cluster is not a DR secondary"));
    }
    Ok(())
}

fn check_op_token(c: &mut Ctx) -> Result<(), ApiError> {
    require_secondary(c)?;
    let t = fields::string_or(&c.data, "dr_operation_token", "")?;
    if t.is_empty() {
        return Err(ApiError::bad_request("missing dr_operation_token"));
    }
    if !me(c).op_tokens.contains(&t) {
        return Err(ApiError::bad_request("invalid DR operation token"));
    }
    Ok(())
}

fn promote(c: &mut Ctx) -> Result<Resp, ApiError> {
    check_op_token(c)?;
    let force = fields::bool_or(&c.data, "force", false)?;
    let addr = fields::string_or(&c.data, "primary_cluster_addr", "")?;
    let i = c.cluster;
    let d = me(c).clone();
    if let Some(p) = d.primary {
        let still_primary = c.world.clusters[p].dr.mode == Mode::Primary;
        if still_primary && !force {
            return Err(ApiError::bad_request(
                "the primary cluster is still active; demote it first or set force to promote anyway (only one primary should exist)",
            ));
        }
        if let Some(s) = c.world.clusters[p].dr.secondaries.get_mut(&d.secondary_id) {
            if s.cluster == i {
                s.connected = false;
            }
        }
    }
    let me = me(c);
    me.mode = Mode::Primary;
    me.primary = None;
    me.primary_cluster_addr = addr;
    me.secondaries.clear();
    me.activation.clear();
    me.known_primary_cluster_addrs.clear();
    me.secondary_id.clear();
    me.demoted = false;
    me.last_wal = me.last_wal.max(d.last_remote_wal);
    let mut r =
        Resp::data(json!({ "complete": true, "progress": THRESHOLD, "required": THRESHOLD }));
    r = r.warn("This cluster is being promoted to a replication primary. Vault will be unavailable for a brief period and will resume service shortly.");
    Ok(r)
}

fn secondary_disable(c: &mut Ctx) -> Result<Resp, ApiError> {
    check_op_token(c)?;
    let i = c.cluster;
    let d = me(c).clone();
    if let Some(p) = d.primary {
        if let Some(s) = c.world.clusters[p].dr.secondaries.get_mut(&d.secondary_id) {
            if s.cluster == i {
                s.connected = false;
            }
        }
    }
    let me = me(c);
    *me = DrState {
        last_wal: me.last_wal,
        ..DrState::default()
    };
    Ok(warn("This cluster is having replication disabled. Vault will be unavailable for a brief period and will resume service shortly."))
}

fn update_primary(c: &mut Ctx) -> Result<Resp, ApiError> {
    check_op_token(c)?;
    let token = fields::string(&c.data, "token")?.unwrap_or_default();
    let addrs = fields::string_list(&c.data, "update_primary_addrs")?.unwrap_or_default();
    if !token.is_empty() && !addrs.is_empty() {
        return Err(ApiError::bad_request(
            "only one of token or update_primary_addrs may be specified",
        ));
    }
    let i = c.cluster;
    let old = me(c).clone();
    let detach = |world: &mut World| {
        if let Some(p) = old.primary {
            if let Some(s) = world.clusters[p].dr.secondaries.get_mut(&old.secondary_id) {
                if s.cluster == i {
                    s.connected = false;
                }
            }
        }
    };
    if !addrs.is_empty() {
        if old.demoted {
            return Err(ApiError::bad_request(
                "update_primary_addrs cannot be used on a newly demoted secondary after a DR failover; use token",
            ));
        }
        // Ping the addresses one at a time; the first DR primary of this replication set wins.
        for a in &addrs {
            let host = a
                .trim_start_matches("https://")
                .trim_start_matches("http://")
                .trim_end_matches('/');
            let found = (0..c.world.clusters.len()).find(|&j| {
                j != i
                    && c.world.clusters[j].host == host
                    && c.world.clusters[j].dr.mode == Mode::Primary
                    && c.world.clusters[j].dr.cluster_id == old.cluster_id
            });
            if let Some(p) = found {
                detach(c.world);
                let id = if old.secondary_id.is_empty() {
                    format!("secondary-{i}")
                } else {
                    old.secondary_id.clone()
                };
                connect(c.world, i, p, &id);
                return Ok(Resp::no_content());
            }
        }
        return Err(ApiError::bad_request(
            "unable to reach a primary at any of the given update_primary_addrs",
        ));
    }
    if token.is_empty() {
        // A blank token keeps the cluster a secondary and forgets any past primary.
        detach(c.world);
        let me = me(c);
        me.primary = None;
        me.known_primary_cluster_addrs.clear();
        me.primary_api_addr.clear();
        return Ok(Resp::no_content());
    }
    let (p, id) = redeem(c.world, &token)?;
    if p == i {
        return Err(ApiError::bad_request(
            "a cluster cannot be its own secondary",
        ));
    }
    detach(c.world);
    // Data is not wiped: the cluster keeps its storage and resumes streaming from the primary.
    connect(c.world, i, p, &id);
    let api = fields::string_or(&c.data, "primary_api_addr", "")?;
    me(c).primary_api_addr = api;
    Ok(Resp::no_content())
}

fn attempt_json(a: Option<&Attempt>, include_otp: bool, encoded: &str) -> Value {
    match a {
        None => json!({
            "started": false, "nonce": "", "progress": 0, "required": THRESHOLD, "complete": !encoded.is_empty(),
            "encoded_token": encoded, "encoded_root_token": encoded, "pgp_fingerprint": "", "otp": "", "otp_length": OTP_LEN,
        }),
        Some(a) => json!({
            "started": true,
            "nonce": a.nonce,
            "progress": a.provided.len(),
            "required": THRESHOLD,
            "complete": false,
            "encoded_token": "",
            "encoded_root_token": "",
            "pgp_fingerprint": a.pgp_fingerprint,
            "otp": if include_otp { a.otp.clone().unwrap_or_default() } else { String::new() },
            "otp_length": OTP_LEN,
        }),
    }
}

fn attempt_read(c: &mut Ctx) -> Result<Resp, ApiError> {
    require_secondary(c)?;
    let a = me(c).attempt.clone();
    Ok(Resp::data(attempt_json(a.as_ref(), false, "")))
}

fn attempt_start(c: &mut Ctx) -> Result<Resp, ApiError> {
    require_secondary(c)?;
    if me(c).attempt.is_some() {
        return Err(ApiError::bad_request("root generation already in progress"));
    }
    let pgp = fields::string_or(&c.data, "pgp_key", "")?;
    let given_otp = fields::string_or(&c.data, "otp", "")?;
    let mut a = Attempt {
        nonce: uuid::Uuid::new_v4().to_string(),
        ..Default::default()
    };
    // The OTP is returned only when the service generated it (not when the caller gave one).
    let mut shown_otp = false;
    if !pgp.is_empty() {
        let (bytes, fp) = super::pgp::parse_public_key(&pgp).map_err(ApiError::bad_request)?;
        a.pgp_key = Some(bytes);
        a.pgp_fingerprint = fp;
    } else if !given_otp.is_empty() {
        if given_otp.len() != OTP_LEN {
            return Err(ApiError::bad_request("OTP string is wrong length"));
        }
        a.otp = Some(given_otp);
    } else {
        a.otp = Some(random(OTP_LEN));
        shown_otp = true;
    }
    let out = attempt_json(Some(&a), shown_otp, "");
    me(c).attempt = Some(a);
    Ok(Resp::data(out))
}

fn attempt_cancel(c: &mut Ctx) -> Result<Resp, ApiError> {
    require_secondary(c)?;
    me(c).attempt = None;
    Ok(Resp::no_content())
}

/// Decodes a key share given as hex or base64, as the real service does.
fn decode_share(k: &str) -> Option<Vec<u8>> {
    let k = k.trim();
    let ok_len = |b: &Vec<u8>| (16..=33).contains(&b.len());
    if k.len().is_multiple_of(2) && k.chars().all(|c| c.is_ascii_hexdigit()) {
        let bytes: Vec<u8> = (0..k.len() / 2)
            .filter_map(|i| u8::from_str_radix(&k[2 * i..2 * i + 2], 16).ok())
            .collect();
        if ok_len(&bytes) {
            return Some(bytes);
        }
    }
    base64::engine::general_purpose::STANDARD.decode(k).ok()
}

/// Takes one key share. Shares are only checked once the threshold is reached, as with the
/// real service's Shamir combination: a wrong share then aborts and resets the progress.
fn attempt_update(c: &mut Ctx) -> Result<Resp, ApiError> {
    require_secondary(c)?;
    let key = fields::string_or(&c.data, "key", "")?;
    let nonce = fields::string_or(&c.data, "nonce", "")?;
    if key.is_empty() {
        return Err(ApiError::bad_request(
            "'key' must be specified in request body as JSON",
        ));
    }
    let Some(share) = decode_share(&key) else {
        return Err(ApiError::bad_request(
            "'key' must be a valid hex or base64 string",
        ));
    };
    if !(16..=33).contains(&share.len()) {
        return Err(ApiError::bad_request(format!(
            "key is {} than {} 32 bytes",
            if share.len() < 16 {
                "shorter"
            } else {
                "longer"
            },
            if share.len() < 16 {
                "minimum"
            } else {
                "maximum"
            }
        )));
    }
    let share = hex(&share);
    let shares = c.world.key_shares.clone();
    let Some(mut a) = me(c).attempt.clone() else {
        return Err(ApiError::bad_request("no root generation in progress"));
    };
    if a.nonce != nonce {
        return Err(ApiError::bad_request(format!(
            "incorrect nonce supplied; nonce for this root generation operation is {:?}",
            a.nonce
        )));
    }
    if a.provided.contains(&share) {
        return Err(ApiError::bad_request(
            "given key has already been provided during this generation operation",
        ));
    }
    a.provided.push(share);
    if a.provided.len() < THRESHOLD {
        let out = attempt_json(Some(&a), false, "");
        me(c).attempt = Some(a);
        return Ok(Resp::data(out));
    }
    if a.provided.iter().any(|p| !shares.contains(p)) {
        a.provided.clear();
        me(c).attempt = Some(a);
        return Err(ApiError::bad_request("root generation aborted: root key verification failed: cipher: message authentication failed"));
    }
    // Complete: mint the operation token and encode it.
    let token = format!("hvs.{}", random(OTP_LEN - 4));
    let encoded = match (&a.otp, &a.pgp_key) {
        (Some(otp), _) => {
            let x: Vec<u8> = token.bytes().zip(otp.bytes()).map(|(t, o)| t ^ o).collect();
            base64::engine::general_purpose::STANDARD_NO_PAD.encode(x)
        }
        (None, Some(k)) => {
            super::pgp::encrypt_to(k, token.as_bytes()).map_err(ApiError::internal)?
        }
        (None, None) => return Err(ApiError::internal("attempt has neither OTP nor PGP key")),
    };
    let d = me(c);
    d.op_tokens.push(token);
    d.attempt = None;
    let mut out = attempt_json(None, false, &encoded);
    out["started"] = json!(true);
    out["nonce"] = json!(a.nonce);
    out["progress"] = json!(THRESHOLD);
    out["complete"] = json!(true);
    out["pgp_fingerprint"] = json!(a.pgp_fingerprint);
    // Only root-token generation fills encoded_root_token.
    out["encoded_root_token"] = json!("");
    Ok(Resp::data(out))
}

fn op_token_delete(c: &mut Ctx) -> Result<Resp, ApiError> {
    check_op_token(c)?;
    let t = fields::string_or(&c.data, "dr_operation_token", "")?;
    me(c).op_tokens.retain(|x| *x != t);
    Ok(Resp::no_content())
}

fn reindex(c: &mut Ctx) -> Result<Resp, ApiError> {
    check_op_token(c)?;
    let diff = fields::bool_or(&c.data, "diff", false)?;
    let force = fields::bool_or(&c.data, "force", false)?;
    let skip_flush = fields::bool_or(&c.data, "skip_flush", false)?;
    me(c).corrupted = false;
    let mut r = Resp::no_content().warn("Reindex started; check the server logs for progress");
    if diff {
        r = r.warn("Reindexing with diff: every key is checked against the index (slower)");
    }
    if force {
        r = r.warn("Forced full reindex: only stored data is scanned");
    }
    if skip_flush {
        r = r.warn("The tree-flush stage is skipped");
    }
    Ok(r)
}

fn merkle_check(c: &mut Ctx) -> Result<Resp, ApiError> {
    check_op_token(c)?;
    let n = now();
    let root = merkle_root(&c.world.clusters[c.cluster].store);
    let d = me(c);
    d.last_corruption_check = Some(n);
    let tree_map = if d.corrupted {
        json!({
            "1": {
                "corrupted_index_tuples_map": {"5": {"corrupted": true, "subpages": [1, 2]}},
                "corrupted_subtree_root": true,
                "root_hash": root,
                "tree_type": "replicated",
            }
        })
    } else {
        json!({})
    };
    Ok(Resp::data(json!({
        "merkle_corruption_report": {
            "corrupted_root": d.corrupted,
            "corrupted_tree_map": tree_map,
            "last_corruption_check_epoch": rfc3339(n),
        }
    })))
}
