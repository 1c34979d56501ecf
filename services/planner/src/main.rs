fn main() -> std::process::ExitCode {
    dialectic_runtime::run_main("planner", dialectic_planner::start)
}
