//! The OTLP span exporter, configured as the OpenTelemetry exporter
//! specification's standard variables say
//! (<https://opentelemetry.io/docs/specs/otel/protocol/exporter/>):
//! `OTEL_EXPORTER_OTLP_PROTOCOL` (`grpc`, the default here, or
//! `http/protobuf`; `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` wins) and, for an
//! `https://` endpoint, `OTEL_EXPORTER_OTLP_CERTIFICATE`, a PEM file of the
//! CA that signs the collector's certificate (trusted beside the system's
//! roots; `OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE` wins).
//!
//! HTTP goes through the workspace's reqwest (rustls), not a client of the
//! exporter's own: the batch processor exports from a thread of its own,
//! so each request is handed to the Tokio runtime the exporter was built in.

use crate::TelemetryError;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{SpanExporter, WithExportConfig, WithHttpConfig, WithTonicConfig};

/// The transports an exporter can speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Grpc,
    HttpProtobuf,
}

impl Protocol {
    /// A protocol variable's value; empty is the default, gRPC.
    pub fn parse(value: &str) -> Result<Self, TelemetryError> {
        match value.trim() {
            "" | "grpc" => Ok(Protocol::Grpc),
            "http/protobuf" => Ok(Protocol::HttpProtobuf),
            other => Err(TelemetryError::Exporter(format!(
                "OTEL_EXPORTER_OTLP_PROTOCOL {other:?} is not supported: use grpc or http/protobuf"
            ))),
        }
    }
}

/// The traces-specific variable when set, else the generic one.
fn variable(traces: &str, generic: &str) -> Option<String> {
    [traces, generic]
        .into_iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()))
}

/// How spans are sent, from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportSettings {
    pub protocol: Protocol,
    /// The CA file's PEM, for an `https://` endpoint.
    pub ca_pem: Option<Vec<u8>>,
}

impl ExportSettings {
    pub fn from_env() -> Result<Self, TelemetryError> {
        let protocol = variable(
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        )
        .map_or(Ok(Protocol::Grpc), |p| Protocol::parse(&p))?;
        let ca_pem = variable(
            "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
            "OTEL_EXPORTER_OTLP_CERTIFICATE",
        )
        .map(|path| {
            std::fs::read(&path).map_err(|e| {
                TelemetryError::Exporter(format!("OTEL_EXPORTER_OTLP_CERTIFICATE {path}: {e}"))
            })
        })
        .transpose()?;
        Ok(Self { protocol, ca_pem })
    }
}

/// An exporter to `endpoint`, the collector's base URL (the HTTP exporter
/// posts to its `/v1/traces`, as the specification appends to
/// `OTEL_EXPORTER_OTLP_ENDPOINT`). Call it inside a Tokio runtime.
pub fn span_exporter(
    endpoint: &str,
    settings: &ExportSettings,
) -> Result<SpanExporter, TelemetryError> {
    let built = match settings.protocol {
        Protocol::Grpc => {
            let builder = SpanExporter::builder().with_tonic().with_endpoint(endpoint);
            match grpc_tls(endpoint, settings) {
                Some(tls) => builder.with_tls_config(tls).build(),
                None => builder.build(),
            }
        }
        Protocol::HttpProtobuf => SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(traces_url(endpoint))
            .with_http_client(ReqwestOnRuntime::new(settings)?)
            .build(),
    };
    built.map_err(|e| TelemetryError::Exporter(e.to_string()))
}

/// TLS for an `https://` endpoint: the system's roots and the CA file's.
fn grpc_tls(
    endpoint: &str,
    settings: &ExportSettings,
) -> Option<tonic::transport::ClientTlsConfig> {
    use tonic::transport::{Certificate, ClientTlsConfig};
    if !endpoint.starts_with("https://") {
        return None;
    }
    // rustls cannot pick a process default when both aws-lc-rs and ring
    // are built (reqwest brings ring); the gateway's TLS chooses the same.
    let _ = rustls::crypto::CryptoProvider::install_default(
        rustls::crypto::aws_lc_rs::default_provider(),
    );
    let tls = ClientTlsConfig::new().with_native_roots();
    Some(match &settings.ca_pem {
        Some(pem) => tls.ca_certificate(Certificate::from_pem(pem)),
        None => tls,
    })
}

/// `endpoint` with the traces path, unless it already ends with it.
pub fn traces_url(endpoint: &str) -> String {
    let base = endpoint.trim_end_matches('/');
    if base.ends_with("/v1/traces") {
        base.to_string()
    } else {
        format!("{base}/v1/traces")
    }
}

/// reqwest, run on the runtime the exporter was built in.
#[derive(Debug)]
struct ReqwestOnRuntime {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl ReqwestOnRuntime {
    fn new(settings: &ExportSettings) -> Result<Self, TelemetryError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            TelemetryError::Exporter("the http/protobuf exporter needs a Tokio runtime".into())
        })?;
        let mut client = reqwest::Client::builder();
        if let Some(pem) = &settings.ca_pem {
            let ca = reqwest::Certificate::from_pem(pem).map_err(|e| {
                TelemetryError::Exporter(format!("OTEL_EXPORTER_OTLP_CERTIFICATE: {e}"))
            })?;
            client = client.add_root_certificate(ca);
        }
        let client = client
            .build()
            .map_err(|e| TelemetryError::Exporter(format!("HTTP client: {e}")))?;
        Ok(Self { client, runtime })
    }
}

#[async_trait::async_trait]
impl HttpClient for ReqwestOnRuntime {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let request = reqwest::Request::try_from(request)?;
        let client = self.client.clone();
        let (status, headers, body) = self
            .runtime
            .spawn(async move {
                let response = client.execute(request).await?;
                let status = response.status();
                let headers = response.headers().clone();
                let body = response.bytes().await?;
                Ok::<_, reqwest::Error>((status, headers, body))
            })
            .await??;
        let mut response = Response::builder().status(status).body(body)?;
        *response.headers_mut() = headers;
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_protocols_are_the_specifications_names() {
        assert_eq!(Protocol::parse("grpc").ok(), Some(Protocol::Grpc));
        assert_eq!(Protocol::parse("").ok(), Some(Protocol::Grpc));
        assert_eq!(
            Protocol::parse(" http/protobuf ").ok(),
            Some(Protocol::HttpProtobuf)
        );
        let refused = Protocol::parse("http/json").expect_err("not built");
        assert!(refused.to_string().contains("\"http/json\""), "{refused}");
    }

    #[test]
    fn the_traces_path_is_appended_once() {
        assert_eq!(traces_url("https://c:4318"), "https://c:4318/v1/traces");
        assert_eq!(traces_url("https://c:4318/"), "https://c:4318/v1/traces");
        assert_eq!(
            traces_url("https://c:4318/v1/traces"),
            "https://c:4318/v1/traces"
        );
    }
}
