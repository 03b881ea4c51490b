//! Build script: the git commit `quartet --version` prints (`QUARTET_GIT_COMMIT` at compile
//! time), and a new link when the hot code list changes. The commit is taken from the
//! environment when set (an image built from a source archive passes it), else from
//! `git rev-parse --short HEAD`, else `unknown` (no git, or not a checkout).

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=QUARTET_GIT_COMMIT");
    // The `dist` binary is linked with these functions first (link/README.md): a new list must
    // link the binary again, which only a build of this package does.
    println!("cargo:rerun-if-changed=link/hot-functions.txt");
    println!("cargo:rerun-if-changed=link/hot-functions-musl.txt");
    println!("cargo:rerun-if-changed=link/hot-code-first");
    // Rebuild when HEAD moves: HEAD itself (a checkout of another branch), and the ref it points
    // to (a commit). In a worktree both live under paths `git rev-parse --git-path` resolves. A
    // path that does not exist would make cargo rerun this script on every build: leave it out.
    let mut watch = vec![git(&["rev-parse", "--git-path", "HEAD"])];
    if let Some(head_ref) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch.push(git(&["rev-parse", "--git-path", &head_ref]));
        watch.push(git(&["rev-parse", "--git-path", "packed-refs"]));
    }
    for path in watch.into_iter().flatten() {
        if Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    let commit = std::env::var("QUARTET_GIT_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| git(&["rev-parse", "--short", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=QUARTET_GIT_COMMIT={commit}");
}
