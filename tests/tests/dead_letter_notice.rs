//! A session held up by a dead letter says so (issue 55, item 8). Two
//! sessions' first dispatches die on the way: one sent to the dead-letter
//! exchange by a consumer that gave up on it (our reason, in a header), the
//! other rejected, so the broker dead-letters it itself (its reason, in
//! `x-death`). Each session's notice — GetSession, the real `dialectic
//! session status` and a watch's snapshot — names the step, the stage, the
//! reason and the `dialectic admin dlq replay` command with the letter's id.
//! Replaying one through the real CLI runs that session's stage and takes the
//! letter out of its notice; the other session still names its own.

use dialectic_e2e::{ALL_SERVICES, TestEnv, eventually};
use dialectic_proto::v1::{SessionEventKind, WatchSessionRequest};
use dialectic_queue::dead::{self, DeadLetter};
use dialectic_queue::{Publisher, keys};
use lapin::options::{BasicGetOptions, BasicNackOptions};
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;
use tokio_stream::StreamExt;

const PROMPT: &str = "# Dead letters\n\nA session whose first dispatch dies on the way.";
const OUR_REASON: &str = "test: lost on the way";

/// `dialectic args…` against `env`'s gateway and broker; its output.
async fn dialectic(env: &TestEnv, binary: &Path, args: &[&str]) -> Output {
    let mut command = tokio::process::Command::new(binary);
    command
        .args(args)
        .env("DIALECTIC_AMQP__URL", &env.settings.amqp.url)
        .env("DIALECTIC_AMQP__PREFIX", &env.settings.amqp.prefix);
    dialectic_e2e::against_gateway(&mut command, env)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    tokio::time::timeout(
        Duration::from_secs(120),
        command
            .spawn()
            .expect("dialectic starts")
            .wait_with_output(),
    )
    .await
    .unwrap_or_else(|_| panic!("dialectic {args:?} finished in time"))
    .expect("dialectic ran")
}

/// The session's PLAN job: (id, step key, step name).
async fn plan_job(env: &TestEnv, session_id: &str) -> (uuid::Uuid, String, String) {
    sqlx::query_as(
        "SELECT id, step_key, COALESCE(payload->'step'->>'step_name', '') FROM dialectic_generation_jobs
          WHERE session_id = $1::uuid AND job_type = 'PLAN'",
    )
    .bind(session_id)
    .fetch_one(env.store.pool())
    .await
    .expect("the PLAN job")
}

/// Takes the next PLAN dispatch off its queue (waiting for it to arrive)
/// and lets `kill` dead-letter it.
async fn kill_next_dispatch(env: &TestEnv, by_broker: bool) {
    let topology = dialectic_runtime::topology(&env.settings);
    let connection = dialectic_queue::connect(&env.settings.amqp.url)
        .await
        .expect("amqp");
    let channel = connection.create_channel().await.expect("channel");
    let publisher = Publisher::new(&connection, &topology)
        .await
        .expect("publisher");
    let queue = topology.queue(keys::JOB_PLAN);
    let message = eventually(30, "the PLAN dispatch to be queued", || async {
        channel
            .basic_get(queue.as_str().into(), BasicGetOptions { no_ack: false })
            .await
            .ok()
            .flatten()
    })
    .await;
    if by_broker {
        message
            .delivery
            .acker
            .nack(BasicNackOptions {
                requeue: false,
                multiple: false,
            })
            .await
            .expect("reject");
    } else {
        dialectic_queue::dead_letter(&publisher, &topology, &message.delivery, OUR_REASON)
            .await
            .expect("dead-letter");
    }
    let _ = connection.close(200, "done".into()).await;
}

/// The dead letter dispatching `job`.
async fn letter_of(env: &TestEnv, job: uuid::Uuid) -> DeadLetter {
    let topology = dialectic_runtime::topology(&env.settings);
    let connection = dialectic_queue::connect(&env.settings.amqp.url)
        .await
        .expect("amqp");
    let letters = dead::list(&connection, &topology, 100).await.expect("list");
    let _ = connection.close(200, "done".into()).await;
    letters
        .into_iter()
        .find(|l| l.summary == format!("job dispatch {job}"))
        .unwrap_or_else(|| panic!("a dead letter dispatching {job}"))
}

/// The session's notice once it names `letter`.
async fn notice_naming(env: &TestEnv, session_id: &str, letter: &DeadLetter) -> String {
    eventually(30, "the notice to name the dead letter", || async {
        let notice = env.session(session_id).await.notice;
        notice.contains(&letter.id).then_some(notice)
    })
    .await
}

fn assert_names(notice: &str, parts: &[&str]) {
    for part in parts {
        assert!(notice.contains(part), "{part:?} missing from {notice:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_session_held_up_by_a_dead_letter_names_it_and_its_replay() {
    let binary = dialectic_e2e::workspace_binary("dialectic-cli", "dialectic");
    let mut env = TestEnv::new().await;
    // Everything but the executor: each PLAN dispatch waits in its queue.
    for name in ALL_SERVICES.iter().filter(|n| **n != "executor") {
        env.start(&[name]).await;
        env.wait_serving(name).await;
    }
    let (_, ours) = env.new_session(PROMPT, &["simulated"], false).await;
    kill_next_dispatch(&env, false).await;
    let (_, brokers) = env.new_session(PROMPT, &["simulated"], false).await;
    kill_next_dispatch(&env, true).await;

    let (our_job, step_key, step_name) = plan_job(&env, &ours).await;
    let our_letter = letter_of(&env, our_job).await;
    let notice = notice_naming(&env, &ours, &our_letter).await;
    let replay = format!("dialectic admin dlq replay {}", our_letter.id);
    assert!(!step_key.is_empty() && !step_name.is_empty() && step_key != step_name);
    let step = format!("step \"{step_name}\" ({step_key}) of stage thesis");
    assert_names(
        &notice,
        &[
            "in the dead-letter queue",
            &step,
            "on job.plan was dead-lettered",
            OUR_REASON,
            &replay,
        ],
    );
    let (their_job, _, _) = plan_job(&env, &brokers).await;
    let their_letter = letter_of(&env, their_job).await;
    assert_eq!(their_letter.reason, "rejected", "{their_letter:?}");
    let theirs = notice_naming(&env, &brokers, &their_letter).await;
    assert_names(&theirs, &[&step, "rejected: a consumer refused it"]);
    assert!(!theirs.contains(&our_letter.id), "{theirs}");

    // `dialectic session status` prints it; a new watcher's snapshot says it.
    let status = dialectic(&env, &binary, &["session", "status", "--session", &ours]).await;
    let shown = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{status:?}");
    assert!(shown.contains(&format!("notice: {notice}\n")), "{shown}");
    let mut events = env
        .gateway()
        .await
        .watch_session(WatchSessionRequest {
            session_id: ours.clone(),
            after_sequence: None,
        })
        .await
        .expect("watch")
        .into_inner();
    let snapshot = tokio::time::timeout(Duration::from_secs(30), events.next())
        .await
        .expect("a snapshot in time")
        .expect("an event")
        .expect("not an error");
    assert_eq!(snapshot.event_kind(), SessionEventKind::Snapshot);
    assert_eq!(snapshot.message, notice);
    drop(events);

    // The replay the notice names, through the CLI: the stage runs and the
    // letter leaves the notice; the other session's stays.
    env.start(&["executor"]).await;
    env.wait_serving("executor").await;
    let args: Vec<&str> = replay.split(' ').skip(1).collect();
    let replayed = dialectic(&env, &binary, &args).await;
    assert!(replayed.status.success(), "{replayed:?}");
    env.wait_for_session(&ours, "pending_antithesis", true)
        .await;
    let after = env.session(&ours).await.notice;
    assert!(!after.contains("dead-letter"), "{after}");
    assert_eq!(notice_naming(&env, &brokers, &their_letter).await, theirs);
    env.teardown().await;
}
