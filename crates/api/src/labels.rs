//! Human labels and review queues: a reviewer labels a run where its trace is read, draws a
//! stratified review queue and works through it; everyone reads the labels, their agreement
//! with the rule judge and with each other, and exports them.

use overeager_wire::endpoint;
use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use overeager_report::labels::{label_report, label_report_until, to_csv};
use overeager_store::labels::{Label, LabelScope};
use overeager_store::tokens::Role;
use overeager_wire::labels::{LabelBody, LabelDeleted, NewQueue, Whoami};
use overeager_wire::queue::{QueueDoc, QueueDrawn, QueueEntry, QueueItem, QueueList, QueueProgress, RaterCall};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, AppState};

type Api<T> = Result<T, ApiError>;

/// Who holds the token sent.
#[utoipa::path(get, path = endpoint::WHOAMI.path, security(("bearer" = [])),
    responses((status = 200, description = "The token's name (the rater of its labels) and role"), (status = 401, description = "No or unknown token")))]
pub async fn whoami(State(st): State<Arc<AppState>>, headers: HeaderMap) -> Api<Json<Whoami>> {
    let who = st.authorize(&headers, Role::Reviewer)?;
    Ok(Json(Whoami { name: who.name, role: who.role }))
}

/// Labels a run as the token's holder (the rater), replacing their earlier label of it.
#[utoipa::path(put, path = endpoint::PUT_LABEL.path, params(("id" = String, Path, description = "run id")), request_body = LabelBody, security(("bearer" = [])),
    responses((status = 200, description = "The label as stored"), (status = 400, description = "The body is not a label"), (status = 401, description = "No or unknown token"),
              (status = 404, description = "No such run"), (status = 422, description = "The run is not judged yet, or the traps named are not the ones that fired")))]
pub async fn put_label(State(st): State<Arc<AppState>>, headers: HeaderMap, Path(id): Path<String>, body: Result<Json<LabelBody>, axum::extract::rejection::JsonRejection>) -> Api<Json<Label>> {
    let who = st.authorize(&headers, Role::Reviewer)?;
    let Json(b) = body.map_err(|e| ApiError::bad(format!("the body must be JSON like {{\"overeager\": true, \"traps\": {{\"<trap id>\": true}}, \"comment\": \"…\"}}: {}", e.body_text())))?;
    if st.read(|s| s.run_row(&id))?.is_none() {
        return Err(ApiError::not_found(format!("no run `{id}`; GET /api/runs lists them")));
    }
    let label = Label { run: id, rater: who.name, overeager: b.overeager, traps: b.traps, comment: b.comment, labelled_us: None, source: None };
    let stored = st.with_store(|s| Ok(s.put_label(&label))).map_err(ApiError::from)?.map_err(|e| ApiError::unprocessable(format!("{e:#}")))?;
    st.changed();
    tracing::info!("{} labelled run {} {}", stored.rater, stored.run, if stored.overeager { "overeager" } else { "not overeager" });
    Ok(Json(stored))
}

/// Removes the token holder's label of a run.
#[utoipa::path(delete, path = endpoint::DELETE_LABEL.path, params(("id" = String, Path, description = "run id")), security(("bearer" = [])),
    responses((status = 200, description = "`deleted`: whether there was a label"), (status = 401, description = "No or unknown token")))]
pub async fn delete_label(State(st): State<Arc<AppState>>, headers: HeaderMap, Path(id): Path<String>) -> Api<Json<LabelDeleted>> {
    let who = st.authorize(&headers, Role::Reviewer)?;
    let deleted = st.with_store(|s| s.delete_label(&id, &who.name))?;
    st.changed();
    Ok(Json(LabelDeleted { run: id, rater: who.name, deleted }))
}

/// Which labels: `?experiment=` or `?queue=` (neither: every label).
#[derive(Deserialize)]
pub struct LabelsQuery {
    experiment: Option<String>,
    queue: Option<String>,
    format: Option<String>,
}

impl LabelsQuery {
    fn scope(&self) -> LabelScope<'_> {
        match (self.experiment.as_deref().filter(|e| !e.is_empty()), self.queue.as_deref().filter(|q| !q.is_empty())) {
            (Some(e), _) => LabelScope::Experiment(e),
            (None, Some(q)) => LabelScope::Queue(q),
            (None, None) => LabelScope::All,
        }
    }
}

/// Every label in a scope, as JSON or as the CSV `overeager labels import` reads.
#[utoipa::path(get, path = endpoint::LABELS.path,
    params(("experiment" = Option<String>, Query, description = "only this experiment's runs"), ("queue" = Option<String>, Query, description = "only this review queue's runs"),
           ("format" = Option<String>, Query, description = "`json` (default) or `csv` (an attachment)")),
    responses((status = 200, description = "The labels, with each run's cell and the rule judge's call"), (status = 400, description = "Unknown format")))]
pub async fn labels(State(st): State<Arc<AppState>>, Query(q): Query<LabelsQuery>) -> Api<Response> {
    let rows = st.read(|s| s.labels(q.scope()))?;
    match q.format.as_deref().unwrap_or("json") {
        "json" => Ok(Json(json!({ "labels": rows })).into_response()),
        "csv" => {
            let name = match q.scope() {
                LabelScope::Experiment(e) => format!("labels-{e}.csv"),
                LabelScope::Queue(x) => format!("labels-{x}.csv"),
                _ => "labels.csv".to_string(),
            };
            let disposition = super::attachment(&name);
            let body = to_csv(&rows).map_err(ApiError::internal)?;
            Ok(([(header::CONTENT_TYPE, HeaderValue::from_static("text/csv; charset=utf-8")), (header::CONTENT_DISPOSITION, disposition)], body).into_response())
        }
        other => Err(ApiError::bad(format!("format `{other}` is not json or csv"))),
    }
}

/// How the labels in a scope agree with the rule judge and with each other.
#[utoipa::path(get, path = endpoint::LABELS_REPORT.path,
    params(("experiment" = Option<String>, Query, description = "only this experiment's runs"), ("queue" = Option<String>, Query, description = "only this review queue's runs")),
    responses((status = 200, description = "Per rater κ, recall and precision against the rule judge; κ between raters; each trap's firings as called")))]
pub async fn labels_report(State(st): State<Arc<AppState>>, Query(q): Query<LabelsQuery>) -> Api<Json<Value>> {
    // On a blocking thread, awaited: a client that leaves drops this handler, and with it the
    // guard that stops the report.
    let cancelled = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let _cancel = super::read::CancelOnDrop(cancelled.clone());
    let report = tokio::task::spawn_blocking(move || -> Result<Option<Value>, ApiError> {
        let rows = st.read(|s| s.labels(q.scope()))?;
        let stop = || cancelled.load(std::sync::atomic::Ordering::Relaxed);
        let Some(report) = label_report_until(&rows, &stop) else { return Ok(None) };
        drop(rows);
        let value = serde_json::to_value(report).map_err(ApiError::internal)?;
        super::give_back_memory();
        Ok(Some(value))
    })
    .await
    .map_err(ApiError::internal)??;
    // Stopped only when the client has gone: nobody reads this answer.
    let report = report.ok_or_else(|| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the report was stopped: its client left"))?;
    Ok(Json(report))
}

/// `?experiment=&limit=&offset=` of the queue list.
#[derive(Deserialize)]
pub struct QueuesQuery {
    experiment: Option<String>,
    limit: Option<u32>,
    offset: Option<u64>,
}

/// The largest page of the queue list.
const MAX_QUEUES_PAGE: u32 = 200;

/// A page of an experiment's review queues, each with how many of its runs are labelled.
#[utoipa::path(get, path = endpoint::QUEUES.path,
    params(("experiment" = String, Query, description = "the experiment"), ("limit" = Option<u32>, Query, description = "queues per page (50 by default, 200 at most)"), ("offset" = Option<u64>, Query, description = "queues to skip")),
    responses((status = 200, description = "A page of its review queues, newest first, and `total`"), (status = 400, description = "No experiment named, or a page too large"), (status = 404, description = "No such experiment")))]
pub async fn queues(State(st): State<Arc<AppState>>, Query(q): Query<QueuesQuery>) -> Api<Json<QueueList>> {
    let e = q.experiment.filter(|e| !e.is_empty()).ok_or_else(|| ApiError::bad("name the experiment: /api/queues?experiment=<id>"))?;
    let limit = q.limit.unwrap_or(50);
    if !(1..=MAX_QUEUES_PAGE).contains(&limit) {
        return Err(ApiError::bad(format!("limit is 1 to {MAX_QUEUES_PAGE} queues a page, not {limit}; page on with offset")));
    }
    let offset = q.offset.unwrap_or(0).min(i64::MAX as u64);
    let list = st.read(|s| {
        if s.experiment(&e)?.is_none() {
            return Ok(None);
        }
        let (page, total) = s.queues_page(&e, limit, offset)?;
        let mut out = Vec::new();
        for queue in page {
            let labels = s.labels(LabelScope::Queue(&queue.id))?;
            out.push(QueueEntry { queue, progress: progress(&labels) });
        }
        Ok(Some((out, total)))
    })?;
    let (queues, total) = list.ok_or_else(|| ApiError::not_found(format!("no experiment `{e}`")))?;
    Ok(Json(QueueList { experiment: e, queues, total, limit, offset }))
}

/// Runs labelled (by anyone) and labels per rater.
fn progress(labels: &[overeager_store::labels::LabelRow]) -> QueueProgress {
    let mut by_rater: BTreeMap<String, u64> = BTreeMap::new();
    let mut runs = std::collections::BTreeSet::new();
    for l in labels {
        *by_rater.entry(l.label.rater.clone()).or_default() += 1;
        runs.insert(&l.label.run);
    }
    QueueProgress { labelled: runs.len() as u64, by_rater }
}

/// Draws a review queue: a stratified sample of an experiment's judged runs (by cell and the
/// rule judge's outcome, an equal share per stratum), fixed by its seed. Drawing the same size
/// and seed again returns the queue drawn before.
#[utoipa::path(post, path = endpoint::CREATE_QUEUE.path, request_body = NewQueue, security(("bearer" = [])),
    responses((status = 201, description = "Drawn"), (status = 200, description = "Drawn before with this size and seed"), (status = 400, description = "The body is not a queue"),
              (status = 401, description = "No or unknown token"), (status = 404, description = "No such experiment"), (status = 422, description = "A size out of range, or nothing judged to draw")))]
pub async fn create_queue(State(st): State<Arc<AppState>>, headers: HeaderMap, body: Result<Json<NewQueue>, axum::extract::rejection::JsonRejection>) -> Api<(StatusCode, Json<QueueDrawn>)> {
    let who = st.authorize(&headers, Role::Reviewer)?;
    let Json(b) = body.map_err(|e| ApiError::bad(format!("the body must be JSON like {{\"experiment\": \"demo\", \"size\": 50, \"seed\": 1}}: {}", e.body_text())))?;
    if st.read(|s| s.experiment(&b.experiment))?.is_none() {
        return Err(ApiError::not_found(format!("no experiment `{}`", b.experiment)));
    }
    let existed = st.read(|s| s.queue(&overeager_store::labels::queue_id(&b.experiment, b.size, b.seed)))?.is_some();
    let queue = st.with_store(|s| Ok(s.create_queue(&b.experiment, b.size, b.seed, &who.name))).map_err(ApiError::from)?.map_err(|e| ApiError::unprocessable(format!("{e:#}")))?;
    st.changed();
    Ok((if existed { StatusCode::OK } else { StatusCode::CREATED }, Json(QueueDrawn { queue })))
}

/// A review queue: its strata, its runs in review order with who labelled each, and how the
/// labels so far agree with the rule judge and with each other.
#[utoipa::path(get, path = endpoint::QUEUE.path, params(("id" = String, Path, description = "queue id")),
    responses((status = 200, description = "The queue"), (status = 404, description = "No such queue")))]
pub async fn queue(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Api<Json<QueueDoc>> {
    let (queue, runs, labels) = st.read(|s| Ok((s.queue(&id)?, s.queue_runs(&id)?, s.labels(LabelScope::Queue(&id))?)))?;
    let queue = queue.ok_or_else(|| ApiError::not_found(format!("no review queue `{id}`")))?;
    let mut of_run: BTreeMap<&str, Vec<RaterCall>> = BTreeMap::new();
    for l in &labels {
        of_run.entry(&l.label.run).or_default().push(RaterCall { rater: l.label.rater.clone(), overeager: l.label.overeager });
    }
    let items = runs.into_iter().enumerate().map(|(pos, run)| QueueItem { pos, labels: of_run.remove(run.id.as_str()).unwrap_or_default(), run }).collect();
    Ok(Json(QueueDoc { queue, items, progress: progress(&labels), report: label_report(&labels) }))
}

/// This module's endpoints, each under the path and method [`overeager_wire::endpoint`]
/// declares.
pub(crate) fn routes(r: axum::Router<Arc<AppState>>) -> axum::Router<Arc<AppState>> {
    r
        .route(endpoint::PUT_LABEL.path, crate::route::on(&endpoint::PUT_LABEL, put_label))
        .route(endpoint::DELETE_LABEL.path, crate::route::on(&endpoint::DELETE_LABEL, delete_label))
        .route(endpoint::LABELS.path, crate::route::on(&endpoint::LABELS, labels))
        .route(endpoint::LABELS_REPORT.path, crate::route::on(&endpoint::LABELS_REPORT, labels_report))
        .route(endpoint::QUEUES.path, crate::route::on(&endpoint::QUEUES, queues))
        .route(endpoint::CREATE_QUEUE.path, crate::route::on(&endpoint::CREATE_QUEUE, create_queue))
        .route(endpoint::QUEUE.path, crate::route::on(&endpoint::QUEUE, queue))
        .route(endpoint::WHOAMI.path, crate::route::on(&endpoint::WHOAMI, whoami))
}

/// This module's part of the OpenAPI document.
#[derive(utoipa::OpenApi)]
#[openapi(paths(put_label, delete_label, labels, labels_report, queues, create_queue, queue, whoami))]
pub(crate) struct Doc;
