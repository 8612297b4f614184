//! The routes: every endpoint of [`overeager_wire::endpoint`] to its handler, the OpenAPI
//! document of the same handlers, the list cache in front of them and the web app behind.

use std::path::PathBuf;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tower_http::compression::CompressionLayer;
use tower_http::services::{ServeDir, ServeFile};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

use overeager_wire::endpoint as e;

use crate::errors::json_errors;
use crate::route::on;
use crate::limits::*;
use crate::{ApiError, AppState, board, json_bytes, labels, read, write};


/// The whole application: API routes, then the web app for every other path.
pub fn router(state: Arc<AppState>) -> Router {
    let api = [read::routes, write::routes, board::routes, labels::routes]
        .into_iter()
        .fold(Router::new().route(e::OPENAPI.path, on(&e::OPENAPI, document)), |r, routes| routes(r))
        // Every path of the table is routed above; any other under /api/ is answered as such.
        .route("/api/{*rest}", get(read::no_such_endpoint))
        .with_state(state.clone())
        .layer(axum::middleware::from_fn_with_state(state.clone(), cached_lists));
    let app = match &state.config.dist {
        Some(dist) if dist.join("index.html").is_file() => {
            let files = Router::new()
                .fallback_service(ServeDir::new(dist).fallback(ServeFile::new(dist.join("index.html"))))
                .layer(axum::middleware::from_fn_with_state(Arc::new(dist.clone()), no_links));
            api.fallback_service(files)
        }
        _ => api.fallback(read::no_web_app),
    };
    app.layer(axum::middleware::from_fn(json_errors)).layer(CompressionLayer::new())
}

/// Refuses a path of the web app that passes through a symbolic link inside `dist`: only the
/// built app's own files are served, never what a link leads to (a file or directory
/// elsewhere on the server).
async fn no_links(axum::extract::State(dist): axum::extract::State<Arc<PathBuf>>, req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let decoded = percent_encoding::percent_decode_str(req.uri().path()).decode_utf8_lossy().into_owned();
    let mut at = dist.to_path_buf();
    for part in decoded.split('/').filter(|p| !p.is_empty() && *p != ".") {
        at.push(part);
        match tokio::fs::symlink_metadata(&at).await {
            Ok(m) if m.file_type().is_symlink() => return ApiError::not_found(format!("no file `{}` in the web app", decoded.escape_debug())).into_response(),
            Ok(_) => {}
            // Not there: the app's index answers (its router shows the page).
            Err(_) => break,
        }
    }
    next.run(req).await
}

/// Answers a repeated GET of a list endpoint from [`Bodies`] while the store is unchanged.
async fn cached_lists(axum::extract::State(st): axum::extract::State<Arc<AppState>>, req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    if req.method() != axum::http::Method::GET || !CACHED_LISTS.contains(&req.uri().path()) {
        return next.run(req).await;
    }
    // Read before the answer is computed, so a kept answer is never older than its version.
    let version = match st.store_version() {
        Ok(v) => v,
        Err(e) => return ApiError::internal(e).into_response(),
    };
    // Which experiments run is this process's own state, part of `/api/experiments`.
    let running = st.running.lock().unwrap_or_else(|p| p.into_inner()).keys().cloned().collect::<Vec<_>>().join(",");
    let key = format!("{}|{running}", req.uri());
    if let Some(body) = st.bodies.get(&key, version) {
        return json_bytes(body);
    }
    let res = next.run(req).await;
    if res.status() != StatusCode::OK {
        return res;
    }
    // Only answers already whole in memory, and not too large, are kept.
    let whole = axum::body::HttpBody::size_hint(res.body()).exact().is_some_and(|n| n <= BODY_MAX_BYTES as u64);
    if !whole {
        return res;
    }
    let (parts, body) = res.into_parts();
    match axum::body::to_bytes(body, BODY_MAX_BYTES).await {
        Ok(bytes) => {
            st.bodies.put(key, version, bytes.clone());
            Response::from_parts(parts, axum::body::Body::from(bytes))
        }
        Err(e) => ApiError::internal(e).into_response(),
    }
}

struct Bearer;

impl Modify for Bearer {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        let components = api.components.get_or_insert_with(Default::default);
        components.add_security_scheme("bearer", SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)));
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "overeager", description = "Scenarios, runs, audit bundles, verdicts and statistics of overeager experiments. Reads are public; writes need `Authorization: Bearer <token>` (`overeager token create`)."),
    components(schemas(write::StartExperiment, overeager_wire::experiment::Steering, overeager_wire::board::OpenSubmission, board::Decision, overeager_wire::board::DeclaredRun, overeager_wire::labels::LabelBody, overeager_wire::labels::NewQueue, overeager_store::labels::Label)),
    modifiers(&Bearer)
)]
struct ApiDoc;

/// The document, as JSON.
pub fn document_json() -> serde_json::Value {
    let doc = [read::Doc::openapi(), write::Doc::openapi(), board::Doc::openapi(), labels::Doc::openapi()].into_iter().fold(ApiDoc::openapi(), |doc, part| doc.merge_from(part));
    serde_json::to_value(doc).expect("the OpenAPI document serializes")
}

/// `GET /api/openapi.json`.
async fn document() -> Json<serde_json::Value> {
    Json(document_json())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use overeager_wire::endpoint::{ALL, Method, OPENAPI};

    /// The OpenAPI document lists exactly the table's endpoints (itself aside), and the router
    /// answers each with its handler: none gets the answer for a path that is no endpoint, or
    /// 405 for a method it does not take.
    #[test]
    fn the_router_and_the_openapi_document_follow_the_endpoint_table() {
        let doc = super::document_json();
        let mut documented = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys().filter(|m| ["get", "post", "put", "delete"].contains(&m.as_str())) {
                documented.insert((method.clone(), path.clone()));
            }
        }
        let table: BTreeSet<(String, String)> = ALL.iter().filter(|r| **r != OPENAPI.route()).map(|r| (r.method.as_str().to_string(), r.path.to_string())).collect();
        assert_eq!(documented, table, "the OpenAPI document and the endpoint table differ");

        let tmp = tempfile::tempdir().unwrap();
        let (rt, addr) = crate::serve_in_process(&tmp.path().join("store.db")).unwrap();
        let agent = ureq::Agent::new_with_config(ureq::config::Config::builder().http_status_as_error(false).build());
        for r in ALL {
            let mut path = r.path.to_string();
            while let Some(open) = path.find('{') {
                let close = open + path[open..].find('}').unwrap();
                path.replace_range(open..=close, "x");
            }
            let url = format!("http://{addr}{path}");
            let mut res = match r.method {
                Method::Get => agent.get(&url).call(),
                Method::Delete => agent.delete(&url).call(),
                Method::Post => agent.post(&url).send_empty(),
                Method::Put => agent.put(&url).send_empty(),
            }
            .unwrap();
            let body = res.body_mut().read_to_string().unwrap_or_default();
            assert!(res.status() != 405 && !body.contains("no endpoint"), "{r:?}: {} {body}", res.status());
        }
        rt.shutdown_background();
    }
}
