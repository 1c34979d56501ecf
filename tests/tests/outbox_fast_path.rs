//! The outbox's two ways out, and the crashes between them. A writer's courier
//! publishes its rows right after the commit and forgets them; the relay takes
//! only rows older than `amqp.relay_after_ms`. A writer that dies before
//! publishing leaves its row to the relay; one that dies after publishing but
//! before forgetting makes the relay publish a duplicate, which consumers
//! ignore (`thesis::a_duplicate_dispatch_produces_one_contribution` runs three
//! copies of one dispatch through the real services: one contribution, one attempt).

use dialectic_e2e::{TestEnv, eventually};
use dialectic_planner::relay::{RelayOptions, run_relay};
use dialectic_queue::{Publisher, Topology, keys};
use dialectic_runtime::CancellationToken;
use dialectic_runtime::courier::{self, Courier};
use dialectic_store::outbox::{self, OutboxRow};
use lapin::options::BasicGetOptions;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

fn published_ms(delivery: &dialectic_queue::Delivery) -> Option<i64> {
    let headers = delivery.properties.headers().as_ref()?;
    match headers.inner().get(&lapin::types::ShortString::from(
        dialectic_queue::PUBLISHED_MS_HEADER,
    ))? {
        lapin::types::AMQPValue::LongLongInt(ms) => Some(*ms),
        _ => None,
    }
}

struct Bench {
    env: TestEnv,
    topology: Topology,
    connection: lapin::Connection,
    stop: CancellationToken,
}

impl Bench {
    /// A fresh database and queue prefix, the topology declared, and a relay
    /// that leaves rows younger than `relay_after` to their writer.
    async fn new(relay_after: Duration) -> Self {
        let mut env = TestEnv::new().await;
        env.settings.amqp.relay_after_ms = relay_after.as_millis() as u64;
        let topology = dialectic_runtime::topology(&env.settings);
        let connection = dialectic_queue::connect(&env.settings.amqp.url)
            .await
            .expect("amqp");
        let channel = connection.create_channel().await.expect("channel");
        topology.declare(&channel).await.expect("topology");
        let stop = CancellationToken::new();
        tokio::spawn(run_relay(
            env.store.clone(),
            RelayOptions::new(&env.settings, topology.clone()),
            Arc::new(AtomicBool::new(false)),
            stop.clone(),
        ));
        Self {
            env,
            topology,
            connection,
            stop,
        }
    }

    /// A render dispatch committed the way every writer commits one, and when
    /// Postgres says it was written (ms since the epoch).
    async fn commit_dispatch(&self, job: &str) -> (OutboxRow, i64) {
        let mut tx = self.env.store.begin().await.expect("tx");
        let row = outbox::enqueue(
            &mut tx,
            keys::JOB_RENDER,
            &dialectic_queue::job_dispatch(job),
            None,
        )
        .await
        .expect("enqueue");
        tx.commit().await.expect("commit");
        let written_ms = sqlx::query_scalar(
            "SELECT (extract(epoch FROM created_at) * 1000)::int8 FROM outbox WHERE id = $1",
        )
        .bind(row.id)
        .fetch_one(self.env.store.pool())
        .await
        .expect("the row is still there: nobody publishes it this early but its writer");
        (row, written_ms)
    }

    /// Takes every message now in the render queue: (payload, publish time in
    /// ms since the epoch, from the header every publish stamps).
    async fn take_render_queue(&self) -> Vec<(Vec<u8>, i64)> {
        let channel = self.connection.create_channel().await.expect("channel");
        let mut taken = Vec::new();
        while let Some(message) = channel
            .basic_get(
                self.topology.queue(keys::JOB_RENDER).as_str().into(),
                BasicGetOptions { no_ack: true },
            )
            .await
            .expect("basic.get")
        {
            let published = published_ms(&message.delivery).expect("published header");
            taken.push((message.delivery.data.clone(), published));
        }
        taken
    }

    /// Waits until the render queue holds `n` messages, then takes them.
    async fn wait_for_messages(&self, n: u32) -> Vec<(Vec<u8>, i64)> {
        let queue = self.topology.queue(keys::JOB_RENDER);
        eventually(15, &format!("{n} messages in the render queue"), || async {
            let (ready, _) = dialectic_e2e::queue_counts(&self.connection, &queue).await;
            (ready >= n).then_some(())
        })
        .await;
        self.take_render_queue().await
    }

    async fn wait_for_empty_outbox(&self, what: &str) {
        eventually(10, what, || async {
            let pending = outbox::pending_count(self.env.store.pool())
                .await
                .expect("count");
            (pending == 0).then_some(())
        })
        .await;
    }

    async fn publisher(&self) -> Publisher {
        Publisher::new(&self.connection, &self.topology)
            .await
            .expect("publisher")
    }

    async fn teardown(self) {
        self.stop.cancel();
        let _ = self.connection.close(200, "done".into()).await;
        self.env.teardown().await;
    }
}

const RELAY_AFTER: Duration = Duration::from_millis(600);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_row_whose_writer_died_before_publishing_goes_out_through_the_relay_once_old_enough() {
    let bench = Bench::new(RELAY_AFTER).await;
    // The writer committed and died: nobody posts the row to a courier.
    let (row, written_ms) = bench.commit_dispatch("died-before-publishing").await;

    let taken = bench.wait_for_messages(1).await;
    assert_eq!(taken.len(), 1, "the relay published it once");
    assert_eq!(taken[0].0, row.payload);
    let waited = taken[0].1 - written_ms;
    assert!(
        waited >= RELAY_AFTER.as_millis() as i64,
        "the relay left the row to its writer for {RELAY_AFTER:?}; it took it after {waited} ms"
    );
    bench.wait_for_empty_outbox("the relay's delete").await;
    bench.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_writer_that_died_after_publishing_but_before_forgetting_only_causes_a_duplicate() {
    let bench = Bench::new(RELAY_AFTER).await;
    let (row, _) = bench.commit_dispatch("died-before-forgetting").await;
    // The courier's own publish step, then the crash: the row is never forgotten.
    let confirmed = courier::publish_rows(&bench.publisher().await, [&row])
        .await
        .expect("publish");
    assert_eq!(confirmed, vec![row.id]);

    let taken = bench.wait_for_messages(2).await;
    assert_eq!(
        taken
            .iter()
            .map(|(payload, _)| payload.clone())
            .collect::<Vec<_>>(),
        vec![row.payload.clone(), row.payload.clone()],
        "the writer's copy and the relay's duplicate of the same dispatch"
    );
    bench.wait_for_empty_outbox("the relay's delete").await;
    bench.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_courier_publishes_after_commit_and_forgets_the_row_before_the_relay_would_take_it() {
    // A relay that would take the row after a minute: every copy seen here is the courier's.
    let bench = Bench::new(Duration::from_secs(60)).await;
    let stop = CancellationToken::new();
    let (courier, task) = Courier::start(
        bench.env.store.clone(),
        bench.env.settings.amqp.url.clone(),
        bench.topology.clone(),
        Duration::from_secs(30),
        stop.clone(),
    );
    let (row, written_ms) = bench.commit_dispatch("published-at-commit").await;
    courier.post([row.clone()]);

    let taken = bench.wait_for_messages(1).await;
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].0, row.payload);
    bench
        .wait_for_empty_outbox("the courier forgetting the published row")
        .await;
    tracing::info!(
        ms = taken[0].1 - written_ms,
        "written to published through the courier"
    );
    assert!(
        bench.take_render_queue().await.is_empty(),
        "published once: the row is gone, so the relay has nothing to repeat"
    );
    stop.cancel();
    task.await.expect("courier stops");
    bench.teardown().await;
}
