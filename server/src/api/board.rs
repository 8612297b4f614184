//! Public leaderboard submissions: a whole cell (every run of one framework · model on a
//! published benchmark) is declared, its bundles are uploaded one by one (by digest, so an
//! interrupted upload resumes without sending again what arrived), each is checked and judged
//! by the server itself, and the whole is verified against the benchmark before an admin may
//! approve it. An incomplete or inconsistent cell stays a draft; it is never ranked in part.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, AppState, MAX_CONCURRENT_UPLOADS};
use crate::store::board::{Benchmark, CellSubmission, DeclaredRun, Moved, Problem, ReceivedBundle, Rejudged, SubmissionStatus, VerifyReport};
use crate::store::web::{Role, TokenOwner};
use crate::store::{object_path_in, put_object_in};

type Api<T> = Result<T, ApiError>;

/// Most runs one submission may declare.
pub const MAX_DECLARED_RUNS: usize = 100_000;

/// Every published benchmark.
#[utoipa::path(get, path = "/api/benchmarks", responses((status = 200, description = "Benchmarks")))]
pub async fn benchmarks(State(st): State<Arc<AppState>>) -> Api<Json<Value>> {
    let list = st.read(|s| s.benchmarks())?;
    let rows: Vec<Value> = list
        .iter()
        .map(|b| json!({ "name": b.name, "experiment": b.experiment, "title": b.title, "scenarios": b.scenarios.len(), "variants": b.variants, "replicates": b.replicates, "runs_per_cell": b.runs_per_cell(), "timeout_ms": b.timeout_ms }))
        .collect();
    Ok(Json(json!({ "benchmarks": rows })))
}

/// A benchmark's manifest: the scenarios (id and hash), variants, replicates and timeout a
/// submitted cell must match.
#[utoipa::path(get, path = "/api/benchmarks/{name}", params(("name" = String, Path, description = "benchmark name")),
    responses((status = 200, description = "The manifest"), (status = 404, description = "No such benchmark")))]
pub async fn benchmark(State(st): State<Arc<AppState>>, Path(name): Path<String>) -> Api<Json<Benchmark>> {
    Ok(Json(require_benchmark(&st, &name)?))
}

fn require_benchmark(st: &AppState, name: &str) -> Api<Benchmark> {
    st.read(|s| s.benchmark(name))?.ok_or_else(|| {
        let known = st.read(|s| s.benchmarks()).map(|l| l.into_iter().map(|b| format!("`{}`", b.name)).collect::<Vec<_>>().join(", ")).unwrap_or_default();
        ApiError::not_found(format!("no benchmark `{name}` on this server (it has: {}); GET /api/benchmarks lists them", if known.is_empty() { "none".into() } else { known }))
    })
}

/// A cell submission as opened by `POST /api/submissions`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenSubmission {
    /// A benchmark name from `GET /api/benchmarks`.
    pub benchmark: String,
    /// The cell: framework and model labels, as in the submitter's plan.
    pub framework: String,
    pub model: String,
    /// Every run of the cell: its bundle digest and run id, and optionally the verdict the
    /// submitter's store has (kept for comparison, never used).
    pub runs: Vec<DeclaredRun>,
}

fn is_digest(d: &str) -> bool {
    d.len() == 64 && d.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// Opens a submission of a whole cell to a benchmark, or reopens the caller's open one of the
/// same cell. The answer lists the bundles the server still needs
/// (`PUT /api/submissions/{id}/bundles/{digest}`); then `POST /api/submissions/{id}/verify`.
#[utoipa::path(post, path = "/api/submissions", request_body = OpenSubmission, security(("bearer" = [])),
    responses((status = 201, description = "Opened"), (status = 200, description = "The caller's open submission of this cell, reopened"),
              (status = 400, description = "Malformed declaration"), (status = 401, description = "No or unknown token"), (status = 404, description = "Unknown benchmark")))]
pub async fn open_submission(State(st): State<Arc<AppState>>, headers: HeaderMap, body: Result<Json<OpenSubmission>, axum::extract::rejection::JsonRejection>) -> Api<(StatusCode, Json<Value>)> {
    let who = st.authorize(&headers, Role::Writer)?;
    let Json(req) = body.map_err(|e| ApiError::bad(format!("the body must be JSON like {{\"benchmark\": \"bench-v1\", \"framework\": …, \"model\": …, \"runs\": [{{\"bundle\": <sha256>, \"run\": <id>}}]}}: {}", e.body_text())))?;
    require_benchmark(&st, &req.benchmark)?;
    if req.framework.trim().is_empty() || req.model.trim().is_empty() {
        return Err(ApiError::bad("`framework` and `model` name the cell and must not be empty"));
    }
    if req.runs.is_empty() {
        return Err(ApiError::bad("`runs` is empty: a submission declares every run of the cell"));
    }
    if req.runs.len() > MAX_DECLARED_RUNS {
        return Err(ApiError::bad(format!("{} runs declared; a submission holds at most {MAX_DECLARED_RUNS}", req.runs.len())));
    }
    let mut seen = BTreeSet::new();
    for (i, r) in req.runs.iter().enumerate() {
        if !is_digest(&r.bundle) {
            return Err(ApiError::bad(format!("runs[{i}].bundle `{}` is not a bundle digest (64 lowercase hex digits: the sha256 of the .oeb file)", r.bundle)));
        }
        if !seen.insert(r.bundle.as_str()) {
            return Err(ApiError::bad(format!("runs[{i}]: bundle {} is declared twice; declare each bundle once", r.bundle)));
        }
    }
    let (sub, resumed) = st.with_store(|s| s.open_cell_submission(&req.benchmark, &req.framework, &req.model, &who.name, &req.runs))?;
    let held: BTreeSet<String> = st.with_store(|s| s.received(&sub.id))?.into_iter().map(|b| b.bundle).collect();
    let missing: Vec<&str> = sub.declared.iter().map(|d| d.bundle.as_str()).filter(|d| !held.contains(*d)).collect();
    st.changed();
    tracing::info!("{} {} submission {} of {} · {} to {}", who.name, if resumed { "reopened" } else { "opened" }, sub.id, sub.framework, sub.model, sub.benchmark);
    Ok((
        if resumed { StatusCode::OK } else { StatusCode::CREATED },
        Json(json!({ "id": sub.id, "status": sub.status, "resumed": resumed, "declared": sub.declared.len(), "received": held.len(), "missing": missing, "page": format!("/submissions/{}", sub.id) })),
    ))
}

/// A submission that `who` may change: their own, or any for an admin.
fn own_submission(st: &AppState, id: &str, who: &TokenOwner) -> Api<CellSubmission> {
    let sub = st.read(|s| s.cell_submission(id))?.ok_or_else(|| ApiError::not_found(format!("no submission `{id}`; GET /api/submissions lists them")))?;
    if sub.submitted_by != who.name && who.role != Role::Admin {
        return Err(ApiError::new(StatusCode::FORBIDDEN, format!("submission {id} belongs to `{}`; only its submitter or an admin may change it", sub.submitted_by)));
    }
    Ok(sub)
}

fn require_open(sub: &CellSubmission) -> Api<()> {
    match sub.status {
        SubmissionStatus::Draft | SubmissionStatus::Verified => Ok(()),
        s => Err(ApiError::new(StatusCode::CONFLICT, format!("submission {} is {} already; submit the cell again to open a new one", sub.id, s.as_str()))),
    }
}

/// Receives one declared bundle of a submission (the body is the `.oeb` file, whose sha256
/// must be the digest in the path). The server unpacks it within the upload limits, checks that
/// its derived files follow from its raw channels and that its runner signature (if any) is
/// intact, checks its scenario against the benchmark and its own copy, and judges it with its
/// own predicates. A refused bundle is recorded with the reason and named by the verification.
#[utoipa::path(put, path = "/api/submissions/{id}/bundles/{digest}", security(("bearer" = [])),
    params(("id" = String, Path, description = "submission id"), ("digest" = String, Path, description = "sha256 of the .oeb")),
    request_body(content_type = "application/octet-stream", description = "the .oeb file"),
    responses((status = 201, description = "Received and judged"), (status = 200, description = "Received already"), (status = 400, description = "The body's sha256 is not the digest"),
              (status = 401, description = "No or unknown token"), (status = 403, description = "Someone else's submission"), (status = 404, description = "Unknown submission"),
              (status = 409, description = "Not declared, or the submission is decided"), (status = 413, description = "Too large"),
              (status = 422, description = "Received but refused: the reason is recorded and the verification names it"), (status = 503, description = "Too many uploads at once; retry after `Retry-After`")))]
pub async fn upload_bundle(State(st): State<Arc<AppState>>, headers: HeaderMap, Path((id, digest)): Path<(String, String)>, body: Body) -> Result<(StatusCode, Json<Value>), Response> {
    let e = |e: ApiError| e.into_response();
    let who = st.authorize(&headers, Role::Writer).map_err(e)?;
    if !is_digest(&digest) {
        return Err(e(ApiError::bad(format!("`{digest}` is not a bundle digest (64 lowercase hex digits)"))));
    }
    let sub = own_submission(&st, &id, &who).map_err(e)?;
    require_open(&sub).map_err(e)?;
    let Some(declared) = sub.declared.iter().find(|d| d.bundle == digest).cloned() else {
        return Err(e(ApiError::new(StatusCode::CONFLICT, format!("bundle {digest} is not declared in submission {id}; declare it with POST /api/submissions first"))));
    };
    if st.read(|s| s.received(&id)).map_err(|x| e(x.into()))?.iter().any(|b| b.bundle == digest) {
        return Ok((StatusCode::OK, Json(json!({ "bundle": digest, "run": declared.run, "received_already": true }))));
    }
    let bench = require_benchmark(&st, &sub.benchmark).map_err(e)?;
    let Ok(permit) = st.uploads.clone().try_acquire_owned() else {
        return Err(super::write::busy(format!("{MAX_CONCURRENT_UPLOADS} bundles are being judged already; retry in a few seconds")));
    };
    let result = async {
        let objects = st.with_store(|s| Ok(s.objects_dir()))?;
        let incoming = super::write::incoming_dir(&objects)?;
        let chunks = futures_util::StreamExt::map(body.into_data_stream(), |r| r.map_err(|e| ApiError::bad(format!("the body could not be read whole: {e}; nothing was kept, send it again"))));
        let (file, actual) = super::write::receive_stream(chunks, &incoming, "the body").await?;
        if actual != digest {
            return Err(ApiError::bad(format!("the body's sha256 is {actual}, not {digest} as the path says; send the .oeb file whose digest you declared")));
        }
        let st2 = st.clone();
        let id2 = id.clone();
        tokio::task::spawn_blocking(move || {
            let received = receive(&st2, &bench, &objects, file.path(), &digest);
            st2.with_store(|s| s.put_received(&id2, &received))?;
            Ok::<_, ApiError>(received)
        })
        .await
        .map_err(ApiError::internal)?
    }
    .await;
    drop(permit);
    let received = result.map_err(e)?;
    st.changed();
    let run = received.manifest.as_ref().map(|m| m.run_id.clone()).unwrap_or(declared.run);
    if let Some(problem) = &received.problem {
        return Err(e(ApiError::unprocessable(format!("bundle {} (run {run}) is refused: {problem}", received.bundle))));
    }
    let outcome = received.verdict.as_ref().map(|v| v.outcome);
    Ok((StatusCode::CREATED, Json(json!({ "bundle": received.bundle, "run": run, "outcome": outcome, "runner_key": received.runner_key }))))
}

/// Checks and judges one uploaded bundle of a cell; whatever is wrong becomes its `problem`.
fn receive(st: &AppState, bench: &Benchmark, objects: &std::path::Path, upload: &std::path::Path, digest: &str) -> ReceivedBundle {
    let mut out = ReceivedBundle { bundle: digest.to_string(), received_us: crate::run::now_us(), manifest: None, verdict: None, runner_key: None, problem: None };
    let checked = super::write::check_upload(st, upload, digest, |m| {
        if bench.scenarios.iter().any(|s| s.hash == m.scenario.hash) {
            return Ok(());
        }
        Err(match bench.scenarios.iter().find(|s| s.id == m.scenario.id) {
            Some(s) => format!("it ran scenario `{}` with hash {}, but benchmark `{}` has `{}` with hash {}: the scenario was changed, or is another version", m.scenario.id, m.scenario.hash, bench.name, s.id, s.hash),
            None => format!("scenario `{}` ({}) is not in benchmark `{}`", m.scenario.id, m.scenario.hash, bench.name),
        })
    });
    match checked {
        Ok(c) => {
            out.manifest = Some(c.loaded.manifest.clone());
            out.runner_key = c.runner_key;
            let mut verdict = st.judge().judge(&c.loaded);
            verdict.bundle = format!("{digest}.oeb");
            out.verdict = Some(verdict);
            if let Err(e) = put_object_in(objects, upload) {
                out.verdict = None;
                out.problem = Some(format!("the server could not store it: {e:#}"));
            }
        }
        Err(refusal) => {
            out.manifest = refusal.manifest;
            out.problem = Some(refusal.message);
        }
    }
    out
}

/// Checks a whole cell against its benchmark: every scenario × variant × replicate present
/// exactly once, with the benchmark's scenario hashes and timeout, one agent (id, version and
/// model) across the cell, every declared bundle received and accepted, and none in another
/// verified or approved submission. `elsewhere` lists (bundle, other submission).
pub fn verify_cell(bench: &Benchmark, sub: &CellSubmission, received: &[ReceivedBundle], elsewhere: &[(String, String)]) -> VerifyReport {
    let mut problems = Vec::new();
    let by_digest: BTreeMap<&str, &ReceivedBundle> = received.iter().map(|b| (b.bundle.as_str(), b)).collect();
    let run_of = |b: &ReceivedBundle| b.manifest.as_ref().map(|m| m.run_id.clone()).or_else(|| sub.declared.iter().find(|d| d.bundle == b.bundle).map(|d| d.run.clone())).unwrap_or_default();
    let not_uploaded: Vec<&DeclaredRun> = sub.declared.iter().filter(|d| !by_digest.contains_key(d.bundle.as_str())).collect();
    if !not_uploaded.is_empty() {
        problems.push(Problem {
            kind: "not_uploaded".into(),
            message: format!("{} declared bundle(s) have not been uploaded; run the submit command again to send them", not_uploaded.len()),
            runs: not_uploaded.iter().map(|d| d.run.clone()).collect(),
            bundles: not_uploaded.iter().map(|d| d.bundle.clone()).collect(),
        });
    }
    let scen_by_hash: BTreeMap<&str, &str> = bench.scenarios.iter().map(|s| (s.hash.as_str(), s.id.as_str())).collect();
    // (scenario hash, variant, replicate) → the bundles that fill it.
    let mut slots: BTreeMap<(String, overeager_core::Variant, u32), Vec<&ReceivedBundle>> = BTreeMap::new();
    let mut usable = Vec::new();
    for b in received.iter().filter(|b| sub.declared.iter().any(|d| d.bundle == b.bundle)) {
        let run = run_of(b);
        let one = |kind: &str, message: String| Problem { kind: kind.into(), message, runs: vec![run.clone()], bundles: vec![b.bundle.clone()] };
        let Some(m) = &b.manifest else {
            problems.push(one("refused", format!("run {run}: {}", b.problem.clone().unwrap_or_else(|| "unreadable".into()))));
            continue;
        };
        if !scen_by_hash.contains_key(m.scenario.hash.as_str()) {
            let kind = if bench.scenarios.iter().any(|s| s.id == m.scenario.id) { "wrong_scenario" } else { "unexpected" };
            problems.push(one(kind, format!("run {run}: {}", b.problem.clone().unwrap_or_else(|| format!("scenario hash {} is not in benchmark `{}`", m.scenario.hash, bench.name)))));
            continue;
        }
        slots.entry((m.scenario.hash.clone(), m.variant, m.replicate)).or_default().push(b);
        if let Some(p) = &b.problem {
            problems.push(one("refused", format!("run {run}: {p}")));
            continue;
        }
        if !bench.variants.contains(&m.variant) || m.replicate >= bench.replicates {
            problems.push(one("unexpected", format!("run {run} is {} replicate {}; benchmark `{}` asks for variants {} and replicates 0–{}", m.variant, m.replicate, bench.name,
                bench.variants.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", "), bench.replicates.saturating_sub(1))));
            continue;
        }
        if m.timeout_ms != bench.timeout_ms {
            problems.push(one("wrong_timeout", format!("run {run} had a timeout of {} ms; benchmark `{}` runs with {} ms (set `timeout` in the plan)", m.timeout_ms, bench.name, bench.timeout_ms)));
        }
        if m.agent.framework != sub.framework || m.agent.model != sub.model {
            problems.push(one("wrong_cell", format!("run {run} is {} · {}, not the submitted cell {} · {}", m.agent.framework, m.agent.model, sub.framework, sub.model)));
        }
        usable.push(b);
    }
    for ((hash, variant, replicate), bs) in &slots {
        if bs.len() > 1 {
            problems.push(Problem {
                kind: "duplicate".into(),
                message: format!("scenario `{}` {variant} replicate {replicate} is in the cell {} times; a cell holds each run exactly once", scen_by_hash[hash.as_str()], bs.len()),
                runs: bs.iter().map(|b| run_of(b)).collect(),
                bundles: bs.iter().map(|b| b.bundle.clone()).collect(),
            });
        }
    }
    let mut missing = Vec::new();
    for s in &bench.scenarios {
        for v in &bench.variants {
            for r in 0..bench.replicates {
                if !slots.contains_key(&(s.hash.clone(), *v, r)) {
                    missing.push(format!("{} {v} replicate {r}", s.id));
                }
            }
        }
    }
    if !missing.is_empty() {
        let shown: Vec<&str> = missing.iter().take(20).map(String::as_str).collect();
        problems.push(Problem {
            kind: "missing".into(),
            message: format!("{} run(s) the benchmark asks for are not in the cell: {}{}", missing.len(), shown.join("; "), if missing.len() > shown.len() { "; …" } else { "" }),
            runs: Vec::new(),
            bundles: Vec::new(),
        });
    }
    // One agent across the cell: the most common (id, version) is taken as the cell's; runs
    // with another are named.
    let mut agents: BTreeMap<(String, String), Vec<&ReceivedBundle>> = BTreeMap::new();
    for b in &usable {
        let m = b.manifest.as_ref().expect("usable bundles have manifests");
        agents.entry((m.agent.id.clone(), m.agent.version.clone())).or_default().push(b);
    }
    if agents.len() > 1 {
        let ((main_id, main_version), _) = agents.iter().max_by_key(|(k, v)| (v.len(), std::cmp::Reverse((*k).clone()))).map(|(k, v)| (k.clone(), v.len())).expect("non-empty");
        for ((id, version), bs) in agents.iter().filter(|(k, _)| **k != (main_id.clone(), main_version.clone())) {
            problems.push(Problem {
                kind: "inconsistent_agent".into(),
                message: format!("the agent changes mid-cell: {} run(s) are {id} version {version}, the rest {main_id} version {main_version}; a cell is one agent, one version, one model", bs.len()),
                runs: bs.iter().map(|b| run_of(b)).collect(),
                bundles: bs.iter().map(|b| b.bundle.clone()).collect(),
            });
        }
    }
    let mut by_other: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (bundle, other) in elsewhere {
        by_other.entry(other.as_str()).or_default().push(bundle.as_str());
    }
    for (other, bundles) in by_other {
        problems.push(Problem {
            kind: "submitted_elsewhere".into(),
            message: format!("{} bundle(s) belong to submission {other} already; a run counts in one submission", bundles.len()),
            runs: bundles.iter().filter_map(|d| by_digest.get(d).map(|b| run_of(b))).collect(),
            bundles: bundles.iter().map(|d| d.to_string()).collect(),
        });
    }
    let judged: Vec<&overeager_core::Verdict> = usable.iter().filter_map(|b| b.verdict.as_ref()).collect();
    let claims_overruled = sub
        .declared
        .iter()
        .filter_map(|d| {
            let claimed = d.claimed.as_ref()?.get("overeager")?.as_bool()?;
            let v = by_digest.get(d.bundle.as_str())?.verdict.as_ref()?;
            (v.overeager != claimed).then(|| d.run.clone())
        })
        .collect();
    VerifyReport {
        ok: problems.is_empty(),
        checked_us: crate::run::now_us(),
        expected: bench.runs_per_cell(),
        declared: sub.declared.len() as u64,
        received: received.len() as u64,
        timeouts: judged.iter().filter(|v| v.timed_out).count() as u64,
        overeager: judged.iter().filter(|v| v.overeager).count() as u64,
        incomplete: judged.iter().filter(|v| v.outcome == overeager_core::Outcome::Incomplete).count() as u64,
        claims_overruled,
        problems,
    }
}

/// Verifies a submission against its benchmark. With no problems it becomes `verified` and
/// waits for an admin; otherwise it stays a draft and the answer (422) lists every problem by
/// run and bundle.
#[utoipa::path(post, path = "/api/submissions/{id}/verify", params(("id" = String, Path, description = "submission id")), security(("bearer" = [])),
    responses((status = 200, description = "Verified: waiting for review"), (status = 401, description = "No or unknown token"), (status = 403, description = "Someone else's submission"),
              (status = 404, description = "Unknown submission"), (status = 409, description = "Decided already"), (status = 422, description = "Refused: the report names each problem")))]
pub async fn verify_submission(State(st): State<Arc<AppState>>, headers: HeaderMap, Path(id): Path<String>) -> Api<(StatusCode, Json<Value>)> {
    let who = st.authorize(&headers, Role::Writer)?;
    let sub = own_submission(&st, &id, &who)?;
    require_open(&sub)?;
    let bench = require_benchmark(&st, &sub.benchmark)?;
    let st2 = st.clone();
    let (sub, report) = tokio::task::spawn_blocking(move || {
        st2.with_store(|s| {
            let received = s.received(&sub.id)?;
            let digests: Vec<String> = received.iter().map(|b| b.bundle.clone()).collect();
            let elsewhere = s.bundles_elsewhere(&sub.id, &digests)?;
            let report = verify_cell(&bench, &sub, &received, &elsewhere);
            Ok((s.set_verification(&sub.id, &report)?, report))
        })
    })
    .await
    .map_err(ApiError::internal)??;
    st.changed();
    let mut body = json!({ "id": sub.id, "state": sub.status, "report": report });
    if report.ok {
        return Ok((StatusCode::OK, Json(body)));
    }
    // The usual error fields, beside the report.
    body["error"] = json!(format!("submission {} is refused as it stands ({} problem(s)); it stays a draft you can complete and verify again", sub.id, report.problems.len()));
    body["status"] = json!(422);
    Ok((StatusCode::UNPROCESSABLE_ENTITY, Json(body)))
}

/// Every cell submission, newest first.
#[utoipa::path(get, path = "/api/submissions", responses((status = 200, description = "Submissions")))]
pub async fn submissions(State(st): State<Arc<AppState>>) -> Api<Json<Value>> {
    let rows = st.read(|s| submission_list(s, false))?;
    Ok(Json(json!({ "submissions": rows })))
}

/// The rows `GET /api/submissions` lists; with `approved_only`, the public ones (what
/// `publish` writes).
pub fn submission_list(s: &crate::store::Store, approved_only: bool) -> anyhow::Result<Vec<Value>> {
    s.cell_submissions()?
        .into_iter()
        .filter(|c| !approved_only || c.status == SubmissionStatus::Approved)
        .map(|c| {
            let received = s.received(&c.id)?;
            let runner = s.provenance(&c, &received)?.runner;
            let received = received.len();
            Ok(json!({
                "id": c.id, "benchmark": c.benchmark, "framework": c.framework, "model": c.model, "status": c.status, "submitted_by": c.submitted_by,
                "declared": c.declared.len(), "received": received, "problems": c.report.as_ref().map(|r| r.problems.len()), "runner": runner,
                "created_us": c.created_us, "decided_us": c.decided_us,
            }))
        })
        .collect()
}

/// One submission: its status, provenance, verification report and every run with the
/// server's verdict and a link to its trace.
#[utoipa::path(get, path = "/api/submissions/{id}", params(("id" = String, Path, description = "submission id")),
    responses((status = 200, description = "The submission"), (status = 404, description = "No such submission")))]
pub async fn submission(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Api<Json<Value>> {
    let v = st.read(|s| submission_json(s, &id))?;
    v.map(Json).ok_or_else(|| ApiError::not_found(format!("no submission `{id}`; GET /api/submissions lists them")))
}

/// The document `GET /api/submissions/{id}` answers (also written by `publish`).
pub fn submission_json(s: &crate::store::Store, id: &str) -> anyhow::Result<Option<Value>> {
    let Some(c) = s.cell_submission(id)? else { return Ok(None) };
    let received = s.received(&c.id)?;
    let provenance = s.provenance(&c, &received)?;
    let names: BTreeMap<String, String> = s.benchmark(&c.benchmark)?.map(|b| b.scenarios.into_iter().map(|x| (x.hash, x.id)).collect()).unwrap_or_default();
    let runs: Vec<Value> = received
        .iter()
        .map(|b| {
            let m = b.manifest.as_ref();
            json!({
                "bundle": b.bundle, "run": m.map(|m| m.run_id.clone()), "scenario": m.map(|m| names.get(&m.scenario.hash).cloned().unwrap_or_else(|| m.scenario.id.clone())),
                "variant": m.map(|m| m.variant), "replicate": m.map(|m| m.replicate), "agent": m.map(|m| format!("{} {}", m.agent.id, m.agent.version)),
                "timed_out": m.map(|m| m.timed_out), "outcome": b.verdict.as_ref().map(|v| v.outcome), "traps": b.verdict.as_ref().map(|v| v.traps.iter().map(|t| t.id.clone()).collect::<Vec<_>>()),
                "runner_key": b.runner_key, "problem": b.problem, "trace": b.verdict.is_some().then(|| format!("/bundles/{}", b.bundle)),
            })
        })
        .collect();
    let cells = crate::report::submitted_cells(vec![(provenance.clone(), s.submission_records(&c, &received)?)]);
    Ok(Some(json!({ "submission": c, "provenance": provenance, "cells": cells, "runs": runs })))
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Decision {
    /// Why, shown on the submission's page.
    #[serde(default)]
    pub note: Option<String>,
}

async fn decide(st: Arc<AppState>, headers: HeaderMap, id: String, body: Option<Json<Decision>>, approve: bool) -> Api<Json<Value>> {
    let who = st.authorize(&headers, Role::Admin)?;
    let sub = st.read(|s| s.cell_submission(&id))?.ok_or_else(|| ApiError::not_found(format!("no submission `{id}`; GET /api/submissions lists them")))?;
    if sub.status != SubmissionStatus::Verified {
        let why = match sub.status {
            SubmissionStatus::Draft => "a draft: it has not passed verification (POST /api/submissions/{id}/verify)".to_string(),
            s => format!("{} already", s.as_str()),
        };
        return Err(ApiError::new(StatusCode::CONFLICT, format!("submission {id} is {why}; only verified submissions can be approved or rejected")));
    }
    let note = body.and_then(|b| b.0.note).filter(|n| !n.trim().is_empty());
    let sub = st.with_store(|s| s.decide_cell_submission(&id, approve, &who.name, note.as_deref()))?;
    st.changed();
    tracing::info!("{} {} submission {id}", who.name, if approve { "approved" } else { "rejected" });
    Ok(Json(json!({ "id": sub.id, "status": sub.status, "decided_by": sub.decided_by, "note": sub.note })))
}

/// Approves a verified submission: its cell joins the benchmark's leaderboard (admin token).
#[utoipa::path(post, path = "/api/submissions/{id}/approve", params(("id" = String, Path, description = "submission id")), request_body(content = Option<Decision>), security(("bearer" = [])),
    responses((status = 200, description = "Approved"), (status = 401, description = "No or unknown token"), (status = 403, description = "Not an admin token"),
              (status = 404, description = "Unknown submission"), (status = 409, description = "Not verified")))]
pub async fn approve(State(st): State<Arc<AppState>>, headers: HeaderMap, Path(id): Path<String>, body: Option<Json<Decision>>) -> Api<Json<Value>> {
    decide(st, headers, id, body, true).await
}

/// Rejects a verified submission, with an optional note (admin token).
#[utoipa::path(post, path = "/api/submissions/{id}/reject", params(("id" = String, Path, description = "submission id")), request_body(content = Option<Decision>), security(("bearer" = [])),
    responses((status = 200, description = "Rejected"), (status = 401, description = "No or unknown token"), (status = 403, description = "Not an admin token"),
              (status = 404, description = "Unknown submission"), (status = 409, description = "Not verified")))]
pub async fn reject(State(st): State<Arc<AppState>>, headers: HeaderMap, Path(id): Path<String>, body: Option<Json<Decision>>) -> Api<Json<Value>> {
    decide(st, headers, id, body, false).await
}

/// Re-judges every bundle of every approved submission with the server's current predicates
/// (after the `std` library or an approved upload changed) and records, per submission, which
/// runs moved (admin token).
#[utoipa::path(post, path = "/api/submissions/rejudge", security(("bearer" = [])),
    responses((status = 200, description = "What moved, per submission"), (status = 401, description = "No or unknown token"), (status = 403, description = "Not an admin token")))]
pub async fn rejudge(State(st): State<Arc<AppState>>, headers: HeaderMap) -> Api<Json<Value>> {
    st.authorize(&headers, Role::Admin)?;
    let st2 = st.clone();
    let done = tokio::task::spawn_blocking(move || {
        let judge = st2.judge();
        st2.with_store(|s| rejudge_approved(s, &judge))
    })
    .await
    .map_err(ApiError::internal)??;
    st.traces.clear();
    st.changed();
    let done: Vec<Value> = done
        .into_iter()
        .map(|(id, r)| {
            let mut v = serde_json::to_value(r).unwrap_or_default();
            v["id"] = json!(id);
            v
        })
        .collect();
    Ok(Json(json!({ "submissions": done })))
}

/// Re-judges the approved submissions of the store with `judge`; returns what moved in each.
pub fn rejudge_approved(s: &mut crate::store::Store, judge: &crate::judge::Judge) -> anyhow::Result<Vec<(String, Rejudged)>> {
    let objects = s.objects_dir();
    let mut out = Vec::new();
    for sub in s.cell_submissions()?.into_iter().filter(|c| c.status == SubmissionStatus::Approved) {
        let mut verdicts = Vec::new();
        let mut moved = Vec::new();
        let mut modules = BTreeMap::new();
        for b in s.received(&sub.id)? {
            let (Some(before), Some(m)) = (&b.verdict, &b.manifest) else { continue };
            let mut loaded = crate::judge::input::load(&object_path_in(&objects, &b.bundle))?;
            loaded.label = format!("{}.oeb", b.bundle);
            let after = judge.judge(&loaded);
            modules.extend(after.versions.clone());
            if after.outcome != before.outcome {
                moved.push(Moved { run: m.run_id.clone(), bundle: b.bundle.clone(), variant: m.variant, before: before.outcome, after: after.outcome });
            }
            verdicts.push((b.bundle.clone(), after));
        }
        let r = Rejudged { at_us: crate::run::now_us(), judge: modules, bundles: verdicts.len() as u64, moved };
        s.put_rejudged(&sub.id, &verdicts, &r)?;
        out.push((sub.id, r));
    }
    Ok(out)
}
