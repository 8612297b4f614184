//! Endpoints that change the store. Each needs a bearer token; each refusal says why.

use overeager_wire::endpoint;
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Multipart, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use serde::Deserialize;
use serde_json::Value;

use super::upload::{check_upload, incoming_dir, receive_stream};
use super::{ApiError, AppState, MAX_BUNDLE_BYTES, MAX_MODULE_BYTES, MAX_SIGNATURE_BYTES, SELF_TEST_BUNDLES};
use overeager_judge::{Judge, JudgeOptions, input, sign};
use overeager_store::predicates::PredicateRow;
use overeager_store::tokens::Role;
use overeager_store::uploads::Upload;
use overeager_store::{Store, object_path_in, put_object_in};
use overeager_wire::experiment::{FieldNames, Steering, SteeringRefusal};
use overeager_wire::server::{BundleTaken, KeyRevoked, ProgressEvent, Started, TokenList, TokenRevoked};

type Api<T> = Result<T, ApiError>;

#[derive(Deserialize, utoipa::ToSchema)]
pub struct StartExperiment {
    /// A plan name from `GET /api/plans` (a `.toml` file in the server's plan directory).
    plan: String,
}

/// Steers a running experiment (admin token): pause, resume, its spending limit, its runs at
/// once. Its runner (this server's, or an `experiment run` on the store's machine) obeys
/// within a second; the answer is the experiment's control as it now is.
#[utoipa::path(post, path = endpoint::CONTROL.path, params(("id" = String, Path, description = "experiment id")), request_body = Steering, security(("bearer" = [])),
    responses((status = 200, description = "The control as it now is"), (status = 400, description = "Not a change"), (status = 401, description = "No or unknown token"),
              (status = 403, description = "Not an admin token"), (status = 404, description = "No such experiment")))]
pub async fn steer_experiment(State(st): State<Arc<AppState>>, headers: HeaderMap, Path(id): Path<String>, body: Result<Json<Steering>, axum::extract::rejection::JsonRejection>) -> Api<Json<overeager_store::Control>> {
    let who = st.authorize(&headers, Role::Admin)?;
    let Json(b) = body.map_err(|e| ApiError::bad(format!("the body must be JSON like {{\"paused\": true}}, {{\"max_cost\": 5.0}}, {{\"jobs\": 2}} or {{\"until\": 0.05}}: {}", e.body_text())))?;
    if st.read(|s| s.experiment(&id))?.is_none() {
        return Err(ApiError::not_found(format!("no experiment `{id}`; GET /api/experiments lists them")));
    }
    let c = st.with_store(|s| s.steer(&id, &b, &who.name)).map_err(|e| match e.downcast_ref::<SteeringRefusal>() {
        Some(r) => ApiError::bad(r.text(FieldNames::Json)),
        None => e.into(),
    })?;
    tracing::info!("{} steered experiment {id}: {c:?}", who.name);
    Ok(Json(c))
}

/// Starts (or resumes) the experiment of a plan in the server's plan directory. Progress:
/// `GET /api/experiments/{id}/progress` (server-sent events).
#[utoipa::path(post, path = endpoint::START_EXPERIMENT.path, request_body = StartExperiment, security(("bearer" = [])),
    responses((status = 202, description = "Started"), (status = 401, description = "No or unknown token"), (status = 404, description = "Unknown plan"),
              (status = 409, description = "Already running, or the id exists with another plan"), (status = 422, description = "The plan has errors")))]
pub async fn start_experiment(State(st): State<Arc<AppState>>, headers: HeaderMap, body: Result<Json<StartExperiment>, axum::extract::rejection::JsonRejection>) -> Api<(StatusCode, Json<Started>)> {
    let who = st.authorize(&headers, Role::Writer)?;
    let Json(req) = body.map_err(|e| ApiError::bad(format!("the body must be JSON like {{\"plan\": \"sim-seeds\"}}: {}", e.body_text())))?;
    if !overeager_core::plan::is_slug(&req.plan) {
        return Err(ApiError::bad(format!("plan `{}` is not a plan name (letters, digits, '-', '_', '.'); GET /api/plans lists them", req.plan)));
    }
    let path = st.config.plans.join(format!("{}.toml", req.plan));
    if !path.is_file() {
        return Err(ApiError::not_found(format!("no plan `{}` on this server; GET /api/plans lists them", req.plan)));
    }
    let lp = {
        let path = path.clone();
        tokio::task::spawn_blocking(move || overeager_experiment::load_plan(&path)).await.map_err(ApiError::internal)?
    }
    // The plan's own errors, with the server's directory left out of every path.
    .map_err(|e| ApiError::unprocessable(format!("{e:#}").replace(&format!("{}/", st.config.plans.display()), "")))?;
    let id = lp.plan.id.clone();
    let existing = st.with_store(|s| s.experiment(&id))?;
    if existing.is_some_and(|e| e.plan_hash != lp.hash) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("experiment `{id}` exists already with a different plan or scenario set; give the plan a new `id` to run it as a new experiment"),
        ));
    }
    {
        let mut running = st.running.lock().unwrap_or_else(|p| p.into_inner());
        if running.contains_key(&id) {
            return Err(ApiError::new(StatusCode::CONFLICT, format!("experiment `{id}` is running already; follow /api/experiments/{id}/progress")));
        }
        running.insert(id.clone(), Instant::now());
    }
    st.changed();
    tracing::info!("{} started experiment {id} from {}", who.name, path.display());
    // Runs this server executes are signed with its runner key, when it has one.
    let runner_key = overeager_bundle::signature::key_from_env().map_err(|e| ApiError::internal(format!("{e:#}")))?;
    let st2 = st.clone();
    let id2 = id.clone();
    let db = st.config.db.clone();
    tokio::task::spawn_blocking(move || {
        let result = Store::open(&db).and_then(|store| overeager_experiment::run(store, &path, &overeager_experiment::Options { runner_key, ..Default::default() }));
        let mut errors = st2.errors.lock().unwrap_or_else(|p| p.into_inner());
        match result {
            Ok(o) => {
                tracing::info!("experiment {id2}: {} runs executed, {} failed", o.executed, o.failed);
                errors.remove(&id2);
            }
            Err(e) => {
                tracing::error!("experiment {id2}: {e:#}");
                errors.insert(id2.clone(), format!("{e:#}"));
            }
        }
        st2.running.lock().unwrap_or_else(|p| p.into_inner()).remove(&id2);
        st2.changed();
    });
    Ok((StatusCode::ACCEPTED, Json(Started { progress: format!("/api/experiments/{id}/progress"), experiment: id })))
}

/// Progress of an experiment as server-sent events: a `progress` event (run counts) every
/// half second while it runs, then one `done` event (with `error` if the runner stopped on one).
#[utoipa::path(get, path = endpoint::PROGRESS.path, params(("id" = String, Path, description = "experiment id")),
    responses((status = 200, description = "An event stream", content_type = "text/event-stream"), (status = 404, description = "No such experiment")))]
pub async fn progress_events(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Api<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>> {
    // A connection of its own: the runner commits from another one.
    let db = st.config.db.clone();
    let store = tokio::task::spawn_blocking(move || Store::open(&db)).await.map_err(ApiError::internal)??;
    if store.experiment(&id)?.is_none() && !st.running.lock().unwrap_or_else(|p| p.into_inner()).contains_key(&id) {
        return Err(ApiError::not_found(format!("no experiment `{id}`")));
    }
    let store = Arc::new(std::sync::Mutex::new(store));
    let stream = futures_util::stream::unfold(Some((st, store, id, true)), |state| async move {
        let (st, store, id, first) = state?;
        if !first {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let running = st.running.lock().unwrap_or_else(|p| p.into_inner()).contains_key(&id);
        let progress = store.lock().unwrap_or_else(|p| p.into_inner()).progress(&id).unwrap_or_default();
        let done = !running && (progress.total > 0 || !first);
        let error = st.errors.lock().unwrap_or_else(|p| p.into_inner()).get(&id).cloned();
        let event = SseEvent::default()
            .event(if done { "done" } else { "progress" })
            .json_data(ProgressEvent { experiment: id.clone(), running, progress, error })
            .expect("JSON");
        let next = if done { None } else { Some((st, store, id, false)) };
        Some((Ok(event), next))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// Reads every multipart field into memory, refusing oversized ones with the limit.
async fn fields(mut mp: Multipart, limits: &[(&str, usize)]) -> Api<Vec<(String, Bytes)>> {
    let mut out = Vec::new();
    loop {
        let field = match mp.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => return Err(multipart_error(e, limits)),
        };
        let name = field.name().unwrap_or("").to_string();
        let Some((_, limit)) = limits.iter().find(|(n, _)| *n == name) else {
            let known = limits.iter().map(|(n, _)| format!("`{n}`")).collect::<Vec<_>>().join(", ");
            return Err(ApiError::bad(format!("unexpected form field `{name}`; this upload takes {known}")));
        };
        let bytes = field.bytes().await.map_err(|e| multipart_error(e, limits))?;
        if bytes.len() > *limit {
            return Err(ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, format!("field `{name}` is {} bytes; the limit is {limit} bytes", bytes.len())));
        }
        out.push((name, bytes));
    }
    Ok(out)
}

fn multipart_error(e: axum::extract::multipart::MultipartError, limits: &[(&str, usize)]) -> ApiError {
    if super::body::timeout_in(&e).is_some() {
        return ApiError::body(&e, "the upload");
    }
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        let l = limits.iter().map(|(n, l)| format!("{n} ≤ {l} bytes")).collect::<Vec<_>>().join(", ");
        return ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, format!("the upload is too large ({l})"));
    }
    ApiError::new(e.status(), format!("the multipart body cannot be read: {}", e.body_text()))
}

fn take(fields: &mut Vec<(String, Bytes)>, name: &str) -> Option<Bytes> {
    let i = fields.iter().position(|(n, _)| n == name)?;
    Some(fields.remove(i).1)
}

/// Uploads a packed bundle (`bundle`, a `.oeb` file) on its own, to be judged. The server unpacks it within the upload
/// limits, checks that its derived files follow from its raw channels, and judges it with its
/// own trusted predicates against its own copy of the scenario; a `verdict` field, if sent, is
/// kept only to show that it was ignored. At most [`MAX_CONCURRENT_UPLOADS`] are taken at once;
/// beyond that the answer is 503 with `Retry-After`.
#[utoipa::path(post, path = endpoint::UPLOAD_BUNDLE.path, security(("bearer" = [])),
    request_body(content_type = "multipart/form-data", description = "`bundle`: the .oeb file; optional `verdict`: ignored"),
    responses((status = 201, description = "Judged and stored"), (status = 400, description = "Missing or unexpected field"), (status = 401, description = "No or unknown token"),
              (status = 413, description = "Too large"), (status = 422, description = "Not a readable bundle, derived files that disagree with the raw channels, or a scenario this server does not hold"),
              (status = 503, description = "Too many uploads at once; retry after the seconds in `Retry-After`")))]
pub async fn upload_bundle(State(st): State<Arc<AppState>>, headers: HeaderMap, mp: Multipart) -> Result<(StatusCode, Json<BundleTaken>), Response> {
    let e = |e: ApiError| e.into_response();
    let who = st.authorize(&headers, Role::Writer).map_err(e)?;
    let objects = st.with_store(|s| Ok(s.objects_dir())).map_err(|x| e(x.into()))?;
    let incoming = incoming_dir(&objects).map_err(e)?;
    // The body is received (to disk, at the server's minimum pace) before a judging slot is
    // taken, so a slow sender holds no slot others need; the account's count holds until the
    // bundle is judged, so none piles up bodies on disk.
    let _receiving = st.start_receiving(&who.name)?;
    let received = receive_bundle(mp, &incoming).await.map_err(e)?;
    let _inflight = st.start_upload(format!("bundle:{}", received.digest)).map_err(e)?;
    let permit = st.judge_slot().await?;
    let st2 = st.clone();
    let result = tokio::task::spawn_blocking(move || judge_upload(&st2, &objects, received, &who)).await.map_err(|x| e(ApiError::internal(x)))?;
    drop(permit);
    let upload = result.map_err(e)?;
    st.traces.forget(&upload.bundle);
    st.changed();
    Ok((
        StatusCode::CREATED,
        Json(BundleTaken { trace: format!("/bundles/{}", upload.bundle), claimed_verdict_ignored: upload.claimed.is_some(), bundle: upload.bundle, verdict: upload.verdict }),
    ))
}

/// A 503 that says when to come back.
pub(super) fn busy(message: String) -> Response {
    let mut r = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message).into_response();
    r.headers_mut().insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from_static("5"));
    r
}

/// Largest `verdict` field sent with a bundle (kept only to show it was ignored).
const MAX_CLAIMED_VERDICT_BYTES: usize = 1 << 20;

/// A bundle as received: the packed bundle in a file of its own, its sha256, and the verdict
/// the client claimed, if any.
struct Received {
    file: tempfile::NamedTempFile,
    digest: String,
    claimed: Option<Value>,
}

/// Streams the `bundle` field to a file in `incoming` (never more than [`MAX_BUNDLE_BYTES`]),
/// hashing it as it arrives, and reads the small optional `verdict` field.
async fn receive_bundle(mut mp: Multipart, incoming: &std::path::Path) -> Api<Received> {
    let limits = [("bundle", MAX_BUNDLE_BYTES), ("verdict", MAX_CLAIMED_VERDICT_BYTES)];
    let mut file: Option<(tempfile::NamedTempFile, String)> = None;
    let mut claimed = None;
    loop {
        let mut field = match mp.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => return Err(multipart_error(e, &limits)),
        };
        let name = field.name().unwrap_or("").to_string();
        match name.as_str() {
            "bundle" if file.is_none() => {
                let chunks = futures_util::stream::unfold(&mut field, |f| async move {
                    match f.chunk().await {
                        Ok(Some(c)) => Some((Ok(c), f)),
                        Ok(None) => None,
                        Err(e) => Some((Err(e), f)),
                    }
                });
                let chunks = futures_util::StreamExt::map(chunks, |r| r.map_err(|e| multipart_error(e, &limits)));
                file = Some(receive_stream(chunks, incoming, "field `bundle`").await?);
            }
            "verdict" if claimed.is_none() => {
                let v = field.bytes().await.map_err(|e| multipart_error(e, &limits))?;
                if v.len() > MAX_CLAIMED_VERDICT_BYTES {
                    return Err(ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, format!("field `verdict` is larger than {MAX_CLAIMED_VERDICT_BYTES} bytes, the limit")));
                }
                claimed = Some(serde_json::from_slice::<Value>(&v).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&v).into_owned())));
            }
            "bundle" | "verdict" => return Err(ApiError::bad(format!("the form has two `{name}` fields; send one"))),
            name => return Err(ApiError::bad(format!("unexpected form field `{name}`; this upload takes `bundle` and `verdict`"))),
        }
    }
    let (file, digest) = file.ok_or_else(|| ApiError::bad("the form has no `bundle` field: send the .oeb file as `bundle`"))?;
    Ok(Received { file, digest, claimed })
}

fn judge_upload(st: &AppState, objects: &std::path::Path, received: Received, who: &overeager_store::tokens::TokenOwner) -> Api<Upload> {
    let Received { file: upload, digest, claimed } = received;
    let checked = check_upload(st, upload.path(), &digest, |_| Ok(())).map_err(|r| ApiError::unprocessable(r.message))?;
    super::board::check_signer(st, checked.signer.as_ref(), who, &digest)?;
    super::board::claim(st, &digest, who)?;
    let who = who.name.as_str();
    let loaded = &checked.loaded;
    let verdict = st.judge().judge(loaded);
    put_object_in(objects, upload.path())?;
    let m = &loaded.manifest;
    let upload = Upload {
        bundle: digest,
        run_id: m.run_id.clone(),
        scenario_hash: m.scenario.hash.clone(),
        agent: m.agent.id.clone(),
        framework: m.agent.framework.clone(),
        model: m.agent.model.clone(),
        variant: m.variant,
        overeager: verdict.overeager,
        verdict,
        claimed,
        uploaded_by: who.to_string(),
        uploaded_us: overeager_core::now_us(),
    };
    st.with_store(|s| s.put_upload(&upload))?;
    Ok(upload)
}

/// Uploads a signed predicate module (`module`: the component, `signature`: its `.sig` file).
/// It is verified against the trust store, refused if it imports anything, self-tested on
/// stored bundles, and then pending until an admin approves it.
#[utoipa::path(post, path = endpoint::UPLOAD_PREDICATE.path, security(("bearer" = [])),
    request_body(content_type = "multipart/form-data", description = "`module`: the .wasm component; `signature`: the .sig JSON"),
    responses((status = 202, description = "Pending approval"), (status = 400, description = "Missing field or malformed signature"), (status = 401, description = "No or unknown token"),
              (status = 409, description = "Uploaded already"), (status = 413, description = "Too large"), (status = 422, description = "Refused: signature, imports, or self-test")))]
pub async fn upload_predicate(State(st): State<Arc<AppState>>, headers: HeaderMap, mp: Multipart) -> Api<(StatusCode, Json<Value>)> {
    let who = st.authorize(&headers, Role::Writer)?;
    let mut f = fields(mp, &[("module", MAX_MODULE_BYTES), ("signature", MAX_SIGNATURE_BYTES)]).await?;
    let module = take(&mut f, "module").ok_or_else(|| ApiError::bad("the form has no `module` field: send the .wasm component as `module`"))?;
    let signature = take(&mut f, "signature").ok_or_else(|| ApiError::bad("the form has no `signature` field: send the module's .sig file as `signature`"))?;
    let digest = overeager_core::sha256_hex(&module);
    let _inflight = st.start_upload(format!("module:{digest}")).map_err(|_| ApiError::new(StatusCode::CONFLICT, format!("module {digest} is being uploaded by another request right now; GET /api/predicates shows it once admitted")))?;
    // Self-tests are bounded like judging: one at a time, the others told to come back.
    let Ok(permit) = st.self_tests.clone().try_acquire_owned() else {
        return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, format!("{} predicate self-test(s) are running; retry in a few seconds", super::MAX_CONCURRENT_SELF_TESTS)));
    };
    let st2 = st.clone();
    let row = tokio::task::spawn_blocking(move || admit_predicate(&st2, &module, &signature, &who.name)).await.map_err(ApiError::internal)??;
    drop(permit);
    Ok((StatusCode::ACCEPTED, Json(serde_json::to_value(&row).map_err(ApiError::internal)?)))
}

fn admit_predicate(st: &AppState, module: &[u8], signature: &[u8], who: &str) -> Api<PredicateRow> {
    let text = std::str::from_utf8(signature).map_err(|_| ApiError::bad("the signature is not UTF-8 text; send the .sig file written by `overeager predicate sign`"))?;
    let sig = sign::parse_signature(text).map_err(|e| ApiError::bad(format!("refused: {e}")))?;
    let trust = super::load_trust(&st.config.trust)?;
    let verified = sign::verify(module, &sig, &trust).map_err(|e| ApiError::unprocessable(format!("refused: {e}")))?;
    let names: Vec<String> = overeager_judge::admission_check(module).map_err(|e| ApiError::unprocessable(format!("refused: {e:#}")))?.into_iter().map(|p| p.name).collect();
    let dir = st.with_store(|s| {
        if s.predicate_rows()?.iter().any(|p| p.digest == verified.digest) {
            anyhow::bail!("exists");
        }
        Ok(s.predicates_dir())
    });
    let dir = dir.map_err(|_| ApiError::new(StatusCode::CONFLICT, format!("module {} was uploaded already; GET /api/predicates shows its status", verified.digest)))?;
    std::fs::create_dir_all(&dir).map_err(ApiError::internal)?;
    // Written under a temporary name and renamed only once admitted, so a refusal leaves nothing.
    let staged = tempfile::Builder::new().prefix(".incoming-").tempdir_in(&dir).map_err(ApiError::internal)?;
    let file = staged.path().join(format!("{}.wasm", verified.digest));
    let sig_file = PathBuf::from(format!("{}.sig", file.display()));
    std::fs::write(&file, module).map_err(ApiError::internal)?;
    std::fs::write(&sig_file, signature).map_err(ApiError::internal)?;
    let mut judge = Judge::new(JudgeOptions { limits: overeager_judge::engine::Limits::default(), jobs: 1, cache: None, trust })?;
    let report = judge.add_module(&file);
    if let Some(e) = report.error {
        return Err(ApiError::unprocessable(format!("refused: {e}")));
    }
    let cases = self_test_cases(st, &verified.predicate, &judge)?;
    let test = judge.self_test_cases(&verified.predicate, &cases);
    if let Some(why) = &test.failure {
        return Err(ApiError::unprocessable(format!("refused by the self-test ({} case(s) on {} stored bundle(s)): {why}", test.cases, test.bundles)));
    }
    let row = PredicateRow {
        digest: verified.digest.clone(),
        id: verified.predicate.clone(),
        version: verified.version.clone(),
        key_id: verified.key_id.clone(),
        owner: verified.owner.clone(),
        status: "pending".into(),
        predicates: names,
        self_test: test,
        uploaded_by: who.to_string(),
        uploaded_us: overeager_core::now_us(),
        decided_by: None,
        decided_us: None,
    };
    let dest = dir.join(format!("{}.wasm", verified.digest));
    std::fs::rename(&sig_file, PathBuf::from(format!("{}.sig", dest.display()))).map_err(ApiError::internal)?;
    std::fs::rename(&file, &dest).map_err(ApiError::internal)?;
    st.with_store(|s| s.put_predicate(&row))?;
    Ok(row)
}

/// What an uploaded module is self-tested with: each of its predicates with the arguments of
/// every stored scenario that uses it (on bundles of that scenario when the store has some, on
/// recent bundles otherwise), with the examples its argument schema declares, and with no
/// arguments, on recent bundles.
fn self_test_cases(st: &AppState, module: &str, judge: &Judge) -> Api<Vec<overeager_judge::SelfTestCase>> {
    let uses = st.read(|s| s.predicate_uses(module))?;
    let info = judge.modules().find(|m| m.id == module).cloned().ok_or_else(|| ApiError::internal(format!("module {module} is not loaded")))?;
    let load = |digests: Vec<String>, objects: &std::path::Path| -> Vec<Arc<input::LoadedBundle>> { digests.iter().filter_map(|d| input::load(&object_path_in(objects, d)).ok()).map(Arc::new).collect() };
    let objects = st.read(|s| Ok(s.objects_dir()))?;
    let recent = load(st.read(|s| s.recent_bundles(SELF_TEST_BUNDLES))?, &objects);
    let mut cases = Vec::new();
    // Every scenario's arguments are tried; with many, on fewer bundles each.
    let per_use = (4 * SELF_TEST_BUNDLES / uses.len().max(1)).clamp(1, SELF_TEST_BUNDLES);
    for u in uses {
        let own = load(st.read(|s| s.bundles_of_scenario(&u.scenario_hash, per_use))?, &objects);
        let bundles = if own.is_empty() { recent.iter().take(per_use).cloned().collect() } else { own };
        cases.push(overeager_judge::SelfTestCase { predicate: u.predicate, args: u.args, source: format!("scenario {} ({})", u.scenario, u.place), bundles });
    }
    for p in &info.predicates {
        for (i, example) in p.args_schema.get("examples").and_then(Value::as_array).into_iter().flatten().enumerate() {
            cases.push(overeager_judge::SelfTestCase { predicate: p.name.clone(), args: example.to_string(), source: format!("its own example {}", i + 1), bundles: recent.clone() });
        }
        cases.push(overeager_judge::SelfTestCase { predicate: p.name.clone(), args: "{}".into(), source: "no arguments".into(), bundles: recent.clone() });
    }
    Ok(cases)
}

/// Revokes a predicate signing key in the server's trust store (admin token): the modules it
/// signed are unloaded at once, every page shows them as revoked, and the verdicts they helped
/// make are judged again.
#[utoipa::path(post, path = endpoint::REVOKE_KEY.path, params(("id" = String, Path, description = "key id, e.g. ed25519:0123456789abcdef")), security(("bearer" = [])),
    request_body(content = Option<super::board::Decision>),
    responses((status = 200, description = "Revoked; how many verdicts were judged again"), (status = 401, description = "No or unknown token"), (status = 403, description = "Not an admin token"), (status = 404, description = "Not in the trust store")))]
pub async fn revoke_key(State(st): State<Arc<AppState>>, headers: HeaderMap, Path(id): Path<String>, body: Option<Json<super::board::Decision>>) -> Api<Json<KeyRevoked>> {
    let who = st.authorize(&headers, Role::Admin)?;
    let reason = body.and_then(|b| b.0.note).filter(|n| !n.trim().is_empty());
    let st2 = st.clone();
    let id2 = id.clone();
    tokio::task::spawn_blocking(move || {
        let mut trust = super::load_trust(&st2.config.trust)?;
        trust.revoke(&id2, reason).map_err(|e| ApiError::not_found(format!("{e:#}")))?;
        trust.save(&st2.config.trust)?;
        st2.reload_judge()?;
        Ok::<_, ApiError>(())
    })
    .await
    .map_err(ApiError::internal)??;
    st.changed();
    tracing::info!("{} revoked predicate key {id}", who.name);
    Ok(Json(KeyRevoked { key: id, state: "revoked".into() }))
}

async fn decide(st: Arc<AppState>, headers: HeaderMap, digest: String, approve: bool) -> Api<Json<Value>> {
    let who = st.authorize(&headers, Role::Admin)?;
    let rows = st.with_store(|s| s.predicate_rows())?;
    let Some(row) = rows.iter().find(|p| p.digest == digest) else {
        return Err(ApiError::not_found(format!("no uploaded predicate has digest {digest}; GET /api/predicates lists them")));
    };
    if row.status != "pending" {
        return Err(ApiError::new(StatusCode::CONFLICT, format!("predicate {digest} is {} already; only pending uploads can be decided", row.status)));
    }
    let row = st.with_store(|s| s.decide_predicate(&digest, approve, &who.name))?;
    if approve {
        // Loading it re-judges what it can now judge: seconds on a large store, off the workers.
        let st2 = st.clone();
        tokio::task::spawn_blocking(move || st2.reload_judge()).await.map_err(ApiError::internal)??;
    }
    Ok(Json(serde_json::to_value(&row).map_err(ApiError::internal)?))
}

/// Approves a pending predicate: the server's judge uses it from now on (admin token).
#[utoipa::path(post, path = endpoint::APPROVE_PREDICATE.path, params(("digest" = String, Path, description = "module digest")), security(("bearer" = [])),
    responses((status = 200, description = "Approved"), (status = 401, description = "No or unknown token"), (status = 403, description = "Not an admin token"),
              (status = 404, description = "Unknown digest"), (status = 409, description = "Not pending")))]
pub async fn approve_predicate(State(st): State<Arc<AppState>>, headers: HeaderMap, Path(digest): Path<String>) -> Api<Json<Value>> {
    decide(st, headers, digest, true).await
}

/// Rejects a pending predicate (admin token).
#[utoipa::path(post, path = endpoint::REJECT_PREDICATE.path, params(("digest" = String, Path, description = "module digest")), security(("bearer" = [])),
    responses((status = 200, description = "Rejected"), (status = 401, description = "No or unknown token"), (status = 403, description = "Not an admin token"),
              (status = 404, description = "Unknown digest"), (status = 409, description = "Not pending")))]
pub async fn reject_predicate(State(st): State<Arc<AppState>>, headers: HeaderMap, Path(digest): Path<String>) -> Api<Json<Value>> {
    decide(st, headers, digest, false).await
}

/// The API tokens: each holder's name, role and creation time, never a token (admin token).
#[utoipa::path(get, path = endpoint::TOKENS.path, security(("bearer" = [])),
    responses((status = 200, description = "Tokens"), (status = 401, description = "No or unknown token"), (status = 403, description = "Not an admin token")))]
pub async fn tokens(State(st): State<Arc<AppState>>, headers: HeaderMap) -> Api<Json<TokenList>> {
    st.authorize(&headers, Role::Admin)?;
    let tokens = st.read(|s| s.tokens())?;
    Ok(Json(TokenList { tokens }))
}

/// Revokes the token named `name` (admin token): the next request that carries it is refused
/// as unknown; what its holder uploaded or labelled stays.
#[utoipa::path(delete, path = endpoint::REVOKE_TOKEN.path, params(("name" = String, Path, description = "the token's name")), security(("bearer" = [])),
    responses((status = 200, description = "Revoked"), (status = 401, description = "No or unknown token"), (status = 403, description = "Not an admin token"), (status = 404, description = "No token of that name")))]
pub async fn revoke_token(State(st): State<Arc<AppState>>, headers: HeaderMap, Path(name): Path<String>) -> Api<Json<TokenRevoked>> {
    let who = st.authorize(&headers, Role::Admin)?;
    let revoked = st.with_store(|s| s.revoke_token(&name)).map_err(|e| ApiError::not_found(format!("{e:#}")))?;
    tracing::info!("{} revoked the token of {}", who.name, revoked.name);
    Ok(Json(TokenRevoked { name: revoked.name, role: revoked.role, state: "revoked".into() }))
}

/// This module's endpoints, each under the path and method [`overeager_wire::endpoint`]
/// declares.
pub(crate) fn routes(r: axum::Router<Arc<AppState>>) -> axum::Router<Arc<AppState>> {
    r
        .route(endpoint::START_EXPERIMENT.path, crate::route::on(&endpoint::START_EXPERIMENT, start_experiment))
        .route(endpoint::PROGRESS.path, crate::route::on(&endpoint::PROGRESS, progress_events))
        .route(endpoint::CONTROL.path, crate::route::on(&endpoint::CONTROL, steer_experiment))
        .route(endpoint::TOKENS.path, crate::route::on(&endpoint::TOKENS, tokens))
        .route(endpoint::REVOKE_TOKEN.path, crate::route::on(&endpoint::REVOKE_TOKEN, revoke_token))
        .route(endpoint::UPLOAD_BUNDLE.path, crate::route::on(&endpoint::UPLOAD_BUNDLE, upload_bundle).layer(axum::extract::DefaultBodyLimit::max(crate::limits::MAX_BUNDLE_BYTES + (1 << 20))))
        .route(endpoint::UPLOAD_PREDICATE.path, crate::route::on(&endpoint::UPLOAD_PREDICATE, upload_predicate).layer(axum::extract::DefaultBodyLimit::max(crate::limits::MAX_MODULE_BYTES + crate::limits::MAX_SIGNATURE_BYTES + (1 << 20))))
        .route(endpoint::APPROVE_PREDICATE.path, crate::route::on(&endpoint::APPROVE_PREDICATE, approve_predicate))
        .route(endpoint::REJECT_PREDICATE.path, crate::route::on(&endpoint::REJECT_PREDICATE, reject_predicate))
        .route(endpoint::REVOKE_KEY.path, crate::route::on(&endpoint::REVOKE_KEY, revoke_key))
}

/// This module's part of the OpenAPI document.
#[derive(utoipa::OpenApi)]
#[openapi(paths(start_experiment, progress_events, steer_experiment, tokens, revoke_token, upload_bundle, upload_predicate, approve_predicate, reject_predicate, revoke_key))]
pub(crate) struct Doc;
