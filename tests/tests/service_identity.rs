//! Service identity as the services enforce it: a token names the service it
//! is for and no other accepts it, a path the authorization table does not
//! list is refused even with a valid token, and an executor answers
//! questions only for the gateway, only about the named user's own project.

use dialectic_core::service_auth::ServiceName;
use dialectic_e2e::{TestEnv, upload_documents};
use dialectic_proto::v1::CreateProjectRequest;
use dialectic_proto::v1::executor::AnswerRequest;
use dialectic_proto::v1::executor::executor_service_client::ExecutorServiceClient;
use dialectic_proto::v1::wallet::GetBalanceRequest;
use dialectic_proto::v1::wallet::wallet_service_client::WalletServiceClient;
use dialectic_runtime::error_status::StatusExt;
use dialectic_runtime::service_auth::{ServiceKey, Signing};
use tonic::Code;
use tonic::codegen::http::uri::PathAndQuery;

fn plain_channel(addr: std::net::SocketAddr) -> tonic::transport::Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("address")
        .connect_lazy()
}

/// A channel to `addr` whose every call carries a token minted as `caller`
/// for `audience` (bound to that call), whichever service it reaches.
fn signed_as(
    env: &TestEnv,
    addr: std::net::SocketAddr,
    caller: ServiceName,
    audience: ServiceName,
) -> Signing<tonic::transport::Channel> {
    let key = ServiceKey::from_settings(&env.settings, caller).expect("this env's keys");
    Signing::new(plain_channel(addr), key).aimed_at(audience)
}

fn reason(status: &tonic::Status) -> String {
    status
        .get_details_error_info()
        .map(|info| info.reason)
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_token_for_the_indexer_is_refused_by_the_wallet() {
    let mut env = TestEnv::new().await;
    env.start(&["wallet"]).await;
    env.wait_serving("wallet").await;
    let wallet = |audience| {
        WalletServiceClient::new(signed_as(
            &env,
            env.addr("wallet"),
            ServiceName::Gateway,
            audience,
        ))
    };
    let ask = || GetBalanceRequest {
        wallet_id: uuid::Uuid::now_v7().to_string(),
        ..Default::default()
    };

    let refused = wallet(ServiceName::Indexer)
        .get_balance(ask())
        .await
        .expect_err("another audience");
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    assert_eq!(reason(&refused), "SERVICE_TOKEN_REJECTED");

    // The same caller with a token for the wallet gets past identity to the ledger.
    let answered = wallet(ServiceName::Wallet)
        .get_balance(ask())
        .await
        .expect_err("no such wallet");
    assert_eq!(answered.code(), Code::NotFound, "{answered:?}");
    env.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unlisted_internal_method_is_refused_with_a_valid_token() {
    let mut env = TestEnv::new().await;
    env.start(&["wallet"]).await;
    env.wait_serving("wallet").await;
    let mut grpc = tonic::client::Grpc::new(signed_as(
        &env,
        env.addr("wallet"),
        ServiceName::Gateway,
        ServiceName::Wallet,
    ));
    grpc.ready().await.expect("connection ready");
    let refused = grpc
        .unary(
            tonic::Request::new(()),
            PathAndQuery::from_static("/dialectic.v1.wallet.WalletService/Mint"),
            tonic_prost::ProstCodec::<(), ()>::default(),
        )
        .await
        .expect_err("not in the table");
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    assert_eq!(reason(&refused), "METHOD_NOT_LISTED");
    env.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn only_the_gateway_asks_an_executor_and_only_about_the_users_project() {
    let mut env = TestEnv::new().await;
    env.start_all().await;
    let mut client = env.gateway().await;
    let project = client
        .create_project(CreateProjectRequest {
            name: "Lease".into(),
            initial_user_prompt: "The lease.".into(),
            ..Default::default()
        })
        .await
        .expect("project")
        .into_inner()
        .id;
    upload_documents(
        &mut client,
        &project,
        &[("base.md", "4.2 Rent is due on the first day of each month.")],
    )
    .await;
    let owner = env.settings.gateway.default_user_id.clone();
    let (stranger, _) = env.new_user("mallory").await;
    let ask = |user: &str| AnswerRequest {
        project_id: project.clone(),
        user_id: user.to_string(),
        text: "When is the rent due?".into(),
        query_id: uuid::Uuid::now_v7().to_string(),
        ..Default::default()
    };
    let executor = |caller| {
        ExecutorServiceClient::new(signed_as(
            &env,
            env.addr("executor"),
            caller,
            ServiceName::Executor,
        ))
    };

    for caller in ServiceName::ALL
        .into_iter()
        .filter(|s| *s != ServiceName::Gateway)
    {
        let refused = executor(caller)
            .answer(ask(&owner))
            .await
            .expect_err("not the gateway");
        assert_eq!(
            refused.code(),
            Code::PermissionDenied,
            "{caller:?}: {refused:?}"
        );
    }

    let refused = executor(ServiceName::Gateway)
        .answer(ask(&stranger.to_string()))
        .await
        .expect_err("another user's project");
    assert_eq!(refused.code(), Code::NotFound, "{refused:?}");

    let answer = executor(ServiceName::Gateway)
        .answer(ask(&owner))
        .await
        .expect("the owner's question");
    assert!(!answer.into_inner().answer.is_empty());
    env.teardown().await;
}
