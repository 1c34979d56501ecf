//! An example under every command's `--help` (issue 61): kept in one table
//! rather than beside each definition, so a test can see that no command
//! lacks one and that each example still parses.

use clap::Command;

/// Command path (space separated, without `dialectic`) and its examples.
const EXAMPLES: &[(&str, &str)] = &[
    ("project", "dialectic project list --fields id,name"),
    (
        "project list",
        "dialectic project list --filter 'name:\"draft*\"' --limit 20\n  dialectic project list --jq '.[].id'",
    ),
    (
        "project create",
        "dialectic project create --name 'Tool library' --prompt 'A tool library for a small town'\n  dialectic project create --name Essay --prompt-file brief.md --pipeline essay",
    ),
    (
        "project show",
        "dialectic project show 'Tool library'\n  dialectic project show 0190f1c2-…",
    ),
    (
        "project delete",
        "dialectic project delete 'Tool library'\n  dialectic project delete 0190f1c2-… --yes",
    ),
    (
        "project add-doc",
        "dialectic project add-doc --project 'Tool library' notes.md writing_sample=old-essay.md",
    ),
    ("project docs", "dialectic project docs 'Tool library'"),
    (
        "project ask",
        "dialectic project ask --project 'Tool library' Who pays for repairs?",
    ),
    (
        "project export",
        "dialectic project export 'Tool library' --out library.zip\n  dialectic project export 'Tool library' --url",
    ),
    ("query", "dialectic query history 'Tool library'"),
    (
        "query history",
        "dialectic query history 'Tool library' --limit 10",
    ),
    (
        "contract",
        "dialectic contract analysis --project 0190f1c2-… --section 7",
    ),
    (
        "contract analysis",
        "dialectic contract analysis --project 0190f1c2-… --section 7\n  dialectic contract analysis --session 0190f1d4-… -o json",
    ),
    ("session", "dialectic session last"),
    (
        "session list",
        "dialectic session list 'Tool library' --filter 'state = RUNNING'",
    ),
    (
        "session last",
        "dialectic session last\n  dialectic session last 'Tool library' --jq .id",
    ),
    (
        "session start",
        "dialectic session start 'Tool library' --model gpt-4o --auto-advance",
    ),
    (
        "session status",
        "dialectic session status last\n  dialectic session status 0190f1c2-…",
    ),
    (
        "session watch",
        "dialectic session watch last --until iteration_complete_pending_review",
    ),
    (
        "session submit",
        "dialectic session submit last --stage thesis --feedback 'Cover the insurance question'",
    ),
    ("session pause", "dialectic session pause last"),
    ("session resume", "dialectic session resume last"),
    ("session cancel", "dialectic session cancel 0190f1c2-…"),
    ("session complete", "dialectic session complete last"),
    (
        "session retry",
        "dialectic session retry last --model gpt-4o-mini",
    ),
    (
        "session revisit",
        "dialectic session revisit last --stage thesis --dry-run\n  dialectic session revisit last --stage thesis --impact moderate --reason 'new figures'",
    ),
    (
        "session blackboard",
        "dialectic session blackboard last --type risk",
    ),
    ("session history", "dialectic session history last"),
    ("doc", "dialectic doc list last"),
    ("doc list", "dialectic doc list last --stage thesis"),
    ("doc show", "dialectic doc show 0190f1c2-… > thesis.md"),
    ("doc chunks", "dialectic doc chunks 0190f1c2-…"),
    (
        "doc regenerate",
        "dialectic doc regenerate --session 0190f1c2-… --stage thesis --model gpt-4o --document business_case",
    ),
    ("doc edit", "dialectic doc edit 0190f1c2-… --file thesis.md"),
    (
        "doc override",
        "dialectic doc override 0190f1c2-… --claim 3 --rationale 'The 2024 figure is the audited one'",
    ),
    ("pipeline", "dialectic pipeline list"),
    (
        "pipeline list",
        "dialectic pipeline list --jq '.[] | select(.current) | .slug'",
    ),
    (
        "pipeline install",
        "dialectic pipeline install notes.toml --dry-run\n  dialectic pipeline install notes.toml",
    ),
    ("recipe", "dialectic recipe show thesis"),
    ("recipe list", "dialectic recipe list"),
    ("recipe show", "dialectic recipe show thesis"),
    (
        "recipe edit",
        "dialectic recipe edit thesis --skip fact_check --dry-run\n  dialectic recipe edit thesis --edge outline:draft",
    ),
    ("model", "dialectic model list"),
    (
        "model list",
        "dialectic model list --fields api_identifier,provider",
    ),
    ("wallet", "dialectic wallet --history 20"),
    ("wallet show", "dialectic wallet show --history 5"),
    ("history", "dialectic history last"),
    (
        "run",
        "dialectic run --name 'Tool library' --prompt 'A tool library for a small town' --until completed --wait 20m\n  dialectic run --name Essay --prompt-file brief.md --pipeline essay --doc source=paper.pdf",
    ),
    ("admin", "dialectic admin dlq list"),
    ("admin dlq", "dialectic admin dlq list --limit 10"),
    ("admin dlq list", "dialectic admin dlq list --limit 10"),
    ("admin dlq show", "dialectic admin dlq show 3f2a"),
    (
        "admin dlq replay",
        "dialectic admin dlq replay 3f2a 9c1e\n  dialectic admin dlq replay --all",
    ),
    ("auth", "dialectic auth status"),
    ("auth login", "dialectic auth login < key.txt"),
    ("auth status", "dialectic auth status"),
    ("context", "dialectic context list"),
    (
        "context add",
        "dialectic context add prod --gateway https://gw.example.com --ca-cert ca.pem --use",
    ),
    ("context use", "dialectic context use prod"),
    ("context list", "dialectic context list"),
    ("context delete", "dialectic context delete prod"),
    ("version", "dialectic version\n  dialectic version -o json"),
    (
        "completion",
        "source <(dialectic completion bash)\n  dialectic completion zsh > \"${fpath[1]}/_dialectic\"",
    ),
];

/// `command` with the examples of it and of every command under it.
pub fn with_examples(command: Command) -> Command {
    add(command, "")
}

fn add(mut command: Command, path: &str) -> Command {
    if let Some((_, example)) = EXAMPLES.iter().find(|(p, _)| *p == path) {
        command = command.after_help(format!("Examples:\n  {example}"));
    }
    let names: Vec<String> = command
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    for name in names {
        let below = if path.is_empty() {
            name.clone()
        } else {
            format!("{path} {name}")
        };
        command = command.mut_subcommand(&name, |c| add(c, &below));
    }
    command
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use clap::CommandFactory;

    /// Every command a person sees, with its path.
    fn visible(command: &Command, path: &str, found: &mut Vec<(String, Command)>) {
        for sub in command.get_subcommands().filter(|c| !c.is_hide_set()) {
            let below = if path.is_empty() {
                sub.get_name().to_string()
            } else {
                format!("{path} {}", sub.get_name())
            };
            found.push((below.clone(), sub.clone()));
            visible(sub, &below, found);
        }
    }

    fn all() -> Vec<(String, Command)> {
        let mut found = Vec::new();
        visible(&with_examples(Cli::command()), "", &mut found);
        found
    }

    #[test]
    fn every_command_shows_an_example() {
        let missing: Vec<String> = all()
            .into_iter()
            .filter(|(_, c)| c.get_after_help().is_none())
            .map(|(p, _)| p)
            .collect();
        assert!(missing.is_empty(), "no example: {missing:?}");
        let paths: Vec<String> = all().into_iter().map(|(p, _)| p).collect();
        for (path, _) in EXAMPLES {
            assert!(paths.iter().any(|p| p == path), "{path} is no command");
        }
    }

    #[test]
    fn every_flag_and_argument_says_what_it_is() {
        let mut missing = Vec::new();
        for (path, command) in all() {
            for arg in command.get_arguments().filter(|a| !a.is_hide_set()) {
                let id = arg.get_id().as_str();
                if matches!(id, "help" | "version") || arg.is_global_set() {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
        }
        let top = with_examples(Cli::command());
        for arg in top.get_arguments() {
            let id = arg.get_id().as_str();
            if !matches!(id, "help" | "version") && arg.get_help().is_none() {
                missing.push(format!("dialectic {id}"));
            }
        }
        assert!(missing.is_empty(), "no help: {missing:?}");
    }

    /// An example that no longer parses teaches a command that is gone.
    #[test]
    fn every_example_parses() {
        for (path, example) in EXAMPLES {
            for line in example.lines().map(str::trim) {
                let Some(args) = line.strip_prefix("dialectic ") else {
                    continue;
                };
                let words = shell_words(args);
                let parsed = with_examples(Cli::command())
                    .try_get_matches_from(std::iter::once("dialectic".to_string()).chain(words));
                assert!(parsed.is_ok(), "{path}: {line}: {parsed:?}");
            }
        }
    }

    /// Just enough of a shell: words, single and double quotes, and a
    /// redirection (`> file`, `< file`) dropped with its file.
    fn shell_words(line: &str) -> Vec<String> {
        let mut words = Vec::new();
        let mut word = String::new();
        let mut quote = None;
        let mut started = false;
        for c in line.chars() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), c) => word.push(c),
                (None, '\'' | '"') => {
                    quote = Some(c);
                    started = true;
                }
                (None, ' ') => {
                    if started || !word.is_empty() {
                        words.push(std::mem::take(&mut word));
                    }
                    started = false;
                }
                (None, c) => word.push(c),
            }
        }
        if started || !word.is_empty() {
            words.push(word);
        }
        if let Some(at) = words.iter().position(|w| w == ">" || w == "<") {
            words.truncate(at);
        }
        words
    }
}
