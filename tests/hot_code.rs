//! The `dist` binary's hot code first (link/README.md): the linker wrapper puts the listed
//! functions first and leaves every other link alone, and the committed list still names the
//! functions the build has. x86_64 Linux only, the one platform `.cargo/config.toml` orders.
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{repo_root, BIN};

fn wrapper() -> PathBuf {
    repo_root().join("link/hot-code-first")
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("the command starts");
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// The demangled names of a binary's functions, by `nm`, as the wrapper reads them.
fn functions(binary: &Path) -> Vec<(u64, String)> {
    run(Command::new("nm")
        .args(["-p", "--defined-only", "--demangle"])
        .arg(binary))
    .lines()
    .filter_map(|line| {
        let mut parts = line.splitn(3, ' ');
        let addr = u64::from_str_radix(parts.next()?, 16).ok()?;
        let kind = parts.next()?;
        let name = parts.next()?;
        matches!(kind, "t" | "T").then(|| (addr, name.to_string()))
    })
    .collect()
}

/// Whether the binary has a `.relr.dyn` section (`-z pack-relative-relocs`).
fn has_packed_relocations(binary: &Path) -> bool {
    run(Command::new("readelf").arg("-SW").arg(binary)).contains(".relr.dyn")
}

/// Links `main` and three functions, each in its own section (as rustc emits them), through the
/// wrapper with a list naming two of them and one name no object has, to
/// `<tmp>/target/<profile>/deps/quartet-0123`.
fn link_through_wrapper(profile: &str) -> (tempfile::TempDir, PathBuf) {
    link_to(profile, true)
}

/// The same link to `<tmp>/target/<under>/deps/quartet-0123`; without `test_list`, with the
/// list the wrapper picks itself.
fn link_to(under: &str, test_list: bool) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let out = dir.join(format!("target/{under}/deps/quartet-0123"));
    let src = dir.join("f.c");
    std::fs::write(
        &src,
        "int alpha(int x) { return x + 1; }\n\
         int beta(int x) { return x * 3; }\n\
         int delta(int x) { return x - 7; }\n\
         int main(void) { return alpha(1) + beta(2) + delta(9) - 10; }\n",
    )
    .unwrap();
    let obj = dir.join("f.o");
    run(Command::new("cc")
        .args(["-c", "-O0", "-ffunction-sections"])
        .arg(&src)
        .arg("-o")
        .arg(&obj));
    let list = dir.join("list.txt");
    std::fs::write(&list, "delta\nno_such_function\nbeta\n").unwrap();
    let sysroot = run(Command::new("rustc").args(["--print", "sysroot"]));
    let rustlib = Path::new(sysroot.trim()).join("lib/rustlib/x86_64-unknown-linux-gnu/lib");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let mut link = Command::new(wrapper());
    if test_list {
        link.env("QUARTET_HOT_FUNCTIONS", &list);
    } else {
        link.env_remove("QUARTET_HOT_FUNCTIONS");
    }
    run(link
        .arg(format!("-L{}", rustlib.display()))
        .arg(&obj)
        .arg("-o")
        .arg(&out));
    (tmp, out)
}

#[test]
fn the_linker_puts_the_listed_functions_of_the_dist_binary_first_in_the_lists_order() {
    let (_tmp, out) = link_through_wrapper("dist");

    let mut by_address = functions(&out);
    by_address.sort();
    let addr = |name: &str| {
        by_address
            .iter()
            .find(|(_, n)| n == name)
            .unwrap_or_else(|| panic!("{name} is in the binary"))
            .0
    };
    let lowest = by_address.iter().map(|(a, _)| *a).min().unwrap();
    assert_eq!(
        addr("delta"),
        lowest,
        "the first listed function comes first: {by_address:?}"
    );
    assert!(
        addr("delta") < addr("beta"),
        "the list's order: {by_address:?}"
    );
    assert!(
        addr("beta") < addr("alpha") && addr("beta") < addr("main"),
        "{by_address:?}"
    );

    assert!(
        has_packed_relocations(&out),
        "the dist binary's relocations are packed"
    );

    let report = std::fs::read_to_string(format!("{}.hot-code", out.display())).unwrap();
    assert_eq!(report.trim(), "2 of 3 listed functions found");
    // The ordered binary is a working program.
    let status = Command::new(&out).status().unwrap();
    assert_eq!(status.code(), Some(0));
}

/// The image's static musl binary has a list of its own, trained on it (it runs musl's own
/// functions, which a glibc binary leaves to the shared C library): the wrapper takes it for a
/// `dist` binary under `target/x86_64-unknown-linux-musl/` and the glibc list for the others.
#[test]
fn a_musl_dist_binary_is_ordered_by_the_list_trained_on_musl() {
    // The report tells the lists apart by their lengths only.
    let count = |list: &str| {
        let names = std::fs::read_to_string(repo_root().join("link").join(list)).unwrap();
        names
            .lines()
            .filter(|l| !l.is_empty())
            .collect::<HashSet<_>>()
            .len()
    };
    assert_ne!(
        count("hot-functions-musl.txt"),
        count("hot-functions.txt"),
        "the two lists must differ in length for this test to tell which one was used"
    );
    for (under, list) in [
        ("x86_64-unknown-linux-musl/dist", "hot-functions-musl.txt"),
        ("dist", "hot-functions.txt"),
    ] {
        let (_tmp, out) = link_to(under, false);
        let report = std::fs::read_to_string(format!("{}.hot-code", out.display())).unwrap();
        assert!(
            report
                .trim()
                .ends_with(&format!(" of {} listed functions found", count(list))),
            "a binary under target/{under}/ is ordered by link/{list}: {report}"
        );
    }
}

#[test]
fn every_other_link_is_left_as_cc_makes_it() {
    let (_tmp, out) = link_through_wrapper("release");
    assert!(
        !Path::new(&format!("{}.hot-code", out.display())).exists(),
        "a release link is not ordered"
    );
    assert!(!has_packed_relocations(&out), "cc's own relocations");
    let mut by_address = functions(&out);
    by_address.sort();
    let names: Vec<&str> = by_address.iter().map(|(_, n)| n.as_str()).collect();
    let pos = |n: &str| names.iter().position(|m| *m == n).unwrap();
    assert!(
        pos("alpha") < pos("delta"),
        "cc keeps the source's order: {names:?}"
    );
}

/// The lists are training runs' (link/train): when the code changes, some of their names go. The
/// test binary is a debug build, which has every function the `dist` build has (no function is
/// inlined away), under the same v0 names. A list that has lost more than a tenth of its names
/// leaves that much of the code the operator runs among the cold code: renew it. The musl list
/// is checked by its Rust functions (a `::` in the name): musl's own C functions are in no glibc
/// build.
#[test]
fn the_hot_code_lists_still_name_the_functions_the_build_has() {
    // v0 names start with `_R` and spell the crate as `7quartet`; the standard library's are
    // v0 whatever the flags, so only this crate's functions tell.
    let names = run(Command::new("nm").args(["-p", "--defined-only"]).arg(BIN));
    assert!(
        names
            .lines()
            .any(|l| l.contains(" _R") && l.contains("7quartet")),
        "{BIN} has no v0 symbol names: it was built without .cargo/config.toml's rustflags \
         (RUSTFLAGS replaces them), and no list can name its functions"
    );
    let have: HashSet<String> = functions(Path::new(BIN))
        .into_iter()
        .map(|(_, n)| n)
        .collect();

    for (file, rust_only) in [
        ("hot-functions.txt", false),
        ("hot-functions-musl.txt", true),
    ] {
        let list = std::fs::read_to_string(repo_root().join("link").join(file)).unwrap();
        let listed: Vec<&str> = list
            .lines()
            .filter(|l| !l.is_empty() && (!rust_only || l.contains("::")))
            .collect();
        assert!(
            listed.len() > 1000,
            "link/{file} holds what a training run found: {}",
            listed.len()
        );
        let missing: Vec<&&str> = listed.iter().filter(|n| !have.contains(**n)).collect();
        let share = missing.len() as f64 / listed.len() as f64;
        assert!(
            share <= 0.10,
            "{} of the {} functions link/{file} lists are gone from the build ({:.0} %), \
             for example {:?}: renew the list with link/train (link/README.md)",
            missing.len(),
            listed.len(),
            share * 100.0,
            &missing[..missing.len().min(5)]
        );
    }
}
