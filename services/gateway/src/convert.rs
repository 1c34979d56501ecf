//! Pure mappings between rows, cache events and API messages.

use crate::error::GatewayError;
use chrono::{DateTime, Utc};
use dialectic_cache::ProgressEvent;
use dialectic_core::blackboard::StoredEntry;
use dialectic_core::ids::ModelId;
use dialectic_core::job::{JobStatus, JobType};
use dialectic_core::list_filter::ListOrder;
use dialectic_core::progress::EventKind;
use dialectic_core::pushback::Pushback;
use dialectic_core::session::SessionStatus;
use dialectic_proto::v1::{BlackboardEntry, SessionPosition};
use dialectic_proto::v1::{JobStatus as ApiJobStatus, JobType as ApiJobType, SessionEventKind};
use dialectic_proto::v1::{Model, Project, SessionEvent, StageDocument, StageJobCounts};
use dialectic_proto::v1::{ModelPrices, Money};
use dialectic_proto::v1::{Pushback as ApiPushback, SessionState, TransactionKind};
use dialectic_store::gates::LowConfidence;
use dialectic_store::models::{ModelRow, ModelSettings};
use dialectic_store::projects::ProjectRow;
use dialectic_store::resources::ResourceRow;
use prost_types::Timestamp;
use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

/// Models a session uses when the request names none.
pub const DEFAULT_MODELS: [&str; 1] = ["simulated"];

pub fn timestamp(at: DateTime<Utc>) -> Timestamp {
    Timestamp {
        seconds: at.timestamp(),
        nanos: i32::try_from(at.timestamp_subsec_nanos()).unwrap_or(0),
    }
}

/// Milliseconds since the epoch; 0 means the publisher did not say.
pub fn timestamp_from_ms(at_ms: i64) -> Option<Timestamp> {
    (at_ms != 0).then(|| Timestamp {
        seconds: at_ms.div_euclid(1000),
        nanos: i32::try_from(at_ms.rem_euclid(1000) * 1_000_000).unwrap_or(0),
    })
}

fn clamp_u32(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

/// The stage a freshly inserted session waits to start (`pending_thesis` → `thesis`).
pub fn stage_to_start(status: &str) -> Option<String> {
    match SessionStatus::parse(status) {
        Ok(SessionStatus::Pending(stage)) if !stage.is_empty() => Some(stage),
        _ => None,
    }
}

/// The stage a status names, if any (`running_antithesis` → `antithesis`).
pub fn stage_of_status(status: &str) -> Option<String> {
    SessionStatus::parse(status)
        .ok()
        .and_then(|s| s.stage().map(str::to_string))
}

/// Resolves requested models (api identifiers or ids of active models) to ids,
/// in request order without duplicates. Err names the first unknown model.
/// More models than this in one session request is a mistake or an attack:
/// each model multiplies every stage's jobs.
pub const MAX_MODELS_PER_SESSION: usize = 16;

pub fn resolve_models(
    requested: &[String],
    active: &[(ModelId, String)],
) -> Result<Vec<ModelId>, String> {
    let defaults: Vec<String>;
    let requested: &[String] = if requested.iter().all(|m| m.trim().is_empty()) {
        defaults = DEFAULT_MODELS.iter().map(|m| m.to_string()).collect();
        &defaults
    } else {
        requested
    };
    let mut ids = Vec::with_capacity(requested.len());
    for name in requested.iter().map(|m| m.trim()).filter(|m| !m.is_empty()) {
        let found = active
            .iter()
            .find(|(id, api)| api == name || ModelId::parse(name).is_ok_and(|u| u == *id))
            .map(|(id, _)| *id)
            .ok_or_else(|| name.to_string())?;
        if !ids.contains(&found) {
            ids.push(found);
        }
    }
    Ok(ids)
}

/// Folds `(stage, job type, status, count)` rows into per-stage counts, in
/// the order stages first appear.
pub fn job_counts(rows: &[(String, String, String, i64)]) -> Vec<StageJobCounts> {
    let mut out: Vec<StageJobCounts> = Vec::new();
    for (stage, job_type, status, count) in rows {
        let n = clamp_u32(*count);
        let index = match out.iter().position(|c| &c.stage_slug == stage) {
            Some(i) => i,
            None => {
                out.push(StageJobCounts {
                    stage_slug: stage.clone(),
                    ..Default::default()
                });
                out.len() - 1
            }
        };
        let entry = &mut out[index];
        match job_type.parse::<JobType>() {
            Ok(JobType::Plan) => entry.plan += n,
            Ok(JobType::Execute) => entry.execute += n,
            Ok(JobType::Render) => entry.render += n,
            Err(_) => {}
        }
        match status.parse::<JobStatus>() {
            Ok(JobStatus::Completed) => entry.completed += n,
            Ok(JobStatus::Superseded) => entry.superseded += n,
            Ok(s) if s.is_failure() => entry.failed += n,
            _ => entry.in_flight += n,
        }
    }
    out
}

pub fn project(row: ProjectRow) -> Project {
    Project {
        id: row.id.to_string(),
        name: row.project_name,
        slug: row.slug,
        initial_user_prompt: row.initial_user_prompt,
        process_template_id: row.process_template_id.to_string(),
        created_at: Some(timestamp(row.created_at)),
        pipeline: row.pipeline,
    }
}

/// An amount of money as the API shows it (google.type.Money's split).
pub fn money(m: &dialectic_core::price::Money) -> Money {
    let (units, nanos) = m.units_and_nanos();
    Money {
        currency_code: m.currency.clone(),
        units,
        nanos,
    }
}

/// A session's spending: one sum when its priced calls share a currency;
/// none when no call was priced or they were priced in several.
pub fn spent(mut sums: Vec<dialectic_core::price::Money>) -> Option<Money> {
    match (sums.pop(), sums.is_empty()) {
        (Some(sum), true) => Some(money(&sum)),
        _ => None,
    }
}

/// A model's prices as the API shows them; None when unpriced.
fn prices(row: &ModelRow) -> Option<ModelPrices> {
    let prices = row.prices.prices()?;
    let per_mtok = |nanos| {
        money(&dialectic_core::price::Money {
            currency: prices.currency.clone(),
            nanos,
        })
    };
    Some(ModelPrices {
        input_per_mtok: Some(per_mtok(prices.input_per_mtok)),
        output_per_mtok: Some(per_mtok(prices.output_per_mtok)),
        cached_input_per_mtok: prices.cached_input_per_mtok.map(per_mtok),
        cache_write_per_mtok: prices.cache_write_per_mtok.map(per_mtok),
    })
}

/// A model row as clients see it: what they need to pick one and size a
/// request, never where it is served from or which variable holds its key.
pub fn model(row: &ModelRow) -> Model {
    let settings = ModelSettings::from_config(&row.config.0);
    Model {
        id: row.id.to_string(),
        api_identifier: row.api_identifier.clone(),
        name: row.name.clone(),
        provider: row.provider.clone(),
        context_window_tokens: clamp_u32(row.context_window_tokens.into()),
        max_output_tokens: clamp_u32(row.max_output_tokens.into()),
        structured_output: settings.structured_output,
        fallback_model: settings.fallback_model.unwrap_or_default(),
        max_concurrency: settings
            .max_concurrency
            .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX)),
        requests_per_minute: settings.requests_per_minute.unwrap_or(0),
        tokens_per_minute: settings.tokens_per_minute.unwrap_or(0),
        prices: prices(row),
    }
}

/// `names` maps model ids to api identifiers; an unknown id is shown as the id.
pub fn document(row: &ResourceRow, names: &HashMap<ModelId, String>) -> StageDocument {
    StageDocument {
        resource_id: row.id.to_string(),
        stage_slug: row.stage_slug.clone().unwrap_or_default(),
        iteration: clamp_u32(row.iteration_number.unwrap_or(0).into()),
        document_key: row.document_key.clone().unwrap_or_default(),
        model: row
            .model_id
            .map(|id| names.get(&id).cloned().unwrap_or_else(|| id.to_string()))
            .unwrap_or_default(),
        storage_key: row.key(),
        size_bytes: u64::try_from(row.size_bytes).unwrap_or(0),
        source_contribution_id: row
            .source_contribution_id
            .map(|id| id.to_string())
            .unwrap_or_default(),
        updated_at: Some(timestamp(row.updated_at)),
        incomplete: row.is_incomplete,
        needs_review: row.needs_review,
    }
}

// The typed twin of a stored lower-case name: `{PREFIX}_{NAME}` in the
// enum, UNSPECIFIED for a name the proto does not know (yet).
use dialectic_proto::names::to_api as typed;

pub fn event_kind(kind: EventKind) -> i32 {
    typed(
        "SESSION_EVENT_KIND",
        kind.as_str(),
        SessionEventKind::from_str_name,
    )
}

/// A job status event's status, typed; UNSPECIFIED on other events.
pub fn job_status(status: Option<JobStatus>) -> i32 {
    status.map_or(0, |s| {
        typed("JOB_STATUS", s.as_str(), ApiJobStatus::from_str_name)
    })
}

pub fn job_kind(job_type: &str) -> i32 {
    typed("JOB_TYPE", job_type, ApiJobType::from_str_name)
}

/// A session's pushback, typed.
pub fn pushback(level: Pushback) -> i32 {
    typed("PUSHBACK", level.as_str(), ApiPushback::from_str_name)
}

/// A StartSession's pushback: unspecified is full; a number the proto does
/// not define is refused.
pub fn pushback_of(value: i32) -> Result<Pushback, GatewayError> {
    let bad = || GatewayError::bad("pushback", format!("pushback {value} is not a Pushback"));
    match ApiPushback::try_from(value).map_err(|_| bad())? {
        ApiPushback::Unspecified => Ok(Pushback::default()),
        level => dialectic_proto::names::from_api("PUSHBACK", level.as_str_name())
            .parse()
            .map_err(|_| bad()),
    }
}

pub fn transaction_kind(kind: &str) -> i32 {
    typed("TRANSACTION_KIND", kind, TransactionKind::from_str_name)
}

/// A stored session status as its state; the stage it names is `current_stage`.
pub fn session_state(status: &str) -> i32 {
    let state = match SessionStatus::parse(status) {
        Ok(SessionStatus::Pending(_)) => SessionState::Pending,
        Ok(SessionStatus::Running(_)) => SessionState::Running,
        Ok(SessionStatus::Failed(_)) => SessionState::Failed,
        Ok(SessionStatus::IterationCompletePendingReview) => SessionState::Review,
        Ok(SessionStatus::Completed) => SessionState::Completed,
        Ok(SessionStatus::Paused) => SessionState::Paused,
        Ok(SessionStatus::Abandoned) => SessionState::Abandoned,
        Err(_) => SessionState::Unspecified,
    };
    state.into()
}

pub fn event(e: ProgressEvent) -> SessionEvent {
    SessionEvent {
        session_id: e.session_id,
        event_kind: event_kind(e.kind),
        job_status: job_status(e.job_status),
        state: session_state(&e.session_status),
        job_kind: job_kind(&e.job_type),
        kind: e.kind.as_str().to_string(),
        session_status: e.session_status,
        stage_slug: e.stage_slug,
        job_id: e.job_id,
        job_type: e.job_type,
        document_key: e.document_key,
        model: e.model,
        message: e.message,
        stage_percent: e.stage_percent.min(100),
        at: timestamp_from_ms(e.at_ms),
        sequence: e.sequence,
        history_truncated: false,
    }
}

/// A blackboard entry as the API shows it.
pub fn board_entry(entry: StoredEntry) -> BlackboardEntry {
    BlackboardEntry {
        id: entry.id,
        entry_type: entry.entry_type,
        seq: u32::try_from(entry.seq).unwrap_or(0),
        iteration: u32::try_from(entry.iteration).unwrap_or(0),
        stage_slug: entry.stage_slug,
        step_key: entry.step_key,
        model: entry.model,
        job_id: entry.job_id,
        data_json: entry.data.to_string(),
        created_at: timestamp_from_ms(entry.at_ms),
    }
}

/// The session goes on past documents kept below their confidence gate; it
/// says which (none: no notice).
pub fn low_confidence_notice(kept: &[LowConfidence]) -> String {
    if kept.is_empty() {
        return String::new();
    }
    let named: Vec<String> = kept
        .iter()
        .map(|k| format!("{}/{} ({:.2})", k.stage_slug, k.document_key, k.confidence))
        .collect();
    format!(
        "{} document(s) kept below their confidence gate: {}",
        kept.len(),
        named.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_status_names_the_stage_to_start() {
        assert_eq!(stage_to_start("pending_thesis").as_deref(), Some("thesis"));
        assert_eq!(stage_to_start("running_thesis"), None);
        assert_eq!(stage_to_start("iteration_complete_pending_review"), None);
        assert_eq!(stage_to_start("garbage"), None);
        assert_eq!(
            stage_of_status("running_antithesis").as_deref(),
            Some("antithesis")
        );
        assert_eq!(stage_of_status("paused"), None);
    }

    #[test]
    fn models_resolve_by_name_or_id_without_duplicates() {
        let a = ModelId::new();
        let b = ModelId::new();
        let active = vec![(a, "simulated".to_string()), (b, "simulated-b".to_string())];
        assert_eq!(resolve_models(&[], &active), Ok(vec![a]));
        assert_eq!(resolve_models(&[" ".into()], &active), Ok(vec![a]));
        assert_eq!(
            resolve_models(
                &["simulated-b".into(), a.to_string(), "simulated".into()],
                &active
            ),
            Ok(vec![b, a])
        );
        assert_eq!(
            resolve_models(&["simulated".into(), "gpt-9".into()], &active),
            Err("gpt-9".to_string())
        );
        assert!(resolve_models(&[ModelId::new().to_string()], &active).is_err());
        assert!(resolve_models(&["simulated".into()], &[]).is_err());
    }

    #[test]
    fn job_counts_fold_per_stage() {
        let row =
            |stage: &str, t: &str, s: &str, n: i64| (stage.to_string(), t.into(), s.into(), n);
        let counts = job_counts(&[
            row("thesis", "EXECUTE", "completed", 3),
            row("thesis", "EXECUTE", "retry_loop_failed", 1),
            row("thesis", "PLAN", "waiting_for_children", 1),
            row("thesis", "RENDER", "failed", 2),
            row("thesis", "EXECUTE", "superseded", 2),
            row("antithesis", "PLAN", "pending", 1),
        ]);
        assert_eq!(counts.len(), 2);
        let thesis = &counts[0];
        assert_eq!(thesis.stage_slug, "thesis");
        assert_eq!((thesis.plan, thesis.execute, thesis.render), (1, 6, 2));
        assert_eq!(
            (thesis.completed, thesis.failed, thesis.in_flight),
            (3, 3, 1)
        );
        assert_eq!(
            thesis.superseded, 2,
            "superseded jobs are neither running nor failed"
        );
        assert_eq!(counts[1].in_flight, 1);
    }

    #[test]
    fn event_times_convert_from_milliseconds() {
        let ts = timestamp_from_ms(1_700_000_000_123).unwrap();
        assert_eq!((ts.seconds, ts.nanos), (1_700_000_000, 123_000_000));
        assert!(timestamp_from_ms(0).is_none());
        let e = event(ProgressEvent {
            stage_percent: 250,
            ..ProgressEvent::new(EventKind::JobStarted, "s")
        });
        assert_eq!((e.kind.as_str(), e.stage_percent), ("job_started", 100));
        assert_eq!(e.event_kind(), SessionEventKind::JobStarted);
    }

    /// Every kind and job status core names has its enum value: one added
    /// to core but not to the proto fails here.
    #[test]
    fn every_pushback_level_crosses_the_api_and_back() {
        for level in Pushback::ALL {
            let api = pushback(level);
            assert_ne!(api, 0, "{level} has no Pushback");
            assert_eq!(pushback_of(api).ok(), Some(level));
        }
        assert_eq!(pushback_of(0).ok(), Some(Pushback::Full));
        assert!(pushback_of(42).is_err());
    }

    #[test]
    fn every_event_kind_and_job_status_is_typed() {
        for kind in EventKind::ALL {
            assert_ne!(event_kind(kind), 0, "{kind} has no SessionEventKind");
        }
        for status in JobStatus::ALL {
            assert_ne!(job_status(Some(status)), 0, "{status} has no JobStatus");
        }
        assert_eq!(job_status(None), 0);
        for (stored, typed) in [("plan", ApiJobType::Plan), ("EXECUTE", ApiJobType::Execute)] {
            assert_eq!(job_kind(stored), i32::from(typed));
        }
        for kind in ["credit", "hold", "capture", "release", "debit"] {
            assert_ne!(transaction_kind(kind), 0, "{kind}");
        }
        assert_eq!(
            session_state("running_thesis"),
            i32::from(SessionState::Running)
        );
        assert_eq!(
            session_state("iteration_complete_pending_review"),
            i32::from(SessionState::Review)
        );
        assert_eq!(
            session_state("failed_thesis"),
            i32::from(SessionState::Failed)
        );
    }
}

/// Default and largest page of a list call.
pub const DEFAULT_PAGE: u32 = 50;
pub const MAX_PAGE: u32 = 200;

pub fn page_size(requested: u32) -> i64 {
    i64::from(match requested {
        0 => DEFAULT_PAGE,
        n => n.min(MAX_PAGE),
    })
}

/// An opaque page token for the row a page ended on: `{micros}.{id}`.
pub fn page_token(at: DateTime<Utc>, id: impl fmt::Display) -> String {
    format!("{}.{id}", at.timestamp_micros())
}

/// The cursor in a page token; None for the first page, Err for a token this
/// server did not hand out.
pub fn parse_page_token<Id: FromStr>(token: &str) -> Result<Option<(DateTime<Utc>, Id)>, String> {
    let token = token.trim();
    if token.is_empty() {
        return Ok(None);
    }
    let bad = || format!("page_token {token:?} was not returned by a list call");
    let (micros, id) = token.split_once('.').ok_or_else(bad)?;
    let at = micros
        .parse::<i64>()
        .ok()
        .and_then(DateTime::<Utc>::from_timestamp_micros)
        .ok_or_else(bad)?;
    let id = id.parse().map_err(|_| bad())?;
    Ok(Some((at, id)))
}

/// The next page's token: only when the page came back full.
pub fn next_token<T, Id: fmt::Display>(
    rows: &[T],
    limit: i64,
    key: impl Fn(&T) -> (DateTime<Utc>, Id),
) -> String {
    match rows.last() {
        Some(last) if rows.len() as i64 >= limit => {
            let (at, id) = key(last);
            page_token(at, id)
        }
        _ => String::new(),
    }
}

/// A page token of a list that can be ordered: the order's tag, then the
/// cursor. A token from another order is refused rather than misread.
pub fn ordered_token(order: ListOrder, at: DateTime<Utc>, id: impl fmt::Display) -> String {
    format!("{}{}", order_tag(order), page_token(at, id))
}

pub fn parse_ordered_token<Id: FromStr>(
    order: ListOrder,
    token: &str,
) -> Result<Option<(DateTime<Utc>, Id)>, String> {
    let token = token.trim();
    if token.is_empty() {
        return Ok(None);
    }
    let rest = token.strip_prefix(order_tag(order)).ok_or_else(|| {
        format!(
            "page_token {token:?} was issued for another order_by than {:?}",
            order.as_str()
        )
    })?;
    parse_page_token(rest)
}

fn order_tag(order: ListOrder) -> &'static str {
    // The default order's tokens keep the format they always had.
    match order {
        ListOrder::CreatedDesc => "",
        ListOrder::CreatedAsc => "a",
        ListOrder::NameAsc => "n",
        ListOrder::NameDesc => "N",
    }
}

/// Where a page of a list read whole starts; checked before the list is
/// read, so a forged token costs no query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offset(usize);

pub fn page_offset(token: &str) -> Result<Offset, String> {
    match token.trim() {
        "" => Ok(Offset(0)),
        t => t
            .strip_prefix('o')
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|&n| n > 0)
            .map(Offset)
            .ok_or_else(|| format!("page_token {t:?} was not returned by this list")),
    }
}

/// A request's page token of a list read whole, as the API refuses it.
pub fn start_of(token: &str) -> Result<Offset, GatewayError> {
    page_offset(token).map_err(|e| GatewayError::bad("page_token", e))
}

/// [`page_of`], as the API refuses a token past the end.
pub fn whole_page<T>(
    items: Vec<T>,
    size: u32,
    start: Offset,
) -> Result<(Vec<T>, String), GatewayError> {
    page_of(items, size, start).map_err(|e| GatewayError::bad("page_token", e))
}

/// One page of a list the gateway reads whole (models, pipelines, recipes,
/// documents: short lists), by offset. page_size 0 means the largest page,
/// so clients from before these lists paged still get every row up to it.
pub fn page_of<T>(
    items: Vec<T>,
    page_size: u32,
    start: Offset,
) -> Result<(Vec<T>, String), String> {
    let start = start.0;
    if start > items.len() {
        return Err(format!(
            "page_token \"o{start}\" is past the end of this list ({} rows)",
            items.len()
        ));
    }
    let size = match page_size {
        0 => MAX_PAGE,
        n => n.min(MAX_PAGE),
    } as usize;
    let end = start.saturating_add(size).min(items.len());
    let next = if end < items.len() {
        format!("o{end}")
    } else {
        String::new()
    };
    Ok((
        items.into_iter().skip(start).take(end - start).collect(),
        next,
    ))
}

/// Where a project's object lands in its export: the project's key prefix
/// becomes the project's slug folder (seed 001 "File Structure"). None for
/// objects outside the prefix.
pub fn export_path(slug: &str, prefix: &str, key: &str) -> Option<String> {
    let rest = key.strip_prefix(prefix)?.trim_start_matches('/');
    (!rest.is_empty()).then(|| format!("{slug}/{rest}"))
}

#[cfg(test)]
mod paging_tests {
    use super::*;
    use dialectic_core::ids::ProjectId;

    #[test]
    fn page_tokens_round_trip_and_refuse_garbage() {
        let at = DateTime::<Utc>::from_timestamp_micros(1_763_900_000_123_456).expect("time");
        let id = ProjectId::new();
        assert_eq!(parse_page_token(&page_token(at, id)), Ok(Some((at, id))));
        assert_eq!(parse_page_token::<ProjectId>(""), Ok(None));
        assert!(parse_page_token::<ProjectId>("nope").is_err());
        assert!(parse_page_token::<ProjectId>("12.not-a-uuid").is_err());
        assert_eq!(page_size(0), 50);
        assert_eq!(page_size(1000), 200);
        assert_eq!(next_token(&[1, 2], 3, |_| (at, id)), "");
        assert_eq!(next_token(&[1, 2, 3], 3, |_| (at, id)), page_token(at, id));
    }

    #[test]
    fn ordered_tokens_refuse_another_order() {
        let at = DateTime::<Utc>::from_timestamp_micros(1_763_900_000_123_456).expect("time");
        let id = ProjectId::new();
        let token = ordered_token(ListOrder::NameAsc, at, id);
        assert_eq!(
            parse_ordered_token(ListOrder::NameAsc, &token),
            Ok(Some((at, id)))
        );
        assert!(parse_ordered_token::<ProjectId>(ListOrder::CreatedDesc, &token).is_err());
        let old = page_token(at, id);
        assert_eq!(
            parse_ordered_token(ListOrder::CreatedDesc, &old),
            Ok(Some((at, id)))
        );
    }

    #[test]
    fn whole_lists_page_by_offset_and_default_to_the_largest_page() {
        let items: Vec<u32> = (0..450).collect();
        let at = |t: &str| page_offset(t).expect("token");
        let (first, next) = page_of(items.clone(), 0, at("")).expect("first");
        assert_eq!((first.len(), next.as_str()), (200, "o200"));
        let (second, next) = page_of(items.clone(), 300, at(&next)).expect("second");
        assert_eq!((second[0], second.len(), next.as_str()), (200, 200, "o400"));
        let (last, next) = page_of(items.clone(), 0, at(&next)).expect("last");
        assert_eq!((last.len(), next.as_str()), (50, ""));
        let exact = page_of(vec![1, 2], 2, at("")).expect("exact");
        assert_eq!(exact, (vec![1, 2], String::new()));
        assert!(page_of(items.clone(), 0, at("o451")).is_err());
        for bad in ["o0", "7", "o-1", "onan"] {
            assert!(page_offset(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn export_paths_start_at_the_project_folder() {
        assert_eq!(
            export_path(
                "tool-library",
                "projects/p1/",
                "projects/p1/session_ab/iteration_1/1_thesis/a.md"
            )
            .as_deref(),
            Some("tool-library/session_ab/iteration_1/1_thesis/a.md")
        );
        assert_eq!(export_path("s", "projects/p1/", "projects/p2/x"), None);
        assert_eq!(export_path("s", "projects/p1/", "projects/p1/"), None);
    }
}

/// A session's position as the API answers it.
pub(crate) fn position(p: &dialectic_core::position::Position, percent: u32) -> SessionPosition {
    SessionPosition {
        stage_number: p.stage_number,
        stage_count: p.stage_count,
        stage_name: p.stage_name.clone(),
        step_key: p.step_key.clone(),
        step_name: p.step_name.clone(),
        unit: p.unit.clone(),
        index: u32::try_from(p.index).unwrap_or(u32::MAX),
        count: u32::try_from(p.count).unwrap_or(u32::MAX),
        stage_percent: percent.min(100),
        summary: p.summary(),
        within_unit: p
            .within
            .as_ref()
            .map(|w| w.unit.clone())
            .unwrap_or_default(),
        within_index: p
            .within
            .as_ref()
            .map_or(0, |w| w.index.try_into().unwrap_or(u32::MAX)),
        within_count: p
            .within
            .as_ref()
            .map_or(0, |w| w.count.try_into().unwrap_or(u32::MAX)),
    }
}
