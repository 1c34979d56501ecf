//! Retried mutations (issue 61, item 4): a mutating call that names a
//! `client_request_id` acts once. The first call claims the id (Postgres,
//! so every replica sees it), acts, and keeps its encoded answer; a retry
//! with the same id and request within the window gets that answer back, the
//! same id with another request is ALREADY_EXISTS, and a retry while the
//! first still runs is UNAVAILABLE with a short RetryInfo. A failed call
//! forgets its claim, so its retry acts again. Without an id nothing changes.
//!
//! The answer is kept after the mutation commits, not in its transaction (the
//! planner commits it): a gateway that dies between the two leaves a claim
//! with no answer, which a retry takes over once the in-flight window has
//! passed and then meets the state the first call left, as before this.

use crate::error::GatewayError;
use crate::service::Gateway;
use dialectic_config::GatewayConfig;
use dialectic_core::error::Reason;
use dialectic_core::ids::UserId;
use dialectic_proto::v1::{
    CancelSessionRequest, CompleteSessionRequest, DeleteProjectRequest, EditStageRecipeRequest,
    InstallPipelineRequest, OverrideClaimRequest, PauseSessionRequest, ResumeSessionRequest,
    RetryStageRequest, RevisitStageRequest, SaveDocumentEditRequest, SubmitStageResponsesRequest,
};
use dialectic_store::idempotency::{self, CallKey, Claim, Windows};
use sha2::{Digest, Sha256};

/// As long as any one call may run (the longest is a document upload's
/// conversion); a claim older than this with no answer was abandoned.
const IN_FLIGHT_SECS: i64 = 120;
/// As AddProjectDocument and RegenerateDocument take theirs.
const MAX_REQUEST_ID: usize = 128;

/// A mutating request that may name its call.
pub(crate) trait Once: prost::Message {
    fn client_request_id(&self) -> &str;
}

macro_rules! once {
    ($($request:ty),+ $(,)?) => {$(
        impl Once for $request {
            fn client_request_id(&self) -> &str {
                &self.client_request_id
            }
        }
    )+};
}

once!(
    SubmitStageResponsesRequest,
    RevisitStageRequest,
    RetryStageRequest,
    SaveDocumentEditRequest,
    InstallPipelineRequest,
    OverrideClaimRequest,
    EditStageRecipeRequest,
    PauseSessionRequest,
    ResumeSessionRequest,
    CancelSessionRequest,
    CompleteSessionRequest,
    DeleteProjectRequest,
);

pub(crate) fn windows(config: &GatewayConfig) -> Windows {
    Windows {
        keep_secs: i64::try_from(config.idempotency_window_secs).unwrap_or(i64::MAX),
        in_flight_secs: IN_FLIGHT_SECS,
    }
}

impl Gateway {
    /// `work(req)` at most once per `client_request_id` (see the module).
    pub(crate) async fn once<Req, Resp, Work, Fut>(
        &self,
        user: UserId,
        rpc: &'static str,
        req: Req,
        work: Work,
    ) -> Result<Resp, GatewayError>
    where
        Req: Once,
        Resp: prost::Message + Default,
        Work: FnOnce(Req) -> Fut,
        Fut: Future<Output = Result<Resp, GatewayError>>,
    {
        let request_id = req.client_request_id().trim().to_string();
        if request_id.is_empty() {
            return work(req).await;
        }
        if request_id.len() > MAX_REQUEST_ID {
            return Err(GatewayError::bad(
                "client_request_id",
                format!("client_request_id may hold at most {MAX_REQUEST_ID} bytes"),
            ));
        }
        let key = CallKey {
            user,
            rpc,
            request_id: &request_id,
        };
        let fingerprint = Sha256::digest(req.encode_to_vec()).to_vec();
        let pool = self.store.pool();
        match idempotency::claim(pool, key, &fingerprint, self.idempotency).await? {
            Claim::Fresh => {}
            Claim::Answered {
                fingerprint: first,
                answer,
            } if first == fingerprint => {
                return Resp::decode(answer.as_slice()).map_err(|e| {
                    GatewayError::Internal(format!("the kept answer does not decode: {e}"))
                });
            }
            Claim::Answered { .. } => return Err(reused(&request_id)),
            Claim::InFlight { fingerprint: first } if first != fingerprint => {
                return Err(reused(&request_id));
            }
            Claim::InFlight { .. } => {
                return Err(GatewayError::unavailable(
                    Reason::ConcurrentUpdate,
                    format!(
                        "a call with client_request_id {request_id} is still running; retry \
                         to get its answer"
                    ),
                ));
            }
            Claim::Released => {
                return Err(GatewayError::unavailable(
                    Reason::ConcurrentUpdate,
                    format!(
                        "the first call with client_request_id {request_id} failed just now; \
                         retry to run it again"
                    ),
                ));
            }
        }
        let outcome = work(req).await;
        self.settle(key, &outcome).await;
        outcome
    }

    /// Keeps the answer, or forgets the claim of a failed call. Neither may
    /// turn the call's outcome into an error: the work is done (or failed)
    /// whatever this write does, so a failure here is logged, and leaves a
    /// claim the in-flight window expires.
    async fn settle<Resp: prost::Message>(
        &self,
        key: CallKey<'_>,
        outcome: &Result<Resp, GatewayError>,
    ) {
        let pool = self.store.pool();
        let written = match outcome {
            Ok(answer) => idempotency::answer(pool, key, &answer.encode_to_vec()).await,
            Err(_) => idempotency::release(pool, key).await,
        };
        if let Err(error) = written {
            tracing::warn!(%error, rpc = key.rpc, "could not settle a client_request_id");
        }
    }
}

fn reused(request_id: &str) -> GatewayError {
    GatewayError::Conflict {
        reason: Reason::IdempotencyKeyReused,
        message: format!(
            "client_request_id {request_id} was used for another request; use a new id"
        ),
    }
}
