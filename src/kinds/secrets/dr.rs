//! DrReplication: a DR replication set converged to its declared topology, with a guarded
//! failover (spec A §2.8, §2.9, §3, §4.6). An [`Operated`] kind: each pass reads every
//! cluster's unauthenticated DR status, decides the one next step and takes it.
//!
//! Safety rules:
//! * enabling a secondary wipes it: only with `allowSecondaryWipe: true`;
//! * deleting the resource never changes the clusters;
//! * the operation-token ceremony is resumable: the one-time password is chosen by Quartet and
//!   written to a Secret owned by the resource *before* the attempt starts (so a restart after
//!   the start still knows it), the attempt's nonce and the shares fed are in status, and only
//!   one attempt exists per cluster: a stale one of ours is cancelled, a stranger's is reported
//!   and left alone;
//! * the operation tokens live only in that Secret until used, and are deleted on the clusters
//!   (`operation-token/delete`) and from the Secret when the step that needed them is done. A
//!   promoted cluster's token is only forgotten: once the cluster is a primary its `secondary/`
//!   endpoints (delete included) no longer exist, and the token authorizes nothing there.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};
use serde_json::{json, Value};

use crate::api::secrets::dr::{
    DrClusterStatus, DrPeer, DrReplication, FailoverProgress, HandledRequests,
};
use crate::api::{ConnectionRef, DeletionPolicy, Service};
use crate::clients::secrets::dr::DrClient;
use crate::clients::{ClientError, SecretString};
use crate::reconcile::driver::publish;
use crate::reconcile::owned_secret::QuartetSecret;
use crate::reconcile::{managed_fields, Context, Error, Managed, Operated, Result, Step};

/// How soon the next step of a ceremony or convergence follows.
const NEXT: Duration = Duration::from_millis(200);
/// How often a converged set is read again (status, WAL lag, heartbeats).
const WATCH: Duration = Duration::from_secs(30);
const OTP_LEN: usize = 28;

impl Managed for DrReplication {
    const SERVICE: Service = Service::Secrets;
    managed_fields!(managed_status);
    fn connection_ref(&self) -> Option<&ConnectionRef> {
        Some(&self.spec.primary.connection_ref)
    }
    /// Deleting the resource never tears replication down (`finish` only says so).
    fn deletion_policy(&self) -> DeletionPolicy {
        DeletionPolicy::Delete
    }
    fn secret_refs(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .spec
            .key_shares_secret_ref
            .iter()
            .map(|r| r.name.clone())
            .chain(self.spec.pgp_key_secret_ref.iter().map(|r| r.name.clone()))
            .chain(
                self.spec
                    .secondaries
                    .iter()
                    .filter_map(|s| s.ca_secret_ref.as_ref().map(|r| r.name.clone())),
            )
            .collect();
        names.sort();
        names.dedup();
        names
    }
    const WATCHES_SECRETS: bool = true;
}

/// One cluster of the set as observed this pass.
struct Member {
    id: String,
    client: DrClient,
    /// `None`: the cluster did not answer.
    status: Option<Value>,
}

impl Member {
    fn mode(&self) -> &str {
        self.status
            .as_ref()
            .and_then(|s| s["mode"].as_str())
            .unwrap_or("unreachable")
    }

    /// Whether this primary reports secondary `id` connected.
    fn has_connected(&self, id: &str) -> bool {
        self.status.as_ref().is_some_and(|s| {
            s["secondaries"].as_array().into_iter().flatten().any(|p| {
                p["node_id"].as_str() == Some(id)
                    && p["connection_status"].as_str() == Some("connected")
            })
        })
    }

    fn known_secondaries(&self) -> Vec<String> {
        self.status
            .as_ref()
            .map(|s| {
                s["known_secondaries"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn report(&self) -> DrClusterStatus {
        let Some(s) = &self.status else {
            return DrClusterStatus {
                mode: "unreachable".into(),
                ..Default::default()
            };
        };
        let str_of = |k: &str| s[k].as_str().filter(|v| !v.is_empty()).map(str::to_string);
        let peers_of = |key: &str| -> Vec<DrPeer> {
            s[key]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| DrPeer {
                    id: p["node_id"].as_str().map(str::to_string),
                    api_address: p["api_address"].as_str().unwrap_or_default().into(),
                    connection_status: p["connection_status"].as_str().unwrap_or_default().into(),
                    last_heartbeat: p["last_heartbeat"].as_str().map(str::to_string),
                })
                .collect()
        };
        let mut peers = peers_of("secondaries");
        peers.extend(peers_of("primaries"));
        DrClusterStatus {
            mode: s["mode"].as_str().unwrap_or_default().into(),
            cluster_id: str_of("cluster_id"),
            state: str_of("state"),
            last_wal: s["last_wal"].as_i64(),
            last_remote_wal: s["last_remote_wal"].as_i64(),
            merkle_root: str_of("merkle_root"),
            corrupted_merkle_tree: s["corrupted_merkle_tree"].as_bool(),
            peers,
            corrupted_pages: None,
        }
    }
}

/// What the operation-token ceremony on one cluster has to say after one step.
enum Token {
    /// The token, ready to use.
    Ready(SecretString),
    /// One step was taken (or recorded); run again soon.
    Stepped,
    /// An attempt someone else started is in progress: left alone.
    Foreign(String),
    /// The token is PGP-encrypted: a person has to decrypt it.
    NeedsPerson(String),
}

fn unsupported(e: &ClientError) -> bool {
    matches!(e, ClientError::Status { status: 404, message, .. }
        if message.contains("unsupported path") || message.to_lowercase().contains("licens"))
}

impl DrReplication {
    fn ceremony_secret(&self) -> String {
        format!("{}-dr-ceremony", self.name_any())
    }

    /// Every cluster: (id, Connection).
    fn members(&self) -> Vec<(String, ConnectionRef)> {
        let mut m = vec![(
            self.spec.primary.id.clone(),
            self.spec.primary.connection_ref.clone(),
        )];
        m.extend(
            self.spec
                .secondaries
                .iter()
                .map(|s| (s.id.clone(), s.connection_ref.clone())),
        );
        m
    }

    fn primary_api_addr(&self, id: &str) -> Option<&str> {
        self.spec
            .secondaries
            .iter()
            .find(|s| s.id == id)
            .and_then(|s| s.primary_api_addr.as_deref())
    }

    async fn observe(&self, ctx: &Context) -> Result<Vec<Member>> {
        let ns = self.namespace().unwrap_or_default();
        let mut out = Vec::new();
        for (id, cref) in self.members() {
            let http = ctx
                .http_for("DrReplication", &ns, Some(&cref), Service::Secrets)
                .await?;
            let client = DrClient::from(http);
            let status = match client.status().await {
                Ok(s) => Some(s),
                Err(e) if unsupported(&e) => {
                    return Err(Error::Unsupported(format!(
                        "cluster {id} does not offer DR replication (it needs an enterprise licence): {e}"
                    )))
                }
                Err(e) if e.is_transient() => None,
                Err(e) => return Err(e.into()),
            };
            out.push(Member { id, client, status });
        }
        Ok(out)
    }

    /// The ceremony Secret's data (OTPs and operation tokens by cluster).
    async fn ceremony(&self, ctx: &Context) -> Result<BTreeMap<String, String>> {
        let ns = self.namespace().unwrap_or_default();
        let secret = Api::<Secret>::namespaced(ctx.client.clone(), &ns)
            .get_opt(&self.ceremony_secret())
            .await?;
        Ok(secret
            .and_then(|s| s.data)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(k, v)| String::from_utf8(v.0).ok().map(|v| (k, v)))
            .collect())
    }

    /// Write the ceremony Secret (owned by the resource; a key no longer written is removed:
    /// [`QuartetSecret`]).
    async fn save_ceremony(&self, ctx: &Context, data: &BTreeMap<String, String>) -> Result<()> {
        QuartetSecret::owned_by(self, &self.ceremony_secret())?
            .values(data.iter().map(|(k, v)| (k.clone(), v.as_str())))
            .apply::<Self>(&ctx.client)
            .await?;
        Ok(())
    }

    /// The unseal key shares, in key order.
    async fn key_shares(&self, ctx: &Context) -> Result<Vec<SecretString>> {
        let ns = self.namespace().unwrap_or_default();
        let r = self.spec.key_shares_secret_ref.as_ref().ok_or_else(|| {
            Error::InvalidSpec(
                "this step needs a DR operation token: set keySharesSecretRef".into(),
            )
        })?;
        let secret = Api::<Secret>::namespaced(ctx.client.clone(), &ns)
            .get_opt(&r.name)
            .await?
            .ok_or_else(|| {
                Error::MissingReference(format!(
                    "Secret {ns}/{} (keySharesSecretRef) not found",
                    r.name
                ))
            })?;
        let shares: Vec<SecretString> = secret
            .data
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, _)| !k.starts_with("operation-token-"))
            .filter_map(|(_, v)| String::from_utf8(v.0).ok())
            .map(|v| SecretString::new(v.trim()))
            .collect();
        if shares.is_empty() {
            return Err(Error::MissingReference(format!(
                "Secret {ns}/{} (keySharesSecretRef) holds no key shares",
                r.name
            )));
        }
        Ok(shares)
    }

    /// One step of the operation-token ceremony on cluster `id`. `progress` records our
    /// attempts' nonces and shares fed (in status).
    async fn op_token(
        &self,
        ctx: &Context,
        m: &Member,
        progress: &mut FailoverProgress,
    ) -> Result<Token> {
        let id = &m.id;
        let mut secret = self.ceremony(ctx).await?;
        if let Some(t) = secret.get(&format!("token.{id}")) {
            return Ok(Token::Ready(SecretString::new(t.clone())));
        }
        if let Some(t) = self.user_token(ctx, id).await? {
            return Ok(Token::Ready(t));
        }
        let pgp = match &self.spec.pgp_key_secret_ref {
            Some(r) => Some(
                ctx.secret_value(&self.namespace().unwrap_or_default(), r, "PGP key")
                    .await?,
            ),
            None => None,
        };
        let attempt = m.client.attempt().await?;
        let ours = progress.attempts.get(id).cloned();
        if !attempt.started {
            if attempt.complete && ours.is_some() && !attempt.encoded_token.is_empty() {
                return self
                    .finish_attempt(ctx, id, &attempt.encoded_token, &mut secret, progress)
                    .await;
            }
            if pgp.is_none() && !secret.contains_key(&format!("otp.{id}")) {
                // Choose the OTP and keep it before the attempt exists, so a restart right
                // after the start still knows it.
                secret.insert(format!("otp.{id}"), new_otp());
                self.save_ceremony(ctx, &secret).await?;
                progress.attempts.insert(id.clone(), "starting".into());
                return Ok(Token::Stepped);
            }
            let started = match &pgp {
                Some(k) => m.client.attempt_start(Some(k.expose())).await?,
                None => {
                    let otp = secret
                        .get(&format!("otp.{id}"))
                        .cloned()
                        .unwrap_or_default();
                    m.client.attempt_start_with_otp(&otp).await?
                }
            };
            progress.attempts.insert(id.clone(), started.nonce);
            progress.shares_fed.insert(id.clone(), 0);
            return Ok(Token::Stepped);
        }
        let is_ours = match ours.as_deref() {
            Some("starting") => {
                // We started it and stopped before recording its nonce.
                progress.attempts.insert(id.clone(), attempt.nonce.clone());
                true
            }
            Some(n) => n == attempt.nonce,
            None => false,
        };
        if !is_ours {
            return Ok(Token::Foreign(format!(
                "an operation-token attempt that Quartet did not start is in progress on cluster {id} (progress {}/{}): finish or cancel it (DELETE sys/replication/dr/secondary/generate-operation-token/attempt)",
                attempt.progress, attempt.required
            )));
        }
        if pgp.is_none() && !secret.contains_key(&format!("otp.{id}")) {
            // Ours, but its OTP is lost (the Secret was deleted): it can never be decoded.
            m.client.attempt_cancel().await?;
            progress.attempts.remove(id);
            progress.shares_fed.remove(id);
            return Ok(Token::Stepped);
        }
        let shares = self.key_shares(ctx).await?;
        let fed = progress
            .shares_fed
            .get(id)
            .copied()
            .unwrap_or(attempt.progress);
        let Some(share) = shares.get(fed as usize) else {
            return Err(Error::InvalidSpec(format!(
                "the operation-token attempt on cluster {id} needs {} key shares; keySharesSecretRef holds {}",
                attempt.required,
                shares.len()
            )));
        };
        let after = match m
            .client
            .attempt_update(share.expose(), &attempt.nonce)
            .await
        {
            Ok(a) => a,
            Err(ClientError::Status {
                status: 400,
                message,
                ..
            }) if message.contains("already been provided") => {
                progress.shares_fed.insert(id.clone(), fed + 1);
                return Ok(Token::Stepped);
            }
            Err(e) => return Err(e.into()),
        };
        progress.shares_fed.insert(id.clone(), fed + 1);
        if after.complete {
            return self
                .finish_attempt(ctx, id, &after.encoded_token, &mut secret, progress)
                .await;
        }
        Ok(Token::Stepped)
    }

    /// An operation token a person put in the key-shares Secret (PGP mode).
    async fn user_token(&self, ctx: &Context, id: &str) -> Result<Option<SecretString>> {
        let Some(r) = &self.spec.key_shares_secret_ref else {
            return Ok(None);
        };
        let ns = self.namespace().unwrap_or_default();
        let secret = Api::<Secret>::namespaced(ctx.client.clone(), &ns)
            .get_opt(&r.name)
            .await?;
        Ok(secret
            .and_then(|s| s.data)
            .and_then(|d| d.get(&format!("operation-token-{id}")).cloned())
            .and_then(|b| String::from_utf8(b.0).ok())
            .map(|t| SecretString::new(t.trim())))
    }

    async fn finish_attempt(
        &self,
        ctx: &Context,
        id: &str,
        encoded: &str,
        secret: &mut BTreeMap<String, String>,
        progress: &mut FailoverProgress,
    ) -> Result<Token> {
        progress.attempts.remove(id);
        progress.shares_fed.remove(id);
        match secret.remove(&format!("otp.{id}")) {
            Some(otp) => {
                let token = decode_token(encoded, &otp).ok_or_else(|| {
                    Error::InvalidSpec(format!(
                        "the operation token of cluster {id} could not be decoded with its one-time password"
                    ))
                })?;
                secret.insert(format!("token.{id}"), token.clone());
                self.save_ceremony(ctx, secret).await?;
                Ok(Token::Ready(SecretString::new(token)))
            }
            None => {
                secret.insert(format!("encoded-token.{id}"), encoded.to_string());
                self.save_ceremony(ctx, secret).await?;
                Ok(Token::NeedsPerson(format!(
                    "the operation token of cluster {id} is encrypted to the PGP key: decrypt `encoded-token.{id}` of Secret {} and put it in the key-shares Secret under `operation-token-{id}`",
                    self.ceremony_secret()
                )))
            }
        }
    }

    /// Forget (and, while the cluster is a secondary, delete) the operation token of `id`.
    async fn drop_token(&self, ctx: &Context, m: &Member, delete_remote: bool) -> Result<()> {
        let mut secret = self.ceremony(ctx).await?;
        if let Some(t) = secret.remove(&format!("token.{}", m.id)) {
            if delete_remote {
                match m.client.operation_token_delete(&t).await {
                    Ok(()) => {}
                    Err(ClientError::Status { status: 400, .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            self.save_ceremony(ctx, &secret).await?;
        }
        Ok(())
    }
}

/// A fresh one-time password of the length the service expects.
fn new_otp() -> String {
    use rand::distr::Alphanumeric;
    use rand::Rng;
    rand::rng()
        .sample_iter(&Alphanumeric)
        .take(OTP_LEN)
        .map(char::from)
        .collect()
}

/// `base64(token XOR otp)` (unpadded or padded) → the token.
pub fn decode_token(encoded: &str, otp: &str) -> Option<String> {
    let engines = [
        base64::engine::general_purpose::STANDARD_NO_PAD,
        base64::engine::general_purpose::STANDARD,
    ];
    let bytes = engines
        .iter()
        .find_map(|e| e.decode(encoded.trim()).ok())
        .or_else(|| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(encoded.trim())
                .ok()
        })?;
    if bytes.len() != otp.len() {
        return None;
    }
    let token: Vec<u8> = bytes.iter().zip(otp.bytes()).map(|(b, o)| b ^ o).collect();
    String::from_utf8(token).ok()
}

impl Operated for DrReplication {
    type Client = DrClient;

    async fn step(&self, ctx: &Context, _primary: &DrClient) -> Result<Step> {
        let members = self.observe(ctx).await?;
        let before = self.status.clone().unwrap_or_default();
        let mut clusters: BTreeMap<String, DrClusterStatus> =
            members.iter().map(|m| (m.id.clone(), m.report())).collect();
        for (id, c) in &before.clusters {
            if let (Some(now), Some(pages)) = (clusters.get_mut(id), &c.corrupted_pages) {
                now.corrupted_pages = Some(pages.clone());
            }
        }
        let primaries: Vec<&Member> = members.iter().filter(|m| m.mode() == "primary").collect();
        let mut handled = before.handled_requests.clone();
        // An emptied record is no failover: when a maintenance step ends, its record is left
        // out of the status write, and a server may keep the emptied object rather than drop it
        // (that is why its fields are not required in the schema: a write must never be refused
        // over what the previous one left).
        let mut progress = before
            .failover
            .clone()
            .filter(|p| !p.target.is_empty() && !p.phase.is_empty());
        let by_id = |id: &str| members.iter().find(|m| m.id == id);

        // Which cluster must be primary.
        let target = match &self.spec.failover {
            Some(f) => f.promote.clone(),
            None if primaries.len() == 1 => primaries[0].id.clone(),
            None => before
                .primary
                .clone()
                .unwrap_or_else(|| self.spec.primary.id.clone()),
        };
        let record = |step: Step,
                      primary: Option<&str>,
                      clusters: &BTreeMap<String, DrClusterStatus>,
                      progress: &Option<FailoverProgress>,
                      handled: &BTreeMap<String, HandledRequests>| {
            let mut s = step
                .field("clusters", json!(clusters))
                .field("handledRequests", json!(handled));
            if let Some(p) = primary {
                s = s.field("primary", json!(p)).remote_id(p);
            }
            if let Some(p) = progress {
                s = s.field("failover", json!(p));
            }
            s
        };
        let current_primary = primaries.first().map(|m| m.id.clone());
        let Some(t) = by_id(&target) else {
            return Err(Error::InvalidSpec(format!(
                "no cluster has the id {target}"
            )));
        };

        // A failover: the ceremony, then promotion, then everyone rejoins.
        if let Some(f) = &self.spec.failover {
            let mut p = match progress.clone() {
                Some(p) if p.target == f.promote => p,
                _ if t.mode() == "primary" && primaries.len() == 1 => {
                    // Already primary: nothing to fail over (a finished failover, or a no-op).
                    FailoverProgress {
                        target: target.clone(),
                        from: None,
                        phase: "Done".into(),
                        ..Default::default()
                    }
                }
                _ => {
                    let p = FailoverProgress {
                        target: target.clone(),
                        from: current_primary.clone().filter(|c| *c != target),
                        phase: "Ceremony".into(),
                        ..Default::default()
                    };
                    let step = Step::not_ready("FailingOver", format!("failing over to {target}"))
                        .event(
                            false,
                            "FailoverStarted",
                            format!("failover to {target} started"),
                        )
                        .again(NEXT);
                    return Ok(record(
                        step,
                        current_primary.as_deref(),
                        &clusters,
                        &Some(p),
                        &handled,
                    ));
                }
            };
            if p.phase == "Ceremony" {
                if t.mode() == "primary" {
                    p.phase = "Promoted".into();
                } else if t.status.is_none() {
                    // It did not answer a transient failure: retried, not stalled.
                    return Err(Error::Remote(ClientError::Unreachable {
                        service: Service::Secrets,
                        detail: format!("cluster {target} does not answer"),
                    }));
                } else {
                    let token = match self.op_token(ctx, t, &mut p).await? {
                        Token::Ready(tok) => tok,
                        Token::Stepped => {
                            let step = Step::not_ready(
                                "FailingOver",
                                format!("generating a DR operation token on {target}"),
                            )
                            .again(NEXT);
                            return Ok(record(
                                step,
                                current_primary.as_deref(),
                                &clusters,
                                &Some(p),
                                &handled,
                            ));
                        }
                        Token::Foreign(msg) => {
                            let step = Step::not_ready("AttemptInProgress", msg).again(WATCH);
                            return Ok(record(
                                step,
                                current_primary.as_deref(),
                                &clusters,
                                &Some(p),
                                &handled,
                            ));
                        }
                        Token::NeedsPerson(msg) => {
                            let step = Step::not_ready("OperationTokenNeeded", msg).again(WATCH);
                            return Ok(record(
                                step,
                                current_primary.as_deref(),
                                &clusters,
                                &Some(p),
                                &handled,
                            ));
                        }
                    };
                    // Demote the old primary first when it answers (one primary at a time),
                    // unless the user forces the promotion.
                    if !f.force {
                        if let Some(old) = primaries.iter().find(|m| m.id != target) {
                            old.client.primary_demote().await?;
                            let step = Step::not_ready(
                                "FailingOver",
                                format!("demoted {} (it keeps its cluster id)", old.id),
                            )
                            .event(
                                false,
                                "Demoted",
                                format!("demoted the old primary {}", old.id),
                            )
                            .again(NEXT);
                            return Ok(record(step, None, &clusters, &Some(p), &handled));
                        }
                    }
                    let addr = (target == self.spec.primary.id)
                        .then(|| self.spec.primary.primary_cluster_addr.clone())
                        .flatten();
                    t.client
                        .promote(token.expose(), f.force, addr.as_deref())
                        .await?;
                    self.drop_token(ctx, t, false).await?;
                    p.phase = "Promoted".into();
                    let step = Step::not_ready("FailingOver", format!("promoted {target}"))
                        .event(false, "Promoted", format!("{target} promoted to primary"))
                        .again(NEXT);
                    return Ok(record(step, Some(&target), &clusters, &Some(p), &handled));
                }
            }
            if p.phase == "Promoted" {
                // Every other cluster follows the new primary again, without a wipe.
                for m in members.iter().filter(|m| m.id != target) {
                    if p.rejoined.contains(&m.id) || t.has_connected(&m.id) {
                        if !p.rejoined.contains(&m.id) {
                            p.rejoined.push(m.id.clone());
                        }
                        continue;
                    }
                    match m.mode() {
                        "unreachable" => continue,
                        "primary" => {
                            m.client.primary_demote().await?;
                            let step = Step::not_ready("FailingOver", format!("demoted {}", m.id))
                                .event(
                                    false,
                                    "Demoted",
                                    format!("demoted the old primary {}", m.id),
                                )
                                .again(NEXT);
                            return Ok(record(step, Some(&target), &clusters, &Some(p), &handled));
                        }
                        "secondary" => {
                            let token = match self.op_token(ctx, m, &mut p).await? {
                                Token::Ready(tok) => tok,
                                Token::Stepped => {
                                    let step = Step::not_ready(
                                        "FailingOver",
                                        format!("generating a DR operation token on {}", m.id),
                                    )
                                    .again(NEXT);
                                    return Ok(record(
                                        step,
                                        Some(&target),
                                        &clusters,
                                        &Some(p),
                                        &handled,
                                    ));
                                }
                                Token::Foreign(msg) => {
                                    let step =
                                        Step::not_ready("AttemptInProgress", msg).again(WATCH);
                                    return Ok(record(
                                        step,
                                        Some(&target),
                                        &clusters,
                                        &Some(p),
                                        &handled,
                                    ));
                                }
                                Token::NeedsPerson(msg) => {
                                    let step =
                                        Step::not_ready("OperationTokenNeeded", msg).again(WATCH);
                                    return Ok(record(
                                        step,
                                        Some(&target),
                                        &clusters,
                                        &Some(p),
                                        &handled,
                                    ));
                                }
                            };
                            let activation = fresh_activation(t, &m.id).await?;
                            m.client
                                .update_primary(
                                    token.expose(),
                                    activation.expose(),
                                    self.primary_api_addr(&m.id),
                                )
                                .await?;
                            self.drop_token(ctx, m, true).await?;
                            p.rejoined.push(m.id.clone());
                            let step = Step::not_ready(
                                "FailingOver",
                                format!("{} follows {target}", m.id),
                            )
                            .event(false, "Rejoined", format!("{} now follows {target}", m.id))
                            .again(NEXT);
                            return Ok(record(step, Some(&target), &clusters, &Some(p), &handled));
                        }
                        _ => {} // disabled: enabled below like any new secondary
                    }
                }
                p.phase = "Done".into();
                p.attempts.clear();
                p.shares_fed.clear();
                let step = Step::not_ready("FailingOver", format!("failover to {target} done"))
                    .event(
                        false,
                        "FailoverDone",
                        format!("{target} is primary; the others follow it"),
                    )
                    .again(NEXT);
                return Ok(record(step, Some(&target), &clusters, &Some(p), &handled));
            }
            progress = Some(p);
        }

        // The primary.
        match t.mode() {
            "unreachable" => {
                // It did not answer a transient failure: retried, not stalled.
                return Err(Error::Remote(ClientError::Unreachable {
                    service: Service::Secrets,
                    detail: format!("the primary {target} does not answer"),
                }));
            }
            "disabled" => {
                let addr = (target == self.spec.primary.id)
                    .then(|| self.spec.primary.primary_cluster_addr.clone())
                    .flatten();
                t.client.primary_enable(addr.as_deref()).await?;
                let step = Step::not_ready("Converging", format!("enabled {target} as DR primary"))
                    .event(
                        false,
                        "PrimaryEnabled",
                        format!("{target} enabled as DR primary"),
                    )
                    .again(NEXT);
                return Ok(record(step, Some(&target), &clusters, &progress, &handled));
            }
            "secondary" => {
                let step = Step::not_ready(
                    "PrimaryIsSecondary",
                    format!("cluster {target} is a DR secondary: set failover.promote: {target} to promote it"),
                );
                return Ok(record(
                    step,
                    current_primary.as_deref(),
                    &clusters,
                    &progress,
                    &handled,
                ));
            }
            _ => {}
        }

        // The secondaries.
        let mut waiting = Vec::new();
        for m in members.iter().filter(|m| m.id != target) {
            match m.mode() {
                "unreachable" => waiting.push(format!("{} does not answer", m.id)),
                "disabled" => {
                    if !self.spec.allow_secondary_wipe {
                        let step = Step::not_ready(
                            "WipeNotAllowed",
                            format!("enabling cluster {} as a DR secondary would wipe all its data: set allowSecondaryWipe: true to allow it", m.id),
                        );
                        return Ok(record(step, Some(&target), &clusters, &progress, &handled));
                    }
                    let activation = fresh_activation(t, &m.id).await?;
                    let ca = match self
                        .spec
                        .secondaries
                        .iter()
                        .find(|s| s.id == m.id)
                        .and_then(|s| s.ca_secret_ref.as_ref())
                    {
                        Some(r) => Some(
                            ctx.secret_value(&self.namespace().unwrap_or_default(), r, "primary CA")
                                .await?,
                        ),
                        None => None,
                    };
                    m.client
                        .secondary_enable(
                            activation.expose(),
                            self.primary_api_addr(&m.id),
                            ca.as_ref().map(|c| c.expose()),
                        )
                        .await?;
                    let step = Step::not_ready("Converging", format!("enabled {} as DR secondary of {target}", m.id))
                        .event(false, "SecondaryEnabled", format!("{} enabled as DR secondary of {target} (its data was replaced)", m.id))
                        .again(NEXT);
                    return Ok(record(step, Some(&target), &clusters, &progress, &handled));
                }
                "secondary" if !t.has_connected(&m.id) => waiting.push(format!(
                    "{} is a DR secondary that does not follow {target} (fail over to {target} again, or attach it by hand)",
                    m.id
                )),
                "primary" => waiting.push(format!(
                    "{} is a DR primary too: only one primary should exist",
                    m.id
                )),
                _ => {}
            }
        }

        // Secondaries the primary knows but the spec no longer lists.
        let ids: Vec<String> = members.iter().map(|m| m.id.clone()).collect();
        for known in t.known_secondaries() {
            if !ids.contains(&known) {
                t.client.revoke_secondary(&known).await?;
                let step = Step::not_ready("Converging", format!("revoked secondary {known}"))
                    .event(
                        false,
                        "SecondaryRevoked",
                        format!("revoked {known}, which the spec no longer lists"),
                    )
                    .again(NEXT);
                return Ok(record(step, Some(&target), &clusters, &progress, &handled));
            }
        }

        // One-shot maintenance.
        for s in &self.spec.secondaries {
            let Some(m) = by_id(&s.id).filter(|m| m.mode() == "secondary") else {
                continue;
            };
            let h = handled.get(&s.id).cloned().unwrap_or_default();
            let reindex = s
                .reindex_request
                .as_ref()
                .filter(|r| h.reindex.as_ref() != Some(*r));
            let merkle = s
                .merkle_check_request
                .as_ref()
                .filter(|r| h.merkle_check.as_ref() != Some(*r));
            if reindex.is_none() && merkle.is_none() {
                continue;
            }
            let mut p = progress.clone().unwrap_or_else(|| FailoverProgress {
                target: s.id.clone(),
                phase: "Maintenance".into(),
                ..Default::default()
            });
            let token = match self.op_token(ctx, m, &mut p).await? {
                Token::Ready(tok) => tok,
                other => {
                    let (reason, msg, again) = match other {
                        Token::Foreign(msg) => ("AttemptInProgress", msg, WATCH),
                        Token::NeedsPerson(msg) => ("OperationTokenNeeded", msg, WATCH),
                        _ => (
                            "Maintenance",
                            format!("generating a DR operation token on {}", s.id),
                            NEXT,
                        ),
                    };
                    let keep = if progress.is_some() || !p.attempts.is_empty() {
                        Some(p)
                    } else {
                        None
                    };
                    let step = Step::not_ready(reason, msg).again(again);
                    return Ok(record(step, Some(&target), &clusters, &keep, &handled));
                }
            };
            let mut step =
                Step::not_ready("Maintenance", format!("maintenance on {}", s.id)).again(NEXT);
            if let Some(r) = reindex {
                m.client.reindex(token.expose()).await?;
                handled.entry(s.id.clone()).or_default().reindex = Some(r.clone());
                step = step.event(false, "Reindexed", format!("reindex of {} started", s.id));
            }
            if let Some(r) = merkle {
                let report = m.client.merkle_check(token.expose()).await?;
                handled.entry(s.id.clone()).or_default().merkle_check = Some(r.clone());
                let corrupted = report["corrupted_root"].as_bool().unwrap_or(false)
                    || report["corrupted_tree_map"]
                        .as_object()
                        .is_some_and(|o| !o.is_empty());
                let pages = corrupted.then(|| report["corrupted_tree_map"].to_string());
                if let Some(c) = clusters.get_mut(&s.id) {
                    c.corrupted_pages = pages.clone();
                }
                step = match pages {
                    Some(p) => step.event(
                        true,
                        "MerkleCorruption",
                        format!("the Merkle check of {} found corrupted pages: {p}", s.id),
                    ),
                    None => step.event(
                        false,
                        "MerkleCheckClean",
                        format!("the Merkle check of {} found no corruption", s.id),
                    ),
                };
            }
            self.drop_token(ctx, m, true).await?;
            if progress.as_ref().is_some_and(|f| f.phase != "Maintenance") {
                progress = Some(p);
            } else {
                progress = None;
            }
            return Ok(record(step, Some(&target), &clusters, &progress, &handled));
        }

        metrics(ctx, self, t, &members);
        let step = if waiting.is_empty() {
            let n = members.len() - 1;
            Step::ready(
                "Replicating",
                format!(
                    "{target} is primary; {n} secondar{} follow it",
                    if n == 1 { "y" } else { "ies" }
                ),
            )
        } else {
            Step::not_ready("SecondaryNotFollowing", waiting.join("; "))
        };
        Ok(record(
            step.again(WATCH),
            Some(&target),
            &clusters,
            &progress,
            &handled,
        ))
    }

    async fn finish(&self, ctx: &Context, _client: &DrClient) -> Result<()> {
        publish(
            ctx,
            self,
            EventType::Normal,
            "ReplicationLeftRunning",
            "Delete",
            "deleting a DrReplication never changes the clusters: replication keeps running as it is; tear it down by hand".into(),
        )
        .await;
        Ok(())
    }
}

/// A fresh activation token for secondary `id` on `primary`, revoking a stale one first (the
/// service refuses a second token for an id it already knows).
async fn fresh_activation(primary: &Member, id: &str) -> Result<SecretString> {
    match primary.client.secondary_token(id).await {
        Ok(t) => Ok(SecretString::new(t)),
        Err(ClientError::Status {
            status: 400,
            message,
            ..
        }) if message.contains("already exists") => {
            primary.client.revoke_secondary(id).await?;
            Ok(SecretString::new(primary.client.secondary_token(id).await?))
        }
        Err(e) => Err(e.into()),
    }
}

/// WAL lag, heartbeat age and connection state of each secondary, as metrics.
fn metrics(ctx: &Context, obj: &DrReplication, primary: &Member, members: &[Member]) {
    let set = format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any());
    let last_wal = primary
        .status
        .as_ref()
        .and_then(|s| s["last_wal"].as_i64())
        .unwrap_or(0);
    for m in members.iter().filter(|m| m.id != primary.id) {
        let remote = m
            .status
            .as_ref()
            .and_then(|s| s["last_remote_wal"].as_i64())
            .unwrap_or(0);
        let connected = primary.has_connected(&m.id);
        let heartbeat_age = primary
            .status
            .as_ref()
            .and_then(|s| {
                s["secondaries"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|p| p["node_id"].as_str() == Some(m.id.as_str()))
                    .and_then(|p| p["last_heartbeat"].as_str())
                    .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            })
            .map(|t| {
                (chrono::Utc::now() - t.with_timezone(&chrono::Utc))
                    .num_seconds()
                    .max(0)
            })
            .unwrap_or(-1);
        ctx.metrics.dr_secondary(
            &set,
            &m.id,
            (last_wal - remote).max(0),
            heartbeat_age,
            connected,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operation_token_is_decoded_with_its_one_time_password() {
        let otp = "abcdefghijklmnopqrstuvwxyz12";
        let token = "hvs.ABCDEFGHIJKLMNOPQRSTUVWX";
        let x: Vec<u8> = token.bytes().zip(otp.bytes()).map(|(t, o)| t ^ o).collect();
        let encoded = base64::engine::general_purpose::STANDARD_NO_PAD.encode(&x);
        assert_eq!(decode_token(&encoded, otp).as_deref(), Some(token));
        assert_eq!(decode_token(&encoded, "short"), None);
    }

    #[test]
    fn one_time_passwords_have_the_length_the_service_expects() {
        assert_eq!(new_otp().len(), OTP_LEN);
        assert_ne!(new_otp(), new_otp());
    }
}
