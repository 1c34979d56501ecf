//! A fresh, migrated database per test (dropped at the end), on the Postgres
//! that `deploy/stack.sh env` names, and the few rows the contracts need.

#![allow(dead_code)] // each test binary uses its own part of this module

use dialectic_core::ids::{JobId, ModelId, ProjectId, SessionId, UserId, WalletId};
use dialectic_core::job::{JobStatus, JobType};
use dialectic_core::payload::JobPayload;
use dialectic_store::{Store, jobs, projects, sessions};
use sqlx::Connection;
use std::time::Duration;
use uuid::Uuid;

/// The administrator and the simulated model the migrations seed.
pub const USER: UserId = UserId::from_u128(1);
pub const MODEL: ModelId = ModelId::from_u128(0x5000_0000_0000_0000_0000_0000_0000_0001);

pub struct TestDb {
    pub store: Store,
    pub url: String,
    name: String,
    server: String,
}

fn server_url() -> String {
    std::env::var("DIALECTIC_DATABASE__URL")
        .or_else(|_| std::env::var("DATABASE_URL"))
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// `url` with its database replaced by `database` (query string kept).
fn with_database(url: &str, database: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let prefix = base.rsplit_once('/').map_or(base, |(p, _)| p);
    match query {
        Some(q) => format!("{prefix}/{database}?{q}"),
        None => format!("{prefix}/{database}"),
    }
}

impl TestDb {
    /// A pool of `connections` on a new database with every migration applied.
    pub async fn new(connections: u32) -> Self {
        let server = with_database(&server_url(), "postgres");
        let name = format!("store_test_{}", &Uuid::new_v4().simple().to_string()[..12]);
        let mut admin = sqlx::PgConnection::connect(&server)
            .await
            .expect("postgres is reachable (deploy/stack.sh up)");
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut admin)
            .await
            .expect("create the test database");
        let url = with_database(&server, &name);
        let store =
            Store::connect_lazy(&url, connections, Duration::from_secs(10)).expect("pool options");
        store.migrate().await.expect("migrations apply");
        Self {
            store,
            url,
            name,
            server,
        }
    }

    pub async fn drop_database(self) {
        self.store.pool().close().await;
        if let Ok(mut admin) = sqlx::PgConnection::connect(&self.server).await {
            // Best effort: a leftover test database is harmless.
            if let Err(e) = sqlx::query(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ))
            .execute(&mut admin)
            .await
            {
                eprintln!("could not drop {}: {e}", self.name);
            }
        }
    }

    /// A project and a session of the seeded user; returns the session.
    pub async fn session(&self) -> SessionId {
        let (project, _) = projects::insert_project(
            self.store.pool(),
            &projects::NewProject {
                id: ProjectId::new(),
                user_id: USER,
                name: "Contract",
                slug: "contract",
                prompt: "Contracts of the store.",
                prompt_key: "",
                client_request_id: None,
                pipeline: projects::DEFAULT_PIPELINE,
            },
        )
        .await
        .expect("project");
        let mut tx = self.store.begin().await.expect("tx");
        let (session, _) = sessions::insert_session(
            &mut tx,
            &sessions::NewSession {
                id: SessionId::new(),
                project_id: project.id,
                user_id: USER,
                model_ids: &[MODEL],
                description: None,
                client_request_id: None,
                auto_advance: false,
                pushback: Default::default(),
                model_roles: &Default::default(),
            },
        )
        .await
        .expect("session");
        tx.commit().await.expect("commit");
        session.id
    }

    /// A pending PLAN job in `session`.
    pub async fn pending_job(&self, session: SessionId) -> JobId {
        let mut tx = self.store.begin().await.expect("tx");
        let id = JobId::new();
        jobs::insert(
            &mut tx,
            &jobs::NewJob {
                id,
                job_key: format!("{session}:thesis:1:{id}"),
                session_id: session,
                user_id: USER,
                stage_slug: "thesis",
                iteration: 1,
                job_type: JobType::Plan,
                status: JobStatus::Pending,
                step_id: None,
                step_key: None,
                model_id: Some(MODEL),
                document_key: Some("header_context"),
                payload: &JobPayload::default(),
                parent_job_id: None,
                prerequisite_job_id: None,
                target_contribution_id: None,
                max_attempts: 3,
            },
        )
        .await
        .expect("insert job")
        .expect("a new job");
        tx.commit().await.expect("commit");
        id
    }

    pub async fn job(&self, id: JobId) -> jobs::JobRow {
        jobs::get(self.store.pool(), id).await.expect("job")
    }

    /// A wallet of a new user holding `balance`.
    pub async fn wallet(&self, balance: i64) -> WalletId {
        let (user, wallet) = (UserId::new(), WalletId::new());
        sqlx::query("INSERT INTO users (id, display_name) VALUES ($1, 'contract')")
            .bind(user)
            .execute(self.store.pool())
            .await
            .expect("user");
        sqlx::query("INSERT INTO token_wallets (id, user_id, balance) VALUES ($1, $2, $3)")
            .bind(wallet)
            .bind(user)
            .bind(balance)
            .execute(self.store.pool())
            .await
            .expect("wallet");
        wallet
    }

    /// (balance, held) of a wallet.
    pub async fn balance(&self, wallet: WalletId) -> (i64, i64) {
        sqlx::query_as("SELECT balance, held FROM token_wallets WHERE id = $1")
            .bind(wallet)
            .fetch_one(self.store.pool())
            .await
            .expect("balance")
    }
}

/// Waits up to 30 s for `holds` to become true, checking every 20 ms.
pub async fn eventually<F, Fut>(what: &str, mut holds: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let give_up = std::time::Instant::now() + Duration::from_secs(30);
    while !holds().await {
        assert!(
            std::time::Instant::now() < give_up,
            "timed out waiting: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
