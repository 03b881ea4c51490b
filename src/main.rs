fn main() -> std::process::ExitCode {
    quartet::cli::main()
}
