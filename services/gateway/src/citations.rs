//! Citations a lawyer can check (issue 54, item 3; seed 004: "include
//! document name, section number, and effective date"): each citation of an
//! answer is placed before it is returned and cached.
//! - An upload: its file name; the numbered heading above the quote and, for
//!   a PDF, the page anchor above it (crates/convert writes both); the date
//!   the document states it takes effect.
//! - A resolved clause: the document that last changed it, its section and
//!   effective date; the page of that section's heading when that document
//!   is an upload with pages.
//! - A rendered document: its name and the heading above the quote.
//! - A blackboard finding: the section its data names, if any.
//!
//! The place is read from the text the citation's `start` counts in, the
//! same text GetDocumentContent returns for its source.

use crate::error::GatewayError;
use crate::service::Gateway;
use dialectic_core::contract_analysis::{self as analysis, Place};
use dialectic_core::ids::{ProjectId, ResourceId, UserId};
use dialectic_core::query::SourceKind;
use dialectic_proto::v1::Citation;
use dialectic_store::project_documents::{self, ProjectDocumentRow};
use dialectic_store::query::cited_source;
use dialectic_store::resources;
use std::collections::HashMap;

/// What one question's placing has read, so a source is read once.
struct Reading {
    uploads: Vec<ProjectDocumentRow>,
    texts: HashMap<String, String>,
}

fn set_place(citation: &mut Citation, place: Place) {
    if let Some(heading) = place.section {
        citation.section = heading.number.unwrap_or_default();
        citation.section_title = heading.title;
    }
    citation.page = place.page;
}

/// The kind of a citation's source, as the gateway typed it.
fn cited_kind(citation: &Citation) -> Option<SourceKind> {
    use dialectic_proto::v1::CitationSourceKind as K;
    match K::try_from(citation.source_kind) {
        Ok(K::UploadedDocument) => Some(SourceKind::UploadedDocument),
        Ok(K::RenderedDocument) => Some(SourceKind::RenderedDocument),
        Ok(K::Contribution) => Some(SourceKind::Contribution),
        Ok(K::BlackboardEntry) => Some(SourceKind::BlackboardEntry),
        _ => None,
    }
}

impl Gateway {
    /// Places every citation; a source that cannot be read leaves its
    /// citation as the check left it (the answer was paid for), logged.
    pub(crate) async fn place_citations(
        &self,
        user: UserId,
        project: ProjectId,
        citations: &mut [Citation],
    ) {
        if citations.is_empty() {
            return;
        }
        let uploads = match project_documents::list(self.store.pool(), project).await {
            Ok(uploads) => uploads,
            Err(e) => {
                tracing::warn!(error = %e, "citations left unplaced: the uploads cannot be listed");
                return;
            }
        };
        let mut reading = Reading {
            uploads,
            texts: HashMap::new(),
        };
        for citation in citations.iter_mut() {
            citation.document = citation.source_name.clone();
            if let Err(e) = self.place(user, &mut reading, citation).await {
                tracing::warn!(error = %e, source_id = %citation.source_id, "a citation left unplaced");
            }
        }
    }

    async fn place(
        &self,
        user: UserId,
        reading: &mut Reading,
        citation: &mut Citation,
    ) -> Result<(), GatewayError> {
        let start = citation.start as usize;
        match cited_kind(citation) {
            Some(SourceKind::UploadedDocument) => {
                let text = self.text_of(user, reading, &citation.source_id).await?;
                set_place(citation, analysis::place_at(&text, start));
                citation.effective_date = analysis::stated_effective_date(&text)
                    .map(|d| d.to_string())
                    .unwrap_or_default();
            }
            Some(SourceKind::RenderedDocument) => {
                let text = self.text_of(user, reading, &citation.source_id).await?;
                let mut place = analysis::place_at(&text, start);
                place.page = None;
                set_place(citation, place);
            }
            Some(SourceKind::Contribution) => self.place_clause(user, reading, citation).await?,
            Some(SourceKind::BlackboardEntry) => {
                let id = ResourceId::parse(&citation.source_id)?;
                let source = cited_source(self.store.pool(), user, id.0).await?;
                let section = source.data.as_ref().and_then(|d| {
                    d.0.get("section")
                        .and_then(|s| s.as_str())
                        .map(str::to_string)
                });
                if let Some(section) = section {
                    citation.section = analysis::section_key(&section);
                }
            }
            None => {}
        }
        Ok(())
    }

    /// A resolved clause's document, section and date, and the page of its
    /// section in the upload that last changed it.
    async fn place_clause(
        &self,
        user: UserId,
        reading: &mut Reading,
        citation: &mut Citation,
    ) -> Result<(), GatewayError> {
        let id = ResourceId::parse(&citation.source_id)?;
        let source = cited_source(self.store.pool(), user, id.0).await?;
        let Some(key) = source.storage_key else {
            return Ok(());
        };
        let raw = self.blob.get_string(&key).await?;
        let data: serde_json::Value = serde_json::from_str(&raw).unwrap_or_default();
        let clause = analysis::clause(&data);
        if !clause.last_changed_by.is_empty() {
            citation.document = clause.last_changed_by.clone();
        }
        citation.section = analysis::section_key(&clause.section_number);
        citation.section_title = clause.section_title.clone();
        citation.effective_date = clause
            .effective_date
            .map(|d| d.to_string())
            .unwrap_or_default();
        let upload = reading
            .uploads
            .iter()
            .find(|u| u.file_name.eq_ignore_ascii_case(&clause.last_changed_by))
            .map(|u| u.id.to_string());
        if let (Some(upload), false) = (upload, citation.section.is_empty()) {
            let text = self.text_of(user, reading, &upload).await?;
            citation.page = analysis::page_of_section(&text, &citation.section);
        }
        Ok(())
    }

    /// The text of an upload or rendered document, read once per question.
    async fn text_of(
        &self,
        user: UserId,
        reading: &mut Reading,
        resource_id: &str,
    ) -> Result<String, GatewayError> {
        if let Some(text) = reading.texts.get(resource_id) {
            return Ok(text.clone());
        }
        let id = ResourceId::parse(resource_id)?;
        let row = resources::resource_for_user(self.store.pool(), user, id).await?;
        let text = self.blob.get_string(&row.key()).await?;
        reading.texts.insert(resource_id.to_string(), text.clone());
        Ok(text)
    }
}
