//! What a session that cannot move says about itself: a failed stage's
//! notice names the step that failed, its last error and the command that
//! runs it again, a wait for funds the command that credits the wallet, and
//! a wait for a model's call slot that model and its cap, a message stuck in
//! the dead-letter queue its step, its reason and the command that replays
//! it, so a user polling the session never waits on nothing.

use crate::job::{JobEvent, JobStatus, JobType, retry_event};

/// Longest error text a notice quotes; a model's reply can be long.
const MAX_REASON_CHARS: usize = 300;

/// A failed job of a stage, as its row has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedJob {
    pub job_type: JobType,
    pub status: JobStatus,
    /// The step it runs and that step's name in the pipeline (empty when the
    /// row has none).
    pub step_key: String,
    pub step_name: String,
    /// The model it called.
    pub model: String,
    pub attempts: i32,
    /// Its last error, as the planner recorded it (`error_details`).
    pub code: String,
    pub message: String,
}

impl FailedJob {
    /// Failed for its own reason, so a retry runs it again. A job failed by
    /// its child or prerequisite only repeats another's failure, and a RENDER
    /// job never fails a stage.
    fn is_cause(&self) -> bool {
        let code = Some(self.code.as_str()).filter(|c| !c.is_empty());
        self.job_type != JobType::Render
            && retry_event(self.status, code) == Some(JobEvent::ManualRetry)
    }

    fn step(&self) -> String {
        named_step(&self.step_key, &self.step_name)
            .unwrap_or_else(|| format!("a {} job", self.job_type.as_str()))
    }

    fn reason(&self) -> String {
        let (code, message) = (self.code.trim(), self.message.trim());
        let reason = match (code, message) {
            ("", "") => "no error was recorded".to_string(),
            (code, "") => code.to_string(),
            ("", message) => message.to_string(),
            (code, message) if message.starts_with(code) => message.to_string(),
            (code, message) => format!("{code}: {message}"),
        };
        match reason.char_indices().nth(MAX_REASON_CHARS) {
            Some((cut, _)) => format!("{}…", &reason[..cut]),
            None => reason,
        }
    }

    fn how(&self) -> String {
        let on = match self.model.as_str() {
            "" => String::new(),
            model => format!(" on {model}"),
        };
        match (self.status, self.attempts) {
            (JobStatus::RetryLoopFailed, n) if n > 0 => format!("failed{on} after {n} attempt(s)"),
            _ => format!("failed{on}"),
        }
    }
}

/// A step as a notice names it: its name and key, or whichever it has.
fn named_step(key: &str, name: &str) -> Option<String> {
    match (key, name) {
        ("", "") => None,
        (key, "") => Some(key.to_string()),
        ("", name) => Some(format!("\"{name}\"")),
        (key, name) if key == name => Some(key.to_string()),
        (key, name) => Some(format!("\"{name}\" ({key})")),
    }
}

/// The CLI command that runs a session's failed jobs again.
pub fn retry_command(session_id: &str) -> String {
    format!("dialectic session retry --session {session_id}")
}

/// The command an operator credits a user's wallet with (administrators
/// may also call CreditWallet).
pub fn credit_command(user_id: &str) -> String {
    format!("dialecticd admin credit --user {user_id} --amount TOKENS --idempotency-key KEY")
}

/// The notice of a session whose jobs wait for funds.
pub fn funds_notice(paused_jobs: i64, user_id: &str) -> String {
    format!(
        "waiting for funds: {paused_jobs} job(s) paused, insufficient balance; they resume by themselves once the wallet is credited (`dialectic wallet show` shows it; an administrator credits it with CreditWallet or `{}`)",
        credit_command(user_id)
    )
}

/// Jobs of a session waiting for a call slot of one model: its row's
/// `config.max_concurrency` caps its calls in flight across the deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotWait {
    pub model: String,
    pub max_concurrency: u32,
    pub jobs: usize,
}

impl SlotWait {
    /// Waits per model from each waiting job's (job, model, cap), in the
    /// order models first appear; a job noted twice counts once.
    pub fn group<'a>(waiters: impl IntoIterator<Item = (&'a str, &'a str, u32)>) -> Vec<Self> {
        let mut seen: Vec<&str> = Vec::new();
        let mut waits: Vec<SlotWait> = Vec::new();
        for (job, model, max_concurrency) in waiters {
            if seen.contains(&job) {
                continue;
            }
            seen.push(job);
            match waits
                .iter_mut()
                .find(|w| w.model == model && w.max_concurrency == max_concurrency)
            {
                Some(wait) => wait.jobs += 1,
                None => waits.push(SlotWait {
                    model: model.to_string(),
                    max_concurrency,
                    jobs: 1,
                }),
            }
        }
        waits
    }
}

/// The notice of a session whose jobs wait for a model's call slot: not a
/// fault, so it says they go on by themselves.
pub fn slot_notice(waits: &[SlotWait]) -> String {
    let each: Vec<String> = waits
        .iter()
        .filter(|w| w.jobs > 0)
        .map(|w| {
            let jobs = match w.jobs {
                1 => "1 job waits".to_string(),
                n => format!("{n} jobs wait"),
            };
            format!(
                "{jobs} for a free call slot on model {} (max_concurrency = {})",
                w.model, w.max_concurrency
            )
        })
        .collect();
    match each.as_slice() {
        [] => String::new(),
        waits => format!("{}; they run as slots free up", waits.join("; ")),
    }
}

/// A message a session waits for that sits in the dead-letter queue
/// (docs/running.md, "Dead letters"): a job's dispatch or outcome, or a
/// command about the session, that no consumer could handle. Nothing moves
/// it on but an operator's replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterWait {
    /// The letter's id in `dialectic admin dlq list`.
    pub letter_id: String,
    /// The queue it was going to.
    pub routing_key: String,
    /// Why: our consumer's reason, or the broker's (`delivery_limit`, …).
    pub reason: String,
    /// What the message says (`job dispatch 0192…`).
    pub summary: String,
    /// The job's step (key and name) and stage; empty for a session command.
    pub step_key: String,
    pub step_name: String,
    pub stage: String,
}

impl DeadLetterWait {
    fn what(&self) -> String {
        match (
            named_step(&self.step_key, &self.step_name),
            self.stage.as_str(),
        ) {
            (None, _) => self.summary.clone(),
            (Some(step), "") => format!("step {step} ({})", self.summary),
            (Some(step), stage) => format!("step {step} of stage {stage} ({})", self.summary),
        }
    }

    /// The broker's own reasons, said in words.
    fn reason(&self) -> String {
        let reason = match self.reason.trim() {
            "" => "no reason was given".to_string(),
            "delivery_limit" => {
                "delivery_limit: delivered again and again, never handled".to_string()
            }
            "rejected" => "rejected: a consumer refused it".to_string(),
            "expired" => "expired: it waited in its queue too long".to_string(),
            reason => reason.to_string(),
        };
        match reason.char_indices().nth(MAX_REASON_CHARS) {
            Some((cut, _)) => format!("{}…", &reason[..cut]),
            None => reason,
        }
    }
}

/// Whether a dead letter about a job still holds it up: the job is as it
/// was when the letter was noted (same status, same attempt) and
/// unfinished. Once the letter is replayed and the job claimed, or the job
/// retried or ended another way, it has moved on and the letter is history.
pub fn dead_letter_holds_job(noted: (&str, i32), now: (&str, i32)) -> bool {
    let unfinished = now.0.parse::<JobStatus>().is_ok_and(|s| !s.is_terminal());
    unfinished && noted == now
}

/// The command an operator replays dead letters with.
pub fn replay_command(letter_ids: &[&str]) -> String {
    format!("dialectic admin dlq replay {}", letter_ids.join(" "))
}

/// The notice of a session held up by dead letters: each one's step, queue
/// and reason, and the command that replays them all.
pub fn dead_letter_notice(letters: &[DeadLetterWait]) -> String {
    if letters.is_empty() {
        return String::new();
    }
    let each: Vec<String> = letters
        .iter()
        .map(|l| {
            format!(
                "{} on {} was dead-lettered: {}",
                l.what(),
                l.routing_key,
                l.reason()
            )
        })
        .collect();
    let mut ids: Vec<&str> = Vec::new();
    for letter in letters {
        if !ids.contains(&letter.letter_id.as_str()) {
            ids.push(&letter.letter_id);
        }
    }
    let (waits, stays, them) = match letters.len() {
        1 => ("a message it waits for is".to_string(), "It stays", "it"),
        n => (
            format!("{n} messages it waits for are"),
            "They stay",
            "them",
        ),
    };
    format!(
        "stuck: {waits} in the dead-letter queue: {}. {stays} there until an operator replays {them}: {}",
        each.join("; "),
        replay_command(&ids)
    )
}

/// The notice of a session abandoned while idle and unfinished (`was` is
/// where it stopped): nothing was lost, and a resume brings it back.
pub fn idle_abandoned_notice(session_id: &str, was: &str) -> String {
    format!(
        "abandoned after a long idle spell at {was}; its documents are kept. To continue where it stopped: dialectic session resume --session {session_id} (dialectic session cancel --session {session_id} ends it for good)"
    )
}

/// The notice of a session whose `stage` failed: the first failed step
/// (`jobs` latest failure first), why, the others if any, and the command
/// that retries them.
pub fn failed_stage_notice(session_id: &str, stage: &str, jobs: &[FailedJob]) -> String {
    let command = retry_command(session_id);
    let causes: Vec<&FailedJob> = jobs.iter().filter(|j| j.is_cause()).collect();
    let Some(first) = causes.first() else {
        return format!("stage {stage} failed; to run its failed jobs again: {command}");
    };
    let alike = causes
        .iter()
        .filter(|j| j.step_key == first.step_key)
        .count();
    let jobs_of_step = match alike {
        1 => String::new(),
        n => format!(" ({n} jobs)"),
    };
    let mut others: Vec<String> = Vec::new();
    for job in causes.iter().filter(|j| j.step_key != first.step_key) {
        let step = job.step();
        if !others.contains(&step) {
            others.push(step);
        }
    }
    let others = match others.as_slice() {
        [] => String::new(),
        steps => format!("; step(s) {} failed too", steps.join(", ")),
    };
    format!(
        "stage {stage} failed: step {}{jobs_of_step} {}: {}{others}. To run it again: {command} (add --model NAME to run it on another model)",
        first.step(),
        first.how(),
        first.reason(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{CHILD_FAILED, PREREQUISITE_FAILED};

    fn job(step: &str, status: JobStatus, code: &str, message: &str) -> FailedJob {
        FailedJob {
            job_type: JobType::Execute,
            status,
            step_key: step.to_string(),
            step_name: format!("Run {step}"),
            model: "simulated-b".into(),
            attempts: 3,
            code: code.into(),
            message: message.into(),
        }
    }

    #[test]
    fn names_the_failed_step_its_last_error_and_the_retry_command() {
        let plan = FailedJob {
            job_type: JobType::Plan,
            ..job(
                "draft_plan",
                JobStatus::Failed,
                CHILD_FAILED,
                "a child job failed",
            )
        };
        let write = job(
            "draft_write",
            JobStatus::RetryLoopFailed,
            "malformed_json",
            "no JSON object in the reply",
        );
        let notice = failed_stage_notice("s1", "draft", &[plan, write]);
        assert_eq!(
            notice,
            "stage draft failed: step \"Run draft_write\" (draft_write) failed on simulated-b \
             after 3 attempt(s): malformed_json: no JSON object in the reply. To run it again: \
             dialectic session retry --session s1 (add --model NAME to run it on another model)"
        );
    }

    /// What only repeats another job's failure is never named as the cause;
    /// a step failing in several jobs is named once, with the count.
    #[test]
    fn causes_are_own_failures_grouped_by_step() {
        let jobs = [
            job("write", JobStatus::Failed, PREREQUISITE_FAILED, "waited"),
            job(
                "write",
                JobStatus::RetryLoopFailed,
                "timeout",
                "timeout: no reply",
            ),
            job("write", JobStatus::RetryLoopFailed, "timeout", "older"),
            job(
                "check",
                JobStatus::Failed,
                "invalid_reply",
                "no `content` key",
            ),
            FailedJob {
                job_type: JobType::Render,
                ..job("render", JobStatus::RetryLoopFailed, "s3", "down")
            },
        ];
        let notice = failed_stage_notice("s1", "draft", &jobs);
        assert!(
            notice.starts_with(
                "stage draft failed: step \"Run write\" (write) (2 jobs) failed on simulated-b \
                 after 3 attempt(s): timeout: no reply; step(s) \"Run check\" (check) failed too."
            ),
            "{notice}"
        );
        assert!(!notice.contains("render") && !notice.contains("waited"));
    }

    #[test]
    fn a_wait_for_funds_names_the_command_that_credits_the_wallet() {
        assert_eq!(
            funds_notice(2, "u1"),
            "waiting for funds: 2 job(s) paused, insufficient balance; they resume by \
             themselves once the wallet is credited (`dialectic wallet show` shows it; an \
             administrator credits it with CreditWallet or `dialecticd admin credit --user u1 \
             --amount TOKENS --idempotency-key KEY`)"
        );
    }

    #[test]
    fn a_wait_for_a_slot_names_each_model_and_its_cap() {
        let wait = |model: &str, max_concurrency, jobs| SlotWait {
            model: model.into(),
            max_concurrency,
            jobs,
        };
        assert_eq!(
            slot_notice(&[wait("simulated-b", 1, 2)]),
            "2 jobs wait for a free call slot on model simulated-b (max_concurrency = 1); \
             they run as slots free up"
        );
        assert_eq!(
            slot_notice(&[wait("a", 2, 1), wait("b", 3, 0), wait("c", 1, 4)]),
            "1 job waits for a free call slot on model a (max_concurrency = 2); 4 jobs wait \
             for a free call slot on model c (max_concurrency = 1); they run as slots free up"
        );
        assert_eq!(slot_notice(&[wait("b", 3, 0)]), "");
    }

    #[test]
    fn waits_are_counted_per_model_once_per_job() {
        let waits = SlotWait::group([
            ("j1", "a", 1),
            ("j2", "b", 2),
            ("j3", "a", 1),
            ("j1", "a", 1),
        ]);
        let wait = |model: &str, max_concurrency, jobs| SlotWait {
            model: model.into(),
            max_concurrency,
            jobs,
        };
        assert_eq!(waits, vec![wait("a", 1, 2), wait("b", 2, 1)]);
    }

    fn letter(id: &str, step_key: &str, reason: &str) -> DeadLetterWait {
        DeadLetterWait {
            letter_id: id.into(),
            routing_key: "job.plan".into(),
            reason: reason.into(),
            summary: "job dispatch j1".into(),
            step_key: step_key.into(),
            step_name: "Plan the thesis".into(),
            stage: "thesis".into(),
        }
    }

    #[test]
    fn a_dead_letter_names_its_step_queue_reason_and_the_replay_command() {
        assert_eq!(
            dead_letter_notice(&[letter("0123456789abcdef", "thesis_plan", "lost")]),
            "stuck: a message it waits for is in the dead-letter queue: step \"Plan the \
             thesis\" (thesis_plan) of stage thesis (job dispatch j1) on job.plan was \
             dead-lettered: lost. It stays there until an operator replays it: dialectic \
             admin dlq replay 0123456789abcdef"
        );
        let command = DeadLetterWait {
            letter_id: "b2".into(),
            routing_key: "planner.command".into(),
            reason: " ".into(),
            summary: "start stage thesis of session s1 (iteration 1)".into(),
            step_key: String::new(),
            step_name: String::new(),
            stage: String::new(),
        };
        let notice = dead_letter_notice(&[
            letter("a1", "thesis_plan", "delivery_limit"),
            command,
            letter("a1", "thesis_plan", "delivery_limit"),
        ]);
        assert!(
            notice.starts_with("stuck: 3 messages it waits for are in the dead-letter queue:"),
            "{notice}"
        );
        assert!(
            notice.contains("delivery_limit: delivered again and again"),
            "{notice}"
        );
        assert!(
            notice.contains("; start stage thesis of session s1 (iteration 1) on planner.command was dead-lettered: no reason was given;"),
            "{notice}"
        );
        assert!(
            notice.ends_with("replays them: dialectic admin dlq replay a1 b2"),
            "{notice}"
        );
        assert_eq!(dead_letter_notice(&[]), "");
    }

    #[test]
    fn a_dead_letter_holds_its_job_until_the_job_moves_on() {
        assert!(dead_letter_holds_job(("pending", 0), ("pending", 0)));
        assert!(
            !dead_letter_holds_job(("pending", 0), ("processing", 1)),
            "replayed and claimed"
        );
        assert!(
            !dead_letter_holds_job(("retrying", 1), ("retrying", 2)),
            "tried again"
        );
        assert!(
            !dead_letter_holds_job(("completed", 1), ("completed", 1)),
            "a finished job waits for nothing"
        );
        assert!(!dead_letter_holds_job(
            ("pending", 0),
            ("no such status", 0)
        ));
    }

    #[test]
    fn a_long_reason_is_cut_and_a_missing_one_said() {
        let long = job("w", JobStatus::Failed, "", &"x".repeat(1000));
        let notice = failed_stage_notice("s1", "draft", &[long]);
        assert!(notice.contains(&format!("{}…", "x".repeat(MAX_REASON_CHARS))));
        assert!(!notice.contains(&"x".repeat(MAX_REASON_CHARS + 1)));
        let bare = FailedJob {
            step_name: String::new(),
            model: String::new(),
            ..job("w", JobStatus::Failed, "", "")
        };
        let notice = failed_stage_notice("s1", "draft", &[bare]);
        assert!(
            notice.starts_with("stage draft failed: step w failed: no error was recorded."),
            "{notice}"
        );
        assert_eq!(
            failed_stage_notice("s1", "draft", &[]),
            "stage draft failed; to run its failed jobs again: dialectic session retry --session s1"
        );
    }
}
