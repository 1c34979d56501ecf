//! While a PDF or DOCX uploads, a person at a terminal sees how far its
//! conversion got ("Contract.pdf: converting, page 120 of 200"), read with
//! GetUploadProgress under the upload's own client_request_id. Scripts and
//! pipes see nothing extra.

use crate::gateway::Gateway;
use dialectic_proto::v1::{GetUploadProgressRequest, UploadProgress, UploadStage};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::future::Future;
use std::io::IsTerminal;
use std::time::Duration;
use tonic::Status;

/// How often the progress is read while the upload runs.
const TICK: Duration = Duration::from_millis(300);

/// Whether `file_name` is converted on upload (and so has pages to show).
pub fn is_converted(file_name: &str) -> bool {
    let lower = file_name.to_ascii_lowercase();
    lower.ends_with(".pdf") || lower.ends_with(".docx")
}

/// The line shown for `progress`.
pub fn line(progress: &UploadProgress) -> String {
    let name = &progress.file_name;
    match progress.stage() {
        UploadStage::Converting if progress.pages_total > 1 => format!(
            "{name}: converting, page {} of {}",
            progress.pages_done, progress.pages_total
        ),
        UploadStage::Converting => format!("{name}: converting"),
        UploadStage::Indexing => format!("{name}: indexing"),
        UploadStage::Stored => format!("{name}: stored"),
        UploadStage::Failed => format!("{name}: failed"),
        UploadStage::Unspecified => format!("{name}: uploading"),
    }
}

/// Runs `upload`, showing its progress on a terminal's stderr meanwhile.
pub async fn while_uploading<T>(
    gateway: &Gateway,
    project: &str,
    request_id: &str,
    upload: impl Future<Output = Result<T, Status>>,
) -> Result<T, Status> {
    if !std::io::stderr().is_terminal() {
        return upload.await;
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(Duration::from_millis(120));
    tokio::pin!(upload);
    let mut tick = tokio::time::interval(TICK);
    loop {
        tokio::select! {
            done = &mut upload => {
                bar.finish_and_clear();
                return done;
            }
            _ = tick.tick() => {
                if let Some(progress) = read(gateway, project, request_id).await {
                    bar.set_message(line(&progress));
                }
            }
        }
    }
}

/// The upload's progress; None until the gateway has noted some.
async fn read(gateway: &Gateway, project: &str, request_id: &str) -> Option<UploadProgress> {
    gateway
        .call(|mut c| {
            let request = gateway.request(GetUploadProgressRequest {
                project_id: project.to_string(),
                client_request_id: request_id.to_string(),
            });
            async move { c.get_upload_progress(request).await }
        })
        .await
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(stage: UploadStage, done: u32, total: u32) -> UploadProgress {
        UploadProgress {
            file_name: "Contract.pdf".into(),
            stage: stage.into(),
            pages_done: done,
            pages_total: total,
            failure: String::new(),
        }
    }

    #[test]
    fn lines_name_the_file_the_stage_and_the_pages() {
        assert_eq!(
            line(&at(UploadStage::Converting, 120, 200)),
            "Contract.pdf: converting, page 120 of 200"
        );
        assert_eq!(
            line(&at(UploadStage::Converting, 1, 1)),
            "Contract.pdf: converting"
        );
        assert_eq!(
            line(&at(UploadStage::Indexing, 200, 200)),
            "Contract.pdf: indexing"
        );
        assert!(is_converted("A.PDF") && is_converted("b.docx") && !is_converted("c.md"));
    }
}
