//! What every handler shares: the store and its connections, the judge, the caches and the
//! permits that bound concurrent work.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use anyhow::Result;
use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use overeager_judge::trust::TrustStore;
use overeager_judge::{Judge, JudgeOptions};
use overeager_store::Store;
use overeager_store::tokens::{Role, TokenOwner};

use crate::limits::*;
use crate::{ApiError, board, flight, reports, trace, write};

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
    pub(crate) fn get(&self, key: &str, version: i64) -> Option<Bytes> {
        let held = self.0.lock().unwrap_or_else(|p| p.into_inner());
        held.0.get(key).filter(|(v, _)| *v == version).map(|(_, b)| b.clone())
    }

    pub(crate) fn put(&self, key: String, version: i64, body: Bytes) {
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
    pub(crate) store: Mutex<Store>,
    pub(crate) judge: RwLock<Arc<Judge>>,
    pub(crate) reports: Mutex<BTreeMap<String, Arc<reports::CachedReport>>>,
    /// Reports and traces being computed: one computation per cold key, however many wait.
    pub(crate) report_flights: flight::Flights<Option<Arc<reports::CachedReport>>>,
    pub(crate) trace_flights: flight::Flights<Arc<trace::Trace>>,
    pub(crate) traces: trace::Cache,
    /// Experiments this server is running now.
    pub(crate) running: Mutex<BTreeMap<String, Instant>>,
    /// Why the last run of an experiment started here stopped early.
    pub(crate) errors: Mutex<BTreeMap<String, String>>,
    /// The newest experiment, and when the store was asked.
    pub(crate) newest: Mutex<Option<(Instant, Option<String>)>>,
    /// The scenario list and the experiment list, recomputed when the store changed: under
    /// load they are asked for far more often than they change.
    pub(crate) scenario_rows: Recent<Vec<overeager_store::scenarios::ScenarioRow>>,
    pub(crate) experiment_list: Recent<Vec<overeager_wire::experiment::ExperimentItem>>,
    /// Idle read-only connections.
    pub(crate) readers: Mutex<Vec<Store>>,
    /// A connection that only asks SQLite whether anyone committed (`PRAGMA data_version`
    /// changes with every other connection's commit), so freshness checks never wait for the
    /// writer.
    pub(crate) version: Mutex<Store>,
    pub(crate) bodies: Bodies,
    /// Permits for checking and judging received bundles.
    pub(crate) uploads: Arc<tokio::sync::Semaphore>,
    /// Permits for predicate self-tests.
    pub(crate) self_tests: Arc<tokio::sync::Semaphore>,
    /// Permits for searches.
    pub(crate) searches: Arc<tokio::sync::Semaphore>,
    /// Uploads (bundle or module digests) being received or judged now: a second upload of the
    /// same digest meanwhile is told so, not judged twice.
    pub(crate) inflight: Mutex<std::collections::HashSet<String>>,
    /// Held while a declaration of runs is parsed and stored.
    pub(crate) declarations: tokio::sync::Mutex<()>,
    /// Bodies being received now, per account.
    pub(crate) receiving: Mutex<BTreeMap<String, usize>>,
    /// The trust store file as last read (size, modification time, inode): a change, such as a
    /// revocation, reloads the judge before its next use.
    pub(crate) trust_seen: Mutex<Option<TrustFingerprint>>,
}

/// What identifies a version of the trust store file without reading it.
type TrustFingerprint = Option<(u64, std::time::SystemTime, u64)>;

fn trust_fingerprint(path: &Path) -> TrustFingerprint {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.modified().ok()?, m.ino()))
}

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
    pub(crate) fn topic_versions(&self) -> Result<overeager_store::versions::TopicVersions> {
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
