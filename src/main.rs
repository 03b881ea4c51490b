fn main() -> std::process::ExitCode {
    quartet::cmd::main()
}
