//! Postgres adapter. Every write that implies a message writes its outbox row
//! in the same transaction; every job transition is a compare-and-set.

pub mod api;
pub mod attempts;
pub mod auth;
pub mod blackboard;
pub mod clarifications;
pub mod contributions;
pub mod dead_letters;
pub mod error;
pub mod gates;
pub mod idempotency;
pub mod index;
pub mod inputs;
pub mod jobs;
pub mod ledger;
pub mod listing;
pub mod models;
pub mod outbox;
pub mod pipelines;
pub mod position;
pub mod project_documents;
pub mod projects;
pub mod query;
pub mod query_history;
pub mod recipe_edit;
pub mod recipes;
pub mod regenerate;
pub mod resources;
pub mod revisit;
pub mod sessions;
pub mod skips;
pub mod stages;
pub mod stats;
pub mod templates;
pub mod traces;
pub mod wallets;

pub use error::StoreError;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres, Transaction};
use std::str::FromStr;
use std::time::Duration;

pub type Tx<'a> = Transaction<'a, Postgres>;
/// One database connection, pooled or a transaction's, for reads that must
/// share the caller's connection.
pub type Conn = sqlx::PgConnection;

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaStatus {
    UpToDate,
    /// The database lacks migrations this build ships: run `migrate`.
    Behind {
        database: i64,
        code: i64,
    },
    /// The database is newer, but only expanded since this build's schema
    /// (`schema_compatibility`): this build runs on it, as the previous
    /// release does during a rolling upgrade.
    Compatible {
        database: i64,
        code: i64,
    },
    /// The database was contracted past what this build knows: refuse to run.
    Ahead {
        database: i64,
        code: i64,
    },
}

const IDLE_BEFORE_PING: Duration = Duration::from_secs(1);

/// How a pool's connections plan the statements they prepare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Planning {
    /// Postgres's default: once a statement has run five times, a generic
    /// plan when it looks no dearer than planning each call.
    Cached,
    /// Every call planned for its arguments and the tables as they are now
    /// (`plan_cache_mode = force_custom_plan`). For the ledger: it grows from
    /// one row, and a generic plan made while the table was a few pages scans
    /// it whole on every call long after it has grown, until autovacuum
    /// analyzes it (BENCHMARKS.md, the plan-cache round). Planning a ledger
    /// statement costs less than that scan; planning the bigger statements of
    /// the other services did not pay.
    EachCall,
}

#[derive(Clone, Debug)]
pub struct Store {
    pool: PgPool,
}

impl Store {
    /// Builds the pool without connecting, so a service can start while Postgres is down.
    pub fn connect_lazy(
        url: &str,
        max_connections: u32,
        connect_timeout: Duration,
    ) -> Result<Self, StoreError> {
        Self::connect_lazy_with(url, max_connections, connect_timeout, Planning::Cached)
    }

    /// [`Self::connect_lazy`] with the connections' [`Planning`].
    pub fn connect_lazy_with(
        url: &str,
        max_connections: u32,
        connect_timeout: Duration,
        planning: Planning,
    ) -> Result<Self, StoreError> {
        let options = PgConnectOptions::from_str(url)?;
        let options = match planning {
            Planning::Cached => options,
            Planning::EachCall => options.options([("plan_cache_mode", "force_custom_plan")]),
        };
        Ok(Self::lazy_pool(options, max_connections, connect_timeout))
    }

    fn lazy_pool(
        options: PgConnectOptions,
        max_connections: u32,
        connect_timeout: Duration,
    ) -> Self {
        // sqlx pings every connection it hands out by default: one round trip
        // per checkout, some twenty per job (BENCHMARKS.md). A connection busy
        // within the last second is as alive as a ping would show; an idle one
        // (e.g. from before a Postgres restart) is still checked.
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(connect_timeout)
            .test_before_acquire(false)
            .before_acquire(|conn, meta| {
                Box::pin(async move {
                    if meta.idle_for >= IDLE_BEFORE_PING {
                        sqlx::Connection::ping(conn).await?;
                    }
                    Ok(true)
                })
            })
            .connect_lazy_with(options);
        Self { pool }
    }

    pub fn from_pool(pool: PgPool) -> Self {
        Self { pool }
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    pub async fn begin(&self) -> Result<Tx<'static>, StoreError> {
        Ok(self.pool.begin().await?)
    }

    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// Postgres answers on a connection of its own, outside the pool: tells
    /// a Postgres that is down from a pool whose connections are all busy
    /// (both time out an acquire).
    pub async fn ping_unpooled(&self) -> Result<(), StoreError> {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect_with(&self.pool.connect_options()).await?;
        sqlx::query("SELECT 1").execute(&mut conn).await?;
        conn.close().await?;
        Ok(())
    }

    /// Applies the SQL migrations, then installs each shipped pipeline file
    /// whose newest installed version differs from it.
    pub async fn migrate(&self) -> Result<Vec<pipelines::Installed>, StoreError> {
        MIGRATOR.run(&self.pool).await?;
        pipelines::install_shipped(&self.pool).await
    }

    pub async fn schema_status(&self) -> Result<SchemaStatus, StoreError> {
        let code = MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0);
        let exists: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
            .fetch_one(&self.pool)
            .await?;
        let database: i64 = if exists {
            sqlx::query_scalar(
                "SELECT COALESCE(MAX(version), 0) FROM _sqlx_migrations WHERE success",
            )
            .fetch_one(&self.pool)
            .await?
        } else {
            0
        };
        Ok(match database.cmp(&code) {
            std::cmp::Ordering::Equal => SchemaStatus::UpToDate,
            std::cmp::Ordering::Less => SchemaStatus::Behind { database, code },
            std::cmp::Ordering::Greater if code >= self.oldest_compatible().await? => {
                SchemaStatus::Compatible { database, code }
            }
            std::cmp::Ordering::Greater => SchemaStatus::Ahead { database, code },
        })
    }

    /// The schema version of the oldest build the database still works with.
    async fn oldest_compatible(&self) -> Result<i64, StoreError> {
        let oldest: Option<i64> =
            sqlx::query_scalar("SELECT oldest_compatible FROM schema_compatibility")
                .fetch_optional(&self.pool)
                .await?;
        Ok(oldest.unwrap_or(i64::MAX))
    }
}
