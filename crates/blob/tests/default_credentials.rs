//! With no static keys configured, S3 calls sign with the AWS SDK's default
//! credential chain — here its first link, the AWS_* environment variables;
//! in a cluster the web identity token IRSA mounts, or the instance role.
//! Alone in its test binary: it sets process-wide environment variables.

use dialectic_blob::{BlobSettings, BlobStore};

fn env(name: &str) -> String {
    std::env::var(name)
        .unwrap_or_else(|_| panic!("{name} is set (eval \"$(deploy/stack.sh env)\")"))
}

fn keyless(bucket: &str) -> BlobStore {
    BlobStore::new(&BlobSettings {
        endpoint: env("DIALECTIC_S3__ENDPOINT"),
        bucket: bucket.to_string(),
        region: env("DIALECTIC_S3__REGION"),
        access_key: String::new(),
        secret_key: String::new(),
        force_path_style: true,
    })
}

fn set_aws_keys(access: &str, secret: &str) {
    // SAFETY: the only test in this binary, and no other thread reads the environment yet.
    unsafe {
        std::env::set_var("AWS_ACCESS_KEY_ID", access);
        std::env::set_var("AWS_SECRET_ACCESS_KEY", secret);
    }
}

#[tokio::test]
async fn without_static_keys_the_default_chain_signs_requests() {
    set_aws_keys("not-the-key", "not-the-secret");
    let bucket = env("DIALECTIC_S3__BUCKET");
    let key = format!("chain-{}/probe.txt", uuid::Uuid::new_v4().simple());
    let wrong = keyless(&bucket);
    assert!(
        wrong.check().await.is_err(),
        "the server refuses a key it does not know, so the chain's key is what signs"
    );

    set_aws_keys(
        &env("DIALECTIC_S3__ACCESS_KEY"),
        &env("DIALECTIC_S3__SECRET_KEY"),
    );
    let blob = keyless(&bucket);
    blob.check()
        .await
        .expect("the bucket answers with the environment's keys");
    blob.put(&key, b"signed by the chain".to_vec(), "text/plain")
        .await
        .expect("put");
    assert_eq!(
        blob.get(&key).await.expect("get"),
        b"signed by the chain".to_vec()
    );
    blob.delete(&key).await.expect("delete");
}
