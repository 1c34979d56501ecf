//! Internal tokens are bound to their call and money-moving ones are good
//! once (issue 57, item 3): a relay between the real gateway and the real
//! wallet records each `Credit` hop as it goes by (its headers, token and
//! acting user included, and its body), and whoever holds such a recording
//! gets nothing from it. Sent again as it is, the wallet refuses it (its
//! nonce is spent); sent with another wallet or amount in the body, the
//! wallet refuses it (the body's digest is signed), even when the recorded
//! call never reached the wallet and its nonce is unspent.

use dialectic_core::service_auth::HEADER;
use dialectic_e2e::TestEnv;
use dialectic_proto::v1::CreditWalletRequest;
use dialectic_proto::v1::wallet::CreditRequest;
use http_body_util::BodyExt;
use prost::Message;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tonic::Code;
use tonic::codegen::http;
use tonic::codegen::{Bytes, Service};
use tonic::transport::Channel;

const CREDIT: &str = "/dialectic.v1.wallet.WalletService/Credit";

/// One request as it crossed the relay.
#[derive(Debug, Clone)]
struct Recorded {
    headers: http::HeaderMap,
    body: Bytes,
}

/// A gRPC relay posing as the wallet: forwards every call to the real one,
/// recording each `Credit`; with `swallow` set, it keeps the next `Credit`
/// to itself (the gateway gets UNAVAILABLE), so that token is never used.
#[derive(Clone)]
struct Relay {
    upstream: Channel,
    credits: Arc<Mutex<Vec<Recorded>>>,
    swallow: Arc<AtomicBool>,
}

impl tonic::server::NamedService for Relay {
    const NAME: &'static str = "dialectic.v1.wallet.WalletService";
}

type Answer = http::Response<tonic::body::Body>;

impl Service<http::Request<tonic::body::Body>> for Relay {
    type Response = Answer;
    type Error = Infallible;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Answer, Infallible>> + Send + 'static>,
    >;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let relay = self.clone();
        Box::pin(async move { Ok(relay.pass(request).await) })
    }
}

impl Relay {
    async fn start(wallet: SocketAddr) -> (Self, SocketAddr) {
        let relay = Self {
            upstream: channel(wallet),
            credits: Arc::default(),
            swallow: Arc::default(),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("relay port");
        let addr = listener.local_addr().expect("relay address");
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(relay.clone())
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        (relay, addr)
    }

    async fn pass(&self, request: http::Request<tonic::body::Body>) -> Answer {
        let (parts, body) = request.into_parts();
        let body = match body.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(status) => return status.into_http(),
        };
        if parts.uri.path() == CREDIT {
            self.credits
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Recorded {
                    headers: parts.headers.clone(),
                    body: body.clone(),
                });
            if self.swallow.swap(false, Ordering::SeqCst) {
                return tonic::Status::unavailable("kept by the relay").into_http();
            }
        }
        let request = http::Request::from_parts(parts, full(body));
        send(self.upstream.clone(), request)
            .await
            .unwrap_or_else(|status| status.into_http())
    }

    fn credit(&self, index: usize) -> Recorded {
        let credits = self.credits.lock().unwrap_or_else(PoisonError::into_inner);
        credits
            .get(index)
            .cloned()
            .unwrap_or_else(|| panic!("credit {index} crossed the relay: {}", credits.len()))
    }
}

fn channel(addr: SocketAddr) -> Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("address")
        .connect_lazy()
}

fn full(body: Bytes) -> tonic::body::Body {
    tonic::body::Body::new(http_body_util::Full::new(body))
}

async fn send(
    mut channel: Channel,
    request: http::Request<tonic::body::Body>,
) -> Result<Answer, tonic::Status> {
    std::future::poll_fn(|cx| channel.poll_ready(cx))
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    channel
        .call(request)
        .await
        .map_err(|e| tonic::Status::unavailable(format!("{e:?}")))
}

/// Sends `headers` and `body` to the wallet at `wallet` as a `Credit`, byte
/// for byte, and reads its gRPC status.
async fn replay(wallet: SocketAddr, headers: &http::HeaderMap, body: Bytes) -> tonic::Status {
    let mut request = http::Request::builder()
        .method("POST")
        .uri(format!("http://{wallet}{CREDIT}"))
        .body(full(body))
        .expect("request");
    *request.headers_mut() = headers.clone();
    // The client states the length of the body it sends (an altered one
    // differs); the recorded header beside it is a protocol error.
    request.headers_mut().remove("content-length");
    let response = send(channel(wallet), request)
        .await
        .expect("the wallet answers");
    // A refusal comes in the headers (trailers-only); an answer in the trailers.
    if let Some(status) = tonic::Status::from_header_map(response.headers()) {
        return status;
    }
    let collected = response.into_body().collect().await.expect("the answer");
    let trailers = collected.trailers().cloned().unwrap_or_default();
    tonic::Status::from_header_map(&trailers).expect("a grpc-status")
}

fn refused(status: &tonic::Status, why: &str) {
    assert_eq!(status.code(), Code::Unauthenticated, "{why}: {status:?}");
    assert!(status.message().contains(why), "{why}: {status:?}");
}

/// `message` as a unary gRPC body: uncompressed, length-prefixed.
fn framed(message: &CreditRequest) -> Bytes {
    let encoded = message.encode_to_vec();
    let mut body = vec![0];
    body.extend_from_slice(&(encoded.len() as u32).to_be_bytes());
    body.extend_from_slice(&encoded);
    Bytes::from(body)
}

async fn wallet_of(env: &TestEnv, user: uuid::Uuid) -> uuid::Uuid {
    sqlx::query_scalar("SELECT id FROM token_wallets WHERE user_id = $1")
        .bind(user)
        .fetch_one(env.store.pool())
        .await
        .expect("the user's wallet")
}

async fn balance(env: &TestEnv, wallet: uuid::Uuid) -> i64 {
    sqlx::query_scalar("SELECT balance FROM token_wallets WHERE id = $1")
        .bind(wallet)
        .fetch_one(env.store.pool())
        .await
        .expect("balance")
}

const ANOTHER_CALL: &str = "signed for another call";
const USED: &str = "already used";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_recorded_credit_token_is_refused_replayed_and_for_another_wallet() {
    let mut env = TestEnv::new().await;
    env.start(&["wallet"]).await;
    env.wait_serving("wallet").await;
    let wallet = env.addr("wallet");
    // Renamed, so the gateway is not pointed past the relay at the wallet itself.
    let running = env.running.remove("wallet").expect("the wallet runs");
    env.running
        .insert("wallet behind the relay".into(), running);
    let (relay, relay_addr) = Relay::start(wallet).await;
    let mut settings = env.settings.clone();
    settings.gateway.wallet_url = format!("http://{relay_addr}");
    env.start_with("gateway", settings).await;
    env.wait_serving("gateway").await;

    let (alice, _) = env.new_user("alice").await;
    let (mallory, _) = env.new_user("mallory").await;
    let (alices, mallorys) = (wallet_of(&env, alice).await, wallet_of(&env, mallory).await);
    let credit = |amount: i64, key: &str| CreditWalletRequest {
        user_id: alice.to_string(),
        amount,
        idempotency_key: key.into(),
        reason: "invoice".into(),
    };
    let mut admin = env.gateway().await;
    admin
        .credit_wallet(credit(5_000, "inv-1"))
        .await
        .expect("the administrator's credit, through the relay");
    assert_eq!(balance(&env, alices).await, 5_000);
    let seen = relay.credit(0);
    assert!(seen.headers.contains_key(HEADER), "{:?}", seen.headers);
    let theft = framed(&CreditRequest {
        wallet_id: mallorys.to_string(),
        amount: 1_000_000,
        idempotency_key: "stolen".into(),
        reason: "invoice".into(),
    });

    // Replayed at all: the nonce is spent.
    refused(
        &replay(wallet, &seen.headers, seen.body.clone()).await,
        USED,
    );
    // For another wallet and amount: the body is not the one signed.
    refused(
        &replay(wallet, &seen.headers, theft.clone()).await,
        ANOTHER_CALL,
    );
    assert_eq!(balance(&env, alices).await, 5_000);
    assert_eq!(balance(&env, mallorys).await, 0);

    // A hop the relay keeps to itself: its token was never used.
    relay.swallow.store(true, Ordering::SeqCst);
    admin
        .credit_wallet(credit(7_000, "inv-2"))
        .await
        .expect_err("the relay kept the call");
    assert_eq!(
        balance(&env, alices).await,
        5_000,
        "the kept call never arrived"
    );
    let kept = relay.credit(1);
    // The digest alone refuses it for another wallet, or another amount.
    refused(&replay(wallet, &kept.headers, theft).await, ANOTHER_CALL);
    let inflated = framed(&CreditRequest {
        wallet_id: alices.to_string(),
        amount: 7_000_000,
        idempotency_key: "inv-2".into(),
        reason: "invoice".into(),
    });
    refused(&replay(wallet, &kept.headers, inflated).await, ANOTHER_CALL);
    let mut as_mallory = kept.headers.clone();
    as_mallory.insert(
        "x-dialectic-user",
        mallory.to_string().parse().expect("header"),
    );
    refused(
        &replay(wallet, &as_mallory, kept.body.clone()).await,
        ANOTHER_CALL,
    );
    assert_eq!(balance(&env, mallorys).await, 0);
    // As signed it is the administrator's own credit, late: taken once.
    let late = replay(wallet, &kept.headers, kept.body.clone()).await;
    assert_eq!(late.code(), Code::Ok, "{late:?}");
    assert_eq!(balance(&env, alices).await, 12_000);
    refused(
        &replay(wallet, &kept.headers, kept.body.clone()).await,
        USED,
    );
    assert_eq!(balance(&env, alices).await, 12_000);
    env.teardown().await;
}
