//! What an upload is to its project. Seed 001 gives the dialectic typed
//! context documents (deployment context, constraint boundaries, success
//! criteria); seed 003 gives the essay writer writing samples and sources.
//! A `project_document` input rule that names a role reads only the uploads
//! of that role; one that names none reads every upload.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DocumentRole {
    /// Material a claim may be checked against.
    Source,
    /// The writer's own earlier prose, read for their voice.
    WritingSample,
    /// Where the work will be used.
    Context,
    /// What the work must not do.
    Constraint,
    /// How the work will be judged.
    SuccessCriteria,
}

impl DocumentRole {
    pub const ALL: [DocumentRole; 5] = [
        DocumentRole::Source,
        DocumentRole::WritingSample,
        DocumentRole::Context,
        DocumentRole::Constraint,
        DocumentRole::SuccessCriteria,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            DocumentRole::Source => "source",
            DocumentRole::WritingSample => "writing_sample",
            DocumentRole::Context => "context",
            DocumentRole::Constraint => "constraint",
            DocumentRole::SuccessCriteria => "success_criteria",
        }
    }
}

impl fmt::Display for DocumentRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A role name that is not one of [`DocumentRole::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0:?} is not a document role (source, writing_sample, context, constraint, success_criteria)"
)]
pub struct UnknownRole(pub String);

impl FromStr for DocumentRole {
    type Err = UnknownRole;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        DocumentRole::ALL
            .into_iter()
            .find(|r| r.as_str() == text)
            .ok_or_else(|| UnknownRole(text.to_string()))
    }
}

/// Whether an upload of role `upload` is read by a rule asking for `wanted`.
pub fn admits(wanted: Option<DocumentRole>, upload: Option<DocumentRole>) -> bool {
    wanted.is_none() || wanted == upload
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_role_reads_back_from_its_name() {
        for role in DocumentRole::ALL {
            assert_eq!(role.as_str().parse::<DocumentRole>(), Ok(role));
            let json = serde_json::to_string(&role).expect("serializes");
            assert_eq!(json, format!("\"{}\"", role.as_str()));
        }
        assert!("sample".parse::<DocumentRole>().is_err());
    }

    #[test]
    fn a_rule_with_a_role_reads_only_that_role_and_one_without_reads_all() {
        let sample = Some(DocumentRole::WritingSample);
        assert!(admits(sample, sample));
        assert!(!admits(sample, Some(DocumentRole::Source)));
        assert!(!admits(sample, None));
        assert!(admits(None, None));
        assert!(admits(None, Some(DocumentRole::Source)));
    }
}
