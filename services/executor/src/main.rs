fn main() -> std::process::ExitCode {
    dialectic_runtime::run_main("executor", dialectic_executor::start)
}
