//! Plain HTTP on the public port: the Connect protocol's unary calls
//! (<https://connectrpc.com/docs/protocol>), so `curl` with a JSON body
//! reaches every unary RPC. A call is `POST /<package.Service>/<Method>` with
//! `content-type: application/json` (or `application/proto`); its body is
//! turned into the protobuf message the method takes, using the descriptors
//! the service is compiled from, and sent on as a gRPC call through the
//! same stack every gRPC call goes through (metrics, authentication,
//! request ids, limits, idempotency). No RPC is written twice.
//!
//! An answer is the method's message in the proto3 JSON mapping, keyed by
//! the .proto field names with every field present (as `dialectic -o json`
//! prints it); an error is Connect's JSON error (`code`, `message`,
//! `details`) under the HTTP status its code maps to, and names its call in
//! `x-request-id` and in a `google.rpc.RequestInfo` detail. Streaming RPCs
//! are refused: they need gRPC or gRPC-Web.

pub mod openapi;

use crate::error_status::{self, DOMAIN};
use base64::Engine;
use bytes::{Buf, Bytes};
use dialectic_core::error::Reason;
use futures::future::BoxFuture;
use http::header::{CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, HeaderName, HeaderValue};
use http::{HeaderMap, Method, StatusCode};
use http_body_util::BodyExt;
use prost::Message;
use prost_reflect::{
    DescriptorPool, DeserializeOptions, DynamicMessage, MethodDescriptor, SerializeOptions,
    ServiceDescriptor,
};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const JSON: &str = "application/json";
const PROTO: &str = "application/proto";
/// How much larger than the protobuf message its JSON may be: base64 makes
/// bytes 4/3 as long, and field names and quotes add the rest. The message
/// itself is held to the server's limit once decoded.
const JSON_EXPANSION: usize = 2;

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("the compiled descriptors do not decode: {0}")]
    Descriptors(#[from] prost_reflect::DescriptorError),
    #[error("service {0} is not in the compiled descriptors")]
    UnknownService(String),
}

/// The unary methods one service answers over Connect, and the largest
/// message it takes.
#[derive(Debug)]
pub struct Procedures {
    service: ServiceDescriptor,
    max_message_bytes: usize,
}

impl Procedures {
    /// `service` (`dialectic.v1.DialecticService`) from the encoded descriptor set.
    pub fn new(
        descriptors: &[u8],
        service: &str,
        max_message_bytes: usize,
    ) -> Result<Self, ConnectError> {
        let pool = DescriptorPool::decode(descriptors)?;
        let service = pool
            .get_service_by_name(service)
            .ok_or_else(|| ConnectError::UnknownService(service.to_string()))?;
        Ok(Self {
            service,
            max_message_bytes,
        })
    }

    /// The method a request's path names, when it is under this service.
    fn method_of(&self, path: &str) -> Option<Result<MethodDescriptor, Status>> {
        let name = path
            .strip_prefix('/')?
            .strip_prefix(self.service.full_name())?
            .strip_prefix('/')?;
        let method = self.service.methods().find(|m| m.name() == name);
        Some(match method {
            Some(m) if m.is_client_streaming() || m.is_server_streaming() => Err(refused(
                Code::Unimplemented,
                format!(
                    "{name} streams; call it with gRPC or gRPC-Web (only unary RPCs take JSON over HTTP)"
                ),
            )),
            Some(m) => Ok(m),
            None => Err(refused(
                Code::Unimplemented,
                format!("{} has no method {name:?}", self.service.full_name()),
            )),
        })
    }
}

/// Serves Connect's unary calls in front of a gRPC stack ([`Procedures`]).
#[derive(Clone)]
pub struct ConnectLayer {
    procedures: Arc<Procedures>,
}

impl ConnectLayer {
    pub fn new(procedures: Procedures) -> Self {
        Self {
            procedures: Arc::new(procedures),
        }
    }
}

impl<S> tower::Layer<S> for ConnectLayer {
    type Service = Connect<S>;
    fn layer(&self, inner: S) -> Connect<S> {
        Connect {
            inner,
            procedures: self.procedures.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Connect<S> {
    inner: S,
    procedures: Arc<Procedures>,
}

type HttpRequest = http::Request<tonic::body::Body>;
type HttpResponse = http::Response<tonic::body::Body>;

/// Its own errors are answers (Connect's JSON error), so the stack's error
/// type and body stay what gRPC's are.
impl<S> tower::Service<HttpRequest> for Connect<S>
where
    S: tower::Service<HttpRequest, Response = HttpResponse> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError> + Send + 'static,
{
    type Response = HttpResponse;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<HttpResponse, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: HttpRequest) -> Self::Future {
        // The clone is the one that was not polled ready; keep the ready one.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let method = match self.procedures.method_of(request.uri().path()) {
            Some(method) if is_connect(&request) => method,
            _ => return Box::pin(inner.call(request)),
        };
        let procedures = self.procedures.clone();
        Box::pin(async move {
            let request_id = request_id(request.headers());
            let answer = match method {
                Ok(method) => unary(&procedures, inner, method, request, &request_id).await,
                Err(status) => Err(status),
            };
            Ok(answer.unwrap_or_else(|status| error_response(status, &request_id)))
        })
    }
}

/// A POST that is not gRPC or gRPC-Web: Connect's, or a mistake Connect's
/// error should explain (curl's default form content type, say).
fn is_connect(request: &HttpRequest) -> bool {
    let grpc = content_type(request.headers()).starts_with("application/grpc");
    request.method() == Method::POST && !grpc
}

fn content_type(headers: &HeaderMap) -> &str {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// The body's encoding, from its content type (parameters such as
/// `charset=utf-8` aside).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Codec {
    Json,
    Proto,
}

impl Codec {
    fn of(headers: &HeaderMap) -> Result<Self, Status> {
        let kind = content_type(headers);
        let kind = kind.split(';').next().unwrap_or("").trim();
        match kind.to_ascii_lowercase().as_str() {
            JSON => Ok(Codec::Json),
            PROTO => Ok(Codec::Proto),
            other => Err(refused(
                Code::InvalidArgument,
                format!(
                    "content-type {other:?} is not served here; send {JSON} (or {PROTO}, or gRPC)"
                ),
            )),
        }
    }

    fn content_type(self) -> HeaderValue {
        HeaderValue::from_static(match self {
            Codec::Json => JSON,
            Codec::Proto => PROTO,
        })
    }
}

/// The id a call is known by: the client's `x-request-id` when it is a
/// plain token (1 to 128 of `A-Z a-z 0-9 . _ : -`), else a new UUIDv7. The
/// gateway applies the same rule, so it keeps the id passed on to it.
pub fn request_id(headers: &HeaderMap) -> String {
    let offered = headers.get(error_status::REQUEST_ID);
    error_status::request_id_or_new(offered.and_then(|value| value.to_str().ok()))
}

/// One unary call: the body as the method's message, the gRPC call, its
/// answer in the request's encoding.
async fn unary<S>(
    procedures: &Procedures,
    inner: S,
    method: MethodDescriptor,
    request: HttpRequest,
    request_id: &str,
) -> Result<HttpResponse, Status>
where
    S: tower::Service<HttpRequest, Response = HttpResponse> + Send,
    S::Error: Into<BoxError>,
{
    let (parts, body) = request.into_parts();
    let codec = Codec::of(&parts.headers)?;
    check_headers(&parts.headers)?;
    let limit = match codec {
        Codec::Json => procedures.max_message_bytes.saturating_mul(JSON_EXPANSION),
        Codec::Proto => procedures.max_message_bytes,
    };
    let body = read_body(body, limit).await?;
    let message = match codec {
        Codec::Json => from_json(&method, &body)?,
        Codec::Proto => body,
    };
    let timeout = deadline(&parts.headers)?;
    let grpc = grpc_request(parts, message, request_id);
    let call = call_inner(inner, grpc);
    let (head, body, trailers) = match timeout {
        Some(timeout) => tokio::time::timeout(timeout, call).await.map_err(|_| {
            refused(
                Code::DeadlineExceeded,
                format!(
                    "no answer within connect-timeout-ms ({} ms)",
                    timeout.as_millis()
                ),
            )
        })??,
        None => call.await?,
    };
    answer(&method, codec, head, body, trailers)
}

/// Headers Connect defines that this server cannot honour.
fn check_headers(headers: &HeaderMap) -> Result<(), Status> {
    let value = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(encoding) = value(CONTENT_ENCODING.as_str()).filter(|e| *e != "identity") {
        return Err(refused(
            Code::Unimplemented,
            format!("content-encoding {encoding:?} is not accepted; send the body uncompressed"),
        ));
    }
    if let Some(version) = value("connect-protocol-version").filter(|v| *v != "1") {
        return Err(refused(
            Code::InvalidArgument,
            format!("connect-protocol-version {version:?}: this server speaks version 1"),
        ));
    }
    Ok(())
}

/// `connect-timeout-ms`, the caller's deadline for the whole call.
fn deadline(headers: &HeaderMap) -> Result<Option<Duration>, Status> {
    let Some(value) = headers.get("connect-timeout-ms") else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .filter(|v| (1..=10).contains(&v.len()))
        .and_then(|v| v.parse::<u64>().ok())
        .map(|ms| Some(Duration::from_millis(ms)))
        .ok_or_else(|| {
            refused(
                Code::InvalidArgument,
                "connect-timeout-ms must be a whole number of milliseconds (at most 10 digits)",
            )
        })
}

/// The whole body, refused once it passes `limit` bytes (before reading the rest).
async fn read_body(body: tonic::body::Body, limit: usize) -> Result<Bytes, Status> {
    let too_large = || {
        refused(
            Code::ResourceExhausted,
            format!("request body larger than this server's limit of {limit} bytes"),
        )
    };
    let limited = http_body_util::Limited::new(body, limit);
    match limited.collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Err(e) => Err(refused(
            Code::InvalidArgument,
            format!("the request body could not be read: {e}"),
        )),
    }
}

/// The request's JSON as the method's input message, protobuf-encoded. An
/// empty body is the empty message; an unknown field is refused, so a
/// misspelt name is not silently dropped.
fn from_json(method: &MethodDescriptor, body: &[u8]) -> Result<Bytes, Status> {
    let input = method.input();
    let body = if body.iter().all(u8::is_ascii_whitespace) {
        b"{}".as_slice()
    } else {
        body
    };
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let options = DeserializeOptions::new().deny_unknown_fields(true);
    let parsed =
        DynamicMessage::deserialize_with_options(input.clone(), &mut deserializer, &options)
            .and_then(|message| deserializer.end().map(|()| message));
    match parsed {
        Ok(message) => Ok(Bytes::from(message.encode_to_vec())),
        Err(e) => Err(refused(
            Code::InvalidArgument,
            format!("the body is not a {} in JSON: {e}", input.full_name()),
        )),
    }
}

/// The gRPC call a Connect request stands for: the caller's headers (its
/// key, its trace) minus Connect's own, the message in one frame.
fn grpc_request(parts: http::request::Parts, message: Bytes, request_id: &str) -> HttpRequest {
    let mut framed = Vec::with_capacity(message.len() + 5);
    framed.push(0);
    framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
    framed.extend_from_slice(&message);
    let mut headers = parts.headers;
    for name in [
        CONTENT_TYPE,
        CONTENT_LENGTH,
        CONTENT_ENCODING,
        http::header::ACCEPT_ENCODING,
    ] {
        headers.remove(name);
    }
    headers.remove("connect-protocol-version");
    headers.remove("connect-timeout-ms");
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert(http::header::TE, HeaderValue::from_static("trailers"));
    if let Ok(id) = HeaderValue::from_str(request_id) {
        headers.insert(error_status::REQUEST_ID, id);
    }
    let body = tonic::body::Body::new(http_body_util::Full::new(Bytes::from(framed)));
    let mut request = http::Request::new(body);
    *request.method_mut() = Method::POST;
    *request.uri_mut() = parts.uri;
    // gRPC is HTTP/2; the call may have come over HTTP/1.1.
    *request.version_mut() = http::Version::HTTP_2;
    *request.headers_mut() = headers;
    *request.extensions_mut() = parts.extensions;
    request
}

/// The gRPC answer, read whole: its head, its message bytes, its trailers.
async fn call_inner<S>(
    mut inner: S,
    request: HttpRequest,
) -> Result<(http::response::Parts, Bytes, HeaderMap), Status>
where
    S: tower::Service<HttpRequest, Response = HttpResponse>,
    S::Error: Into<BoxError>,
{
    let response = inner.call(request).await.map_err(|e| {
        let e: BoxError = e.into();
        refused(Code::Internal, format!("the call failed: {e}"))
    })?;
    let (head, body) = response.into_parts();
    // The body's error is the call's status (a stream cut short, say).
    let collected = body.collect().await?;
    let trailers = collected.trailers().cloned().unwrap_or_default();
    Ok((head, collected.to_bytes(), trailers))
}

/// The Connect answer to a gRPC one: its status, in the trailers or (a
/// trailers-only answer) the head, decides between the message and an error.
fn answer(
    method: &MethodDescriptor,
    codec: Codec,
    head: http::response::Parts,
    body: Bytes,
    trailers: HeaderMap,
) -> Result<HttpResponse, Status> {
    let status = Status::from_header_map(&trailers)
        .or_else(|| Status::from_header_map(&head.headers))
        .unwrap_or_else(|| {
            refused(
                Code::Internal,
                format!(
                    "the call ended without a gRPC status (HTTP {})",
                    head.status
                ),
            )
        });
    if status.code() != Code::Ok {
        return Err(status);
    }
    let message = single_message(body)?;
    let body = match codec {
        Codec::Json => to_json(method, message)?,
        Codec::Proto => message,
    };
    let mut response = http::Response::new(tonic::body::Body::new(http_body_util::Full::new(body)));
    let headers = response.headers_mut();
    copy_metadata(&head.headers, headers, "");
    copy_metadata(&trailers, headers, "trailer-");
    headers.insert(CONTENT_TYPE, codec.content_type());
    Ok(response)
}

/// The one message of a unary gRPC answer's body (uncompressed: this layer
/// asks for no compression).
fn single_message(mut body: Bytes) -> Result<Bytes, Status> {
    let malformed = || refused(Code::Internal, "the answer was not one gRPC message");
    if body.len() < 5 || body[0] != 0 {
        return Err(malformed());
    }
    body.advance(1);
    let len = body.get_u32() as usize;
    if body.len() != len {
        return Err(malformed());
    }
    Ok(body)
}

fn to_json(method: &MethodDescriptor, message: Bytes) -> Result<Bytes, Status> {
    let output = method.output();
    let failed = |e: String| {
        refused(
            Code::Internal,
            format!("the answer is not a {}: {e}", output.full_name()),
        )
    };
    let message =
        DynamicMessage::decode(output.clone(), message).map_err(|e| failed(e.to_string()))?;
    let options = SerializeOptions::new()
        .use_proto_field_name(true)
        .skip_default_fields(false);
    let value = message
        .serialize_with_options(serde_json::value::Serializer, &options)
        .map_err(|e| failed(e.to_string()))?;
    Ok(Bytes::from(value.to_string()))
}

/// Response metadata a caller may read (the request id, above all), not
/// the transport's or gRPC's own headers.
fn copy_metadata(from: &HeaderMap, to: &mut HeaderMap, prefix: &str) {
    for (name, value) in from {
        let name = name.as_str();
        let transport = matches!(
            name,
            "content-type" | "content-length" | "date" | "te" | "trailer" | "transfer-encoding"
        );
        if transport || name.starts_with("grpc-") {
            continue;
        }
        if let Ok(name) = HeaderName::from_bytes(format!("{prefix}{name}").as_bytes()) {
            to.append(name, value.clone());
        }
    }
}

/// A refusal made here, before the service: its code's reason, as tonic's
/// own refusals get.
fn refused(code: Code, message: impl Into<String>) -> Status {
    let reason = Reason::for_foreign_code(code as i32);
    let details = ErrorDetails::with_error_info(reason.as_str(), DOMAIN, HashMap::new());
    Status::with_error_details(code, message, details)
}

/// Connect's name for a gRPC code and the HTTP status it travels under.
fn connect_code(code: Code) -> (&'static str, StatusCode) {
    let http = |n: u16| StatusCode::from_u16(n).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    match code {
        Code::Ok => ("ok", http(200)),
        Code::Cancelled => ("canceled", http(499)),
        Code::Unknown => ("unknown", http(500)),
        Code::InvalidArgument => ("invalid_argument", http(400)),
        Code::DeadlineExceeded => ("deadline_exceeded", http(504)),
        Code::NotFound => ("not_found", http(404)),
        Code::AlreadyExists => ("already_exists", http(409)),
        Code::PermissionDenied => ("permission_denied", http(403)),
        Code::ResourceExhausted => ("resource_exhausted", http(429)),
        Code::FailedPrecondition => ("failed_precondition", http(400)),
        Code::Aborted => ("aborted", http(409)),
        Code::OutOfRange => ("out_of_range", http(400)),
        Code::Unimplemented => ("unimplemented", http(501)),
        Code::Internal => ("internal", http(500)),
        Code::Unavailable => ("unavailable", http(503)),
        Code::DataLoss => ("data_loss", http(500)),
        Code::Unauthenticated => ("unauthenticated", http(401)),
    }
}

/// A failed call as Connect's JSON error, named by `request_id` in its
/// RequestInfo detail and `x-request-id` header.
fn error_response(status: Status, request_id: &str) -> HttpResponse {
    let status = error_status::for_caller(status, request_id);
    let (code, http_status) = connect_code(status.code());
    let body = json!({
        "code": code,
        "message": status.message(),
        "details": details(&status),
    });
    let mut response = http::Response::new(tonic::body::Body::new(http_body_util::Full::new(
        Bytes::from(body.to_string()),
    )));
    *response.status_mut() = http_status;
    let headers = response.headers_mut();
    copy_metadata(
        &status.metadata().clone().into_headers(),
        headers,
        "trailer-",
    );
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(JSON));
    if let Ok(id) = HeaderValue::from_str(request_id) {
        headers.insert(error_status::REQUEST_ID, id);
    }
    response
}

/// google.rpc.Status, for the raw details of an error.
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
    #[prost(message, repeated, tag = "3")]
    details: Vec<prost_types::Any>,
}

/// Each detail as Connect sends it: its type, its bytes (base64) and, for
/// the google.rpc types dialectic sends, `debug` as JSON a person can read.
fn details(status: &Status) -> Vec<Value> {
    let Ok(decoded) = RpcStatus::decode(status.details()) else {
        return Vec::new();
    };
    let readable = status.get_error_details();
    decoded
        .details
        .iter()
        .map(|any| {
            let kind = any.type_url.rsplit('/').next().unwrap_or(&any.type_url);
            let mut detail = json!({
                "type": kind,
                "value": base64::engine::general_purpose::STANDARD_NO_PAD.encode(&any.value),
            });
            if let Some(debug) = debug(kind, &readable) {
                detail["debug"] = debug;
            }
            detail
        })
        .collect()
}

fn debug(kind: &str, details: &ErrorDetails) -> Option<Value> {
    Some(match kind {
        "google.rpc.ErrorInfo" => {
            let info = details.error_info()?;
            json!({ "reason": info.reason, "domain": info.domain, "metadata": info.metadata })
        }
        "google.rpc.RequestInfo" => {
            let info = details.request_info()?;
            json!({ "requestId": info.request_id, "servingData": info.serving_data })
        }
        "google.rpc.RetryInfo" => {
            let delay = details.retry_info()?.retry_delay?;
            json!({ "retryDelay": format!("{}s", delay.as_secs_f64()) })
        }
        "google.rpc.BadRequest" => {
            let violations: Vec<Value> = details
                .bad_request()?
                .field_violations
                .iter()
                .map(|v| json!({ "field": v.field, "description": v.description }))
                .collect();
            json!({ "fieldViolations": violations })
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn procedures() -> Procedures {
        Procedures::new(
            dialectic_proto::FILE_DESCRIPTOR_SET,
            "dialectic.v1.DialecticService",
            1024,
        )
        .expect("the gateway's service")
    }

    #[test]
    fn paths_name_unary_methods_of_the_service_only() {
        let procedures = procedures();
        let method = procedures.method_of("/dialectic.v1.DialecticService/CreateProject");
        assert_eq!(
            method
                .and_then(Result::ok)
                .map(|m| m.name().to_string())
                .as_deref(),
            Some("CreateProject")
        );
        let streaming = procedures.method_of("/dialectic.v1.DialecticService/WatchSession");
        assert_eq!(
            streaming.and_then(Result::err).map(|s| s.code()),
            Some(Code::Unimplemented)
        );
        let unknown = procedures.method_of("/dialectic.v1.DialecticService/Nope");
        assert_eq!(
            unknown.and_then(Result::err).map(|s| s.code()),
            Some(Code::Unimplemented)
        );
        assert!(
            procedures
                .method_of("/grpc.health.v1.Health/Check")
                .is_none()
        );
        assert!(
            procedures
                .method_of("/dialectic.v1.DialecticServiceX/CreateProject")
                .is_none()
        );
    }

    #[test]
    fn json_becomes_the_input_message_and_typos_are_refused() {
        let procedures = procedures();
        let method = procedures
            .method_of("/dialectic.v1.DialecticService/CreateProject")
            .and_then(Result::ok)
            .expect("CreateProject");
        let bytes =
            from_json(&method, br#"{"name": "x", "initialUserPrompt": "p"}"#).expect("parses");
        let message = dialectic_proto::v1::CreateProjectRequest::decode(bytes).expect("decodes");
        assert_eq!(
            (message.name.as_str(), message.initial_user_prompt.as_str()),
            ("x", "p")
        );
        let empty = from_json(&method, b" ").expect("an empty body is the empty message");
        assert!(empty.is_empty());
        let typo = from_json(&method, br#"{"nmae": "x"}"#).expect_err("unknown field");
        assert_eq!(typo.code(), Code::InvalidArgument);
        assert!(typo.message().contains("nmae"), "{}", typo.message());
        assert!(from_json(&method, br#"{"name": "x"} trailing"#).is_err());
    }

    #[test]
    fn codes_map_to_connect_names_and_http_statuses() {
        assert_eq!(
            connect_code(Code::NotFound),
            ("not_found", StatusCode::NOT_FOUND)
        );
        assert_eq!(
            connect_code(Code::Unauthenticated).1,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            connect_code(Code::ResourceExhausted).1,
            StatusCode::TOO_MANY_REQUESTS
        );
        assert_eq!(connect_code(Code::Cancelled).0, "canceled");
    }

    #[test]
    fn a_plain_request_id_is_kept_and_anything_else_replaced() {
        let mut headers = HeaderMap::new();
        headers.insert(
            error_status::REQUEST_ID,
            HeaderValue::from_static("ticket-42"),
        );
        assert_eq!(request_id(&headers), "ticket-42");
        headers.insert(error_status::REQUEST_ID, HeaderValue::from_static("a b"));
        assert!(uuid::Uuid::parse_str(&request_id(&headers)).is_ok());
    }
}
