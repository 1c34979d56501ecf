//! The outbox's contract with the relay: only committed messages exist, they
//! come out in order, concurrent relays never take the same row, and a row
//! whose taker rolled back is taken again. Rows younger than the relay's age
//! threshold are left to their writer, which forgets them once published.

mod common;

use common::TestDb;
use dialectic_store::outbox;
use std::time::Duration;

/// The relay's age threshold when a test wants every committed row.
const NOW: Duration = Duration::ZERO;

async fn enqueue(db: &TestDb, payloads: &[&str]) {
    let mut tx = db.store.begin().await.expect("tx");
    for payload in payloads {
        outbox::enqueue(&mut tx, "job.plan", payload.as_bytes(), None)
            .await
            .expect("enqueue");
    }
    tx.commit().await.expect("commit");
}

fn payloads(rows: &[outbox::OutboxRow]) -> Vec<String> {
    rows.iter()
        .map(|r| String::from_utf8_lossy(&r.payload).into_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_committed_messages_exist_and_they_come_out_in_order() {
    let db = TestDb::new(4).await;
    let mut tx = db.store.begin().await.expect("tx");
    outbox::enqueue(&mut tx, "job.plan", b"rolled back", None)
        .await
        .expect("enqueue");
    tx.rollback().await.expect("rollback");
    assert_eq!(
        outbox::pending_count(db.store.pool()).await.expect("count"),
        0
    );

    enqueue(&db, &["a", "b", "c"]).await;
    assert_eq!(
        outbox::pending_count(db.store.pool()).await.expect("count"),
        3
    );
    let mut tx = db.store.begin().await.expect("tx");
    let taken = outbox::take_batch(&mut tx, 10, NOW).await.expect("take");
    tx.commit().await.expect("commit");
    assert_eq!(payloads(&taken), vec!["a", "b", "c"]);
    assert_eq!(
        outbox::pending_count(db.store.pool()).await.expect("count"),
        0
    );
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_relays_at_once_take_disjoint_rows() {
    let db = TestDb::new(4).await;
    enqueue(&db, &["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"]).await;
    let mut first = db.store.begin().await.expect("tx");
    let mut second = db.store.begin().await.expect("tx");
    // The first relay holds its five rows (uncommitted) while the second takes.
    let a = outbox::take_batch(&mut first, 5, NOW).await.expect("take");
    // Bounded: a relay that waited for the first one's rows would hang here.
    let b = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        outbox::take_batch(&mut second, 10, NOW),
    )
    .await
    .expect("the second relay skips locked rows instead of waiting")
    .expect("take");
    assert_eq!(payloads(&a), vec!["0", "1", "2", "3", "4"]);
    assert_eq!(payloads(&b), vec!["5", "6", "7", "8", "9"]);
    first.commit().await.expect("commit");
    second.commit().await.expect("commit");
    assert_eq!(
        outbox::pending_count(db.store.pool()).await.expect("count"),
        0
    );
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_whose_relay_rolled_back_is_taken_again() {
    let db = TestDb::new(4).await;
    enqueue(&db, &["once"]).await;
    let mut crashed = db.store.begin().await.expect("tx");
    let lost = outbox::take_batch(&mut crashed, 10, NOW)
        .await
        .expect("take");
    crashed.rollback().await.expect("rollback");
    let mut tx = db.store.begin().await.expect("tx");
    let again = outbox::take_batch(&mut tx, 10, NOW).await.expect("take");
    tx.commit().await.expect("commit");
    assert_eq!(lost.len(), 1);
    assert_eq!(
        again.iter().map(|r| r.id).collect::<Vec<_>>(),
        vec![lost[0].id]
    );
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_leaves_young_rows_to_their_writer_which_forgets_them() {
    let db = TestDb::new(4).await;
    let mut tx = db.store.begin().await.expect("tx");
    let mine = outbox::enqueue(&mut tx, "job.plan", b"mine", None)
        .await
        .expect("enqueue");
    let theirs = outbox::enqueue(&mut tx, "job.plan", b"theirs", None)
        .await
        .expect("enqueue");
    tx.commit().await.expect("commit");

    let mut relay = db.store.begin().await.expect("tx");
    let taken = outbox::take_batch(&mut relay, 10, Duration::from_secs(60))
        .await
        .expect("take");
    relay.commit().await.expect("commit");
    assert!(
        taken.is_empty(),
        "a row younger than min_age stays: {taken:?}"
    );

    // The writer published `mine` and forgets it; `theirs` (its writer died
    // before publishing) is the relay's once old enough.
    let forgotten = outbox::forget(db.store.pool(), &[mine.id])
        .await
        .expect("forget");
    assert_eq!(forgotten, 1);
    let mut relay = db.store.begin().await.expect("tx");
    let taken = outbox::take_batch(&mut relay, 10, NOW).await.expect("take");
    relay.commit().await.expect("commit");
    assert_eq!(
        taken.iter().map(|r| r.id).collect::<Vec<_>>(),
        vec![theirs.id]
    );
    assert_eq!(taken[0].payload, b"theirs");
    db.drop_database().await;
}
