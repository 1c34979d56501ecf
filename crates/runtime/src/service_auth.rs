//! Service identity on the wire (rules in `dialectic_core::service_auth`): the
//! server layer every gRPC server runs, which refuses an internal call without
//! a valid token for it from an admitted caller (and any path listed nowhere),
//! and the client interceptor that signs every internal call this service
//! makes for the service it calls.

use crate::error_status::Failure;
use dialectic_core::error::ErrorCode;
use dialectic_core::service_auth::{self, Access, HEADER, ServiceName, TokenError};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// The deployment's shared secret (`internal.token_secret`).
#[derive(Clone)]
pub struct ServiceKey(Arc<[u8]>);

impl ServiceKey {
    pub fn from_settings(settings: &dialectic_config::Settings) -> Self {
        Self(Arc::from(settings.internal.token_secret.as_bytes()))
    }

    /// A fresh token naming `caller`, good only at `audience`.
    pub fn mint(&self, caller: ServiceName, audience: ServiceName) -> String {
        service_auth::mint(&self.0, caller, audience, now_unix())
    }
}

fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The verified calling service, for handlers that trust it with more (the
/// wallet takes the acting user from the gateway only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller(pub ServiceName);

/// Whom `request` comes from, if it carries a valid service token.
pub fn caller<T>(request: &tonic::Request<T>) -> Option<ServiceName> {
    request.extensions().get::<Caller>().map(|c| c.0)
}

fn check<B>(key: &ServiceKey, request: &mut http::Request<B>) -> Result<(), tonic::Status> {
    let path = request.uri().path().to_string();
    let (audience, callers) = match service_auth::access(&path) {
        Access::Public => return Ok(()),
        Access::Internal { audience, callers } => (audience, callers),
        Access::Unlisted => {
            let message = format!("{path} is not a method anyone may call here");
            return Err(
                Failure::new(ErrorCode::PermissionDenied, "METHOD_NOT_LISTED", message).into(),
            );
        }
    };
    let service = request
        .headers()
        .get(HEADER)
        .and_then(|v| v.to_str().ok())
        .ok_or(TokenError::Missing)
        .and_then(|token| service_auth::verify(&key.0, token, audience, now_unix()))
        .map_err(|e| {
            let message = format!("{path} is internal: {e}; services share internal.token_secret");
            Failure::new(
                ErrorCode::Unauthenticated,
                "SERVICE_TOKEN_REJECTED",
                message,
            )
        })?;
    if !callers.contains(&service) {
        let message = format!("the {} service may not call {path}", service.as_str());
        let refused = Failure::new(ErrorCode::PermissionDenied, "SERVICE_NOT_ADMITTED", message)
            .with("service", service.as_str());
        return Err(refused.into());
    }
    request.extensions_mut().insert(Caller(service));
    Ok(())
}

/// Refuses internal calls without an admitted service identity.
#[derive(Clone)]
pub struct ServiceAuthLayer {
    key: ServiceKey,
}

impl ServiceAuthLayer {
    pub fn new(key: ServiceKey) -> Self {
        Self { key }
    }
}

impl<S> tower::Layer<S> for ServiceAuthLayer {
    type Service = ServiceAuth<S>;
    fn layer(&self, inner: S) -> Self::Service {
        ServiceAuth {
            inner,
            key: self.key.clone(),
        }
    }
}

#[derive(Clone)]
pub struct ServiceAuth<S> {
    inner: S,
    key: ServiceKey,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B> tower::Service<http::Request<B>> for ServiceAuth<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        if let Err(status) = check(&self.key, &mut request) {
            return Box::pin(async move { Ok(status.into_http()) });
        }
        // The clone is the one that was not polled ready; keep the ready one.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(inner.call(request))
    }
}

/// Signs every outgoing call as `me` for the service it calls, and carries
/// the caller's trace.
#[derive(Clone)]
pub struct InternalInterceptor {
    me: ServiceName,
    key: ServiceKey,
}

impl tonic::service::Interceptor for InternalInterceptor {
    fn call(&mut self, request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        let mut request = crate::observe::TraceInterceptor.call(request)?;
        // Generated clients name the method they call; its service is the audience.
        let audience = request
            .extensions()
            .get::<tonic::GrpcMethod<'static>>()
            .and_then(|m| ServiceName::serving(m.service()))
            .ok_or_else(|| {
                let message = "an internal call to a service that is no internal service";
                tonic::Status::from(Failure::new(ErrorCode::Internal, "INTERNAL", message))
            })?;
        let token = self.key.mint(self.me, audience).parse().map_err(|_| {
            let message = "a service token is not valid metadata";
            tonic::Status::from(Failure::new(ErrorCode::Internal, "INTERNAL", message))
        })?;
        request.metadata_mut().insert(HEADER, token);
        Ok(request)
    }
}

/// A client channel for calls from one internal service to another.
pub type InternalChannel =
    tonic::service::interceptor::InterceptedService<tonic::transport::Channel, InternalInterceptor>;

pub fn internal_channel(
    channel: tonic::transport::Channel,
    me: ServiceName,
    key: ServiceKey,
) -> InternalChannel {
    tonic::service::interceptor::InterceptedService::new(channel, InternalInterceptor { me, key })
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    /// A method missing from the table is refused at run time; this names it
    /// before it ships.
    #[test]
    fn every_method_of_every_service_is_in_the_table() {
        let set = prost_types::FileDescriptorSet::decode(dialectic_proto::FILE_DESCRIPTOR_SET)
            .expect("the compiled descriptors decode");
        let mut seen = 0;
        for file in &set.file {
            for svc in &file.service {
                for method in &svc.method {
                    let path = format!("/{}.{}/{}", file.package(), svc.name(), method.name());
                    assert_ne!(service_auth::access(&path), Access::Unlisted, "{path}");
                    seen += 1;
                }
            }
        }
        assert!(seen > 40, "only {seen} methods");
    }
}
