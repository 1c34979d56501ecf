//! How a command names the object it acts on (issue 61): as its first
//! argument (`dialectic session status S`) or, as before, by flag
//! (`--session S`); a project also by its name when no other project of the
//! caller has it, and a session as `last`, the caller's newest.

use crate::exit::{Failed, Kind};
use crate::gateway::Gateway;
use anyhow::Result;
use clap::Args;
use dialectic_proto::v1::{ListProjectsRequest, ListSessionsRequest, Project, Session};

/// The word that names the caller's newest session wherever a session is taken.
pub const LAST: &str = "last";

// Each names its object by a positional argument or by the flag of earlier
// releases, exactly one of them: clap refuses both or neither before anything runs.

/// A project: `PROJECT` or `--project PROJECT`.
#[derive(Args, Clone, Debug, Default)]
pub struct ProjectRef {
    /// The project's id, or its name when no other project of yours has that name.
    #[arg(
        value_name = "PROJECT",
        required_unless_present = "project",
        conflicts_with = "project"
    )]
    pub project_arg: Option<String>,
    /// The same, as a flag (the spelling of earlier releases).
    #[arg(long, value_name = "PROJECT")]
    pub project: Option<String>,
}

impl ProjectRef {
    /// What the command line gave, positionally or by flag.
    pub fn given(&self) -> &str {
        self.project_arg
            .as_deref()
            .or(self.project.as_deref())
            .unwrap_or_default()
    }
}

/// A session: `SESSION` or `--session SESSION`.
#[derive(Args, Clone, Debug, Default)]
pub struct SessionRef {
    /// The session's id, or `last` for your newest session.
    #[arg(
        value_name = "SESSION",
        required_unless_present = "session",
        conflicts_with = "session"
    )]
    pub session_arg: Option<String>,
    /// The same, as a flag (the spelling of earlier releases).
    #[arg(long, value_name = "SESSION")]
    pub session: Option<String>,
}

impl SessionRef {
    /// What the command line gave, positionally or by flag.
    pub fn given(&self) -> &str {
        self.session_arg
            .as_deref()
            .or(self.session.as_deref())
            .unwrap_or_default()
    }
}

/// A rendered document: `RESOURCE` or `--resource RESOURCE`.
#[derive(Args, Clone, Debug, Default)]
pub struct ResourceRef {
    /// The document's resource id (`dialectic doc list`).
    #[arg(
        value_name = "RESOURCE",
        required_unless_present = "resource",
        conflicts_with = "resource"
    )]
    pub resource_arg: Option<String>,
    /// The same, as a flag (the spelling of earlier releases).
    #[arg(long, value_name = "RESOURCE")]
    pub resource: Option<String>,
}

impl ResourceRef {
    /// What the command line gave, positionally or by flag.
    pub fn given(&self) -> &str {
        self.resource_arg
            .as_deref()
            .or(self.resource.as_deref())
            .unwrap_or_default()
    }
}

/// A stage: `STAGE` or `--stage STAGE`.
#[derive(Args, Clone, Debug, Default)]
pub struct StageRef {
    /// The stage's slug (`dialectic recipe list`), e.g. thesis.
    #[arg(
        value_name = "STAGE",
        required_unless_present = "stage",
        conflicts_with = "stage"
    )]
    pub stage_arg: Option<String>,
    /// The same, as a flag (the spelling of earlier releases).
    #[arg(long, value_name = "STAGE")]
    pub stage: Option<String>,
}

impl StageRef {
    /// What the command line gave, positionally or by flag.
    pub fn given(&self) -> &str {
        self.stage_arg
            .as_deref()
            .or(self.stage.as_deref())
            .unwrap_or_default()
    }
}

impl ProjectRef {
    pub async fn id(&self, gateway: &Gateway) -> Result<String> {
        project_id(gateway, self.given()).await
    }
}

impl SessionRef {
    pub async fn id(&self, gateway: &Gateway) -> Result<String> {
        session_id(gateway, self.given()).await
    }
}

/// A project's id from its id or its name. A name must be one project's:
/// when several have it, the error lists them so the caller can pick by id.
pub async fn project_id(gateway: &Gateway, given: &str) -> Result<String> {
    if uuid::Uuid::parse_str(given).is_ok() {
        return Ok(given.to_string());
    }
    let named = projects_named(gateway, given).await?;
    match named.as_slice() {
        [one] => Ok(one.id.clone()),
        [] => Err(Failed::new(
            Kind::NotFound,
            format!("no project has the id or name {given:?} (`dialectic project list`)"),
        )
        .into()),
        several => Err(Failed::new(Kind::Usage, ambiguous(given, several)).into()),
    }
}

fn ambiguous(given: &str, projects: &[Project]) -> String {
    let mut message = format!(
        "{} projects are named {given:?}; name one by its id:",
        projects.len()
    );
    for p in projects {
        let created = p
            .created_at
            .as_ref()
            .map_or_else(String::new, |t| format!("  created {}", timestamp(t)));
        message.push_str(&format!("\n  {}  {}{created}", p.id, p.name));
    }
    message
}

fn timestamp(t: &prost_types::Timestamp) -> String {
    let at = std::time::UNIX_EPOCH
        + std::time::Duration::new(
            u64::try_from(t.seconds).unwrap_or(0),
            u32::try_from(t.nanos).unwrap_or(0),
        );
    humantime::format_rfc3339_seconds(at).to_string()
}

/// The caller's projects whose name is exactly `name` (the API's `name = "…"`).
async fn projects_named(gateway: &Gateway, name: &str) -> Result<Vec<Project>> {
    let quoted = name.replace('\\', "\\\\").replace('"', "\\\"");
    let filter = format!("name = \"{quoted}\"");
    crate::paging::all("projects", |page_size, page_token| {
        let filter = filter.clone();
        async move {
            let page = gateway
                .call(|mut c| {
                    let request = gateway.request(ListProjectsRequest {
                        page_size,
                        page_token: page_token.clone(),
                        filter: filter.clone(),
                        order_by: String::new(),
                    });
                    async move { c.list_projects(request).await }
                })
                .await?;
            Ok((page.projects, page.next_page_token))
        }
    })
    .await
}

/// A session's id; `last` is the caller's newest session.
pub async fn session_id(gateway: &Gateway, given: &str) -> Result<String> {
    if given == LAST {
        return Ok(last_session(gateway, None).await?.id);
    }
    Ok(given.to_string())
}

/// The newest session of a project, or of all the caller's projects.
pub async fn last_session(gateway: &Gateway, project: Option<&str>) -> Result<Session> {
    let projects = match project {
        Some(given) => vec![project_id(gateway, given).await?],
        None => all_project_ids(gateway).await?,
    };
    let mut newest: Option<Session> = None;
    for project in projects {
        let Some(session) = newest_of(gateway, &project).await? else {
            continue;
        };
        let key = |s: &Session| s.created_at.as_ref().map(|t| (t.seconds, t.nanos));
        if newest.as_ref().is_none_or(|n| key(&session) > key(n)) {
            newest = Some(session);
        }
    }
    newest.ok_or_else(|| {
        let whose = project.map_or("you have".to_string(), |p| format!("project {p} has"));
        Failed::new(Kind::NotFound, format!("{whose} no sessions yet")).into()
    })
}

async fn all_project_ids(gateway: &Gateway) -> Result<Vec<String>> {
    let projects = crate::paging::all("projects", |page_size, page_token| async move {
        let page = gateway
            .call(|mut c| {
                let request = gateway.request(ListProjectsRequest {
                    page_size,
                    page_token: page_token.clone(),
                    ..Default::default()
                });
                async move { c.list_projects(request).await }
            })
            .await?;
        Ok((page.projects, page.next_page_token))
    })
    .await?;
    Ok(projects.into_iter().map(|p| p.id).collect())
}

/// One call: the project's sessions newest first, a page of one.
async fn newest_of(gateway: &Gateway, project: &str) -> Result<Option<Session>> {
    let page = gateway
        .call(|mut c| {
            let request = gateway.request(ListSessionsRequest {
                project_id: project.to_string(),
                page_size: 1,
                order_by: "created_at desc".into(),
                ..Default::default()
            });
            async move { c.list_sessions(request).await }
        })
        .await?;
    Ok(page.sessions.into_iter().next())
}

#[cfg(test)]
mod tests {
    use crate::cli::tests::parse;

    #[test]
    fn an_object_is_named_positionally_or_by_flag_but_not_both() {
        assert!(parse(&["session", "status", "S"]).is_ok());
        assert!(parse(&["session", "status", "--session", "S"]).is_ok());
        assert!(parse(&["session", "status"]).is_err(), "neither");
        assert!(
            parse(&["session", "status", "S", "--session", "T"]).is_err(),
            "both"
        );
        assert!(parse(&["project", "show", "My project"]).is_ok());
        assert!(parse(&["recipe", "show", "thesis"]).is_ok());
        assert!(parse(&["doc", "show", "R"]).is_ok());
    }

    #[test]
    fn an_ambiguous_name_lists_every_candidate() {
        let p = |id: &str| dialectic_proto::v1::Project {
            id: id.into(),
            name: "Twin".into(),
            ..Default::default()
        };
        let message = super::ambiguous("Twin", &[p("a1"), p("b2")]);
        assert!(
            message.starts_with("2 projects are named \"Twin\""),
            "{message}"
        );
        assert!(message.contains("\n  a1  Twin") && message.contains("\n  b2  Twin"));
    }
}
