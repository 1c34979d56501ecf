//! An operator reads the dead-letter queue and replays what is in it: a lost
//! dispatch brings its job back to life; a finished job's dispatch is a no-op.

use dialectic_e2e::{ALL_SERVICES, TestEnv, eventually};
use dialectic_queue::dead::{self, Selection};
use dialectic_queue::{Publisher, keys};
use lapin::options::BasicGetOptions;
use lapin::types::{AMQPValue, FieldTable};

const PROMPT: &str = "# Dead letters\n\nA session whose first dispatch dies on the way.";

/// Moves every message of `routing_key`'s queue to the dead-letter exchange, as
/// a consumer that gave up on them would; returns how many it moved.
async fn kill_queue(env: &TestEnv, routing_key: &str, reason: &str) -> usize {
    let topology = dialectic_runtime::topology(&env.settings);
    let connection = dialectic_queue::connect(&env.settings.amqp.url)
        .await
        .expect("amqp");
    let channel = connection.create_channel().await.expect("channel");
    let publisher = Publisher::new(&connection, &topology)
        .await
        .expect("publisher");
    let mut moved = 0;
    while let Ok(Some(message)) = channel
        .basic_get(
            topology.queue(routing_key).as_str().into(),
            BasicGetOptions { no_ack: false },
        )
        .await
    {
        dialectic_queue::dead_letter(&publisher, &topology, &message.delivery, reason)
            .await
            .expect("dead-letter");
        moved += 1;
    }
    let _ = connection.close(200, "done".into()).await;
    moved
}

async fn job_row(env: &TestEnv, job_type: &str) -> (uuid::Uuid, String, i32) {
    sqlx::query_as(
        "SELECT id, status, attempt_count FROM dialectic_generation_jobs
          WHERE job_type = $1 ORDER BY created_at LIMIT 1",
    )
    .bind(job_type)
    .fetch_one(env.store.pool())
    .await
    .expect("job")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dead_letters_are_listed_and_replayed_and_a_finished_jobs_replay_is_a_no_op() {
    let mut env = TestEnv::new().await;
    let topology = dialectic_runtime::topology(&env.settings);
    // Everything but the executor: the PLAN dispatch waits in its queue.
    for name in ALL_SERVICES.iter().filter(|n| **n != "executor") {
        env.start(&[name]).await;
        env.wait_serving(name).await;
    }
    let (_, session_id) = env.new_session(PROMPT, &["simulated"], false).await;
    let moved = eventually(30, "the PLAN dispatch to be queued", || async {
        match kill_queue(&env, keys::JOB_PLAN, "test: lost on the way").await {
            0 => None,
            n => Some(n),
        }
    })
    .await;
    assert_eq!(moved, 1);
    // Something that can never be handled, beside it.
    let connection = dialectic_queue::connect(&env.settings.amqp.url)
        .await
        .expect("amqp");
    let publisher = Publisher::new(&connection, &topology)
        .await
        .expect("publisher");
    let mut poison_headers = FieldTable::default();
    poison_headers.insert(
        dialectic_queue::DEAD_REASON_HEADER.into(),
        AMQPValue::LongString("undecodable".into()),
    );
    publisher
        .publish_to(
            &topology.dead_letter_exchange(),
            keys::JOB_EXECUTE,
            b"\x00 poison",
            poison_headers,
        )
        .await
        .expect("poison");

    let letters = dead::list(&connection, &topology, 100).await.expect("list");
    assert_eq!(letters.len(), 2, "{letters:?}");
    let (plan_job, status, _) = job_row(&env, "PLAN").await;
    assert_eq!(status, "pending", "nothing ran it");
    let lost = letters
        .iter()
        .find(|l| l.routing_key == keys::JOB_PLAN)
        .expect("the lost dispatch is listed");
    assert_eq!(lost.reason, "test: lost on the way");
    assert_eq!(lost.summary, format!("job dispatch {plan_job}"));
    let poison = letters
        .iter()
        .find(|l| l.routing_key == keys::JOB_EXECUTE)
        .expect("the poison message is listed");
    assert!(poison.summary.starts_with("undecodable"), "{poison:?}");
    // Listing takes nothing away.
    assert_eq!(
        dead::list(&connection, &topology, 100)
            .await
            .expect("list")
            .len(),
        2
    );

    // Replaying the lost dispatch runs the stage.
    env.start(&["executor"]).await;
    env.wait_serving("executor").await;
    let replayed = dead::replay(
        &connection,
        &topology,
        &Selection::Ids(vec![lost.id[..8].to_string()]),
        100,
    )
    .await
    .expect("replay");
    assert_eq!(replayed.len(), 1);
    env.wait_for_session(&session_id, "pending_antithesis", true)
        .await;
    let left = dead::list(&connection, &topology, 100).await.expect("list");
    assert_eq!(left.len(), 1, "only the poison message stays: {left:?}");
    assert_eq!(left[0].id, poison.id);

    // Replaying the same dispatch again, after its job finished, changes nothing.
    let contributions = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM dialectic_contributions")
            .fetch_one(env.store.pool())
            .await
            .expect("count")
    };
    let before = contributions().await;
    let (_, status, attempts) = job_row(&env, "PLAN").await;
    assert_eq!((status.as_str(), attempts), ("completed", 1));
    publisher
        .publish_to(
            &topology.dead_letter_exchange(),
            keys::JOB_PLAN,
            &lost.body,
            FieldTable::default(),
        )
        .await
        .expect("dead again");
    let replayed = dead::replay(&connection, &topology, &Selection::All, 100)
        .await
        .expect("replay all");
    assert_eq!(replayed.len(), 2, "the finished dispatch and the poison");
    // The poison dies again (a consumer dead-letters it); the dispatch is dropped.
    let back = eventually(30, "the poison to return to the dead queue", || async {
        let now = dead::list(&connection, &topology, 100).await.ok()?;
        (now.len() == 1).then_some(now)
    })
    .await;
    assert_eq!(back[0].id, poison.id);
    let (_, status, attempts) = job_row(&env, "PLAN").await;
    assert_eq!((status.as_str(), attempts), ("completed", 1));
    assert_eq!(
        contributions().await,
        before,
        "no model call was made again"
    );
    let _ = connection.close(200, "done".into()).await;
    env.teardown().await;
}
