fn main() -> std::process::ExitCode {
    dialectic_runtime::run_main("indexer", dialectic_indexer::start)
}
