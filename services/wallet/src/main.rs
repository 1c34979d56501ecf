fn main() -> std::process::ExitCode {
    dialectic_runtime::run_main("wallet", dialectic_wallet::start)
}
