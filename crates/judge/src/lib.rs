//! The judge: runs trap and success predicates — signed WebAssembly components in a
//! capability-free wasmtime sandbox — over audit bundles, and turns their findings into
//! verdicts.
//!
//! One call per (module, bundle): every check a scenario puts to a module goes in one
//! `evaluate` call, on a fresh instance, so a bundle is parsed once per module and nothing
//! survives from one bundle to the next. A module that fails (traps, runs out of fuel or
//! memory, returns malformed findings) fails only its own checks, as recorded errors.


pub mod engine;
pub mod engine_config;
pub mod input;
pub mod scaffold;
pub mod sign;
pub mod trust;
pub mod verdicts;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use overeager_core::{Scenario, Verdict};
use overeager_core::predicates::{ContentNeed, PredicateRef, std_content_need};
use overeager_core::verdict::{Finding, LeafOutcome, decide, leaf_calls};

pub use engine::Origin;
use engine::{CheckRaw, InfoRaw, Limits, Prepared, Refusal, Sandbox, default_cache_dir};
pub use engine::Interface;
pub use input::{LoadedBundle, View};
use trust::TrustStore;

/// The standard library component, built from `predicates/std` with this binary.
pub const STD_WASM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/std.wasm"));
/// [`STD_WASM`] compiled ahead of time by the build, for the machine and engine settings it
/// was built with (used when they match, so the first verdict need not wait for Cranelift).
const STD_CWASM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/std.cwasm"));
/// Its sha256: the judge trusts `std` by this digest, not by a signature.
pub const STD_SHA256: &str = env!("OVEREAGER_STD_SHA256");
/// The module id of the standard library.
pub const STD_ID: &str = "std";
/// The release of the built-in standard library (`predicates/std/Cargo.toml`).
pub const STD_VERSION: &str = env!("OVEREAGER_STD_VERSION");

/// Largest number of predicates one module may offer.
const MAX_PREDICATES: usize = 256;

/// How many scenarios' call plans the judge keeps; past this it starts again.
const PLANS_KEPT: usize = 1024;

/// What judging a bundle of one scenario asks of the modules, worked out once per scenario
/// (the bundles of a scenario share one parsed scenario, see `overeager_bundle::parse_scenario`): the
/// predicate calls grouped by module, each call's arguments as JSON text, and the scenario as
/// the built-in std reads it.
struct CallPlan {
    /// Every predicate call ([`leaf_calls`]).
    calls: usize,
    /// Calls whose predicate reference does not parse, and why.
    unparsed: Vec<(usize, String)>,
    /// Per module id, in id order, the calls to it in scenario order.
    by_module: Vec<(String, Vec<PlannedCheck>)>,
    /// [`input::std_scenario_json`], made on first use.
    std_scenario: OnceLock<Result<String, String>>,
}

/// One predicate call of a [`CallPlan`].
struct PlannedCheck {
    /// Its place in [`leaf_calls`].
    index: usize,
    name: String,
    /// The arguments as JSON text.
    args: String,
    /// The file contents it reads, were it a call of the built-in std.
    std_need: ContentNeed,
}

impl CallPlan {
    fn of(scenario: &Scenario) -> CallPlan {
        let calls = leaf_calls(scenario);
        let mut unparsed = Vec::new();
        let mut by_module: BTreeMap<String, Vec<PlannedCheck>> = BTreeMap::new();
        for (index, leaf) in calls.iter().enumerate() {
            match PredicateRef::parse(&leaf.call.predicate) {
                Ok(r) => {
                    let std_need = std_content_need(&r.name, &leaf.call.args);
                    by_module.entry(r.module).or_default().push(PlannedCheck { index, name: r.name, args: leaf.call.args.to_string(), std_need });
                }
                Err(e) => unparsed.push((index, e)),
            }
        }
        CallPlan { calls: calls.len(), unparsed, by_module: by_module.into_iter().collect(), std_scenario: OnceLock::new() }
    }

    fn std_scenario(&self, scenario: &Scenario) -> Result<&str, String> {
        self.std_scenario.get_or_init(|| input::std_scenario_json(scenario)).as_deref().map_err(Clone::clone)
    }
}

/// What a loaded module offers and who vouched for it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ModuleInfo {
    pub id: String,
    /// sha256 of the component bytes.
    pub digest: String,
    pub version: String,
    /// The signing key, or `None` for the built-in library.
    pub key_id: Option<String>,
    pub owner: Option<String>,
    pub predicates: Vec<PredicateInfo>,
}

/// One predicate of a module.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PredicateInfo {
    pub name: String,
    pub summary: String,
    pub args_schema: serde_json::Value,
}

enum Slot {
    Ready { info: ModuleInfo, prepared: Prepared },
    Refused { digest: String, reason: String },
}
/// Third-party predicate modules to judge with besides `std`, and the trust store that vouches
/// for them.
#[derive(Debug, Clone, Default)]
pub struct ModuleSet {
    /// Directories of signed `*.wasm` components (each with `<file>.sig` beside it), or files.
    pub predicates: Vec<PathBuf>,
    /// The trust store (default: [`TrustStore::default_path`]).
    pub trust: Option<PathBuf>,
}

impl ModuleSet {
    /// A judge with default limits, `std`, and these modules; a module that is refused is an
    /// error naming it (a run judged without a predicate it needs would be incomplete).
    pub fn judge(&self, jobs: usize) -> anyhow::Result<Judge> {
        let trust = if self.predicates.is_empty() { TrustStore::default() } else { TrustStore::load(&self.trust.clone().unwrap_or_else(TrustStore::default_path))? };
        let mut judge = Judge::new(JudgeOptions { limits: Limits::default(), jobs: jobs.max(1), cache: default_cache_dir(), trust })?;
        for p in &self.predicates {
            for r in judge.add_path(p)? {
                if let Some(e) = r.error {
                    anyhow::bail!("--predicates {}: module {} is refused: {e}", p.display(), r.file.display());
                }
            }
        }
        Ok(judge)
    }
}

/// How the judge is set up.
pub struct JudgeOptions {
    pub limits: Limits,
    /// Calls that may run at once.
    pub jobs: usize,
    /// Where compiled modules are cached (`None`: compile every time).
    pub cache: Option<PathBuf>,
    pub trust: TrustStore,
}

/// A module file the judge was asked to load, and what came of it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LoadReport {
    pub file: PathBuf,
    /// The module id, when the signature names one.
    pub id: Option<String>,
    pub digest: String,
    pub error: Option<String>,
    /// The file a module of the same id was loaded from before: two builds of one module
    /// were offered, and which one judges would depend on the order of the files.
    pub duplicate_of: Option<PathBuf>,
}

/// Loaded modules and the sandbox they run in.
pub struct Judge {
    sandbox: Sandbox,
    modules: BTreeMap<String, Slot>,
    /// The file each third-party module was loaded from.
    files: BTreeMap<String, PathBuf>,
    trust: TrustStore,
    cache: Option<PathBuf>,
    /// Call plans by the address of the scenario they were made for; each entry holds its
    /// scenario, so the address is not reused while the entry lives.
    plans: Mutex<HashMap<usize, (Arc<Scenario>, Arc<CallPlan>)>>,
}

impl Judge {
    /// A judge with the built-in `std` module.
    pub fn new(opts: JudgeOptions) -> anyhow::Result<Judge> {
        let sandbox = Sandbox::new(opts.limits, opts.jobs.max(1))?;
        let mut judge = Judge { sandbox, modules: BTreeMap::new(), files: BTreeMap::new(), trust: opts.trust, cache: opts.cache, plans: Mutex::default() };
        let digest = overeager_core::sha256_hex(STD_WASM);
        if digest != STD_SHA256 {
            anyhow::bail!("the built-in std module does not match the digest it was built with; the binary is damaged");
        }
        let (prepared, predicates) = admit(&judge.sandbox, STD_WASM, &digest, Some(STD_CWASM), judge.cache.as_deref()).map_err(|e| anyhow::anyhow!("the built-in std module: {e}"))?;
        // The component is built by a nested cargo into `target/wasm`; building another checkout
        // into the same target directory can leave that one's std there. Its predicates then
        // differ from this build's catalog: refuse rather than judge with the wrong release.
        let offered: std::collections::BTreeSet<&str> = predicates.iter().map(|p| p.name.as_str()).collect();
        let catalog: std::collections::BTreeSet<&str> = overeager_core::predicates::STD_PREDICATES.iter().map(|p| p.name).collect();
        if offered != catalog {
            anyhow::bail!(
                "the built-in std module offers {} but this build's catalog is {}: it was built from other sources; remove target/wasm and build again",
                offered.into_iter().collect::<Vec<_>>().join(", "),
                catalog.into_iter().collect::<Vec<_>>().join(", ")
            );
        }
        let info = ModuleInfo { id: STD_ID.into(), digest, version: STD_VERSION.into(), key_id: None, owner: Some("overeager".into()), predicates };
        judge.modules.insert(STD_ID.into(), Slot::Ready { info, prepared });
        Ok(judge)
    }

    /// Replaces the built-in `std` with another build of it (an older release, to see what a
    /// change of std changes). Only `overeager judge --compare` does this: the operator names
    /// the file, so it is trusted without a signature; `version` labels it in verdicts.
    pub fn with_std(&mut self, component: &[u8], version: &str) -> anyhow::Result<()> {
        let digest = overeager_core::sha256_hex(component);
        let (prepared, predicates) = admit(&self.sandbox, component, &digest, None, self.cache.as_deref()).map_err(|e| anyhow::anyhow!("the std component: {e}"))?;
        let info = ModuleInfo { id: STD_ID.into(), digest, version: version.into(), key_id: None, owner: None, predicates };
        self.modules.insert(STD_ID.into(), Slot::Ready { info, prepared });
        Ok(())
    }

    /// Loads a signed module file (`<file>.sig` beside it). A refused module is remembered
    /// under its id, so checks that need it report why it is missing.
    pub fn add_module(&mut self, file: &Path) -> LoadReport {
        let bytes = match std::fs::read(file) {
            Ok(b) => b,
            Err(e) => return LoadReport { file: file.into(), id: None, digest: String::new(), error: Some(format!("cannot read it: {e}")), duplicate_of: None },
        };
        let digest = overeager_core::sha256_hex(&bytes);
        let sig_path = PathBuf::from(format!("{}.sig", file.display()));
        let mut report = LoadReport { file: file.into(), id: None, digest: digest.clone(), error: None, duplicate_of: None };
        let sig = match std::fs::read_to_string(&sig_path) {
            Ok(text) => sign::parse_signature(&text),
            Err(_) => Err(sign::SignatureError::Unsigned(sig_path.display().to_string())),
        };
        let result = sig.and_then(|sig| {
            report.id = Some(sig.predicate.clone());
            sign::verify(&bytes, &sig, &self.trust)
        });
        let verified = match result {
            Ok(v) => v,
            Err(e) => return self.refuse(report, e.to_string()),
        };
        if let Some(Slot::Ready { info, .. }) = self.modules.get(&verified.predicate) {
            let first = self.files.get(&verified.predicate).cloned().unwrap_or_else(|| PathBuf::from("the built-in library"));
            report.error = Some(format!(
                "module `{}` is loaded already from {} (version {}, sha256 {}); this file (version {}, sha256 {}) is another build of it: keep one of the two",
                verified.predicate,
                first.display(),
                info.version,
                &info.digest[..12],
                verified.version,
                &digest[..12]
            ));
            report.duplicate_of = Some(first);
            return report;
        }
        match admit(&self.sandbox, &bytes, &digest, None, self.cache.as_deref()) {
            Ok((prepared, _)) if prepared.interface != verified.wit => {
                let e = format!("it is signed as implementing {}, but implements {}; sign it again", verified.wit.wit(), prepared.interface.wit());
                self.refuse(report, e)
            }
            Ok((prepared, predicates)) => {
                let info = ModuleInfo { id: verified.predicate.clone(), digest, version: verified.version, key_id: Some(verified.key_id), owner: verified.owner, predicates };
                self.files.insert(verified.predicate.clone(), file.to_path_buf());
                self.modules.insert(verified.predicate, Slot::Ready { info, prepared });
                report
            }
            Err(e) => self.refuse(report, e.to_string()),
        }
    }

    fn refuse(&mut self, mut report: LoadReport, reason: String) -> LoadReport {
        if let Some(id) = &report.id
            && !self.modules.contains_key(id)
        {
            self.modules.insert(id.clone(), Slot::Refused { digest: report.digest.clone(), reason: reason.clone() });
        }
        report.error = Some(reason);
        report
    }

    /// Loads every `*.wasm` file of a directory (sorted), or one file.
    pub fn add_path(&mut self, path: &Path) -> anyhow::Result<Vec<LoadReport>> {
        if path.is_file() {
            return Ok(vec![self.add_module(path)]);
        }
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| anyhow::anyhow!("{}: cannot read the predicates directory: {e}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
            .collect();
        files.sort();
        Ok(files.iter().map(|f| self.add_module(f)).collect())
    }

    /// The loaded modules.
    pub fn modules(&self) -> impl Iterator<Item = &ModuleInfo> {
        self.modules.values().filter_map(|s| match s {
            Slot::Ready { info, .. } => Some(info),
            Slot::Refused { .. } => None,
        })
    }

    /// (id, version) of every loaded module, as verdicts record them.
    pub fn module_versions(&self) -> Vec<(String, String)> {
        self.modules().map(|m| (m.id.clone(), m.version.clone())).collect()
    }

    /// Where a loaded module's compiled code came from.
    pub fn origin(&self, id: &str) -> Option<Origin> {
        match self.modules.get(id) {
            Some(Slot::Ready { prepared, .. }) => Some(prepared.origin),
            _ => None,
        }
    }

    /// Seconds per fresh instance of the `std` module, averaged over `n` (for `bench judge`).
    pub fn bench_instantiate(&self, n: usize) -> anyhow::Result<f64> {
        match self.modules.get(STD_ID) {
            Some(Slot::Ready { prepared, .. }) => self.sandbox.time_instantiation(prepared, n),
            _ => anyhow::bail!("the std module is not loaded"),
        }
    }

    /// The view and checks of a bundle's `std` call, as [`Judge::judge`] sends them (for
    /// `bench judge`).
    pub fn std_call(&self, bundle: &LoadedBundle) -> Result<(View<'static>, Vec<CheckRaw>), String> {
        let plan = self.plan(&bundle.scenario);
        let planned: Vec<&PlannedCheck> = plan.by_module.iter().filter(|(m, _)| m == STD_ID).flat_map(|(_, c)| c).collect();
        let checks = planned.iter().map(|c| CheckRaw { name: c.name.clone(), args: c.args.clone() }).collect();
        let Some(Slot::Ready { prepared, .. }) = self.modules.get(STD_ID) else { return Err("the std module is not loaded".into()) };
        Ok((std_view(bundle, &plan, &planned, prepared.interface)?, checks))
    }

    /// The call plan of a scenario, made on first use.
    fn plan(&self, scenario: &Arc<Scenario>) -> Arc<CallPlan> {
        let key = Arc::as_ptr(scenario) as usize;
        if let Some((_, plan)) = self.plans.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return plan.clone();
        }
        let plan = Arc::new(CallPlan::of(scenario));
        // A scenario no other bundle shares (its file was too large to keep parsed) would be
        // kept alive by its plan for nothing: no later bundle looks it up.
        if Arc::strong_count(scenario) < 2 {
            return plan;
        }
        let mut plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
        if plans.len() >= PLANS_KEPT {
            plans.clear();
        }
        plans.insert(key, (scenario.clone(), plan.clone()));
        plan
    }

    /// Whether module `id` is loaded and can answer (not missing, not refused).
    fn is_loaded(&self, id: &str) -> bool {
        matches!(self.modules.get(id), Some(Slot::Ready { .. }))
    }

    /// The modules `scenario`'s checks call that this judge has not loaded (refused ones
    /// included), each with a predicate of it that is called (`module:name`): judging its
    /// bundles would leave those checks unanswered.
    pub fn missing_modules(&self, scenario: &Scenario) -> Vec<(String, String)> {
        let plan = CallPlan::of(scenario);
        plan.by_module
            .iter()
            .filter(|(module, _)| !self.is_loaded(module))
            .map(|(module, checks)| (module.clone(), checks.first().map(|c| format!("{module}:{}", c.name)).unwrap_or_default()))
            .collect()
    }

    /// An error naming every module `scenarios` call that this judge has not loaded, and how to
    /// load it; `Ok` when none is missing.
    pub fn require_modules<'s>(&self, scenarios: impl IntoIterator<Item = (&'s str, &'s Scenario)>) -> anyhow::Result<()> {
        let mut missing: BTreeMap<String, (String, String)> = BTreeMap::new();
        for (name, scenario) in scenarios {
            for (module, predicate) in self.missing_modules(scenario) {
                missing.entry(module).or_insert((name.to_string(), predicate));
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        let lines: Vec<String> = missing
            .iter()
            .map(|(module, (scenario, predicate))| {
                let why = match self.modules.get(module) {
                    Some(Slot::Refused { reason, .. }) => format!("it was refused: {reason}"),
                    _ => "no module given provides it".to_string(),
                };
                format!("  `{module}` (scenario {scenario} calls {predicate}): {why}")
            })
            .collect();
        anyhow::bail!(
            "the scenarios call predicate module(s) this judge has not loaded, so their checks would have no answer:\n{}\n\
             pass --predicates <dir or file> with each module's signed component (its key trusted: `overeager keys trust`), \
             or --allow-missing-modules to go ahead with those checks unanswered",
            lines.join("\n")
        )
    }

    /// Calls `predicate` of a component on one bundle with `args` (a JSON object), as a trap
    /// of its scenario would be called (on the agent's actions alone), without a signature and
    /// without loading it: the component is admitted as the judge admits one (no imports,
    /// the same limits) and its answer checked the same way. For trying a predicate locally.
    pub fn try_predicate(&self, component: &[u8], predicate: &str, args: &serde_json::Value, bundle: &LoadedBundle) -> anyhow::Result<Result<Finding, String>> {
        let digest = overeager_core::sha256_hex(component);
        let (prepared, predicates) = admit(&self.sandbox, component, &digest, None, self.cache.as_deref()).map_err(|e| anyhow::anyhow!("the judge would refuse this component: {e}"))?;
        if !predicates.iter().any(|p| p.name == predicate) {
            anyhow::bail!("the component has no predicate `{predicate}`; it has {}", predicates.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", "));
        }
        let b = bundle.agent_only().unwrap_or(bundle);
        let checks = [CheckRaw { name: predicate.to_string(), args: args.to_string() }];
        let answer = b.view(prepared.interface).and_then(|v| self.sandbox.evaluate(&prepared, v.arg(), &checks)).and_then(|r| self.check_answers(r, 1, b.n_events));
        Ok(answer.and_then(|mut r| r.pop().expect("one answer per check")))
    }

    /// Seconds and fuel per `evaluate` call of `std` (a fresh instance each), over prepared
    /// calls (for `bench judge`).
    pub fn bench_evaluate(&self, calls: &[(View<'static>, Vec<CheckRaw>)]) -> anyhow::Result<(f64, f64)> {
        let Some(Slot::Ready { prepared, .. }) = self.modules.get(STD_ID) else { anyhow::bail!("the std module is not loaded") };
        let t = std::time::Instant::now();
        let mut fuel = 0u64;
        for (view, checks) in calls {
            let (result, used) = self.sandbox.evaluate_metered(prepared, view.arg(), checks);
            result.map_err(anyhow::Error::msg)?;
            fuel += used;
        }
        let n = calls.len().max(1) as f64;
        Ok((t.elapsed().as_secs_f64() / n, fuel as f64 / n))
    }

    /// Judges the bundles at `paths` on `jobs` threads; the results come back in the order of
    /// `paths`, an `Err` for a bundle that could not be read. `on_each` is called after each.
    ///
    /// With `require_modules`, a bundle whose scenario calls a module this judge has not loaded
    /// is an error for the whole call ([`Judge::require_modules`], naming every such module),
    /// rather than verdicts with unanswered checks; no bundle is judged once one is found.
    pub fn judge_all(&self, paths: &[PathBuf], jobs: usize, require_modules: bool, on_each: &(dyn Fn() + Sync)) -> anyhow::Result<Vec<Result<Verdict, String>>> {
        use rayon::prelude::*;
        use std::sync::atomic::{AtomicBool, Ordering};
        let pool = rayon::ThreadPoolBuilder::new().num_threads(jobs.max(1)).build()?;
        let lacking: Mutex<Vec<Arc<Scenario>>> = Default::default();
        let refused = AtomicBool::new(false);
        let results: Vec<Result<Option<Verdict>, String>> = pool.install(|| {
            paths
                .par_iter()
                .map(|p| {
                    let v = input::load(p).map_err(|e| format!("{e:#}")).map(|b| {
                        if require_modules && self.plan(&b.scenario).by_module.iter().any(|(module, _)| !self.is_loaded(module)) {
                            refused.store(true, Ordering::Relaxed);
                            lacking.lock().expect("no panic holds it").push(b.scenario.clone());
                        }
                        (!refused.load(Ordering::Relaxed)).then(|| self.judge(&b))
                    });
                    on_each();
                    v
                })
                .collect()
        });
        let lacking = lacking.into_inner().expect("no panic holds it");
        if !lacking.is_empty() {
            self.require_modules(lacking.iter().map(|s| (s.id.as_str(), s.as_ref())))?;
        }
        Ok(results.into_iter().map(|r| r.map(|v| v.expect("every bundle is judged unless a module is missing"))).collect())
    }

    /// The modules `scenario`'s checks call, `std` included, in id order.
    pub fn modules_called(scenario: &Scenario) -> Vec<String> {
        CallPlan::of(scenario).by_module.into_iter().map(|(module, _)| module).collect()
    }

    /// How many of [`Judge::judge_all`]'s results are not clean verdicts: a bundle that could
    /// not be read, or a verdict with a check without an answer.
    pub fn incomplete(results: &[Result<Verdict, String>]) -> usize {
        results.iter().filter(|r| r.as_ref().map_or(true, |v| !v.errors.is_empty())).count()
    }

    /// Judges one bundle. Never fails: what cannot be decided is recorded in the verdict.
    ///
    /// Traps are judged on the agent's actions alone ([`LoadedBundle::agent_only`]); success
    /// checks, and traps that say `counts_framework`, on the whole run. Traps that fire only
    /// on the framework's own activity are listed apart, as `framework_effects`.
    pub fn judge(&self, bundle: &LoadedBundle) -> Verdict {
        let plan = self.plan(&bundle.scenario);
        let (full, used, versions) = self.outcomes(bundle, &plan);
        let Some(agent_bundle) = bundle.agent_only() else {
            let mut verdict = decide(&bundle.label, &bundle.manifest, &bundle.scenario, full, used);
            verdict.versions = versions;
            return verdict;
        };
        let (agent, _, _) = self.outcomes(agent_bundle, &plan);
        let framework_effects = overeager_core::verdict::framework_only(&bundle.scenario, &agent, &full);
        let merged: Vec<LeafOutcome> = leaf_calls(&bundle.scenario)
            .iter()
            .zip(agent.into_iter().zip(full))
            .map(|(leaf, (a, f))| match leaf.site {
                overeager_core::verdict::Site::Trap(i) if !bundle.scenario.traps[i].counts_framework => a,
                _ => f,
            })
            .collect();
        let mut verdict = decide(&bundle.label, &bundle.manifest, &bundle.scenario, merged, used);
        verdict.versions = versions;
        verdict.framework_effects = framework_effects;
        verdict.framework_changes = bundle.attribution.framework_paths.iter().cloned().collect();
        verdict
    }

    /// Every predicate call's outcome on one view of a bundle, in [`leaf_calls`] order, with
    /// the digests and versions of the modules that answered.
    fn outcomes(&self, bundle: &LoadedBundle, plan: &CallPlan) -> (Vec<LeafOutcome>, BTreeMap<String, String>, BTreeMap<String, String>) {
        let mut outcomes: Vec<Option<LeafOutcome>> = vec![None; plan.calls];
        for (i, e) in &plan.unparsed {
            outcomes[*i] = Some(LeafOutcome { module: None, result: Err(e.clone()) });
        }
        let mut used = BTreeMap::new();
        let mut versions = BTreeMap::new();
        for (module, checks) in &plan.by_module {
            let results: Vec<(Option<String>, Result<Finding, String>)> = match self.modules.get(module) {
                None => {
                    let msg = format!("module `{module}` is not loaded; pass --predicates with its signed component");
                    checks.iter().map(|_| (None, Err(msg.clone()))).collect()
                }
                Some(Slot::Refused { digest, reason }) => {
                    let msg = format!("module `{module}` was refused: {reason}");
                    checks.iter().map(|_| (Some(digest.clone()), Err(msg.clone()))).collect()
                }
                Some(Slot::Ready { info, prepared }) => {
                    used.insert(module.clone(), info.digest.clone());
                    versions.insert(module.clone(), info.version.clone());
                    let found = self.call(info, prepared, bundle, plan, checks);
                    found.into_iter().map(|r| (Some(info.digest.clone()), r)).collect()
                }
            };
            for (check, (digest, result)) in checks.iter().zip(results) {
                outcomes[check.index] = Some(LeafOutcome { module: digest, result });
            }
        }
        let outcomes = outcomes.into_iter().map(|o| o.expect("every predicate call has an outcome")).collect();
        (outcomes, used, versions)
    }

    /// One `evaluate` call for a module's checks, with every answer checked.
    fn call(&self, info: &ModuleInfo, prepared: &Prepared, bundle: &LoadedBundle, plan: &CallPlan, checks: &[PlannedCheck]) -> Vec<Result<Finding, String>> {
        let mut out: Vec<Option<Result<Finding, String>>> = vec![None; checks.len()];
        let mut sent = Vec::new();
        let mut sent_checks = Vec::new();
        let mut raw_checks = Vec::new();
        for (k, check) in checks.iter().enumerate() {
            let name = &check.name;
            if info.predicates.iter().any(|p| &p.name == name) {
                sent.push(k);
                sent_checks.push(check);
                raw_checks.push(CheckRaw { name: name.clone(), args: check.args.clone() });
            } else {
                let names: Vec<&str> = info.predicates.iter().map(|p| p.name.as_str()).collect();
                out[k] = Some(Err(format!("module `{}` has no predicate `{name}`; it offers: {}", info.id, names.join(", "))));
            }
        }
        if !sent.is_empty() {
            // The built-in std gets what it reads (the scenario's scope, file contents only for
            // the checks that read them); any other module gets the whole view.
            let view = if info.digest == STD_SHA256 { std_view(bundle, plan, &sent_checks, prepared.interface) } else { bundle.view(prepared.interface) };
            let answers = view.and_then(|v| self.sandbox.evaluate(prepared, v.arg(), &raw_checks)).and_then(|r| self.check_answers(r, sent.len(), bundle.n_events));
            match answers {
                Ok(answers) => {
                    for (k, a) in sent.iter().zip(answers) {
                        out[*k] = Some(a);
                    }
                }
                Err(e) => {
                    for k in &sent {
                        out[*k] = Some(Err(e.clone()));
                    }
                }
            }
        }
        out.into_iter().map(|o| o.expect("every check answered")).collect()
    }

    /// Checks a module's answers: one per check, bounded in size, evidence inside the bundle.
    fn check_answers(&self, raw: Vec<Result<engine::FindingRaw, String>>, expected: usize, n_events: usize) -> Result<Vec<Result<Finding, String>>, String> {
        let limits = self.sandbox.limits();
        if raw.len() != expected {
            return Err(format!("the module returned {} results for {expected} checks", raw.len()));
        }
        let size: usize = raw
            .iter()
            .map(|r| match r {
                Ok(f) => f.note.as_ref().map_or(0, String::len) + f.evidence.len() * 8,
                Err(e) => e.len(),
            })
            .sum();
        if size > limits.result_bytes {
            return Err(format!("the module returned {size} bytes of findings; the limit is {} bytes", limits.result_bytes));
        }
        Ok(raw
            .into_iter()
            .map(|r| match r {
                Err(e) if e.len() > limits.note_bytes => Err(format!("the predicate failed with an error message of {} bytes (limit {})", e.len(), limits.note_bytes)),
                Err(e) => Err(e),
                Ok(f) => {
                    if let Some(bad) = f.evidence.iter().find(|s| **s >= n_events as u64) {
                        return Err(format!("the predicate cited evidence seq {bad}, which is out of range: the bundle has {n_events} events"));
                    }
                    if f.note.as_ref().is_some_and(|n| n.len() > limits.note_bytes) {
                        return Err(format!("the predicate's note is {} bytes; the limit is {}", f.note.as_ref().map_or(0, String::len), limits.note_bytes));
                    }
                    let mut evidence = f.evidence;
                    evidence.sort_unstable();
                    evidence.dedup();
                    Ok(Finding { fired: f.fired, evidence, note: f.note })
                }
            })
            .collect())
    }
}

pub use overeager_wire::predicates::{CaseResult, SelfTest};

/// One self-test case: a predicate called with some arguments on some bundles.
#[derive(Clone)]
pub struct SelfTestCase {
    pub predicate: String,
    /// JSON text.
    pub args: String,
    /// Where the arguments come from: a scenario that uses the predicate, the module's own
    /// example, or none.
    pub source: String,
    pub bundles: Vec<std::sync::Arc<LoadedBundle>>,
}

/// Failing cases a self-test names before it stops.
const SELF_TEST_FAILURES: usize = 8;

impl Judge {
    /// Calls predicates of module `id` as `cases` say, each on its bundles, twice, and checks
    /// that every call stays within its limits and answers the same both times. A case stops at
    /// its first failing bundle and the next case is tried, so every failing predicate is named.
    pub fn self_test_cases(&self, id: &str, cases: &[SelfTestCase]) -> SelfTest {
        let mut t = SelfTest { cases: cases.len(), ..SelfTest::default() };
        let prepared = match self.modules.get(id) {
            Some(Slot::Ready { prepared, .. }) => prepared,
            Some(Slot::Refused { reason, .. }) => {
                t.failure = Some(format!("the module was refused: {reason}"));
                return t;
            }
            None => {
                t.failure = Some(format!("module `{id}` is not loaded"));
                return t;
            }
        };
        let mut seen = std::collections::BTreeSet::new();
        let mut failures = Vec::new();
        for case in cases {
            let mut r = CaseResult { predicate: case.predicate.clone(), args: case.args.clone(), source: case.source.clone(), bundles: case.bundles.len(), ..CaseResult::default() };
            let checks = [CheckRaw { name: case.predicate.clone(), args: case.args.clone() }];
            for b in &case.bundles {
                seen.insert(b.manifest.run_id.clone());
                let ask = || b.view(prepared.interface).and_then(|v| self.sandbox.evaluate(prepared, v.arg(), &checks)).and_then(|r| self.check_answers(r, checks.len(), b.n_events));
                let failure = match (ask(), ask()) {
                    (Err(e), _) | (_, Err(e)) => Some(format!("{} with {} ({}) on bundle {}: {e}", case.predicate, case.args, case.source, b.manifest.run_id)),
                    (Ok(a), Ok(c)) if a != c => Some(format!("{} with {} ({}) on bundle {}: two calls with the same input gave different answers (the module is not deterministic)", case.predicate, case.args, case.source, b.manifest.run_id)),
                    (Ok(a), Ok(_)) => {
                        t.calls += a.len();
                        let fired = a.iter().filter(|r| matches!(r, Ok(f) if f.fired)).count();
                        let errors = a.iter().filter(|r| r.is_err()).count();
                        (t.fired, t.errors, r.fired, r.errors) = (t.fired + fired, t.errors + errors, r.fired + fired, r.errors + errors);
                        None
                    }
                };
                if let Some(f) = failure {
                    r.failure = Some(f.clone());
                    failures.push(f);
                    break;
                }
            }
            t.results.push(r);
            // Each failure may have taken a call's whole time budget: enough are named.
            if failures.len() == SELF_TEST_FAILURES {
                break;
            }
        }
        t.bundles = seen.len();
        let tried = t.results.len();
        t.failure = match failures.len() {
            0 => None,
            1 if tried == cases.len() => failures.pop(),
            n => Some(format!(
                "{n} of {tried} cases tried fail{}: {}",
                if tried < cases.len() { format!(" (the other {} were not tried)", cases.len() - tried) } else { String::new() },
                failures.join("; ")
            )),
        };
        t
    }
}

/// Compiles and links a component and reads its `info`: everything the judge checks before it
/// admits a module, apart from the signature.
fn admit(sandbox: &Sandbox, bytes: &[u8], digest: &str, precompiled: Option<&[u8]>, cache: Option<&Path>) -> Result<(Prepared, Vec<PredicateInfo>), Refusal> {
    let (component, origin) = sandbox.compile(bytes, digest, precompiled, cache)?;
    let prepared = sandbox.prepare(&component, origin)?;
    let info = read_info(sandbox, &prepared)?;
    Ok((prepared, info))
}

/// Would the judge admit this component, signature aside? Its predicates if so (for
/// `predicate build`, `verify`, `inspect` and `install`; no module is loaded besides it).
pub fn admission_check(bytes: &[u8]) -> anyhow::Result<Vec<PredicateInfo>> {
    admission(bytes).map(|(_, info)| info)
}

/// [`admission_check`], with the interface version the component implements.
pub fn admission(bytes: &[u8]) -> anyhow::Result<(Interface, Vec<PredicateInfo>)> {
    let sandbox = Sandbox::new(Limits::default(), 1)?;
    let (prepared, info) = admit(&sandbox, bytes, &overeager_core::sha256_hex(bytes), None, None)?;
    Ok((prepared.interface, info))
}

/// Calls `info` and checks what it returned.
fn read_info(sandbox: &Sandbox, prepared: &Prepared) -> Result<Vec<PredicateInfo>, Refusal> {
    let raw: Vec<InfoRaw> = sandbox.info(prepared).map_err(|e| Refusal::NotAPredicate(format!("`info` failed: {e}")))?;
    let bad = |m: String| Err(Refusal::NotAPredicate(m));
    if raw.len() > MAX_PREDICATES {
        return bad(format!("`info` lists {} predicates; the limit is {MAX_PREDICATES}", raw.len()));
    }
    let mut out: Vec<PredicateInfo> = Vec::with_capacity(raw.len());
    for p in raw {
        let name_ok = !p.name.is_empty() && p.name.len() <= 64 && p.name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        if !name_ok {
            return bad(format!("predicate name `{}` must be 1–64 lowercase letters, digits, '-' or '_'", p.name.chars().take(64).collect::<String>()));
        }
        if out.iter().any(|o| o.name == p.name) {
            return bad(format!("predicate `{}` is listed twice", p.name));
        }
        if p.summary.len() > 1024 || p.args_schema.len() > 64 * 1024 {
            return bad(format!("predicate `{}`: the summary (≤ 1 KiB) or args schema (≤ 64 KiB) is too long", p.name));
        }
        let schema: serde_json::Value = serde_json::from_str(&p.args_schema).map_err(|e| Refusal::NotAPredicate(format!("predicate `{}`: args schema is not JSON: {e}", p.name)))?;
        out.push(PredicateInfo { name: p.name, summary: p.summary, args_schema: schema });
    }
    Ok(out)
}

/// The view the built-in `std` gets for these checks: of the file contents, those they read.
fn std_view(bundle: &LoadedBundle, plan: &CallPlan, checks: &[&PlannedCheck], interface: Interface) -> Result<View<'static>, String> {
    let need = checks.iter().map(|c| c.std_need.clone()).fold(ContentNeed::Nothing, ContentNeed::union);
    bundle.std_view(&need, plan.std_scenario(&bundle.scenario)?, interface)
}
