//! The job table's contract with the workers and the planner: the claim is a
//! compare-and-set, a lease is extended and released only by the attempt that
//! holds it, and the sweeper sees exactly the leases that ran out.

mod common;

use common::TestDb;
use dialectic_core::ids::JobId;
use dialectic_core::job::{JobStatus, JobType};
use dialectic_store::jobs;

async fn claim(db: &TestDb, job: JobId, worker: &str) -> Option<jobs::JobRow> {
    claim_on(db.store.pool(), job, worker).await
}

async fn claim_on(pool: &sqlx::PgPool, job: JobId, worker: &str) -> Option<jobs::JobRow> {
    jobs::claim::<()>(
        pool,
        job,
        &[JobType::Plan],
        jobs::ClaimScope::Any,
        worker,
        60,
    )
    .await
    .expect("claim query")
    .map(|claimed| claimed.job)
}

async fn expire_lease(db: &TestDb, job: JobId) {
    sqlx::query(
        "UPDATE dialectic_generation_jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
    )
    .bind(job)
    .execute(db.store.pool())
    .await
    .expect("expire");
}

async fn expired(db: &TestDb) -> Vec<JobId> {
    let mut tx = db.store.begin().await.expect("tx");
    let ids = jobs::expired_leases(&mut tx, 100).await.expect("sweep");
    tx.rollback().await.expect("rollback");
    ids
}

async fn set_status(db: &TestDb, job: JobId, status: JobStatus) {
    let mut tx = db.store.begin().await.expect("tx");
    jobs::set_status(&mut tx, job, status, None, None)
        .await
        .expect("status");
    tx.commit().await.expect("commit");
}

/// Statements of this test's database waiting for a lock.
async fn lock_waiters(db: &TestDb) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity
         WHERE datname = current_database() AND wait_event_type = 'Lock'",
    )
    .fetch_one(db.store.pool())
    .await
    .expect("lock waiters")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_workers_racing_for_a_job_one_wins_the_first_attempt() {
    let db = TestDb::new(8).await;
    let session = db.session().await;
    let job = db.pending_job(session).await;
    // Hold the job's row so that both claims start while it is pending and
    // wait on the same lock: released together, they truly race. Without it,
    // two claims one after the other would pass as well.
    let mut gate = db.store.begin().await.expect("tx");
    sqlx::query("SELECT 1 FROM dialectic_generation_jobs WHERE id = $1 FOR UPDATE")
        .bind(job)
        .execute(&mut *gate)
        .await
        .expect("hold the job's row");
    let racers = ["worker-a", "worker-b"].map(|worker| {
        let store = db.store.clone();
        tokio::spawn(async move {
            claim_on(store.pool(), job, worker)
                .await
                .map(|row| (worker, row.attempt_count))
        })
    });
    common::eventually("both claims wait on the job's row", || async {
        lock_waiters(&db).await == 2
    })
    .await;
    gate.rollback().await.expect("release the job's row");
    let mut winners = Vec::new();
    for racer in racers {
        winners.extend(racer.await.expect("task"));
    }
    assert_eq!(winners.len(), 1, "exactly one claim wins: {winners:?}");
    let (winner, attempt) = winners[0];
    assert_eq!(attempt, 1);
    let row = db.job(job).await;
    assert_eq!(row.status, "processing");
    assert_eq!(row.lease_owner.as_deref(), Some(winner));
    // A duplicate dispatch of the running job claims nothing.
    assert!(claim(&db, job, "worker-c").await.is_none());
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_owning_attempt_extends_its_lease() {
    let db = TestDb::new(4).await;
    let job = db.pending_job(db.session().await).await;
    let claimed = claim(&db, job, "worker-a").await.expect("claimed");
    let before = claimed.lease_expires_at.expect("a lease");
    let pool = db.store.pool();
    assert!(
        !jobs::heartbeat(pool, job, 1, "worker-b", 600)
            .await
            .expect("hb")
    );
    assert!(
        !jobs::heartbeat(pool, job, 2, "worker-a", 600)
            .await
            .expect("hb")
    );
    assert_eq!(
        db.job(job).await.lease_expires_at,
        Some(before),
        "refused heartbeats change nothing"
    );
    assert!(
        jobs::heartbeat(pool, job, 1, "worker-a", 600)
            .await
            .expect("hb")
    );
    let after = db.job(job).await.lease_expires_at.expect("a lease");
    assert!(after > before, "the owner's heartbeat extends the lease");
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweeper_sees_exactly_the_leases_that_ran_out() {
    let db = TestDb::new(4).await;
    let session = db.session().await;
    let (stale, alive) = (db.pending_job(session).await, db.pending_job(session).await);
    claim(&db, stale, "worker-a").await.expect("claimed");
    claim(&db, alive, "worker-b").await.expect("claimed");
    expire_lease(&db, stale).await;
    expire_lease(&db, alive).await;
    // The second worker is alive after all: its heartbeat renews the lease.
    assert!(
        jobs::heartbeat(db.store.pool(), alive, 1, "worker-b", 60)
            .await
            .expect("hb")
    );
    assert_eq!(expired(&db).await, vec![stale]);
    db.drop_database().await;
}

async fn outbox_rows(db: &TestDb) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM outbox")
        .fetch_one(db.store.pool())
        .await
        .expect("outbox rows")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_attempt_cannot_release_the_retry_s_lease() {
    let db = TestDb::new(4).await;
    let job = db.pending_job(db.session().await).await;
    claim(&db, job, "worker-a").await.expect("attempt 1");
    // Its lease ran out; the planner put the job back and another worker took it.
    set_status(&db, job, JobStatus::Retrying).await;
    let retry = claim(&db, job, "worker-b").await.expect("attempt 2");
    assert_eq!(retry.attempt_count, 2);
    let release = |attempt: i32, worker: &'static str| {
        let pool = db.store.pool().clone();
        async move {
            jobs::release_lease(&pool, job, attempt, worker, "job.event", b"outcome", None)
                .await
                .expect("release")
        }
    };
    assert!(
        release(1, "worker-a").await.is_none(),
        "the late first attempt owns nothing"
    );
    assert_eq!(db.job(job).await.lease_owner.as_deref(), Some("worker-b"));
    assert_eq!(outbox_rows(&db).await, 0, "and writes no outcome");
    let row = release(2, "worker-b")
        .await
        .expect("the retry owns its lease");
    assert_eq!(row.payload, b"outcome");
    assert_eq!(
        outbox_rows(&db).await,
        1,
        "one outcome, written with the release"
    );
    assert_eq!(db.job(job).await.lease_owner, None);
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_or_abandoned_session_s_jobs_are_not_claimed() {
    let db = TestDb::new(4).await;
    for status in ["paused", "abandoned"] {
        let session = db.session().await;
        let job = db.pending_job(session).await;
        sqlx::query("UPDATE dialectic_sessions SET status = $2 WHERE id = $1")
            .bind(session)
            .bind(status)
            .execute(db.store.pool())
            .await
            .expect("status");
        assert!(claim(&db, job, "worker-a").await.is_none(), "{status}");
        let row = db.job(job).await;
        assert_eq!(
            (row.status.as_str(), row.attempt_count),
            ("pending", 0),
            "{status}"
        );
    }
    db.drop_database().await;
}

async fn claim_in(db: &TestDb, job: JobId, scope: jobs::ClaimScope) -> bool {
    jobs::claim::<()>(db.store.pool(), job, &[JobType::Plan], scope, "worker", 60)
        .await
        .expect("claim query")
        .is_some()
}

/// A root PLAN job starts its stage, so only a stage-start claim takes it;
/// any other job only a claim that starts no stage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_takes_only_the_jobs_of_its_scope() {
    use jobs::ClaimScope::{NoStageStart, StageStarts};
    let db = TestDb::new(4).await;
    let session = db.session().await;
    let root = db.pending_job(session).await;
    let child = db.pending_job(session).await;
    sqlx::query("UPDATE dialectic_generation_jobs SET parent_job_id = $2 WHERE id = $1")
        .bind(child)
        .bind(root)
        .execute(db.store.pool())
        .await
        .expect("make it a child");
    assert!(
        !claim_in(&db, root, NoStageStart).await,
        "a root PLAN job starts its stage"
    );
    assert!(
        !claim_in(&db, child, StageStarts).await,
        "a child starts no stage"
    );
    assert!(claim_in(&db, root, StageStarts).await);
    assert!(claim_in(&db, child, NoStageStart).await);
    db.drop_database().await;
}
