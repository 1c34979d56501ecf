//! `GetContractAnalysis` (issue 54, item 2): a contract-stack analysis as
//! typed data. The contract pipeline's resolution, dependency and conflict
//! steps reply with their clauses, edges and conflicts as JSON (their reply
//! schemas, `pipelines/contract_stack.toml`); this reads the current JSON of
//! each of the session's documents of those outputs in its latest iteration
//! (a user's edit included, as later steps read it) through
//! `dialectic_core::contract_analysis`, and keeps what touches a section
//! when asked. The export carries the same analysis as JSON.

use crate::error::GatewayError;
use crate::service::{Gateway, optional};
use dialectic_core::contract_analysis::{
    self as analysis, CONFLICT_REPORT, Clause, Conflict, ConflictKind as Kind, DEPENDENCY_MAP,
    DependencyKind as EdgeKind, Edge, RESOLVED_CLAUSE, Severity,
};
use dialectic_core::ids::{ProjectId, SessionId, UserId};
use dialectic_proto::v1::{
    ConflictKind, ConflictSeverity, ContractAnalysis, ContractConflict, DependencyEdge,
    DependencyKind, GetContractAnalysisRequest, ResolvedClause,
};
use dialectic_store::resources::{self, ResourceRow};
use dialectic_store::{contributions, projects, sessions};
use serde_json::{Value, json};

/// The longest section filter accepted, in characters.
const MAX_SECTION_CHARS: usize = 64;

/// The object beside an analysis's rendered documents that an export carries.
pub const EXPORT_FILE: &str = "contract_analysis.json";

/// One session's analysis, read.
#[derive(Debug, Default)]
pub(crate) struct Analysis {
    pub session_id: Option<SessionId>,
    pub iteration: i32,
    /// Each clause with the id of the rendered document showing it.
    pub clauses: Vec<(String, Clause)>,
    pub edges: Vec<Edge>,
    pub conflicts: Vec<Conflict>,
    /// The folder of its rendered documents.
    pub folder: Option<String>,
}

impl Analysis {
    fn keep_touching(&mut self, section: &str) {
        self.clauses.retain(|(_, c)| c.touches(section));
        self.edges.retain(|e| e.touches(section));
        self.conflicts.retain(|c| c.touches(section));
    }

    fn is_empty(&self) -> bool {
        self.clauses.is_empty() && self.edges.is_empty() && self.conflicts.is_empty()
    }
}

fn dependency_kind(kind: Option<EdgeKind>) -> DependencyKind {
    match kind {
        Some(EdgeKind::CrossReference) => DependencyKind::CrossReference,
        Some(EdgeKind::DefinedTerm) => DependencyKind::DefinedTerm,
        Some(EdgeKind::PaymentSchedule) => DependencyKind::PaymentSchedule,
        Some(EdgeKind::Condition) => DependencyKind::Condition,
        Some(EdgeKind::Exhibit) => DependencyKind::Exhibit,
        None => DependencyKind::Unspecified,
    }
}

fn conflict_kind(kind: Option<Kind>) -> ConflictKind {
    match kind {
        Some(Kind::Contradiction) => ConflictKind::Contradiction,
        Some(Kind::StaleReference) => ConflictKind::StaleReference,
        Some(Kind::BudgetMismatch) => ConflictKind::BudgetMismatch,
        Some(Kind::DateInconsistency) => ConflictKind::DateInconsistency,
        Some(Kind::Ambiguity) => ConflictKind::Ambiguity,
        None => ConflictKind::Unspecified,
    }
}

fn severity(severity: Option<Severity>) -> ConflictSeverity {
    match severity {
        Some(Severity::Low) => ConflictSeverity::Low,
        Some(Severity::Medium) => ConflictSeverity::Medium,
        Some(Severity::High) => ConflictSeverity::High,
        Some(Severity::Critical) => ConflictSeverity::Critical,
        None => ConflictSeverity::Unspecified,
    }
}

fn clause_message(resource_id: String, c: Clause) -> ResolvedClause {
    ResolvedClause {
        section_number: c.section_number,
        section_title: c.section_title,
        category: c.category,
        effective_date: c.effective_date.map(|d| d.to_string()).unwrap_or_default(),
        effective_date_text: c.effective_date_text,
        last_changed_by: c.last_changed_by,
        content: c.content,
        confidence: c.confidence.unwrap_or_default(),
        resource_id,
    }
}

fn message(project: ProjectId, read: Analysis) -> ContractAnalysis {
    ContractAnalysis {
        project_id: project.to_string(),
        session_id: read.session_id.map(|s| s.to_string()).unwrap_or_default(),
        iteration: u32::try_from(read.iteration).unwrap_or(0),
        clauses: read
            .clauses
            .into_iter()
            .map(|(id, c)| clause_message(id, c))
            .collect(),
        edges: read
            .edges
            .into_iter()
            .map(|e| DependencyEdge {
                from_section: e.from_section,
                to_section: e.to_section,
                kind: dependency_kind(e.kind) as i32,
                kind_text: e.kind_text,
            })
            .collect(),
        conflicts: read
            .conflicts
            .into_iter()
            .map(|c| ContractConflict {
                kind: conflict_kind(c.kind) as i32,
                kind_text: c.kind_text,
                sections: c.sections,
                documents: c.documents,
                severity: severity(c.severity) as i32,
                severity_text: c.severity_text,
                explanation: c.explanation,
            })
            .collect(),
    }
}

/// The analysis as the export's JSON: the API's field names, enums as the
/// pipeline names them.
fn export_json(read: &Analysis) -> Value {
    let date = |c: &Clause| c.effective_date.map(|d| d.to_string());
    json!({
        "session_id": read.session_id.map(|s| s.to_string()),
        "iteration": read.iteration,
        "clauses": read.clauses.iter().map(|(id, c)| json!({
            "section_number": c.section_number, "section_title": c.section_title,
            "category": c.category, "effective_date": date(c),
            "effective_date_text": c.effective_date_text, "last_changed_by": c.last_changed_by,
            "content": c.content, "confidence": c.confidence, "resource_id": id,
        })).collect::<Vec<_>>(),
        "edges": read.edges.iter().map(|e| json!({
            "from_section": e.from_section, "to_section": e.to_section, "kind": e.kind_text,
        })).collect::<Vec<_>>(),
        "conflicts": read.conflicts.iter().map(|c| json!({
            "kind": c.kind_text, "sections": c.sections, "documents": c.documents,
            "severity": c.severity_text, "explanation": c.explanation,
        })).collect::<Vec<_>>(),
    })
}

impl Gateway {
    pub(crate) async fn get_contract_analysis(
        &self,
        user: UserId,
        req: GetContractAnalysisRequest,
    ) -> Result<ContractAnalysis, GatewayError> {
        let section = req.section.trim();
        if section.chars().count() > MAX_SECTION_CHARS {
            return Err(GatewayError::bad(
                "section",
                format!("section: at most {MAX_SECTION_CHARS} characters"),
            ));
        }
        let (project, session) = match (optional(&req.project_id), optional(&req.session_id)) {
            (Some(_), Some(_)) | (None, None) => {
                return Err(GatewayError::bad(
                    "project_id",
                    "name the project or the session, exactly one of them",
                ));
            }
            (None, Some(id)) => {
                let row =
                    sessions::session_for_user(self.store.pool(), user, SessionId::parse(id)?)
                        .await?;
                (row.project_id, Some(row.id))
            }
            (Some(id), None) => {
                let project = ProjectId::parse(id)?;
                projects::project_for_user(self.store.pool(), user, project).await?;
                let analysis = dialectic_store::query::analysis(self.store.pool(), project).await?;
                (project, analysis)
            }
        };
        let mut read = match session {
            Some(session) => self.read_analysis(user, session).await?,
            None => Analysis::default(),
        };
        if !section.is_empty() {
            read.keep_touching(section);
        }
        Ok(message(project, read))
    }

    /// The session's clauses, edges and conflicts in its latest iteration.
    pub(crate) async fn read_analysis(
        &self,
        user: UserId,
        session: SessionId,
    ) -> Result<Analysis, GatewayError> {
        let rows = resources::session_documents(self.store.pool(), user, session, None, None)
            .await?
            .into_iter()
            .filter(|r| {
                matches!(
                    r.document_key.as_deref(),
                    Some(RESOLVED_CLAUSE | DEPENDENCY_MAP | CONFLICT_REPORT)
                )
            })
            .collect::<Vec<_>>();
        let iteration = rows
            .iter()
            .filter_map(|r| r.iteration_number)
            .max()
            .unwrap_or(0);
        let mut read = Analysis {
            session_id: Some(session),
            iteration,
            ..Analysis::default()
        };
        for row in rows
            .into_iter()
            .filter(|r| r.iteration_number == Some(iteration))
        {
            read.folder.get_or_insert_with(|| row.storage_path.clone());
            let data = self.document_data(&row).await?;
            match row.document_key.as_deref() {
                Some(RESOLVED_CLAUSE) => read
                    .clauses
                    .push((row.id.to_string(), analysis::clause(&data))),
                Some(DEPENDENCY_MAP) => read.edges.extend(analysis::edges(&data)),
                Some(CONFLICT_REPORT) => read.conflicts.extend(analysis::conflicts(&data)),
                _ => {}
            }
        }
        Ok(read)
    }

    /// A rendered document's current JSON: its latest edit, else its chunks
    /// merged. The conflict report is a markdown output, whose edit keeps
    /// only `content`: its conflicts are then the newest reply's that has them.
    async fn document_data(&self, row: &ResourceRow) -> Result<Value, GatewayError> {
        let Some(identity) = row.source_contribution_id else {
            return Ok(Value::Null);
        };
        let root = contributions::contribution(self.store.pool(), identity).await?;
        let chain = contributions::document_chain(
            self.store.pool(),
            root.session_id,
            &root.stage_slug,
            root.id,
        )
        .await?;
        let mut data = self.current_data(&chain).await?;
        if row.document_key.as_deref() == Some(CONFLICT_REPORT) && data.get("conflicts").is_none() {
            for part in chain.iter().rev() {
                let raw = self
                    .blob
                    .get_string(&part.raw_response_storage_path)
                    .await?;
                let reply: Value = serde_json::from_str(&raw).unwrap_or_default();
                if let (Some(conflicts), Some(fields)) =
                    (reply.get("conflicts"), data.as_object_mut())
                {
                    fields.insert("conflicts".into(), conflicts.clone());
                    break;
                }
            }
        }
        Ok(data)
    }

    /// Writes the project's analysis beside its rendered documents, so an
    /// export carries it as data ([`EXPORT_FILE`]); a project without one
    /// writes nothing.
    pub(crate) async fn store_analysis_for_export(
        &self,
        user: UserId,
        project: ProjectId,
    ) -> Result<(), GatewayError> {
        let Some(session) = dialectic_store::query::analysis(self.store.pool(), project).await?
        else {
            return Ok(());
        };
        let read = self.read_analysis(user, session).await?;
        let Some(folder) = read.folder.as_deref().filter(|_| !read.is_empty()) else {
            return Ok(());
        };
        let body = serde_json::to_vec_pretty(&export_json(&read))
            .map_err(|e| GatewayError::Internal(e.to_string()))?;
        self.blob
            .put(&format!("{folder}/{EXPORT_FILE}"), body, "application/json")
            .await?;
        Ok(())
    }
}
