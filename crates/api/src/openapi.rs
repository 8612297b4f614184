//! The OpenAPI document of the API, generated from the handlers' annotations.

use axum::Json;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::{board, labels, read, write};

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
    paths(
        read::health, read::leaderboard, read::cells, read::experiments, read::experiment, read::report, read::plot, read::plans,
        read::scenarios, read::scenario, read::runs, read::search, read::run, read::run_export, read::bundle, read::bundle_events, read::bundle_raw, read::bundle_download,
        read::submissions, read::predicates, read::transfer,
        write::start_experiment, write::progress_events, write::steer_experiment, write::submit_bundle, write::upload_predicate, write::approve_predicate, write::reject_predicate,
        board::benchmarks, board::benchmark, board::open_submission, board::upload_bundle, board::verify_submission, board::submissions, board::submission,
        board::approve, board::reject, board::withdraw, board::rejudge, board::runners, board::revoke_runner, read::keys, write::revoke_key, write::tokens, write::revoke_token,
        labels::whoami, labels::put_label, labels::delete_label, labels::labels, labels::labels_report, labels::queues, labels::create_queue, labels::queue,
    ),
    components(schemas(write::StartExperiment, overeager_wire::experiment::Steering, overeager_wire::board::OpenSubmission, board::Decision, overeager_wire::board::DeclaredRun, overeager_wire::labels::LabelBody, overeager_wire::labels::NewQueue, overeager_store::labels::Label)),
    modifiers(&Bearer)
)]
struct ApiDoc;

/// The document, as JSON.
pub fn document_json() -> serde_json::Value {
    serde_json::to_value(ApiDoc::openapi()).expect("the OpenAPI document serializes")
}

/// `GET /api/openapi.json`.
pub async fn document() -> Json<serde_json::Value> {
    Json(document_json())
}
