//! The `quartet` binary: the command line of [`quartet::cmd`], nothing else.

/// jemalloc rather than the C library's allocator. At 10,000 resources (glibc build, same
/// sandbox) it took the operator's anonymous memory from 50 to 44-45 MiB and its CPU from 7.2 to
/// 6.1-6.7 s (benches/RESULTS.md); the image is a static musl binary, whose allocator takes
/// one lock for all threads.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    quartet::cmd::main()
}
