//! The dead-letter queue, for operators: read what is there without taking it
//! away, and send chosen messages back to the queue they came from.
//!
//! Reading uses `basic.get` without acking on a channel of its own; closing
//! that channel returns every message it took, in order. A replayed message is
//! published (confirmed) to the main exchange under its original routing key
//! before its dead copy is acked, so a crash in between duplicates it rather
//! than losing it, and consumers treat a duplicate as a no-op.

use crate::{DEAD_REASON_HEADER, Delivery, Publisher, QueueError, Topology, ack};
use dialectic_proto::v1::queue::{envelope::Body, job_outcome, planner_command};
use lapin::options::BasicGetOptions;
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{Channel, Connection};

/// Header our consumers add when they dead-letter a message themselves.
pub const ORIGINAL_ROUTING_KEY_HEADER: &str = "x-dialectic-original-routing-key";

/// The name (under the prefix) of the queue that gets a copy of every dead
/// letter for the session notices ([`crate::Topology::dead_notices_queue`]).
pub const NOTICES_KEY: &str = "dead.notices";

/// Whom a dead letter held up, read from its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// A job's dispatch or outcome.
    Job(String),
    /// A command about a session (start a stage, resume).
    Session(String),
}

/// The job or session a message is about; None for what is undecodable or
/// about neither (an edit to render).
pub fn subject(body: &[u8]) -> Option<Subject> {
    match crate::decode(body).ok()?.body? {
        Body::JobDispatch(d) => Some(Subject::Job(d.job_id)),
        Body::JobOutcome(o) => Some(Subject::Job(o.job_id)),
        Body::PlannerCommand(c) => match c.command? {
            planner_command::Command::StartStage(s) => Some(Subject::Session(s.session_id)),
            planner_command::Command::ResumeSession(r) => Some(Subject::Session(r.session_id)),
            planner_command::Command::RenderEdit(_) => None,
        },
    }
}

/// One message in the dead-letter queue, as an operator needs to see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// Stable for the same message (routing key and body): what `show` and
    /// `replay` take. Identical duplicates share it.
    pub id: String,
    /// Where the message was going before it died.
    pub routing_key: String,
    /// Why: our consumer's reason, or the broker's (`delivery_limit`, `rejected`, …).
    pub reason: String,
    /// How many times the broker dead-lettered it (from `x-death`), 0 when a consumer did.
    pub deaths: u64,
    /// What the message says, decoded (e.g. `job dispatch 0192…`), or why it cannot be.
    pub summary: String,
    pub traceparent: Option<String>,
    pub body: Vec<u8>,
}

impl DeadLetter {
    /// Reads a delivery from the dead queue, or from the notices queue (which
    /// gets the same message, headers and all).
    pub fn from_delivery(delivery: &Delivery) -> Self {
        let headers = delivery.properties.headers().as_ref();
        let text = |name: &str| headers.and_then(|h| string_field(h, name));
        let death = headers.and_then(first_death);
        let routing_key = text(ORIGINAL_ROUTING_KEY_HEADER)
            .or_else(|| {
                death
                    .as_ref()
                    .and_then(|d| string_list_head(d, "routing-keys"))
            })
            .unwrap_or_else(|| delivery.routing_key.to_string());
        let reason = text(DEAD_REASON_HEADER)
            .or_else(|| death.as_ref().and_then(|d| string_field(d, "reason")))
            .unwrap_or_else(|| "unknown".into());
        let deaths = death
            .as_ref()
            .and_then(|d| int_field(d, "count"))
            .unwrap_or(0);
        Self {
            id: message_id(&routing_key, &delivery.data),
            summary: summarize(&delivery.data),
            traceparent: text(crate::TRACEPARENT_HEADER),
            routing_key,
            reason,
            deaths,
            body: delivery.data.clone(),
        }
    }
}

/// FNV-1a over the routing key and body: short, stable, dependency-free.
fn message_id(routing_key: &str, body: &[u8]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in routing_key.bytes().chain([0u8]).chain(body.iter().copied()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// A one-line description of an envelope for people.
pub fn summarize(body: &[u8]) -> String {
    match crate::decode(body) {
        Err(e) => format!("undecodable: {e}"),
        Ok(envelope) => match envelope.body {
            Some(Body::JobDispatch(d)) => format!("job dispatch {}", d.job_id),
            Some(Body::JobOutcome(o)) => {
                let what = match o.result {
                    Some(job_outcome::Result::Started(_)) => "started",
                    Some(job_outcome::Result::Succeeded(_)) => "succeeded",
                    Some(job_outcome::Result::Failed(_)) => "failed",
                    None => "empty",
                };
                format!("job {} attempt {} {what}", o.job_id, o.attempt)
            }
            Some(Body::PlannerCommand(c)) => match c.command {
                Some(planner_command::Command::StartStage(s)) => format!(
                    "start stage {} of session {} (iteration {})",
                    s.stage_slug, s.session_id, s.iteration
                ),
                Some(planner_command::Command::ResumeSession(r)) => {
                    format!("resume session {}", r.session_id)
                }
                Some(planner_command::Command::RenderEdit(r)) => {
                    format!("render edit {}", r.edit_contribution_id)
                }
                None => "empty planner command".into(),
            },
            None => "empty envelope".into(),
        },
    }
}

fn string_field(table: &FieldTable, name: &str) -> Option<String> {
    match table.inner().get(&ShortString::from(name))? {
        AMQPValue::LongString(s) => Some(s.to_string()),
        AMQPValue::ShortString(s) => Some(s.to_string()),
        _ => None,
    }
}

fn int_field(table: &FieldTable, name: &str) -> Option<u64> {
    match table.inner().get(&ShortString::from(name))? {
        AMQPValue::LongLongInt(n) => u64::try_from(*n).ok(),
        AMQPValue::LongInt(n) => u64::try_from(*n).ok(),
        AMQPValue::LongUInt(n) => Some(u64::from(*n)),
        AMQPValue::ShortInt(n) => u64::try_from(*n).ok(),
        _ => None,
    }
}

fn string_list_head(table: &FieldTable, name: &str) -> Option<String> {
    match table.inner().get(&ShortString::from(name))? {
        AMQPValue::FieldArray(items) => items.as_slice().iter().find_map(|v| match v {
            AMQPValue::LongString(s) => Some(s.to_string()),
            AMQPValue::ShortString(s) => Some(s.to_string()),
            _ => None,
        }),
        _ => None,
    }
}

/// The most recent `x-death` entry the broker added (it keeps them newest first).
fn first_death(headers: &FieldTable) -> Option<FieldTable> {
    match headers.inner().get(&ShortString::from("x-death"))? {
        AMQPValue::FieldArray(items) => items.as_slice().iter().find_map(|v| match v {
            AMQPValue::FieldTable(t) => Some(t.clone()),
            _ => None,
        }),
        _ => None,
    }
}

/// Takes up to `limit` messages from the dead queue without acking them; they
/// stay unacked on `channel` until the caller acks them or closes the channel.
async fn take(
    channel: &Channel,
    topology: &Topology,
    limit: usize,
) -> Result<Vec<Delivery>, QueueError> {
    let mut taken = Vec::new();
    while taken.len() < limit {
        let got = channel
            .basic_get(
                topology.dead_queue().as_str().into(),
                BasicGetOptions { no_ack: false },
            )
            .await?;
        match got {
            Some(message) => taken.push(message.delivery),
            None => break,
        }
    }
    Ok(taken)
}

/// Up to `limit` dead letters, oldest first, left in the queue.
pub async fn list(
    connection: &Connection,
    topology: &Topology,
    limit: usize,
) -> Result<Vec<DeadLetter>, QueueError> {
    let channel = connection.create_channel().await?;
    let taken = take(&channel, topology, limit).await;
    // Closing returns everything taken, whatever happened while reading.
    let _ = channel.close(200, "listed".into()).await;
    Ok(taken?.iter().map(DeadLetter::from_delivery).collect())
}

/// Which dead letters to replay.
#[derive(Debug, Clone)]
pub enum Selection {
    All,
    Ids(Vec<String>),
}

impl Selection {
    fn wants(&self, letter: &DeadLetter) -> bool {
        match self {
            Selection::All => true,
            Selection::Ids(ids) => ids.iter().any(|id| letter.id.starts_with(id.as_str())),
        }
    }
}

/// Sends the selected dead letters (among the first `limit`) back to their
/// queues and removes them from the dead queue; the others stay where they were.
pub async fn replay(
    connection: &Connection,
    topology: &Topology,
    selection: &Selection,
    limit: usize,
) -> Result<Vec<DeadLetter>, QueueError> {
    let publisher = Publisher::new(connection, topology).await?;
    let channel = connection.create_channel().await?;
    let result = replay_taken(&channel, &publisher, topology, selection, limit).await;
    let _ = channel.close(200, "replayed".into()).await;
    result
}

async fn replay_taken(
    channel: &Channel,
    publisher: &Publisher,
    topology: &Topology,
    selection: &Selection,
    limit: usize,
) -> Result<Vec<DeadLetter>, QueueError> {
    let mut replayed = Vec::new();
    for delivery in take(channel, topology, limit).await? {
        let letter = DeadLetter::from_delivery(&delivery);
        if !selection.wants(&letter) {
            continue;
        }
        let mut headers = FieldTable::default();
        if let Some(tp) = &letter.traceparent {
            headers.insert(
                crate::TRACEPARENT_HEADER.into(),
                AMQPValue::LongString(tp.as_str().into()),
            );
        }
        publisher
            .publish_to(
                &topology.exchange(),
                &letter.routing_key,
                &letter.body,
                headers,
            )
            .await?;
        ack(&delivery).await?;
        tracing::info!(id = %letter.id, routing_key = %letter.routing_key, summary = %letter.summary, "replayed a dead letter");
        replayed.push(letter);
    }
    Ok(replayed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_differ_by_routing_key_and_body() {
        assert_eq!(message_id("job.plan", b"a"), message_id("job.plan", b"a"));
        assert_ne!(message_id("job.plan", b"a"), message_id("job.render", b"a"));
        assert_ne!(message_id("job.plan", b"a"), message_id("job.plan", b"b"));
        assert_eq!(message_id("", b"").len(), 16);
    }

    #[test]
    fn summaries_name_what_a_message_is() {
        assert_eq!(
            summarize(&crate::job_dispatch("j1")),
            "job dispatch j1".to_string()
        );
        assert!(summarize(b"\xff garbage").starts_with("undecodable"));
        assert_eq!(
            summarize(&crate::render_edit_command("c1")),
            "render edit c1"
        );
    }

    #[test]
    fn a_subject_is_the_job_or_session_a_message_is_about() {
        assert_eq!(
            subject(&crate::job_dispatch("j1")),
            Some(Subject::Job("j1".into()))
        );
        assert_eq!(
            subject(&crate::start_stage_command("s1", "thesis", 1)),
            Some(Subject::Session("s1".into()))
        );
        assert_eq!(subject(&crate::render_edit_command("c1")), None);
        assert_eq!(subject(b"\xff garbage"), None);
    }

    #[test]
    fn a_selection_by_id_prefix_picks_only_that_message() {
        let letter = DeadLetter {
            id: "0123456789abcdef".into(),
            routing_key: "job.plan".into(),
            reason: "r".into(),
            deaths: 0,
            summary: String::new(),
            traceparent: None,
            body: Vec::new(),
        };
        assert!(Selection::All.wants(&letter));
        assert!(Selection::Ids(vec!["01234567".into()]).wants(&letter));
        assert!(!Selection::Ids(vec!["fedc".into()]).wants(&letter));
    }
}
