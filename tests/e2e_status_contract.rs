//! The status contract, kind by kind, under `quartet dev` with the files of `examples/`: every
//! kind (the Connection too) is `Reconciling` through a 503 of its service, `Stalled` with the
//! service's message when the service rejects it, and `Ready` for the new generation once the
//! service accepts and the spec changes ([`support::dev::lifecycle`]). One table per service,
//! in the order the examples depend on each other; each row names where its service is made to
//! fail (paths read from the sandbox's request log of the examples).

mod support;

use support::dev::{lifecycle, start_dev, Case};

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
    let (child, dir, urls) = start_dev("30s");
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
    for c in cases {
        lifecycle(&kubeconfig, &urls, c);
    }
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
    run(&[
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
    ]);
}

#[test]
fn a_connection_is_reconciling_through_a_503_stalled_on_a_refused_token_and_ready_after_a_fix() {
    // The Connection `quartet dev` made; its probe is the token lookup.
    run(&[Case {
        rejection: 401,
        ..case(
            "",
            "Connection",
            "secrets",
            SECRETS,
            "/v1/auth/token/lookup-self",
        )
    }]);
}
