//! `query history`: the questions asked of a project, newest first, each with
//! its classification, latency, cost and the start of its answer.

use crate::cli::QueryCommand;
use crate::gateway::Gateway;
use crate::json;
use crate::output::{Out, Render, lines};
use crate::paging::{self, PageArgs};
use anyhow::Result;
use dialectic_proto::v1::{ListQueryHistoryRequest, QueryHistoryEntry};
use serde_json::Value;

/// The longest part of an answer a history line quotes, in characters.
const ANSWER_PREVIEW_CHARS: usize = 100;

fn preview(answer: &str) -> String {
    let first = answer.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    match first.char_indices().nth(ANSWER_PREVIEW_CHARS) {
        Some((cut, _)) => format!("{}…", &first[..cut]),
        None => first.to_string(),
    }
}

fn line(entry: &QueryHistoryEntry) -> String {
    let asked_at = json::history_entry(entry)["asked_at"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let response = entry.response.clone().unwrap_or_default();
    format!(
        "{asked_at}  {}  {}  cost {}{}  {} citation(s)\n  Q: {}\n  A: {}",
        if response.query_type.is_empty() {
            "-"
        } else {
            &response.query_type
        },
        humantime::format_duration(std::time::Duration::from_millis(entry.latency_ms.into())),
        response.cost,
        if response.cached { " (cached)" } else { "" },
        response.citations.len(),
        entry.text,
        preview(&response.answer),
    )
}

impl Render for Vec<QueryHistoryEntry> {
    fn text(&self) -> String {
        lines(self, "no questions asked yet", line)
    }
    fn json(&self) -> Value {
        self.iter().map(json::history_entry).collect()
    }
}

pub async fn dispatch(gateway: &Gateway, out: Out, command: QueryCommand) -> Result<()> {
    match command {
        QueryCommand::History(a) => {
            let project = a.target.id(gateway).await?;
            history(gateway, out, &project, &a.page).await
        }
    }
}

pub async fn history(gateway: &Gateway, out: Out, project: &str, page: &PageArgs) -> Result<()> {
    let listed = paging::collect("entries", page, |page_size, page_token| async move {
        let page = gateway
            .call(|mut c| {
                let request = gateway.request(ListQueryHistoryRequest {
                    project_id: project.to_string(),
                    page_size,
                    page_token: page_token.clone(),
                });
                async move { c.list_query_history(request).await }
            })
            .await?;
        Ok((page.entries, page.next_page_token))
    })
    .await?;
    listed.show(out);
    Ok(())
}
