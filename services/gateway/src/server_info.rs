//! `GetServerInfo`: what this gateway runs and enforces, built once from its
//! configuration at start, so a client can adapt before it is refused.

use crate::convert::{DEFAULT_PAGE, MAX_PAGE};
use dialectic_config::Settings;
use dialectic_proto::v1::{ServerInfo, ServerLimits};
use dialectic_runtime::build_info;

/// The protobuf package the public API is.
const API: &str = "dialectic.v1";

pub fn describe(settings: &Settings) -> ServerInfo {
    ServerInfo {
        version: build_info::VERSION.to_string(),
        build: build_info::commit().to_string(),
        api: API.to_string(),
        features: features(settings),
        limits: Some(limits(settings)),
    }
}

/// Stable names, documented in gateway.proto; the always-on ones are listed
/// too, since a client may be talking to a release that lacked them.
fn features(settings: &Settings) -> Vec<String> {
    let gateway = &settings.gateway;
    let tls = !gateway.tls_cert.trim().is_empty();
    let web = !gateway.web_origins.trim().is_empty();
    [
        ("tls", tls),
        ("grpc_web", web),
        ("json_api", gateway.json_api),
        ("pdf_upload", true),
        ("docx_upload", true),
        ("export_url", true),
    ]
    .into_iter()
    .filter(|(_, on)| *on)
    .map(|(name, _)| name.to_string())
    .collect()
}

fn limits(settings: &Settings) -> ServerLimits {
    let gateway = &settings.gateway;
    let bytes = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    ServerLimits {
        max_message_bytes: bytes(gateway.max_message_bytes),
        max_prompt_bytes: bytes(gateway.max_prompt_bytes),
        max_documents_per_project: gateway.max_documents_per_project,
        max_document_bytes_per_project: gateway.max_document_bytes_per_project,
        max_projects_per_user: gateway.max_projects_per_user,
        max_document_bytes_per_user: gateway.max_document_bytes_per_user,
        max_upload_pages: gateway.max_upload_pages,
        max_upload_unpacked_bytes: gateway.max_upload_unpacked_bytes,
        max_watches_per_user: gateway.max_watches_per_user,
        max_exports_per_user: gateway.max_exports_per_user,
        max_export_bytes: gateway.max_export_bytes,
        max_page_size: MAX_PAGE,
        default_page_size: DEFAULT_PAGE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_follow_the_configuration() {
        let mut settings = Settings::default();
        settings.gateway.web_origins = String::new();
        settings.gateway.tls_cert = String::new();
        let plain = describe(&settings).features;
        assert!(!plain.iter().any(|f| f == "tls" || f == "grpc_web"));
        settings.gateway.web_origins = "https://app.example.com".into();
        settings.gateway.tls_cert = "/etc/tls/cert.pem".into();
        let both = describe(&settings).features;
        assert!(both.iter().any(|f| f == "tls"));
        assert!(both.iter().any(|f| f == "grpc_web"));
    }

    #[test]
    fn limits_are_the_configured_ones() {
        let mut settings = Settings::default();
        settings.gateway.max_projects_per_user = 7;
        settings.gateway.max_upload_pages = 3;
        let limits = describe(&settings).limits.expect("limits");
        assert_eq!(limits.max_projects_per_user, 7);
        assert_eq!(limits.max_upload_pages, 3);
        assert_eq!(limits.max_page_size, MAX_PAGE);
    }
}
