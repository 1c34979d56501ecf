fn main() -> std::process::ExitCode {
    dialectic_runtime::run_main("renderer", dialectic_renderer::start)
}
