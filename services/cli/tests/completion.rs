//! `dialectic completion SHELL` prints a script the shell loads; at each
//! Tab it calls back into `dialectic` (`COMPLETE=<shell>`), which answers.
//! (Ids, stages and models asked of a gateway: tests/tests/cli_habits_more.rs.)

use std::process::Command;

fn script(shell: &str) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_dialectic"))
        .args(["completion", shell])
        .output()
        .expect("dialectic runs");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).expect("utf-8")
}

fn bash(line: &str) -> std::process::Output {
    let command = format!(
        "source <('{}' completion bash) && {line}",
        env!("CARGO_BIN_EXE_dialectic")
    );
    Command::new("bash")
        .args(["--norc", "-c", &command])
        .output()
        .expect("bash runs")
}

#[test]
fn the_bash_script_loads_and_completes_nouns_then_verbs() {
    let loaded = bash("complete -p dialectic");
    assert!(loaded.status.success(), "{loaded:?}");
    assert!(String::from_utf8_lossy(&loaded.stdout).contains("dialectic"));
    // What bash does on `dialectic sess<TAB>` and `dialectic session wa<TAB>`.
    let nouns = bash(
        "COMP_WORDS=(dialectic sess); COMP_CWORD=1; _clap_complete_dialectic dialectic sess dialectic; \
         echo \"${COMPREPLY[@]}\"",
    );
    assert_eq!(String::from_utf8_lossy(&nouns.stdout).trim(), "session");
    let verbs = bash(
        "COMP_WORDS=(dialectic session wa); COMP_CWORD=2; _clap_complete_dialectic dialectic wa session; \
         echo \"${COMPREPLY[@]}\"",
    );
    assert_eq!(String::from_utf8_lossy(&verbs.stdout).trim(), "watch");
    // The hidden spellings of earlier releases (`projects`, `project-docs`) are not offered.
    let hidden = bash(
        "COMP_WORDS=(dialectic proj); COMP_CWORD=1; _clap_complete_dialectic dialectic proj dialectic; \
         echo \"${COMPREPLY[@]}\"",
    );
    assert_eq!(String::from_utf8_lossy(&hidden.stdout).trim(), "project");
}

#[test]
fn zsh_and_fish_get_their_own_scripts() {
    assert!(script("zsh").starts_with("#compdef dialectic"));
    assert!(script("fish").contains("complete --keep-order --exclusive --command dialectic"));
}
