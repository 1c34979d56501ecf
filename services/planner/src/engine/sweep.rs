//! The sweeper's rounds, each its own unit: expired leases, due retries,
//! jobs paused for funds whose wallet was credited, and idle sessions
//! (paused, warned, then abandoned).

use super::{Apply, Engine, PlannerError, session_event};
use dialectic_core::job::JobEvent;
use dialectic_core::progress::EventKind;
use dialectic_core::session::SessionEvent;
use dialectic_store::{jobs, sessions};
use serde_json::json;

/// Rows each round takes at most; the next sweep takes the rest.
const BATCH: i64 = 100;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SweepReport {
    pub expired_leases: u32,
    pub retries_dispatched: u32,
    /// Jobs paused for funds whose wallet has been credited since.
    pub resumed: u32,
    /// Sessions that paused themselves after `planner.idle_pause_secs` idle.
    pub idle_paused: u32,
    /// Sessions warned that they will be abandoned, and sessions abandoned.
    pub idle_warned: u32,
    pub abandoned: u32,
}

impl Engine {
    /// Moves jobs whose lease ran out back to `retrying`, dispatches retries
    /// that are due, resumes jobs whose wallet was credited, and pauses,
    /// warns or abandons idle sessions.
    pub async fn sweep(&self) -> Result<SweepReport, PlannerError> {
        let mut report = SweepReport::default();
        self.expire_leases(&mut report).await?;
        self.dispatch_due_retries(&mut report).await?;
        self.resume_credited(&mut report).await?;
        if self.config.idle_pause_secs > 0 {
            self.pause_idle_sessions(&mut report).await?;
        }
        if self.config.abandon_warn_secs > 0 {
            self.warn_idle_sessions(&mut report).await?;
            self.abandon_idle_sessions(&mut report).await?;
        }
        Ok(report)
    }

    async fn expire_leases(&self, report: &mut SweepReport) -> Result<(), PlannerError> {
        let mut unit = self.begin(None).await?;
        for id in jobs::expired_leases(&mut unit.tx, BATCH).await? {
            report.expired_leases += 1;
            tracing::warn!(job_id = %id, "lease expired; the worker is gone");
            unit.apply_later(Apply::new(id, JobEvent::LeaseExpired).with_error(
                json!({"code": "lease_expired", "message": "the worker stopped renewing its lease"}),
            ));
        }
        self.finish(unit).await
    }

    async fn dispatch_due_retries(&self, report: &mut SweepReport) -> Result<(), PlannerError> {
        let mut unit = self.begin(None).await?;
        for id in jobs::due_retries(&mut unit.tx, BATCH).await? {
            let job = jobs::lock(&mut unit.tx, id).await?;
            report.retries_dispatched += 1;
            let event = JobEvent::RetryDue {
                attempts_used: job.attempt_count.max(0) as u32,
                max_attempts: job.max_retries.max(1) as u32,
            };
            unit.apply_later(Apply::new(id, event));
        }
        self.finish(unit).await
    }

    async fn resume_credited(&self, report: &mut SweepReport) -> Result<(), PlannerError> {
        let mut unit = self.begin(None).await?;
        for id in jobs::resumable_after_credit(&mut unit.tx, BATCH).await? {
            report.resumed += 1;
            unit.apply_later(Apply::new(id, JobEvent::Resumed));
        }
        self.finish(unit).await
    }

    async fn pause_idle_sessions(&self, report: &mut SweepReport) -> Result<(), PlannerError> {
        let mut unit = self.begin(None).await?;
        let idle = self.config.idle_pause_secs;
        for session in sessions::lock_idle_sessions(&mut unit.tx, idle, BATCH).await? {
            let Some(applied) = self
                .try_session_event(&mut unit, &session, &SessionEvent::IdlePause)
                .await?
            else {
                continue;
            };
            report.idle_paused += 1;
            tracing::info!(session_id = %session.id, idle_secs = idle, "idle session paused");
            let mut event = session_event(&applied, EventKind::SessionPaused);
            event.message =
                format!("paused after {idle} s without activity; resume the session to continue");
            unit.events.push(event);
        }
        self.finish(unit).await
    }

    /// Seed 003 "Session Expiration": a session idle for `abandon_warn_secs`
    /// gets an `idle_warning` event first.
    async fn warn_idle_sessions(&self, report: &mut SweepReport) -> Result<(), PlannerError> {
        let (warn, grace) = (
            self.config.abandon_warn_secs,
            self.config.abandon_after_warn_secs,
        );
        let mut unit = self.begin(None).await?;
        for session in sessions::lock_sessions_to_warn(&mut unit.tx, warn, BATCH).await? {
            sessions::mark_idle_warned(&mut unit.tx, session.id).await?;
            report.idle_warned += 1;
            let mut event = session_event(&session, EventKind::IdleWarning);
            event.message = format!(
                "no activity for {warn} s; the session is abandoned (its documents kept, a resume brings it back) after {grace} s more unless it moves"
            );
            unit.events.push(event);
        }
        self.finish(unit).await
    }

    /// Idle `abandon_after_warn_secs` more after its warning, an unfinished
    /// session is abandoned, its objects kept and where it was remembered, so
    /// a resume brings it back (core's machine; finished work is never reached).
    async fn abandon_idle_sessions(&self, report: &mut SweepReport) -> Result<(), PlannerError> {
        let (warn, grace) = (
            self.config.abandon_warn_secs,
            self.config.abandon_after_warn_secs,
        );
        let mut unit = self.begin(None).await?;
        for session in sessions::lock_sessions_to_abandon(&mut unit.tx, grace, BATCH).await? {
            let Some(applied) = self
                .try_session_event(&mut unit, &session, &SessionEvent::IdleAbandon)
                .await?
            else {
                continue;
            };
            report.abandoned += 1;
            tracing::info!(session_id = %session.id, "idle session abandoned");
            let mut event = session_event(&applied, EventKind::SessionAbandoned);
            event.message = format!(
                "abandoned after {} s without activity; its documents are kept and `dialectic session resume --session {}` continues it",
                warn + grace,
                session.id
            );
            unit.events.push(event);
        }
        self.finish(unit).await
    }
}
