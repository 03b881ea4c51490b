//! The second shape of kind: a resource that drives an operation on the service rather than
//! owning one remote object (a lease it holds, a one-time exchange, a run or a deployment it
//! follows and steers).
//!
//! Each pass: observe the service and the resource's own status, decide the next step, take at
//! most that one step, record it in status, requeue. Because every step is recorded before the
//! next is taken, an operator restart at any point resumes where it stopped instead of starting
//! over. The finalizer, conditions, Events, backoff, metrics and the "no write when nothing
//! changed" rule are the same as for [`super::Reconciled`] kinds; only `step` and `finish` are
//! the kind's.
//!
//! A kind implements [`Operated`] and is registered with [`run_operation`]:
//!
//! ```ignore
//! impl Operated for AdCheckout {
//!     type Client = AdClient;
//!     async fn step(&self, ctx: &Context, client: &AdClient) -> Result<Step> {
//!         // read status (self.status), the service; decide; act once
//!         Ok(Step::ready("CheckedOut", "account svc1 checked out")
//!             .field("serviceAccountName", json!("svc1"))
//!             .again(Duration::from_secs(60)))
//!     }
//!     async fn finish(&self, ctx: &Context, client: &AdClient) -> Result<()> { /* check in */ Ok(()) }
//! }
//! ```

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::ResourceExt;
use serde_json::{Map, Value};

use super::conditions::{self, DELETION_BLOCKED, READY, SYNCED};
use super::context::Context;
use super::driver::{controller_for, object_key, publish, record_failure, write_status, Lifetime};
use super::error::{jitter, Result};
use super::finalize;
use super::gitops::{self, Progress};
use super::managed::Managed;
use super::pass::{self, Start};
use crate::clients::Http;

/// A kind that drives an operation on its service.
pub trait Operated: Managed {
    /// The typed service client.
    type Client: From<Arc<Http>> + Send + Sync;

    /// Observe, decide the next step from the resource's status and the service, take at most
    /// that one step, and say what to record. Errors are handled like those of owned objects
    /// (conditions, one Event per distinct error, backoff by category).
    fn step(
        &self,
        ctx: &Context,
        client: &Self::Client,
    ) -> impl Future<Output = Result<Step>> + Send;

    /// Release what the resource holds when it is deleted with `deletionPolicy: Delete` (check
    /// an account in, log a token out, cancel a run). Must be idempotent: it also runs when
    /// `step` never did. Not called with `Retain`.
    fn finish(
        &self,
        ctx: &Context,
        client: &Self::Client,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Whether deletion has anything to release in the service (false: the finalizer goes
    /// without calling [`Operated::finish`] or reaching the Connection).
    fn holds_remote(&self) -> bool {
        true
    }
}

/// What a step decided: the status to record and when to run again.
#[derive(Clone, Debug, Default)]
pub struct Step {
    /// `Ready` condition: status, reason, message.
    pub ready: (bool, String, String),
    /// Kind-specific status fields (camelCase, declared in the kind's status type). Replaces the
    /// previous set when not empty; empty keeps the fields as they are.
    pub fields: Map<String, Value>,
    /// The remote identifier to show in `status.remoteId` (a lease id, a run id, a deployment).
    pub remote_id: Option<String>,
    /// Other conditions to set (`Some(status)`) or remove (`None`): type, status, reason, message.
    pub conditions: Vec<(String, Option<bool>, String, String)>,
    /// Events to publish: warning?, reason, note. Published once, when the step is taken.
    pub events: Vec<(bool, String, String)>,
    /// Run again after this long; `None` waits for the drift resync (or a change).
    pub again: Option<Duration>,
    /// Whether a `Ready=False` step waits for someone's change (`Stalled`) rather than going
    /// on by itself (`Reconciling`). `None`: stalled exactly when no next run was asked for.
    pub stalls: Option<bool>,
}

impl Step {
    /// `Ready=True` with `reason` and `message`.
    pub fn ready(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            ready: (true, reason.into(), message.into()),
            ..Default::default()
        }
    }

    /// `Ready=False` with `reason` and `message` (an operation in progress, a wait, a final
    /// failure).
    pub fn not_ready(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            ready: (false, reason.into(), message.into()),
            ..Default::default()
        }
    }

    /// Set a kind-specific status field.
    pub fn field(mut self, key: &str, value: Value) -> Self {
        self.fields.insert(key.to_string(), value);
        self
    }

    /// Set the remote identifier shown in `status.remoteId`.
    pub fn remote_id(mut self, id: impl Into<String>) -> Self {
        self.remote_id = Some(id.into());
        self
    }

    /// Set another condition.
    pub fn condition(
        mut self,
        type_: &str,
        status: bool,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        self.conditions
            .push((type_.into(), Some(status), reason.into(), message.into()));
        self
    }

    /// Remove a condition.
    pub fn clear_condition(mut self, type_: &str) -> Self {
        self.conditions
            .push((type_.into(), None, String::new(), String::new()));
        self
    }

    /// Publish an Event (Normal, or Warning when `warning`).
    pub fn event(mut self, warning: bool, reason: &str, note: impl Into<String>) -> Self {
        self.events.push((warning, reason.into(), note.into()));
        self
    }

    /// A `Ready=False` step that waits for someone's change although it polls (a final failure
    /// of the operation): `Stalled=True` instead of `Reconciling=True`.
    pub fn stalls(mut self) -> Self {
        self.stalls = Some(true);
        self
    }

    /// The kstatus progress this step leaves.
    pub fn progress(&self) -> Progress<'_> {
        let (ready, reason, message) = &self.ready;
        if *ready {
            Progress::Done
        } else if self.stalls.unwrap_or(self.again.is_none()) {
            Progress::Stalled(reason, message)
        } else {
            Progress::Working(reason, message)
        }
    }

    /// Run again after `after` (a step was taken and the next one follows, or the operation is
    /// being polled).
    pub fn again(mut self, after: Duration) -> Self {
        self.again = Some(after);
        self
    }
}

/// Run the controller of the operation kind `K` until `life` says stop.
pub async fn run_operation<K: Operated>(
    ctx: Arc<Context>,
    namespace: Option<String>,
    life: Lifetime,
) {
    let controller = controller_for::<K>(&ctx, namespace.as_deref(), &life);
    pass::drive(controller, ctx, &life, reconcile::<K>).await
}

/// One pass over an operation kind's resource (also the pass of [`super::related`]'s
/// controllers).
#[tracing::instrument(skip_all, fields(kind = %K::kind(&()), namespace = %obj.namespace().unwrap_or_default(), name = %obj.name_any()))]
pub(crate) async fn reconcile<K: Operated>(obj: Arc<K>, ctx: Arc<Context>) -> Result<Action> {
    // Each step decides from the status the previous one wrote: never from an older copy (see
    // `pass::needless`). The watch event of our own status write keeps the next run the step
    // asked for (a resync stays with the sweep; a step asked for soon goes back to kube's
    // scheduler, whose timer this event's pass took).
    if let Some(action) = pass::needless(obj.as_ref(), &ctx, true, |key| {
        if ctx.has_resync(key) {
            return Action::await_change();
        }
        match ctx.next_step_in(key) {
            Some(wait) => Action::requeue(wait),
            None => ctx.resync_after(key, jitter(ctx.settings.resync)),
        }
    }) {
        return Ok(action);
    }
    pass::run(
        obj,
        &ctx,
        crate::changes::Trigger::Step,
        |obj| apply(obj, &ctx),
        |obj| cleanup(obj, &ctx),
    )
    .await
}

async fn apply<K: Operated>(obj: Arc<K>, ctx: &Context) -> Result<Action> {
    let Start {
        key,
        generation,
        mut status,
        mut written,
        intent,
        asked,
        ..
    } = Start::of(obj.as_ref());
    if intent.suspend {
        // No step, not even the Connection (a login is a call to the service).
        ctx.cancel_resync(&key);
        let (action, _) = gitops::suspended_pass(obj.as_ref(), ctx, status, written).await?;
        return Ok(action);
    }
    if intent.requested_at.is_some() {
        status.last_handled_reconcile_at = intent.requested_at.clone();
    }
    // A wake is answered by this pass (the observe/diff shape takes it in its resync check).
    ctx.take_urgent(&key);

    let result = async {
        let ns = obj.namespace().unwrap_or_default();
        let http = ctx
            .http_for(&K::kind(&()), &ns, obj.connection_ref(), K::SERVICE)
            .await?;
        obj.step(ctx, &K::Client::from(http)).await
    }
    .await;
    if let Some(why) = pass::moved_away(ctx, &key, result.as_ref().err()) {
        return Ok(pass::let_go(ctx, &key, &why));
    }
    match result {
        Ok(step) => {
            if !step.fields.is_empty() {
                status.fields = step.fields.clone();
            }
            if step.remote_id.is_some() {
                status.remote_id = step.remote_id.clone();
            }
            let (ready, reason, message) = &step.ready;
            let mut changed = conditions::set(
                &mut status.conditions,
                READY,
                *ready,
                reason,
                message,
                generation,
            );
            changed |= conditions::set(
                &mut status.conditions,
                SYNCED,
                true,
                "ReconcileSuccess",
                "",
                generation,
            );
            changed |= conditions::remove(&mut status.conditions, DELETION_BLOCKED);
            changed |= gitops::set_progress(&mut status.conditions, step.progress(), generation);
            for (type_, value, reason, message) in &step.conditions {
                changed |= match value {
                    Some(v) => conditions::set(
                        &mut status.conditions,
                        type_,
                        *v,
                        reason,
                        message,
                        generation,
                    ),
                    None => conditions::remove(&mut status.conditions, type_),
                };
            }
            if changed || !step.events.is_empty() {
                status.last_sync_time = Some(conditions::now());
            }
            let rv = write_status(obj.as_ref(), ctx, &status, &mut written).await?;
            // Only now is the step a success (see the driver's twin).
            ctx.succeeded(&key);
            if let Some(rv) = rv {
                ctx.mark_fresh(&key, rv, asked);
            }
            for (warning, reason, note) in step.events {
                let type_ = if warning {
                    EventType::Warning
                } else {
                    EventType::Normal
                };
                publish(ctx, obj.as_ref(), type_, &reason, "Reconcile", note).await;
            }
            Ok(match step.again {
                Some(wait) => {
                    ctx.set_next_step(&key, Instant::now() + wait);
                    ctx.cancel_resync(&key);
                    Action::requeue(wait)
                }
                None => {
                    let wait = jitter(ctx.settings.resync);
                    ctx.set_next_step(&key, Instant::now() + wait);
                    ctx.resync_after(&key, wait)
                }
            })
        }
        Err(err) => {
            let (action, _) =
                record_failure(obj.as_ref(), ctx, &key, &err, status, written).await?;
            Ok(action)
        }
    }
}

async fn cleanup<K: Operated>(obj: Arc<K>, ctx: &Context) -> Result<Action> {
    let ns = obj.namespace().unwrap_or_default();
    if !obj.holds_remote() {
        return Ok(Action::await_change());
    }
    let retained = "left as it is in the service (deletionPolicy Retain)".to_string();
    if let Some(done) = finalize::kept(obj.as_ref(), ctx, retained).await {
        return done;
    }
    let result = async {
        let http = ctx
            .http_for(&K::kind(&()), &ns, obj.connection_ref(), K::SERVICE)
            .await?;
        obj.finish(ctx, &K::Client::from(http)).await
    }
    .await;
    if let Some(why) = pass::moved_away(ctx, &object_key(obj.as_ref()), result.as_ref().err()) {
        // An error keeps the finalizer: the new shard finishes and removes it.
        return Err(super::error::Error::HandedOver(why));
    }
    match result {
        Ok(()) => {
            ctx.forget(&object_key(obj.as_ref()));
            Ok(Action::await_change())
        }
        Err(err) => {
            let says = finalize::Failed {
                reason: err.category().reason(),
                blocked: format!(
                    "{err}; the finalizer is kept until this succeeds (or set deletionPolicy: Retain)"
                ),
                orphaned: format!(
                    "could not release what this resource holds in the service: {err}"
                ),
            };
            finalize::failed(obj.as_ref(), ctx, err, says).await
        }
    }
}
