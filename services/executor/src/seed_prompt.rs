//! Seed 001's `seed_prompt.md`: the complete prompt a stage was given (stage
//! prompt, overlays, the user's input and what the stage reads), kept in the
//! stage folder of each iteration. Written by the stage's first planning job
//! (the root of its recipe), as sent: after any compression. With several
//! models the file is the last one's request; their planning prompts differ
//! only where a model's smaller window made it compress.

use crate::attempt::Attempt;
use crate::chain::Chain;
use crate::{Executor, retryable};
use dialectic_core::job::JobType;
use dialectic_core::paths::FileKind;
use dialectic_core::prompt::{ChatRequest, Role};
use dialectic_runtime::worker::AttemptError;

impl Executor {
    /// Keeps the prompt of a stage's first planning call; its key, if written.
    pub(crate) async fn keep_seed_prompt(
        &self,
        attempt: &Attempt<'_>,
        chain: Option<&Chain>,
        request: &ChatRequest,
    ) -> Result<Option<String>, AttemptError> {
        let opens_stage = attempt.step.job_type == JobType::Plan
            && attempt.job.parent_job_id.is_none()
            && chain.is_none();
        if !opens_stage {
            return Ok(None);
        }
        let key = attempt.storage_key(FileKind::SeedPrompt)?;
        self.blob
            .put(
                &key,
                seed_prompt_markdown(request).into_bytes(),
                "text/markdown; charset=utf-8",
            )
            .await
            .map_err(|e| retryable("storage", e))?;
        Ok(Some(key))
    }
}

/// The request as markdown: the system instruction, then each message.
pub(crate) fn seed_prompt_markdown(request: &ChatRequest) -> String {
    let mut out = String::new();
    if let Some(system) = &request.system_instruction {
        out.push_str(&format!("## System\n\n{system}\n\n"));
    }
    for message in &request.messages {
        let role = match message.role {
            Role::System => "System",
            Role::User => "User",
            Role::Assistant => "Assistant",
        };
        out.push_str(&format!("## {role}\n\n{}\n\n", message.content));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use dialectic_core::prompt::Message;

    #[test]
    fn the_markdown_holds_the_whole_request_in_order() {
        let request = ChatRequest {
            model: "m".into(),
            system_instruction: Some("You plan.".into()),
            messages: vec![Message::user("--- Seed prompt ---\nA bakery")],
            max_tokens: 10,
            output_type: "header_context".into(),
            output_hints: vec![],
            required_keys: vec![],
            temperature: None,
            ..Default::default()
        };
        assert_eq!(
            seed_prompt_markdown(&request),
            "## System\n\nYou plan.\n\n## User\n\n--- Seed prompt ---\nA bakery\n\n"
        );
    }
}
