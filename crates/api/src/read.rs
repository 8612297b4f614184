//! Read-only endpoints: public, cached where the work is heavy.

use overeager_wire::endpoint;
use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use overeager_core::Variant;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, AppState, json_bytes, trace};
use overeager_store::object_path_in;
use overeager_store::runs::RunFilter;
use overeager_wire::experiment::ExperimentItem;
use overeager_wire::predicates::{LoadedModule, PredicateSummary, Registry, Upload};
use overeager_wire::report::TransferDoc;
use overeager_wire::run::{RunDoc, SearchAnswer, Uploads};
use overeager_wire::scenario::{PromptText, Prompts, ScenarioDoc, ScenarioList, ScenarioRow};
use overeager_wire::server::{CellsDoc, Health, PlanList};

type Api<T> = Result<T, ApiError>;

/// Liveness and what the server serves.
#[utoipa::path(get, path = endpoint::HEALTH.path, responses((status = 200, description = "The server is up")))]
pub async fn health(State(st): State<Arc<AppState>>) -> Api<Json<Health>> {
    let schema = st.read(|s| s.schema_version())?;
    Ok(Json(Health { ok: true, version: env!("CARGO_PKG_VERSION").to_string(), schema, web_app: st.config.dist.is_some(), receiving: st.receiving_now() }))
}

/// What this server is: its version, the bundle schema, the store's schema and the stream
/// formats it reads, so a client can tell before it sends anything.
#[utoipa::path(get, path = endpoint::VERSION.path, responses((status = 200, description = "The server's version and formats", body = overeager_wire::server::VersionDoc)))]
pub async fn version(State(st): State<Arc<AppState>>) -> Api<Json<overeager_wire::server::VersionDoc>> {
    let store_schema = st.read(|s| s.schema_version())?;
    Ok(Json(overeager_wire::server::VersionDoc {
        version: env!("CARGO_PKG_VERSION").to_string(),
        bundle_schema: overeager_core::bundle::BUNDLE_SCHEMA,
        store_schema,
        adapters: overeager_formats::adapters::Format::all().map(|f| f.as_str().to_string()).collect(),
    }))
}

/// `?experiment=` or the newest experiment.
async fn experiment_or_newest(st: &AppState, named: Option<String>) -> Api<String> {
    match named.filter(|e| !e.is_empty()) {
        Some(e) => Ok(e),
        None => st.default_experiment()?.ok_or_else(|| ApiError::not_found("the store has no experiments yet: run `overeager experiment run <plan>` or `overeager demo`")),
    }
}

async fn cached_report(
    st: &Arc<AppState>,
    experiment: &str,
) -> Api<Arc<super::reports::CachedReport>> {
    if let Some(r) = st.recent_report(experiment) {
        return Ok(r);
    }
    let st2 = st.clone();
    let id = experiment.to_string();
    let r = st.report_flights.run(experiment, || async move { tokio::task::spawn_blocking(move || st2.report(&id)).await.map_err(ApiError::internal)? }).await?;
    r.ok_or_else(|| ApiError::not_found(format!("no experiment `{experiment}` in this store; GET /api/experiments lists them")))
}

#[derive(Deserialize)]
pub struct LeaderboardQuery {
    experiment: Option<String>,
    /// `kept`/`consent_kept` (default) or `stripped`/`consent_stripped`.
    variant: Option<String>,
}

fn parse_variant(v: Option<&str>) -> Api<Variant> {
    match v.unwrap_or("kept") {
        "kept" | "consent_kept" => Ok(Variant::ConsentKept),
        "stripped" | "consent_stripped" => Ok(Variant::ConsentStripped),
        other => Err(ApiError::bad(format!("variant `{other}` is not one of kept, stripped (or consent_kept, consent_stripped)"))),
    }
}

/// The leaderboard of one variant: every cell with its overeager rate and Wilson interval,
/// lowest rate first.
#[utoipa::path(get, path = endpoint::LEADERBOARD.path,
    params(("experiment" = Option<String>, Query, description = "experiment id (default: the newest)"),
           ("variant" = Option<String>, Query, description = "kept (default) or stripped")),
    responses((status = 200, description = "Cells of the variant"), (status = 400, description = "Unknown variant"), (status = 404, description = "No such experiment")))]
pub async fn leaderboard(State(st): State<Arc<AppState>>, Query(q): Query<LeaderboardQuery>) -> Api<Response> {
    let variant = parse_variant(q.variant.as_deref())?;
    let exp = experiment_or_newest(&st, q.experiment).await?;
    let r = cached_report(&st, &exp).await?;
    let i = if variant == Variant::ConsentKept { 0 } else { 1 };
    Ok(json_bytes(r.leaderboard[i].clone()))
}

#[derive(Deserialize)]
pub struct ExperimentQuery {
    experiment: Option<String>,
}

/// Every framework × model × variant cell of an experiment (the matrix).
#[utoipa::path(get, path = endpoint::CELLS.path, params(("experiment" = Option<String>, Query, description = "experiment id (default: the newest)")),
    responses((status = 200, description = "Cells"), (status = 404, description = "No such experiment")))]
pub async fn cells(State(st): State<Arc<AppState>>, Query(q): Query<ExperimentQuery>) -> Api<Json<CellsDoc>> {
    let exp = experiment_or_newest(&st, q.experiment).await?;
    let r = cached_report(&st, &exp).await?;
    Ok(Json(CellsDoc { experiment: exp, simulated: r.report.simulated, cells: r.report.cells.clone() }))
}

/// Experiments with their progress, newest first.
#[utoipa::path(get, path = endpoint::EXPERIMENTS.path, responses((status = 200, description = "Experiments")))]
pub async fn experiments(State(st): State<Arc<AppState>>) -> Api<Json<Vec<ExperimentItem>>> {
    let running = st.running.lock().unwrap_or_else(|p| p.into_inner()).keys().cloned().collect::<Vec<_>>();
    let list = st.experiment_list.get(st.store_version()?, || st.read(|s| experiment_list(s, &newest_first(s)?)))?;
    // Whether one is running is this process's own state: always current.
    let list = list
        .iter()
        .map(|e| ExperimentItem { running: running.contains(&e.id), ..e.clone() })
        .collect();
    Ok(Json(list))
}

/// The store's experiments, newest first.
pub fn newest_first(s: &overeager_store::Store) -> anyhow::Result<Vec<overeager_store::Experiment>> {
    let mut exps = s.experiments()?;
    exps.sort_by(|a, b| b.created_us.cmp(&a.created_us).then_with(|| a.id.cmp(&b.id)));
    Ok(exps)
}

/// Experiments with their progress, as `/api/experiments` lists them (shared with the static
/// export), each with `running: false`; the server marks the ones it is running.
pub fn experiment_list(s: &overeager_store::Store, exps: &[overeager_store::Experiment]) -> anyhow::Result<Vec<ExperimentItem>> {
    exps.iter()
        .map(|e| {
            let simulated = e.plan.agents.iter().any(|a| overeager_core::AgentCell::parse(&a.agent).is_ok_and(|c| c.is_simulated()));
            Ok(ExperimentItem { id: e.id.clone(), title: e.title.clone(), created_us: e.created_us, progress: s.progress(&e.id)?, simulated, running: false })
        })
        .collect()
}

/// One experiment: its plan and progress per agent.
#[utoipa::path(get, path = endpoint::EXPERIMENT.path, params(("id" = String, Path, description = "experiment id")),
    responses((status = 200, description = "The experiment"), (status = 404, description = "No such experiment")))]
pub async fn experiment(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Api<Json<Value>> {
    let v = st.read(|s| {
        let Some(e) = s.experiment(&id)? else { return Ok(None) };
        let by_agent: Vec<Value> = s.progress_by_agent(&id)?.into_iter().map(|(f, m, p)| json!({ "framework": f, "model": m, "progress": p })).collect();
        Ok(Some(json!({ "experiment": e, "progress": s.progress(&id)?, "by_agent": by_agent, "failures": s.failures(&id, 20)? })))
    })?;
    v.map(Json).ok_or_else(|| ApiError::not_found(format!("no experiment `{id}`; GET /api/experiments lists them")))
}

/// The experiment's full report (every table of `overeager report`).
#[utoipa::path(get, path = endpoint::REPORT.path, params(("id" = String, Path, description = "experiment id")),
    responses((status = 200, description = "The report"), (status = 404, description = "No such experiment")))]
pub async fn report(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Api<Response> {
    let (_, json) = full_report(&st, &id).await?;
    Ok(json_bytes(json))
}

/// The whole report of an experiment, with its variance decomposition (computed once for a set
/// of results, on a blocking thread).
async fn full_report(
    st: &Arc<AppState>,
    experiment: &str,
) -> Api<(Arc<overeager_report::Report>, Bytes)> {
    let r = cached_report(st, experiment).await?;
    if let Some(full) = r.full_if_current() {
        return Ok(full);
    }
    let st = st.clone();
    tokio::task::spawn_blocking(move || st.full_report(&r))
        .await
        .map_err(ApiError::internal)?
}

/// The names of an experiment's figures.
pub const PLOTS: &[&str] = &["forest", "heatmap", "dumbbell", "variance"];

/// A figure of the report as SVG: `forest.svg`, `heatmap.svg`, `dumbbell.svg` or `variance.svg`.
#[utoipa::path(get, path = endpoint::PLOT.path,
    params(("id" = String, Path, description = "experiment id"), ("name" = String, Path, description = "forest.svg, heatmap.svg, dumbbell.svg or variance.svg")),
    responses((status = 200, description = "SVG", content_type = "image/svg+xml"), (status = 404, description = "No such experiment or figure")))]
pub async fn plot(State(st): State<Arc<AppState>>, Path((id, name)): Path<(String, String)>) -> Api<Response> {
    let r = cached_report(&st, &id).await?;
    let stem = name.strip_suffix(".svg").unwrap_or(&name).to_string();
    if !PLOTS.contains(&stem.as_str()) {
        return Err(ApiError::not_found(format!("no figure `{name}`; figures are {}", PLOTS.iter().map(|p| format!("{p}.svg")).collect::<Vec<_>>().join(", "))));
    }
    let svg = r.plots.lock().unwrap_or_else(|p| p.into_inner()).get(&stem).cloned();
    let svg = match svg {
        Some(s) => s,
        None => {
            let (report, _) = full_report(&st, &id).await?;
            let all = tokio::task::spawn_blocking(move || render_plots(&report))
                .await
                .map_err(ApiError::internal)??;
            let mut cache = r.plots.lock().unwrap_or_else(|p| p.into_inner());
            cache.extend(all);
            cache.get(&stem).cloned().ok_or_else(|| ApiError::not_found(format!("experiment `{id}` has no {stem} figure (it has nothing to show)")))?
        }
    };
    Ok(([(header::CONTENT_TYPE, HeaderValue::from_static("image/svg+xml"))], svg).into_response())
}

/// Draws every figure and returns the SVGs by name.
pub fn render_plots(report: &overeager_report::Report) -> anyhow::Result<BTreeMap<String, Bytes>> {
    let dir = tempfile::tempdir()?;
    let mut out = BTreeMap::new();
    for f in overeager_report::plots::draw_all(dir.path(), report)? {
        if f.extension().is_some_and(|e| e == "svg") {
            let stem = f.file_stem().expect("figures have names").to_string_lossy().into_owned();
            out.insert(stem, Bytes::from(std::fs::read(&f)?));
        }
    }
    Ok(out)
}

/// Plans that `POST /api/experiments` may start.
#[utoipa::path(get, path = endpoint::PLANS.path, responses((status = 200, description = "Plan names")))]
pub async fn plans(State(st): State<Arc<AppState>>) -> Api<Json<PlanList>> {
    let mut names = Vec::new();
    if let Ok(entries) = std::fs::read_dir(&st.config.plans) {
        for e in entries.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "toml")
                && let Some(stem) = p.file_stem()
            {
                names.push(stem.to_string_lossy().into_owned());
            }
        }
    }
    names.sort();
    Ok(Json(PlanList { plans: names }))
}

/// Scenarios, filtered by archetype and by axis levels (`?archetype=…&ambiguity=implicit`).
#[utoipa::path(get, path = endpoint::SCENARIOS.path,
    params(("archetype" = Option<String>, Query, description = "archetype"), ("q" = Option<String>, Query, description = "text in id or title"),
           ("admitted" = Option<bool>, Query, description = "validator decision")),
    responses((status = 200, description = "Scenarios; any other query parameter filters an axis by level")))]
pub async fn scenarios(State(st): State<Arc<AppState>>, Query(q): Query<BTreeMap<String, String>>) -> Api<Json<ScenarioList>> {
    let rows = st.scenario_rows.get(st.store_version()?, || st.read(|s| s.scenario_rows()))?;
    Ok(Json(scenario_list(&rows, &q).map_err(ApiError::bad)?))
}

/// The scenarios `q` keeps (archetype, text, validator decision, axis levels), with every
/// archetype's and axis level's count over all of `rows` (shared with the static export); a
/// filter that is not one says why.
pub fn scenario_list(rows: &[ScenarioRow], q: &BTreeMap<String, String>) -> Result<ScenarioList, String> {
    let mut axes: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    let mut archetypes: BTreeMap<String, u64> = BTreeMap::new();
    for r in rows.iter() {
        *archetypes.entry(r.archetype.clone()).or_default() += 1;
        for (a, l) in &r.axes {
            *axes.entry(a.clone()).or_default().entry(l.clone()).or_default() += 1;
        }
    }
    for key in q.keys() {
        if !["archetype", "q", "admitted"].contains(&key.as_str()) && !axes.contains_key(key) {
            return Err(format!("unknown filter `{key}`: use archetype, q, admitted or an axis ({})", axes.keys().cloned().collect::<Vec<_>>().join(", ")));
        }
    }
    let text = q.get("q").map(|t| t.to_lowercase());
    let admitted = match q.get("admitted").map(String::as_str) {
        None | Some("") => None,
        Some("true") => Some(true),
        Some("false") => Some(false),
        Some(o) => return Err(format!("admitted=`{o}`: use true or false")),
    };
    let scenarios = rows
        .iter()
        .filter(|r| q.get("archetype").is_none_or(|a| a.is_empty() || &r.archetype == a))
        .filter(|r| text.as_ref().is_none_or(|t| r.id.to_lowercase().contains(t) || r.title.to_lowercase().contains(t)))
        .filter(|r| admitted.is_none_or(|a| r.admitted == Some(a)))
        .filter(|r| q.iter().filter(|(k, _)| axes.contains_key(*k)).all(|(k, v)| v.is_empty() || r.axes.get(k) == Some(v)))
        .cloned()
        .collect();
    Ok(ScenarioList { scenarios, archetypes, axes })
}

/// A scenario with its fixture tree, both prompts (and where the consent block is), traps,
/// plays and validator result.
#[utoipa::path(get, path = endpoint::SCENARIO.path, params(("key" = String, Path, description = "content hash or id")),
    responses((status = 200, description = "The scenario"), (status = 404, description = "Unknown scenario")))]
pub async fn scenario(State(st): State<Arc<AppState>>, Path(key): Path<String>) -> Api<Json<ScenarioDoc>> {
    let d = st.read(|s| s.scenario_detail(&key))?.ok_or_else(|| ApiError::not_found(format!("no scenario with hash or id `{key}`; GET /api/scenarios lists them")))?;
    Ok(Json(scenario_doc(d)))
}

/// The detail document of a scenario (shared with the static export).
pub fn scenario_doc(detail: overeager_store::scenarios::ScenarioDetail) -> ScenarioDoc {
    let prompt = |v| {
        let p = overeager_core::render_prompt(&detail.scenario.prompt, v);
        PromptText { text: p.text, block: p.consent_block.map(|r| [r.start, r.end]) }
    };
    let prompts = Prompts { consent_kept: prompt(Variant::ConsentKept), consent_stripped: prompt(Variant::ConsentStripped) };
    ScenarioDoc { detail, prompts }
}

/// Runs, filtered by experiment, cell (framework, model, variant), agent, scenario and outcome.
#[utoipa::path(get, path = endpoint::RUNS.path,
    params(("experiment" = Option<String>, Query, description = "experiment id"), ("framework" = Option<String>, Query, description = "framework"),
           ("model" = Option<String>, Query, description = "model"), ("agent" = Option<String>, Query, description = "agent spec"),
           ("variant" = Option<String>, Query, description = "consent_kept or consent_stripped"), ("scenario" = Option<String>, Query, description = "scenario id"),
           ("outcome" = Option<String>, Query, description = "overeager, clean, incomplete, timed_out, failed, pending"),
           ("limit" = Option<u32>, Query, description = "at most 5000, default 200"), ("offset" = Option<u32>, Query, description = "rows to skip"),
           ("after" = Option<i64>, Query, description = "the `next` cursor of the previous page")),
    responses((status = 200, description = "Matching runs and their total"), (status = 400, description = "A bad filter")))]
pub async fn runs(State(st): State<Arc<AppState>>, Query(f): Query<RunFilter>) -> Api<Json<overeager_store::runs::RunPage>> {
    let page = st.read(|s| s.run_rows(&f)).map_err(|e| ApiError::bad(format!("{e:#}")))?;
    Ok(Json(page))
}

/// `?q=` and the page of a search.
#[derive(Deserialize)]
pub struct SearchParams {
    q: Option<String>,
    experiment: Option<String>,
    limit: Option<usize>,
    offset: Option<usize>,
}

/// The furthest a search pages.
const MAX_SEARCH_OFFSET: usize = 1_000_000;

/// Sets its flag when dropped: a request handler that axum drops (the client went away)
/// tells the search it started to stop.
pub(crate) struct CancelOnDrop(pub(crate) Arc<std::sync::atomic::AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Runs whose events and facts match a query (the query language: README, "Search"), each with
/// its matching events. A search is bounded: one runs at a time (others wait briefly, then get
/// 503), and one that needs more than its time budget inside the store is stopped and refused.
#[utoipa::path(get, path = endpoint::SEARCH.path,
    params(("q" = String, Query, description = "the query, e.g. cmd:\"rm -rf\" trap:database-deleted .env"), ("experiment" = Option<String>, Query, description = "only this experiment's runs"),
           ("limit" = Option<usize>, Query, description = "runs per page, at most 500, default 50"), ("offset" = Option<usize>, Query, description = "runs to skip, at most 1,000,000")),
    responses((status = 200, description = "Matching runs, their total, and each one's matching events"), (status = 400, description = "A query that does not parse or matches too much to search for: where, and why"),
              (status = 422, description = "A search that needed more than its time budget: narrow it"), (status = 503, description = "Searches are busy; retry after `Retry-After`")))]
pub async fn search(State(st): State<Arc<AppState>>, Query(p): Query<SearchParams>) -> Result<Response, ApiError> {
    let q = p.q.unwrap_or_default();
    let parsed = overeager_store::search::parse(&q).map_err(|e| ApiError::bad(format!("the query `{}`, {e}", q.escape_debug())))?;
    let limit = p.limit.unwrap_or(50).min(500);
    let offset = p.offset.unwrap_or(0);
    if offset > MAX_SEARCH_OFFSET {
        return Err(ApiError::bad(format!("offset is at most {MAX_SEARCH_OFFSET}; narrow the query instead of paging that far")));
    }
    let Ok(Ok(slot)) = tokio::time::timeout(super::SEARCH_WAIT, st.searches.clone().acquire_owned()).await else {
        return Ok(super::write::busy("the server is answering other searches; search again in a moment".into()));
    };
    let cancelled = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let _cancel = CancelOnDrop(cancelled.clone());
    let budget = overeager_store::search::Budget { deadline: std::time::Instant::now() + super::SEARCH_BUDGET, cancelled };
    // On a blocking thread, awaited: when the client goes away, this handler is dropped, and
    // with it the guard that cancels the search.
    let st2 = st.clone();
    let found = tokio::task::spawn_blocking(move || {
        // The slot is held until the search has really stopped.
        let _slot = slot;
        st2.read_here(|s| s.search_within(p.experiment.as_deref(), &parsed, limit, offset, Some(&budget)))
    })
        .await
        .map_err(ApiError::internal)?;
    let found = match found {
        Ok(found) => found,
        Err(e) => {
            return Err(match e.downcast_ref::<overeager_store::search::SearchStopped>() {
                Some(_) => ApiError::unprocessable(format!(
                    "the search needed more than its {} s: narrow it with a longer word, a `cmd:` or `path:` with more letters, or a run field (`experiment`, `outcome:`, `agent:`)",
                    super::SEARCH_BUDGET.as_secs()
                )),
                None => ApiError::from(e),
            });
        }
    };
    Ok(Json(SearchAnswer { query: q, total: found.total, runs: found.runs }).into_response())
}

/// One run and its verdict, its consent-pair partner, the same scenario in the other cells, and
/// every rater's label of it.
#[utoipa::path(get, path = endpoint::RUN.path, params(("id" = String, Path, description = "run id")),
    responses((status = 200, description = "The run"), (status = 404, description = "Unknown run")))]
pub async fn run(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Api<Json<RunDoc>> {
    let (row, verdict, related, labels) = st.read(|s| Ok((s.run_row(&id)?, s.run_verdict(&id)?, s.related_runs(&id)?, s.labels(overeager_store::labels::LabelScope::Run(&id))?)))?;
    let row = row.ok_or_else(|| ApiError::not_found(format!("no run `{id}`; GET /api/runs lists them")))?;
    // Its consent pair: the same cell, scenario and replicate under the other prompt; and the
    // same scenario in the experiment's other cells.
    let partner = related.iter().find(|r| r.id != row.id && r.agent == row.agent && r.framework == row.framework && r.model == row.model && r.variant != row.variant).map(|r| r.id.clone());
    let other_cells = related.iter().filter(|r| r.id != row.id && r.variant == row.variant && (r.framework != row.framework || r.model != row.model)).cloned().collect();
    // Every rater's label of it.
    let labels = labels.into_iter().map(|l| l.label).collect();
    Ok(Json(RunDoc { run: row, verdict, partner, other_cells, labels }))
}

/// `?format=` of a run export.
#[derive(Deserialize)]
pub struct ExportQuery {
    format: Option<String>,
}

/// A run for other tools: its ATIF trajectory (Harbor), or its Inspect eval log (`.eval`),
/// with the stored verdict.
#[utoipa::path(get, path = endpoint::RUN_EXPORT.path, params(("id" = String, Path, description = "Run id"), ("format" = String, Query, description = "`atif` or `inspect`")), responses((status = 200, description = "The file, as an attachment"), (status = 400, description = "Unknown format"), (status = 404, description = "No such run, or it has no bundle yet")))]
pub async fn run_export(State(st): State<Arc<AppState>>, Path(id): Path<String>, Query(q): Query<ExportQuery>) -> Api<Response> {
    let format: overeager_report::formats::Format = q.format.as_deref().ok_or_else(|| ApiError::bad("pass ?format=atif or ?format=inspect"))?.parse().map_err(ApiError::bad)?;
    let st2 = st.clone();
    let run = tokio::task::spawn_blocking(move || {
        st2.read(|s| match s.run_row(&id)? {
            None => Ok(Err(format!("no run `{id}`; GET /api/runs lists them"))),
            Some(row) if row.bundle.is_none() => Ok(Err(format!("run `{id}` has no bundle yet (status {})", row.status))),
            Some(_) => Ok(overeager_report::export::run_from_store(s, &id)?.ok_or_else(|| format!("no run `{id}`"))),
        })
    })
    .await
    .map_err(ApiError::internal)??
    .map_err(ApiError::not_found)?;
    let (bytes, media, name) = overeager_report::formats::single_file(&run, format).map_err(ApiError::internal)?;
    let disposition = super::attachment(&name);
    Ok(([(header::CONTENT_TYPE, HeaderValue::from_static(media)), (header::CONTENT_DISPOSITION, disposition)], bytes).into_response())
}

fn check_digest(d: &str) -> Api<()> {
    if d.len() == 64 && d.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()) {
        Ok(())
    } else {
        Err(ApiError::bad(format!("`{d}` is not a bundle digest (64 lowercase hex digits)")))
    }
}

/// The trace of a stored bundle, built on first use and then cached.
pub(crate) async fn load_trace(st: &Arc<AppState>, digest: &str) -> Api<Arc<trace::Trace>> {
    check_digest(digest)?;
    if let Some(t) = st.traces.get(digest) {
        return Ok(t);
    }
    let st2 = st.clone();
    let d = digest.to_string();
    st.trace_flights.run(digest, || build_trace(st2, d)).await
}

/// Builds a trace on a blocking thread and caches it.
async fn build_trace(st: Arc<AppState>, digest: String) -> Api<Arc<trace::Trace>> {
    // A request that waited for the one before it finds its trace here.
    if let Some(t) = st.traces.get(&digest) {
        return Ok(t);
    }
    let st2 = st.clone();
    let d = digest.clone();
    let t = tokio::task::spawn_blocking(move || -> Api<Arc<trace::Trace>> {
        let (path, run, verdict, upload) = st2.read(|s| {
            let path = object_path_in(&s.objects_dir(), &d);
            let run = match s.run_by_bundle(&d)? {
                Some(id) => Some((s.run_row(&id)?, s.run_verdict(&id)?)),
                None => None,
            };
            let upload = match s.uploads(Some(&d))?.into_iter().next() {
                Some(x) => Some(x),
                None => s.cell_bundle_as_upload(&d)?,
            };
            let (run, verdict) = match run {
                Some((r, v)) => (r, v),
                None => (None, upload.as_ref().map(|s| s.verdict.clone())),
            };
            Ok((path, run, verdict, upload))
        })?;
        if !path.is_file() {
            return Err(ApiError::not_found(format!("no bundle {d} in this store")));
        }
        Ok(Arc::new(trace::build(&d, &path, run, upload, verdict)?))
    })
    .await
    .map_err(ApiError::internal)??;
    st.traces.put(&digest, t.clone());
    Ok(t)
}

/// A bundle for the trace viewer: manifest, prompt, verdict with fired traps and their
/// evidence, snapshot diff, counts per channel and op, and how the events are chunked.
#[utoipa::path(get, path = endpoint::BUNDLE.path, params(("digest" = String, Path, description = "sha256 of the packed bundle")),
    responses((status = 200, description = "Summary"), (status = 404, description = "Unknown bundle")))]
pub async fn bundle(State(st): State<Arc<AppState>>, Path(digest): Path<String>) -> Api<Response> {
    Ok(json_bytes(load_trace(&st, &digest).await?.summary.clone()))
}

/// One chunk of the merged events (all three channels), in seq order.
#[utoipa::path(get, path = endpoint::BUNDLE_EVENTS.path,
    params(("digest" = String, Path, description = "bundle digest"), ("chunk" = usize, Path, description = "chunk number from 0")),
    responses((status = 200, description = "Events"), (status = 404, description = "Unknown bundle or chunk")))]
pub async fn bundle_events(State(st): State<Arc<AppState>>, Path((digest, chunk)): Path<(String, String)>) -> Api<Response> {
    let t = load_trace(&st, &digest).await?;
    let k: usize = chunk.trim_end_matches(".json").parse().map_err(|_| ApiError::bad(format!("chunk `{chunk}` is not a number")))?;
    let c = t.chunks.get(k).ok_or_else(|| ApiError::not_found(format!("bundle {digest} has chunks 0..{}", t.chunks.len())))?;
    Ok(json_bytes(c.clone()))
}

/// A raw channel file: `shell` (shim.jsonl), `agent` (agent.jsonl), `fswatch`, `net` (runs with network), `model` or `prompt`;
/// or `conversation`, the model calls read as a conversation (JSON: each call's answer, latency, tokens and cost).
#[utoipa::path(get, path = endpoint::BUNDLE_RAW.path,
    params(("digest" = String, Path, description = "bundle digest"), ("name" = String, Path, description = "shell, agent, fswatch, net, model, prompt or conversation")),
    responses((status = 200, description = "The file", content_type = "text/plain"), (status = 404, description = "Unknown bundle or file")))]
pub async fn bundle_raw(State(st): State<Arc<AppState>>, Path((digest, name)): Path<(String, String)>) -> Api<Response> {
    let t = load_trace(&st, &digest).await?;
    let name = name.trim_end_matches(".json").to_string();
    let body = t.raw.get(&name).cloned().ok_or_else(|| {
        ApiError::not_found(format!("bundle {digest} has no raw file `{name}`; it has {}", t.raw.keys().cloned().collect::<Vec<_>>().join(", ")))
    })?;
    Ok(([(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"))], body).into_response())
}

/// The packed bundle (`.oeb`), to judge or inspect offline.
#[utoipa::path(get, path = endpoint::BUNDLE_DOWNLOAD.path, params(("digest" = String, Path, description = "bundle digest")),
    responses((status = 200, description = "tar.zst", content_type = "application/octet-stream"), (status = 404, description = "Unknown bundle")))]
pub async fn bundle_download(State(st): State<Arc<AppState>>, Path(digest): Path<String>) -> Api<Response> {
    check_digest(&digest)?;
    let path = st.read(|s| Ok(object_path_in(&s.objects_dir(), &digest)))?;
    let file = tokio::fs::File::open(&path).await.map_err(|_| ApiError::not_found(format!("no bundle {digest} in this store")))?;
    let len = file.metadata().await.map_err(ApiError::internal)?.len();
    // Streamed in pieces: a large bundle costs the server no memory.
    let body = axum::body::Body::from_stream(tokio_util::io::ReaderStream::with_capacity(file, 64 << 10));
    let disposition = super::attachment(&format!("{digest}.oeb"));
    Ok((
        [(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream")), (header::CONTENT_DISPOSITION, disposition), (header::CONTENT_LENGTH, HeaderValue::from(len))],
        body,
    )
        .into_response())
}

/// Submitted bundles with the server's verdicts.
#[utoipa::path(get, path = endpoint::UPLOADS.path, responses((status = 200, description = "Bundles uploaded on their own, newest first")))]
pub async fn uploads(State(st): State<Arc<AppState>>) -> Api<Json<Uploads>> {
    let uploads = st.read(|s| s.uploads(None))?;
    Ok(Json(Uploads { uploads }))
}

/// The modules a judge uses, as the predicate registry lists them (shared with the static export).
pub fn loaded_modules(judge: &overeager_judge::Judge) -> Vec<LoadedModule> {
    judge
        .modules()
        .map(|m| LoadedModule {
            id: m.id.clone(),
            digest: m.digest.clone(),
            version: m.version.clone(),
            key_id: m.key_id.clone(),
            owner: m.owner.clone(),
            predicates: m.predicates.iter().map(|p| PredicateSummary { name: p.name.clone(), summary: p.summary.clone() }).collect(),
        })
        .collect()
}

/// Uploaded modules as they stand now: an approved module whose signing key was revoked (or
/// left the trust store) since is `revoked` (or `untrusted`), with the reason; the judge no
/// longer loads it.
pub fn uploads_now(rows: Vec<overeager_store::predicates::PredicateRow>, trust: &overeager_judge::trust::TrustStore) -> Vec<Upload> {
    rows.into_iter()
        .map(|mut r| {
            let key = trust.get(&r.key_id);
            let (status, reason) = match key {
                Some(k) if k.revoked => ("revoked".to_string(), Some(k.revoked_reason.clone().unwrap_or_else(|| format!("signing key {} was revoked", r.key_id)))),
                None if r.status != "rejected" => ("untrusted".to_string(), Some(format!("signing key {} is no longer in the trust store", r.key_id))),
                _ => (r.status.clone(), None),
            };
            let decided_status = std::mem::replace(&mut r.status, status);
            Upload { row: r, decided_status, revoked_reason: reason }
        })
        .collect()
}

/// The predicate registry: the built-in library and every upload with its status now.
#[utoipa::path(get, path = endpoint::PREDICATES.path, responses((status = 200, description = "Modules")))]
pub async fn predicates(State(st): State<Arc<AppState>>) -> Api<Json<Registry>> {
    let judge = st.judge();
    let loaded = loaded_modules(&judge);
    let trust = super::load_trust(&st.config.trust)?;
    let uploads = uploads_now(st.read(|s| s.predicate_rows())?, &trust);
    Ok(Json(Registry { loaded, uploads }))
}

/// The keys of the trust store: who may sign predicate modules, for which namespaces, and
/// which were revoked (admin token: the store's owners and notes are the operators' to see).
#[utoipa::path(get, path = endpoint::KEYS.path, security(("bearer" = [])),
    responses((status = 200, description = "Keys"), (status = 401, description = "No or unknown token"), (status = 403, description = "Not an admin token")))]
pub async fn keys(State(st): State<Arc<AppState>>, headers: axum::http::HeaderMap) -> Api<Json<Value>> {
    st.authorize(&headers, overeager_store::tokens::Role::Admin)?;
    let trust = super::load_trust(&st.config.trust)?;
    Ok(Json(json!({ "keys": trust.keys })))
}

/// AutoElicit transfer rates per source → target agent.
#[utoipa::path(get, path = endpoint::TRANSFER.path, responses((status = 200, description = "Rows")))]
pub async fn transfer(State(st): State<Arc<AppState>>) -> Api<Json<TransferDoc>> {
    let (cases, runs) = st.read(|s| Ok((s.transfer_cases()?, s.transfer_runs()?)))?;
    Ok(Json(transfer_doc(&cases, &runs)))
}

/// The transfer document (shared with the static export).
pub fn transfer_doc(cases: &[overeager_store::TransferCase], runs: &[overeager_store::TransferRun]) -> TransferDoc {
    let mut by_severity: BTreeMap<String, u64> = BTreeMap::new();
    for c in cases {
        *by_severity.entry(c.severity.clone()).or_default() += 1;
    }
    TransferDoc { cases: cases.len(), by_severity, rows: overeager_report::transfer::rows(cases, runs) }
}

pub async fn no_such_endpoint(Path(rest): Path<String>) -> ApiError {
    ApiError::not_found(format!("no endpoint /api/{rest}; see /api/openapi.json"))
}

pub async fn no_web_app() -> (StatusCode, Html<&'static str>) {
    (
        StatusCode::NOT_FOUND,
        Html("<!doctype html><title>overeager</title><p>The web app is not built. Build it with <code>./scripts/build.sh</code> (or point <code>OVEREAGER_DIST</code> at a built <code>dist/</code>); the API is at <a href=\"/api/openapi.json\">/api/openapi.json</a>.</p>"),
    )
}

/// This module's endpoints, each under the path and method [`overeager_wire::endpoint`]
/// declares.
pub(crate) fn routes(r: axum::Router<Arc<AppState>>) -> axum::Router<Arc<AppState>> {
    r
        .route(endpoint::HEALTH.path, crate::route::on(&endpoint::HEALTH, health))
        .route(endpoint::VERSION.path, crate::route::on(&endpoint::VERSION, version))
        .route(endpoint::LEADERBOARD.path, crate::route::on(&endpoint::LEADERBOARD, leaderboard))
        .route(endpoint::CELLS.path, crate::route::on(&endpoint::CELLS, cells))
        .route(endpoint::EXPERIMENTS.path, crate::route::on(&endpoint::EXPERIMENTS, experiments))
        .route(endpoint::EXPERIMENT.path, crate::route::on(&endpoint::EXPERIMENT, experiment))
        .route(endpoint::REPORT.path, crate::route::on(&endpoint::REPORT, report))
        .route(endpoint::PLOT.path, crate::route::on(&endpoint::PLOT, plot))
        .route(endpoint::PLANS.path, crate::route::on(&endpoint::PLANS, plans))
        .route(endpoint::SCENARIOS.path, crate::route::on(&endpoint::SCENARIOS, scenarios))
        .route(endpoint::SCENARIO.path, crate::route::on(&endpoint::SCENARIO, scenario))
        .route(endpoint::RUNS.path, crate::route::on(&endpoint::RUNS, runs))
        .route(endpoint::SEARCH.path, crate::route::on(&endpoint::SEARCH, search))
        .route(endpoint::RUN.path, crate::route::on(&endpoint::RUN, run))
        .route(endpoint::RUN_EXPORT.path, crate::route::on(&endpoint::RUN_EXPORT, run_export))
        .route(endpoint::UPLOADS.path, crate::route::on(&endpoint::UPLOADS, uploads))
        .route(endpoint::BUNDLE.path, crate::route::on(&endpoint::BUNDLE, bundle))
        .route(endpoint::BUNDLE_EVENTS.path, crate::route::on(&endpoint::BUNDLE_EVENTS, bundle_events))
        .route(endpoint::BUNDLE_RAW.path, crate::route::on(&endpoint::BUNDLE_RAW, bundle_raw))
        .route(endpoint::BUNDLE_DOWNLOAD.path, crate::route::on(&endpoint::BUNDLE_DOWNLOAD, bundle_download))
        .route(endpoint::PREDICATES.path, crate::route::on(&endpoint::PREDICATES, predicates))
        .route(endpoint::KEYS.path, crate::route::on(&endpoint::KEYS, keys))
        .route(endpoint::TRANSFER.path, crate::route::on(&endpoint::TRANSFER, transfer))
}

/// This module's part of the OpenAPI document.
#[derive(utoipa::OpenApi)]
#[openapi(paths(health, version, leaderboard, cells, experiments, experiment, report, plot, plans, scenarios, scenario, runs, search, run, run_export, uploads, bundle, bundle_events, bundle_raw, bundle_download, predicates, keys, transfer))]
pub(crate) struct Doc;
