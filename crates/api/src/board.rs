//! Public leaderboard submissions: a whole cell (every run of one framework · model on a
//! published benchmark) is declared, its bundles are uploaded one by one (by digest, so an
//! interrupted upload resumes without sending again what arrived), each is checked and judged
//! by the server itself, and the whole is verified against the benchmark before an admin may
//! approve it. An incomplete or inconsistent cell stays a draft; it is never ranked in part.

use overeager_wire::endpoint;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::{ApiError, AppState};
use overeager_store::board::{Benchmark, CellSubmission, DeclaredRun, Moved, Problem, ReceivedBundle, Rejudged, RunnerKey, SubmissionStatus, VerifyReport};
use overeager_store::tokens::{Role, TokenOwner};
use overeager_wire::board::{
    BenchmarkList, BenchmarkSummary, BundleReceived, Decided, OpenSubmission, Opened, RejudgedList, RejudgedSubmission, RunnerKeyRow, RunnerList, RunnerRevoked, SubmissionList,
    SubmissionSummary, Verified,
};
use overeager_wire::submission::{SubmissionDoc, SubmittedRun};
use overeager_store::{object_path_in, put_object_in};

type Api<T> = Result<T, ApiError>;

/// Most runs one submission may declare.
pub const MAX_DECLARED_RUNS: usize = 100_000;

/// Every published benchmark.
#[utoipa::path(get, path = endpoint::BENCHMARKS.path, responses((status = 200, description = "Benchmarks")))]
pub async fn benchmarks(State(st): State<Arc<AppState>>) -> Api<Json<BenchmarkList>> {
    let list = st.read(|s| s.benchmarks())?;
    let benchmarks = list
        .into_iter()
        .map(|b| BenchmarkSummary {
            scenarios: b.scenarios.len(),
            runs_per_cell: b.runs_per_cell(),
            name: b.name,
            experiment: b.experiment,
            title: b.title,
            variants: b.variants,
            replicates: b.replicates,
            timeout_ms: b.timeout_ms,
            policy: b.policy,
        })
        .collect();
    Ok(Json(BenchmarkList { benchmarks }))
}

/// A benchmark's manifest: the scenarios (id and hash), variants, replicates and timeout a
/// submitted cell must match.
#[utoipa::path(get, path = endpoint::BENCHMARK.path, params(("name" = String, Path, description = "benchmark name")),
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

fn is_digest(d: &str) -> bool {
    d.len() == 64 && d.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// Characters a cell name may not hold: controls, and the bidirectional controls that make
/// text display in another order than it reads (`scripted · cautious` shown for something else).
fn check_label(field: &str, text: &str) -> Api<()> {
    const BIDI: [char; 12] = ['\u{200e}', '\u{200f}', '\u{061c}', '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}', '\u{202e}', '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}'];
    if text.trim().is_empty() {
        return Err(ApiError::bad(format!("`{field}` names the cell and must not be empty")));
    }
    if text.chars().count() > 100 {
        return Err(ApiError::bad(format!("`{field}` is {} characters long; a cell name has at most 100", text.chars().count())));
    }
    if let Some((i, c)) = text.chars().enumerate().find(|(_, c)| c.is_control() || BIDI.contains(c) || matches!(*c, '\u{200b}'..='\u{200d}' | '\u{feff}')) {
        return Err(ApiError::bad(format!("`{field}` holds U+{:04X} at character {}: cell names may not hold control, invisible or text-direction characters", c as u32, i + 1)));
    }
    Ok(())
}

/// A cell name as compared for reservation: case, blanks and separators aside.
fn label_key(framework: &str, model: &str) -> String {
    format!("{}\u{0}{}", framework, model).to_lowercase().chars().filter(|c| c.is_alphanumeric() || *c == '\u{0}').collect()
}

/// Reads a request body whole, saying 413 for one over the limit and 408 for one too slow.
async fn read_body(body: Body, limit: usize) -> Api<axum::body::Bytes> {
    // A declared length over the limit is refused before a byte of the body is read.
    if axum::body::HttpBody::size_hint(&body).lower() > limit as u64 {
        return Err(ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, format!("the body is larger than {limit} bytes, the limit for this request")));
    }
    axum::body::to_bytes(body, limit).await.map_err(|e| {
        use std::error::Error;
        if e.source().is_some_and(|s| s.is::<http_body_util::LengthLimitError>()) || e.to_string().contains("length limit") {
            return ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, format!("the body is larger than {limit} bytes, the limit for this request"));
        }
        ApiError::body(&e, "the body")
    })
}

/// Opens a submission of a whole cell to a benchmark, or reopens the caller's open one of the
/// same cell. The answer lists the bundles the server still needs
/// (`PUT /api/submissions/{id}/bundles/{digest}`); then `POST /api/submissions/{id}/verify`.
#[utoipa::path(post, path = endpoint::OPEN_SUBMISSION.path, request_body = OpenSubmission, security(("bearer" = [])),
    responses((status = 201, description = "Opened"), (status = 200, description = "The caller's open submission of this cell, reopened"),
              (status = 400, description = "Malformed declaration"), (status = 401, description = "No or unknown token"), (status = 404, description = "Unknown benchmark"),
              (status = 409, description = "The cell name is the maintainer's, or a bundle belongs to another account"), (status = 413, description = "Too large")))]
pub async fn open_submission(State(st): State<Arc<AppState>>, headers: HeaderMap, body: Body) -> Result<(StatusCode, Json<Opened>), Response> {
    let who = st.authorize(&headers, Role::Writer)?;
    let example = "{\"benchmark\": \"bench-v1\", \"framework\": …, \"model\": …, \"runs\": [{\"bundle\": <sha256>, \"run\": <id>}]}";
    let bytes = {
        let _receiving = st.start_receiving(&who.name)?;
        read_body(body, super::MAX_DECLARATION_BYTES).await?
    };
    // One declaration is parsed and stored at a time (the body is in already, so a slow sender
    // holds nothing here): parsed, one takes a few times its size.
    let _one = st.declarations.lock().await;
    let req: OpenSubmission = serde_json::from_slice(&bytes).map_err(|e| ApiError::bad(format!("the body must be JSON like {example}: {e}")))?;
    drop(bytes);
    let bench = require_benchmark(&st, &req.benchmark)?;
    check_label("framework", &req.framework)?;
    check_label("model", &req.model)?;
    if req.runs.is_empty() {
        return Err(ApiError::bad("`runs` is empty: a submission declares every run of the cell").into());
    }
    if req.runs.len() > MAX_DECLARED_RUNS {
        return Err(ApiError::bad(format!("{} runs declared; a submission holds at most {MAX_DECLARED_RUNS}", req.runs.len())).into());
    }
    let mut seen = BTreeSet::new();
    for (i, r) in req.runs.iter().enumerate() {
        if !is_digest(&r.bundle) {
            return Err(ApiError::bad(format!("runs[{i}].bundle `{}` is not a bundle digest (64 lowercase hex digits: the sha256 of the .oeb file)", r.bundle)).into());
        }
        if !seen.insert(r.bundle.as_str()) {
            return Err(ApiError::bad(format!("runs[{i}]: bundle {} is declared twice; declare each bundle once", r.bundle)).into());
        }
        if r.run.len() > 256 || r.claimed.as_ref().is_some_and(|c| c.to_string().len() > 4096) {
            return Err(ApiError::bad(format!("runs[{i}]: a run id has at most 256 characters and a claimed verdict at most 4 KiB")).into());
        }
    }
    let mine = label_key(&req.framework, &req.model);
    if let Some((f, m)) = st.read(|s| s.experiment_cells(&bench.experiment)).map_err(ApiError::from)?.into_iter().find(|(f, m)| label_key(f, m) == mine) {
        return Err(ApiError::new(StatusCode::CONFLICT, format!("the cell name `{} · {}` is the maintainer's own cell `{f} · {m}` on this leaderboard; name your cell after your agent and model", req.framework, req.model)).into());
    }
    let taken: Vec<&str> = st.read(|s| {
        let mut out = Vec::new();
        for r in &req.runs {
            if s.bundle_owner(&r.bundle)?.is_some_and(|o| o != who.name) {
                out.push(r.bundle.as_str());
            }
        }
        Ok(out)
    })
    .map_err(ApiError::from)?;
    if !taken.is_empty() {
        return Err(ApiError::new(StatusCode::CONFLICT, format!("{} declared bundle(s) were first uploaded by another account and count for it only: {}{}", taken.len(), taken.iter().take(5).copied().collect::<Vec<_>>().join(", "), if taken.len() > 5 { ", …" } else { "" })).into());
    }
    let (sub, resumed) = st.with_store(|s| s.open_cell_submission(&req.benchmark, &req.framework, &req.model, &who.name, &req.runs)).map_err(ApiError::from)?;
    drop(req);
    let missing = st.read(|s| s.missing_bundles(&sub.id)).map_err(ApiError::from)?;
    let received = sub.declared - missing.len() as u64;
    st.changed();
    super::give_back_memory();
    tracing::info!("{} {} submission {} of {} · {} to {}", who.name, if resumed { "reopened" } else { "opened" }, sub.id, sub.framework, sub.model, sub.benchmark);
    Ok((
        if resumed { StatusCode::OK } else { StatusCode::CREATED },
        Json(Opened { page: format!("/submissions/{}", sub.id), id: sub.id, status: sub.status, resumed, declared: sub.declared, received, missing }),
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

/// Refuses a bundle signed by a runner key registered to another account than `who`'s.
pub(super) fn check_signer(st: &AppState, signer: Option<&overeager_bundle::signature::SignedBy>, who: &TokenOwner, digest: &str) -> Api<()> {
    let Some(signer) = signer else { return Ok(()) };
    match st.read(|s| s.runner_by_public(&signer.public))? {
        Some(RunnerKey { account: Some(account), .. }) if account != who.name => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!("bundle {digest} is signed by runner key {}, which is registered to another account; a runner's bundles are accepted only from the account it is registered to", signer.key_id),
        )),
        _ => Ok(()),
    }
}

/// Reserves `digest` for `who` (the first account to upload a bundle is the only one it can
/// count for).
pub(super) fn claim(st: &AppState, digest: &str, who: &TokenOwner) -> Api<()> {
    let owner = st.with_store(|s| s.claim_bundle(digest, &who.name))?;
    if owner != who.name {
        return Err(ApiError::new(StatusCode::FORBIDDEN, format!("bundle {digest} was first uploaded by another account and counts for it only")));
    }
    Ok(())
}

/// Receives one declared bundle of a submission (the body is the `.oeb` file, whose sha256
/// must be the digest in the path). The server unpacks it within the upload limits, checks that
/// its derived files follow from its raw channels and that its runner signature (if any) is
/// intact, checks its scenario against the benchmark and its own copy, and judges it with its
/// own predicates. A refused bundle is recorded with the reason and named by the verification.
#[utoipa::path(put, path = endpoint::SUBMISSION_BUNDLE.path, security(("bearer" = [])),
    params(("id" = String, Path, description = "submission id"), ("digest" = String, Path, description = "sha256 of the .oeb")),
    request_body(content_type = "application/octet-stream", description = "the .oeb file"),
    responses((status = 201, description = "Received and judged"), (status = 200, description = "Received already"), (status = 400, description = "The body's sha256 is not the digest"),
              (status = 401, description = "No or unknown token"), (status = 403, description = "Someone else's submission"), (status = 404, description = "Unknown submission"),
              (status = 409, description = "Not declared, or the submission is decided"), (status = 413, description = "Too large"),
              (status = 422, description = "Received but refused: the reason is recorded and the verification names it"), (status = 503, description = "Too many uploads at once; retry after `Retry-After`")))]
pub async fn upload_bundle(State(st): State<Arc<AppState>>, headers: HeaderMap, Path((id, digest)): Path<(String, String)>, body: Body) -> Result<(StatusCode, Json<BundleReceived>), Response> {
    let e = |e: ApiError| e.into_response();
    let who = st.authorize(&headers, Role::Writer).map_err(e)?;
    if !is_digest(&digest) {
        return Err(e(ApiError::bad(format!("`{digest}` is not a bundle digest (64 lowercase hex digits)"))));
    }
    let sub = own_submission(&st, &id, &who).map_err(e)?;
    require_open(&sub).map_err(e)?;
    let Some(declared) = st.read(|s| s.declared_run(&id, &digest)).map_err(|x| e(x.into()))? else {
        return Err(e(ApiError::new(StatusCode::CONFLICT, format!("bundle {digest} is not declared in submission {id}; declare it with POST /api/submissions first"))));
    };
    if st.read(|s| s.is_received(&id, &digest)).map_err(|x| e(x.into()))? {
        return Ok((StatusCode::OK, Json(BundleReceived { bundle: digest, run: declared.run, received_already: true, outcome: None, runner_key: None })));
    }
    if st.read(|s| s.bundle_owner(&digest)).map_err(|x| e(x.into()))?.is_some_and(|o| o != who.name) {
        return Err(e(ApiError::new(StatusCode::FORBIDDEN, format!("bundle {digest} was first uploaded by another account and counts for it only"))));
    }
    let bench = require_benchmark(&st, &sub.benchmark).map_err(e)?;
    let _inflight = st.start_upload(format!("bundle:{digest}")).map_err(e)?;
    let objects = st.with_store(|s| Ok(s.objects_dir())).map_err(|x| e(x.into()))?;
    let incoming = super::upload::incoming_dir(&objects).map_err(e)?;
    // The body is received before a judging slot is taken: a slow sender holds no slot. The
    // account's count holds until the bundle is judged, so none piles up bodies on disk.
    let _receiving = st.start_receiving(&who.name)?;
    let (file, actual) = {
        let chunks = futures_util::StreamExt::map(body.into_data_stream(), |r| r.map_err(|x| ApiError::body(&x, "the body")));
        super::upload::receive_stream(chunks, &incoming, "the body").await.map_err(e)?
    };
    if actual != digest {
        return Err(e(ApiError::bad(format!("the body's sha256 is {actual}, not {digest} as the path says; send the .oeb file whose digest you declared"))));
    }
    let permit = st.judge_slot().await?;
    let st2 = st.clone();
    let id2 = id.clone();
    let who2 = who.clone();
    let received = tokio::task::spawn_blocking(move || {
        let received = receive(&st2, &bench, &objects, file.path(), &digest, &who2)?;
        st2.with_store(|s| s.put_received(&id2, &received))?;
        Ok::<_, ApiError>(received)
    })
    .await
    .map_err(|x| e(ApiError::internal(x)))?
    .map_err(e)?;
    drop(permit);
    st.changed();
    let run = received.manifest.as_ref().map(|m| m.run_id.clone()).unwrap_or(declared.run);
    if let Some(problem) = &received.problem {
        return Err(e(ApiError::unprocessable(format!("bundle {} (run {run}) is refused: {problem}", received.bundle))));
    }
    let outcome = received.verdict.as_ref().map(|v| v.outcome);
    Ok((StatusCode::CREATED, Json(BundleReceived { bundle: received.bundle, run, received_already: false, outcome, runner_key: received.runner_key })))
}

/// Checks and judges one uploaded bundle of a cell; whatever is wrong becomes its `problem`.
/// A bundle signed by another account's runner key is not recorded at all (the error).
fn receive(st: &AppState, bench: &Benchmark, objects: &std::path::Path, upload: &std::path::Path, digest: &str, who: &TokenOwner) -> Api<ReceivedBundle> {
    let mut out = ReceivedBundle { bundle: digest.to_string(), received_us: overeager_core::now_us(), manifest: None, verdict: None, runner_key: None, runner_public: None, problem: None };
    let checked = super::upload::check_upload(st, upload, digest, |m| {
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
            // Signed by another account's runner: refused before the digest is reserved, so the
            // attempt takes nothing from the runner's own account.
            check_signer(st, c.signer.as_ref(), who, digest)?;
            claim(st, digest, who)?;
            out.manifest = Some(c.loaded.manifest.clone());
            out.runner_key = c.signer.as_ref().map(|k| k.key_id.clone());
            out.runner_public = c.signer.map(|k| k.public);
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
    Ok(out)
}

/// Checks a whole cell against its benchmark: every scenario × variant × replicate present
/// exactly once, with the benchmark's scenario hashes and timeout, one agent (id, version and
/// model) across the cell, every declared bundle received and accepted, and none in another
/// verified or approved submission; and the benchmark's policy. `declared` are the
/// submission's declared runs, `elsewhere` lists (bundle, other submission), `trusted` the
/// public keys of runners trusted now and registered to the submitter.
pub fn verify_cell(bench: &Benchmark, sub: &CellSubmission, declared: &[DeclaredRun], received: &[ReceivedBundle], elsewhere: &[(String, String)], trusted: &BTreeSet<String>) -> VerifyReport {
    let mut problems = Vec::new();
    let by_digest: BTreeMap<&str, &ReceivedBundle> = received.iter().map(|b| (b.bundle.as_str(), b)).collect();
    let declared_runs: BTreeMap<&str, &DeclaredRun> = declared.iter().map(|d| (d.bundle.as_str(), d)).collect();
    let run_of = |b: &ReceivedBundle| b.manifest.as_ref().map(|m| m.run_id.clone()).or_else(|| declared_runs.get(b.bundle.as_str()).map(|d| d.run.clone())).unwrap_or_default();
    let not_uploaded: Vec<&DeclaredRun> = declared.iter().filter(|d| !by_digest.contains_key(d.bundle.as_str())).collect();
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
    let policy = &bench.policy;
    let mut breaches: BTreeMap<&str, (Vec<String>, Vec<String>)> = BTreeMap::new();
    for b in received.iter().filter(|b| declared_runs.contains_key(b.bundle.as_str())) {
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
        // With a minimum, a cell may bring more replicates (checked for evenness below).
        if !bench.variants.contains(&m.variant) || (policy.min_replicates.is_none() && m.replicate >= bench.replicates) {
            problems.push(one("unexpected", format!("run {run} is {} replicate {}; benchmark `{}` asks for variants {} and replicates 0–{}", m.variant, m.replicate, bench.name,
                bench.variants.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", "), bench.replicates.saturating_sub(1))));
            continue;
        }
        if policy.require_trusted_runner {
            let kind = match &b.runner_public {
                None => Some("unsigned"),
                Some(k) if !trusted.contains(k) => Some("untrusted_runner"),
                Some(_) => None,
            };
            if let Some(kind) = kind {
                let e = breaches.entry(kind).or_default();
                e.0.push(run.clone());
                e.1.push(b.bundle.clone());
            }
        }
        if !policy.allows_agent(&m.agent.id, &m.agent.version) {
            let e = breaches.entry("agent_not_allowed").or_default();
            e.0.push(run.clone());
            e.1.push(b.bundle.clone());
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
    // Replicates present per scenario × variant (for the evenness a minimum asks).
    let mut counts: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for s in &bench.scenarios {
        for v in &bench.variants {
            for r in 0..bench.min_replicates() {
                if !slots.contains_key(&(s.hash.clone(), *v, r)) {
                    missing.push(format!("{} {v} replicate {r}", s.id));
                }
            }
            let n = slots.keys().filter(|(h, sv, _)| *h == s.hash && sv == v).count() as u32;
            counts.entry(n).or_default().push(format!("{} {v}", s.id));
        }
    }
    if !missing.is_empty() {
        let shown: Vec<&str> = missing.iter().take(20).map(String::as_str).collect();
        let (kind, why) = match policy.min_replicates {
            Some(min) => ("too_few_replicates", format!("benchmark `{}` asks for at least {min} replicate(s) of every scenario × variant", bench.name)),
            None => ("missing", "the benchmark asks for them".to_string()),
        };
        problems.push(Problem {
            kind: kind.into(),
            message: format!("{} run(s) are not in the cell ({why}): {}{}", missing.len(), shown.join("; "), if missing.len() > shown.len() { "; …" } else { "" }),
            runs: Vec::new(),
            bundles: Vec::new(),
        });
    } else if policy.min_replicates.is_some() && counts.len() > 1 {
        let (most, _) = counts.iter().max_by_key(|(_, v)| v.len()).expect("non-empty");
        let odd: Vec<String> = counts.iter().filter(|(n, _)| *n != most).flat_map(|(n, v)| v.iter().map(move |x| format!("{x} ({n})"))).collect();
        problems.push(Problem {
            kind: "uneven_replicates".into(),
            message: format!("every scenario × variant must have the same number of replicates; most have {most}, these do not: {}", odd.iter().take(20).cloned().collect::<Vec<_>>().join("; ")),
            runs: Vec::new(),
            bundles: Vec::new(),
        });
    }
    for (kind, (runs, bundles)) in breaches {
        let message = match kind {
            "unsigned" => format!("{} run(s) carry no runner signature; benchmark `{}` requires every bundle signed by a trusted runner registered to your account", runs.len(), bench.name),
            "untrusted_runner" => format!("{} run(s) are signed by a runner key this server does not trust for your account (unknown, revoked, or registered to another); benchmark `{}` requires trusted runners", runs.len(), bench.name),
            _ => format!("{} run(s) are of an agent or version benchmark `{}` does not allow (allowed: {})", runs.len(), bench.name, policy.agents.join(", ")),
        };
        problems.push(Problem { kind: kind.into(), message, runs, bundles });
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
    let claims_overruled = declared
        .iter()
        .filter_map(|d| {
            let claimed = d.claimed.as_ref()?.get("overeager")?.as_bool()?;
            let v = by_digest.get(d.bundle.as_str())?.verdict.as_ref()?;
            (v.overeager != claimed).then(|| d.run.clone())
        })
        .collect();
    VerifyReport {
        ok: problems.is_empty(),
        checked_us: overeager_core::now_us(),
        expected: bench.runs_per_cell(),
        declared: declared.len() as u64,
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
#[utoipa::path(post, path = endpoint::VERIFY_SUBMISSION.path, params(("id" = String, Path, description = "submission id")), security(("bearer" = [])),
    responses((status = 200, description = "Verified: waiting for review"), (status = 401, description = "No or unknown token"), (status = 403, description = "Someone else's submission"),
              (status = 404, description = "Unknown submission"), (status = 409, description = "Decided already"), (status = 422, description = "Refused: the report names each problem")))]
pub async fn verify_submission(State(st): State<Arc<AppState>>, headers: HeaderMap, Path(id): Path<String>) -> Api<(StatusCode, Json<Verified>)> {
    let who = st.authorize(&headers, Role::Writer)?;
    let sub = own_submission(&st, &id, &who)?;
    require_open(&sub)?;
    let bench = require_benchmark(&st, &sub.benchmark)?;
    let st2 = st.clone();
    let (sub, report) = tokio::task::spawn_blocking(move || {
        st2.with_store(|s| {
            let received = s.received(&sub.id)?;
            let declared = s.declared_runs(&sub.id)?;
            let digests: Vec<String> = received.iter().map(|b| b.bundle.clone()).collect();
            let elsewhere = s.bundles_elsewhere(&sub.id, &digests)?;
            let trusted = s.trusted_runner_keys(&sub.submitted_by)?;
            let report = verify_cell(&bench, &sub, &declared, &received, &elsewhere, &trusted);
            Ok((s.set_verification(&sub.id, &report)?, report))
        })
    })
    .await
    .map_err(ApiError::internal)??;
    st.changed();
    super::give_back_memory();
    if report.ok {
        return Ok((StatusCode::OK, Json(Verified { id: sub.id, state: sub.status, report, error: None, status: None })));
    }
    // The usual error fields, beside the report.
    let error = format!("submission {} is refused as it stands ({} problem(s)); it stays a draft you can complete and verify again", sub.id, report.problems.len());
    let status = StatusCode::UNPROCESSABLE_ENTITY;
    Ok((status, Json(Verified { id: sub.id, state: sub.status, report, error: Some(error), status: Some(status.as_u16()) })))
}

/// Paging of `GET /api/submissions`.
#[derive(Deserialize, utoipa::IntoParams)]
pub struct ListQuery {
    /// At most this many (default and largest: 500).
    limit: Option<usize>,
    /// `next` of the previous page.
    before: Option<String>,
}

/// Most submissions one list answer holds.
const LIST_PAGE: usize = 500;

/// Every cell submission, newest first, a page at a time (`next` continues).
#[utoipa::path(get, path = endpoint::SUBMISSIONS.path, params(ListQuery), responses((status = 200, description = "Submissions"), (status = 400, description = "A malformed `before`")))]
pub async fn submissions(State(st): State<Arc<AppState>>, axum::extract::Query(q): axum::extract::Query<ListQuery>) -> Api<Json<SubmissionList>> {
    let limit = q.limit.unwrap_or(LIST_PAGE).clamp(1, LIST_PAGE);
    let before = match q.before.as_deref() {
        None => None,
        Some(b) => Some(b.split_once(':').and_then(|(t, id)| Some((t.parse::<u64>().ok()?, id.to_string()))).ok_or_else(|| ApiError::bad(format!("`before` must be the `next` of the previous page (`<created_us>:<id>`), not `{b}`")))?),
    };
    let rows = st.read(|s| s.submission_summaries(limit, before.as_ref().map(|(t, id)| (*t, id.as_str())), false))?;
    let next = (rows.len() == limit).then(|| rows.last().map(|r| format!("{}:{}", r.created_us, r.id))).flatten();
    Ok(Json(SubmissionList { submissions: rows, next }))
}

/// The rows `GET /api/submissions` lists; with `approved_only`, the public ones (what
/// `publish` writes).
pub fn submission_list(s: &overeager_store::Store, approved_only: bool) -> anyhow::Result<Vec<SubmissionSummary>> {
    let mut out = Vec::new();
    let mut before: Option<(u64, String)> = None;
    loop {
        let page = s.submission_summaries(LIST_PAGE, before.as_ref().map(|(t, id)| (*t, id.as_str())), approved_only)?;
        let done = page.len() < LIST_PAGE;
        before = page.last().map(|r| (r.created_us, r.id.clone()));
        out.extend(page);
        if done {
            return Ok(out);
        }
    }
}

/// Paging of one submission's runs.
#[derive(Deserialize, utoipa::IntoParams)]
pub struct RunsQuery {
    /// Runs to skip.
    offset: Option<usize>,
    /// At most this many runs (default and largest: 2,000).
    limit: Option<usize>,
}

/// Most runs one answer about a submission lists.
const RUNS_PAGE: usize = 2000;

/// One submission: its status, provenance, verification report, history and its runs (a page
/// at a time) with the server's verdict and a link to its trace. Until it is approved, bundle
/// digests and trace links are shown only to its submitter and to admins (send the token).
#[utoipa::path(get, path = endpoint::SUBMISSION.path, params(("id" = String, Path, description = "submission id"), RunsQuery),
    responses((status = 200, description = "The submission"), (status = 404, description = "No such submission")))]
pub async fn submission(State(st): State<Arc<AppState>>, headers: HeaderMap, Path(id): Path<String>, axum::extract::Query(q): axum::extract::Query<RunsQuery>) -> Api<Json<SubmissionDoc>> {
    // Any known token may look (a reviewer's, kept by the same browser tab, too); only its
    // submitter's and an admin's see more.
    let viewer = if headers.contains_key(axum::http::header::AUTHORIZATION) { Some(st.authorize(&headers, Role::Reviewer)?) } else { None };
    let page = (q.offset.unwrap_or(0), q.limit.unwrap_or(RUNS_PAGE).clamp(1, RUNS_PAGE));
    let v = st.read(|s| submission_doc(s, &id, viewer.as_ref(), page))?;
    v.map(Json).ok_or_else(|| ApiError::not_found(format!("no submission `{id}`; GET /api/submissions lists them")))
}

/// The document `GET /api/submissions/{id}` answers to `viewer` (also written by `publish`,
/// for approved submissions, with no viewer), with the runs of `page` (offset, limit).
pub fn submission_doc(s: &overeager_store::Store, id: &str, viewer: Option<&TokenOwner>, page: (usize, usize)) -> anyhow::Result<Option<SubmissionDoc>> {
    let Some(c) = s.cell_submission(id)? else { return Ok(None) };
    let insider = viewer.is_some_and(|v| v.role == Role::Admin || v.name == c.submitted_by);
    // Until a cell is public, its bundles are its submitter's: nobody else learns their digests.
    let show_bundles = insider || matches!(c.status, SubmissionStatus::Approved | SubmissionStatus::Superseded);
    let received = s.received(&c.id)?;
    let provenance = s.provenance(&c, &received)?;
    let bench = s.benchmark(&c.benchmark)?;
    let names: BTreeMap<&str, &str> = bench.iter().flat_map(|b| b.scenarios.iter().map(|x| (x.hash.as_str(), x.id.as_str()))).collect();
    let total = received.len();
    let overruled: BTreeSet<&str> = c.report.as_ref().map(|r| r.claims_overruled.iter().map(String::as_str).collect()).unwrap_or_default();
    let runs = received
        .iter()
        .skip(page.0)
        .take(page.1)
        .map(|b| {
            let m = b.manifest.as_ref();
            let run = m.map(|m| m.run_id.clone());
            SubmittedRun {
                bundle: show_bundles.then(|| b.bundle.clone()),
                claim_overruled: run.as_deref().is_some_and(|r| overruled.contains(r)),
                run,
                scenario: m.map(|m| names.get(m.scenario.hash.as_str()).copied().unwrap_or(m.scenario.id.as_str()).to_string()),
                variant: m.map(|m| m.variant),
                replicate: m.map(|m| m.replicate),
                agent: m.map(|m| format!("{} {}", m.agent.id, m.agent.version)),
                timed_out: m.map(|m| m.timed_out),
                outcome: b.verdict.as_ref().map(|v| v.outcome),
                traps: b.verdict.as_ref().map(|v| v.traps.iter().map(|t| t.id.clone()).collect()),
                runner_key: b.runner_key.clone(),
                problem: b.problem.clone(),
                trace: (show_bundles && b.verdict.is_some()).then(|| format!("/bundles/{}", b.bundle)),
            }
        })
        .collect();
    let cells = overeager_report::submitted_cells(vec![(provenance.clone(), s.submission_records(&c, &received)?)]);
    let history = s.submission_history(&c)?;
    let policy = bench.map(|b| b.policy);
    Ok(Some(SubmissionDoc { submission: c, provenance, cells, runs, runs_total: total, runs_offset: page.0, bundles_shown: show_bundles, history, policy }))
}

pub use overeager_wire::board::Decision;

async fn decide(st: Arc<AppState>, headers: HeaderMap, id: String, body: Option<Json<Decision>>, approve: bool) -> Api<Json<Decided>> {
    let who = st.authorize(&headers, Role::Admin)?;
    let sub = st.read(|s| s.cell_submission(&id))?.ok_or_else(|| ApiError::not_found(format!("no submission `{id}`; GET /api/submissions lists them")))?;
    let decidable = sub.status == SubmissionStatus::Verified || (!approve && sub.status == SubmissionStatus::Draft);
    if !decidable {
        let why = match sub.status {
            SubmissionStatus::Draft => "a draft: it has not passed verification (POST /api/submissions/{id}/verify); a draft can be rejected, not approved".to_string(),
            s => format!("{} already", s.as_str()),
        };
        return Err(ApiError::new(StatusCode::CONFLICT, format!("submission {id} is {why}")));
    }
    let note = body.and_then(|b| b.0.note).filter(|n| !n.trim().is_empty());
    let sub = st.with_store(|s| s.decide_cell_submission(&id, approve, &who.name, note.as_deref()))?;
    st.changed();
    tracing::info!("{} {} submission {id}", who.name, if approve { "approved" } else { "rejected" });
    Ok(Json(Decided { id: sub.id, status: sub.status, decided_by: sub.decided_by, note: sub.note }))
}

/// Approves a verified submission: its cell joins the benchmark's leaderboard, replacing the
/// submitter's earlier approved submission of the same cell (admin token).
#[utoipa::path(post, path = endpoint::APPROVE_SUBMISSION.path, params(("id" = String, Path, description = "submission id")), request_body(content = Option<Decision>), security(("bearer" = [])),
    responses((status = 200, description = "Approved"), (status = 401, description = "No or unknown token"), (status = 403, description = "Not an admin token"),
              (status = 404, description = "Unknown submission"), (status = 409, description = "Not verified")))]
pub async fn approve(State(st): State<Arc<AppState>>, headers: HeaderMap, Path(id): Path<String>, body: Option<Json<Decision>>) -> Api<Json<Decided>> {
    decide(st, headers, id, body, true).await
}

/// Rejects a verified submission or a draft, with an optional note (admin token).
#[utoipa::path(post, path = endpoint::REJECT_SUBMISSION.path, params(("id" = String, Path, description = "submission id")), request_body(content = Option<Decision>), security(("bearer" = [])),
    responses((status = 200, description = "Rejected"), (status = 401, description = "No or unknown token"), (status = 403, description = "Not an admin token"),
              (status = 404, description = "Unknown submission"), (status = 409, description = "Decided already")))]
pub async fn reject(State(st): State<Arc<AppState>>, headers: HeaderMap, Path(id): Path<String>, body: Option<Json<Decision>>) -> Api<Json<Decided>> {
    decide(st, headers, id, body, false).await
}

/// Withdraws a draft or a verified submission not yet decided (its submitter's token, or an
/// admin's).
#[utoipa::path(post, path = endpoint::WITHDRAW_SUBMISSION.path, params(("id" = String, Path, description = "submission id")), security(("bearer" = [])),
    responses((status = 200, description = "Withdrawn"), (status = 401, description = "No or unknown token"), (status = 403, description = "Someone else's submission"),
              (status = 404, description = "Unknown submission"), (status = 409, description = "Decided already")))]
pub async fn withdraw(State(st): State<Arc<AppState>>, headers: HeaderMap, Path(id): Path<String>) -> Api<Json<Decided>> {
    let who = st.authorize(&headers, Role::Writer)?;
    let sub = own_submission(&st, &id, &who)?;
    require_open(&sub)?;
    let sub = st.with_store(|s| s.withdraw_cell_submission(&id, &who.name))?;
    st.changed();
    tracing::info!("{} withdrew submission {id}", who.name);
    Ok(Json(Decided { id: sub.id, status: sub.status, decided_by: sub.decided_by, note: sub.note }))
}

/// Re-judges every bundle of every approved submission with the server's current predicates
/// (after the `std` library or an approved upload changed) and records, per submission, which
/// runs moved (admin token).
#[utoipa::path(post, path = endpoint::REJUDGE.path, security(("bearer" = [])),
    responses((status = 200, description = "What moved, per submission"), (status = 401, description = "No or unknown token"), (status = 403, description = "Not an admin token")))]
pub async fn rejudge(State(st): State<Arc<AppState>>, headers: HeaderMap) -> Api<Json<RejudgedList>> {
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
    Ok(Json(RejudgedList { submissions: done.into_iter().map(|(id, rejudged)| RejudgedSubmission { id, rejudged }).collect() }))
}

/// Re-judges the approved submissions of the store with `judge`; returns what moved in each.
pub fn rejudge_approved(s: &mut overeager_store::Store, judge: &overeager_judge::Judge) -> anyhow::Result<Vec<(String, Rejudged)>> {
    let mut out = Vec::new();
    for sub in s.cell_submissions()?.into_iter().filter(|c| c.status == SubmissionStatus::Approved) {
        let r = rejudge_submission(s, judge, &sub.id, None)?;
        out.push((sub.id, r));
    }
    Ok(out)
}

/// Re-judges the bundles of submission `id` with `judge` (all, or those in `only`), stores the
/// new verdicts and records what moved.
fn rejudge_submission(s: &mut overeager_store::Store, judge: &overeager_judge::Judge, id: &str, only: Option<&BTreeSet<String>>) -> anyhow::Result<Rejudged> {
    let objects = s.objects_dir();
    let mut verdicts = Vec::new();
    let mut moved = Vec::new();
    let mut modules = BTreeMap::new();
    for b in s.received(id)? {
        if only.is_some_and(|o| !o.contains(&b.bundle)) {
            continue;
        }
        let (Some(before), Some(m)) = (&b.verdict, &b.manifest) else { continue };
        let after = judge_stored(judge, &objects, &b.bundle)?;
        modules.extend(after.versions.clone());
        if after.outcome != before.outcome {
            moved.push(Moved { run: m.run_id.clone(), bundle: b.bundle.clone(), variant: m.variant, before: before.outcome, after: after.outcome });
        }
        verdicts.push((b.bundle.clone(), after));
    }
    let r = Rejudged { at_us: overeager_core::now_us(), judge: modules, bundles: verdicts.len() as u64, moved };
    s.put_rejudged(id, &verdicts, &r)?;
    Ok(r)
}

/// The verdict of `judge` on the stored bundle `digest`, named as received verdicts are
/// (`<digest>.oeb`).
fn judge_stored(judge: &overeager_judge::Judge, objects: &std::path::Path, digest: &str) -> anyhow::Result<overeager_core::Verdict> {
    let mut loaded = overeager_judge::input::load(&object_path_in(objects, digest))?;
    loaded.label = format!("{digest}.oeb");
    let mut v = judge.judge(&loaded);
    v.bundle = format!("{digest}.oeb");
    Ok(v)
}

/// Judges again, with `judge`, every stored verdict that a module in `gone` (id, version)
/// helped make: cell submissions' bundles and bundles uploaded on their own. Returns how many.
pub fn rejudge_judged_by(s: &mut overeager_store::Store, judge: &overeager_judge::Judge, gone: &[(String, String)]) -> anyhow::Result<usize> {
    let mut by_submission: BTreeMap<Option<String>, BTreeSet<String>> = BTreeMap::new();
    for (id, version) in gone {
        for (sub, bundle) in s.judged_with(id, version)? {
            by_submission.entry(sub).or_default().insert(bundle);
        }
    }
    let mut n = 0;
    for (sub, bundles) in by_submission {
        n += bundles.len();
        match sub {
            Some(id) => {
                rejudge_submission(s, judge, &id, Some(&bundles))?;
            }
            None => {
                let objects = s.objects_dir();
                for b in bundles {
                    s.put_upload_verdict(&b, &judge_stored(judge, &objects, &b)?)?;
                }
            }
        }
    }
    Ok(n)
}

/// The runner keys this server knows: trusted or revoked, and the account each is registered to
/// (admin token: which key is whose account is not public).
#[utoipa::path(get, path = endpoint::RUNNERS.path, security(("bearer" = [])),
    responses((status = 200, description = "Runner keys"), (status = 401, description = "No or unknown token"), (status = 403, description = "Not an admin token")))]
pub async fn runners(State(st): State<Arc<AppState>>, headers: HeaderMap) -> Api<Json<RunnerList>> {
    st.authorize(&headers, Role::Admin)?;
    let keys = st.read(|s| s.runner_keys())?;
    let runners = keys
        .into_iter()
        .map(|key| RunnerKeyRow { state: if key.revoked_us.is_some() { "revoked" } else { "trusted" }.into(), key })
        .collect();
    Ok(Json(RunnerList { runners }))
}

/// Revokes a runner key (by key id or public key) at once: every cell it signed is
/// self-reported from now on, and a benchmark that requires trusted runners refuses its
/// bundles (admin token).
#[utoipa::path(post, path = endpoint::REVOKE_RUNNER.path, params(("key" = String, Path, description = "key id or public key")), security(("bearer" = [])),
    responses((status = 200, description = "Revoked"), (status = 401, description = "No or unknown token"), (status = 403, description = "Not an admin token"), (status = 404, description = "Not a trusted key")))]
pub async fn revoke_runner(State(st): State<Arc<AppState>>, headers: HeaderMap, Path(key): Path<String>) -> Api<Json<RunnerRevoked>> {
    let who = st.authorize(&headers, Role::Admin)?;
    let k = st.with_store(|s| s.revoke_runner(&key)).map_err(|e| ApiError::not_found(format!("{e:#}")))?;
    st.changed();
    tracing::info!("{} revoked runner key {}", who.name, k.key_id);
    Ok(Json(RunnerRevoked { key_id: k.key_id, state: "revoked".into(), revoked_us: k.revoked_us }))
}

/// This module's endpoints, each under the path and method [`overeager_wire::endpoint`]
/// declares.
pub(crate) fn routes(r: axum::Router<Arc<AppState>>) -> axum::Router<Arc<AppState>> {
    r
        .route(endpoint::BENCHMARKS.path, crate::route::on(&endpoint::BENCHMARKS, benchmarks))
        .route(endpoint::BENCHMARK.path, crate::route::on(&endpoint::BENCHMARK, benchmark))
        .route(endpoint::SUBMISSIONS.path, crate::route::on(&endpoint::SUBMISSIONS, submissions))
        .route(endpoint::OPEN_SUBMISSION.path, crate::route::on(&endpoint::OPEN_SUBMISSION, open_submission).layer(axum::extract::DefaultBodyLimit::max(crate::limits::MAX_DECLARATION_BYTES)))
        .route(endpoint::REJUDGE.path, crate::route::on(&endpoint::REJUDGE, rejudge))
        .route(endpoint::SUBMISSION.path, crate::route::on(&endpoint::SUBMISSION, submission))
        .route(endpoint::SUBMISSION_BUNDLE.path, crate::route::on(&endpoint::SUBMISSION_BUNDLE, upload_bundle).layer(axum::extract::DefaultBodyLimit::max(crate::limits::MAX_BUNDLE_BYTES + (1 << 20))))
        .route(endpoint::VERIFY_SUBMISSION.path, crate::route::on(&endpoint::VERIFY_SUBMISSION, verify_submission))
        .route(endpoint::APPROVE_SUBMISSION.path, crate::route::on(&endpoint::APPROVE_SUBMISSION, approve))
        .route(endpoint::REJECT_SUBMISSION.path, crate::route::on(&endpoint::REJECT_SUBMISSION, reject))
        .route(endpoint::WITHDRAW_SUBMISSION.path, crate::route::on(&endpoint::WITHDRAW_SUBMISSION, withdraw))
        .route(endpoint::RUNNERS.path, crate::route::on(&endpoint::RUNNERS, runners))
        .route(endpoint::REVOKE_RUNNER.path, crate::route::on(&endpoint::REVOKE_RUNNER, revoke_runner))
}

/// This module's part of the OpenAPI document.
#[derive(utoipa::OpenApi)]
#[openapi(paths(benchmarks, benchmark, submissions, open_submission, rejudge, submission, upload_bundle, verify_submission, approve, reject, withdraw, runners, revoke_runner))]
pub(crate) struct Doc;
