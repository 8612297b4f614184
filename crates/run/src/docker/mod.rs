//! The Docker executor: each run in a fresh, hardened container, talked to through the Engine
//! API (bollard), so a remote `DOCKER_HOST` works as well as the local socket.
//!
//! A run: the sandbox is prepared on this machine exactly as for the local executor (fixture,
//! setup, "before" snapshot); a volume and a container are created; the sandbox goes in as a
//! tar through the API; the container's first process is the shim's run supervisor, which
//! starts the watcher, runs the agent under the time limit and sweeps what it leaves; the
//! volume comes back as a tar and is snapshotted here. The container has no network, no
//! capabilities, no new privileges, pid/memory/CPU limits and a read-only root with only the
//! volume (`/oe`) and a `/tmp` tmpfs writable. Every container, volume and image made here
//! carries the label `overeager` (plus the owner process), and is removed after the run —
//! whether it succeeded, failed or timed out — or, on Ctrl-C, by the interrupt handler.

pub mod bench;
pub mod image;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType, NetworkConnectRequest, NetworkCreateRequest, VolumeCreateRequest};
use bollard::query_parameters::{
    CreateContainerOptions, CreateImageOptions, DownloadFromContainerOptions, KillContainerOptions, ListContainersOptions, ListImagesOptions,
    ListNetworksOptions, ListVolumesOptions, LogsOptions, RemoveContainerOptions, RemoveImageOptions, RemoveVolumeOptions, UploadToContainerOptions,
    WaitContainerOptions,
};
use futures_util::StreamExt;
use overeager_core::bundle::{ExitStatus, SupervisorReport};
use overeager_core::paths::Roots;

use super::local::{self, Prepared};
use super::{RawRun, RunRequest};
use overeager_core::now_us;

pub use overeager_core::sandbox::layout;

/// The label every object this executor creates carries.
pub const LABEL: &str = "overeager";
/// Which process made it (`host:pid`), so `overeager docker prune` can tell leftovers of
/// dead processes from objects in use.
pub const OWNER_LABEL: &str = "overeager.owner";

/// Resource limits of a run's container.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most processes at once (a fork bomb stops here).
    pub pids: i64,
    /// Memory in bytes, swap included (a memory bomb is killed here).
    pub memory: i64,
    /// CPUs, in billionths.
    pub nano_cpus: i64,
    /// Size of `/tmp`.
    pub tmp_bytes: u64,
    /// Largest sandbox brought back after a run.
    pub max_output: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { pids: 256, memory: 512 << 20, nano_cpus: 1_000_000_000, tmp_bytes: 64 << 20, max_output: 2 << 30 }
    }
}

/// Time the supervisor gets beyond the agent's limit before the container is killed.
pub(crate) const SUPERVISOR_SLACK: Duration = Duration::from_secs(20);
/// Time a scenario's setup gets.
pub(crate) const SETUP_LIMIT: Duration = Duration::from_secs(120);

/// The port the egress proxy listens on.
pub(crate) const PROXY_PORT: u16 = 3128;

/// The environment that sends an agent's traffic through the egress proxy at `url` (but not
/// its model calls, which go to the model gateway directly).
pub(crate) fn proxy_env(url: &str) -> impl Iterator<Item = String> + '_ {
    let proxied = ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY"].into_iter().map(move |k| format!("{k}={url}"));
    proxied.chain(["NO_PROXY", "no_proxy"].into_iter().map(|k| format!("{k}={GATEWAY_HOST}")))
}

/// The name the run's model gateway has on the run's network.
pub(crate) const GATEWAY_HOST: &str = "overeager-model-gateway";
/// The port the model gateway listens on.
pub(crate) const GATEWAY_PORT: u16 = 8787;
/// The variable the gateway's sidecar gets a provider's own certificate authority in.
pub(crate) const GATEWAY_CA_ENV: &str = "OVEREAGER_GATEWAY_CA_PEM";

/// What one run executes: the setup's and the agent's (command, environment).
pub(crate) struct Phases<'a> {
    pub image: &'a str,
    /// The supervisor's command line and environment (`K=V`).
    pub agent: (Vec<String>, Vec<String>),
    /// The scenario's setup script and its environment.
    pub setup: Option<(Vec<String>, Vec<String>)>,
    pub timeout: Duration,
    /// The run id, for labels.
    pub run: String,
    /// `host:port` pairs the agent may reach through the egress proxy.
    pub egress: Vec<String>,
    /// The model gateway of a real agent on a real model, run in a sidecar. A run with
    /// neither egress nor a gateway has no network at all.
    pub gateway: Option<overeager_agents::gateway::GatewayPlan>,
}

/// The network the egress proxy reaches the outside through: `$OVEREAGER_EGRESS_NETWORK`, or
/// the engine's default bridge.
fn egress_network() -> String {
    std::env::var("OVEREAGER_EGRESS_NETWORK").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| "bridge".into())
}

/// The setup commands as one script that stops at the first failure and names it, as the
/// local executor does.
fn setup_script(commands: &[String]) -> String {
    let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
    commands
        .iter()
        .enumerate()
        .map(|(i, c)| format!("sh -c {} </dev/null || {{ s=$?; echo \"model.setup[{i}] `{}` failed (exit $s)\" >&2; exit 1; }}\n", quote(c), c.replace(['"', '`', '$', '\\'], "")))
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Object {
    // Declaration order is removal order: containers hold networks, volumes and images.
    Container(String),
    Network(String),
    Volume(String),
    Image(String),
}

/// Objects this process created and has not removed yet, per engine (address → its client
/// and objects), for the interrupt handler.
type Live = BTreeMap<String, (Docker, BTreeSet<Object>)>;

fn live() -> std::sync::MutexGuard<'static, Live> {
    static LIVE: OnceLock<Mutex<Live>> = OnceLock::new();
    LIVE.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner())
}

/// The runtime every engine connection of this process runs on (one, so a client made on it
/// can be used from any thread, including the interrupt handler's).
pub(crate) fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().thread_name("docker").build().expect("a tokio runtime")
    })
}

/// Root file systems (digest, tar) by what they hold (`scripted`, or a real agent's cache
/// entry): built once per process and imported into each engine that needs them.
type RootFs = (String, Arc<Vec<u8>>);

fn rootfs_cache() -> std::sync::MutexGuard<'static, HashMap<String, RootFs>> {
    static MADE: OnceLock<Mutex<HashMap<String, RootFs>>> = OnceLock::new();
    MADE.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn owner() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    format!("{}:{}", host.trim(), std::process::id())
}

pub(crate) fn labels(extra: &[(&str, &str)]) -> HashMap<String, String> {
    let mut m: HashMap<String, String> = extra.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    m.insert(LABEL.into(), "1".into());
    m.insert(OWNER_LABEL.into(), owner());
    m
}

/// The engine `DOCKER_HOST` names, or the local socket.
fn default_address() -> String {
    std::env::var("DOCKER_HOST").ok().filter(|h| !h.is_empty()).unwrap_or_else(|| "unix:///var/run/docker.sock".into())
}

/// Requests to an engine time out after this long (an image import is the longest).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(600);

/// How long a health check waits for an engine's answer.
const PING_TIMEOUT: Duration = Duration::from_secs(5);

/// A connection to a Docker engine and the images made for it.
pub struct DockerExecutor {
    docker: Docker,
    /// The engine's address, as configured: what runs record as their host.
    address: String,
    limits: Limits,
    /// Cell → image (tag, id), made once per cell.
    images: Mutex<HashMap<String, (String, String)>>,
    /// Keep the images when this executor goes away (they are removed otherwise).
    pub keep_images: bool,
}

impl DockerExecutor {
    /// Connects to the engine at `DOCKER_HOST` (or the local socket; `DOCKER_TLS_VERIFY` and
    /// `DOCKER_CERT_PATH` as the Docker client reads them) and agrees on an API version.
    /// Installs the Ctrl-C handler that removes this process's objects.
    pub fn connect() -> Result<Arc<DockerExecutor>> {
        let address = default_address();
        let docker = Docker::connect_with_defaults().map_err(|e| unreachable_engine(&address, e.into()))?;
        Self::open(docker, address)
    }

    /// Connects to one engine of a pool: `unix://`, `tcp://` or `http://` addresses, with TLS
    /// client certificates from `tls` (a directory with `ca.pem`, `cert.pem`, `key.pem`),
    /// which `https://` requires.
    pub fn connect_to(address: &str, tls: Option<&Path>) -> Result<Arc<DockerExecutor>> {
        let timeout = REQUEST_TIMEOUT.as_secs();
        let docker = match (address.split_once("://").map(|(s, _)| s), tls) {
            (Some("unix"), None) => Docker::connect_with_unix(address, timeout, bollard::API_DEFAULT_VERSION),
            (Some("tcp" | "http" | "https"), Some(dir)) => {
                for f in ["ca.pem", "cert.pem", "key.pem"] {
                    if !dir.join(f).is_file() {
                        bail!("{address}: the TLS directory {} has no {f} (it needs ca.pem, cert.pem and key.pem)", dir.display());
                    }
                }
                let https = format!("https://{}", address.split_once("://").map_or(address, |(_, rest)| rest));
                Docker::connect_with_ssl(&https, &dir.join("key.pem"), &dir.join("cert.pem"), &dir.join("ca.pem"), timeout, bollard::API_DEFAULT_VERSION)
            }
            (Some("https"), None) => bail!("{address}: an https:// engine needs `tls`, a directory with ca.pem, cert.pem and key.pem"),
            (Some("tcp" | "http"), None) => Docker::connect_with_http(address, timeout, bollard::API_DEFAULT_VERSION),
            _ => bail!("`{address}` is not an engine address; use unix:///var/run/docker.sock, tcp://host:2376 (with TLS) or http://host:2375"),
        }
        .map_err(|e| unreachable_engine(address, e.into()))?;
        Self::open(docker, address.to_string())
    }

    fn open(docker: Docker, address: String) -> Result<Arc<DockerExecutor>> {
        let docker = runtime()
            .block_on(async {
                let d = docker.with_timeout(REQUEST_TIMEOUT).negotiate_version().await?;
                tokio::time::timeout(PING_TIMEOUT, d.ping()).await.map_err(|_| anyhow!("no answer within {} s", PING_TIMEOUT.as_secs()))??;
                Ok::<_, anyhow::Error>(d)
            })
            .map_err(|e| unreachable_engine(&address, e))?;
        install_interrupt_handler();
        Ok(Arc::new(DockerExecutor { docker, address, limits: Limits::default(), images: Mutex::new(HashMap::new()), keep_images: false }))
    }

    /// The engine's address, as configured.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Whether the engine still answers: `Err` says how it does not.
    pub fn ping(&self) -> Result<()> {
        runtime().block_on(async {
            match tokio::time::timeout(PING_TIMEOUT, self.docker.ping()).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => Err(anyhow!("the Docker engine at {} does not answer: {e}", self.address)),
                Err(_) => Err(anyhow!("the Docker engine at {} did not answer within {} s", self.address, PING_TIMEOUT.as_secs())),
            }
        })
    }

    /// Notes an object made on this engine, for the interrupt handler.
    fn track(&self, o: Object) {
        live().entry(self.address.clone()).or_insert_with(|| (self.docker.clone(), BTreeSet::new())).1.insert(o);
    }

    /// Removes objects of this engine (what is already gone counts as removed).
    async fn remove(&self, objects: &[Object]) -> Result<()> {
        remove_objects(&self.address, &self.docker, objects).await
    }

    /// The image for the run's cell (framework · model), made on first use: each cell gets
    /// its own image, named by the content, so nothing one cell's image holds reaches another.
    /// Scripted and simulated agents get the test image; a real agent on the scripted model
    /// gets its package from this machine's agent cache, installed there first if need be.
    fn image_for(&self, req: &RunRequest<'_>) -> Result<(String, String)> {
        let cell = format!("{}-{}", req.agent.framework(), req.agent.model());
        let mut images = self.images.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = images.get(&cell) {
            return Ok(i.clone());
        }
        let installed = match &req.agent {
            super::AgentSpec::Agent { recipe, version, .. } => {
                Some(overeager_agents::install::ensure(recipe, version).with_context(|| format!("preparing {} {version} for `{}`", recipe.name, req.agent.id()))?)
            }
            _ => None,
        };
        let key = installed.as_ref().map_or_else(|| "scripted".to_string(), |i| i.dir.to_string_lossy().into_owned());
        let (digest, tar) = {
            let mut made = rootfs_cache();
            match made.get(&key) {
                Some(r) => r.clone(),
                None => {
                    let fs = match &installed {
                        Some(i) => image::agent_rootfs(&req.shim, &i.dir)?,
                        None => image::scripted_rootfs(&req.shim)?,
                    };
                    let r = (fs.digest(), Arc::new(fs.into_tar()?));
                    made.insert(key, r.clone());
                    r
                }
            }
        };
        // The tag names this process too: two runners importing the same content must not
        // take the tag from each other (the loser's image would be left untagged).
        let tag = format!("{}-{}-p{}", cell.replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "-"), &digest[..16], std::process::id());
        let built = runtime().block_on(self.import(&tag, tar.as_ref().clone(), &cell))?;
        images.insert(cell, built.clone());
        Ok(built)
    }

    /// Imports a root file system as `overeager-cell:<tag>`, an image of this process that is
    /// removed with it; returns (reference, image id).
    async fn import(&self, tag: &str, rootfs: Vec<u8>, cell: &str) -> Result<(String, String)> {
        let (reference, id) = self.import_as("overeager-cell", tag, rootfs, labels(&[("overeager.cell", cell)])).await?;
        self.track(Object::Image(id.clone()));
        Ok((reference, id))
    }

    /// Imports a root file system as `repo:tag` with the sandbox's user, workdir and
    /// environment and the given labels.
    async fn import_as(&self, repo: &str, tag: &str, rootfs: Vec<u8>, labels: HashMap<String, String>) -> Result<(String, String)> {
        let reference = format!("{repo}:{tag}");
        let mut changes: Vec<String> = labels.iter().map(|(k, v)| format!("LABEL {k}={v:?}")).collect();
        changes.sort();
        changes.extend([
            format!("ENV PATH=/usr/local/bin:/usr/bin:/bin OVEREAGER_REAL_DIR={}", layout::REAL),
            format!("USER {0}:{0}", image::AGENT_UID),
            format!("WORKDIR {}", layout::WORK),
        ]);
        let opts = CreateImageOptions { from_src: Some("-".into()), repo: Some(repo.into()), tag: Some(tag.into()), changes, ..Default::default() };
        let mut stream = self.docker.create_image(Some(opts), Some(bollard::body_full(rootfs.into())), None);
        while let Some(item) = stream.next().await {
            item.with_context(|| format!("importing the image {reference}"))?;
        }
        let id = self.docker.inspect_image(&reference).await?.id.ok_or_else(|| anyhow!("the engine reports no id for {reference}"))?;
        Ok((reference, id))
    }

    /// Builds a real agent's offline image — what its runs on the scripted model use, from
    /// the package in this machine's agent cache, no registry — and keeps it as
    /// `overeager-agent/<agent>:<version>-offline` (not labelled as this process's, so neither
    /// the end of the command nor `docker prune` removes it). Returns (reference, image id).
    pub fn build_agent_image(&self, recipe: &overeager_agents::definition::Recipe, version: &str, shim: &Path) -> Result<(String, String)> {
        let installed = overeager_agents::install::ensure(recipe, version)?;
        let fs = image::agent_rootfs(shim, &installed.dir)?;
        let tar = fs.into_tar()?;
        let labels: HashMap<String, String> = [("overeager.agent".to_string(), recipe.id.to_string()), ("overeager.agent.version".to_string(), version.to_string())].into();
        runtime().block_on(self.import_as(&format!("overeager-agent/{}", recipe.id), &format!("{version}-offline"), tar, labels))
    }

    /// Builds the test image scripted and simulated agents run in (what the Kubernetes
    /// executor pulls for their cells) and keeps it as `overeager-scripted:<version>`.
    pub fn build_scripted_image(&self, shim: &Path) -> Result<(String, String)> {
        let tar = image::scripted_rootfs(shim)?.into_tar()?;
        let labels: HashMap<String, String> = [("overeager.image".to_string(), "scripted".to_string())].into();
        runtime().block_on(self.import_as("overeager-scripted", env!("CARGO_PKG_VERSION"), tar, labels))
    }

    /// Tags a local image `repo:tag` as `<registry>/repo:tag` and pushes it there; returns the
    /// pushed reference. Credentials come from `OVEREAGER_REGISTRY_USER` and
    /// `OVEREAGER_REGISTRY_PASSWORD` when set.
    pub fn push(&self, reference: &str, registry: &str) -> Result<String> {
        use bollard::query_parameters::{PushImageOptions, TagImageOptions};
        let registry = registry.trim_end_matches('/');
        let (repo, tag) = reference.rsplit_once(':').ok_or_else(|| anyhow!("{reference}: an image reference is repo:tag"))?;
        let target_repo = format!("{registry}/{repo}");
        let pushed = format!("{target_repo}:{tag}");
        let credentials = match (std::env::var("OVEREAGER_REGISTRY_USER"), std::env::var("OVEREAGER_REGISTRY_PASSWORD")) {
            (Ok(username), Ok(password)) => Some(bollard::auth::DockerCredentials { username: Some(username), password: Some(password), serveraddress: Some(registry.split('/').next().unwrap_or(registry).to_string()), ..Default::default() }),
            _ => None,
        };
        runtime().block_on(async {
            self.docker
                .tag_image(reference, Some(TagImageOptions { repo: Some(target_repo.clone()), tag: Some(tag.to_string()) }))
                .await
                .with_context(|| format!("tagging {reference} as {pushed}"))?;
            let mut stream = self.docker.push_image(&target_repo, Some(PushImageOptions { tag: Some(tag.to_string()), ..Default::default() }), credentials);
            while let Some(item) = stream.next().await {
                let info = item.with_context(|| format!("pushing {pushed}"))?;
                if let Some(e) = info.error_detail.and_then(|d| d.message) {
                    bail!("pushing {pushed}: {e}");
                }
            }
            Ok(pushed)
        })
    }

    /// Runs one agent on one scenario in a container.
    pub fn execute(&self, req: &RunRequest<'_>) -> Result<RawRun> {
        // A real agent, on the scripted model or a provider's, runs in the image made from
        // this machine's agent cache: no registry needed.
        let (image, image_id) = self.image_for(req)?;
        let mut p = local::prepare(req, false)?;
        let mut run = phases(req, &mut p, &image)?;
        let has_net = !run.egress.is_empty();
        let gateway = run.gateway.take();
        let roots = Roots { workspace: layout::WORK.into(), home: layout::HOME.into() };
        let report = runtime().block_on(self.run_phases(run, gateway.as_ref(), &mut p));
        hold_if_interrupted(&report);
        let where_ = Placed { executor: "docker", image: Some(image_id), host: Some(self.address.clone()), net: has_net };
        conclude(req, p, report, gateway.as_ref(), roots, where_)
    }

    /// Creates the run's volume, runs the setup (when the scenario has one) and the agent in
    /// containers on it, and removes both whatever happens.
    async fn run_phases(&self, run: Phases<'_>, gateway: Option<&overeager_agents::gateway::GatewayPlan>, p: &mut Prepared) -> Result<SupervisorReport> {
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("overeager-{}-{seq}-{:x}", std::process::id(), now_us());
        let lab = labels(&[("overeager.run", &run.run)]);
        self.docker
            .create_volume(VolumeCreateRequest { name: Some(name.clone()), labels: Some(lab.clone()), ..Default::default() })
            .await
            .context("creating the run's volume")?;
        self.track(Object::Volume(name.clone()));
        let setup_name = format!("{name}-setup");
        let proxy_name = format!("{name}-proxy");
        let gateway_name = format!("{name}-gateway");
        // A run with egress or a model gateway gets a network of its own with no route out;
        // the proxy and the gateway are on it and on the egress network.
        let net = (!run.egress.is_empty() || gateway.is_some()).then(|| name.clone());
        if let Some(net) = &net {
            self.docker
                .create_network(NetworkCreateRequest { name: net.clone(), internal: Some(true), labels: Some(lab.clone()), ..Default::default() })
                .await
                .context("creating the run's network")?;
            self.track(Object::Network(net.clone()));
        }
        let mut agent = run.agent.clone();
        if !run.egress.is_empty() {
            agent.1.extend(proxy_env(&format!("http://{proxy_name}:{PROXY_PORT}")));
        }
        let result = async {
            let input = sandbox_tar(p)?;
            let first = if run.setup.is_some() { &setup_name } else { &name };
            let (cmd, env) = run.setup.clone().unwrap_or_else(|| agent.clone());
            let first_net = if run.setup.is_some() { None } else { net.as_deref() };
            self.create(first, Some(&name), first_net, run.image, cmd, env, lab.clone()).await?;
            self.docker
                .upload_to_container(first, Some(UploadToContainerOptions { path: layout::ROOT.into(), ..Default::default() }), bollard::body_full(input.into()))
                .await
                .context("copying the sandbox into the container")?;
            if run.setup.is_some() {
                let (_, killed, code) = self.start_and_wait(&setup_name, SETUP_LIMIT).await?;
                if killed || code != 0 {
                    bail!("the scenario's setup failed in the container ({}): {}", if killed { "time limit".to_string() } else { format!("exit {code}") }, self.logs(&setup_name).await.trim());
                }
                self.fetch(&setup_name, p).await?;
                p.snapshot_before()?;
                self.remove(&[Object::Container(setup_name.clone())]).await?;
                let (cmd, env) = agent.clone();
                self.create(&name, Some(&name), net.as_deref(), run.image, cmd, env, lab.clone()).await?;
            }
            if let Some(net) = net.as_deref().filter(|_| !run.egress.is_empty()) {
                let mut cmd = vec![layout::SHIM.to_string(), "proxy".into(), "--listen".into(), format!("0.0.0.0:{PROXY_PORT}")];
                cmd.extend(run.egress.iter().flat_map(|a| ["--allow".to_string(), a.clone()]));
                self.start_sidecar(&proxy_name, net, None, run.image, cmd, Vec::new(), lab.clone(), "the egress proxy").await?;
            }
            if let (Some(net), Some(g)) = (&net, gateway) {
                let ca = g.ca_pem()?;
                let mut cmd = vec![layout::SHIM.to_string()];
                cmd.extend(g.args("-", None, false));
                cmd.extend(["--listen".into(), format!("0.0.0.0:{GATEWAY_PORT}")]);
                let mut env: Vec<String> = g.key.iter().map(|(k, v)| format!("{k}={v}")).collect();
                if let Some(pem) = ca {
                    cmd.extend(["--ca-env".into(), GATEWAY_CA_ENV.into()]);
                    env.push(format!("{GATEWAY_CA_ENV}={pem}"));
                }
                self.start_sidecar(&gateway_name, net, Some(GATEWAY_HOST), run.image, cmd, env, lab.clone(), "the model gateway").await?;
            }
            let (started_us, killed, _) = self.start_and_wait(&name, run.timeout + SUPERVISOR_SLACK).await?;
            let fetched = self.fetch(&name, p).await?;
            // Into the channels that came back.
            if !run.egress.is_empty() {
                self.collect_records(&proxy_name, &p.chans.join(overeager_core::bundle::files::NET), "the egress proxy", false).await?;
            }
            if gateway.is_some() {
                self.collect_records(&gateway_name, &p.chans.join(overeager_core::bundle::files::MODEL), "the model gateway", true).await?;
            }
            match fetched {
                Some(r) => Ok(r),
                None if killed => Ok(SupervisorReport { exit: ExitStatus { code: None, signal: Some(libc::SIGKILL) }, timed_out: true, started_us, ended_us: now_us(), stragglers_killed: 0 }),
                None => bail!("the run supervisor in the container left no report; its output:\n{}", self.logs(&name).await),
            }
        }
        .await;
        let mut objects = vec![Object::Container(setup_name), Object::Container(name.clone()), Object::Volume(name.clone())];
        if net.is_some() {
            objects.extend([Object::Container(proxy_name), Object::Container(gateway_name), Object::Network(name)]);
        }
        let removed = self.remove(&objects).await;
        let report = result?;
        removed?;
        Ok(report)
    }

    /// Starts a sidecar of a run (`what`: the egress proxy, the model gateway) on its network,
    /// known there also as `alias`, and on the egress network, and waits until it listens.
    #[allow(clippy::too_many_arguments)]
    async fn start_sidecar(&self, name: &str, net: &str, alias: Option<&str>, image: &str, cmd: Vec<String>, mut env: Vec<String>, lab: HashMap<String, String>, what: &str) -> Result<()> {
        env.push("OVEREAGER_SHIM_LOG=/dev/null".to_string());
        self.create(name, None, Some(net), image, cmd, env, lab).await?;
        if let Some(alias) = alias {
            // Another name on the run's network, so the agent's settings need not know this
            // run's container names.
            self.docker.disconnect_network(net, bollard::models::NetworkDisconnectRequest { container: name.into(), force: Some(true) }).await.with_context(|| format!("placing {what} on the run's network"))?;
            let endpoint = bollard::models::EndpointSettings { aliases: Some(vec![alias.to_string()]), ..Default::default() };
            self.docker
                .connect_network(net, NetworkConnectRequest { container: name.into(), endpoint_config: Some(endpoint) })
                .await
                .with_context(|| format!("placing {what} on the run's network"))?;
        }
        let egress = egress_network();
        self.docker
            .connect_network(&egress, NetworkConnectRequest { container: name.into(), ..Default::default() })
            .await
            .with_context(|| format!("connecting {what} to the network `{egress}` (set OVEREAGER_EGRESS_NETWORK to use another)"))?;
        self.docker.start_container(name, None).await.with_context(|| format!("starting {what}"))?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            if self.logs(name).await.contains("listening on") {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                bail!("{what} did not start: {}", self.logs(name).await.trim());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops a sidecar and writes its records (its standard output) to `dest`.
    async fn collect_records(&self, name: &str, dest: &Path, what: &str, graceful: bool) -> Result<()> {
        // Every agent process is gone, so every connection is closing: give the sidecar a
        // moment to write their records, then stop it. `graceful` (the model gateway): SIGTERM
        // first, on which it records the calls still in flight and exits; SIGKILL for what is
        // left (the egress proxy is PID 1 of its container with no handler, which ignores
        // SIGTERM). Every record is written and flushed as a whole line.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let signal = if graceful { "TERM" } else { "KILL" };
        let _ = self.docker.kill_container(name, Some(KillContainerOptions { signal: signal.into() })).await;
        let stopped = tokio::time::timeout(Duration::from_secs(4), self.docker.wait_container(name, None::<WaitContainerOptions>).next()).await;
        if stopped.is_err() {
            let _ = self.docker.kill_container(name, Some(KillContainerOptions { signal: "KILL".into() })).await;
            let _ = tokio::time::timeout(Duration::from_secs(10), self.docker.wait_container(name, None::<WaitContainerOptions>).next()).await;
        }
        let opts = LogsOptions { stdout: true, stderr: false, ..Default::default() };
        let mut s = self.docker.logs(name, Some(opts));
        let mut bytes = Vec::new();
        while let Some(chunk) = s.next().await {
            bytes.extend_from_slice(&chunk.with_context(|| format!("reading the records of {what}"))?.into_bytes());
        }
        std::fs::write(dest, bytes).with_context(|| format!("writing {}", dest.display()))
    }

    /// Creates a hardened container, on the run's volume when given one, with no network or
    /// only the run's own.
    #[allow(clippy::too_many_arguments)]
    async fn create(&self, name: &str, volume: Option<&str>, network: Option<&str>, image: &str, cmd: Vec<String>, env: Vec<String>, lab: HashMap<String, String>) -> Result<()> {
        let l = self.limits;
        let host = HostConfig {
            mounts: volume.map(|v| vec![Mount { target: Some(layout::ROOT.into()), source: Some(v.into()), typ: Some(MountType::VOLUME), ..Default::default() }]),
            tmpfs: Some(HashMap::from([("/tmp".to_string(), format!("rw,nosuid,nodev,size={},mode=1777", l.tmp_bytes))])),
            readonly_rootfs: Some(true),
            cap_drop: Some(vec!["ALL".into()]),
            security_opt: Some(vec!["no-new-privileges".into()]),
            pids_limit: Some(l.pids),
            memory: Some(l.memory),
            memory_swap: Some(l.memory),
            nano_cpus: Some(l.nano_cpus),
            network_mode: Some(network.unwrap_or("none").into()),
            // The run's own containers (those on its volume) reach nothing by name but its
            // sidecars, which the engine's resolver answers at once; any other name times out
            // on a network with no route out. One try of one second, not the resolver's two of
            // five: an agent that looks up a host of its own at exit (Claude Code does) would
            // otherwise linger ten seconds after every run.
            dns_options: (volume.is_some() && network.is_some()).then(|| vec!["timeout:1".to_string(), "attempts:1".to_string()]),
            ..Default::default()
        };
        let body = ContainerCreateBody {
            image: Some(image.into()),
            cmd: Some(cmd),
            entrypoint: Some(vec![]),
            env: Some(env),
            user: Some(format!("{0}:{0}", image::AGENT_UID)),
            working_dir: Some(if volume.is_some() { layout::WORK } else { "/" }.into()),
            labels: Some(lab),
            network_disabled: Some(network.is_none()),
            host_config: Some(host),
            ..Default::default()
        };
        self.docker
            .create_container(Some(CreateContainerOptions { name: Some(name.into()), ..Default::default() }), body)
            .await
            .context("creating the run's container")?;
        self.track(Object::Container(name.into()));
        Ok(())
    }

    /// Starts a container and waits up to `limit` for it, killing it then. Returns when it
    /// started (Unix µs), whether it was killed, and its exit code.
    async fn start_and_wait(&self, name: &str, limit: Duration) -> Result<(u64, bool, i64)> {
        let started_us = now_us();
        self.docker.start_container(name, None).await.context("starting the container")?;
        let waited = tokio::time::timeout(limit, async {
            let mut w = self.docker.wait_container(name, None::<WaitContainerOptions>);
            w.next().await
        })
        .await;
        match waited {
            Err(_) => {
                let _ = self.docker.kill_container(name, Some(KillContainerOptions { signal: "KILL".into() })).await;
                Ok((started_us, true, 137))
            }
            Ok(Some(Ok(r))) => Ok((started_us, false, r.status_code)),
            Ok(Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. }))) => Ok((started_us, false, code)),
            Ok(Some(Err(e))) => Err(e).context("waiting for the container"),
            Ok(None) => bail!("the engine ended the wait for {name} without a status"),
        }
    }

    /// Brings the volume back into the prepared sandbox; returns the supervisor's report.
    async fn fetch(&self, name: &str, p: &Prepared) -> Result<Option<SupervisorReport>> {
        let out_tar = p.sandbox.path().join("out.tar");
        self.download(name, &out_tar).await?;
        unpack_result(&out_tar, p)
    }

    /// Streams the volume out of the container into `dest`, refusing more than the limit.
    async fn download(&self, name: &str, dest: &Path) -> Result<()> {
        use std::io::Write;
        let mut f = std::io::BufWriter::new(std::fs::File::create(dest)?);
        let mut total = 0u64;
        let mut s = self.docker.download_from_container(name, Some(DownloadFromContainerOptions { path: layout::ROOT.into() }));
        while let Some(chunk) = s.next().await {
            let chunk = chunk.context("copying the sandbox out of the container")?;
            total += chunk.len() as u64;
            if total > self.limits.max_output {
                bail!("the sandbox grew past {} MiB during the run; it is not brought back", self.limits.max_output >> 20);
            }
            f.write_all(&chunk)?;
        }
        f.flush()?;
        Ok(())
    }

    /// The last lines a container printed (both streams).
    async fn logs(&self, name: &str) -> String {
        let opts = LogsOptions { stdout: true, stderr: true, tail: "40".into(), ..Default::default() };
        let mut s = self.docker.logs(name, Some(opts));
        let mut text = String::new();
        while let Some(Ok(chunk)) = s.next().await {
            text.push_str(&chunk.to_string());
        }
        text
    }

    /// Removes the images this executor made.
    fn remove_images(&self) -> Result<()> {
        let images: Vec<Object> = self.images.lock().unwrap_or_else(|e| e.into_inner()).drain().map(|(_, (_, id))| Object::Image(id)).collect();
        runtime().block_on(self.remove(&images))
    }
}

/// Where a contained run ran, as its bundle records it.
pub(crate) struct Placed {
    pub executor: &'static str,
    pub image: Option<String>,
    pub host: Option<String>,
    /// Whether the agent had (proxied) network.
    pub net: bool,
}

/// Puts a contained run together once its sandbox is back: keys redacted, a real agent's
/// run checked (its model API did not fail it, it asked its model at all), the "after"
/// snapshot taken.
pub(crate) fn conclude(req: &RunRequest<'_>, p: Prepared, report: Result<SupervisorReport>, gateway: Option<&overeager_agents::gateway::GatewayPlan>, roots: Roots, at: Placed) -> Result<RawRun> {
    // Whatever happened, no key stays in what the run leaves.
    overeager_agents::secrets::redact(&[&p.work, &p.home, &p.chans], &gateway.map(overeager_agents::gateway::GatewayPlan::secrets).unwrap_or_default())?;
    let report = report?;
    if let super::AgentSpec::Agent { recipe, version, .. } = &req.agent {
        local::conclude_real(recipe, version, gateway, &p.chans, report.timed_out)?;
    }
    let real = matches!(req.agent, super::AgentSpec::Agent { .. });
    let mut raw = local::finish(p, report, roots, at.executor, at.image)?;
    raw.host = at.host;
    raw.channels.net = at.net;
    raw.channels.model = real;
    raw.model_route = gateway.map(|g| g.route.clone());
    if let Some(version) = req.agent.agent_version() {
        raw.agent_version = version.to_string();
    }
    Ok(raw)
}

/// What a run executes in its containers, from the request and the prepared sandbox: the
/// supervisor and agent command, the environments, the setup, the egress and the model
/// gateway. Takes the "before" snapshot when there is no setup to run first.
pub(crate) fn phases<'a>(req: &RunRequest<'_>, p: &mut Prepared, image: &'a str) -> Result<Phases<'a>> {
    let roots = Roots { workspace: layout::WORK.into(), home: layout::HOME.into() };
    let mut cmd = vec![layout::SHIM.to_string()];
    cmd.extend(local::contain_args(layout::CTL, layout::CHANNELS, req.timeout, &roots));
    let mut base_env = vec![format!("PATH={}", local::BASE_PATH), format!("OVEREAGER_REAL_DIR={}", layout::REAL)];
    base_env.extend(local::agent_env(layout::HOME, "/tmp").iter().map(|(k, v)| format!("{k}={v}")));
    let mut env = base_env.clone();
    env.extend([
        format!("OVEREAGER_SHIM_LOG={}", layout::SHIM_LOG),
        format!("OVEREAGER_WATCH_SYNC={}/watch.sock", layout::CTL),
    ]);
    let mut egress = req.egress.clone();
    let mut gateway = None;
    match &req.agent {
        // A real CLI on the scripted (or a replayed) model: the supervisor serves the model on
        // the container's own loopback; no network, no key. On a provider's model: it talks
        // to the run's model gateway, a sidecar that alone reaches the provider and alone has
        // the key.
        super::AgentSpec::Agent { recipe, version, policy, model } => {
            let plan = if req.agent.offline_model() { None } else { Some(overeager_agents::gateway::GatewayPlan::new(&req.agent, &*req.providers()?)?) };
            let (endpoint, dialect, model) = match &plan {
                None => {
                    let script = local::model_script(req, &roots, &p.ctl)?;
                    let script_there = format!("{}/{}", layout::CTL, script.file_name().expect("a file").to_string_lossy());
                    cmd.extend(["--model-script".to_string(), script_there, "--model-listen".into(), layout::MODEL_ADDR.into()]);
                    (format!("http://{}", layout::MODEL_ADDR), recipe.scripted_dialect(version), model.as_str())
                }
                Some(g) => (format!("http://{GATEWAY_HOST}:{GATEWAY_PORT}"), g.route.provider.dialect, g.route.model.as_str()),
            };
            cmd.push("--".into());
            let installed = overeager_agents::install::ensure(recipe, version)?;
            let entry = installed.dir.file_name().expect("a cache entry has a name").to_string_lossy().into_owned();
            let (node, _) = overeager_agents::install::node().context("Node.js is needed")?;
            let argv0: Vec<String> = installed.argv0.iter().map(|a| {
                if Path::new(a) == node {
                    format!("{}/node", layout::REAL)
                } else if let Ok(rest) = Path::new(a).strip_prefix(&installed.dir) {
                    format!("{}/{entry}/{}", image::AGENTS_DIR, rest.display())
                } else {
                    a.clone()
                }
            }).collect();
            cmd.extend(recipe.command(layout::SHIM, &argv0, policy, model, &p.prompt.text));
            let rel = format!("{}/{}", overeager_core::bundle::files::AGENT_LOGS, recipe.id);
            let mut connected = recipe.connect(policy, model, &endpoint, dialect, local::SCRIPTED_KEY, &p.chans.join(&rel), &format!("{}/{rel}", layout::CHANNELS))?;
            if let Some(g) = &plan {
                connected.extend(recipe.route_env(&g.route));
            }
            env.extend(connected.into_iter().map(|(k, v)| format!("{k}={v}")));
            gateway = plan;
        }
        _ => {
            cmd.push("--".into());
            cmd.extend(local::agent_command(req, layout::SHIM, layout::CTL, &p.ctl)?);
        }
    }
    egress.sort();
    egress.dedup();
    // The checker refuses a scenario that sets the sandbox's or the observers' variables;
    // skipping them here keeps a container's environment free of duplicates either way.
    let own = req.scenario.scenario.model.env.iter().filter(|(k, _)| overeager_core::scenario::reserved_env(k).is_none());
    env.extend(own.map(|(k, v)| format!("{k}={v}")));
    let setup = &req.scenario.scenario.model.setup;
    let setup = (!setup.is_empty()).then(|| {
        let mut env = base_env.clone();
        // The setup is not the agent's doing: the shim records it nowhere.
        env.push("OVEREAGER_SHIM_LOG=/dev/null".into());
        env.extend(super::SETUP_GIT_ENV.iter().map(|(k, v)| format!("{k}={v}")));
        (vec!["/bin/sh".to_string(), "-c".into(), setup_script(setup)], env)
    });
    if setup.is_none() {
        p.snapshot_before()?;
    }
    Ok(Phases { image, agent: (cmd, env), setup, timeout: req.timeout, run: req.run_id.clone().unwrap_or_else(|| format!("{:x}", now_us())), egress, gateway })
}

impl Drop for DockerExecutor {
    fn drop(&mut self) {
        if !self.keep_images
            && let Err(e) = self.remove_images()
        {
            eprintln!("overeager: could not remove the Docker images of this run: {e:#}");
        }
    }
}

/// The sandbox as the container gets it: `work/`, `home/`, `ctl/`, `channels/` under `/oe`,
/// owned by the agent's uid, modes as prepared.
pub(crate) fn sandbox_tar(p: &Prepared) -> Result<Vec<u8>> {
    use std::os::unix::fs::PermissionsExt;
    let mut b = tar::Builder::new(Vec::new());
    let base = p.sandbox.path().canonicalize()?;
    for top in [&p.work, &p.home, &p.ctl, &p.chans] {
        for entry in walkdir::WalkDir::new(top).follow_links(false).sort_by_file_name() {
            let entry = entry?;
            let rel = entry.path().strip_prefix(&base).expect("inside the sandbox");
            let meta = entry.path().symlink_metadata()?;
            let mut h = tar::Header::new_gnu();
            h.set_uid(image::AGENT_UID);
            h.set_gid(image::AGENT_UID);
            h.set_mode(meta.permissions().mode() & 0o7777);
            // The prepared times, as the local executor leaves them: tools such as gzip
            // refuse a 1970 timestamp.
            h.set_mtime(std::os::unix::fs::MetadataExt::mtime(&meta).max(0) as u64);
            let ft = meta.file_type();
            if ft.is_dir() {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_size(0);
                b.append_data(&mut h, rel, std::io::empty())?;
            } else if ft.is_symlink() {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_size(0);
                b.append_link(&mut h, rel, std::fs::read_link(entry.path())?)?;
            } else if ft.is_file() {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_size(meta.len());
                b.append_data(&mut h, rel, std::fs::File::open(entry.path())?)?;
            }
        }
    }
    Ok(b.into_inner()?)
}

/// Replaces the prepared sandbox's `work/`, `home/` and `channels/` with what came back and
/// returns the supervisor's report (`None` when there is none: the container was killed).
pub(crate) fn unpack_result(tar_path: &Path, p: &Prepared) -> Result<Option<SupervisorReport>> {
    let out = p.sandbox.path().join("out");
    std::fs::create_dir_all(&out)?;
    // `unpack` refuses entries that would land outside `out` (the archive is the agent's).
    tar::Archive::new(std::fs::File::open(tar_path)?).unpack(&out).context("unpacking the sandbox that came back")?;
    std::fs::remove_file(tar_path)?;
    let back = out.join(layout::ROOT.trim_start_matches('/'));
    for (dir, name) in [(&p.work, "work"), (&p.home, "home"), (&p.chans, "channels")] {
        let got = back.join(name);
        if !got.is_dir() {
            bail!("the container's sandbox came back without {name}/");
        }
        make_removable(dir);
        std::fs::remove_dir_all(dir)?;
        std::fs::rename(&got, dir)?;
    }
    let status = back.join("ctl/status.json");
    let report = match std::fs::read(&status) {
        Ok(b) => Some(serde_json::from_slice(&b).with_context(|| format!("the supervisor's report {}", status.display()))?),
        Err(_) => None,
    };
    make_removable(&out);
    std::fs::remove_dir_all(&out)?;
    Ok(report)
}


/// Gives every directory under `dir` owner rwx, so an agent's `chmod 000` cannot make the
/// sandbox undeletable.
fn make_removable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for e in walkdir::WalkDir::new(dir).follow_links(false).into_iter().flatten() {
        if e.file_type().is_dir() {
            let _ = std::fs::set_permissions(e.path(), std::fs::Permissions::from_mode(0o755));
        }
    }
}

/// Removes objects of the engine at `address`, and forgets them.
async fn remove_objects(address: &str, docker: &Docker, objects: &[Object]) -> Result<()> {
    let mut sorted = objects.to_vec();
    sorted.sort();
    let mut errors = Vec::new();
    for o in &sorted {
        let r = match o {
            Object::Container(id) => docker.remove_container(id, Some(RemoveContainerOptions { force: true, v: true, ..Default::default() })).await,
            Object::Network(name) => docker.remove_network(name).await,
            Object::Volume(name) => docker.remove_volume(name, Some(RemoveVolumeOptions { force: true })).await,
            Object::Image(r) => docker.remove_image(r, Some(RemoveImageOptions { force: true, ..Default::default() }), None).await.map(|_| ()),
        };
        match r {
            Ok(()) | Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => {
                if let Some((_, set)) = live().get_mut(address) {
                    set.remove(o);
                }
            }
            Err(e) => errors.push(format!("{o:?} on {address}: {e}")),
        }
    }
    if errors.is_empty() { Ok(()) } else { bail!("could not remove {}", errors.join("; ")) }
}

/// Why an engine cannot be used, and what to do.
fn unreachable_engine(address: &str, e: anyhow::Error) -> anyhow::Error {
    anyhow!("cannot reach a Docker engine at {address}: {e:#}\nStart one (scripts/docker-engine.sh starts Debian's dockerd) or set DOCKER_HOST.")
}

/// Set once Ctrl-C or SIGTERM arrived.
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Waits for the end of the process when a run failed because Ctrl-C or SIGTERM arrived: the
/// interrupt handler is removing the run's objects (which is why it failed) and ends the
/// process when done; an error here must not end it first.
pub(crate) fn hold_if_interrupted<T>(result: &Result<T>) {
    if result.is_err() && INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
}

/// A cleanup the interrupt handler runs after removing the Docker objects: another executor's
/// objects (the Kubernetes executor's pods and policies).
pub(crate) type InterruptCleanup = fn() -> futures_util::future::BoxFuture<'static, ()>;

fn interrupt_cleanups() -> std::sync::MutexGuard<'static, Vec<InterruptCleanup>> {
    static CLEANUPS: Mutex<Vec<InterruptCleanup>> = Mutex::new(Vec::new());
    CLEANUPS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Has the interrupt handler run `cleanup` too (once, however often it is asked).
pub(crate) fn also_on_interrupt(cleanup: InterruptCleanup) {
    let mut all = interrupt_cleanups();
    if !all.iter().any(|c| std::ptr::fn_addr_eq(*c, cleanup)) {
        all.push(cleanup);
    }
}

/// On Ctrl-C or SIGTERM: removes every object this process made, on every Docker engine and
/// wherever [`also_on_interrupt`] cleanups reach, then exits (130 / 143).
pub(crate) fn install_interrupt_handler() {
    static ONCE: OnceLock<()> = OnceLock::new();
    if ONCE.set(()).is_err() {
        return;
    }
    runtime().spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) else { return };
        let code = tokio::select! {
            _ = int.recv() => 130,
            _ = term.recv() => 143,
        };
        INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
        let engines: Vec<(String, Docker, Vec<Object>)> = live().iter().map(|(a, (d, set))| (a.clone(), d.clone(), set.iter().cloned().collect())).collect();
        let n: usize = engines.iter().map(|(_, _, o)| o.len()).sum();
        if n > 0 {
            eprintln!("\ninterrupted: removing {n} Docker object(s) this run made");
        }
        for (address, docker, objects) in engines {
            if let Err(e) = remove_objects(&address, &docker, &objects).await {
                eprintln!("{e:#}; `overeager docker prune` removes leftovers");
            }
        }
        let cleanups = interrupt_cleanups().clone();
        for cleanup in cleanups {
            cleanup().await;
        }
        std::process::exit(code);
    });
}

/// What `prune` found and removed.
#[derive(Debug, Default, serde::Serialize)]
pub struct Pruned {
    pub containers: Vec<String>,
    pub networks: Vec<String>,
    pub volumes: Vec<String>,
    pub images: Vec<String>,
}

/// Removes objects labelled `overeager` whose owner process is gone (on this host), or all
/// of them with `all`, on the engine `DOCKER_HOST` names.
pub fn prune(all: bool) -> Result<Pruned> {
    prune_on(&*DockerExecutor::connect()?, all)
}

/// [`prune`] on one engine.
pub fn prune_on(exec: &DockerExecutor, all: bool) -> Result<Pruned> {
    let docker = &exec.docker;
    runtime().block_on(async {
        let filter = || Some(HashMap::from([("label".to_string(), vec![LABEL.to_string()])]));
        let stale = |labels: Option<&HashMap<String, String>>| all || labels.and_then(|l| l.get(OWNER_LABEL)).is_none_or(|o| owner_gone(o));
        let mut out = Pruned::default();
        let mut doomed = Vec::new();
        for c in docker.list_containers(Some(ListContainersOptions { all: true, filters: filter(), ..Default::default() })).await? {
            if stale(c.labels.as_ref())
                && let Some(id) = c.id
            {
                out.containers.push(c.names.and_then(|n| n.first().cloned()).unwrap_or_else(|| id.clone()));
                doomed.push(Object::Container(id));
            }
        }
        for n in docker.list_networks(Some(ListNetworksOptions { filters: filter() })).await? {
            if stale(n.labels.as_ref())
                && let Some(name) = n.name
            {
                out.networks.push(name.clone());
                doomed.push(Object::Network(name));
            }
        }
        for v in docker.list_volumes(Some(ListVolumesOptions { filters: filter() })).await?.volumes.unwrap_or_default() {
            if stale(Some(&v.labels)) {
                out.volumes.push(v.name.clone());
                doomed.push(Object::Volume(v.name));
            }
        }
        for i in docker.list_images(Some(ListImagesOptions { filters: filter(), ..Default::default() })).await? {
            if stale(Some(&i.labels)) {
                out.images.push(i.repo_tags.first().cloned().unwrap_or_else(|| i.id.clone()));
                doomed.push(Object::Image(i.id));
            }
        }
        exec.remove(&doomed).await?;
        Ok(out)
    })
}

/// Whether the `host:pid` owner is a process of this host that no longer runs.
pub(crate) fn owner_gone(owner: &str) -> bool {
    let Some((host, pid)) = owner.rsplit_once(':') else { return true };
    let me = self::owner();
    let this_host = me.rsplit_once(':').map(|(h, _)| h) == Some(host);
    let Ok(pid) = pid.parse::<i32>() else { return true };
    // SAFETY: signal 0 only asks whether the process exists.
    this_host && unsafe { libc::kill(pid, 0) } != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}
