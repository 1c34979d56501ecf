//! Rotating a service's key as deploy/OPERATIONS.md ("Service identity")
//! describes, while internal calls flow, refuses none of them: the gateway's
//! key rotates, real wallet services (the verifiers) restart between the
//! steps the way a rolling update replaces pods, and the gateway's calls are
//! signed by `ServiceKey::from_settings` over the key directory as a
//! gateway process reads it when it starts.

use dialectic_core::service_auth::ServiceName;
use dialectic_e2e::TestEnv;
use dialectic_proto::v1::wallet::GetBalanceRequest;
use dialectic_proto::v1::wallet::wallet_service_client::WalletServiceClient;
use dialectic_runtime::service_auth::{ServiceKey, Signing, generate_keys, key_file};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::Code;
use tonic::transport::Channel;

/// What is running at one moment: the wallet replicas that take calls, and
/// the gateway replicas (each with the key it read when it started) that make them.
#[derive(Default)]
struct Fleet {
    wallets: Vec<Channel>,
    gateways: Vec<ServiceKey>,
}

/// Calls made so far, by status code.
type Tally = Arc<Mutex<BTreeMap<String, usize>>>;

fn total(tally: &Tally) -> usize {
    tally.lock().expect("tally").values().sum()
}

/// Waits until `more` calls have been made against the fleet as it is now.
async fn calls_flow(tally: &Tally, more: usize) {
    let target = total(tally) + more;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while total(tally) < target {
        assert!(
            tokio::time::Instant::now() < deadline,
            "calls stopped flowing: {:?}",
            tally.lock().expect("tally")
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The gateway's key as a gateway started now reads it from `dir`.
fn gateway_key(env: &TestEnv, dir: &Path) -> ServiceKey {
    let mut settings = env.settings.clone();
    settings.internal.key_dir = dir.display().to_string();
    ServiceKey::from_settings(&settings, ServiceName::Gateway).expect("the gateway's key")
}

/// A wallet replica started now from `dir`, replacing the running one the
/// way a rolling update does: the new one serves and takes calls before the
/// old one is taken out and stopped.
async fn roll_wallet(env: &mut TestEnv, fleet: &Mutex<Fleet>, dir: &Path) {
    let old = env.running.remove("wallet");
    let mut settings = env.settings.clone();
    settings.internal.key_dir = dir.display().to_string();
    let addr = env.start_with("wallet", settings).await;
    env.wait_serving("wallet").await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("wallet url")
        .connect_lazy();
    fleet.lock().expect("fleet").wallets.push(channel);
    tokio::time::sleep(Duration::from_millis(300)).await;
    {
        let mut fleet = fleet.lock().expect("fleet");
        let keep = fleet.wallets.len() - 1;
        fleet.wallets.drain(..keep);
    }
    if let Some((shutdown, running)) = old {
        shutdown.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(20), running.done).await;
    }
}

fn append(from: &Path, to: &Path) {
    let mut text = std::fs::read_to_string(to).expect("current .pub");
    text.push_str(&std::fs::read_to_string(from).expect("new .pub"));
    std::fs::write(to, text).expect("write .pub");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_key_rotates_without_a_refused_call() {
    let mut env = TestEnv::new().await;
    let base = std::env::temp_dir().join(format!("dialectic-rotation-{}", uuid::Uuid::new_v4()));
    let (cur, new) = (base.join("cur"), base.join("new"));
    generate_keys(&cur).expect("current keys");
    generate_keys(&new).expect("next keys");
    let file = |dir: &Path, kind| key_file(dir, ServiceName::Gateway, kind);
    env.settings.internal.token_secret = "not used with key_dir".into();

    let fleet = Arc::new(Mutex::new(Fleet::default()));
    roll_wallet(&mut env, &fleet, &cur).await;
    let old_key = gateway_key(&env, &cur);
    fleet.lock().expect("fleet").gateways = vec![old_key.clone()];

    let tally = Tally::default();
    let stop = Arc::new(AtomicBool::new(false));
    let flow = tokio::spawn({
        let (fleet, tally, stop) = (fleet.clone(), tally.clone(), stop.clone());
        async move {
            let mut turn = 0usize;
            while !stop.load(Ordering::Relaxed) {
                turn += 1;
                let (channel, key) = {
                    let fleet = fleet.lock().expect("fleet");
                    (
                        fleet.wallets[turn % fleet.wallets.len()].clone(),
                        fleet.gateways[turn % fleet.gateways.len()].clone(),
                    )
                };
                let mut wallet = WalletServiceClient::new(Signing::new(channel, key));
                let request = GetBalanceRequest {
                    wallet_id: uuid::Uuid::now_v7().to_string(),
                    ..Default::default()
                };
                // No such wallet: NOT_FOUND is an authenticated call.
                let code = match wallet.get_balance(request).await {
                    Ok(_) => Code::Ok,
                    Err(status) => status.code(),
                };
                *tally
                    .lock()
                    .expect("tally")
                    .entry(format!("{code:?}"))
                    .or_default() += 1;
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    });
    calls_flow(&tally, 50).await;

    // 1. Every verifier accepts the old and the new key.
    append(&file(&new, "pub"), &file(&cur, "pub"));
    roll_wallet(&mut env, &fleet, &cur).await;
    calls_flow(&tally, 50).await;

    // 2. The gateway signs with the new key: while it rolls, old and new
    // replicas call side by side.
    std::fs::copy(file(&new, "key"), file(&cur, "key")).expect("new .key");
    let new_key = gateway_key(&env, &cur);
    fleet.lock().expect("fleet").gateways = vec![old_key.clone(), new_key.clone()];
    calls_flow(&tally, 100).await;
    fleet.lock().expect("fleet").gateways = vec![new_key];
    calls_flow(&tally, 50).await;

    // 3. The old key is accepted no more.
    std::fs::copy(file(&new, "pub"), file(&cur, "pub")).expect("new .pub");
    roll_wallet(&mut env, &fleet, &cur).await;
    calls_flow(&tally, 50).await;
    stop.store(true, Ordering::Relaxed);
    flow.await.expect("the calls");

    let tally = tally.lock().expect("tally").clone();
    assert_eq!(
        tally.keys().collect::<Vec<_>>(),
        ["NotFound"],
        "every call authenticated, none refused: {tally:?}"
    );
    assert!(tally["NotFound"] >= 300, "{tally:?}");

    // The rotation did retire the old key: a call it signs is refused now.
    let channel = fleet.lock().expect("fleet").wallets[0].clone();
    let mut wallet = WalletServiceClient::new(Signing::new(channel, old_key));
    let request = GetBalanceRequest {
        wallet_id: uuid::Uuid::now_v7().to_string(),
        ..Default::default()
    };
    let refused = wallet.get_balance(request).await.expect_err("the old key");
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");

    env.teardown().await;
    let _ = std::fs::remove_dir_all(&base);
}
