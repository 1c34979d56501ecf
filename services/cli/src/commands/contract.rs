//! `contract analysis`: a contract-stack analysis as data
//! (GetContractAnalysis): its resolved clauses, dependency edges and
//! conflicts, of a project's analysis or one session, all of it or what
//! touches one section (`--section 7`).

use crate::cli::{ContractAnalysisArgs, ContractCommand};
use crate::gateway::Gateway;
use crate::json;
use crate::output::{Out, Render};
use anyhow::Result;
use dialectic_proto::v1::{
    ConflictKind, ConflictSeverity, ContractAnalysis, ContractConflict, DependencyEdge,
    DependencyKind, GetContractAnalysisRequest, ResolvedClause,
};
use serde_json::Value;

/// An enum's value as the pipeline names it (`stale_reference`), or the
/// model's own word when it is not one.
fn named(typed: &str, prefix: &str, text: &str) -> String {
    match typed.strip_prefix(prefix) {
        Some(name) if !typed.ends_with("UNSPECIFIED") => name.to_ascii_lowercase(),
        _ if text.is_empty() => "-".to_string(),
        _ => text.to_string(),
    }
}

fn clause_line(c: &ResolvedClause) -> String {
    let date = if c.effective_date.is_empty() {
        format!("{} (not a date)", c.effective_date_text)
    } else {
        c.effective_date.clone()
    };
    format!(
        "  {} {}  [{}]  in force since {date}, last changed by {}",
        c.section_number, c.section_title, c.category, c.last_changed_by
    )
}

fn edge_line(e: &DependencyEdge) -> String {
    let kind = DependencyKind::try_from(e.kind).unwrap_or(DependencyKind::Unspecified);
    format!(
        "  {} -> {}  ({})",
        e.from_section,
        e.to_section,
        named(kind.as_str_name(), "DEPENDENCY_KIND_", &e.kind_text)
    )
}

fn conflict_line(c: &ContractConflict) -> String {
    let kind = ConflictKind::try_from(c.kind).unwrap_or(ConflictKind::Unspecified);
    let severity = ConflictSeverity::try_from(c.severity).unwrap_or(ConflictSeverity::Unspecified);
    format!(
        "  {} {}  sections {}  ({})\n    {}",
        named(
            severity.as_str_name(),
            "CONFLICT_SEVERITY_",
            &c.severity_text
        ),
        named(kind.as_str_name(), "CONFLICT_KIND_", &c.kind_text),
        c.sections.join(", "),
        c.documents.join(", "),
        c.explanation
    )
}

fn block<T>(title: &str, items: &[T], line: impl Fn(&T) -> String) -> String {
    let mut text = format!("{title} ({})\n", items.len());
    for item in items {
        text.push_str(&line(item));
        text.push('\n');
    }
    text
}

impl Render for ContractAnalysis {
    fn text(&self) -> String {
        if self.session_id.is_empty() {
            return "no analysis yet: start a session on the contract_stack pipeline\n".into();
        }
        format!(
            "session {} iteration {}\n{}{}{}",
            self.session_id,
            self.iteration,
            block("Clauses", &self.clauses, clause_line),
            block("Dependencies", &self.edges, edge_line),
            block("Conflicts", &self.conflicts, conflict_line),
        )
    }
    fn json(&self) -> Value {
        json::contract_analysis(self)
    }
}

pub async fn dispatch(gateway: &Gateway, out: Out, command: ContractCommand) -> Result<()> {
    match command {
        ContractCommand::Analysis(args) => analysis(gateway, out, args).await,
    }
}

async fn analysis(gateway: &Gateway, out: Out, args: ContractAnalysisArgs) -> Result<()> {
    let found = gateway
        .call(|mut c| {
            let request = gateway.request(GetContractAnalysisRequest {
                project_id: args.project.clone().unwrap_or_default(),
                session_id: args.session.clone().unwrap_or_default(),
                section: args.section.clone().unwrap_or_default(),
            });
            async move { c.get_contract_analysis(request).await }
        })
        .await?;
    out.show(&found);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enums_print_as_the_pipeline_names_them_or_as_the_model_wrote_them() {
        let conflict = ContractConflict {
            kind: ConflictKind::StaleReference as i32,
            severity: ConflictSeverity::Unspecified as i32,
            severity_text: "dire".into(),
            sections: vec!["7".into(), "7.1".into()],
            documents: vec!["base.pdf".into()],
            explanation: "Exhibit B is gone.".into(),
            ..Default::default()
        };
        assert_eq!(
            conflict_line(&conflict),
            "  dire stale_reference  sections 7, 7.1  (base.pdf)\n    Exhibit B is gone."
        );
    }
}
