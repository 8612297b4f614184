//! The API's one error type and the middleware that gives axum's own rejections its shape.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::body;

/// An API error: a status and a sentence that says what is wrong and what to do.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError { status, message: message.into() }
    }
    pub fn not_found(what: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, what)
    }
    pub fn bad(what: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, what)
    }
    pub fn unprocessable(what: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, what)
    }
    /// A failure of the server itself. The detail (which may name the server's files) goes to
    /// the log under a reference; the client gets the reference only.
    /// A request body that could not be read: 408 when it was too slow (see [`body`]),
    /// otherwise 400 with `what` went wrong.
    pub fn body(e: &(dyn std::error::Error + 'static), what: &str) -> ApiError {
        match body::timeout_in(e) {
            Some(t) => ApiError::new(StatusCode::REQUEST_TIMEOUT, format!("{what}: {t}; nothing was kept, send it again")),
            None => ApiError::bad(format!("{what} could not be read whole: {e}; nothing was kept, send it again")),
        }
    }

    pub fn internal(e: impl std::fmt::Display) -> ApiError {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let reference = NEXT.fetch_add(1, Ordering::Relaxed);
        tracing::error!("internal error #{reference}: {e}");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("internal error #{reference}; the server's log has the details"))
    }
}

impl From<anyhow::Error> for ApiError {
    fn from(e: anyhow::Error) -> ApiError {
        ApiError::internal(format!("{e:#}"))
    }
}

impl From<ApiError> for Response {
    fn from(e: ApiError) -> Response {
        e.into_response()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(overeager_wire::server::ErrorBody { error: self.message, status: self.status.as_u16() })).into_response()
    }
}

/// Turns every error response of an `/api/` path that is not JSON (axum's own rejections of a
/// malformed path, query, body, method or size) into `{"error": …, "status": …}`.
pub(crate) async fn json_errors(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let api = req.uri().path().starts_with("/api/");
    let res = next.run(req).await;
    let status = res.status();
    let is_json = res.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("application/json"));
    if !api || is_json || !(status.is_client_error() || status.is_server_error()) {
        return res;
    }
    let (parts, body) = res.into_parts();
    let text = match axum::body::to_bytes(body, 64 << 10).await {
        Ok(b) if !b.is_empty() => String::from_utf8_lossy(&b).trim().to_string(),
        _ => status.canonical_reason().unwrap_or("error").to_string(),
    };
    let mut out = ApiError::new(status, text).into_response();
    for name in [header::ALLOW, header::RETRY_AFTER, header::WWW_AUTHENTICATE] {
        if let Some(v) = parts.headers.get(&name) {
            out.headers_mut().insert(name, v.clone());
        }
    }
    out
}
