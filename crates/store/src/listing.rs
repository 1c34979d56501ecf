//! Paged lists of a user's projects and sessions, and project deletion.
//! Pages run on (created_at, id) (or (name, id)), newest first unless the
//! caller orders otherwise, so a row inserted while a client pages never
//! shifts what it has not read yet. Filters come parsed from
//! `dialectic_core::list_filter`.

pub use crate::error::DeleteError;
use crate::projects::{PROJECT_COLUMNS, ProjectRow};
use crate::sessions::{SESSION_COLUMNS, SessionRow};
use crate::{StoreError, Tx};
use chrono::{DateTime, Utc};
use dialectic_core::ids::{ProjectId, SessionId, UserId};
use dialectic_core::job::JobStatus;
use dialectic_core::list_filter::{ListFilter, ListOrder};
use sqlx::{PgPool, Postgres, QueryBuilder};

/// Where the previous page stopped: the last row's (created_at, id).
pub type Cursor<Id> = (DateTime<Utc>, Id);

/// One page's request: how many rows after which cursor, under a filter
/// and an order. Every value is bound; only fixed SQL text is pushed.
pub struct Page<'a, Id> {
    pub limit: i64,
    pub after: Option<Cursor<Id>>,
    pub filter: &'a ListFilter,
    pub order: ListOrder,
}

pub async fn projects(
    pool: &PgPool,
    user_id: UserId,
    page: &Page<'_, ProjectId>,
) -> Result<Vec<ProjectRow>, StoreError> {
    let mut q = QueryBuilder::<Postgres>::new(format!(
        "SELECT {PROJECT_COLUMNS} FROM dialectic_projects WHERE deleted_at IS NULL AND user_id = "
    ));
    q.push_bind(user_id);
    if let Some(name) = &page.filter.name {
        let op = if name.case_insensitive() {
            "ILIKE"
        } else {
            "LIKE"
        };
        q.push(format_args!(" AND project_name {op} "))
            .push_bind(name.like_pattern());
    }
    // A name cursor is the row's id: its name is read back, so no name
    // travels in the token.
    push_page(
        &mut q,
        page,
        "(SELECT p.project_name FROM dialectic_projects p WHERE p.id = ",
        "project_name",
    );
    Ok(q.build_query_as::<ProjectRow>().fetch_all(pool).await?)
}

pub async fn sessions(
    pool: &PgPool,
    user_id: UserId,
    project_id: ProjectId,
    page: &Page<'_, SessionId>,
) -> Result<Vec<SessionRow>, StoreError> {
    let mut q = QueryBuilder::<Postgres>::new(format!(
        "SELECT {SESSION_COLUMNS} FROM dialectic_sessions WHERE project_id = "
    ));
    q.push_bind(project_id)
        .push(" AND user_id = ")
        .push_bind(user_id);
    if let Some(state) = page.filter.state {
        q.push(" AND status LIKE ")
            .push_bind(state.status_like_pattern());
    }
    push_page(&mut q, page, "", "");
    Ok(q.build_query_as::<SessionRow>().fetch_all(pool).await?)
}

/// The created_at bounds, the cursor, the order and the limit. `name_of` and
/// `name_column` serve name orders (empty where the list has none).
fn push_page<Id>(
    q: &mut QueryBuilder<'_, Postgres>,
    page: &Page<'_, Id>,
    name_of: &str,
    name_column: &str,
) where
    Id: Copy + Send + for<'q> sqlx::Encode<'q, Postgres> + sqlx::Type<Postgres> + 'static,
{
    for (bound, strict, loose) in [
        (page.filter.created_after, " > ", " >= "),
        (page.filter.created_before, " < ", " <= "),
    ] {
        if let Some(b) = bound {
            q.push(" AND created_at")
                .push(if b.inclusive { loose } else { strict })
                .push_bind(b.at);
        }
    }
    let (key, cmp, direction) = match page.order {
        ListOrder::CreatedDesc => ("created_at", "<", "DESC"),
        ListOrder::CreatedAsc => ("created_at", ">", "ASC"),
        ListOrder::NameAsc => (name_column, ">", "ASC"),
        ListOrder::NameDesc => (name_column, "<", "DESC"),
    };
    if let Some((at, id)) = page.after {
        q.push(format_args!(" AND ({key}, id) {cmp} ("));
        if key == "created_at" {
            q.push_bind(at);
        } else {
            q.push(name_of).push_bind(id).push(")");
        }
        q.push(", ").push_bind(id).push(")");
    }
    q.push(format_args!(
        " ORDER BY {key} {direction}, id {direction} LIMIT "
    ))
    .push_bind(page.limit);
}

/// Marks the caller's project deleted under the project's row lock and
/// returns its sessions, locked, for the planner to abandon (claims refuse an
/// abandoned session's jobs, so nothing queued runs later); refused while a
/// job is running (its worker would write objects after they were removed).
pub async fn delete_project(
    tx: &mut Tx<'_>,
    user_id: UserId,
    project_id: ProjectId,
) -> Result<Vec<SessionRow>, DeleteError> {
    sqlx::query_scalar::<_, ProjectId>(
        "SELECT id FROM dialectic_projects
         WHERE id = $1 AND user_id = $2 AND deleted_at IS NULL FOR UPDATE",
    )
    .bind(project_id)
    .bind(user_id)
    .fetch_optional(&mut **tx)
    .await?
    .ok_or_else(|| StoreError::not_found("project", project_id))?;
    // Sessions locked first, so no planner transition of theirs interleaves.
    // (A claim racing this transaction may still start one job; its outputs
    // land under a deleted project and are never read.)
    let sessions = sqlx::query_as::<_, SessionRow>(&format!(
        "SELECT {SESSION_COLUMNS} FROM dialectic_sessions WHERE project_id = $1 ORDER BY id FOR UPDATE"
    ))
    .bind(project_id)
    .fetch_all(&mut **tx)
    .await?;
    let busy: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM dialectic_generation_jobs j JOIN dialectic_sessions s ON s.id = j.session_id
         WHERE s.project_id = $1 AND j.status = $2",
    )
    .bind(project_id)
    .bind(JobStatus::Processing.as_str())
    .fetch_one(&mut **tx)
    .await?;
    if busy > 0 {
        return Err(DeleteError::Busy(busy));
    }
    sqlx::query("UPDATE dialectic_projects SET deleted_at = now() WHERE id = $1")
        .bind(project_id)
        .execute(&mut **tx)
        .await?;
    // The questions asked of it go with it (the row is only marked deleted).
    sqlx::query("DELETE FROM dialectic_query_history WHERE project_id = $1")
        .bind(project_id)
        .execute(&mut **tx)
        .await?;
    Ok(sessions)
}
