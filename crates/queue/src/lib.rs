//! RabbitMQ adapter. Topology: one topic exchange, one quorum queue per kind of
//! work with a delivery limit, and a dead-letter exchange feeding `<prefix>.dead`.
//! Publishing waits for the broker's confirm; consumers ack by hand after commit.

use dialectic_proto::ENVELOPE_VERSION;
use dialectic_proto::v1::queue::Envelope;
use futures::StreamExt;
use lapin::Confirmation;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, ExchangeDeclareOptions, ExchangeDeleteOptions, QueueBindOptions,
    QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel, ConnectionProperties, ExchangeKind};
use prost::Message as _;

pub mod dead;

pub use lapin::Connection;
pub use lapin::message::Delivery;

#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("RabbitMQ: {0}")]
    Amqp(#[from] lapin::Error),
    #[error("the broker refused message for {0} (nack)")]
    Nacked(String),
    #[error("undecodable message: {0}")]
    Decode(String),
    #[error(
        "message envelope version {0} is newer than this build understands ({ENVELOPE_VERSION})"
    )]
    UnknownVersion(u32),
    #[error("consumer stream for {0} ended")]
    ConsumerEnded(String),
}

/// Routing keys; each one has its own queue.
pub mod keys {
    pub const JOB_PLAN: &str = "job.plan";
    pub const JOB_EXECUTE: &str = "job.execute";
    pub const JOB_RENDER: &str = "job.render";
    pub const JOB_EVENT: &str = "job.event";
    pub const PLANNER_COMMAND: &str = "planner.command";
    pub const ALL: [&str; 5] = [
        JOB_PLAN,
        JOB_EXECUTE,
        JOB_RENDER,
        JOB_EVENT,
        PLANNER_COMMAND,
    ];
}

/// Header carrying the W3C trace context across the broker.
pub const TRACEPARENT_HEADER: &str = "traceparent";
/// Header with the publish time (milliseconds since the Unix epoch), so
/// consumers can measure how long a message waited in its queue.
pub const PUBLISHED_MS_HEADER: &str = "x-dialectic-published-ms";
/// Header naming why a message was dead-lettered by a consumer.
pub const DEAD_REASON_HEADER: &str = "x-dialectic-dead-reason";
/// The most dead letters the notices queue keeps unread.
const DEAD_NOTICES_MAX: i64 = 10_000;

/// Names derived from the configured prefix.
#[derive(Debug, Clone)]
pub struct Topology {
    pub prefix: String,
    pub delivery_limit: u32,
}

impl Topology {
    pub fn new(prefix: impl Into<String>, delivery_limit: u32) -> Self {
        Self {
            prefix: prefix.into(),
            delivery_limit,
        }
    }
    pub fn exchange(&self) -> String {
        self.prefix.clone()
    }
    pub fn dead_letter_exchange(&self) -> String {
        format!("{}.dlx", self.prefix)
    }
    pub fn dead_queue(&self) -> String {
        format!("{}.dead", self.prefix)
    }
    /// The copy of every dead letter that the planner reads to note which
    /// session it holds up ([`dead::NOTICES_KEY`]); the dead queue itself is
    /// left to operators.
    pub fn dead_notices_queue(&self) -> String {
        self.queue(dead::NOTICES_KEY)
    }
    pub fn queue(&self, routing_key: &str) -> String {
        format!("{}.{routing_key}", self.prefix)
    }

    /// Declares everything; idempotent, so every service runs it at start.
    pub async fn declare(&self, channel: &Channel) -> Result<(), QueueError> {
        let durable = ExchangeDeclareOptions {
            durable: true,
            ..Default::default()
        };
        channel
            .exchange_declare(
                self.exchange().into(),
                ExchangeKind::Topic,
                durable,
                FieldTable::default(),
            )
            .await?;
        channel
            .exchange_declare(
                self.dead_letter_exchange().into(),
                ExchangeKind::Fanout,
                durable,
                FieldTable::default(),
            )
            .await?;
        let queue_opts = QueueDeclareOptions {
            durable: true,
            ..Default::default()
        };
        let mut dead_args = FieldTable::default();
        dead_args.insert(
            "x-queue-type".into(),
            AMQPValue::LongString("quorum".into()),
        );
        channel
            .queue_declare(self.dead_queue().into(), queue_opts, dead_args)
            .await?;
        channel
            .queue_bind(
                self.dead_queue().into(),
                self.dead_letter_exchange().into(),
                "".into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await?;
        self.declare_dead_notices(channel).await?;
        for key in keys::ALL {
            let mut args = FieldTable::default();
            args.insert(
                "x-queue-type".into(),
                AMQPValue::LongString("quorum".into()),
            );
            args.insert(
                "x-delivery-limit".into(),
                AMQPValue::LongInt(self.delivery_limit as i32),
            );
            args.insert(
                "x-dead-letter-exchange".into(),
                AMQPValue::LongString(self.dead_letter_exchange().into()),
            );
            // At-least-once dead-lettering needs reject-publish overflow; nothing is dropped silently.
            args.insert(
                "x-dead-letter-strategy".into(),
                AMQPValue::LongString("at-least-once".into()),
            );
            args.insert(
                "x-overflow".into(),
                AMQPValue::LongString("reject-publish".into()),
            );
            channel
                .queue_declare(self.queue(key).into(), queue_opts, args)
                .await?;
            channel
                .queue_bind(
                    self.queue(key).into(),
                    self.exchange().into(),
                    key.into(),
                    QueueBindOptions::default(),
                    FieldTable::default(),
                )
                .await?;
        }
        Ok(())
    }

    /// A second queue on the dead-letter exchange (a fanout), so every dead
    /// letter, ours or the broker's, is also seen by a consumer, and the dead
    /// queue is never peeked on a timer (a peek counts as a delivery). It has
    /// no dead-letter exchange of its own (a loop), and is bounded: without a
    /// reader it keeps the newest `DEAD_NOTICES_MAX` and drops the oldest, so
    /// it never refuses a dead letter.
    async fn declare_dead_notices(&self, channel: &Channel) -> Result<(), QueueError> {
        let mut args = FieldTable::default();
        args.insert(
            "x-queue-type".into(),
            AMQPValue::LongString("quorum".into()),
        );
        args.insert(
            "x-max-length".into(),
            AMQPValue::LongLongInt(DEAD_NOTICES_MAX),
        );
        args.insert(
            "x-overflow".into(),
            AMQPValue::LongString("drop-head".into()),
        );
        args.insert(
            "x-delivery-limit".into(),
            AMQPValue::LongInt(self.delivery_limit as i32),
        );
        let durable = QueueDeclareOptions {
            durable: true,
            ..Default::default()
        };
        channel
            .queue_declare(self.dead_notices_queue().into(), durable, args)
            .await?;
        channel
            .queue_bind(
                self.dead_notices_queue().into(),
                self.dead_letter_exchange().into(),
                "".into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await?;
        Ok(())
    }

    /// Removes everything this topology declared (tests clean up after themselves).
    pub async fn delete(&self, channel: &Channel) -> Result<(), QueueError> {
        for key in keys::ALL {
            channel
                .queue_delete(self.queue(key).into(), QueueDeleteOptions::default())
                .await?;
        }
        channel
            .queue_delete(self.dead_queue().into(), QueueDeleteOptions::default())
            .await?;
        channel
            .queue_delete(
                self.dead_notices_queue().into(),
                QueueDeleteOptions::default(),
            )
            .await?;
        channel
            .exchange_delete(self.exchange().into(), ExchangeDeleteOptions::default())
            .await?;
        channel
            .exchange_delete(
                self.dead_letter_exchange().into(),
                ExchangeDeleteOptions::default(),
            )
            .await?;
        Ok(())
    }
}

pub async fn connect(url: &str) -> Result<Connection, QueueError> {
    Ok(Connection::connect(url, ConnectionProperties::default()).await?)
}

/// A channel in confirm mode: `publish` returns once the broker has the message.
#[derive(Clone)]
pub struct Publisher {
    channel: Channel,
    exchange: String,
}

impl Publisher {
    pub async fn new(connection: &Connection, topology: &Topology) -> Result<Self, QueueError> {
        let channel = connection.create_channel().await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        Ok(Self {
            channel,
            exchange: topology.exchange(),
        })
    }

    pub fn is_usable(&self) -> bool {
        self.channel.status().connected()
    }

    pub async fn publish(
        &self,
        routing_key: &str,
        payload: &[u8],
        traceparent: Option<&str>,
    ) -> Result<(), QueueError> {
        self.publish_to(
            &self.exchange,
            routing_key,
            payload,
            headers(traceparent, None),
        )
        .await
    }

    pub async fn publish_to(
        &self,
        exchange: &str,
        routing_key: &str,
        payload: &[u8],
        mut headers: FieldTable,
    ) -> Result<(), QueueError> {
        if let Ok(now) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            headers.insert(
                PUBLISHED_MS_HEADER.into(),
                AMQPValue::LongLongInt(now.as_millis() as i64),
            );
        }
        let props = BasicProperties::default()
            .with_delivery_mode(2)
            .with_content_type("application/x-protobuf".into())
            .with_headers(headers);
        let confirm = self
            .channel
            .basic_publish(
                exchange.into(),
                routing_key.into(),
                BasicPublishOptions {
                    mandatory: true,
                    ..Default::default()
                },
                payload,
                props,
            )
            .await?
            .await?;
        match confirm {
            Confirmation::Ack(None) | Confirmation::NotRequested => Ok(()),
            // Mandatory and unroutable: the broker acks but returns the message. Treat as failure.
            Confirmation::Ack(Some(_)) | Confirmation::Nack(_) => {
                Err(QueueError::Nacked(routing_key.to_string()))
            }
        }
    }
}

fn headers(traceparent: Option<&str>, reason: Option<&str>) -> FieldTable {
    let mut table = FieldTable::default();
    if let Some(tp) = traceparent {
        table.insert(
            TRACEPARENT_HEADER.into(),
            AMQPValue::LongString(LongString::from(tp)),
        );
    }
    if let Some(reason) = reason {
        table.insert(
            DEAD_REASON_HEADER.into(),
            AMQPValue::LongString(LongString::from(reason)),
        );
    }
    table
}

/// Reads a string header (e.g. `traceparent`) from a delivery.
pub fn header(delivery: &Delivery, name: &str) -> Option<String> {
    let headers = delivery.properties.headers().as_ref()?;
    match headers.inner().get(&ShortString::from(name))? {
        AMQPValue::LongString(s) => Some(s.to_string()),
        AMQPValue::ShortString(s) => Some(s.to_string()),
        _ => None,
    }
}

/// How long the message waited since it was (last) published; None for a
/// message from a publisher that does not stamp the time, or a clock behind it.
pub fn time_in_queue(delivery: &Delivery) -> Option<std::time::Duration> {
    let headers = delivery.properties.headers().as_ref()?;
    let published = match headers
        .inner()
        .get(&ShortString::from(PUBLISHED_MS_HEADER))?
    {
        AMQPValue::LongLongInt(ms) => u64::try_from(*ms).ok()?,
        AMQPValue::LongUInt(ms) => u64::from(*ms),
        _ => return None,
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_millis() as u64;
    now.checked_sub(published)
        .map(std::time::Duration::from_millis)
}

/// How many times the broker has delivered this message before (quorum queues count it).
pub fn delivery_count(delivery: &Delivery) -> u64 {
    let Some(headers) = delivery.properties.headers().as_ref() else {
        return 0;
    };
    match headers.inner().get(&ShortString::from("x-delivery-count")) {
        Some(AMQPValue::LongLongInt(n)) => (*n).max(0) as u64,
        Some(AMQPValue::LongInt(n)) => (*n).max(0) as u64,
        Some(AMQPValue::LongUInt(n)) => u64::from(*n),
        Some(AMQPValue::ShortInt(n)) => (*n).max(0) as u64,
        _ => 0,
    }
}

/// A `StartStage` planner command, ready for the outbox (routing key `planner.command`).
pub fn start_stage_command(session_id: &str, stage_slug: &str, iteration: u32) -> Vec<u8> {
    use dialectic_proto::v1::queue::{
        PlannerCommand, StartStage, envelope::Body, planner_command::Command,
    };
    encode(&Envelope {
        version: ENVELOPE_VERSION,
        body: Some(Body::PlannerCommand(PlannerCommand {
            command: Some(Command::StartStage(StartStage {
                session_id: session_id.to_string(),
                stage_slug: stage_slug.to_string(),
                iteration: iteration.max(1),
            })),
        })),
    })
}

/// A `ResumeSession` planner command, ready for the outbox.
pub fn render_edit_command(edit_contribution_id: &str) -> Vec<u8> {
    use dialectic_proto::v1::queue::{
        PlannerCommand, RenderEdit, envelope::Body, planner_command::Command,
    };
    encode(&Envelope {
        version: ENVELOPE_VERSION,
        body: Some(Body::PlannerCommand(PlannerCommand {
            command: Some(Command::RenderEdit(RenderEdit {
                edit_contribution_id: edit_contribution_id.to_string(),
            })),
        })),
    })
}

/// A job dispatch, ready for the outbox (routing key of the job's type).
pub fn job_dispatch(job_id: &str) -> Vec<u8> {
    use dialectic_proto::v1::queue::{JobDispatch, envelope::Body};
    encode(&Envelope {
        version: ENVELOPE_VERSION,
        body: Some(Body::JobDispatch(JobDispatch {
            job_id: job_id.to_string(),
        })),
    })
}

pub fn encode(envelope: &Envelope) -> Vec<u8> {
    envelope.encode_to_vec()
}

pub fn decode(bytes: &[u8]) -> Result<Envelope, QueueError> {
    let envelope = Envelope::decode(bytes).map_err(|e| QueueError::Decode(e.to_string()))?;
    if envelope.version > ENVELOPE_VERSION || envelope.version == 0 {
        return Err(QueueError::UnknownVersion(envelope.version));
    }
    if envelope.body.is_none() {
        return Err(QueueError::Decode("envelope has no body".into()));
    }
    Ok(envelope)
}

/// A manual-ack consumer on one queue, with prefetch equal to the worker's slots.
pub struct Subscription {
    pub channel: Channel,
    consumer: lapin::Consumer,
    queue: String,
}

impl Subscription {
    pub async fn open(
        connection: &Connection,
        topology: &Topology,
        routing_key: &str,
        prefetch: u16,
        tag: &str,
    ) -> Result<Self, QueueError> {
        let channel = connection.create_channel().await?;
        channel
            .basic_qos(prefetch, BasicQosOptions::default())
            .await?;
        let queue = topology.queue(routing_key);
        let consumer = channel
            .basic_consume(
                queue.clone().into(),
                tag.into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await?;
        Ok(Self {
            channel,
            consumer,
            queue,
        })
    }

    /// The next delivery; an error means the channel or connection is gone.
    pub async fn next(&mut self) -> Result<Delivery, QueueError> {
        match self.consumer.next().await {
            Some(Ok(delivery)) => Ok(delivery),
            Some(Err(e)) => Err(e.into()),
            None => Err(QueueError::ConsumerEnded(self.queue.clone())),
        }
    }
}

pub async fn ack(delivery: &Delivery) -> Result<(), QueueError> {
    delivery.acker.ack(BasicAckOptions::default()).await?;
    Ok(())
}

/// Returns the message to the queue; the quorum queue counts the delivery and
/// dead-letters it once the delivery limit is reached.
pub async fn requeue(delivery: &Delivery) -> Result<(), QueueError> {
    delivery
        .acker
        .nack(BasicNackOptions {
            requeue: true,
            multiple: false,
        })
        .await?;
    Ok(())
}

/// Publishes a copy of the delivery to its exchange (confirmed), then acks the
/// original: the message moves to the back of its queue without counting as a
/// failed delivery. A crash in between leaves a duplicate, never a loss.
pub async fn requeue_at_back(publisher: &Publisher, delivery: &Delivery) -> Result<(), QueueError> {
    // The broker counts deliveries itself; a copied count would only mislead readers.
    let mut headers = FieldTable::default();
    if let Some(original) = delivery.properties.headers() {
        for (name, value) in original.inner() {
            if name.as_str() != "x-delivery-count" {
                headers.insert(name.clone(), value.clone());
            }
        }
    }
    publisher
        .publish_to(
            delivery.exchange.as_str(),
            delivery.routing_key.as_str(),
            &delivery.data,
            headers,
        )
        .await?;
    ack(delivery).await
}

/// Sends a message that can never succeed straight to the dead-letter queue,
/// with the reason in a header, then acks the original.
pub async fn dead_letter(
    publisher: &Publisher,
    topology: &Topology,
    delivery: &Delivery,
    reason: &str,
) -> Result<(), QueueError> {
    let mut table = delivery.properties.headers().clone().unwrap_or_default();
    table.insert(
        DEAD_REASON_HEADER.into(),
        AMQPValue::LongString(LongString::from(reason)),
    );
    table.insert(
        dead::ORIGINAL_ROUTING_KEY_HEADER.into(),
        AMQPValue::LongString(LongString::from(delivery.routing_key.as_str())),
    );
    publisher
        .publish_to(
            &topology.dead_letter_exchange(),
            delivery.routing_key.as_str(),
            &delivery.data,
            table,
        )
        .await?;
    ack(delivery).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use dialectic_proto::v1::queue::{JobDispatch, envelope::Body};

    #[test]
    fn envelopes_round_trip_and_reject_unknown_versions() {
        let env = Envelope {
            version: ENVELOPE_VERSION,
            body: Some(Body::JobDispatch(JobDispatch { job_id: "x".into() })),
        };
        assert_eq!(decode(&encode(&env)).unwrap(), env);
        let newer = Envelope {
            version: ENVELOPE_VERSION + 1,
            ..env.clone()
        };
        assert!(matches!(
            decode(&encode(&newer)),
            Err(QueueError::UnknownVersion(_))
        ));
        assert!(decode(b"\xff\xff\xff garbage").is_err());
        assert!(
            decode(&encode(&Envelope {
                version: 1,
                body: None
            }))
            .is_err()
        );
    }
}
