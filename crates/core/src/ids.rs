//! Typed identifiers, so a job id can never be passed where a session id is expected.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use uuid::Uuid;

/// The text of an id could not be read as a UUID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} id {value:?} is not a valid UUID")]
pub struct InvalidId {
    pub kind: &'static str,
    pub value: String,
}

/// The last eight hex digits of an id: its random part for a v7 id.
pub fn short_hex(id: &Uuid) -> String {
    let hex = id.simple().to_string();
    hex[hex.len() - 8..].to_string()
}

/// The short name of an id given as text (`short_hex`), or of any other text
/// (its digest's first eight hex digits), for names that must differ per source.
pub fn short_of_text(text: &str) -> String {
    match Uuid::parse_str(text) {
        Ok(id) => short_hex(&id),
        Err(_) => crate::digest::sha256_hex(text.as_bytes())[..8].to_string(),
    }
}

/// 64 hex digits from two v4 UUIDs (244 random bits): secrets no one chose.
pub fn random_secret() -> String {
    format!("{}{}", Uuid::new_v4().simple(), Uuid::new_v4().simple())
}

/// A name unique to this process and moment (`executor-{v7}`), for workers,
/// lock holders and other owners that need no row of their own.
pub fn instance_name(prefix: &str) -> String {
    format!("{prefix}-{}", Uuid::now_v7().simple())
}

macro_rules! typed_id {
    ($($name:ident => $kind:literal),* $(,)?) => {$(
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        #[cfg_attr(feature = "sqlx", derive(sqlx::Type), sqlx(transparent))]
        pub struct $name(pub Uuid);

        impl $name {
            /// A new time-ordered id (UUIDv7), which keeps B-tree inserts local.
            // No `Default`: `unwrap_or_default()` on an optional id would
            // silently mint a fresh one where a real id was missing.
            #[allow(clippy::new_without_default)]
            pub fn new() -> Self {
                Self(Uuid::now_v7())
            }
            /// A fixed id, for fixtures that must name the same row every run.
            pub const fn from_u128(value: u128) -> Self {
                Self(Uuid::from_u128(value))
            }
            pub fn as_uuid(&self) -> Uuid {
                self.0
            }
            /// Eight hex digits for storage paths (`session_{id8}`): the last
            /// eight, which are random. The first eight of a v7 id are its
            /// timestamp and repeat for every id minted in the same ~65 s.
            pub fn short(&self) -> String {
                short_hex(&self.0)
            }
            pub fn parse(value: &str) -> Result<Self, InvalidId> {
                value.parse()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl FromStr for $name {
            type Err = InvalidId;
            fn from_str(value: &str) -> Result<Self, InvalidId> {
                Uuid::parse_str(value.trim())
                    .map(Self)
                    .map_err(|_| InvalidId { kind: $kind, value: value.chars().take(64).collect() })
            }
        }

        impl From<Uuid> for $name {
            fn from(value: Uuid) -> Self {
                Self(value)
            }
        }

        impl From<$name> for Uuid {
            fn from(value: $name) -> Self {
                value.0
            }
        }
    )*};
}

typed_id! {
    UserId => "user",
    ProjectId => "project",
    SessionId => "session",
    JobId => "job",
    ContributionId => "contribution",
    ResourceId => "resource",
    ModelId => "model",
    StageId => "stage",
    StepId => "recipe step",
    TemplateId => "recipe template",
    WalletId => "wallet",
    // A hold is named by the id of its ledger row, so hold ids are these too.
    TransactionId => "ledger transaction",
    // One installed version of a pipeline (a `dialectic_process_templates` row).
    PipelineId => "pipeline version",
    RecipeInstanceId => "recipe instance",
    PromptId => "system prompt",
    RegenerationId => "regeneration",
    FeedbackId => "feedback",
    BlackboardEntryId => "blackboard entry",
    // One rewind of a session by a revisit (a `dialectic_session_revisions` row).
    RevisionId => "session revision",
    QueryId => "query",
}

impl ModelId {
    /// Names "no model" where a row needs one: an edit of a document no model wrote.
    pub const NONE: ModelId = ModelId(Uuid::nil());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_reject_garbage() {
        let id = JobId::new();
        assert_eq!(JobId::parse(&id.to_string()).unwrap(), id);
        let err = SessionId::parse("not-a-uuid").unwrap_err();
        assert_eq!(err.kind, "session");
        assert_eq!(id.short().len(), 8);
    }

    #[test]
    fn ids_minted_together_have_different_shorts() {
        let shorts: std::collections::BTreeSet<String> =
            (0..1000).map(|_| SessionId::new().short()).collect();
        assert_eq!(shorts.len(), 1000);
    }
}
