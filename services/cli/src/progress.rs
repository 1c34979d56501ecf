//! What `run` and `watch` show while a session works: one line per event
//! (text or JSON) on stdout when it is not a terminal or `--output json` is
//! given, else one progress bar per stage with the cost so far, drawn on
//! stderr (as gh draws its progress: only when both are terminals).
//!
//! [`Board`] decides what the bars say from the watched events and the
//! session's job counts (events carry no counts, so [`Refresh`] says when to
//! read them again with GetSession); [`Bars`] only draws it with `indicatif`.

use crate::output::{Out, Render, note};
use crate::{format, json};
use dialectic_core::session::SessionStatus;
use dialectic_proto::v1::{JobStatus, Session, SessionEvent, SessionEventKind, StageJobCounts};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::Value;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// How often the watch loop asks whether the counts should be read again.
pub const TICK: Duration = Duration::from_millis(250);

/// Bars only for a person at a terminal that can move its cursor; scripts,
/// pipes, redirections and `--output json` get the lines they always got.
pub fn use_bars(text: bool, terminals: bool, term: Option<&str>) -> bool {
    text && terminals && term != Some("dumb")
}

/// How a stage is doing, as its bar says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Started (or about to), no job yet.
    Waiting,
    Running,
    /// The session is paused in this stage.
    Paused,
    /// Completed; documents still rendering.
    Rendering,
    Done,
    Failed,
}

impl Phase {
    fn word(self) -> &'static str {
        match self {
            Phase::Waiting => "waiting",
            Phase::Running => "running",
            Phase::Paused => "paused",
            Phase::Rendering => "rendering",
            Phase::Done => "done",
            Phase::Failed => "failed",
        }
    }
}

/// How a stage ended, as its events said (cleared when it starts again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    Completed,
    Failed,
}

/// One stage's counts: GetSession's, plus what the events said since.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Stage {
    slug: String,
    counts: StageJobCounts,
    percent: u32,
    ended: Option<Ended>,
}

impl Stage {
    /// Jobs that count: every job of the stage but those a regeneration replaced.
    fn total(&self) -> u64 {
        let c = &self.counts;
        (u64::from(c.plan) + u64::from(c.execute) + u64::from(c.render))
            .saturating_sub(u64::from(c.superseded))
    }

    /// Jobs that will not run again: completed or failed.
    fn done(&self) -> u64 {
        (u64::from(self.counts.completed) + u64::from(self.counts.failed)).min(self.total())
    }
}

/// What one stage's bar draws: `label [bar] text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The stage slug, padded so the bars line up.
    pub label: String,
    pub position: u64,
    pub length: u64,
    /// e.g. `7/9 jobs  running 40%  cost 1234`, or `waiting` before the
    /// stage has a job.
    pub text: String,
    pub phase: Phase,
}

/// The state the bars show: one stage per slug in the order they ran, the
/// session's status, position and cost.
#[derive(Debug, Default)]
pub struct Board {
    session_id: String,
    status: String,
    /// The stage the session is in (its last `stage_started`, or GetSession's).
    current: String,
    cost: i64,
    /// GetSession's position summary and stage percent.
    position: Option<(String, u32)>,
    stages: Vec<Stage>,
}

impl Board {
    pub fn new(session_id: &str) -> Self {
        Self {
            session_id: session_id.to_string(),
            ..Self::default()
        }
    }

    fn stage(&mut self, slug: &str) -> &mut Stage {
        let index = match self.stages.iter().position(|s| s.slug == slug) {
            Some(i) => i,
            None => {
                self.stages.push(Stage {
                    slug: slug.to_string(),
                    ..Stage::default()
                });
                self.stages.len() - 1
            }
        };
        &mut self.stages[index]
    }

    /// Takes in one watched event. Returns a line to keep above the bars
    /// when the event is one a person should not miss (a failure, a pause).
    pub fn event(&mut self, e: &SessionEvent) -> Option<String> {
        if !e.session_status.is_empty() {
            self.status = e.session_status.clone();
        }
        if !e.stage_slug.is_empty() {
            let kind = e.event_kind();
            let stage = self.stage(&e.stage_slug);
            stage.percent = e.stage_percent;
            match kind {
                // A retried stage runs again after its failure.
                SessionEventKind::StageStarted | SessionEventKind::StageRetried => {
                    stage.ended = None
                }
                SessionEventKind::StageCompleted => stage.ended = Some(Ended::Completed),
                SessionEventKind::StageFailed => stage.ended = Some(Ended::Failed),
                _ => {}
            }
            if kind == SessionEventKind::StageStarted {
                self.current = e.stage_slug.clone();
            }
        }
        kept(e).then(|| format::event(e))
    }

    /// Takes in GetSession's answer: the job counts and costs per stage.
    pub fn session(&mut self, s: &Session) {
        if !s.status.is_empty() {
            self.status = s.status.clone();
        }
        if !s.current_stage.is_empty() {
            self.current = s.current_stage.clone();
        }
        self.cost = s.cost;
        self.position = s
            .position
            .as_ref()
            .map(|p| (p.summary.clone(), p.stage_percent));
        for counts in &s.jobs {
            let stage = self.stage(&counts.stage_slug);
            stage.counts = counts.clone();
        }
        if let Some((_, percent)) = self.position {
            let current = self.current.clone();
            if let Some(stage) = self.stages.iter_mut().find(|s| s.slug == current) {
                stage.percent = percent;
            }
        }
    }

    /// The stage the session is in, if any: the one running, the one about
    /// to start, or where it paused. Others with jobs are behind it.
    fn active(&self) -> Option<&str> {
        if self.status == SessionStatus::PAUSED {
            return Some(&self.current);
        }
        self.status
            .strip_prefix(SessionStatus::RUNNING_PREFIX)
            .or_else(|| self.status.strip_prefix(SessionStatus::PENDING_PREFIX))
            .or_else(|| self.status.strip_prefix(SessionStatus::FAILED_PREFIX))
    }

    fn phase(&self, stage: &Stage) -> Phase {
        let active = self.active() == Some(stage.slug.as_str());
        let in_flight = stage.counts.in_flight > 0;
        // Only its own event says a stage without a job is done: at review,
        // or behind the active stage, a stage whose counts have not been read
        // yet has simply not been seen working.
        let finished = stage.ended == Some(Ended::Completed)
            || (stage.total() > 0 && (self.status == SessionStatus::REVIEW || !active));
        // A watch that began after the failure saw no stage_failed event.
        let failed_here = active && self.status.starts_with(SessionStatus::FAILED_PREFIX);
        match stage.ended {
            Some(Ended::Failed) => Phase::Failed,
            _ if failed_here => Phase::Failed,
            _ if finished && in_flight => Phase::Rendering,
            _ if finished => Phase::Done,
            _ if self.status == SessionStatus::PAUSED => Phase::Paused,
            _ if stage.total() == 0 => Phase::Waiting,
            _ => Phase::Running,
        }
    }

    /// One row per stage, in the order the stages ran.
    pub fn rows(&self) -> Vec<Row> {
        let width = self.stages.iter().map(|s| s.slug.len()).max().unwrap_or(0);
        self.stages
            .iter()
            .map(|stage| {
                let phase = self.phase(stage);
                let (done, total) = (stage.done(), stage.total());
                // Counts and cost only once the stage has jobs: "0/0 jobs"
                // reads as finished work, where there is none yet.
                let mut text = if total > 0 {
                    format!("{done}/{total} jobs  ")
                } else {
                    String::new()
                };
                match phase {
                    Phase::Running => text.push_str(&format!("running {}%", stage.percent)),
                    other => text.push_str(other.word()),
                }
                if stage.counts.failed > 0 {
                    text.push_str(&format!(" ({} failed)", stage.counts.failed));
                }
                if total > 0 {
                    text.push_str(&format!("  cost {}", stage.counts.cost));
                }
                Row {
                    label: format!("{:<width$}", stage.slug),
                    // An empty bar for a stage with no job yet, not a full one.
                    position: done,
                    length: total.max(1),
                    text,
                    phase,
                }
            })
            .collect()
    }

    /// The line under the bars: the session, its status, the cost so far and
    /// where it is.
    pub fn status_line(&self) -> String {
        let mut line = format!(
            "session {} {}  cost {} tokens",
            self.session_id,
            if self.status.is_empty() {
                "-"
            } else {
                &self.status
            },
            self.cost
        );
        if let Some((summary, percent)) = &self.position
            && !summary.is_empty()
        {
            line.push_str(&format!("  at {summary} ({percent}%)"));
        }
        line
    }
}

/// Events worth a line of their own above the bars.
fn kept(e: &SessionEvent) -> bool {
    use SessionEventKind as Kind;
    match e.event_kind() {
        Kind::StageFailed
        | Kind::StageRetried
        | Kind::WalletInsufficient
        | Kind::IdleWarning
        | Kind::SessionPaused
        | Kind::SessionResumed
        | Kind::SessionCancelled
        | Kind::SessionAbandoned
        | Kind::SessionCompleted
        | Kind::LowConfidence
        | Kind::ClarificationIgnored
        | Kind::SkipIgnored => true,
        Kind::JobStatus => matches!(
            e.job_status(),
            JobStatus::Failed | JobStatus::RetryLoopFailed | JobStatus::PausedNsf
        ),
        _ => false,
    }
}

/// When to read the counts again: soon after an event, and every few
/// seconds regardless (a stage's renders finish without a stage event).
#[derive(Debug)]
pub struct Refresh {
    last: Option<Instant>,
    dirty: bool,
}

impl Refresh {
    /// After an event, no sooner than this since the last read.
    pub const MIN: Duration = Duration::from_millis(250);
    /// Without events, this often.
    pub const MAX: Duration = Duration::from_secs(2);

    pub fn new() -> Self {
        Self {
            last: None,
            dirty: true,
        }
    }

    pub fn saw_event(&mut self) {
        self.dirty = true;
    }

    pub fn due(&self, now: Instant) -> bool {
        match self.last {
            None => true,
            Some(last) => {
                let since = now.saturating_duration_since(last);
                (self.dirty && since >= Self::MIN) || since >= Self::MAX
            }
        }
    }

    pub fn done(&mut self, now: Instant) {
        self.last = Some(now);
        self.dirty = false;
    }
}

/// Draws a [`Board`]: a bar per stage and a status line under them.
pub struct Bars {
    multi: MultiProgress,
    stages: Vec<ProgressBar>,
    status: ProgressBar,
    style: ProgressStyle,
    /// Finished: nothing draws again (a second finish would redraw over
    /// what was printed after the bars).
    finished: bool,
}

impl Bars {
    fn new() -> Self {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let status = multi.add(ProgressBar::new_spinner());
        status.set_style(
            ProgressStyle::with_template("{spinner} {wide_msg}")
                .expect("the status template parses"),
        );
        status.enable_steady_tick(Duration::from_millis(120));
        let style = ProgressStyle::with_template("{prefix} [{bar:30}] {msg}")
            .expect("the bar template parses")
            .progress_chars("=> ");
        Self {
            multi,
            stages: Vec::new(),
            status,
            style,
            finished: false,
        }
    }

    fn draw(&mut self, board: &Board) {
        if self.finished {
            return;
        }
        for (i, row) in board.rows().into_iter().enumerate() {
            match self.stages.get(i) {
                Some(bar) => {
                    bar.set_prefix(row.label);
                    bar.set_length(row.length);
                    bar.set_position(row.position);
                    bar.set_message(row.text);
                }
                None => {
                    // Whole before it is added: every setter draws, and a
                    // bar added first showed a frame with no text.
                    let bar = ProgressBar::new(row.length)
                        .with_style(self.style.clone())
                        .with_prefix(row.label)
                        .with_position(row.position)
                        .with_message(row.text);
                    self.stages
                        .push(self.multi.insert_before(&self.status, bar));
                }
            }
        }
        self.status.set_message(board.status_line());
    }

    /// A line above the bars.
    fn println(&self, line: &str) {
        if self.finished {
            eprintln!("{line}");
        } else {
            // A closed terminal has nothing to keep the line for.
            let _ = self.multi.println(line);
        }
    }

    /// A note on stderr, the bars cleared around it.
    fn note(&self, message: &str) {
        if self.finished {
            note(message);
        } else {
            self.multi.suspend(|| note(message));
        }
    }

    /// Leaves every bar drawn as it stands.
    fn finish(&mut self) {
        if std::mem::replace(&mut self.finished, true) {
            return;
        }
        for bar in &self.stages {
            bar.abandon();
        }
        self.status.abandon();
    }
}

/// A watched event: one line, `format::event`'s columns or its JSON.
impl Render for SessionEvent {
    fn text(&self) -> String {
        format!("{}\n", format::event(self))
    }
    fn json(&self) -> Value {
        json::event(self)
    }
}

/// `watch`'s output: lines (today's text or JSON), or bars.
pub enum View {
    Lines(Out),
    Bars(Box<Live>),
}

/// The bars, what they show and when to read the counts again.
pub struct Live {
    board: Board,
    refresh: Refresh,
    bars: Bars,
}

impl View {
    /// Bars when [`use_bars`] says so for this process's stdout and stderr.
    pub fn new(out: Out, session_id: &str) -> Self {
        let term = std::env::var("TERM").ok();
        let terminals = std::io::stdout().is_terminal() && std::io::stderr().is_terminal();
        if use_bars(out.is_text(), terminals, term.as_deref()) {
            View::Bars(Box::new(Live {
                board: Board::new(session_id),
                refresh: Refresh::new(),
                bars: Bars::new(),
            }))
        } else {
            View::Lines(out)
        }
    }

    /// Whether GetSession's counts are wanted (the bars draw them).
    pub fn wants_counts(&self) -> bool {
        matches!(self, View::Bars(_))
    }

    /// Whether the counts should be read again now.
    pub fn counts_due(&self, now: Instant) -> bool {
        match self {
            View::Lines(_) => false,
            View::Bars(live) => live.refresh.due(now),
        }
    }

    /// Shows one watched event; a heartbeat only keeps the stream open, so
    /// it shows nothing.
    pub fn event(&mut self, e: &SessionEvent) {
        if e.event_kind() == SessionEventKind::Heartbeat {
            return;
        }
        match self {
            View::Lines(out) => out.show(e),
            View::Bars(live) => {
                if let Some(line) = live.board.event(e) {
                    live.bars.println(&line);
                }
                live.refresh.saw_event();
                live.bars.draw(&live.board);
            }
        }
    }

    /// A read of the counts: GetSession's answer, or None when it failed.
    pub fn counts(&mut self, s: Option<Session>) {
        if let View::Bars(live) = self {
            live.refresh.done(Instant::now());
            if let Some(s) = s {
                live.board.session(&s);
                live.bars.draw(&live.board);
            }
        }
    }

    /// A progress note on stderr, without tearing the bars.
    pub fn note(&self, message: &str) {
        match self {
            View::Lines(_) => note(message),
            View::Bars(live) => live.bars.note(message),
        }
    }

    /// Stops drawing, leaving the last frame on screen; only the first call
    /// does anything.
    pub fn finish(&mut self) {
        if let View::Bars(live) = self {
            live.bars.finish();
        }
    }
}

impl Drop for View {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dialectic_proto::v1::SessionPosition;

    /// An event as the gateway sends it: its kind typed and by name.
    fn event(kind: SessionEventKind, stage: &str, status: &str, percent: u32) -> SessionEvent {
        let name = kind.as_str_name().trim_start_matches("SESSION_EVENT_KIND_");
        SessionEvent {
            kind: name.to_ascii_lowercase(),
            event_kind: kind.into(),
            stage_slug: stage.into(),
            session_status: status.into(),
            stage_percent: percent,
            ..Default::default()
        }
    }

    fn counts(stage: &str, plan: u32, execute: u32, render: u32, done: u32) -> StageJobCounts {
        StageJobCounts {
            stage_slug: stage.into(),
            plan,
            execute,
            render,
            completed: done,
            in_flight: plan + execute + render - done,
            cost: i64::from(done) * 100,
            ..Default::default()
        }
    }

    fn session(status: &str, current: &str, jobs: Vec<StageJobCounts>) -> Session {
        Session {
            id: "s1".into(),
            status: status.into(),
            current_stage: current.into(),
            cost: jobs.iter().map(|j| j.cost).sum(),
            jobs,
            ..Default::default()
        }
    }

    fn texts(board: &Board) -> Vec<String> {
        board
            .rows()
            .iter()
            .map(|r| format!("{}|{}", r.label, r.text))
            .collect()
    }

    #[test]
    fn bars_only_for_a_person_at_a_terminal() {
        assert!(use_bars(true, true, Some("xterm-256color")));
        assert!(use_bars(true, true, None));
        assert!(!use_bars(true, false, Some("xterm")), "piped or redirected");
        assert!(!use_bars(false, true, Some("xterm")), "--output json");
        assert!(!use_bars(true, true, Some("dumb")), "no cursor movement");
    }

    #[test]
    fn a_stage_gets_a_bar_when_it_starts_and_counts_come_from_the_session() {
        let mut board = Board::new("s1");
        assert!(board.rows().is_empty());
        assert_eq!(
            board.event(&event(
                SessionEventKind::StageStarted,
                "thesis",
                "running_thesis",
                0
            )),
            None
        );
        let rows = board.rows();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].text, "waiting", "no 0/0 count before a job exists");
        assert_eq!(rows[0].phase, Phase::Waiting);
        assert_eq!((rows[0].position, rows[0].length), (0, 1), "an empty bar");

        board.session(&session(
            "running_thesis",
            "thesis",
            vec![counts("thesis", 1, 4, 0, 2)],
        ));
        board.event(&event(
            SessionEventKind::JobStatus,
            "thesis",
            "running_thesis",
            40,
        ));
        let rows = board.rows();
        assert_eq!(rows[0].text, "2/5 jobs  running 40%  cost 200");
        assert_eq!((rows[0].position, rows[0].length), (2, 5));
        assert_eq!(rows[0].phase, Phase::Running);
        assert_eq!(
            board.status_line(),
            "session s1 running_thesis  cost 200 tokens"
        );
    }

    /// A stage seen before its counts (a watcher joining at review, or a
    /// stage that started while the next one's status already shows) waits;
    /// it is not "0/0 jobs  done". One that completed with no job is done.
    #[test]
    fn a_stage_without_jobs_waits_unless_it_completed() {
        let mut board = Board::new("s1");
        board.event(&event(
            SessionEventKind::Snapshot,
            "paralysis",
            SessionStatus::REVIEW,
            0,
        ));
        board.event(&event(
            SessionEventKind::StageStarted,
            "thesis",
            "running_antithesis",
            0,
        ));
        assert_eq!(
            texts(&board),
            vec!["paralysis|waiting", "thesis   |waiting"]
        );
        assert!(board.rows().iter().all(|r| r.phase == Phase::Waiting));

        board.event(&event(
            SessionEventKind::StageCompleted,
            "thesis",
            "running_antithesis",
            100,
        ));
        assert_eq!(texts(&board)[1], "thesis   |done");
        board.session(&session(
            SessionStatus::REVIEW,
            "paralysis",
            vec![counts("paralysis", 1, 2, 0, 3)],
        ));
        assert_eq!(texts(&board)[0], "paralysis|3/3 jobs  done  cost 300");
    }

    #[test]
    fn a_stage_about_to_start_is_not_done() {
        // A session started with auto-advance plans its first stage while
        // still pending it; the status moves to running_ a moment later.
        let mut board = Board::new("s1");
        board.event(&event(
            SessionEventKind::StageStarted,
            "thesis",
            "pending_thesis",
            0,
        ));
        board.session(&session(
            "pending_thesis",
            "thesis",
            vec![counts("thesis", 1, 0, 0, 0)],
        ));
        assert_eq!(texts(&board), vec!["thesis|0/1 jobs  running 0%  cost 0"]);
        // Reviewed without auto-advance: the stage before the pending one is done.
        board.event(&event(
            SessionEventKind::StageCompleted,
            "thesis",
            "pending_antithesis",
            100,
        ));
        board.session(&session(
            "pending_antithesis",
            "thesis",
            vec![counts("thesis", 1, 2, 2, 5)],
        ));
        assert_eq!(texts(&board), vec!["thesis|5/5 jobs  done  cost 500"]);
    }

    #[test]
    fn stages_line_up_and_finish_through_rendering() {
        let mut board = Board::new("s1");
        board.event(&event(
            SessionEventKind::StageStarted,
            "thesis",
            "running_thesis",
            0,
        ));
        board.event(&event(
            SessionEventKind::StageCompleted,
            "thesis",
            "running_thesis",
            100,
        ));
        board.event(&event(
            SessionEventKind::StageStarted,
            "antithesis",
            "running_antithesis",
            0,
        ));
        board.session(&session(
            "running_antithesis",
            "antithesis",
            vec![
                counts("thesis", 1, 2, 2, 4),
                counts("antithesis", 1, 2, 0, 1),
            ],
        ));
        assert_eq!(
            texts(&board),
            vec![
                "thesis    |4/5 jobs  rendering  cost 400",
                "antithesis|1/3 jobs  running 0%  cost 100",
            ]
        );
        board.event(&event(
            SessionEventKind::StageCompleted,
            "antithesis",
            "iteration_complete_pending_review",
            100,
        ));
        board.session(&session(
            "iteration_complete_pending_review",
            "antithesis",
            vec![
                counts("thesis", 1, 2, 2, 5),
                counts("antithesis", 1, 2, 2, 5),
            ],
        ));
        let rows = board.rows();
        assert!(rows.iter().all(|r| r.phase == Phase::Done), "{rows:?}");
        assert_eq!(
            rows.iter()
                .map(|r| (r.position, r.length))
                .collect::<Vec<_>>(),
            vec![(5, 5), (5, 5)]
        );
        assert_eq!(
            board.status_line(),
            "session s1 iteration_complete_pending_review  cost 1000 tokens"
        );
    }

    #[test]
    fn a_watcher_joining_midway_sees_earlier_stages_done() {
        let mut board = Board::new("s1");
        board.event(&event(
            SessionEventKind::Snapshot,
            "synthesis",
            "running_synthesis",
            30,
        ));
        let mut s = session(
            "running_synthesis",
            "synthesis",
            vec![
                counts("thesis", 1, 2, 2, 5),
                counts("antithesis", 1, 2, 2, 5),
                counts("synthesis", 1, 3, 0, 1),
            ],
        );
        s.position = Some(SessionPosition {
            summary: "stage 3 of 5 (Synthesis): Synthesize, document 1 of 3".into(),
            stage_percent: 35,
            ..Default::default()
        });
        board.session(&s);
        let rows = board.rows();
        let order: Vec<&str> = rows.iter().map(|r| r.label.trim_end()).collect();
        assert_eq!(
            order,
            vec!["synthesis", "thesis", "antithesis"],
            "in the order seen"
        );
        assert_eq!(
            rows.iter().map(|r| r.phase).collect::<Vec<_>>(),
            vec![Phase::Running, Phase::Done, Phase::Done]
        );
        assert_eq!(rows[0].text, "1/4 jobs  running 35%  cost 100");
        assert_eq!(
            board.status_line(),
            "session s1 running_synthesis  cost 1100 tokens  \
             at stage 3 of 5 (Synthesis): Synthesize, document 1 of 3 (35%)"
        );
    }

    #[test]
    fn superseded_jobs_do_not_count_and_failures_show() {
        let mut board = Board::new("s1");
        let mut thesis = counts("thesis", 1, 4, 4, 7);
        thesis.superseded = 2;
        thesis.in_flight = 0;
        let mut antithesis = counts("antithesis", 1, 2, 0, 1);
        antithesis.failed = 1;
        antithesis.in_flight = 1;
        board.session(&session(
            "running_antithesis",
            "antithesis",
            vec![thesis, antithesis],
        ));
        assert_eq!(
            board.event(&SessionEvent {
                job_status: JobStatus::Failed.into(),
                message: "failed (retry_loop_failed)".into(),
                ..event(
                    SessionEventKind::JobStatus,
                    "antithesis",
                    "running_antithesis",
                    0
                )
            }),
            Some(
                "[job_status] antithesis running_antithesis - - - 0% failed (retry_loop_failed)"
                    .into()
            )
        );
        let line = board.event(&event(
            SessionEventKind::StageFailed,
            "antithesis",
            "paused",
            50,
        ));
        assert!(line.is_some(), "failures stay above the bars");
        assert_eq!(
            texts(&board),
            vec![
                "thesis    |7/7 jobs  done  cost 700",
                "antithesis|2/3 jobs  failed (1 failed)  cost 100",
            ]
        );
    }

    /// Whether a job's status line stays above the bars is the typed status's
    /// call, not the message's words.
    #[test]
    fn a_job_status_line_is_kept_by_its_typed_status() {
        let mut board = Board::new("s1");
        let mut job = |status: JobStatus, message: &str| {
            board.event(&SessionEvent {
                job_status: status.into(),
                message: message.into(),
                ..event(SessionEventKind::JobStatus, "thesis", "running_thesis", 10)
            })
        };
        assert!(job(JobStatus::PausedNsf, "").is_some());
        assert!(job(JobStatus::RetryLoopFailed, "").is_some());
        assert!(job(JobStatus::Completed, "failed (not really)").is_none());
        assert!(job(JobStatus::Retrying, "").is_none());
    }

    /// A retried stage runs again: the retry is a line of its own and the
    /// stage's bar stops saying it failed.
    #[test]
    fn a_retried_stage_runs_again() {
        let mut board = Board::new("s1");
        board.event(&event(
            SessionEventKind::StageFailed,
            "thesis",
            "running_thesis",
            75,
        ));
        assert!(texts(&board)[0].contains("failed"), "{:?}", texts(&board));
        let line = board.event(&event(
            SessionEventKind::StageRetried,
            "thesis",
            "running_thesis",
            75,
        ));
        assert!(line.is_some(), "the retry stays above the bars");
        assert!(!texts(&board)[0].contains("failed"), "{:?}", texts(&board));
    }

    #[test]
    fn a_paused_session_shows_its_stage_paused() {
        let mut board = Board::new("s1");
        board.session(&session(
            "paused",
            "thesis",
            vec![counts("thesis", 1, 4, 0, 1)],
        ));
        let rows = board.rows();
        assert_eq!(rows[0].phase, Phase::Paused);
        assert_eq!(rows[0].text, "1/5 jobs  paused  cost 100");
        assert!(
            board
                .event(&event(SessionEventKind::SessionPaused, "", "paused", 0))
                .is_some()
        );
    }

    #[test]
    fn counts_are_read_after_events_and_every_few_seconds() {
        let start = Instant::now();
        let mut refresh = Refresh::new();
        assert!(refresh.due(start), "the first read at once");
        refresh.done(start);
        assert!(!refresh.due(start + Refresh::MIN), "nothing happened");
        refresh.saw_event();
        assert!(!refresh.due(start + Refresh::MIN / 2), "not too often");
        assert!(refresh.due(start + Refresh::MIN));
        refresh.done(start + Refresh::MIN);
        assert!(!refresh.due(start + Refresh::MIN * 2));
        assert!(refresh.due(start + Refresh::MIN + Refresh::MAX), "anyway");
    }
}
