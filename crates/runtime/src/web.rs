//! Browsers' way in (the gateway's): gRPC-Web on the same port as gRPC, so a
//! page calls every RPC, server streaming included, without a proxy; and CORS
//! for the origins configuration names, none by default (a page served from
//! the gateway's own origin, or any non-browser client, needs none).

use http::{HeaderName, HeaderValue, Method};
use std::time::Duration;
use tower_http::cors::{AllowOrigin, CorsLayer};

/// Headers a gRPC-Web page sends: its framing, its key, its deadline.
const REQUEST_HEADERS: [&str; 5] = [
    "content-type",
    "x-grpc-web",
    "x-user-agent",
    "authorization",
    "grpc-timeout",
];

/// Headers a page must read to see a call's status and its ErrorInfo.
const RESPONSE_HEADERS: [&str; 3] = ["grpc-status", "grpc-message", "grpc-status-details-bin"];

/// A browser caches a preflight this long, so each call is one request.
const PREFLIGHT_MAX_AGE: Duration = Duration::from_secs(3600);

#[derive(Debug, thiserror::Error)]
#[error("web origin {origin:?} is not a valid header value")]
pub struct BadOrigin {
    origin: String,
}

/// The origins of a comma-separated list (`https://app.example.com,
/// http://localhost:8080`), each checked to be a header value.
pub fn origins(list: &str) -> Result<Vec<HeaderValue>, BadOrigin> {
    list.split(',')
        .map(str::trim)
        .filter(|o| !o.is_empty())
        .map(|origin| {
            HeaderValue::from_str(origin).map_err(|_| BadOrigin {
                origin: origin.to_string(),
            })
        })
        .collect()
}

/// CORS for `origins`; None when there are none (no cross-origin page may call).
pub(crate) fn cors(origins: &[HeaderValue]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    Some(
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins.iter().cloned()))
            .allow_methods([Method::POST, Method::OPTIONS])
            .allow_headers(REQUEST_HEADERS.map(HeaderName::from_static))
            .expose_headers(RESPONSE_HEADERS.map(HeaderName::from_static))
            .max_age(PREFLIGHT_MAX_AGE),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_a_trimmed_comma_list() {
        let list = origins(" https://app.example.com , http://localhost:8080,").expect("valid");
        assert_eq!(list, ["https://app.example.com", "http://localhost:8080"]);
        assert!(origins("").expect("empty").is_empty());
        assert!(origins("https://bad\nexample").is_err());
    }
}
