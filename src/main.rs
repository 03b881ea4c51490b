//! The `quartet` binary: the command line of [`quartet::cmd`], nothing else.

/// jemalloc rather than the C library's allocator. At 10,000 resources (glibc build, same
/// sandbox) it took the operator's anonymous memory from 50 to 44-45 MiB and its CPU from 7.2 to
/// 6.1-6.7 s (benches/RESULTS.md); the image is a static musl binary, whose allocator takes
/// one lock for all threads.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The production build's jemalloc settings: pages freed are returned to the system at once
/// (`dirty_decay_ms:0,muzzy_decay_ms:0`) instead of up to ten seconds later, and all threads
/// share one arena (`narenas:1`) instead of four per core each holding partly used pages. The
/// peak of 10,000 creations took about 2 MiB less (48.0-48.6 against 50.1-50.9 MiB when
/// measured), for a few percent more CPU (benches/RESULTS.md); a container's memory limit is met by what the operator holds,
/// not by what its allocator keeps in reserve. `_RJEM_MALLOC_CONF` overrides them. The dev build
/// keeps jemalloc's defaults: there the same process may be the sandbox's API server, which
/// allocates far more and would pay for each page returned.
#[cfg(all(not(target_env = "msvc"), not(feature = "sandbox")))]
#[allow(non_upper_case_globals)]
#[export_name = "_rjem_malloc_conf"]
pub static malloc_conf: &[u8] = b"dirty_decay_ms:0,muzzy_decay_ms:0,narenas:1\0";

fn main() -> std::process::ExitCode {
    quartet::cmd::main()
}
