//! An endpoint's method router, its method taken from the endpoint table: what every handler
//! module registers its routes with.

use std::sync::Arc;

use axum::routing::MethodRouter;
use overeager_wire::endpoint::{Endpoint, Method};

use crate::AppState;

/// `handler` under an endpoint's method: the table says which.
pub(crate) fn on<T, H, X>(endpoint: &Endpoint<T>, handler: H) -> MethodRouter<Arc<AppState>>
where
    H: axum::handler::Handler<X, Arc<AppState>>,
    X: 'static,
{
    match endpoint.method {
        Method::Get => axum::routing::get(handler),
        Method::Post => axum::routing::post(handler),
        Method::Put => axum::routing::put(handler),
        Method::Delete => axum::routing::delete(handler),
    }
}
