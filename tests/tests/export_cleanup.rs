//! Exports clean up after themselves (issue 57, item 6): a `GetExportUrl`
//! whose caller goes away mid-upload leaves no multipart upload in the
//! bucket (the upload aborts itself as the cancelled handler drops it);
//! a user runs at most `gateway.max_exports_per_user` exports at once, and a
//! cancelled one gives its slot back; deleting a project aborts the uploads
//! its exports left behind. The bucket is read with a stock S3 client.

use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use dialectic_e2e::{GatewayClient, TestEnv};
use dialectic_proto::v1::{CreateProjectRequest, DeleteProjectRequest, ExportProjectRequest};
use dialectic_runtime::error_status::StatusExt;
use futures::StreamExt;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;
use tonic::Code;

const PROMPT: &str = "# Tool library\n\nA lending library for power tools, run by neighbours.";

/// Objects of the big project: 8 × 8 MiB, so its export takes several
/// 8 MiB parts and is still uploading well after its first part is stored.
const BIG_OBJECTS: usize = 8;
const BIG_OBJECT_BYTES: usize = 8 * 1024 * 1024;

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

/// Multipart uploads in progress under `prefix`: (key, upload id).
async fn uploads(s3: &aws_sdk_s3::Client, bucket: &str, prefix: &str) -> Vec<(String, String)> {
    let out = s3
        .list_multipart_uploads()
        .bucket(bucket)
        .prefix(prefix)
        .send()
        .await
        .expect("ListMultipartUploads");
    assert_ne!(out.is_truncated(), Some(true), "one page holds them all");
    out.uploads()
        .iter()
        .map(|u| {
            (
                u.key().expect("key").to_string(),
                u.upload_id().expect("upload id").to_string(),
            )
        })
        .collect()
}

/// Parts stored so far of one upload (0 once it is gone).
async fn parts(s3: &aws_sdk_s3::Client, bucket: &str, key: &str, upload_id: &str) -> usize {
    s3.list_parts()
        .bucket(bucket)
        .key(key)
        .upload_id(upload_id)
        .send()
        .await
        .map(|out| out.parts().len())
        .unwrap_or(0)
}

/// A project of `owner`'s with [`BIG_OBJECTS`] objects beside its prompt.
async fn big_project(env: &TestEnv, owner: &mut GatewayClient) -> String {
    let project = owner
        .create_project(CreateProjectRequest {
            name: "Big export".into(),
            initial_user_prompt: PROMPT.into(),
            ..Default::default()
        })
        .await
        .expect("project")
        .into_inner();
    for i in 0..BIG_OBJECTS {
        let body: Vec<u8> = (0..BIG_OBJECT_BYTES)
            .map(|b| (b.wrapping_mul(31).wrapping_add(i) % 251) as u8)
            .collect();
        env.blob
            .put(
                &format!("projects/{}/session_0000abcd/blob_{i}.bin", project.id),
                body,
                "application/octet-stream",
            )
            .await
            .expect("put");
    }
    project.id
}

fn get_export_url(
    client: &GatewayClient,
    project_id: &str,
) -> JoinHandle<Result<tonic::Response<dialectic_proto::v1::ExportUrl>, tonic::Status>> {
    let mut client = client.clone();
    let request = ExportProjectRequest {
        project_id: project_id.into(),
    };
    tokio::spawn(async move { client.get_export_url(request).await })
}

/// Waits until an upload under `prefix` not in `seen` has stored a part
/// (the export is mid-upload), and returns its id. Panics if `call` ends
/// first: then the export was over before it could be cancelled.
async fn wait_mid_upload<T: std::fmt::Debug>(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    prefix: &str,
    seen: &BTreeSet<String>,
    call: &mut JoinHandle<T>,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        for (key, id) in uploads(s3, bucket, prefix).await {
            if !seen.contains(&id) && parts(s3, bucket, &key, &id).await > 0 && !call.is_finished()
            {
                return id;
            }
        }
        if call.is_finished() {
            let ended = call.await;
            panic!("the export ended before it could be cancelled mid-upload: {ended:?}");
        }
        assert!(Instant::now() < deadline, "no upload began within 60 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until no upload is in progress under `prefix`; the ones left at
/// the deadline fail the test.
async fn wait_no_uploads(s3: &aws_sdk_s3::Client, bucket: &str, prefix: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = uploads(s3, bucket, prefix).await;
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} uploads still in progress 30 s after their exports were cancelled: {left:?}",
            left.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_cancelled_export_urls_leave_no_multipart_upload() {
    let mut env = TestEnv::new().await;
    // Uncapped: a call made right after the previous one's cancellation may
    // reach the gateway before that one's handler is dropped (the cap's own
    // test waits for the slot to come back).
    let mut settings = env.settings.clone();
    settings.gateway.max_exports_per_user = 0;
    env.start_with("gateway", settings).await;
    env.wait_serving("gateway").await;
    let mut client = env.gateway().await;
    let project_id = big_project(&env, &mut client).await;
    let s3 = stock_client(&env);
    let bucket = env.settings.s3.bucket.clone();
    let prefix = format!("exports/{project_id}/");

    // One at a time, each dropped by its client once its upload has stored
    // a part: tonic then drops the handler, upload and all.
    let mut seen = BTreeSet::new();
    for _ in 0..20 {
        let mut call = get_export_url(&client, &project_id);
        let id = wait_mid_upload(&s3, &bucket, &prefix, &seen, &mut call).await;
        call.abort();
        let _ = call.await;
        seen.insert(id);
    }
    assert_eq!(seen.len(), 20, "twenty uploads began");
    wait_no_uploads(&s3, &bucket, &prefix).await;
    assert!(
        env.blob.list(&prefix).await.expect("list").is_empty(),
        "no cancelled export completed"
    );

    // An export left to finish still completes, and leaves no upload either.
    let url = get_export_url(&client, &project_id)
        .await
        .expect("joined")
        .expect("an export that is not cancelled")
        .into_inner();
    assert!(url.size_bytes > (BIG_OBJECTS * BIG_OBJECT_BYTES) as u64);
    assert!(uploads(&s3, &bucket, &prefix).await.is_empty());
    env.teardown().await;
}

/// Streams the project's whole archive.
async fn export_whole(client: &mut GatewayClient, project_id: &str) -> Result<(), tonic::Status> {
    let mut stream = client
        .export_project(ExportProjectRequest {
            project_id: project_id.into(),
        })
        .await?
        .into_inner();
    while let Some(chunk) = stream.next().await {
        chunk?;
    }
    Ok(())
}

/// The refusal's (code, reason, limit, current).
fn refusal(status: &tonic::Status) -> (Code, String, String, String) {
    let info = status
        .get_details_error_info()
        .unwrap_or_else(|| panic!("ErrorInfo in {status:?}"));
    let meta = |key: &str| info.metadata.get(key).cloned().unwrap_or_default();
    (status.code(), info.reason, meta("limit"), meta("current"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_user_runs_at_most_the_cap_of_exports_and_a_cancelled_one_frees_its_slot() {
    let mut env = TestEnv::new().await;
    let mut settings = env.settings.clone();
    settings.gateway.max_exports_per_user = 2;
    env.start_with("gateway", settings).await;
    env.wait_serving("gateway").await;
    let mut client = env.gateway().await;
    let project_id = big_project(&env, &mut client).await;
    let s3 = stock_client(&env);
    let bucket = env.settings.s3.bucket.clone();
    let prefix = format!("exports/{project_id}/");

    // Two exports in progress: both uploading.
    let mut seen = BTreeSet::new();
    let mut first = get_export_url(&client, &project_id);
    seen.insert(wait_mid_upload(&s3, &bucket, &prefix, &seen, &mut first).await);
    let mut second = get_export_url(&client, &project_id);
    seen.insert(wait_mid_upload(&s3, &bucket, &prefix, &seen, &mut second).await);

    // A third, as a URL or a stream, is refused with the limit named.
    let expected = (
        Code::ResourceExhausted,
        "EXPORT_LIMIT_REACHED".to_string(),
        "2".to_string(),
        "2".to_string(),
    );
    let refused = client
        .get_export_url(ExportProjectRequest {
            project_id: project_id.clone(),
        })
        .await
        .expect_err("a third export URL");
    assert_eq!(refusal(&refused), expected, "{refused:?}");
    assert!(
        refused.message().contains("gateway.max_exports_per_user"),
        "{refused:?}"
    );
    let refused = client
        .export_project(ExportProjectRequest {
            project_id: project_id.clone(),
        })
        .await
        .expect_err("a third export, streamed");
    assert_eq!(refusal(&refused), expected, "{refused:?}");

    // Another user's exports are their own.
    let (_, other_key) = env.new_user("other").await;
    let mut other = env.gateway_with_key(&other_key).await;
    let theirs = other
        .create_project(CreateProjectRequest {
            name: "Small".into(),
            initial_user_prompt: PROMPT.into(),
            ..Default::default()
        })
        .await
        .expect("their project")
        .into_inner();
    export_whole(&mut other, &theirs.id)
        .await
        .expect("another user exports");

    // The first cancelled: its slot comes back as soon as the gateway sees
    // the client go, and the next export (of a small project) is admitted.
    let small = client
        .create_project(CreateProjectRequest {
            name: "Small".into(),
            initial_user_prompt: PROMPT.into(),
            ..Default::default()
        })
        .await
        .expect("a small project")
        .into_inner();
    first.abort();
    let _ = first.await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match export_whole(&mut client, &small.id).await {
            Ok(()) => break,
            Err(refused) => assert_eq!(refusal(&refused), expected, "{refused:?}"),
        }
        assert!(
            Instant::now() < deadline,
            "the cancelled export's slot never came back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    second.abort();
    let _ = second.await;
    wait_no_uploads(&s3, &bucket, &prefix).await;
    env.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deleting_a_project_aborts_the_uploads_its_exports_left() {
    let mut env = TestEnv::new().await;
    env.start(&["planner", "gateway"]).await;
    env.wait_serving("gateway").await;
    let mut client = env.gateway().await;
    let project = client
        .create_project(CreateProjectRequest {
            name: "Left behind".into(),
            initial_user_prompt: PROMPT.into(),
            ..Default::default()
        })
        .await
        .expect("project")
        .into_inner();
    let s3 = stock_client(&env);
    let bucket = env.settings.s3.bucket.clone();
    let prefix = format!("exports/{}/", project.id);

    // What a gateway that died mid-export leaves: uploads nobody aborts
    // (forgotten, so their handles never drop). Another project's stays.
    let elsewhere = "exports/00000000-0000-0000-0000-00000000beef/kept.zip";
    for key in [
        format!("{prefix}{}.zip", project.slug),
        elsewhere.to_string(),
    ] {
        let mut upload = env
            .blob
            .start_upload(&key, "application/zip")
            .await
            .expect("upload");
        upload.put_part(vec![7; 1024]).await.expect("part");
        std::mem::forget(upload);
    }
    assert_eq!(uploads(&s3, &bucket, &prefix).await.len(), 1);

    client
        .delete_project(DeleteProjectRequest {
            project_id: project.id.clone(),
            client_request_id: String::new(),
        })
        .await
        .expect("delete");
    assert!(
        uploads(&s3, &bucket, &prefix).await.is_empty(),
        "the deleted project's upload is aborted"
    );
    assert_eq!(
        uploads(&s3, &bucket, "exports/").await.len(),
        1,
        "another project's upload stays"
    );
    env.teardown().await;
}
