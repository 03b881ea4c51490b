//! The reconcile framework's Kubernetes-side helpers against the dev API server (in-process,
//! over HTTPS): leader election, result Secrets owned by a resource, references.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, PostParams};
use kube::runtime::reflector;
use kube::{Api, Client, ResourceExt};
use quartet::api::{Connection, SecretsPolicy};
use quartet::clients::SecretString;
use quartet::metrics::Metrics;
use quartet::reconcile::{Context, Error, Settings};
use quartet::runtime::leader::{LeaderElector, LeaseConfig};
use quartet_sandbox::apiserver::{ApiServer, ApiServerOptions};

async fn cluster() -> (ApiServer, Client) {
    let server = ApiServer::start(ApiServerOptions::default())
        .await
        .expect("dev API server");
    let client = server.client().await.expect("client");
    quartet::cmd::dev::install_crds(&client)
        .await
        .expect("CRDs");
    (server, client)
}

fn elector(client: &Client, identity: &str, duration: Duration) -> LeaderElector {
    LeaderElector::new(
        client.clone(),
        LeaseConfig {
            name: "quartet-leader".into(),
            namespace: "default".into(),
            identity: identity.into(),
            duration,
            renew_every: Duration::from_millis(200),
        },
    )
}

#[tokio::test]
async fn only_one_instance_holds_the_lease_and_a_release_hands_it_over() {
    let (_server, client) = cluster().await;
    let a = elector(&client, "a", Duration::from_secs(30));
    let b = elector(&client, "b", Duration::from_secs(30));
    assert!(
        a.try_acquire_or_renew().await.unwrap(),
        "first instance becomes leader"
    );
    assert!(
        !b.try_acquire_or_renew().await.unwrap(),
        "second instance must not take a live lease"
    );
    assert!(a.try_acquire_or_renew().await.unwrap(), "the holder renews");
    a.release().await;
    assert!(
        b.try_acquire_or_renew().await.unwrap(),
        "a released lease is taken at once"
    );
    assert!(!a.try_acquire_or_renew().await.unwrap());
}

#[tokio::test]
async fn an_expired_lease_is_taken_over() {
    let (_server, client) = cluster().await;
    let a = elector(&client, "a", Duration::from_secs(1));
    let b = elector(&client, "b", Duration::from_secs(1));
    assert!(a.try_acquire_or_renew().await.unwrap());
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert!(
        b.try_acquire_or_renew().await.unwrap(),
        "expired lease not taken over"
    );
    let lease = Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(client, "default")
        .get("quartet-leader")
        .await
        .unwrap();
    let spec = lease.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(spec.lease_transitions, Some(1));
}

fn context(client: &Client) -> Context {
    let (store, _writer) = reflector::store::<Connection>();
    Context::new(
        client.clone(),
        Settings::default(),
        Arc::new(Metrics::default()),
        store,
    )
}

#[tokio::test]
async fn result_secrets_are_owned_by_the_resource_drop_the_keys_no_longer_written_and_go_with_it() {
    let (_server, client) = cluster().await;
    let policies: Api<SecretsPolicy> = Api::namespaced(client.clone(), "default");
    let p: SecretsPolicy = serde_json::from_value(serde_json::json!({
        "apiVersion": "secrets.quartet.dev/v1alpha1", "kind": "SecretsPolicy",
        "metadata": {"name": "owner"}, "spec": {"type": "acl", "policy": "x"}
    }))
    .unwrap();
    let p = policies.create(&PostParams::default(), &p).await.unwrap();
    let ctx = context(&client);
    let data = BTreeMap::from([("url".to_string(), SecretString::new("otpauth://totp/x"))]);
    ctx.apply_owned_secret(&p, "owner-result", data)
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let s = secrets.get("owner-result").await.unwrap();
    let owner = &s.owner_references()[0];
    assert_eq!(owner.uid, p.uid().unwrap());
    assert_eq!(owner.controller, Some(true));
    assert_eq!(s.data.as_ref().unwrap()["url"].0, b"otpauth://totp/x");
    // Applying again is idempotent.
    let data = BTreeMap::from([("url".to_string(), SecretString::new("otpauth://totp/x"))]);
    ctx.apply_owned_secret(&p, "owner-result", data)
        .await
        .unwrap();
    let again = secrets.get("owner-result").await.unwrap();
    assert_eq!(again.resource_version(), s.resource_version());
    // A key no longer written disappears (written through `stringData`, it would stay: the
    // dev API server, like kube-apiserver, tracks such a key as `stringData`'s).
    let two = BTreeMap::from([
        ("url".to_string(), SecretString::new("otpauth://totp/x")),
        ("issuer".to_string(), SecretString::new("quartet")),
    ]);
    ctx.apply_owned_secret(&p, "owner-result", two)
        .await
        .unwrap();
    let data = BTreeMap::from([("url".to_string(), SecretString::new("otpauth://totp/y"))]);
    ctx.apply_owned_secret(&p, "owner-result", data)
        .await
        .unwrap();
    let keys: Vec<String> = secrets
        .get("owner-result")
        .await
        .unwrap()
        .data
        .unwrap()
        .into_keys()
        .collect();
    assert_eq!(keys, ["url"]);

    policies
        .delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    let mut gone = false;
    for _ in 0..50 {
        if secrets.get_opt("owner-result").await.unwrap().is_none() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        gone,
        "owned Secret was not garbage-collected with its owner"
    );
}

#[tokio::test]
async fn a_missing_referenced_resource_is_a_waiting_reference_not_an_error() {
    let (_server, client) = cluster().await;
    let ctx = context(&client);
    let err = ctx
        .referenced::<SecretsPolicy>("default", "absent")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::MissingReference(_)), "{err:?}");
    assert_eq!(err.category().reason(), "ReferenceMissing");
    assert!(err
        .to_string()
        .contains("SecretsPolicy default/absent does not exist"));
}
