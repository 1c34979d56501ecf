//! Lists, deletion, recipes and export: the read-mostly half of the API.

mod export;

pub(crate) use export::ExportSlots;

use crate::convert;
use crate::error::GatewayError;
use crate::service::Gateway;
use dialectic_core::ids::{ModelId, ProjectId, ResourceId, UserId};
use dialectic_core::list_filter::{Field, ListOrder, ListQueryError, parse_filter, parse_order};
use dialectic_proto::v1::planner::DeleteProjectCommand;
use dialectic_proto::v1::{
    CreditWalletRequest, DeleteProjectResponse, DocumentChunk, DocumentChunks,
    EditStageRecipeRequest, InstallPipelineResponse, ListPipelinesRequest, ListPipelinesResponse,
    ListProjectsRequest, ListProjectsResponse, ListRecipesRequest, ListRecipesResponse,
    ListSessionsRequest, ListSessionsResponse, ListWalletTransactionsRequest,
    ListWalletTransactionsResponse, Pipeline, RecipeStep, RecipeSummary, StageRecipe,
    WalletTransaction,
};
use dialectic_store::listing;
use dialectic_store::projects::{self, ProjectRow};
use dialectic_store::recipe_edit::{self, RecipeEditError};
use dialectic_store::{StoreError, contributions, ledger, pipelines, recipes, wallets};
use std::str::FromStr;

/// Where a project's objects live in S3.
pub fn project_prefix(project_id: ProjectId) -> String {
    format!("projects/{project_id}/")
}

/// Where a project's presigned export is kept: outside the project's prefix,
/// so an export never contains an earlier export.
pub fn export_key(project: &ProjectRow) -> String {
    format!("{}{}.zip", export_prefix(project.id), project.slug)
}

/// Under which prefix a project's exports (and their uploads) are kept.
fn export_prefix(project_id: ProjectId) -> String {
    format!("exports/{project_id}/")
}

fn pipeline(v: pipelines::PipelineVersion, current: bool) -> Pipeline {
    Pipeline {
        slug: v.slug,
        name: v.display_name,
        version: u32::try_from(v.version).unwrap_or(0),
        stages: v.stages,
        created_at: Some(convert::timestamp(v.created_at)),
        current,
    }
}

pub fn transaction(t: ledger::Transaction) -> WalletTransaction {
    let money = t.money().as_ref().map(convert::money);
    let count = |n: Option<i64>| n.and_then(|n| u64::try_from(n).ok()).unwrap_or(0);
    WalletTransaction {
        money,
        input_tokens: count(t.input_tokens),
        output_tokens: count(t.output_tokens),
        cached_input_tokens: count(t.cached_input_tokens),
        cache_write_input_tokens: count(t.cache_write_input_tokens),
        id: t.id.to_string(),
        transaction_kind: convert::transaction_kind(t.kind.as_str()),
        kind: t.kind.to_string(),
        amount: t.amount,
        balance_after: t.balance_after,
        reason: t.reason.unwrap_or_default(),
        session_id: t.session_id.map(|s| s.to_string()).unwrap_or_default(),
        job_id: t.job_id.map(|s| s.to_string()).unwrap_or_default(),
        created_at: Some(convert::timestamp(t.created_at)),
    }
}

/// The wallet's ledger entry as the public API shows a transaction.
fn entry(e: dialectic_proto::v1::wallet::LedgerEntry) -> WalletTransaction {
    let usage = e.usage.unwrap_or_default();
    WalletTransaction {
        money: (!usage.currency_code.is_empty()).then(|| {
            convert::money(&dialectic_core::price::Money {
                currency: usage.currency_code,
                nanos: usage.money_nanos,
            })
        }),
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        cached_input_tokens: usage.cached_input_tokens,
        cache_write_input_tokens: usage.cache_write_input_tokens,
        id: e.id,
        transaction_kind: convert::transaction_kind(&e.kind),
        kind: e.kind,
        amount: e.amount,
        balance_after: e.balance_after,
        reason: e.reason,
        session_id: e.session_id,
        job_id: e.job_id,
        created_at: e.created_at,
    }
}

fn cursor<Id: FromStr>(token: &str) -> Result<Option<listing::Cursor<Id>>, GatewayError> {
    convert::parse_page_token(token).map_err(|e| GatewayError::bad("page_token", e))
}

fn list_query(e: ListQueryError) -> GatewayError {
    // The message starts with the field too: a CLI shows only the message.
    GatewayError::bad(e.field, e.to_string())
}

const PROJECT_FIELDS: &[Field] = &[Field::Name, Field::CreatedAt];
const PROJECT_ORDERS: &[ListOrder] = &[
    ListOrder::CreatedDesc,
    ListOrder::CreatedAsc,
    ListOrder::NameAsc,
    ListOrder::NameDesc,
];
const SESSION_FIELDS: &[Field] = &[Field::State, Field::CreatedAt];
const SESSION_ORDERS: &[ListOrder] = &[ListOrder::CreatedDesc, ListOrder::CreatedAsc];

/// The next page's token, in the page's order: only when the page came back full.
fn next_ordered<T, Id: std::fmt::Display>(
    rows: &[T],
    page: &listing::Page<'_, Id>,
    key: impl Fn(&T) -> (chrono::DateTime<chrono::Utc>, Id),
) -> String {
    match rows.last() {
        Some(last) if rows.len() as i64 >= page.limit => {
            let (at, id) = key(last);
            convert::ordered_token(page.order, at, id)
        }
        _ => String::new(),
    }
}

impl Gateway {
    /// An administrator's credit, through the wallet (which admits credits
    /// from the gateway only, for the administrator it names).
    pub(crate) async fn credit_as_admin(
        &self,
        admin: UserId,
        req: CreditWalletRequest,
    ) -> Result<WalletTransaction, GatewayError> {
        if !dialectic_store::auth::is_admin(self.store.pool(), admin).await? {
            return Err(GatewayError::AdminOnly(
                "only an administrator credits wallets".into(),
            ));
        }
        let user = UserId::parse(req.user_id.trim())?;
        let wallet = wallets::wallet_balance(self.store.pool(), None, Some(user)).await?;
        let mut request = tonic::Request::new(dialectic_proto::v1::wallet::CreditRequest {
            wallet_id: wallet.id.to_string(),
            amount: req.amount,
            idempotency_key: req.idempotency_key,
            reason: req.reason,
        });
        let acting = admin
            .to_string()
            .parse()
            .map_err(|_| GatewayError::Internal("a user id is not valid metadata".into()))?;
        request.metadata_mut().insert("x-dialectic-user", acting);
        let credited = self
            .wallet()
            .credit(request)
            .await
            .map_err(GatewayError::Wallet)?;
        Ok(entry(credited.into_inner()))
    }

    /// The chunks a rendered document was merged from, in merge order.
    pub(crate) async fn document_chunks(
        &self,
        user: UserId,
        resource_id: &str,
    ) -> Result<DocumentChunks, GatewayError> {
        let id = ResourceId::parse(resource_id)?;
        let (resource, root) = self.document_root(user, id).await?;
        let identity = root.id;
        let chain = contributions::document_chain(
            self.store.pool(),
            root.session_id,
            &root.stage_slug,
            identity,
        )
        .await?;
        let mut chunks = Vec::with_capacity(chain.len());
        for c in chain {
            let raw = self.blob.get_string(&c.raw_response_storage_path).await?;
            chunks.push(DocumentChunk {
                contribution_id: c.id.to_string(),
                contribution_type: c.contribution_type,
                storage_key: c.raw_response_storage_path,
                finish_reason: c.finish_reason.unwrap_or_default(),
                edit_version: u32::try_from(c.edit_version).unwrap_or(0),
                incomplete: c.is_incomplete,
                raw,
            });
        }
        let mut ids: Vec<ModelId> = resource.model_id.into_iter().collect();
        ids.dedup();
        let names = self.model_names(&ids).await?;
        Ok(DocumentChunks {
            document: Some(convert::document(&resource, &names)),
            chunks,
        })
    }

    pub(crate) async fn list_projects(
        &self,
        user: UserId,
        req: ListProjectsRequest,
    ) -> Result<ListProjectsResponse, GatewayError> {
        let filter = parse_filter(&req.filter, PROJECT_FIELDS).map_err(list_query)?;
        let order = parse_order(&req.order_by, PROJECT_ORDERS).map_err(list_query)?;
        let page = listing::Page {
            limit: convert::page_size(req.page_size),
            after: convert::parse_ordered_token(order, &req.page_token)
                .map_err(|e| GatewayError::bad("page_token", e))?,
            filter: &filter,
            order,
        };
        let rows = listing::projects(self.store.pool(), user, &page).await?;
        let next_page_token = next_ordered(&rows, &page, |r| (r.created_at, r.id));
        Ok(ListProjectsResponse {
            projects: rows.into_iter().map(convert::project).collect(),
            next_page_token,
        })
    }

    pub(crate) async fn list_sessions(
        &self,
        user: UserId,
        req: ListSessionsRequest,
    ) -> Result<ListSessionsResponse, GatewayError> {
        let project_id = ProjectId::parse(&req.project_id)?;
        // The request is checked whole before any row is read.
        let filter = parse_filter(&req.filter, SESSION_FIELDS).map_err(list_query)?;
        let order = parse_order(&req.order_by, SESSION_ORDERS).map_err(list_query)?;
        let page = listing::Page {
            limit: convert::page_size(req.page_size),
            after: convert::parse_ordered_token(order, &req.page_token)
                .map_err(|e| GatewayError::bad("page_token", e))?,
            filter: &filter,
            order,
        };
        projects::project_for_user(self.store.pool(), user, project_id).await?;
        let rows = listing::sessions(self.store.pool(), user, project_id, &page).await?;
        let next_page_token = next_ordered(&rows, &page, |r| (r.created_at, r.id));
        let mut sessions = Vec::with_capacity(rows.len());
        for row in rows {
            sessions.push(self.session_view(row, false).await?);
        }
        Ok(ListSessionsResponse {
            sessions,
            next_page_token,
        })
    }

    pub(crate) async fn delete_project(
        &self,
        user: UserId,
        project_id: &str,
    ) -> Result<DeleteProjectResponse, GatewayError> {
        let id = ProjectId::parse(project_id)?;
        let project = projects::project_for_user(self.store.pool(), user, id).await?;
        self.planner()
            .delete_project(tonic::Request::new(DeleteProjectCommand {
                project_id: project.id.to_string(),
                user_id: user.to_string(),
            }))
            .await
            .map_err(GatewayError::Planner)?;
        self.invalidate(project.id).await;
        // The rows are gone from every read; objects go after the commit, so a
        // failed commit never leaves a project without its prompt.
        let keys = self.blob.list(&project_prefix(project.id)).await?;
        for key in &keys {
            self.blob.delete(key).await?;
        }
        // S3 deletes of a missing key succeed, so this is safe without an export.
        self.blob.delete(&export_key(&project)).await?;
        // And the uploads of exports that never completed (a gateway that
        // died mid-export): one listing under the project's export prefix.
        self.blob
            .abort_pending_uploads(&export_prefix(project.id))
            .await?;
        Ok(DeleteProjectResponse {
            objects_deleted: u32::try_from(keys.len()).unwrap_or(u32::MAX),
        })
    }

    pub(crate) async fn list_wallet_transactions(
        &self,
        user: UserId,
        req: ListWalletTransactionsRequest,
    ) -> Result<ListWalletTransactionsResponse, GatewayError> {
        let limit = convert::page_size(req.page_size);
        let wallet = wallets::wallet_balance(self.store.pool(), None, Some(user)).await?;
        let rows = ledger::transactions(
            self.store.pool(),
            wallet.id,
            limit,
            cursor(&req.page_token)?,
        )
        .await?;
        let next_page_token = convert::next_token(&rows, limit, |t| (t.created_at, t.id));
        Ok(ListWalletTransactionsResponse {
            transactions: rows.into_iter().map(transaction).collect(),
            next_page_token,
        })
    }

    pub(crate) async fn list_pipelines(
        &self,
        req: ListPipelinesRequest,
    ) -> Result<ListPipelinesResponse, GatewayError> {
        let start = convert::start_of(&req.page_token)?;
        let versions = pipelines::list(self.store.pool()).await?;
        let mut newest_seen = std::collections::HashSet::new();
        let all: Vec<_> = versions
            .into_iter()
            .map(|v| {
                let current = newest_seen.insert(v.slug.clone());
                pipeline(v, current)
            })
            .collect();
        let (pipelines, next_page_token) = convert::whole_page(all, req.page_size, start)?;
        Ok(ListPipelinesResponse {
            pipelines,
            next_page_token,
        })
    }

    /// Pipelines are shared by every user: only an administrator installs one
    /// (or checks one: `validate_only` writes nothing).
    pub(crate) async fn install_pipeline(
        &self,
        user: UserId,
        content: &str,
        validate_only: bool,
    ) -> Result<InstallPipelineResponse, GatewayError> {
        if !dialectic_store::auth::is_admin(self.store.pool(), user).await? {
            return Err(GatewayError::AdminOnly(
                "pipelines are shared by every user; only an administrator may install one".into(),
            ));
        }
        let file = dialectic_core::pipeline::PipelineFile::parse(content)
            .map_err(|e| GatewayError::bad("content", e.to_string()))?;
        if validate_only {
            return self.check_pipeline(&file).await;
        }
        let installed = pipelines::install(self.store.pool(), &file).await?;
        let version = pipelines::list(self.store.pool())
            .await?
            .into_iter()
            .find(|v| v.slug == installed.name && v.version == installed.version)
            .ok_or_else(|| {
                GatewayError::Internal(format!("pipeline {} vanished", installed.name))
            })?;
        Ok(InstallPipelineResponse {
            pipeline: Some(pipeline(version, true)),
            created: installed.created,
        })
    }

    /// A dry run of an install: every check, nothing kept; the version it
    /// would be has no creation time yet.
    async fn check_pipeline(
        &self,
        file: &dialectic_core::pipeline::PipelineFile,
    ) -> Result<InstallPipelineResponse, GatewayError> {
        let checked = pipelines::check_install(self.store.pool(), file).await?;
        Ok(InstallPipelineResponse {
            pipeline: Some(Pipeline {
                slug: checked.name,
                name: file.display_name.clone(),
                version: u32::try_from(checked.version).unwrap_or(0),
                stages: file.stages.iter().map(|s| s.slug.clone()).collect(),
                created_at: None,
                current: true,
            }),
            created: checked.created,
        })
    }

    pub(crate) async fn list_recipes(
        &self,
        req: ListRecipesRequest,
    ) -> Result<ListRecipesResponse, GatewayError> {
        let start = convert::start_of(&req.page_token)?;
        let rows = recipes::stage_recipes(self.store.pool()).await?;
        let (rows, next_page_token) = convert::whole_page(rows, req.page_size, start)?;
        Ok(ListRecipesResponse {
            next_page_token,
            recipes: rows
                .into_iter()
                .map(
                    |(stage_slug, display_name, is_cloned, steps)| RecipeSummary {
                        stage_slug,
                        display_name,
                        is_cloned,
                        steps: u32::try_from(steps).unwrap_or(0),
                    },
                )
                .collect(),
        })
    }

    pub(crate) async fn edit_stage_recipe(
        &self,
        user: UserId,
        req: EditStageRecipeRequest,
    ) -> Result<StageRecipe, GatewayError> {
        if !dialectic_store::auth::is_admin(self.store.pool(), user).await? {
            return Err(GatewayError::AdminOnly(
                "recipes are shared by every user; only an administrator may change them".into(),
            ));
        }
        if req.validate_only {
            return self.preview_recipe_edit(&req).await;
        }
        let stage = req.stage_slug.trim();
        let pool = self.store.pool();
        let edit_error = |e: RecipeEditError| match e {
            RecipeEditError::Store(e) => GatewayError::Store(e),
            RecipeEditError::UnknownStage(stage) => {
                GatewayError::not_found("recipe for stage", stage)
            }
            RecipeEditError::UnknownStepKey { stage, step_key } => {
                GatewayError::not_found("recipe step", format!("{step_key} of stage {stage}"))
            }
            e => GatewayError::bad("add_edges", e.to_string()),
        };
        for key in &req.skip {
            recipe_edit::set_step_skipped(pool, stage, key, true)
                .await
                .map_err(edit_error)?;
        }
        for key in &req.unskip {
            recipe_edit::set_step_skipped(pool, stage, key, false)
                .await
                .map_err(edit_error)?;
        }
        for edge in &req.add_edges {
            recipe_edit::add_edge(pool, stage, &edge.from_step_key, &edge.to_step_key)
                .await
                .map_err(edit_error)?;
        }
        self.stage_recipe(stage).await
    }

    pub(crate) async fn stage_recipe(&self, stage_slug: &str) -> Result<StageRecipe, GatewayError> {
        let (recipe, is_cloned) = self.load_recipe(stage_slug).await?;
        recipe_view(stage_slug.trim(), &recipe, is_cloned)
    }

    /// A dry run of an edit: the same refusals (unknown stage or step key, an
    /// edge outside the recipe or closing a cycle), applied to a copy only.
    async fn preview_recipe_edit(
        &self,
        req: &EditStageRecipeRequest,
    ) -> Result<StageRecipe, GatewayError> {
        let stage = req.stage_slug.trim();
        let (mut recipe, is_cloned) = self.load_recipe(stage).await?;
        for (keys, skipped) in [(&req.skip, true), (&req.unskip, false)] {
            for key in keys {
                let step = recipe.steps.iter_mut().find(|s| &s.step_key == key);
                let step = step.ok_or_else(|| {
                    GatewayError::not_found("recipe step", format!("{key} of stage {stage}"))
                })?;
                step.is_skipped = skipped;
            }
        }
        for edge in &req.add_edges {
            let (from, to) = (&edge.from_step_key, &edge.to_step_key);
            let ids = match (recipe.step_by_key(from), recipe.step_by_key(to)) {
                (Some(a), Some(b)) => (a.id, b.id),
                _ => {
                    return Err(GatewayError::bad(
                        "add_edges",
                        format!("edge {from} -> {to}: both steps must be in stage {stage}"),
                    ));
                }
            };
            recipe = recipe
                .with_edge(ids)
                .map_err(|e| GatewayError::bad("add_edges", e.to_string()))?;
        }
        recipe_view(stage, &recipe, is_cloned)
    }

    async fn load_recipe(
        &self,
        stage_slug: &str,
    ) -> Result<(dialectic_core::recipe::Recipe, bool), GatewayError> {
        let stage_slug = stage_slug.trim();
        if stage_slug.is_empty() {
            return Err(GatewayError::bad(
                "stage_slug",
                "stage_slug is required (see ListRecipes)",
            ));
        }
        let listed = recipes::stage_recipes(self.store.pool()).await?;
        let Some((_, _, is_cloned, _)) = listed.iter().find(|(slug, ..)| slug == stage_slug) else {
            return Err(GatewayError::not_found("recipe for stage", stage_slug));
        };
        let mut conn = self
            .store
            .pool()
            .acquire()
            .await
            .map_err(StoreError::from)?;
        let recipe = recipes::stage_recipe(&mut conn, stage_slug).await?;
        Ok((recipe, *is_cloned))
    }
}

/// A recipe as the API shows it: steps in execution order, each with what it waits for.
fn recipe_view(
    stage_slug: &str,
    recipe: &dialectic_core::recipe::Recipe,
    is_cloned: bool,
) -> Result<StageRecipe, GatewayError> {
    let order = recipe
        .topological_order()
        .map_err(|e| GatewayError::Internal(format!("stage {stage_slug} recipe: {e}")))?;
    let steps = order
        .into_iter()
        .filter_map(|id| recipe.step(id))
        .map(|step| RecipeStep {
            id: step.id.to_string(),
            step_key: step.step_key.clone(),
            name: step.step_name.clone(),
            job_type: step.job_type.as_str().to_string(),
            job_kind: convert::job_kind(step.job_type.as_str()),
            granularity_strategy: step.granularity.as_str().to_string(),
            output_type: step.output_type.clone(),
            skipped: step.is_skipped,
            after: recipe
                .predecessors(step.id)
                .filter_map(|p| recipe.step(p))
                .map(|p| p.step_key.clone())
                .collect(),
        })
        .collect();
    Ok(StageRecipe {
        stage_slug: stage_slug.to_string(),
        is_cloned,
        steps,
    })
}
