//! The flat spellings of earlier releases (`dialectic projects`,
//! `delete-project`, `status`, …), hidden from help and kept for one
//! release so scripts have time to move; each becomes its noun-verb command
//! before anything runs. Delete this file and `Command::Deprecated` then.

use crate::cli::{
    AddDocs, Ask, Blackboard, Command, CreateProject, DeleteProject, Export, ListProjects,
    ListSessions, ModelCommand, ProjectCommand, ProjectRef, Retry, Revisit, SessionCommand,
    SessionRef, StartSession, Submit, Watch,
};
use clap::Subcommand;

#[derive(Subcommand)]
pub enum Deprecated {
    #[command(hide = true)]
    Create(CreateProject),
    #[command(hide = true)]
    Projects(ListProjects),
    #[command(hide = true)]
    DeleteProject(DeleteProject),
    #[command(hide = true)]
    AddDoc(AddDocs),
    #[command(hide = true)]
    ProjectDocs(ProjectRef),
    #[command(hide = true)]
    Ask(Ask),
    #[command(hide = true)]
    Export(Export),
    #[command(hide = true)]
    Sessions(ListSessions),
    #[command(hide = true)]
    Start(StartSession),
    #[command(hide = true)]
    Status(SessionRef),
    #[command(hide = true)]
    Watch(Watch),
    #[command(hide = true, alias = "feedback")]
    Submit(Submit),
    #[command(hide = true)]
    Pause(SessionRef),
    #[command(hide = true)]
    Resume(SessionRef),
    #[command(hide = true)]
    Cancel(SessionRef),
    #[command(hide = true)]
    Retry(Retry),
    #[command(hide = true)]
    Revisit(Revisit),
    #[command(hide = true)]
    Blackboard(Blackboard),
    #[command(hide = true)]
    Models,
}

impl Deprecated {
    /// The command this spelling now is, and how to spell it.
    pub fn current(self) -> (Command, &'static str) {
        use Command::{Model, Project, Session};
        match self {
            Self::Create(a) => (Project(ProjectCommand::Create(a)), "project create"),
            Self::Projects(a) => (Project(ProjectCommand::List(a)), "project list"),
            Self::DeleteProject(a) => (Project(ProjectCommand::Delete(a)), "project delete"),
            Self::AddDoc(a) => (Project(ProjectCommand::AddDoc(a)), "project add-doc"),
            Self::ProjectDocs(a) => (Project(ProjectCommand::Docs(a)), "project docs"),
            Self::Ask(a) => (Project(ProjectCommand::Ask(a)), "project ask"),
            Self::Export(a) => (Project(ProjectCommand::Export(a)), "project export"),
            Self::Sessions(a) => (Session(SessionCommand::List(a)), "session list"),
            Self::Start(a) => (Session(SessionCommand::Start(a)), "session start"),
            Self::Status(a) => (Session(SessionCommand::Status(a)), "session status"),
            Self::Watch(a) => (Session(SessionCommand::Watch(a)), "session watch"),
            Self::Submit(a) => (Session(SessionCommand::Submit(a)), "session submit"),
            Self::Pause(a) => (Session(SessionCommand::Pause(a)), "session pause"),
            Self::Resume(a) => (Session(SessionCommand::Resume(a)), "session resume"),
            Self::Cancel(a) => (Session(SessionCommand::Cancel(a)), "session cancel"),
            Self::Retry(a) => (Session(SessionCommand::Retry(a)), "session retry"),
            Self::Revisit(a) => (Session(SessionCommand::Revisit(a)), "session revisit"),
            Self::Blackboard(a) => (Session(SessionCommand::Blackboard(a)), "session blackboard"),
            Self::Models => (Model(ModelCommand::List), "model list"),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::cli::Command;
    use crate::cli::tests::parse;

    /// Every old spelling, with flags, and the new one it must become.
    const MOVED: &[(&[&str], &str)] = &[
        (
            &["create", "--name", "N", "--prompt", "p"],
            "project create",
        ),
        (&["projects", "--limit", "5"], "project list"),
        (&["delete-project", "--project", "P"], "project delete"),
        (&["add-doc", "--project", "P", "a.md"], "project add-doc"),
        (&["project-docs", "--project", "P"], "project docs"),
        (&["ask", "--project", "P", "why?"], "project ask"),
        (&["export", "--project", "P", "--url"], "project export"),
        (&["sessions", "--project", "P"], "session list"),
        (
            &["start", "--project", "P", "--model", "m"],
            "session start",
        ),
        (&["status", "--session", "S"], "session status"),
        (
            &["watch", "--session", "S", "--until", "paused"],
            "session watch",
        ),
        (
            &["submit", "--session", "S", "--stage", "t"],
            "session submit",
        ),
        (
            &["feedback", "--session", "S", "--stage", "t"],
            "session submit",
        ),
        (&["pause", "--session", "S"], "session pause"),
        (&["resume", "--session", "S"], "session resume"),
        (&["cancel", "--session", "S"], "session cancel"),
        (
            &["retry", "--session", "S", "--model", "m"],
            "session retry",
        ),
        (
            &[
                "revisit",
                "--session",
                "S",
                "--stage",
                "t",
                "--impact",
                "minor",
            ],
            "session revisit",
        ),
        (
            &["blackboard", "--session", "S", "--type", "x"],
            "session blackboard",
        ),
        (&["models"], "model list"),
    ];

    #[test]
    fn each_old_spelling_becomes_its_noun_verb_command_with_the_same_flags() {
        for (old, new) in MOVED {
            let spelled = match parse(old).map(|c| c.command) {
                Ok(Command::Deprecated(d)) => d.current().1,
                Ok(_) => panic!("{old:?} is not a deprecated spelling"),
                Err(e) => panic!("{old:?} no longer parses: {e}"),
            };
            assert_eq!(spelled, *new, "{old:?}");
            let now: Vec<&str> = new.split(' ').chain(old[1..].iter().copied()).collect();
            assert!(
                matches!(
                    parse(&now).map(|c| c.command),
                    Ok(Command::Project(_) | Command::Session(_) | Command::Model(_))
                ),
                "{now:?} does not parse as a noun-verb command"
            );
        }
    }

    #[test]
    fn docs_is_still_doc() {
        assert!(matches!(
            parse(&["docs", "list", "--session", "S"]).map(|c| c.command),
            Ok(Command::Doc(_))
        ));
    }
}
