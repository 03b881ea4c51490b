//! The `quartet` binary: the command line of [`quartet::cmd`], nothing else.

fn main() -> std::process::ExitCode {
    quartet::cmd::main()
}
