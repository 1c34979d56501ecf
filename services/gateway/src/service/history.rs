//! ListSessionEvents: pages through a session's retained event history
//! (what a resuming WatchSession replays), oldest first.

use super::Gateway;
use crate::convert;
use crate::error::GatewayError;
use dialectic_core::ids::{SessionId, UserId};
use dialectic_proto::v1::{ListSessionEventsRequest, ListSessionEventsResponse};

/// A page token: the sequence the page ended on, as `s{sequence}`.
fn page_token(sequence: u64) -> String {
    format!("s{sequence}")
}

/// The sequence in a page token; 0 for the first page.
fn parse_page_token(token: &str) -> Result<u64, GatewayError> {
    let token = token.trim();
    if token.is_empty() {
        return Ok(0);
    }
    token
        .strip_prefix('s')
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| {
            GatewayError::bad(
                "page_token",
                format!("page_token {token:?} was not returned by a list call"),
            )
        })
}

impl Gateway {
    pub(crate) async fn list_session_events(
        &self,
        user: UserId,
        req: ListSessionEventsRequest,
    ) -> Result<ListSessionEventsResponse, GatewayError> {
        let session_id = SessionId::parse(&req.session_id)?;
        let after = parse_page_token(&req.page_token)?;
        self.owned_session(user, session_id).await?;
        let limit = usize::try_from(convert::page_size(req.page_size)).unwrap_or(1);
        let events = self
            .cache()?
            .history_after(&session_id.to_string(), after, limit)
            .await?;
        let next_page_token = match events.last() {
            Some(last) if events.len() >= limit => page_token(last.sequence),
            _ => String::new(),
        };
        Ok(ListSessionEventsResponse {
            events: events.into_iter().map(convert::event).collect(),
            next_page_token,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_tokens_round_trip_and_refuse_garbage() {
        assert_eq!(parse_page_token(&page_token(42)).ok(), Some(42));
        assert_eq!(parse_page_token("").ok(), Some(0));
        for bad in ["42", "s", "s-1", "sx", "1700000000.abc"] {
            assert!(
                matches!(
                    parse_page_token(bad),
                    Err(GatewayError::BadField {
                        field: "page_token",
                        ..
                    })
                ),
                "{bad} was taken"
            );
        }
    }
}
