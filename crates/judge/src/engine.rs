//! The wasmtime sandbox predicates run in: engine configuration, the limits of one call, the
//! compiled-artifact cache, and calling a module's `info` and `evaluate`.

use std::hash::Hasher;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sha2::Digest;
use wasmtime::component::{Component, ComponentExportIndex, ComponentType, InstancePre, Lift, Linker, Lower};
use wasmtime::{Engine, ResourceLimiter, Store, Trap};

/// The limits every predicate call runs under.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Fuel for one call, before the part proportional to the input.
    pub fuel_base: u64,
    /// Extra fuel per byte of bundle view, so large bundles get a proportional budget while
    /// the budget stays a function of the input alone (and so deterministic).
    pub fuel_per_byte: u64,
    /// Linear memory cap of one instance for a small input, in bytes.
    pub memory_bytes: usize,
    /// Extra linear memory per byte of bundle view: a predicate decodes the whole view, so
    /// its memory need grows with the input. Like fuel, a function of the input alone.
    pub memory_per_byte: usize,
    /// The most linear memory any one call gets, whatever its input. A bundle that needs more
    /// is judged incomplete, with this figure in the reason.
    pub memory_ceiling: usize,
    /// Wall-clock backstop of one call.
    pub wall: Duration,
    /// Largest total size of one call's results (notes, error texts, evidence).
    pub result_bytes: usize,
    /// Largest note or error text of one finding.
    pub note_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            fuel_base: 200_000_000,
            fuel_per_byte: 200,
            memory_bytes: 128 << 20,
            memory_per_byte: 12,
            memory_ceiling: 3 << 30,
            wall: Duration::from_secs(10),
            result_bytes: 1 << 20,
            note_bytes: 4096,
        }
    }
}

impl Limits {
    /// The fuel budget of a call with `input_len` bytes of input.
    pub fn fuel_for(&self, input_len: usize) -> u64 {
        self.fuel_base.saturating_add(self.fuel_per_byte.saturating_mul(input_len as u64))
    }

    /// The linear memory cap of a call with `input_len` bytes of input.
    pub fn memory_for(&self, input_len: usize) -> usize {
        self.memory_bytes.saturating_add(self.memory_per_byte.saturating_mul(input_len)).min(self.most_memory())
    }

    /// The most linear memory any call gets (never below the small-input cap).
    fn most_memory(&self) -> usize {
        self.memory_ceiling.max(self.memory_bytes)
    }
}

/// Set (to anything) to have wasmtime write a `perf` map of the modules' compiled code.
pub const PERFMAP_ENV: &str = "OVEREAGER_WASM_PERFMAP";

/// How often the epoch advances; the wall-clock limit is counted in these ticks.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The engine, its epoch ticker, and the limits calls run under.
pub struct Sandbox {
    engine: Engine,
    limits: Limits,
    ticker: Option<std::thread::JoinHandle<()>>,
    stop: Arc<AtomicBool>,
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}

/// Store data: the memory limiter, which remembers what it refused.
pub struct Ctx {
    limiter: Limiter,
}

struct Limiter {
    cap: usize,
    refused: Option<usize>,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.cap {
            self.refused = Some(desired);
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 1 << 20)
    }

    fn instances(&self) -> usize {
        64
    }

    fn tables(&self) -> usize {
        64
    }

    fn memories(&self) -> usize {
        4
    }
}

/// `predicate-info` as the module returns it.
#[derive(ComponentType, Lift, Debug, Clone)]
#[component(record)]
pub struct InfoRaw {
    pub name: String,
    pub summary: String,
    #[component(name = "args-schema")]
    pub args_schema: String,
}

/// `check` as the host passes it.
#[derive(ComponentType, Lower, Debug, Clone)]
#[component(record)]
pub struct CheckRaw {
    pub name: String,
    pub args: String,
}

/// `finding` as the module returns it.
#[derive(ComponentType, Lift, Debug, Clone)]
#[component(record)]
pub struct FindingRaw {
    pub fired: bool,
    pub evidence: Vec<u64>,
    pub note: Option<String>,
}

/// A module compiled and linked, ready for fresh instances.
pub struct Prepared {
    pre: InstancePre<Ctx>,
    info: ComponentExportIndex,
    evaluate: ComponentExportIndex,
    /// Where its compiled code came from.
    pub origin: Origin,
    /// Which version of the interface it implements.
    pub interface: Interface,
}

/// The versions of `overeager:predicate` the judge runs. They differ only in how `evaluate`
/// receives the bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interface {
    /// `overeager:predicate@0.1.0`: the bundle view as a JSON document.
    Json,
    /// `overeager:predicate@0.2.0`: the compact bundle view (`overeager_core::view::compact`).
    Compact,
}

impl Interface {
    /// Every supported version, newest first.
    pub const ALL: [Interface; 2] = [Interface::Compact, Interface::Json];

    /// The WIT package and version.
    pub fn wit(self) -> &'static str {
        match self {
            Interface::Json => "overeager:predicate@0.1.0",
            Interface::Compact => "overeager:predicate@0.2.0",
        }
    }

    /// The version of a WIT package name, if the judge supports it.
    pub fn from_wit(wit: &str) -> Option<Interface> {
        Interface::ALL.into_iter().find(|i| i.wit() == wit)
    }
}

/// A bundle as one `evaluate` call passes it, in the encoding of the module's interface.
pub enum ViewArg<'a> {
    Json(&'a str),
    Compact(&'a [u8]),
}

impl ViewArg<'_> {
    /// Its size in bytes, which the call's fuel and memory budgets grow with.
    pub fn len(&self) -> usize {
        match self {
            ViewArg::Json(s) => s.len(),
            ViewArg::Compact(b) => b.len(),
        }
    }
}

/// Where a module's compiled code came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// The artifact built into this binary (the built-in `std`).
    Embedded,
    /// The cache of compiled artifacts.
    Cache,
    /// Compiled now.
    Compiled,
}

/// Why a module cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("it is a core WebAssembly module, not a component; encode it with `overeager predicate build` (or `wasm-tools component new`)")]
    CoreModule,
    #[error("it is not a valid WebAssembly component: {0}")]
    Invalid(String),
    #[error("it imports {0}; predicates may import nothing (build for wasm32-unknown-unknown, not WASI)")]
    Imports(String),
    #[error("it does not implement overeager:predicate@0.2.0 or @0.1.0: {0}")]
    NotAPredicate(String),
}

impl Sandbox {
    /// Builds the engine. `concurrency` is how many calls may run at once (threads).
    pub fn new(limits: Limits, concurrency: usize) -> anyhow::Result<Sandbox> {
        // Slots for every call that can be in flight, plus the probes that read `info`.
        let slots = (concurrency as u32).saturating_mul(2).saturating_add(8);
        let mut cfg = super::engine_config::config(limits.most_memory(), slots);
        // For profiling the judge: `perf` names the modules' compiled functions from the map
        // file wasmtime then writes (`/tmp/perf-<pid>.map`).
        if std::env::var_os(PERFMAP_ENV).is_some() {
            cfg.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine = Engine::new(&cfg).map_err(|e| anyhow::anyhow!("configuring the predicate sandbox: {e:?}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = {
            let engine = engine.clone();
            let stop = stop.clone();
            std::thread::Builder::new().name("epoch-ticker".into()).spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                }
            })?
        };
        Ok(Sandbox { engine, limits, ticker: Some(ticker), stop })
    }

    /// The limits calls run under.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// A short hex digest of everything that makes compiled code of this engine compatible.
    pub fn compatibility(&self) -> String {
        struct ShaHasher(sha2::Sha256);
        impl Hasher for ShaHasher {
            fn finish(&self) -> u64 {
                0
            }
            fn write(&mut self, bytes: &[u8]) {
                self.0.update(bytes);
            }
        }
        let mut h = ShaHasher(sha2::Sha256::new());
        std::hash::Hash::hash(&self.engine.precompile_compatibility_hash(), &mut h);
        hex::encode(&h.0.finalize()[..12])
    }

    /// Compiles a component, or loads it from `precompiled` (an artifact built into this
    /// binary for exactly these bytes) or from the cache of compiled artifacts. An artifact
    /// that does not fit this engine, or a cache entry that was changed, is not used: the
    /// component is compiled again (and the cache entry rewritten).
    pub fn compile(&self, bytes: &[u8], digest: &str, precompiled: Option<&[u8]>, cache: Option<&Path>) -> Result<(Component, Origin), Refusal> {
        if bytes.len() >= 8 && &bytes[..4] == b"\0asm" && bytes[4..8] == [1, 0, 0, 0] {
            return Err(Refusal::CoreModule);
        }
        if let Some(artifact) = precompiled {
            // SAFETY: the artifact was produced by `Engine::precompile_component` in this
            // binary's build, from the component the caller passes with it; wasmtime checks
            // that it was compiled with settings compatible with this engine and this CPU.
            if let Ok(c) = unsafe { Component::deserialize(&self.engine, artifact) } {
                return Ok((c, Origin::Embedded));
            }
        }
        let cached = cache.map(|dir| dir.join(self.compatibility()).join(format!("{digest}.cwasm")));
        if let Some(path) = &cached
            && cache_file_is_ours(path)
            && let Some(artifact) = read_cache_file(path, digest)
        {
            // SAFETY: the entry was written by `Component::serialize` of an engine with the
            // same compatibility hash, into a directory only this user can write (checked
            // above), for this component digest, and is unchanged since (its seal checked);
            // wasmtime checks the header and the engine's settings again.
            if let Ok(c) = unsafe { Component::deserialize(&self.engine, &artifact) } {
                return Ok((c, Origin::Cache));
            }
        }
        let component = Component::new(&self.engine, bytes).map_err(|e| Refusal::Invalid(format!("{e:#}")))?;
        if let Some(path) = &cached
            && let Ok(serialized) = component.serialize()
        {
            let _ = write_cache_file(path, digest, &serialized);
        }
        Ok((component, Origin::Compiled))
    }

    /// Checks that a component imports nothing and exports `info` and `evaluate`, and links it.
    pub fn prepare(&self, component: &Component, origin: Origin) -> Result<Prepared, Refusal> {
        let ty = component.component_type();
        let imports: Vec<String> = ty.imports(&self.engine).map(|(name, _)| format!("`{name}`")).collect();
        if !imports.is_empty() {
            return Err(Refusal::Imports(imports.join(", ")));
        }
        let export = |name: &str| component.get_export_index(None, name).ok_or_else(|| Refusal::NotAPredicate(format!("it exports no `{name}` function")));
        let info = export("info")?;
        let evaluate = export("evaluate")?;
        let interface = interface_of(&self.engine, component)?;
        let linker: Linker<Ctx> = Linker::new(&self.engine);
        let pre = linker.instantiate_pre(component).map_err(|e| Refusal::NotAPredicate(format!("{e:#}")))?;
        Ok(Prepared { pre, info, evaluate, origin, interface })
    }

    fn store(&self, fuel: u64, memory: usize) -> Store<Ctx> {
        let mut store = Store::new(&self.engine, Ctx { limiter: Limiter { cap: memory, refused: None } });
        store.limiter(|c| &mut c.limiter);
        store.set_fuel(fuel).expect("fuel is enabled");
        store.epoch_deadline_trap();
        store.set_epoch_deadline((self.limits.wall.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64);
        store
    }

    /// Calls `info` in a fresh instance.
    pub fn info(&self, p: &Prepared) -> Result<Vec<InfoRaw>, String> {
        let fuel = self.limits.fuel_base;
        let memory = self.limits.memory_bytes;
        let mut store = self.store(fuel, memory);
        let result = (|| {
            let instance = p.pre.instantiate(&mut store)?;
            let f = instance.get_typed_func::<(), (Vec<InfoRaw>,)>(&mut store, &p.info)?;
            Ok::<_, wasmtime::Error>(f.call(&mut store, ())?.0)
        })();
        result.map_err(|e| explain(e, &store, fuel, memory, &self.limits))
    }

    /// Calls `evaluate` in a fresh instance. An error fails every check of the call. The view
    /// must be in the encoding of the module's interface.
    pub fn evaluate(&self, p: &Prepared, view: ViewArg<'_>, checks: &[CheckRaw]) -> Result<Vec<Result<FindingRaw, String>>, String> {
        self.evaluate_metered(p, view, checks).0
    }

    /// [`Sandbox::evaluate`], and the fuel the call used: the deterministic measure of the
    /// work done inside the module (one unit per WebAssembly instruction, about).
    pub fn evaluate_metered(&self, p: &Prepared, view: ViewArg<'_>, checks: &[CheckRaw]) -> (Result<Vec<Result<FindingRaw, String>>, String>, u64) {
        let fuel = self.limits.fuel_for(view.len());
        let memory = self.limits.memory_for(view.len());
        let mut store = self.store(fuel, memory);
        type Answers = (Vec<Result<FindingRaw, String>>,);
        let result = (|| {
            let instance = p.pre.instantiate(&mut store)?;
            let answers = match view {
                ViewArg::Json(json) => {
                    let f = instance.get_typed_func::<(&str, &[CheckRaw]), Answers>(&mut store, &p.evaluate)?;
                    f.call(&mut store, (json, checks))?
                }
                ViewArg::Compact(bytes) => {
                    let f = instance.get_typed_func::<(&[u8], &[CheckRaw]), Answers>(&mut store, &p.evaluate)?;
                    f.call(&mut store, (bytes, checks))?
                }
            };
            Ok::<_, wasmtime::Error>(answers.0)
        })();
        let used = fuel.saturating_sub(store.get_fuel().unwrap_or(0));
        (result.map_err(|e| explain(e, &store, fuel, memory, &self.limits)), used)
    }
}

/// Which interface version a component implements, told by the type of its `evaluate`'s
/// first parameter (the package name is not part of a component's exports).
fn interface_of(engine: &Engine, component: &Component) -> Result<Interface, Refusal> {
    use wasmtime::component::types::{ComponentItem, Type};
    let ty = component.component_type();
    let Some(ComponentItem::ComponentFunc(f)) = ty.get_export(engine, "evaluate").map(|e| e.ty) else {
        return Err(Refusal::NotAPredicate("its `evaluate` export is not a function".into()));
    };
    match f.params().next().map(|(_, ty)| ty) {
        Some(Type::String) => Ok(Interface::Json),
        Some(Type::List(l)) if l.ty() == Type::U8 => Ok(Interface::Compact),
        _ => Err(Refusal::NotAPredicate("`evaluate` takes neither a JSON string (0.1.0) nor a list<u8> (0.2.0) first".into())),
    }
}

impl Sandbox {
    /// Seconds per fresh instantiation (store, limits, instance), averaged over `n`.
    pub fn time_instantiation(&self, p: &Prepared, n: usize) -> anyhow::Result<f64> {
        let t = std::time::Instant::now();
        for _ in 0..n {
            let mut store = self.store(self.limits.fuel_base, self.limits.memory_bytes);
            p.pre.instantiate(&mut store).map_err(|e| anyhow::anyhow!("instantiating: {e:?}"))?;
        }
        Ok(t.elapsed().as_secs_f64() / n as f64)
    }
}

/// A message for a failed call that says which limit was hit, without timings or addresses,
/// so that the same failure reads the same every time.
fn explain(e: wasmtime::Error, store: &Store<Ctx>, fuel: u64, memory: usize, limits: &Limits) -> String {
    if let Some(wanted) = store.data().limiter.refused {
        let why = if memory >= limits.memory_ceiling {
            format!("the ceiling for any bundle is {} MiB; the bundle is too large to judge completely", limits.memory_ceiling >> 20)
        } else {
            format!("the cap for this bundle is {} MiB", memory >> 20)
        };
        return format!("memory limit: the predicate asked for {} MiB of linear memory; {why}", wanted.div_ceil(1 << 20));
    }
    match e.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => format!("fuel exhausted: the predicate used its whole budget of {fuel} units (an endless loop, or far too much work)"),
        Some(Trap::Interrupt) => format!("wall-clock limit: the predicate ran longer than {} s", limits.wall.as_secs_f64()),
        Some(Trap::StackOverflow) => "stack overflow: the predicate recursed too deeply".to_string(),
        Some(Trap::UnreachableCodeReached) => "the predicate trapped: it panicked or aborted (wasm `unreachable`)".to_string(),
        Some(Trap::MemoryOutOfBounds) => "the predicate trapped: out-of-bounds memory access (its stack may have overflowed)".to_string(),
        Some(t) => format!("the predicate trapped: {t}"),
        None => {
            // Lifting errors (bad UTF-8, out-of-bounds lists) and instantiation errors.
            let text = format!("{e:#}");
            let first = text.lines().next().unwrap_or("unknown error").to_string();
            format!("the predicate's call failed: {first}")
        }
    }
}

/// The default cache directory of compiled predicates.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("OVEREAGER_CACHE_DIR") {
        return Some(PathBuf::from(p).join("wasm"));
    }
    Some(overeager_bundle::files::user_dir("XDG_CACHE_HOME", ".cache")?.join("wasm"))
}

/// Compiled code is native code: only load it from a directory and file this user owns and
/// nobody else can write.
fn cache_file_is_ours(path: &Path) -> bool {
    let uid = unsafe { libc::geteuid() };
    let private = |p: &Path| p.symlink_metadata().is_ok_and(|m| m.uid() == uid && m.mode() & 0o022 == 0 && !m.file_type().is_symlink());
    private(path) && path.parent().is_some_and(private)
}

/// The seal of a cache entry: sha256 over the component digest and the artifact, so an entry
/// that was changed, truncated, or copied from another component's is recognised.
fn cache_seal(digest: &str, artifact: &[u8]) -> [u8; 32] {
    let mut h = sha2::Sha256::new();
    h.update(digest.as_bytes());
    h.update([0]);
    h.update(artifact);
    h.finalize().into()
}

/// The artifact of a cache entry (the artifact followed by its seal), if the seal holds.
fn read_cache_file(path: &Path, digest: &str) -> Option<Vec<u8>> {
    let mut bytes = std::fs::read(path).ok()?;
    let split = bytes.len().checked_sub(32)?;
    let seal = bytes.split_off(split);
    (seal == cache_seal(digest, &bytes)).then_some(bytes)
}

fn write_cache_file(path: &Path, digest: &str, artifact: &[u8]) -> anyhow::Result<()> {
    let dir = path.parent().expect("cache files live in a directory");
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    let mut sealed = Vec::with_capacity(artifact.len() + 32);
    sealed.extend_from_slice(artifact);
    sealed.extend_from_slice(&cache_seal(digest, artifact));
    overeager_bundle::files::write_atomic(path, &sealed)
}
