//! Every manifest in `examples/` is accepted by the API server with the CRDs installed.

mod support;

use support::*;

#[test]
fn every_example_manifest_is_accepted_by_the_api_server() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    let dir = repo_root().join("examples");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            count += 1;
            sb.kubectl_ok(&["apply", "-f", path.to_str().unwrap()]);
        }
    }
    assert!(count >= 2, "no examples found");
    let out = sb.kubectl_ok(&["get", "quartet", "-A", "-o", "name"]);
    assert!(
        out.contains("secretspolicy.secrets.quartet.dev/app-read"),
        "{out}"
    );
    assert!(out.contains("connection.quartet.dev/secrets"), "{out}");
}
