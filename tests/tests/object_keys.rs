//! Every object a two-model session writes can be listed and fetched by a
//! stock S3 client. boto3 and the AWS CLI list with `encoding-type=url` and
//! decode the listed keys as form data, so a `+` in a key comes back as a
//! space and the GET of the listed key is NoSuchKey. This test lists the same
//! way, decodes the same way and fetches every key it was given.

use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_s3::types::EncodingType;
use dialectic_e2e::TestEnv;

const PROMPT: &str = "# Object keys\n\nA repair café that lends tools and teaches fixing.";

/// What a stock client builds from its own settings: nothing of the service's code.
fn stock_client(env: &TestEnv) -> aws_sdk_s3::Client {
    let s3 = &env.settings.s3;
    let config = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .credentials_provider(Credentials::new(
            &s3.access_key,
            &s3.secret_key,
            None,
            None,
            "test",
        ))
        .region(Region::new(s3.region.clone()))
        .endpoint_url(&s3.endpoint)
        .force_path_style(true)
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

/// botocore's `unquote_str`: form decoding, `+` is a space.
fn decode_like_boto3(listed: &str) -> String {
    let spaced = listed.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced)
        .decode_utf8_lossy()
        .into_owned()
}

/// Keys made only of characters no S3 server or client rewrites.
fn is_plain(key: &str) -> bool {
    key.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '-' | '.'))
}

async fn list_like_boto3(client: &aws_sdk_s3::Client, bucket: &str, prefix: &str) -> Vec<String> {
    let mut keys = Vec::new();
    let mut token = None;
    loop {
        let page = client
            .list_objects_v2()
            .bucket(bucket)
            .prefix(prefix)
            .encoding_type(EncodingType::Url)
            .set_continuation_token(token)
            .send()
            .await
            .expect("list objects");
        keys.extend(
            page.contents()
                .iter()
                .filter_map(|o| o.key())
                .map(decode_like_boto3),
        );
        match page.next_continuation_token() {
            Some(next) if page.is_truncated() == Some(true) => token = Some(next.to_string()),
            _ => return keys,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stock_client_lists_and_fetches_every_object_of_a_two_model_session() {
    let mut env = TestEnv::new().await;
    env.start_all().await;
    let (project_id, session_id) = env
        .new_session(PROMPT, &["simulated", "simulated-b"], true)
        .await;
    env.wait_for_session(&session_id, "iteration_complete_pending_review", true)
        .await;

    let client = stock_client(&env);
    let bucket = env.blob.bucket().to_string();
    let keys = list_like_boto3(&client, &bucket, &format!("projects/{project_id}/")).await;
    let pairwise = keys.iter().filter(|k| k.contains("_from_")).count();
    assert_eq!(
        pairwise, 8,
        "two models: 4 (lineage, critic) pairs × 2 authors of pairwise raw files: {keys:#?}"
    );
    let mut missing = Vec::new();
    for key in &keys {
        if let Err(e) = client.get_object().bucket(&bucket).key(key).send().await {
            missing.push(format!("{key}: {e}"));
        }
    }
    assert!(
        missing.is_empty(),
        "{} of {} listed keys cannot be fetched: {missing:#?}",
        missing.len(),
        keys.len()
    );
    let unusual: Vec<&String> = keys.iter().filter(|k| !is_plain(k)).collect();
    assert!(unusual.is_empty(), "keys a client rewrites: {unusual:#?}");
    env.teardown().await;
}
