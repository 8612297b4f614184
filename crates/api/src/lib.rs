//! The HTTP face of the store: a JSON API (documented at `/api/openapi.json`) and the web app,
//! served by one axum server. Reads are public; writes need a bearer token
//! (`overeager token create`). Submitted bundles are judged here, by the server's own trusted
//! predicates; uploaded predicates are verified, self-tested and held until an admin approves
//! them.

mod autoreply;
pub mod board;
pub mod body;
pub mod client;
mod flight;
mod labels;
mod openapi;
pub mod publish;
mod read;
mod reports;
pub mod trace;
mod upload;
mod write;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use axum::Router;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tower_http::compression::CompressionLayer;
use tower_http::services::{ServeDir, ServeFile};

use overeager_judge::trust::TrustStore;
use overeager_judge::{Judge, JudgeOptions};
use overeager_store::Store;
use overeager_store::web::{Role, TokenOwner};

/// Largest packed bundle a client may submit.
pub const MAX_BUNDLE_BYTES: usize = 64 << 20;
/// Bundles received, checked and judged at once; more get 503 with `Retry-After`.
pub const MAX_CONCURRENT_UPLOADS: usize = 2;
/// Largest declaration of a cell's runs (`POST /api/submissions`).
pub const MAX_DECLARATION_BYTES: usize = 32 << 20;
/// Largest predicate component a client may upload.
pub const MAX_MODULE_BYTES: usize = 8 << 20;
/// Largest signature file.
pub const MAX_SIGNATURE_BYTES: usize = 16 << 10;
/// Stored bundles an uploaded predicate is self-tested on.
const SELF_TEST_BUNDLES: usize = 12;
/// Memory the trace viewer's cache of prepared bundles may hold.
const TRACE_CACHE_BYTES: usize = 256 << 20;
/// Read connections kept open between requests.
const MAX_IDLE_READERS: usize = 8;
/// How long a cached report is served before the store is asked whether it changed.
pub const REPORT_RECHECK: Duration = Duration::from_millis(500);
/// List endpoints whose answers are kept while the store is unchanged (see [`Bodies`]).
const CACHED_LISTS: [&str; 3] = ["/api/runs", "/api/scenarios", "/api/experiments"];
/// Most answers, and most bytes, [`Bodies`] keeps; and the largest answer it keeps.
const BODIES_MAX_ENTRIES: usize = 512;
const BODIES_MAX_BYTES: usize = 64 << 20;
const BODY_MAX_BYTES: usize = 8 << 20;

/// How the server is set up.
#[derive(Debug, Clone)]
pub struct Config {
    pub db: PathBuf,
    /// The built web app (Trunk's `dist/`); `None` serves the API only.
    pub dist: Option<PathBuf>,
    /// The trust store for uploaded predicates.
    pub trust: PathBuf,
    /// Where plans that `POST /api/experiments` may start live.
    pub plans: PathBuf,
}

/// A value computed from the store and reused while the store is unchanged.
pub(crate) struct Recent<T>(Mutex<Option<(i64, Arc<T>)>>);

impl<T> Default for Recent<T> {
    fn default() -> Self {
        Recent(Mutex::new(None))
    }
}

impl<T> Recent<T> {
    /// The value, computed again by `f` when the store's version is not the one it was
    /// computed at (read the version before `f` reads the store).
    pub(crate) fn get(&self, version: i64, f: impl FnOnce() -> Result<T>) -> Result<Arc<T>> {
        if let Some((at, v)) = self.0.lock().unwrap_or_else(|p| p.into_inner()).as_ref()
            && *at == version
        {
            return Ok(v.clone());
        }
        let v = Arc::new(f()?);
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some((version, v.clone()));
        Ok(v)
    }
}

/// Serialized answers of the list endpoints, by request, with the store version they were
/// computed at. Answering a repeated request is then a lookup, so an endpoint under load costs
/// the others little CPU; a commit by anyone changes the version and so retires every answer.
#[derive(Default)]
pub(crate) struct Bodies(Mutex<(std::collections::HashMap<String, (i64, Bytes)>, usize)>);

impl Bodies {
    fn get(&self, key: &str, version: i64) -> Option<Bytes> {
        let held = self.0.lock().unwrap_or_else(|p| p.into_inner());
        held.0.get(key).filter(|(v, _)| *v == version).map(|(_, b)| b.clone())
    }

    fn put(&self, key: String, version: i64, body: Bytes) {
        let mut held = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let (map, bytes) = &mut *held;
        if map.len() >= BODIES_MAX_ENTRIES || *bytes + body.len() > BODIES_MAX_BYTES {
            map.retain(|_, (v, _)| *v == version);
            if map.len() >= BODIES_MAX_ENTRIES || map.values().map(|(_, b)| b.len()).sum::<usize>() + body.len() > BODIES_MAX_BYTES {
                map.clear();
            }
            *bytes = map.values().map(|(_, b)| b.len()).sum();
        }
        *bytes += body.len();
        if let Some((_, old)) = map.insert(key, (version, body)) {
            *bytes -= old.len();
        }
    }
}

impl AppState {
    /// Forgets the newest experiment after this server changed the store.
    pub(crate) fn changed(&self) {
        // The lists follow the store's version by themselves; reports compare theirs only every
        // REPORT_RECHECK, so they are asked to compare at the next request.
        *self.newest.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.recheck_reports();
    }
}

/// What every handler shares.
pub struct AppState {
    pub config: Config,
    store: Mutex<Store>,
    judge: RwLock<Arc<Judge>>,
    reports: Mutex<BTreeMap<String, Arc<reports::CachedReport>>>,
    /// Reports and traces being computed: one computation per cold key, however many wait.
    pub(crate) report_flights: flight::Flights<Option<Arc<reports::CachedReport>>>,
    pub(crate) trace_flights: flight::Flights<Arc<trace::Trace>>,
    traces: trace::Cache,
    /// Experiments this server is running now.
    running: Mutex<BTreeMap<String, Instant>>,
    /// Why the last run of an experiment started here stopped early.
    errors: Mutex<BTreeMap<String, String>>,
    /// The newest experiment, and when the store was asked.
    newest: Mutex<Option<(Instant, Option<String>)>>,
    /// The scenario list and the experiment list, recomputed when the store changed: under
    /// load they are asked for far more often than they change.
    scenario_rows: Recent<Vec<overeager_store::web::ScenarioRow>>,
    experiment_list: Recent<Vec<overeager_wire::experiment::ExperimentItem>>,
    /// Idle read-only connections.
    readers: Mutex<Vec<Store>>,
    /// A connection that only asks SQLite whether anyone committed (`PRAGMA data_version`
    /// changes with every other connection's commit), so freshness checks never wait for the
    /// writer.
    version: Mutex<Store>,
    bodies: Bodies,
    /// Permits for checking and judging received bundles.
    uploads: Arc<tokio::sync::Semaphore>,
    /// Permits for predicate self-tests.
    self_tests: Arc<tokio::sync::Semaphore>,
    /// Permits for searches.
    pub(crate) searches: Arc<tokio::sync::Semaphore>,
    /// Uploads (bundle or module digests) being received or judged now: a second upload of the
    /// same digest meanwhile is told so, not judged twice.
    inflight: Mutex<std::collections::HashSet<String>>,
    /// Held while a declaration of runs is parsed and stored.
    declarations: tokio::sync::Mutex<()>,
    /// Bodies being received now, per account.
    receiving: Mutex<BTreeMap<String, usize>>,
    /// The trust store file as last read (size, modification time, inode): a change, such as a
    /// revocation, reloads the judge before its next use.
    trust_seen: Mutex<Option<TrustFingerprint>>,
}

/// What identifies a version of the trust store file without reading it.
type TrustFingerprint = Option<(u64, std::time::SystemTime, u64)>;

fn trust_fingerprint(path: &Path) -> TrustFingerprint {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.modified().ok()?, m.ino()))
}

/// Bodies one account may be sending at once, and all accounts together.
pub const MAX_RECEIVING_PER_ACCOUNT: usize = 4;
pub const MAX_RECEIVING: usize = 64;
/// How long a received bundle waits for a judging slot before the answer is 503.
const JUDGE_WAIT: Duration = Duration::from_secs(120);
/// Predicate modules self-tested at once.
pub const MAX_CONCURRENT_SELF_TESTS: usize = 1;
/// Searches run at once (each may use a core until its budget): more wait for a slot up to
/// [`SEARCH_WAIT`], then get 503 with `Retry-After`, so searches never crowd out the other
/// pages' reads.
pub const MAX_CONCURRENT_SEARCHES: usize = 1;
/// How long a search waits for a slot.
pub const SEARCH_WAIT: Duration = Duration::from_millis(500);
/// The time a search may take inside the store; one that needs more is refused with advice.
/// A debug build (the tests') runs the store's code unoptimized, many times slower, and gets
/// ten times the release build's two seconds.
pub const SEARCH_BUDGET: Duration = if cfg!(debug_assertions) { Duration::from_secs(20) } else { Duration::from_secs(2) };

/// A digest marked as being uploaded; unmarked when dropped.
pub(crate) struct InFlight<'a>(&'a AppState, String);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.inflight.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.1);
    }
}

/// A body being received for an account; released when dropped.
pub(crate) struct Receiving<'a>(&'a AppState, String);

impl Drop for Receiving<'_> {
    fn drop(&mut self) {
        let mut r = self.0.receiving.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = r.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                r.remove(&self.1);
            }
        }
    }
}

impl AppState {
    /// Opens the store (creating it if needed) and loads the judge with the built-in library
    /// and every approved predicate.
    pub fn open(config: Config) -> Result<Arc<AppState>> {
        let store = Store::open(&config.db)?;
        let trust_path = config.trust.clone();
        let judge = build_judge(&store, &config.trust)?;
        let version = Mutex::new(Store::open_reader(&config.db)?);
        Ok(Arc::new(AppState {
            config,
            store: Mutex::new(store),
            judge: RwLock::new(Arc::new(judge)),
            reports: Mutex::new(BTreeMap::new()),
            report_flights: Default::default(),
            trace_flights: Default::default(),
            traces: trace::Cache::new(6, TRACE_CACHE_BYTES),
            running: Mutex::new(BTreeMap::new()),
            errors: Mutex::new(BTreeMap::new()),
            newest: Mutex::new(None),
            uploads: Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_UPLOADS)),
            self_tests: Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_SELF_TESTS)),
            searches: Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_SEARCHES)),
            inflight: Mutex::new(Default::default()),
            declarations: tokio::sync::Mutex::new(()),
            receiving: Mutex::new(BTreeMap::new()),
            trust_seen: Mutex::new(Some(trust_fingerprint(&trust_path))),
            readers: Mutex::new(Vec::new()),
            version,
            bodies: Bodies::default(),
            scenario_rows: Recent::default(),
            experiment_list: Recent::default(),
        }))
    }

    /// Runs a read with a connection of its own from the pool, so reads never wait for each
    /// other or for the writer. On a request thread the runtime is told that this blocks.
    pub(crate) fn read<T>(&self, f: impl FnOnce(&Store) -> Result<T>) -> Result<T> {
        match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(|| self.read_here(f)),
            _ => self.read_here(f),
        }
    }

    /// [`AppState::read`] on this thread, for a thread that may block (`spawn_blocking`).
    pub(crate) fn read_here<T>(&self, f: impl FnOnce(&Store) -> Result<T>) -> Result<T> {
        let reader = self.readers.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let reader = match reader {
            Some(r) => r,
            None => Store::open_reader(&self.config.db)?,
        };
        let out = f(&reader);
        let mut idle = self.readers.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < MAX_IDLE_READERS {
            idle.push(reader);
        }
        out
    }

    /// The versions of what reports are computed from (see [`reports`]).
    pub(crate) fn topic_versions(&self) -> Result<overeager_store::web::TopicVersions> {
        self.version
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .topic_versions()
    }

    /// The store's version: it changes whenever anyone commits.
    pub(crate) fn store_version(&self) -> Result<i64> {
        Ok(self.version.lock().unwrap_or_else(|p| p.into_inner()).data_version()?.0)
    }

    /// Runs `f` with the store's one writing connection.
    pub(crate) fn with_store<T>(&self, f: impl FnOnce(&mut Store) -> Result<T>) -> Result<T> {
        let mut s = self.store.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut s)
    }

    /// The judge, reloaded first if the trust store file changed since it was built (a key
    /// revoked by `overeager keys revoke` bites at once).
    pub(crate) fn judge(&self) -> Arc<Judge> {
        if self.trust_changed() {
            if let Err(e) = self.reload_judge() {
                tracing::error!("reloading the judge after the trust store changed: {e:#}");
            }
        }
        self.judge.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether the trust store file is not the one the judge was built from.
    fn trust_changed(&self) -> bool {
        let now = trust_fingerprint(&self.config.trust);
        *self.trust_seen.lock().unwrap_or_else(|p| p.into_inner()) != Some(now)
    }

    /// Reloads the judge after the set of approved predicates or the trust store changed, and
    /// re-judges what modules no longer trusted judged.
    pub(crate) fn reload_judge(&self) -> Result<()> {
        let seen = trust_fingerprint(&self.config.trust);
        let judge = Arc::new(self.with_store(|s| build_judge(s, &self.config.trust))?);
        let old = std::mem::replace(&mut *self.judge.write().unwrap_or_else(|p| p.into_inner()), judge.clone());
        *self.trust_seen.lock().unwrap_or_else(|p| p.into_inner()) = Some(seen);
        let (before, after) = (old.module_versions(), judge.module_versions());
        let gone: Vec<(String, String)> = before.iter().filter(|m| !after.contains(m)).cloned().collect();
        let added: Vec<(String, String)> = after.iter().filter(|m| !before.contains(m)).cloned().collect();
        if !gone.is_empty() {
            let moved = self.with_store(|s| board::rejudge_judged_by(s, &judge, &gone))?;
            tracing::info!("modules no longer trusted: {gone:?}; {moved} verdict(s) judged again");
            self.traces.clear();
        }
        // This server's own experiments: every run a module that came or went judged, or could
        // not be judged without.
        let changed: std::collections::BTreeSet<&str> = gone.iter().chain(&added).map(|(id, _)| id.as_str()).collect();
        if !changed.is_empty() {
            let r = self.with_store(|s| {
                let mut runs: BTreeMap<String, overeager_store::JudgedRun> = BTreeMap::new();
                for id in &changed {
                    runs.extend(s.runs_touching_module(id)?.into_iter().map(|r| (r.run.clone(), r)));
                }
                overeager_experiment::rejudge::rejudge_runs(s, &judge, &runs.into_values().collect::<Vec<_>>())
            })?;
            tracing::info!("modules changed: {changed:?}; {} run(s) of this store's experiments judged again, {} outcome(s) moved", r.bundles, r.moved.len());
            self.traces.clear();
            self.changed();
        }
        Ok(())
    }

    /// Marks `key` (e.g. `bundle:<digest>`) as being uploaded, or says it is already.
    pub(crate) fn start_upload(&self, key: String) -> Result<InFlight<'_>, ApiError> {
        if !self.inflight.lock().unwrap_or_else(|p| p.into_inner()).insert(key.clone()) {
            return Err(ApiError::new(StatusCode::CONFLICT, format!("{} is being uploaded by another request right now; wait for its answer (then it is here already)", key.replace(':', " "))));
        }
        Ok(InFlight(self, key))
    }

    /// Counts a body being received for `account`, within [`MAX_RECEIVING_PER_ACCOUNT`] and
    /// [`MAX_RECEIVING`].
    pub(crate) fn start_receiving(&self, account: &str) -> Result<Receiving<'_>, Response> {
        let mut r = self.receiving.lock().unwrap_or_else(|p| p.into_inner());
        if r.get(account).copied().unwrap_or(0) >= MAX_RECEIVING_PER_ACCOUNT {
            let mut res = ApiError::new(StatusCode::TOO_MANY_REQUESTS, format!("{MAX_RECEIVING_PER_ACCOUNT} uploads of `{account}` are arriving already; send one at a time")).into_response();
            res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
            return Err(res);
        }
        if r.values().sum::<usize>() >= MAX_RECEIVING {
            return Err(write::busy(format!("{MAX_RECEIVING} uploads are arriving already; retry in a few seconds")));
        }
        *r.entry(account.to_string()).or_default() += 1;
        Ok(Receiving(self, account.to_string()))
    }

    /// Upload bodies being received now, every account's together.
    pub(crate) fn receiving_now(&self) -> usize {
        self.receiving.lock().unwrap_or_else(|p| p.into_inner()).values().sum()
    }

    /// A slot to check and judge a received bundle: waits for one up to [`JUDGE_WAIT`].
    pub(crate) async fn judge_slot(&self) -> Result<tokio::sync::OwnedSemaphorePermit, Response> {
        match tokio::time::timeout(JUDGE_WAIT, self.uploads.clone().acquire_owned()).await {
            Ok(Ok(p)) => Ok(p),
            _ => Err(write::busy(format!("{MAX_CONCURRENT_UPLOADS} bundles are being judged and others wait; retry in a few seconds"))),
        }
    }

    /// The newest experiment, for requests that name none (asked of the store at most every
    /// [`REPORT_RECHECK`]).
    pub(crate) fn default_experiment(&self) -> Result<Option<String>> {
        let mut newest = self.newest.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, id)) = newest.as_ref()
            && at.elapsed() < REPORT_RECHECK
        {
            return Ok(id.clone());
        }
        let id = self.read(|s| Ok(s.experiments()?.into_iter().max_by_key(|e| e.created_us).map(|e| e.id)))?;
        *newest = Some((Instant::now(), id.clone()));
        Ok(id)
    }

    /// Who sent this request, if it carries a token with at least `need`.
    pub(crate) fn authorize(&self, headers: &HeaderMap, need: Role) -> Result<TokenOwner, ApiError> {
        let Some(value) = headers.get(header::AUTHORIZATION) else {
            return Err(ApiError::new(StatusCode::UNAUTHORIZED, "this request changes the store: send `Authorization: Bearer <token>` (create a token with `overeager token create`)"));
        };
        // The scheme is case-insensitive (RFC 9110 §11.1).
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.trim_start().split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, t)| t.trim())
            .unwrap_or("");
        if token.is_empty() {
            return Err(ApiError::new(StatusCode::UNAUTHORIZED, "the Authorization header must be `Bearer <token>`"));
        }
        let owner = self.read(|s| s.token_owner(token))?;
        let Some(owner) = owner else {
            return Err(ApiError::new(StatusCode::UNAUTHORIZED, "the bearer token is not known to this server"));
        };
        if owner.role < need {
            let how = if need == Role::Admin { "overeager token create --admin" } else { "overeager token create" };
            return Err(ApiError::new(StatusCode::FORBIDDEN, format!("token `{}` is a {} token; this needs a{} {} token (`{how}`)", owner.name, owner.role.as_str(), if need == Role::Admin { "n" } else { "" }, need.as_str())));
        }
        Ok(owner)
    }
}

/// The judge the server trusts: the built-in library and the approved uploads.
pub fn build_judge(store: &Store, trust_path: &Path) -> Result<Judge> {
    let trust = load_trust(trust_path)?;
    let mut judge = Judge::new(JudgeOptions { limits: overeager_judge::engine::Limits::default(), jobs: 2, cache: overeager_judge::engine::default_cache_dir(), trust })?;
    let dir = store.predicates_dir();
    for p in store.predicate_rows()?.into_iter().filter(|p| p.status == "approved") {
        let report = judge.add_module(&dir.join(format!("{}.wasm", p.digest)));
        if let Some(e) = report.error {
            tracing::warn!("approved predicate {} ({}) could not be loaded: {e}", p.id, p.digest);
        }
    }
    Ok(judge)
}

/// The trust store at `path`; a missing file is an empty store (uploads are then refused as untrusted).
pub(crate) fn load_trust(path: &Path) -> Result<TrustStore> {
    if path.is_file() { TrustStore::load(path) } else { Ok(TrustStore::default()) }
}

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
async fn json_errors(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
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

/// A JSON body that is already serialized.
pub(crate) fn json_bytes(body: Bytes) -> Response {
    ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response()
}

/// `Content-Disposition` of a download named `name`. Names carry what a caller wrote (an
/// experiment or queue id), so everything but letters, digits, `.`, `-` and `_` becomes `_`:
/// no quote, line end or `;` can end the header's value early or add a `filename*` that
/// renames the file.
pub(crate) fn attachment(name: &str) -> HeaderValue {
    let mut safe: String = name.chars().take(120).map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect();
    if safe.trim_matches(['.', '_']).is_empty() {
        safe = "download".into();
    }
    HeaderValue::from_str(&format!("attachment; filename=\"{safe}\"")).expect("only ASCII letters, digits and `._-` are left")
}

/// The whole application: API routes, then the web app for every other path.
pub fn router(state: Arc<AppState>) -> Router {
    let api = Router::new()
        .route("/api/health", get(read::health))
        .route("/api/openapi.json", get(openapi::document))
        .route("/api/leaderboard", get(read::leaderboard))
        .route("/api/cells", get(read::cells))
        .route("/api/experiments", get(read::experiments).post(write::start_experiment))
        .route("/api/experiments/{id}", get(read::experiment))
        .route("/api/experiments/{id}/report", get(read::report))
        .route("/api/experiments/{id}/progress", get(write::progress_events))
        .route("/api/experiments/{id}/control", post(write::steer_experiment))
        .route("/api/experiments/{id}/plots/{name}", get(read::plot))
        .route("/api/plans", get(read::plans))
        .route("/api/scenarios", get(read::scenarios))
        .route("/api/scenarios/{key}", get(read::scenario))
        .route("/api/runs", get(read::runs))
        .route("/api/search", get(read::search))
        .route("/api/runs/{id}", get(read::run))
        .route("/api/runs/{id}/label", axum::routing::put(labels::put_label).delete(labels::delete_label))
        .route("/api/labels", get(labels::labels))
        .route("/api/labels/report", get(labels::labels_report))
        .route("/api/queues", get(labels::queues).post(labels::create_queue))
        .route("/api/queues/{id}", get(labels::queue))
        .route("/api/whoami", get(labels::whoami))
        .route("/api/tokens", get(write::tokens))
        .route("/api/tokens/{name}", axum::routing::delete(write::revoke_token))
        .route("/api/runs/{id}/export", get(read::run_export))
        .route("/api/bundles", get(read::submissions).post(write::submit_bundle).layer(DefaultBodyLimit::max(MAX_BUNDLE_BYTES + (1 << 20))))
        .route("/api/bundles/{digest}", get(read::bundle))
        .route("/api/bundles/{digest}/events/{chunk}", get(read::bundle_events))
        .route("/api/bundles/{digest}/raw/{name}", get(read::bundle_raw))
        .route("/api/bundles/{digest}/download", get(read::bundle_download))
        .route("/api/predicates", get(read::predicates).post(write::upload_predicate).layer(DefaultBodyLimit::max(MAX_MODULE_BYTES + MAX_SIGNATURE_BYTES + (1 << 20))))
        .route("/api/predicates/{digest}/approve", post(write::approve_predicate))
        .route("/api/predicates/{digest}/reject", post(write::reject_predicate))
        .route("/api/benchmarks", get(board::benchmarks))
        .route("/api/benchmarks/{name}", get(board::benchmark))
        .route("/api/submissions", get(board::submissions).post(board::open_submission).layer(DefaultBodyLimit::max(MAX_DECLARATION_BYTES)))
        .route("/api/submissions/rejudge", post(board::rejudge))
        .route("/api/submissions/{id}", get(board::submission))
        .route("/api/submissions/{id}/bundles/{digest}", axum::routing::put(board::upload_bundle).layer(DefaultBodyLimit::max(MAX_BUNDLE_BYTES + (1 << 20))))
        .route("/api/submissions/{id}/verify", post(board::verify_submission))
        .route("/api/submissions/{id}/approve", post(board::approve))
        .route("/api/submissions/{id}/reject", post(board::reject))
        .route("/api/submissions/{id}/withdraw", post(board::withdraw))
        .route("/api/runners", get(board::runners))
        .route("/api/runners/{key}/revoke", post(board::revoke_runner))
        .route("/api/keys", get(read::keys))
        .route("/api/keys/{id}/revoke", post(write::revoke_key))
        .route("/api/transfer", get(read::transfer))
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

/// Hands memory freed after a large request back to the system (glibc keeps freed heap
/// otherwise, and one large declaration would leave the process that much larger).
pub(crate) fn give_back_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Where the built web app is: `$OVEREAGER_DIST`, `./dist`, or `dist/` beside the workspace
/// the binary was built from.
pub fn default_dist() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("OVEREAGER_DIST").map(PathBuf::from),
        Some(PathBuf::from("dist")),
        Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dist")),
    ];
    candidates.into_iter().flatten().find(|d| d.join("index.html").is_file())
}

/// How long a client may take to send a request's headers, and how long a kept-alive
/// connection may sit idle before its next request.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request body may pause between two pieces (see [`body::PACE`] for its rate and
/// deadline).
pub const BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// The most connections served at once: three quarters of the descriptors this process may
/// open (after raising its soft limit to the hard one), so files and the store keep the rest.
fn max_connections() -> usize {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain system calls on a struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        }
    }
    ((lim.rlim_cur.min(1 << 20) as usize) * 3 / 4).clamp(32, 16_384)
}

/// Serves until Ctrl-C. `on_ready` gets the bound address.
///
/// Each connection is HTTP/1.1 with a header-read timeout (slow or idle clients are dropped),
/// request bodies time out when they stall, and beyond [`max_connections`] new connections are
/// closed at once instead of exhausting descriptors.
pub async fn serve(state: Arc<AppState>, addr: SocketAddr, on_ready: impl FnOnce(SocketAddr)) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("binding {addr}: is another server using it? pick one with --addr"))?;
    let local = listener.local_addr()?;
    let slots = Arc::new(tokio::sync::Semaphore::new(max_connections()));
    let app = router(state).layer(axum::middleware::map_request(body::paced));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    on_ready(local);
    let mut ctrl_c = std::pin::pin!(tokio::signal::ctrl_c());
    loop {
        let (socket, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors or similar: wait for connections to finish.
                    tracing::warn!("accepting a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut ctrl_c => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            drop(socket);
            continue;
        };
        let _ = socket.set_nodelay(true);
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT)
            .serve_connection(hyper_util::rt::TokioIo::new(autoreply::JsonAutoReplies::new(socket)), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _ = conn.await;
            drop(slot);
        });
    }
    // Let requests in flight finish, briefly.
    let _ = tokio::time::timeout(Duration::from_secs(5), graceful.shutdown()).await;
    Ok(())
}

/// A multi-threaded runtime to serve on.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the async runtime")
}

/// A server on the store, in this process; its address and the runtime that serves it.
pub fn serve_in_process(db: &Path) -> Result<(tokio::runtime::Runtime, std::net::SocketAddr)> {
    let state = AppState::open(Config { db: db.to_path_buf(), dist: None, trust: PathBuf::from("/nonexistent"), plans: PathBuf::from("plans") })?;
    let rt = runtime()?;
    let (tx, rx) = std::sync::mpsc::channel();
    rt.spawn(serve(state, "127.0.0.1:0".parse().expect("an address"), move |a| {
        let _ = tx.send(a);
    }));
    let addr = rx.recv().context("the server did not start")?;
    Ok((rt, addr))
}

#[cfg(test)]
mod tests {
    /// A link inside `--dist` to a file or directory elsewhere was served.
    #[test]
    fn the_web_app_s_links_are_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let (dist, outside) = (tmp.path().join("dist"), tmp.path().join("outside"));
        std::fs::create_dir_all(dist.join("assets")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(dist.join("index.html"), "<html>app</html>").unwrap();
        std::fs::write(dist.join("assets/app.js"), "js").unwrap();
        std::fs::write(outside.join("secret.txt"), "server secret").unwrap();
        std::os::unix::fs::symlink(outside.join("secret.txt"), dist.join("leak.txt")).unwrap();
        std::os::unix::fs::symlink(&outside, dist.join("out")).unwrap();
        let state = super::AppState::open(super::Config { db: tmp.path().join("store.db"), dist: Some(dist), trust: "/nonexistent".into(), plans: "plans".into() }).unwrap();
        let rt = super::runtime().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        rt.spawn(super::serve(state, "127.0.0.1:0".parse().unwrap(), move |a| tx.send(a).unwrap()));
        let addr = rx.recv().unwrap();
        let agent = ureq::Agent::new_with_config(ureq::config::Config::builder().http_status_as_error(false).build());
        let get = |path: &str| {
            let mut r = agent.get(&format!("http://{addr}{path}")).call().unwrap();
            (r.status().as_u16(), r.body_mut().read_to_string().unwrap())
        };
        assert_eq!(get("/assets/app.js"), (200, "js".to_string()));
        assert_eq!(get("/runs/abc").1, "<html>app</html>", "the app's own routes get its index");
        for path in ["/leak.txt", "/out/secret.txt", "/%6Ceak.txt", "/./out/secret.txt"] {
            let (status, body) = get(path);
            assert_eq!(status, 404, "{path}: {body}");
            assert!(!body.contains("server secret") && body.contains("\"error\""), "{path}: {body}");
        }
        rt.shutdown_background();
    }

    /// `?experiment=x"; filename*=UTF-8''evil.html` renamed the labels download, and a line end
    /// in it answered an anonymous 500.
    #[test]
    fn a_download_s_name_cannot_end_its_header_or_rename_the_file() {
        for (name, want) in [
            ("labels-exp-1.csv", "attachment; filename=\"labels-exp-1.csv\""),
            ("labels-x\"; filename*=UTF-8''evil.html.csv", "attachment; filename=\"labels-x___filename__UTF-8__evil.html.csv\""),
            ("labels-a\r\nSet-Cookie: s=1.csv", "attachment; filename=\"labels-a__Set-Cookie__s_1.csv\""),
            ("", "attachment; filename=\"download\""),
            ("..", "attachment; filename=\"download\""),
        ] {
            assert_eq!(super::attachment(name).to_str().unwrap(), want, "{name:?}");
        }
    }
}
