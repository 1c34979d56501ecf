//! Uploads converted to markdown here rather than in the gateway: a 200-page
//! PDF costs one of this service's conversion slots and one of its cores,
//! streams its progress as pages are read, and leaves the gateway's threads
//! to the calls of everyone else. Indexers scale on their own, so do
//! conversions.

use dialectic_convert::{ConvertError, Kind, Limits, to_markdown_with_progress};
use dialectic_core::error::{ErrorCode, ErrorContract, Reason};
use dialectic_proto::v1::indexer::convert_response::Event;
use dialectic_proto::v1::indexer::{ConvertDone, ConvertProgress, ConvertRequest, ConvertResponse};
use dialectic_runtime::error_status;
use std::sync::Arc;
use tokio::sync::{Semaphore, mpsc};
use tonic::Status;

/// Bytes of markdown per streamed part: far below any message limit, so a
/// 60 MB text needs no larger one.
const TEXT_PART_BYTES: usize = 256 * 1024;
/// Progress messages that may wait for a slow reader; more are dropped (the
/// next one says more), the text and the end never are.
const PROGRESS_BACKLOG: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum ConversionError {
    #[error("file {file_name} is refused: {reason}")]
    Refused {
        file_name: String,
        reason: ConvertError,
    },
    #[error("file {0} is refused: only .pdf and .docx are converted")]
    NotConvertible(String),
    #[error("converting {file_name} failed: {detail}")]
    Internal { file_name: String, detail: String },
}

impl ErrorContract for ConversionError {
    fn code(&self) -> ErrorCode {
        match self {
            ConversionError::Refused { .. } | ConversionError::NotConvertible(_) => {
                ErrorCode::InvalidArgument
            }
            ConversionError::Internal { .. } => ErrorCode::Internal,
        }
    }

    fn reason(&self) -> Reason {
        match self {
            ConversionError::Refused { .. } | ConversionError::NotConvertible(_) => {
                Reason::InvalidField
            }
            ConversionError::Internal { .. } => Reason::Internal,
        }
    }

    fn field(&self) -> Option<&str> {
        match self {
            ConversionError::Internal { .. } => None,
            _ => Some("file"),
        }
    }
}

impl From<ConversionError> for Status {
    fn from(e: ConversionError) -> Self {
        error_status::status(&e)
    }
}

/// Conversions of one indexer, at most `slots` at once: each holds a file,
/// its parse and a core, so a burst of uploads waits for a slot here.
#[derive(Clone)]
pub struct Converter {
    slots: Arc<Semaphore>,
    max_bytes: usize,
}

impl Converter {
    pub fn new(slots: usize, max_bytes: usize) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(slots.max(1))),
            max_bytes,
        }
    }

    /// Starts converting `req` and gives the stream of its messages: progress
    /// while pages are read, then the text in parts and the end, or the
    /// refusal.
    pub fn start(&self, req: ConvertRequest) -> mpsc::Receiver<Result<ConvertResponse, Status>> {
        let (tx, rx) = mpsc::channel(PROGRESS_BACKLOG);
        let converter = self.clone();
        tokio::spawn(async move {
            let file_name = req.file_name.clone();
            let outcome = converter.convert(req, tx.clone()).await;
            let finished = match outcome {
                Ok(converted) => send_text(&tx, converted).await,
                Err(e) => {
                    tracing::info!(file = %file_name, error = %e, "conversion refused");
                    tx.send(Err(e.into())).await.is_ok()
                }
            };
            if !finished {
                tracing::debug!(file = %file_name, "the caller left before the conversion's end");
            }
        });
        rx
    }

    async fn convert(
        &self,
        req: ConvertRequest,
        tx: mpsc::Sender<Result<ConvertResponse, Status>>,
    ) -> Result<dialectic_convert::Converted, ConversionError> {
        let file_name = req.file_name;
        let kind = Kind::from_file_name(&file_name)
            .ok_or_else(|| ConversionError::NotConvertible(file_name.clone()))?;
        let limits = Limits {
            max_bytes: self.max_bytes,
            max_pages: req.max_pages,
            max_expanded_bytes: usize::try_from(req.max_unpacked_bytes).unwrap_or(usize::MAX),
            ..Limits::default()
        };
        let internal = |detail: String| ConversionError::Internal {
            file_name: file_name.clone(),
            detail,
        };
        let _slot = self
            .slots
            .acquire()
            .await
            .map_err(|e| internal(e.to_string()))?;
        let content = req.content;
        let converted = tokio::task::spawn_blocking(move || {
            to_markdown_with_progress(&content, kind, &limits, &mut |done, total| {
                // A full backlog means a slow reader: it gets the next one.
                let _ = tx.try_send(Ok(progress(done, total)));
            })
        })
        .await
        .map_err(|e| internal(e.to_string()))?;
        converted.map_err(|reason| ConversionError::Refused {
            file_name: file_name.clone(),
            reason,
        })
    }
}

fn progress(pages_done: u32, pages_total: u32) -> ConvertResponse {
    ConvertResponse {
        event: Some(Event::Progress(ConvertProgress {
            pages_done,
            pages_total,
        })),
    }
}

/// Sends the text in parts, then the end; false when the caller left.
async fn send_text(
    tx: &mpsc::Sender<Result<ConvertResponse, Status>>,
    converted: dialectic_convert::Converted,
) -> bool {
    for part in text_parts(&converted.markdown, TEXT_PART_BYTES) {
        let text = ConvertResponse {
            event: Some(Event::Text(part.to_string())),
        };
        if tx.send(Ok(text)).await.is_err() {
            return false;
        }
    }
    let done = ConvertResponse {
        event: Some(Event::Done(ConvertDone {
            pages: converted.pages.unwrap_or(0),
        })),
    };
    tx.send(Ok(done)).await.is_ok()
}

/// `text` in parts of at most `max` bytes (more only for a single character
/// longer than that), cut on character boundaries.
fn text_parts(text: &str, max: usize) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut cut = rest.len().min(max);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        if cut == 0 {
            cut = rest.chars().next().map_or(rest.len(), char::len_utf8);
        }
        let (part, tail) = rest.split_at(cut);
        parts.push(part);
        rest = tail;
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_join_to_the_text_and_cut_on_character_boundaries() {
        let text = "é".repeat(10) + "abc";
        for max in [1, 2, 3, 5, 64] {
            let parts = text_parts(&text, max);
            assert_eq!(parts.concat(), text, "max {max}");
            assert!(parts.iter().all(|p| !p.is_empty()));
            assert!(parts.iter().all(|p| p.len() <= max.max(2)), "max {max}");
        }
        assert!(text_parts("", 4).is_empty());
    }

    async fn events(
        converter: &Converter,
        req: ConvertRequest,
    ) -> Vec<Result<ConvertResponse, Status>> {
        let mut rx = converter.start(req);
        let mut all = Vec::new();
        while let Some(event) = rx.recv().await {
            all.push(event);
        }
        all
    }

    #[tokio::test]
    async fn a_pdf_streams_its_pages_then_its_text_then_the_end() {
        let pages: Vec<_> = (1..=5)
            .map(|n| {
                vec![dialectic_convert::fixtures::placed(
                    72.0,
                    700.0,
                    12.0,
                    false,
                    &format!("Page {n} text."),
                )]
            })
            .collect();
        let pdf = dialectic_convert::fixtures::pdf(&pages).expect("a pdf");
        let converter = Converter::new(1, 1 << 20);
        let all = events(
            &converter,
            ConvertRequest {
                file_name: "five.pdf".into(),
                content: pdf,
                max_pages: 10,
                max_unpacked_bytes: 1 << 20,
            },
        )
        .await;
        let events: Vec<Event> = all
            .into_iter()
            .map(|e| e.expect("no refusal").event.expect("an event"))
            .collect();
        let read: Vec<(u32, u32)> = events
            .iter()
            .filter_map(|e| match e {
                Event::Progress(p) => Some((p.pages_done, p.pages_total)),
                _ => None,
            })
            .collect();
        assert_eq!(read, (1..=5).map(|n| (n, 5)).collect::<Vec<_>>());
        let text: String = events
            .iter()
            .filter_map(|e| match e {
                Event::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        assert!(text.contains("Page 5 text."), "{text}");
        assert!(
            matches!(events.last(), Some(Event::Done(ConvertDone { pages: 5 }))),
            "{events:?}"
        );
    }

    #[tokio::test]
    async fn a_file_it_cannot_read_is_refused_naming_the_file() {
        let converter = Converter::new(1, 1 << 20);
        let all = events(
            &converter,
            ConvertRequest {
                file_name: "scan.pdf".into(),
                content: b"%PDF-1.7 not really".to_vec(),
                max_pages: 10,
                max_unpacked_bytes: 1 << 20,
            },
        )
        .await;
        let [Err(status)] = all.as_slice() else {
            panic!("one refusal: {all:?}");
        };
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert!(status.message().starts_with("file scan.pdf is refused: "));
        assert_eq!(
            error_status::reason(status).as_deref(),
            Some("INVALID_FIELD")
        );
    }
}
