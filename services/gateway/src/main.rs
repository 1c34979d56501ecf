fn main() -> std::process::ExitCode {
    dialectic_runtime::run_main("gateway", dialectic_gateway::start)
}
