//! The status contract, kind by kind, under `quartet dev` with the files of `examples/`: every
//! kind (the Connection too) is `Reconciling` through a 503 of its service, `Stalled` with the
//! service's message when the service rejects it, and `Ready` for the new generation once the
//! service accepts and the spec changes ([`support::dev::lifecycle`]). One table per service,
//! in the order the examples depend on each other; each row names where its service is made to
//! fail (paths read from the sandbox's request log of the examples).
//!
//! The same runs check the change log of every kind (`quartet dev --change-log`): each write
//! the sandbox received (the 503s and rejections the faults made included) has exactly one
//! record, under the resource that made it, and no value of any Secret of the cluster is in any
//! record ([`support::changes`]).

use crate::support;

use std::collections::HashMap;
use std::path::Path;

use serde_json::json;
use support::changes::{assert_no_secret_value, assert_one_record_per_write, logged};
use support::dev::{kubectl_ok, lifecycle, start_dev_with, wait_conditions, Case};
use support::{http, kubectl, wait_for};

const fn case(
    example: &'static str,
    kind: &'static str,
    name: &'static str,
    service: &'static str,
    fault: &'static str,
) -> Case {
    Case {
        example,
        kind,
        name,
        service,
        fault,
        rejection: 400,
    }
}

const SECRETS: &str = "secrets[0]";

fn run(cases: &[Case]) {
    run_then(cases, |_, _| {});
}

/// [`run`], and `then` (more writes to check in the change log) once the cases are through.
fn run_then(cases: &[Case], then: impl FnOnce(&Path, &HashMap<String, String>)) {
    let (child, dir, urls) = start_dev_with("30s", &["--change-log", "{dir}/changes.jsonl"]);
    // Stopped when the test ends, passed or failed.
    let _dev = Stop(child);
    let dir = if std::env::var_os("QUARTET_KEEP_LOGS").is_some() {
        let kept = dir.keep();
        eprintln!("quartet dev's directory kept: {}", kept.display());
        kept
    } else {
        dir.path().to_path_buf()
    };
    let kubeconfig = dir.join("kubeconfig");
    let changes = dir.join("changes.jsonl");
    // `quartet dev`'s own seeding of the services is before this mark.
    let log = &urls["workspaces"];
    let (_, since) = logged(log, 0);
    for c in cases {
        let started = std::time::Instant::now();
        lifecycle(&kubeconfig, &urls, c);
        eprintln!(
            "{} {}: {:.1}s",
            c.kind,
            c.name,
            started.elapsed().as_secs_f64()
        );
    }
    let started = std::time::Instant::now();
    then(&kubeconfig, &urls);
    let checks = std::time::Instant::now();
    let written = assert_one_record_per_write(log, since, &changes);
    // Each resource's writes are recorded under it (a Connection only reads: its check is
    // `lookup-self`).
    for c in cases.iter().filter(|c| c.kind != "Connection") {
        assert!(
            written.contains_key(&format!("{}/{}", c.kind, c.name)),
            "{} {}: no write recorded under it: {written:?}",
            c.kind,
            c.name
        );
    }
    assert_no_secret_value(&kubeconfig, &changes);
    // What the change-log checks add to the run (the suite's time is watched).
    eprintln!(
        "change-log writes made for the check: {:.1}s; the checks: {:.1}s",
        (checks - started).as_secs_f64(),
        checks.elapsed().as_secs_f64()
    );
}

/// `quartet dev`, killed when dropped (a failed assertion unwinds through it).
struct Stop(std::process::Child);

impl Drop for Stop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn every_secrets_kind_is_reconciling_through_a_503_stalled_on_a_rejection_and_ready_after_a_fix() {
    run(&[
        case(
            "secrets-policy.yaml",
            "SecretsPolicy",
            "app-read",
            SECRETS,
            "/v1/sys/policies/acl/app-read",
        ),
        case(
            "totp-method.yaml",
            "TotpMethod",
            "corp-totp",
            SECRETS,
            "/v1/identity/mfa/method/totp*",
        ),
        case(
            "totp-enrollment.yaml",
            "TotpEnrollment",
            "alice-totp",
            SECRETS,
            "/v1/identity/mfa/method/totp/admin-generate",
        ),
        case(
            "idp-auth-method.yaml",
            "IdpAuthMethod",
            "idp",
            SECRETS,
            "/v1/auth/idp/config",
        ),
        case(
            "idp-group.yaml",
            "IdpGroup",
            "ops",
            SECRETS,
            "/v1/auth/idp/groups/ops",
        ),
        case(
            "idp-user.yaml",
            "IdpUser",
            "alice",
            SECRETS,
            "/v1/auth/idp/users/alice",
        ),
        case("directory.yaml", "AdEngine", "ad", SECRETS, "/v1/ad/config"),
        case(
            "directory.yaml",
            "AdRole",
            "app",
            SECRETS,
            "/v1/ad/roles/app*",
        ),
        case(
            "directory.yaml",
            "AdLibrarySet",
            "team",
            SECRETS,
            "/v1/ad/library/team",
        ),
        case(
            "directory.yaml",
            "AdCheckout",
            "build",
            SECRETS,
            "/v1/ad/library/team/check-out",
        ),
        case(
            "transform.yaml",
            "TransformAlphabet",
            "digits",
            SECRETS,
            "/v1/transform/alphabet/digits",
        ),
        case(
            "transform.yaml",
            "TransformTemplate",
            "ccn",
            SECRETS,
            "/v1/transform/template/ccn",
        ),
        case(
            "transform.yaml",
            "TransformStore",
            "tokens-db",
            SECRETS,
            "/v1/transform/stores/tokens-db",
        ),
        case(
            "transform.yaml",
            "Transformation",
            "ccn-fpe",
            SECRETS,
            "/v1/transform/transformation/ccn-fpe",
        ),
        case(
            "transform.yaml",
            "Transformation",
            "ccn-token",
            SECRETS,
            "/v1/transform/transformation/ccn-token",
        ),
        case(
            "transform.yaml",
            "TransformRole",
            "payments",
            SECRETS,
            "/v1/transform/role/payments",
        ),
        case(
            "dr-replication.yaml",
            "DrReplication",
            "dr",
            SECRETS,
            "/v1/sys/replication/dr/*",
        ),
    ]);
}

#[test]
fn every_workspaces_kind_is_reconciling_through_a_503_stalled_on_a_rejection_and_ready_after_a_fix()
{
    let ws = |example, kind, name, fault| Case {
        rejection: 422,
        ..case(example, kind, name, "workspaces", fault)
    };
    run(&[
        ws(
            "workspace.yaml",
            "Workspace",
            "example-app",
            "/api/v2/organizations/quartet/workspaces*",
        ),
        ws(
            "workspace-run.yaml",
            "WorkspaceRun",
            "example-app-plan",
            "/api/v2/runs*",
        ),
        ws(
            "no-code.yaml",
            "NoCodeModule",
            "network",
            "/api/v2/organizations/quartet/no-code-modules*",
        ),
        ws(
            "no-code.yaml",
            "NoCodeWorkspace",
            "network-prod",
            "/api/v2/organizations/quartet/workspaces/network-prod",
        ),
    ]);
}

#[test]
fn the_catalog_and_scheduler_kinds_are_reconciling_through_a_503_stalled_on_a_rejection_and_ready_after_a_fix(
) {
    run_then(
        &[
            // Before the bootstrap, which makes the root token of `quartet dev`'s Connection stop
            // working.
            case(
                "catalog-acl-token.yaml",
                "CatalogAclToken",
                "app-catalog-token",
                "catalog",
                "/v1/acl/login",
            ),
            case(
                "catalog.yaml",
                "CatalogAclBootstrap",
                "catalog-acl",
                "catalog",
                "/v1/acl/bootstrap",
            ),
            case(
                "deployment-gate.yaml",
                "DeploymentGate",
                "web",
                "scheduler",
                "/v1/job/web/deployment",
            ),
        ],
        |kubeconfig, urls| {
            // The gate only reads while the job's deployment needs nothing: give it one to act on
            // (a new version, whose canary is not healthy yet), paused and resumed through the
            // spec, two controls in the change log.
            let (s, v) = http(
                "POST",
                &format!("{}/_sandbox/scheduler/jobs", urls["scheduler"]),
                None,
                Some(
                    json!({"ID": "web", "TaskGroups": [{"Name": "web", "Count": 2, "Canary": 1, "Tasks": ["v2"]}]}),
                ),
            );
            assert!(s < 300, "{v}");
            for (paused, status) in [(true, "paused"), (false, "running")] {
                kubectl_ok(
                    kubeconfig,
                    &[
                        "patch",
                        "deploymentgate/web",
                        "--type=merge",
                        "-p",
                        &json!({"spec": {"paused": paused}}).to_string(),
                    ],
                    None,
                );
                wait_for(
                    &format!("the gate's deployment {status}"),
                    std::time::Duration::from_secs(60),
                    || {
                        let out = kubectl(
                            kubeconfig,
                            &["get", "deploymentgate/web", "-o", "json"],
                            None,
                        );
                        serde_json::from_slice::<serde_json::Value>(&out.stdout)
                            .ok()
                            .filter(|o| {
                                o["status"]["deploymentStatus"] == status
                                    && o["status"]["deploymentId"] == v["DeploymentID"]
                            })
                    },
                );
            }
        },
    );
}

#[test]
fn a_connection_is_reconciling_through_a_503_stalled_on_a_refused_token_and_ready_after_a_fix() {
    // The Connection `quartet dev` made; its probe is the token lookup.
    run_then(
        &[Case {
            rejection: 401,
            ..case(
                "",
                "Connection",
                "secrets",
                SECRETS,
                "/v1/auth/token/lookup-self",
            )
        }],
        |kubeconfig, urls| {
            // A ClusterConnection, which only reads too (its check is the Connection's), and a
            // policy written through it: the record names it as its connection.
            kubectl_ok(
                kubeconfig,
                &["apply", "-f", "-"],
                Some(&format!(
                    "apiVersion: quartet.dev/v1alpha1\nkind: ClusterConnection\nmetadata: {{name: platform}}\n\
                     spec: {{service: secrets, address: \"{}\", secretNamespace: default, namespaces: [default], \
                     tokenSecretRef: {{name: quartet-sandbox-tokens, key: token}}}}\n---\n\
                     apiVersion: secrets.quartet.dev/v1alpha1\nkind: SecretsPolicy\nmetadata: {{name: through-platform, namespace: default}}\n\
                     spec: {{type: acl, policy: \"path \\\"p/*\\\" {{ capabilities = [\\\"read\\\"] }}\", connectionRef: {{kind: ClusterConnection, name: platform}}}}\n",
                    urls[SECRETS]
                )),
            );
            wait_conditions(
                kubeconfig,
                "clusterconnection/platform",
                &[("Ready", "True", None)],
            );
            wait_conditions(
                kubeconfig,
                "secretspolicy/through-platform",
                &[("Ready", "True", None)],
            );
            let records = support::changes::records(&kubeconfig.with_file_name("changes.jsonl"));
            assert!(
                records
                    .iter()
                    .any(|r| r["resource"]["name"] == "through-platform"
                        && r["connection"] == "platform"
                        && r["status"] == 204),
                "no record of the policy's write through the ClusterConnection: {records:#?}"
            );
        },
    );
}
