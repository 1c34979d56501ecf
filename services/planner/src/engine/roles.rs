//! Which model a job runs on (docs/models.md, "Model roles"). A session's
//! lineages are its selected models; a step whose role the session mapped
//! runs on that role's model in every lineage, keeping the lineage it was
//! planned in (the documents it reads, the names it writes under), as a
//! retry on another model does. A step without a mapped role runs on its
//! lineage's model, or where its parent was moved by a retry.

use super::PlannerError;
use dialectic_core::ids::{ModelId, SessionId};
use dialectic_core::payload::JobPayload;
use dialectic_core::recipe::RecipeStep;
use dialectic_store::jobs::JobRow;
use dialectic_store::models;
use dialectic_store::sessions;
use std::collections::{BTreeMap, HashMap};

/// Where a job runs: the model that answers and the lineage it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Placement {
    pub model_id: ModelId,
    pub api_identifier: String,
    /// The lineage model, when it is not the one that answers.
    pub lineage_model_id: Option<ModelId>,
}

/// A session's role map with the names of its models.
#[derive(Debug, Default)]
pub(super) struct Roles {
    mapped: BTreeMap<String, ModelId>,
    names: HashMap<ModelId, String>,
}

impl Roles {
    /// The session's map, with the names of its models and of `lineages`
    /// (nothing read beyond the map when it is empty).
    pub(super) async fn load(
        conn: &mut sqlx::PgConnection,
        session_id: SessionId,
        lineages: &[ModelId],
    ) -> Result<Roles, PlannerError> {
        let mapped = sessions::model_roles(&mut *conn, session_id).await?;
        Roles::of(conn, mapped, lineages).await
    }

    /// `mapped` (a session's map), with the names of its models and of `lineages`.
    pub(super) async fn of(
        conn: &mut sqlx::PgConnection,
        mapped: BTreeMap<String, ModelId>,
        lineages: &[ModelId],
    ) -> Result<Roles, PlannerError> {
        if mapped.is_empty() {
            return Ok(Roles::default());
        }
        let ids: Vec<ModelId> = mapped.values().chain(lineages).copied().collect();
        let names = models::models_by_id(&mut *conn, &ids)
            .await?
            .into_iter()
            .map(|m| (m.id, m.api_identifier))
            .collect();
        Ok(Roles { mapped, names })
    }

    /// The model `step`'s role is mapped to in this session, with its name.
    fn mapped(&self, step: Option<&RecipeStep>) -> Option<(ModelId, &str)> {
        let id = *self.mapped.get(step?.role_name()?)?;
        Some((id, self.names.get(&id)?.as_str()))
    }

    /// A root job of `step` in the lineage of `lineage` (named `name`).
    pub(super) fn root(&self, step: &RecipeStep, lineage: ModelId, name: &str) -> Placement {
        let (model_id, api_identifier) = self.mapped(Some(step)).unwrap_or((lineage, name));
        Placement {
            model_id,
            api_identifier: api_identifier.to_string(),
            lineage_model_id: (model_id != lineage).then_some(lineage),
        }
    }

    /// A child of `parent` for `step`; None: where its parent runs (as
    /// before roles). A child of a step that ran on its role's model goes
    /// back to its lineage's model unless it has a mapped role of its own.
    pub(super) fn child(
        &self,
        step: &RecipeStep,
        parent: &JobRow,
        parent_payload: &JobPayload,
    ) -> Option<Placement> {
        let lineage = parent_payload.lineage_model_id.or(parent.model_id)?;
        let (model_id, api_identifier) = match self.mapped(Some(step)) {
            Some(found) => found,
            None if self.mapped(parent_payload.step.as_ref()).is_some() => {
                (lineage, self.names.get(&lineage)?.as_str())
            }
            None => return None,
        };
        (parent.model_id != Some(model_id)).then(|| Placement {
            model_id,
            api_identifier: api_identifier.to_string(),
            lineage_model_id: (model_id != lineage).then_some(lineage),
        })
    }
}
