//! The dev API server driven by kube-rs: a Controller with a finalizer, watch restarts after
//! 410 Gone, status patches by server-side apply, and Lease-based leader election.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{finalizer, Event as FinalizerEvent};
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::watcher;
use kube::{Client, CustomResource, ResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::mpsc;

use common::{server, WIDGET_CRD};

#[derive(CustomResource, Clone, Debug, Serialize, Deserialize)]
#[kube(
    group = "test.quartet.dev",
    version = "v1alpha1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus",
    schema = "disabled"
)]
pub struct WidgetSpec {
    pub size: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i64>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WidgetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<serde_json::Value>,
}

async fn install_crd(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_yaml::from_str(WIDGET_CRD).unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let established = await_condition(
        crds,
        "widgets.test.quartet.dev",
        conditions::is_crd_established(),
    );
    tokio::time::timeout(Duration::from_secs(10), established)
        .await
        .unwrap()
        .unwrap();
}

fn widget(name: &str, replicas: i64) -> Widget {
    let mut w = Widget::new(
        name,
        WidgetSpec {
            size: "small".into(),
            replicas: Some(replicas),
        },
    );
    w.metadata.namespace = Some("default".into());
    w
}

/// What the test controller saw: `apply <name> <replicas>` or `cleanup <name>`.
type Seen = mpsc::UnboundedSender<String>;

struct Ctx {
    client: Client,
    seen: Seen,
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct ReconcileError(String);

async fn reconcile(w: Arc<Widget>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    let api: Api<Widget> = Api::namespaced(ctx.client.clone(), "default");
    let seen = ctx.seen.clone();
    finalizer(&api, "test.quartet.dev/cleanup", w, |ev| async move {
        match ev {
            FinalizerEvent::Apply(w) => {
                let _ = seen.send(format!(
                    "apply {} {}",
                    w.name_any(),
                    w.spec.replicas.unwrap_or_default()
                ));
            }
            FinalizerEvent::Cleanup(w) => {
                let _ = seen.send(format!("cleanup {}", w.name_any()));
            }
        }
        Ok::<_, ReconcileError>(Action::await_change())
    })
    .await
    .map_err(|e| ReconcileError(e.to_string()))
}

fn error_policy(_: Arc<Widget>, _: &ReconcileError, _: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_millis(200))
}

fn start_controller(client: &Client) -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    let api: Api<Widget> = Api::namespaced(client.clone(), "default");
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        seen: tx,
    });
    tokio::spawn(
        Controller::new(api, watcher::Config::default())
            .run(reconcile, error_policy, ctx)
            .for_each(|r| async move {
                if let Err(e) = r {
                    eprintln!("controller: {e:?}");
                }
            }),
    );
    rx
}

/// Wait until the controller reports `want`.
async fn expect(rx: &mut mpsc::UnboundedReceiver<String>, want: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let got = tokio::time::timeout_at(deadline, rx.recv()).await;
        match got {
            Ok(Some(s)) if s == want => return,
            Ok(Some(_)) => continue,
            _ => panic!("controller never reported {want:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_sees_create_update_and_delete() {
    let s = server().await;
    let client = s.client().await.unwrap();
    install_crd(&client).await;
    let mut seen = start_controller(&client);
    let api: Api<Widget> = Api::namespaced(client.clone(), "default");

    api.create(&PostParams::default(), &widget("w1", 1))
        .await
        .unwrap();
    expect(&mut seen, "apply w1 1").await;
    // The finalizer was added by the kube-rs helper (JSON patch).
    let w = api.get("w1").await.unwrap();
    assert_eq!(w.finalizers(), &["test.quartet.dev/cleanup".to_string()]);

    api.patch(
        "w1",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 4}})),
    )
    .await
    .unwrap();
    expect(&mut seen, "apply w1 4").await;

    api.delete("w1", &DeleteParams::default()).await.unwrap();
    expect(&mut seen, "cleanup w1").await;
    let uid = w.uid().unwrap();
    let gone = await_condition(api.clone(), "w1", conditions::is_deleted(&uid));
    tokio::time::timeout(Duration::from_secs(10), gone)
        .await
        .unwrap()
        .unwrap();
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_survives_watch_restart_after_410_gone() {
    let s = server().await;
    let client = s.client().await.unwrap();
    install_crd(&client).await;
    let mut seen = start_controller(&client);
    let api: Api<Widget> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &widget("w1", 1))
        .await
        .unwrap();
    expect(&mut seen, "apply w1 1").await;

    // Compaction: every open watch ends and re-watching from the old resourceVersion is 410.
    s.expire_watches();
    api.create(&PostParams::default(), &widget("w2", 2))
        .await
        .unwrap();
    expect(&mut seen, "apply w2 2").await;
    assert!(
        s.expired_watch_count() >= 1,
        "the controller re-watched from a compacted resourceVersion"
    );
    api.patch(
        "w1",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 9}})),
    )
    .await
    .unwrap();
    expect(&mut seen, "apply w1 9").await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_patch_by_server_side_apply_changes_only_status() {
    let s = server().await;
    let client = s.client().await.unwrap();
    install_crd(&client).await;
    let api: Api<Widget> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &widget("w1", 1))
        .await
        .unwrap();

    let status = json!({
        "apiVersion": "test.quartet.dev/v1alpha1", "kind": "Widget",
        "status": {"observedGeneration": 1, "conditions": [{"type": "Ready", "status": "True", "reason": "Done", "message": "ok", "lastTransitionTime": "2025-01-01T00:00:00Z"}]}
    });
    let w = api
        .patch_status(
            "w1",
            &PatchParams::apply("quartet/widget").force(),
            &Patch::Apply(&status),
        )
        .await
        .unwrap();
    let st = w.status.clone().unwrap();
    assert_eq!(st.observed_generation, Some(1));
    assert_eq!(st.conditions[0]["type"], "Ready");
    assert_eq!(
        w.metadata.generation,
        Some(1),
        "status writes do not bump generation"
    );
    let mf = w.metadata.managed_fields.clone().unwrap();
    assert!(mf
        .iter()
        .any(|e| e.manager.as_deref() == Some("quartet/widget")
            && e.operation.as_deref() == Some("Apply")
            && e.subresource.as_deref() == Some("status")));

    // A manager that stops applying a field gives it up: the field is removed.
    let less = json!({"apiVersion": "test.quartet.dev/v1alpha1", "kind": "Widget", "status": {"observedGeneration": 1}});
    let w = api
        .patch_status(
            "w1",
            &PatchParams::apply("quartet/widget").force(),
            &Patch::Apply(&less),
        )
        .await
        .unwrap();
    assert!(w.status.unwrap().conditions.is_empty());

    // Spec written through the status subresource is ignored.
    let sneaky = json!({"apiVersion": "test.quartet.dev/v1alpha1", "kind": "Widget", "spec": {"size": "large"}, "status": {"observedGeneration": 2}});
    let w = api
        .patch_status(
            "w1",
            &PatchParams::apply("other").force(),
            &Patch::Apply(&sneaky),
        )
        .await
        .unwrap();
    assert_eq!(w.spec.size, "small");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_conflicts_between_managers_unless_forced() {
    let s = server().await;
    let client = s.client().await.unwrap();
    install_crd(&client).await;
    let api: Api<Widget> = Api::namespaced(client.clone(), "default");
    let cfg = |r: i64| json!({"apiVersion": "test.quartet.dev/v1alpha1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": "small", "replicas": r}});
    api.patch("w1", &PatchParams::apply("alice"), &Patch::Apply(cfg(1)))
        .await
        .unwrap();
    let err = api
        .patch("w1", &PatchParams::apply("bob"), &Patch::Apply(cfg(2)))
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(e) => {
            assert_eq!(e.code, 409);
            assert_eq!(e.reason, "Conflict");
            // size has the same value (shared ownership); only replicas conflicts.
            assert_eq!(
                e.message,
                "Apply failed with 1 conflict: conflict with \"alice\": .spec.replicas"
            );
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    // Same values are shared without conflict.
    api.patch("w1", &PatchParams::apply("carol"), &Patch::Apply(cfg(1)))
        .await
        .unwrap();
    let w = api
        .patch(
            "w1",
            &PatchParams::apply("bob").force(),
            &Patch::Apply(cfg(2)),
        )
        .await
        .unwrap();
    assert_eq!(w.spec.replicas, Some(2));
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_election_lease_uses_optimistic_concurrency() {
    let s = server().await;
    let client = s.client().await.unwrap();
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "quartet-leader"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "acquireTime": "2025-01-01T00:00:00.000000Z", "renewTime": "2025-01-01T00:00:00.000000Z", "leaseTransitions": 0}
    }))
    .unwrap();
    let created = leases.create(&PostParams::default(), &lease).await.unwrap();
    // A second candidate racing to create loses with AlreadyExists.
    match leases.create(&PostParams::default(), &lease).await {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 409);
            assert_eq!(e.reason, "AlreadyExists");
            assert_eq!(
                e.message,
                "leases.coordination.k8s.io \"quartet-leader\" already exists"
            );
        }
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
    // Renew with the current resourceVersion succeeds...
    let mut renewed = created.clone();
    renewed.spec.as_mut().unwrap().renew_time = created.spec.as_ref().unwrap().acquire_time.clone();
    renewed.spec.as_mut().unwrap().holder_identity = Some("a".into());
    renewed.spec.as_mut().unwrap().lease_duration_seconds = Some(20);
    let after = leases
        .replace("quartet-leader", &PostParams::default(), &renewed)
        .await
        .unwrap();
    assert_ne!(after.resource_version(), created.resource_version());
    // ...and a takeover based on the stale object is refused.
    let mut takeover = created.clone();
    takeover.spec.as_mut().unwrap().holder_identity = Some("b".into());
    match leases
        .replace("quartet-leader", &PostParams::default(), &takeover)
        .await
    {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 409);
            assert_eq!(
                e.message,
                "Operation cannot be fulfilled on leases.coordination.k8s.io \"quartet-leader\": the object has been modified; please apply your changes to the latest version and try again"
            );
        }
        other => panic!("expected Conflict, got {other:?}"),
    }
    assert_eq!(
        leases
            .get("quartet-leader")
            .await
            .unwrap()
            .spec
            .unwrap()
            .holder_identity
            .as_deref(),
        Some("a")
    );
    s.shutdown().await;
}

/// A server with the Widget CRD, the Widget `w1` in `default`, and a Recorder of Events.
async fn widget_with_recorder() -> (
    quartet_sandbox::apiserver::ApiServer,
    Client,
    Widget,
    kube::runtime::events::Recorder,
) {
    let s = server().await;
    let client = s.client().await.unwrap();
    install_crd(&client).await;
    let api: Api<Widget> = Api::namespaced(client.clone(), "default");
    let w = api
        .create(&PostParams::default(), &widget("w1", 1))
        .await
        .unwrap();
    let recorder = kube::runtime::events::Recorder::new(client.clone(), "quartet-test".into());
    (s, client, w, recorder)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_recorded_through_events_k8s_io_show_as_core_events() {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    use kube::api::ListParams;
    use kube::runtime::events::{Event, EventType};
    use kube::Resource;

    let (s, client, w, recorder) = widget_with_recorder().await;
    let ev = Event {
        type_: EventType::Normal,
        reason: "Synced".into(),
        note: Some("remote object is in sync".into()),
        action: "Reconcile".into(),
        secondary: None,
    };
    recorder.publish(&ev, &w.object_ref(&())).await.unwrap();
    let core: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    let lp = ListParams::default().fields("involvedObject.name=w1,involvedObject.kind=Widget");
    let first = core.list(&lp).await.unwrap();
    assert_eq!(first.items.len(), 1);
    assert_eq!(
        first.items[0].message.as_deref(),
        Some("remote object is in sync")
    );
    // The second identical event becomes a series (a merge patch of the same Event).
    recorder.publish(&ev, &w.object_ref(&())).await.unwrap();

    let list = core.list(&lp).await.unwrap();
    assert_eq!(list.items.len(), 1);
    let e = &list.items[0];
    assert_eq!(e.message.as_deref(), Some("remote object is in sync"));
    assert_eq!(e.reason.as_deref(), Some("Synced"));
    assert_eq!(e.reporting_component.as_deref(), Some("quartet-test"));
    assert_eq!(e.series.as_ref().map(|s| s.count), Some(Some(2)));

    let new: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), "default");
    let list = new
        .list(&ListParams::default().fields("regarding.name=w1"))
        .await
        .unwrap();
    assert_eq!(
        list.items[0].note.as_deref(),
        Some("remote object is in sync")
    );
    s.shutdown().await;
}

/// Every field a real server lets Events be selected by, through both APIs: `source` is the
/// reporting controller when the deprecated source is empty (kube's `ToSelectableFields`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_selected_by_every_field_a_real_server_offers() {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    use k8s_openapi::api::events::v1::Event as NewEvent;
    use kube::api::ListParams;
    use kube::runtime::events::{Event, EventType};
    use kube::Resource;

    let (s, client, w, recorder) = widget_with_recorder().await;
    let ev = Event {
        type_: EventType::Normal,
        reason: "Synced".into(),
        note: Some("in sync".into()),
        action: "Reconcile".into(),
        secondary: None,
    };
    recorder.publish(&ev, &w.object_ref(&())).await.unwrap();
    let new: Api<NewEvent> = Api::namespaced(client.clone(), "default");
    let core: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    for selector in [
        "source=quartet-test",
        "reportingController=quartet-test",
        "regarding.apiVersion=test.quartet.dev/v1alpha1",
        "regarding.fieldPath=",
        "regarding.kind=Widget,regarding.name=w1,type=Normal,reason=Synced",
    ] {
        let list = new
            .list(&ListParams::default().fields(selector))
            .await
            .unwrap_or_else(|e| panic!("{selector}: {e}"));
        assert_eq!(list.items.len(), 1, "{selector}");
    }
    for selector in [
        "source=quartet-test",
        "involvedObject.apiVersion=test.quartet.dev/v1alpha1",
    ] {
        let list = core
            .list(&ListParams::default().fields(selector))
            .await
            .unwrap_or_else(|e| panic!("{selector}: {e}"));
        assert_eq!(list.items.len(), 1, "{selector}");
    }
    let none = new
        .list(&ListParams::default().fields("source=someone-else"))
        .await
        .unwrap();
    assert!(none.items.is_empty());
    s.shutdown().await;
}

/// kube-apiserver's Event validation (`pkg/apis/core/validation/events.go`): what a real
/// cluster refuses, the dev API server refuses with the same field and message, so an operator's
/// Events that would be lost on a real cluster fail here first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_a_real_server_refuses_are_refused_with_its_field_and_message() {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    use k8s_openapi::api::events::v1::Event as NewEvent;
    use kube::runtime::events::{Event, EventType};
    use kube::Resource;

    let (s, client, w, recorder) = widget_with_recorder().await;
    let event = |reason: &str, note: String| Event {
        type_: EventType::Warning,
        reason: reason.into(),
        note: Some(note),
        action: "Reconcile".into(),
        secondary: None,
    };
    let refused = |r: Result<(), kube::Error>| match r {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 422, "{e:?}");
            e.message
        }
        other => panic!("expected a 422, got {other:?}"),
    };

    // A note is at most 1,024 bytes.
    recorder
        .publish(&event("Failed", "n".repeat(1024)), &w.object_ref(&()))
        .await
        .unwrap();
    let msg = refused(
        recorder
            .publish(&event("TooLong", "é".repeat(513)), &w.object_ref(&()))
            .await,
    );
    assert!(msg.starts_with("Event.events.k8s.io \"w1."), "{msg}");
    assert!(
        msg.ends_with("is invalid: message: Invalid value: \"\": can have at most 1024 characters"),
        "{msg}"
    );

    // events.k8s.io/v1 asks for what core/v1 leaves to old clients.
    let new: Api<NewEvent> = Api::namespaced(client.clone(), "default");
    let bare: NewEvent = serde_json::from_value(json!({
        "metadata": {"name": "bare"},
        "regarding": {"kind": "Widget", "name": "w1", "namespace": "default"},
        "type": "Info",
        "reason": "Synced",
        "deprecatedCount": 3
    }))
    .unwrap();
    let Err(kube::Error::Api(e)) = new.create(&PostParams::default(), &bare).await else {
        panic!("an events.k8s.io Event without eventTime was accepted");
    };
    assert_eq!(e.code, 422);
    for part in [
        "eventTime: Required value",
        "type: Invalid value: \"\": has invalid value: Info",
        "count: Invalid value: \"\": needs to be unset",
    ] {
        assert!(e.message.contains(part), "{part:?} not in {}", e.message);
    }

    // core/v1 keeps only the legacy checks: an Event without eventTime is fine there, one for an
    // object of another namespace is not.
    let core: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    let legacy = |name: &str, involved_ns: &str| -> CoreEvent {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "involvedObject": {"kind": "Widget", "name": "w1", "namespace": involved_ns},
            "type": "Normal",
            "reason": "Synced",
            "message": "old client"
        }))
        .unwrap()
    };
    core.create(&PostParams::default(), &legacy("old", "default"))
        .await
        .unwrap();
    let Err(kube::Error::Api(e)) = core
        .create(&PostParams::default(), &legacy("elsewhere", "other"))
        .await
    else {
        panic!("an Event in another namespace than its object was accepted");
    };
    assert!(
        e.message.contains(
            "involvedObject.namespace: Invalid value: \"other\": does not match event.namespace"
        ),
        "{}",
        e.message
    );

    // Through events.k8s.io an Event's report is immutable; a series is what changes.
    let recorded = new
        .list(&kube::api::ListParams::default().fields("regarding.name=w1"))
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|e| e.reason.as_deref() == Some("Failed"))
        .unwrap();
    let Err(kube::Error::Api(e)) = new
        .patch(
            &recorded.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"reason": "Other"})),
        )
        .await
    else {
        panic!("an Event's reason was changed through events.k8s.io");
    };
    assert!(
        e.message
            .contains("reason: Invalid value: \"Other\": field is immutable"),
        "{}",
        e.message
    );
    // The repeat of the first Event becomes its series (a merge patch the server accepts).
    recorder
        .publish(&event("Failed", "n".repeat(1024)), &w.object_ref(&()))
        .await
        .unwrap();
    let repeated = new.get(&recorded.name_any()).await.unwrap();
    assert_eq!(repeated.series.map(|s| s.count), Some(2));
    s.shutdown().await;
}
