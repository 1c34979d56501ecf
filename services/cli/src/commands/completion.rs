//! `completion bash|zsh|fish`: a shell completion script on stdout.

use crate::cli::Cli;
use anyhow::Result;
use clap::CommandFactory;

/// The script offers what `--help` shows: clap_complete's generators would
/// also offer the hidden deprecated spellings, so they are left out here.
pub fn print(shell: clap_complete::Shell) -> Result<()> {
    let full = Cli::command();
    let mut shown = clap::Command::new("dialectic")
        .args(full.get_arguments().cloned())
        .subcommands(full.get_subcommands().filter(|c| !c.is_hide_set()).cloned());
    clap_complete::generate(shell, &mut shown, "dialectic", &mut std::io::stdout());
    Ok(())
}
