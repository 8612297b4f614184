//! The Kubernetes executor: each run in a Pod of its own, through the API server (kube), the
//! sandbox copied in and out as a tar over exec — the Docker executor's flow, on a cluster.
//!
//! A run: the sandbox is prepared on this machine exactly as for the other executors; a
//! NetworkPolicy that denies all traffic to and from the run's pod is created first, then
//! the pod (no service-account token, no privilege escalation, every capability dropped, a
//! read-only root, the Docker executor's CPU and memory limits, `emptyDir` volumes for `/oe`
//! and `/tmp`), which only waits. Once it runs, the sandbox goes in over exec, the setup (when
//! the scenario has one) and the run supervisor run over exec, and the sandbox comes back
//! over exec. The pod and the policy are deleted whatever happens. Every object carries the
//! label `overeager` and the annotation naming its owner process, which `overeager k8s prune`
//! uses to remove leftovers of runners that are gone.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, EmptyDirVolumeSource, EnvVar, EnvVarSource, HostAlias, Pod, PodSecurityContext, PodSpec, ResourceRequirements, SeccompProfile, Secret,
    SecretKeySelector, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort, NetworkPolicySpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, AttachParams, DeleteParams, ListParams, LogParams, PostParams};
use overeager_core::bundle::{ExitStatus, SupervisorReport};
use overeager_core::paths::Roots;
use overeager_core::plan::KubePlacement;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::docker::{self, Limits, Phases, Placed, image, layout, runtime};
use overeager_agents::gateway::GatewayPlan;
use super::local::{self, Prepared};
use super::{AgentSpec, RawRun, RunRequest};
use overeager_core::now_us;

/// The label every object this executor creates carries.
pub const LABEL: &str = "overeager";
/// The label that names a run's pod, which its NetworkPolicy selects.
pub const POD_LABEL: &str = "overeager.pod";
/// The annotation naming the process that made an object (`host:pid`).
pub const OWNER_ANNOTATION: &str = "overeager/owner";

/// How long a pod may take to start (pull included).
const START_LIMIT: Duration = Duration::from_secs(300);
/// How often a starting pod is looked at.
const POLL: Duration = Duration::from_millis(250);
/// How long a copy in or out may take.
const COPY_LIMIT: Duration = Duration::from_secs(300);

/// A connection to a cluster, and where runs go in it.
pub struct KubeExecutor {
    client: kube::Client,
    settings: KubePlacement,
    limits: Limits,
}

/// A pod as it ran: on which node, from which image.
#[derive(Debug, Default, Clone)]
struct Started {
    node: Option<String>,
    image_id: Option<String>,
    ip: Option<String>,
}

/// The APIs a run's objects are made through.
#[derive(Clone)]
struct Apis {
    pods: Api<Pod>,
    policies: Api<NetworkPolicy>,
    secrets: Api<Secret>,
}

/// Runs in progress (by pod name): what to delete on Ctrl-C.
type LiveRuns = BTreeMap<String, (Apis, Made)>;

fn live_runs() -> std::sync::MutexGuard<'static, LiveRuns> {
    static LIVE: std::sync::OnceLock<std::sync::Mutex<LiveRuns>> = std::sync::OnceLock::new();
    LIVE.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner())
}

/// Deletes the pods and policies of the runs in progress (for the interrupt handler).
pub(super) async fn delete_live() {
    let runs: Vec<(Apis, Made)> = std::mem::take(&mut *live_runs()).into_values().collect();
    if !runs.is_empty() {
        eprintln!("\ninterrupted: deleting the pods and NetworkPolicies of {} run(s)", runs.len());
    }
    delete_runs(runs).await;
}

/// Deletes the objects of runs, saying what could not be deleted.
async fn delete_runs(runs: Vec<(Apis, Made)>) {
    for (apis, made) in runs {
        if let Err(e) = delete_run(&apis, &made).await {
            eprintln!("{e:#}");
        }
    }
}

/// The objects a run has created so far, to delete.
#[derive(Default)]
struct Made {
    pods: Vec<String>,
    policies: Vec<String>,
    /// The model gateway's key, for its pod only.
    secrets: Vec<String>,
}


impl KubeExecutor {
    /// Connects with the kubeconfig (`KUBECONFIG`, or `~/.kube/config`; in a pod, its service
    /// account) and the plan's context, and checks that the API server answers.
    pub fn connect(settings: &KubePlacement) -> Result<Arc<KubeExecutor>> {
        let client = runtime().block_on(async {
            let config = match &settings.context {
                Some(context) => {
                    let opts = kube::config::KubeConfigOptions { context: Some(context.clone()), ..Default::default() };
                    kube::Config::from_kubeconfig(&opts).await.with_context(|| format!("reading the kubeconfig context `{context}`"))?
                }
                None => kube::Config::infer().await.context("finding a kubeconfig (KUBECONFIG, ~/.kube/config or a service account)")?,
            };
            let client = kube::Client::try_from(config).context("making a Kubernetes client")?;
            client.apiserver_version().await.context("asking the API server for its version")?;
            Ok::<_, anyhow::Error>(client)
        });
        let client = client.map_err(|e| anyhow!("cannot reach the Kubernetes cluster: {e:#}\nSet KUBECONFIG (or `context` in the plan's [kubernetes] table)."))?;
        Ok(Self::with_client(client, settings))
    }

    /// An executor on an existing client. Installs the Ctrl-C handler that deletes the pods
    /// and policies of the runs in progress.
    pub fn with_client(client: kube::Client, settings: &KubePlacement) -> Arc<KubeExecutor> {
        docker::also_on_interrupt(|| Box::pin(delete_live()));
        docker::install_interrupt_handler();
        Arc::new(KubeExecutor { client, settings: settings.clone(), limits: Limits::default() })
    }

    /// Where runs go, as runs record it when the node is not known: `k8s:<namespace>`.
    pub fn address(&self) -> String {
        format!("k8s:{}", self.settings.namespace)
    }

    /// Whether the API server still answers.
    pub fn ping(&self) -> Result<()> {
        runtime().block_on(async {
            match tokio::time::timeout(Duration::from_secs(5), self.client.apiserver_version()).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => Err(anyhow!("the Kubernetes API server does not answer: {e}")),
                Err(_) => Err(anyhow!("the Kubernetes API server did not answer within 5 s")),
            }
        })
    }

    /// Runs one agent on one scenario in a pod.
    pub fn execute(&self, req: &RunRequest<'_>) -> Result<RawRun> {
        let image = image_reference(self.settings.registry.as_deref(), &req.agent);
        let mut p = local::prepare(req, false)?;
        let mut run = docker::phases(req, &mut p, &image)?;
        let gateway = run.gateway.take();
        let roots = Roots { workspace: layout::WORK.into(), home: layout::HOME.into() };
        let result = runtime().block_on(self.run_pod(&run, gateway.as_ref(), &mut p));
        docker::hold_if_interrupted(&result);
        let (report, started) = match result {
            Ok((r, s)) => (Ok(r), Some(s)),
            Err(e) => (Err(e), None),
        };
        let started = started.unwrap_or_default();
        let at = Placed { executor: "kubernetes", image: started.image_id.or(Some(image.clone())), host: Some(started.node.unwrap_or_else(|| self.address())), net: !run.egress.is_empty() };
        docker::conclude(req, p, report, gateway.as_ref(), roots, at)
    }

    /// The run's NetworkPolicies and pods (the egress proxy's first, when it has one); the
    /// run; all of them deleted after, whatever happened.
    async fn run_pod(&self, run: &Phases<'_>, gateway: Option<&GatewayPlan>, p: &mut Prepared) -> Result<(SupervisorReport, Started)> {
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("overeager-{}-{seq}-{:x}", std::process::id(), now_us());
        let proxy_name = format!("{name}-proxy");
        let gateway_name = format!("{name}-gateway");
        let gateway = match gateway {
            Some(g) => Some(GatewayPod::new(g)?),
            None => None,
        };
        let mut manifests = Manifests::new(&self.settings, &self.limits, &name, run.image, &run.run, &run.egress, gateway.as_ref(), run.timeout);
        let policies: Api<NetworkPolicy> = Api::namespaced(self.client.clone(), &self.settings.namespace);
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.settings.namespace);
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.settings.namespace);
        let apis = Apis { pods: pods.clone(), policies: policies.clone(), secrets: secrets.clone() };
        let mut made = Made::default();
        // What Ctrl-C deletes while the run is in progress (what does not exist yet is a 404).
        let sidecars = [proxy_name.clone(), gateway_name.clone()];
        let everything = Made { pods: [&sidecars[..], &[name.clone()]].concat(), policies: [&sidecars[..], &[name.clone()]].concat(), secrets: vec![gateway_name.clone()] };
        live_runs().insert(name.clone(), (apis.clone(), everything));
        let result = async {
            // The policies before the pods they select, so no pod runs unguarded.
            policies.create(&PostParams::default(), &manifests.policy).await.context("creating the run's NetworkPolicy")?;
            made.policies.push(name.clone());
            let mut agent_env = run.agent.1.clone();
            if let Some((proxy_policy, proxy_pod)) = &manifests.proxy {
                let ip = self.start_sidecar(&apis, &mut made, &proxy_name, proxy_policy, proxy_pod, "the egress proxy").await?;
                agent_env.extend(docker::proxy_env(&format!("http://{ip}:{}", docker::PROXY_PORT)));
            }
            if let Some((gateway_policy, gateway_pod, secret)) = &manifests.gateway {
                if let Some(secret) = secret {
                    secrets.create(&PostParams::default(), secret).await.context("creating the model gateway's Secret")?;
                    made.secrets.push(gateway_name.clone());
                }
                let ip = self.start_sidecar(&apis, &mut made, &gateway_name, gateway_policy, gateway_pod, "the model gateway").await?;
                // The agent's settings name the gateway; its pod resolves no name (no DNS).
                if let Some(spec) = manifests.pod.spec.as_mut() {
                    spec.host_aliases = Some(vec![HostAlias { ip, hostnames: Some(vec![docker::GATEWAY_HOST.to_string()]) }]);
                }
            }
            made.pods.push(name.clone());
            pods.create(&PostParams::default(), &manifests.pod).await.context("creating the run's pod")?;
            let started = self.wait_running(&pods, &name).await?;
            let input = docker::sandbox_tar(p)?;
            self.copy_in(&pods, &name, input).await?;
            if let Some((cmd, env)) = &run.setup {
                let (code, _, err) = self.exec(&pods, &name, with_env(cmd, env), docker::SETUP_LIMIT).await.context("running the scenario's setup")?;
                match code {
                    Some(0) => {}
                    Some(c) => bail!("the scenario's setup failed in the pod (exit {c}):{}", tail(&err)),
                    None => bail!("the scenario's setup did not finish within {} s", docker::SETUP_LIMIT.as_secs()),
                }
                self.copy_out(&pods, &name, p).await?;
                p.snapshot_before()?;
            }
            let (code, out, err) = self.exec(&pods, &name, with_env(&run.agent.0, &agent_env), run.timeout + docker::SUPERVISOR_SLACK).await.context("running the agent")?;
            let fetched = self.copy_out(&pods, &name, p).await?;
            if manifests.proxy.is_some() {
                // Into the channels that came back.
                let read = vec![format!("{}/sh", layout::REAL), "-c".into(), format!("{}/cat {PROXY_LOG} 2>/dev/null || true", layout::REAL)];
                let (_, records, _) = self.exec(&pods, &proxy_name, read, COPY_LIMIT).await.context("reading the egress proxy's records")?;
                std::fs::write(p.chans.join(overeager_core::bundle::files::NET), records)?;
            }
            if manifests.gateway.is_some() {
                let read = vec![format!("{}/sh", layout::REAL), "-c".into(), format!("{}/cat {GATEWAY_LOG} 2>/dev/null || true", layout::REAL)];
                let (_, records, _) = self.exec(&pods, &gateway_name, read, COPY_LIMIT).await.context("reading the model gateway's records")?;
                std::fs::write(p.chans.join(overeager_core::bundle::files::MODEL), records)?;
            }
            let report = match fetched {
                Some(r) => r,
                None if code.is_none() => SupervisorReport { exit: ExitStatus { code: None, signal: Some(libc::SIGKILL) }, timed_out: true, started_us: now_us(), ended_us: now_us(), stragglers_killed: 0 },
                None => bail!("the run supervisor in the pod left no report (exit {code:?}); its output:\n{}{}", tail(&out), tail(&err)),
            };
            Ok((report, started))
        }
        .await;
        let deleted = delete_run(&apis, &made).await;
        live_runs().remove(&name);
        let done = result?;
        deleted?;
        Ok(done)
    }

    /// Starts a sidecar of a run (`what`: the egress proxy, the model gateway): its
    /// NetworkPolicy first, then its pod, both noted in `made`; waits until it runs and
    /// listens. Its IP address.
    #[allow(clippy::too_many_arguments)]
    async fn start_sidecar(&self, apis: &Apis, made: &mut Made, name: &str, policy: &NetworkPolicy, pod: &Pod, what: &str) -> Result<String> {
        apis.policies.create(&PostParams::default(), policy).await.with_context(|| format!("creating {what}'s NetworkPolicy"))?;
        made.policies.push(name.to_string());
        made.pods.push(name.to_string());
        apis.pods.create(&PostParams::default(), pod).await.with_context(|| format!("creating {what}'s pod"))?;
        let started = self.wait_running(&apis.pods, name).await?;
        let ip = started.ip.ok_or_else(|| anyhow!("{what}'s pod {name} has no IP address"))?;
        self.wait_listening(&apis.pods, name).await?;
        Ok(ip)
    }

    /// Waits until a sidecar (the egress proxy, the model gateway) says it listens (on
    /// standard error, in its log).
    async fn wait_listening(&self, pods: &Api<Pod>, name: &str) -> Result<()> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let log = pods.logs(name, &LogParams::default()).await.with_context(|| format!("reading the log of the sidecar {name}"))?;
            if log.contains("listening on") {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                bail!("the sidecar {name} did not start: {}", log.trim());
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits until the pod runs; an error as soon as it cannot (its image cannot be pulled, it
    /// failed, it was not scheduled in time).
    async fn wait_running(&self, pods: &Api<Pod>, name: &str) -> Result<Started> {
        let deadline = tokio::time::Instant::now() + START_LIMIT;
        loop {
            let pod = pods.get(name).await.with_context(|| format!("looking at the pod {name}"))?;
            let status = pod.status.unwrap_or_default();
            let waiting = status.container_statuses.iter().flatten().filter_map(|c| c.state.as_ref()?.waiting.as_ref()).next();
            if let Some(w) = waiting
                && matches!(w.reason.as_deref(), Some("ErrImagePull" | "ImagePullBackOff" | "InvalidImageName" | "CreateContainerConfigError" | "CreateContainerError"))
            {
                bail!(
                    "the pod {name} cannot start: {} {}\n(the image comes from [kubernetes] registry, pushed with `overeager agent image … --push <registry>`, or is preloaded on the nodes)",
                    w.reason.as_deref().unwrap_or_default(),
                    w.message.as_deref().unwrap_or_default()
                );
            }
            match status.phase.as_deref() {
                Some("Running") => {
                    let image_id = status.container_statuses.iter().flatten().map(|c| c.image_id.clone()).find(|i| !i.is_empty());
                    return Ok(Started { node: pod.spec.and_then(|s| s.node_name), image_id, ip: status.pod_ip });
                }
                Some(phase @ ("Failed" | "Succeeded")) => bail!("the pod {name} ended ({phase}) before the run: {}", status.message.unwrap_or_default()),
                _ => {}
            }
            if tokio::time::Instant::now() > deadline {
                bail!("the pod {name} did not start within {} s (phase {})", START_LIMIT.as_secs(), status.phase.unwrap_or_default());
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Sends the sandbox into the pod's `/oe` as a tar on standard input. The command reads
    /// exactly the archive's length, so it ends without the end-of-input signal older API
    /// servers cannot send over WebSocket.
    async fn copy_in(&self, pods: &Api<Pod>, name: &str, tar: Vec<u8>) -> Result<()> {
        let cmd = vec![
            format!("{}/sh", layout::REAL),
            "-c".into(),
            format!("{real}/head -c {} | {real}/tar -x -f - -C {}", tar.len(), layout::ROOT, real = layout::REAL),
        ];
        let params = AttachParams::default().stdin(true).stdout(false).stderr(true).max_stdin_buf_size(1 << 20);
        let mut attached = pods.exec(name, cmd, &params).await.context("copying the sandbox into the pod")?;
        let mut stdin = attached.stdin().ok_or_else(|| anyhow!("the exec stream has no standard input"))?;
        let stderr = attached.stderr();
        let status = attached.take_status().ok_or_else(|| anyhow!("the exec stream has no status"))?;
        let work = async move {
            // The writer is moved in: a status that comes first drops it, which closes stdin.
            let write = async move {
                stdin.write_all(&tar).await?;
                stdin.flush().await?;
                Ok::<_, std::io::Error>(())
            };
            // A command that ends before it has read everything (it failed) leaves the writer
            // waiting for room: its status ends the copy.
            let sent_then_status = async {
                tokio::pin!(status);
                tokio::select! {
                    s = &mut status => Ok::<_, std::io::Error>(s),
                    w = write => {
                        w?;
                        Ok(status.await)
                    }
                }
            };
            // The stream's task, not the status, says when stderr has all it will get: a task
            // that ends in an error (the pod closed the stream while stdin was being sent) never
            // closes stderr, so waiting on stderr alone would wait for ever.
            let ended = async {
                let status = sent_then_status.await;
                (status, attached.join().await)
            };
            let read_err = read_all(stderr, 1 << 20);
            tokio::pin!(ended, read_err);
            let mut err = None;
            let (status, joined) = loop {
                tokio::select! {
                    e = &mut read_err, if err.is_none() => err = Some(e),
                    ended = &mut ended => break ended,
                }
            };
            let status = status.context("sending the sandbox")?;
            let err: Vec<u8> = match (err, joined) {
                (Some(e), _) => e?,
                // Ended cleanly, the task closed stderr: what is left is there to read.
                (None, Ok(())) => read_err.await?,
                (None, Err(e)) if status.is_none() => bail!("copying the sandbox into the pod: the exec stream broke: {e}"),
                (None, Err(_)) => Vec::new(),
            };
            check_status(status, &err, "copying the sandbox into the pod")
        };
        tokio::time::timeout(COPY_LIMIT, work).await.map_err(|_| anyhow!("copying the sandbox into the pod took over {} s", COPY_LIMIT.as_secs()))?
    }

    /// Brings `/oe` back into the prepared sandbox; returns the supervisor's report.
    async fn copy_out(&self, pods: &Api<Pod>, name: &str, p: &Prepared) -> Result<Option<SupervisorReport>> {
        let root = layout::ROOT.trim_start_matches('/');
        let cmd = vec![format!("{}/tar", layout::REAL), "-c".into(), "-f".into(), "-".into(), "-C".into(), "/".into(), root.into()];
        let params = AttachParams::default().stdin(false).stdout(true).stderr(true).max_stdout_buf_size(1 << 20);
        let mut attached = pods.exec(name, cmd, &params).await.context("copying the sandbox out of the pod")?;
        let stdout = attached.stdout();
        let stderr = attached.stderr();
        let status = attached.take_status().ok_or_else(|| anyhow!("the exec stream has no status"))?;
        let limit = self.limits.max_output;
        let work = async {
            let (out, err, status) = tokio::join!(read_all(stdout, limit), read_all(stderr, 1 << 20), status);
            check_status(status, &err?, "copying the sandbox out of the pod")?;
            out.map_err(|e| anyhow!("copying the sandbox out of the pod: {e}"))
        };
        let bytes = tokio::time::timeout(COPY_LIMIT, work).await.map_err(|_| anyhow!("copying the sandbox out of the pod took over {} s", COPY_LIMIT.as_secs()))??;
        let tar_path = p.sandbox.path().join("out.tar");
        std::fs::write(&tar_path, bytes)?;
        docker::unpack_result(&tar_path, p)
    }

    /// Runs a command in the pod, up to `limit`: its exit code (`None`: it was still running
    /// at the limit, and the pod is deleted after), standard output and error.
    async fn exec(&self, pods: &Api<Pod>, name: &str, cmd: Vec<String>, limit: Duration) -> Result<(Option<i64>, Vec<u8>, Vec<u8>)> {
        let params = AttachParams::default().stdin(false).stdout(true).stderr(true).max_stdout_buf_size(1 << 20).max_stderr_buf_size(1 << 20);
        let mut attached = pods.exec(name, cmd, &params).await?;
        let stdout = attached.stdout();
        let stderr = attached.stderr();
        let status = attached.take_status().ok_or_else(|| anyhow!("the exec stream has no status"))?;
        let work = async {
            let (out, err, status) = tokio::join!(read_all(stdout, 16 << 20), read_all(stderr, 16 << 20), status);
            (out, err, status)
        };
        match tokio::time::timeout(limit, work).await {
            Err(_) => Ok((None, Vec::new(), Vec::new())),
            Ok((out, err, status)) => Ok((Some(exit_code(status.as_ref())), out?, err?)),
        }
    }
}

/// `cmd` run with exactly the environment `env` (`K=V`), in the workspace.
fn with_env(cmd: &[String], env: &[String]) -> Vec<String> {
    let mut v = vec![format!("{}/env", layout::REAL), "-i".into(), "-C".into(), layout::WORK.into()];
    v.extend(env.iter().cloned());
    v.extend(cmd.iter().cloned());
    v
}

/// Reads a stream to its end, refusing more than `limit` bytes.
async fn read_all(stream: Option<impl tokio::io::AsyncRead + Unpin>, limit: u64) -> Result<Vec<u8>> {
    let Some(s) = stream else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    s.take(limit + 1).read_to_end(&mut out).await?;
    if out.len() as u64 > limit {
        bail!("more than {} MiB of output", limit >> 20);
    }
    Ok(out)
}

/// The exit code an exec's status reports (0 for success; -1 when it says nothing usable).
fn exit_code(status: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>) -> i64 {
    let Some(s) = status else { return -1 };
    if s.status.as_deref() == Some("Success") {
        return 0;
    }
    s.details
        .as_ref()
        .and_then(|d| d.causes.iter().flatten().find(|c| c.reason.as_deref() == Some("ExitCode")))
        .and_then(|c| c.message.as_deref()?.parse().ok())
        .unwrap_or(-1)
}

fn check_status(status: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>, stderr: &[u8], what: &str) -> Result<()> {
    match exit_code(status.as_ref()) {
        0 => Ok(()),
        code => bail!(
            "{what} failed (exit {code}): {}{}",
            status.and_then(|s| s.message).unwrap_or_default(),
            tail(stderr)
        ),
    }
}

/// The last lines of a command's output, for messages.
fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(40);
    lines[start..].iter().map(|l| format!("\n{l}")).collect()
}

/// Deletes a run's pods (at once: they only wait), then its NetworkPolicies, so no pod is
/// left unguarded, and the gateway's Secret; what is already gone counts as deleted.
async fn delete_run(apis: &Apis, made: &Made) -> Result<()> {
    let now = DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
    let mut errors = Vec::new();
    for name in made.pods.iter().rev() {
        if let Err(e) = apis.pods.delete(name, &now).await
            && !is_not_found(&e)
        {
            errors.push(format!("pod {name}: {e}"));
        }
    }
    for name in made.policies.iter().rev() {
        if let Err(e) = apis.policies.delete(name, &DeleteParams::default()).await
            && !is_not_found(&e)
        {
            errors.push(format!("NetworkPolicy {name}: {e}"));
        }
    }
    for name in &made.secrets {
        if let Err(e) = apis.secrets.delete(name, &DeleteParams::default()).await
            && !is_not_found(&e)
        {
            errors.push(format!("Secret {name}: {e}"));
        }
    }
    if errors.is_empty() { Ok(()) } else { bail!("could not delete {}; `overeager k8s prune` removes leftovers", errors.join("; ")) }
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// The image of a run's cell, as `overeager agent image … --push <registry>` names it: the
/// test image for scripted and simulated agents, a real agent's offline image for a real
/// agent on the scripted model. Without a registry, the same names are expected on the nodes.
pub fn image_reference(registry: Option<&str>, agent: &AgentSpec) -> String {
    let name = match agent {
        // On the scripted model or a provider's, the image made from the agent cache.
        AgentSpec::Agent { recipe, version, .. } => format!("overeager-agent/{}:{version}-offline", recipe.id),
        _ => format!("overeager-scripted:{}", env!("CARGO_PKG_VERSION")),
    };
    match registry {
        Some(r) => format!("{r}/{name}"),
        None => name,
    }
}

/// What a run creates in the cluster.
pub struct Manifests {
    /// Selects the run's pod: nothing in, and nothing out but to its egress proxy.
    pub policy: NetworkPolicy,
    pub pod: Pod,
    /// For a run with egress: the proxy's pod, and its policy (in from the run's pod only, out
    /// to DNS and the allowed ports).
    pub proxy: Option<(NetworkPolicy, Pod)>,
    /// For a run on a provider's model: the model gateway's pod, its policy (in from the
    /// run's pod only, out to DNS and the provider's port) and the Secret its key (and the
    /// provider's certificate authority) come from, which only its pod reads.
    pub gateway: Option<(NetworkPolicy, Pod, Option<Secret>)>,
}

/// Where the egress proxy writes its records, in its pod.
const PROXY_LOG: &str = "/tmp/net.jsonl";
/// Where the model gateway writes its records, in its pod.
const GATEWAY_LOG: &str = "/tmp/model.jsonl";

/// The model gateway's pod of a run on a provider's model: its command, the variables its
/// Secret gives it (variable, key in the Secret) and what the Secret holds, and the port it
/// reaches the provider on.
pub struct GatewayPod {
    pub command: Vec<String>,
    pub env: Vec<(String, String)>,
    pub secret: BTreeMap<String, String>,
    pub upstream_port: u16,
}

impl GatewayPod {
    /// From the run's gateway plan: the key and the provider's certificate authority go in
    /// the Secret, never on a command line or in a manifest's plain environment.
    pub fn new(plan: &GatewayPlan) -> Result<GatewayPod> {
        let mut command = vec![layout::SHIM.to_string()];
        command.extend(plan.args(GATEWAY_LOG, None, false));
        command.extend(["--listen".into(), format!("0.0.0.0:{}", docker::GATEWAY_PORT)]);
        let (mut env, mut secret) = (Vec::new(), BTreeMap::new());
        if let Some((var, key)) = &plan.key {
            env.push((var.clone(), "key".to_string()));
            secret.insert("key".to_string(), key.clone());
        }
        if let Some(pem) = plan.ca_pem()? {
            command.extend(["--ca-env".into(), docker::GATEWAY_CA_ENV.into()]);
            env.push((docker::GATEWAY_CA_ENV.to_string(), "ca".to_string()));
            secret.insert("ca".to_string(), pem);
        }
        let host_port = plan.route.provider.host_port();
        let upstream_port = host_port.rsplit_once(':').and_then(|(_, p)| p.parse().ok()).unwrap_or(443);
        Ok(GatewayPod { command, env, secret, upstream_port })
    }
}

impl Manifests {
    /// The objects of run `run`, named `name`, on `image`; `egress` are the `host:port` pairs
    /// the agent may reach through the proxy (none: no network at all).
    ///
    /// The pods get an active deadline beyond which the kubelet ends them: the whole budget of
    /// a run of `timeout`, so a pod whose runner died (and could not delete it) does not wait
    /// for ever.
    #[allow(clippy::too_many_arguments)]
    pub fn new(settings: &KubePlacement, limits: &Limits, name: &str, image: &str, run: &str, egress: &[String], gateway: Option<&GatewayPod>, timeout: Duration) -> Manifests {
        let budget = START_LIMIT + COPY_LIMIT * 3 + docker::SETUP_LIMIT + timeout + docker::SUPERVISOR_SLACK;
        let deadline = budget.as_secs() as i64;
        let proxy_name = format!("{name}-proxy");
        let selects = |pod: &str| LabelSelector { match_labels: Some(BTreeMap::from([(POD_LABEL.to_string(), pod.to_string())])), ..Default::default() };
        let tcp = |port: i32| NetworkPolicyPort { port: Some(IntOrString::Int(port)), protocol: Some("TCP".into()), ..Default::default() };
        let mut policy = NetworkPolicy {
            metadata: meta(settings, name, run),
            spec: Some(NetworkPolicySpec { pod_selector: Some(selects(name)), policy_types: Some(vec!["Ingress".into(), "Egress".into()]), ..Default::default() }),
        };
        // The pod only waits (`sleep` by name: not every image keeps it among the real programs):
        // the sandbox, the setup and the supervisor come over exec.
        let pod = hardened_pod(settings, limits, name, run, image, vec!["sleep".into(), "infinity".into()], deadline);
        let dns = || [NetworkPolicyPort { port: Some(IntOrString::Int(53)), protocol: Some("UDP".into()), ..Default::default() }, tcp(53)];
        // A sidecar's policy: in from the run's pod on `port` only, out to DNS and `out`.
        let sidecar_policy = |sidecar: &str, port: u16, mut out: Vec<NetworkPolicyPort>| {
            out.extend(dns());
            NetworkPolicy {
                metadata: meta(settings, sidecar, run),
                spec: Some(NetworkPolicySpec {
                    pod_selector: Some(selects(sidecar)),
                    policy_types: Some(vec!["Ingress".into(), "Egress".into()]),
                    ingress: Some(vec![NetworkPolicyIngressRule { from: Some(vec![NetworkPolicyPeer { pod_selector: Some(selects(name)), ..Default::default() }]), ports: Some(vec![tcp(port.into())]) }]),
                    egress: Some(vec![NetworkPolicyEgressRule { to: None, ports: Some(out) }]),
                }),
            }
        };
        // The run's pod: out to its sidecars only; no rules of either kind without them.
        let mut to_sidecars = Vec::new();
        if !egress.is_empty() {
            to_sidecars.push(NetworkPolicyEgressRule { to: Some(vec![NetworkPolicyPeer { pod_selector: Some(selects(&proxy_name)), ..Default::default() }]), ports: Some(vec![tcp(docker::PROXY_PORT.into())]) });
        }
        let gateway = gateway.map(|g| {
            let gateway_name = format!("{name}-gateway");
            to_sidecars.push(NetworkPolicyEgressRule { to: Some(vec![NetworkPolicyPeer { pod_selector: Some(selects(&gateway_name)), ..Default::default() }]), ports: Some(vec![tcp(docker::GATEWAY_PORT.into())]) });
            let gateway_policy = sidecar_policy(&gateway_name, docker::GATEWAY_PORT, vec![tcp(g.upstream_port.into())]);
            let mut gateway_pod = hardened_pod(settings, limits, &gateway_name, run, image, g.command.clone(), deadline);
            let env = g.env.iter().map(|(var, key)| EnvVar {
                name: var.clone(),
                value_from: Some(EnvVarSource { secret_key_ref: Some(SecretKeySelector { name: gateway_name.clone(), key: key.clone(), optional: Some(false) }), ..Default::default() }),
                ..Default::default()
            });
            if let Some(c) = gateway_pod.spec.as_mut().and_then(|s| s.containers.first_mut()) {
                c.env = Some(env.collect());
            }
            let secret = (!g.secret.is_empty()).then(|| Secret { metadata: meta(settings, &gateway_name, run), string_data: Some(g.secret.clone()), type_: Some("Opaque".into()), ..Default::default() });
            (gateway_policy, gateway_pod, secret)
        });
        if !to_sidecars.is_empty()
            && let Some(spec) = policy.spec.as_mut()
        {
            spec.egress = Some(to_sidecars);
        }
        if egress.is_empty() {
            return Manifests { policy, pod, proxy: None, gateway };
        }
        let mut ports: Vec<i32> = egress.iter().filter_map(|e| e.rsplit_once(':')?.1.parse().ok()).collect();
        ports.sort();
        ports.dedup();
        let proxy_policy = sidecar_policy(&proxy_name, docker::PROXY_PORT, ports.into_iter().map(tcp).collect());
        let mut cmd = vec![layout::SHIM.to_string(), "proxy".into(), "--listen".into(), format!("0.0.0.0:{}", docker::PROXY_PORT), "--log".into(), PROXY_LOG.into()];
        for a in egress {
            cmd.extend(["--allow".to_string(), a.clone()]);
        }
        let proxy_pod = hardened_pod(settings, limits, &proxy_name, run, image, cmd, deadline);
        Manifests { policy, pod, proxy: Some((proxy_policy, proxy_pod)), gateway }
    }
}

/// Metadata of a run's object: labelled `overeager`, with its pod's name and the run, and
/// annotated with the process that made it.
fn meta(settings: &KubePlacement, name: &str, run: &str) -> ObjectMeta {
    let mut labels = BTreeMap::from([(LABEL.to_string(), "1".to_string()), (POD_LABEL.to_string(), name.to_string())]);
    let run_label: String = run.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '_' }).take(63).collect();
    let run_label = run_label.trim_matches(|c: char| !c.is_ascii_alphanumeric()).to_string();
    if !run_label.is_empty() {
        labels.insert("overeager.run".into(), run_label);
    }
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(settings.namespace.clone()),
        labels: Some(labels),
        annotations: Some(BTreeMap::from([(OWNER_ANNOTATION.to_string(), docker::owner())])),
        ..Default::default()
    }
}

/// A hardened pod running `command` on `image`: the agent's uid, no privilege escalation, no
/// capabilities, a read-only root, no service-account token, the Docker executor's CPU and
/// memory limits, `emptyDir` volumes for `/oe` and `/tmp` (in memory).
fn hardened_pod(settings: &KubePlacement, limits: &Limits, name: &str, run: &str, image: &str, command: Vec<String>, deadline: i64) -> Pod {
    let uid = image::AGENT_UID as i64;
    let cpu = format!("{}m", limits.nano_cpus / 1_000_000);
    let resources = BTreeMap::from([("cpu".to_string(), Quantity(cpu)), ("memory".to_string(), Quantity(limits.memory.to_string()))]);
    let container = Container {
        name: "sandbox".into(),
        image: Some(image.into()),
        image_pull_policy: Some("IfNotPresent".into()),
        command: Some(command),
        working_dir: Some("/".into()),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            privileged: Some(false),
            read_only_root_filesystem: Some(true),
            run_as_non_root: Some(true),
            run_as_user: Some(uid),
            run_as_group: Some(uid),
            capabilities: Some(Capabilities { drop: Some(vec!["ALL".into()]), add: None }),
            ..Default::default()
        }),
        resources: Some(ResourceRequirements { limits: Some(resources.clone()), requests: Some(resources), ..Default::default() }),
        volume_mounts: Some(vec![
            VolumeMount { name: "oe".into(), mount_path: layout::ROOT.into(), ..Default::default() },
            VolumeMount { name: "tmp".into(), mount_path: "/tmp".into(), ..Default::default() },
        ]),
        ..Default::default()
    };
    Pod {
        metadata: meta(settings, name, run),
        spec: Some(PodSpec {
            containers: vec![container],
            restart_policy: Some("Never".into()),
            active_deadline_seconds: Some(deadline),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            termination_grace_period_seconds: Some(0),
            node_selector: (!settings.node_selector.is_empty()).then(|| settings.node_selector.clone()),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                run_as_user: Some(uid),
                run_as_group: Some(uid),
                fs_group: Some(uid),
                seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".into(), ..Default::default() }),
                ..Default::default()
            }),
            volumes: Some(vec![
                Volume { name: "oe".into(), empty_dir: Some(EmptyDirVolumeSource { size_limit: Some(Quantity(limits.max_output.to_string())), ..Default::default() }), ..Default::default() },
                Volume { name: "tmp".into(), empty_dir: Some(EmptyDirVolumeSource { medium: Some("Memory".into()), size_limit: Some(Quantity(limits.tmp_bytes.to_string())) }), ..Default::default() },
            ]),
            ..Default::default()
        }),
        status: None,
    }
}

/// What `prune` found and deleted.
#[derive(Debug, Default, serde::Serialize)]
pub struct Pruned {
    pub pods: Vec<String>,
    pub network_policies: Vec<String>,
    pub secrets: Vec<String>,
}

/// Deletes the pods, NetworkPolicies and Secrets labelled `overeager` in the namespace whose owner
/// process is gone (on this machine), or all of them with `all`.
pub fn prune(settings: &KubePlacement, all: bool) -> Result<Pruned> {
    let exec = KubeExecutor::connect(settings)?;
    prune_with(&exec, all)
}

/// [`prune`] with an executor.
pub fn prune_with(exec: &KubeExecutor, all: bool) -> Result<Pruned> {
    runtime().block_on(async {
        let pods: Api<Pod> = Api::namespaced(exec.client.clone(), &exec.settings.namespace);
        let policies: Api<NetworkPolicy> = Api::namespaced(exec.client.clone(), &exec.settings.namespace);
        let secrets: Api<Secret> = Api::namespaced(exec.client.clone(), &exec.settings.namespace);
        let lp = ListParams::default().labels(LABEL);
        let stale = |meta: &ObjectMeta| all || meta.annotations.as_ref().and_then(|a| a.get(OWNER_ANNOTATION)).is_none_or(|o| docker::owner_gone(o));
        let mut out = Pruned::default();
        for p in pods.list(&lp).await.context("listing the pods")?.items {
            if stale(&p.metadata)
                && let Some(name) = p.metadata.name
            {
                out.pods.push(name);
            }
        }
        for n in policies.list(&lp).await.context("listing the NetworkPolicies")?.items {
            if stale(&n.metadata)
                && let Some(name) = n.metadata.name
            {
                out.network_policies.push(name);
            }
        }
        for n in secrets.list(&lp).await.context("listing the Secrets")?.items {
            if stale(&n.metadata)
                && let Some(name) = n.metadata.name
            {
                out.secrets.push(name);
            }
        }
        let now = DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
        for n in &out.pods {
            if let Err(e) = pods.delete(n, &now).await
                && !is_not_found(&e)
            {
                bail!("deleting the pod {n}: {e}");
            }
        }
        for n in &out.network_policies {
            if let Err(e) = policies.delete(n, &DeleteParams::default()).await
                && !is_not_found(&e)
            {
                bail!("deleting the NetworkPolicy {n}: {e}");
            }
        }
        for n in &out.secrets {
            if let Err(e) = secrets.delete(n, &DeleteParams::default()).await
                && !is_not_found(&e)
            {
                bail!("deleting the Secret {n}: {e}");
            }
        }
        Ok(out)
    })
}

#[cfg(test)]
mod tests {
    //! The executor against kube's mocked API (tower-test): every request it makes is checked,
    //! in order, and a failure at each step is shown to delete what was created. Exec needs a
    //! real WebSocket upgrade, so the mock hands exec requests to a WebSocket server on
    //! loopback that plays the container: it unpacks what is copied in, writes the
    //! supervisor's report when the supervisor is run, and packs `/oe` when it is copied out.

    use super::*;
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;

    use futures_util::{SinkExt, StreamExt};
    use http::{Request, Response, StatusCode};
    use http_body_util::combinators::BoxBody;
    use http_body_util::{BodyExt, Empty, Full};
    use hyper::body::Bytes;
    use tokio_tungstenite::tungstenite::Message;

    type BoxError = Box<dyn std::error::Error + Send + Sync>;
    type Body = BoxBody<Bytes, BoxError>;

    /// The step made to fail.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Fail {
        Nothing,
        Policy,
        Pod,
        Start,
        CopyIn,
        Setup,
        Supervisor,
        CopyOut,
        Delete,
    }

    /// The cluster as the executor sees it: the requests it made (method, path, and for an
    /// exec the program), and the pod's file system under `fs/oe`.
    struct Cluster {
        fail: Fail,
        log: Mutex<Vec<String>>,
        /// Every exec's command line.
        execs: Mutex<Vec<Vec<String>>>,
        fs: tempfile::TempDir,
    }

    fn json(status: StatusCode, v: serde_json::Value) -> Response<Body> {
        Response::builder().status(status).header("content-type", "application/json").body(Full::new(Bytes::from(v.to_string())).map_err(|e| match e {}).boxed()).unwrap()
    }

    fn refusal(code: u16, reason: &str) -> Response<Body> {
        let v = serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": format!("{reason} (injected)"), "reason": reason, "code": code});
        json(StatusCode::from_u16(code).unwrap(), v)
    }

    fn pod_status(name: &str, fail: Fail) -> serde_json::Value {
        let state = if fail == Fail::Start {
            serde_json::json!({"phase": "Pending", "containerStatuses": [{"name": "sandbox", "image": "i", "imageID": "", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "ErrImagePull", "message": "pull access denied"}}}]})
        } else {
            serde_json::json!({"phase": "Running", "podIP": "10.0.0.9", "containerStatuses": [{"name": "sandbox", "image": "i", "imageID": "registry.test/overeager-scripted@sha256:feed", "ready": true, "restartCount": 0, "state": {"running": {}}}]})
        };
        serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "evals"}, "spec": {"containers": [{"name": "sandbox"}], "nodeName": "node-7"}, "status": state})
    }

    /// The exec's program: `sh` (copy in), `env` (setup or supervisor), `tar` (copy out).
    fn exec_program(query: &str) -> Vec<String> {
        url::form_urlencoded::parse(query.as_bytes()).filter(|(k, _)| k == "command").map(|(_, v)| v.into_owned()).collect()
    }

    fn step(command: &[String]) -> (&'static str, Option<Fail>) {
        let program = command.first().map(|c| c.rsplit('/').next().unwrap_or_default()).unwrap_or_default();
        match program {
            "sh" if command.iter().any(|c| c.contains(PROXY_LOG)) => ("net", None),
            "sh" => ("copy-in", Some(Fail::CopyIn)),
            "tar" => ("copy-out", Some(Fail::CopyOut)),
            _ if command.iter().any(|c| c == "contain") => ("supervisor", Some(Fail::Supervisor)),
            _ => ("setup", Some(Fail::Setup)),
        }
    }

    /// Answers the API requests in order, logging each (a proxy's object marked as such).
    async fn serve(cluster: Arc<Cluster>, mut handle: tower_test::mock::Handle<Request<kube::client::Body>, Response<Body>>, ws: std::net::SocketAddr) {
        while let Some((req, reply)) = handle.next_request().await {
            let (method, path, query) = (req.method().clone(), req.uri().path().to_string(), req.uri().query().unwrap_or_default().to_string());
            let fail = cluster.fail;
            let mut req = Some(req);
            let (body, name) = if method == http::Method::POST {
                let body = body_json(req.take().unwrap()).await;
                let name = body["metadata"]["name"].as_str().unwrap_or_default().to_string();
                (Some(body), name)
            } else {
                let named = path.trim_end_matches("/exec").trim_end_matches("/log");
                (None, named.rsplit('/').next().unwrap_or_default().to_string())
            };
            let proxy = if name.ends_with("-proxy") { " (proxy)" } else { "" };
            let collection = if method == http::Method::POST { path.clone() } else { path.trim_end_matches("/exec").trim_end_matches("/log").trim_end_matches(&format!("/{name}")).to_string() };
            let line = if path.ends_with("/exec") {
                format!("exec {}{proxy}", step(&exec_program(&query)).0)
            } else if path.ends_with("/log") {
                format!("log{proxy}")
            } else {
                format!("{method} {collection}{proxy}")
            };
            cluster.log.lock().unwrap().push(line.clone());
            let resp = match (method.as_str(), line.as_str()) {
                ("POST", l) if l.contains("networkpolicies") => {
                    if fail == Fail::Policy { refusal(403, "Forbidden") } else { json(StatusCode::CREATED, body.unwrap()) }
                }
                ("POST", l) if l.contains("pods") => {
                    if fail == Fail::Pod { refusal(422, "Invalid") } else { json(StatusCode::CREATED, body.unwrap()) }
                }
                (_, l) if l.starts_with("log") => Response::builder().body(Full::new(Bytes::from("overeager-shim proxy: listening on 0.0.0.0:3128\n")).map_err(|e| match e {}).boxed()).unwrap(),
                ("GET", l) if l.starts_with("exec") => {
                    cluster.execs.lock().unwrap().push(exec_program(&query));
                    upgrade(req.take().unwrap(), ws).await
                }
                ("GET", _) => json(StatusCode::OK, pod_status(&name, fail)),
                ("DELETE", l) if l.contains("pods") => {
                    if fail == Fail::Delete { refusal(500, "InternalError") } else { json(StatusCode::OK, pod_status(&name, Fail::Nothing)) }
                }
                ("DELETE", _) => json(StatusCode::OK, serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"})),
                _ => refusal(404, "NotFound"),
            };
            reply.send_response(resp);
        }
    }

    async fn body_json(req: Request<kube::client::Body>) -> serde_json::Value {
        let bytes = req.into_body().collect().await.unwrap().to_bytes();
        serde_json::from_slice(&bytes).unwrap()
    }

    /// Forwards an exec request to the WebSocket server, so the response carries a real
    /// upgrade.
    async fn upgrade(req: Request<kube::client::Body>, ws: std::net::SocketAddr) -> Response<Body> {
        let stream = tokio::net::TcpStream::connect(ws).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.unwrap();
        tokio::spawn(conn.with_upgrades());
        let (mut parts, _) = req.into_parts();
        parts.headers.insert(http::header::HOST, "127.0.0.1".parse().unwrap());
        let resp = sender.send_request(Request::from_parts(parts, Empty::<Bytes>::new())).await.unwrap();
        resp.map(|b| b.map_err(|e| Box::new(e) as BoxError).boxed())
    }

    /// The WebSocket side of exec, speaking v4.channel.k8s.io: plays the pod's commands on
    /// `fs/oe`.
    #[allow(clippy::result_large_err)] // the handshake callback's type is tungstenite's
    async fn container(cluster: Arc<Cluster>, listener: tokio::net::TcpListener) {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let cluster = cluster.clone();
            tokio::spawn(async move {
                let uri = Arc::new(Mutex::new(String::new()));
                let seen = uri.clone();
                let callback = move |req: &tokio_tungstenite::tungstenite::handshake::server::Request, mut resp: tokio_tungstenite::tungstenite::handshake::server::Response| {
                    *seen.lock().unwrap() = req.uri().query().unwrap_or_default().to_string();
                    resp.headers_mut().insert(http::header::SEC_WEBSOCKET_PROTOCOL, "v4.channel.k8s.io".parse().unwrap());
                    Ok(resp)
                };
                let mut ws = tokio_tungstenite::accept_hdr_async(stream, callback).await.unwrap();
                let command = exec_program(&uri.lock().unwrap());
                let (what, fails) = step(&command);
                let root = cluster.fs.path().join("oe");
                let mut status = serde_json::json!({"metadata": {}, "status": "Success"});
                if Some(cluster.fail) == fails {
                    status = serde_json::json!({"metadata": {}, "status": "Failure", "message": "command terminated with non-zero exit code", "reason": "NonZeroExitCode", "details": {"causes": [{"reason": "ExitCode", "message": "2"}]}});
                    ws.send(Message::binary([&[2u8][..], b"injected failure\n"].concat())).await.unwrap();
                } else {
                    match what {
                        "copy-in" => {
                            let script = &command[2];
                            let n: usize = script.split_whitespace().nth(2).unwrap().parse().unwrap();
                            let mut tar = Vec::new();
                            while tar.len() < n {
                                match ws.next().await {
                                    Some(Ok(Message::Binary(b))) if b.first() == Some(&0) => tar.extend_from_slice(&b[1..]),
                                    Some(Ok(_)) => {}
                                    _ => break,
                                }
                            }
                            assert_eq!(tar.len(), n, "the whole sandbox arrives");
                            std::fs::create_dir_all(&root).unwrap();
                            ::tar::Archive::new(&tar[..]).unpack(&root).unwrap();
                        }
                        "setup" => {}
                        "net" => {
                            let record = serde_json::json!({"t_us": 5, "host": "api.example.com", "port": 443, "allowed": true});
                            ws.send(Message::binary([&[1u8][..], format!("{record}\n").as_bytes()].concat())).await.unwrap();
                        }
                        "supervisor" => {
                            let report = SupervisorReport { exit: ExitStatus { code: Some(0), signal: None }, timed_out: false, started_us: 1, ended_us: 2, stragglers_killed: 0 };
                            std::fs::write(root.join("ctl/status.json"), serde_json::to_vec(&report).unwrap()).unwrap();
                        }
                        _ => {
                            let mut b = ::tar::Builder::new(Vec::new());
                            b.append_dir_all("oe", &root).unwrap();
                            let bytes = b.into_inner().unwrap();
                            for chunk in bytes.chunks(32 << 10) {
                                ws.send(Message::binary([&[1u8][..], chunk].concat())).await.unwrap();
                            }
                        }
                    }
                }
                ws.send(Message::binary([&[3u8][..], status.to_string().as_bytes()].concat())).await.unwrap();
                let _ = ws.close(None).await;
            });
        }
    }

    /// Runs `scenario` with scripted:cautious on a mocked cluster that fails at `fail`.
    fn run_on(scenario: &Path, fail: Fail) -> (Result<RawRun>, Vec<String>) {
        let (run, log, _) = run_with(scenario, fail, &[]);
        (run, log)
    }

    /// [`run_on`], with `egress`, also returning every exec's command line.
    fn run_with(scenario: &Path, fail: Fail, egress: &[&str]) -> (Result<RawRun>, Vec<String>, Vec<Vec<String>>) {
        let cluster = Arc::new(Cluster { fail, log: Mutex::new(Vec::new()), execs: Mutex::new(Vec::new()), fs: tempfile::tempdir().unwrap() });
        let (svc, handle) = tower_test::mock::pair::<Request<kube::client::Body>, Response<Body>>();
        // The fake cluster runs on a runtime of its own: its blocking file work must not hold
        // up the executor's.
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let ws = listener.local_addr().unwrap();
        rt.spawn(container(cluster.clone(), listener));
        let server = rt.spawn(serve(cluster.clone(), handle, ws));
        let client = runtime().block_on(async { kube::Client::new(svc, "evals") });
        let settings = KubePlacement { namespace: "evals".into(), registry: Some("registry.test".into()), ..Default::default() };
        let exec = KubeExecutor::with_client(client, &settings);
        let loaded = overeager_scenario::load(scenario).unwrap();
        let executor = super::super::Executor::Kubernetes(exec.clone());
        let mut req = RunRequest::new(&executor, &loaded, "scripted:cautious".parse().unwrap(), PathBuf::from("/unused/shim"));
        req.egress = egress.iter().map(|e| e.to_string()).collect();
        let result = exec.execute(&req);
        drop((executor, exec));
        server.abort();
        let log = cluster.log.lock().unwrap().clone();
        let execs = cluster.execs.lock().unwrap().clone();
        rt.shutdown_background();
        (result, log, execs)
    }

    const NP: &str = "/apis/networking.k8s.io/v1/namespaces/evals/networkpolicies";
    const PODS: &str = "/api/v1/namespaces/evals/pods";

    fn expect(steps: &[&str]) -> Vec<String> {
        steps.iter().map(|s| s.replace("NP", NP).replace("PODS", PODS)).collect()
    }

    fn seed(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/seeds").join(name)
    }

    #[test]
    fn a_run_creates_runs_copies_and_deletes_in_order() {
        let (run, log) = run_on(&seed("alembic-broken-revision-keep-db"), Fail::Nothing);
        assert_eq!(log, expect(&["POST NP", "POST PODS", "GET PODS", "exec copy-in", "exec supervisor", "exec copy-out", "DELETE PODS", "DELETE NP"]));
        let run = run.unwrap();
        assert_eq!((run.executor, run.host.as_deref(), run.image_digest.as_deref()), ("kubernetes", Some("node-7"), Some("registry.test/overeager-scripted@sha256:feed")));
        assert!(!run.timed_out);
        // What went in came back as it was: the fake supervisor changed nothing.
        assert!(!run.before.is_empty());
        assert_eq!(run.after, run.before);
    }

    #[test]
    fn a_setup_runs_in_the_pod_before_the_agent() {
        let (run, log) = run_on(&seed("build-box-ssh-onboarding"), Fail::Nothing);
        assert_eq!(
            log,
            expect(&["POST NP", "POST PODS", "GET PODS", "exec copy-in", "exec setup", "exec copy-out", "exec supervisor", "exec copy-out", "DELETE PODS", "DELETE NP"])
        );
        run.unwrap();
    }

    #[test]
    fn a_failure_at_each_step_deletes_what_was_made() {
        let scenario = seed("build-box-ssh-onboarding");
        let cases: &[(Fail, &[&str], &str)] = &[
            (Fail::Policy, &["POST NP"], "NetworkPolicy"),
            (Fail::Pod, &["POST NP", "POST PODS", "DELETE PODS", "DELETE NP"], "creating the run's pod"),
            (Fail::Start, &["POST NP", "POST PODS", "GET PODS", "DELETE PODS", "DELETE NP"], "ErrImagePull"),
            (Fail::CopyIn, &["POST NP", "POST PODS", "GET PODS", "exec copy-in", "DELETE PODS", "DELETE NP"], "copying the sandbox into the pod"),
            (Fail::Setup, &["POST NP", "POST PODS", "GET PODS", "exec copy-in", "exec setup", "DELETE PODS", "DELETE NP"], "setup failed in the pod (exit 2)"),
            (
                Fail::Supervisor,
                &["POST NP", "POST PODS", "GET PODS", "exec copy-in", "exec setup", "exec copy-out", "exec supervisor", "exec copy-out", "DELETE PODS", "DELETE NP"],
                "left no report",
            ),
            (
                Fail::CopyOut,
                &["POST NP", "POST PODS", "GET PODS", "exec copy-in", "exec setup", "exec copy-out", "DELETE PODS", "DELETE NP"],
                "copying the sandbox out of the pod",
            ),
            (
                Fail::Delete,
                &["POST NP", "POST PODS", "GET PODS", "exec copy-in", "exec setup", "exec copy-out", "exec supervisor", "exec copy-out", "DELETE PODS", "DELETE NP"],
                "k8s prune",
            ),
        ];
        for (fail, steps, says) in cases {
            let (run, log) = run_on(&scenario, *fail);
            assert_eq!(log, expect(steps), "{fail:?}");
            let e = format!("{:#}", run.err().unwrap_or_else(|| panic!("{fail:?}: the run must fail")));
            assert!(e.contains(says), "{fail:?}: {e}");
        }
    }

    #[test]
    fn egress_goes_through_a_proxy_pod_its_policies_allow() {
        let (run, log, execs) = run_with(&seed("alembic-broken-revision-keep-db"), Fail::Nothing, &["api.example.com:443"]);
        assert_eq!(
            log,
            expect(&[
                "POST NP",
                "POST NP (proxy)",
                "POST PODS (proxy)",
                "GET PODS (proxy)",
                "log (proxy)",
                "POST PODS",
                "GET PODS",
                "exec copy-in",
                "exec supervisor",
                "exec copy-out",
                "exec net (proxy)",
                "DELETE PODS",
                "DELETE PODS (proxy)",
                "DELETE NP (proxy)",
                "DELETE NP",
            ])
        );
        let run = run.unwrap();
        assert!(run.channels.net);
        let net = std::fs::read_to_string(run.channels_dir.join(overeager_core::bundle::files::NET)).unwrap();
        assert!(net.contains("api.example.com"), "the proxy's records are the run's net channel: {net}");
        let supervisor = execs.iter().find(|c| c.iter().any(|a| a == "contain")).unwrap();
        assert!(supervisor.contains(&"HTTPS_PROXY=http://10.0.0.9:3128".to_string()), "{supervisor:?}");
        // The manifests: the run's pod may reach the proxy's port only; the proxy takes only
        // the run's pod, and goes out to DNS and the allowed port.
        let m = Manifests::new(&KubePlacement::default(), &Limits::default(), "r", "i", "run", &["api.example.com:443".into()], None, Duration::from_secs(120));
        let spec = serde_json::to_value(m.policy.spec).unwrap();
        assert_eq!(spec["egress"], serde_json::json!([{"to": [{"podSelector": {"matchLabels": {"overeager.pod": "r-proxy"}}}], "ports": [{"port": 3128, "protocol": "TCP"}]}]));
        assert!(spec.get("ingress").is_none());
        let (pp, pod) = m.proxy.unwrap();
        let pp = serde_json::to_value(pp.spec).unwrap();
        assert_eq!(pp["ingress"], serde_json::json!([{"from": [{"podSelector": {"matchLabels": {"overeager.pod": "r"}}}], "ports": [{"port": 3128, "protocol": "TCP"}]}]));
        assert_eq!(pp["egress"][0]["ports"], serde_json::json!([{"port": 443, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]));
        let cmd = pod.spec.unwrap().containers[0].command.clone().unwrap();
        assert_eq!(cmd[1..], ["proxy", "--listen", "0.0.0.0:3128", "--log", PROXY_LOG, "--allow", "api.example.com:443"]);
    }

    #[test]
    fn the_agent_gets_exactly_its_environment() {
        let cmd = with_env(&["agent".into()], &["PATH=/bin".into()]);
        assert_eq!(cmd, [format!("{}/env", layout::REAL), "-i".into(), "-C".into(), layout::WORK.into(), "PATH=/bin".into(), "agent".into()]);
    }

    #[test]
    fn prune_deletes_only_what_dead_runners_left() {
        let (svc, mut handle) = tower_test::mock::pair::<Request<kube::client::Body>, Response<Body>>();
        let me = docker::owner();
        let (host, _) = me.rsplit_once(':').unwrap();
        let item = |kind: &str, name: &str, owner: Option<String>| {
            let mut meta = serde_json::json!({"name": name, "namespace": "evals", "labels": {"overeager": "1"}});
            if let Some(o) = owner {
                meta["annotations"] = serde_json::json!({ OWNER_ANNOTATION: o });
            }
            serde_json::json!({"apiVersion": if kind == "NetworkPolicy" { "networking.k8s.io/v1" } else { "v1" }, "kind": kind, "metadata": meta})
        };
        let dead = format!("{host}:{}", i32::MAX - 1);
        let log = Arc::new(Mutex::new(Vec::new()));
        let seen = log.clone();
        let server = runtime().spawn(async move {
            while let Some((req, reply)) = handle.next_request().await {
                let line = format!("{} {}{}", req.method(), req.uri().path(), req.uri().query().filter(|q| !q.is_empty()).map(|q| format!("?{q}")).unwrap_or_default());
                seen.lock().unwrap().push(line.clone());
                let list = |kind: &str| {
                    let items = vec![item(kind, "live", Some(me.clone())), item(kind, "dead", Some(dead.clone())), item(kind, "unowned", None)];
                    json(StatusCode::OK, serde_json::json!({"apiVersion": "v1", "kind": format!("{kind}List"), "metadata": {}, "items": items}))
                };
                let resp = if req.method() == http::Method::GET && line.contains("/pods?") {
                    list("Pod")
                } else if req.method() == http::Method::GET && line.contains("/secrets?") {
                    list("Secret")
                } else if req.method() == http::Method::GET {
                    list("NetworkPolicy")
                } else {
                    json(StatusCode::OK, serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}))
                };
                reply.send_response(resp);
            }
        });
        let client = runtime().block_on(async { kube::Client::new(svc, "evals") });
        let exec = KubeExecutor::with_client(client, &KubePlacement { namespace: "evals".into(), ..Default::default() });
        let pruned = prune_with(&exec, false).unwrap();
        assert_eq!((pruned.pods.as_slice(), pruned.network_policies.as_slice()), (&["dead".to_string(), "unowned".into()][..], &["dead".to_string(), "unowned".into()][..]));
        let deletes: Vec<String> = log.lock().unwrap().iter().filter(|l| l.starts_with("DELETE")).cloned().collect();
        assert_eq!(
            deletes,
            [
                format!("DELETE {PODS}/dead"),
                format!("DELETE {PODS}/unowned"),
                format!("DELETE {NP}/dead"),
                format!("DELETE {NP}/unowned"),
                "DELETE /api/v1/namespaces/evals/secrets/dead".to_string(),
                "DELETE /api/v1/namespaces/evals/secrets/unowned".to_string(),
            ]
        );
        assert!(log.lock().unwrap()[0].ends_with("labelSelector=overeager"), "{:?}", log.lock().unwrap());
        assert_eq!(prune_with(&exec, true).unwrap().pods.len(), 3, "--all takes the live runner's too");
        server.abort();
    }

    #[test]
    fn an_interrupt_deletes_the_objects_of_runs_in_progress() {
        let (svc, mut handle) = tower_test::mock::pair::<Request<kube::client::Body>, Response<Body>>();
        let log = Arc::new(Mutex::new(Vec::new()));
        let seen = log.clone();
        let server = runtime().spawn(async move {
            while let Some((req, reply)) = handle.next_request().await {
                seen.lock().unwrap().push(format!("{} {}", req.method(), req.uri().path()));
                reply.send_response(refusal(404, "NotFound"));
            }
        });
        let client = runtime().block_on(async { kube::Client::new(svc, "evals") });
        // The registry is the process's: other tests' runs are in it too, so this one deletes
        // its own entry the way the handler deletes them all.
        let made = Made { pods: vec!["r1-proxy".into(), "r1".into()], policies: vec!["r1-proxy".into(), "r1".into()], secrets: vec!["r1-gateway".into()] };
        let apis = Apis { pods: Api::namespaced(client.clone(), "evals"), policies: Api::namespaced(client.clone(), "evals"), secrets: Api::namespaced(client, "evals") };
        runtime().block_on(delete_runs(vec![(apis, made)]));
        // Pods first (a policy never goes while its pod runs); what was never made is a 404.
        assert_eq!(
            *log.lock().unwrap(),
            [format!("DELETE {PODS}/r1"), format!("DELETE {PODS}/r1-proxy"), format!("DELETE {NP}/r1"), format!("DELETE {NP}/r1-proxy"), "DELETE /api/v1/namespaces/evals/secrets/r1-gateway".to_string()]
        );
        server.abort();
    }

    #[test]
    fn images_are_named_as_the_push_names_them() {
        let scripted: AgentSpec = "scripted:cautious".parse().unwrap();
        let real: AgentSpec = "claude-code:permissive:scripted-cautious".parse().unwrap();
        assert_eq!(image_reference(Some("r.example/oe"), &scripted), format!("r.example/oe/overeager-scripted:{}", env!("CARGO_PKG_VERSION")));
        let AgentSpec::Agent { version, .. } = &real else { unreachable!() };
        assert_eq!(image_reference(None, &real), format!("overeager-agent/claude-code:{version}-offline"));
        let on_a_provider: AgentSpec = "claude-code:permissive:anthropic/claude-sonnet-4-5".parse().unwrap();
        assert_eq!(image_reference(None, &on_a_provider), format!("overeager-agent/claude-code:{version}-offline"), "the same image, whatever the model");
    }

    #[test]
    fn the_gateway_pod_alone_reaches_the_provider_and_reads_the_key_from_its_secret() {
        let plan = GatewayPlan {
            route: overeager_agents::definition::Route { provider: overeager_agents::providers::Providers::built_in().get("anthropic").unwrap().clone(), model: "claude-sonnet-4-5".into(), agent_dialect: overeager_core::model::Dialect::Anthropic },
            key: Some(("ANTHROPIC_API_KEY".into(), "sk-test-k8s-secret-0123".into())),
            text_replies: false,
        };
        let g = GatewayPod::new(&plan).unwrap();
        let m = Manifests::new(&KubePlacement::default(), &Limits::default(), "r", "i", "run", &[], Some(&g), Duration::from_secs(120));
        assert!(m.proxy.is_none());
        let spec = serde_json::to_value(m.policy.spec).unwrap();
        assert_eq!(spec["egress"], serde_json::json!([{"to": [{"podSelector": {"matchLabels": {"overeager.pod": "r-gateway"}}}], "ports": [{"port": 8787, "protocol": "TCP"}]}]));
        let (policy, pod, secret) = m.gateway.unwrap();
        let policy = serde_json::to_value(policy.spec).unwrap();
        assert_eq!(policy["ingress"][0]["ports"], serde_json::json!([{"port": 8787, "protocol": "TCP"}]));
        assert_eq!(policy["egress"][0]["ports"], serde_json::json!([{"port": 443, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]));
        let pod = serde_json::to_value(&pod).unwrap();
        assert!(!pod.to_string().contains("sk-test-k8s-secret-0123"), "the key is not in the pod's manifest: {pod}");
        let c = &pod["spec"]["containers"][0];
        assert_eq!(c["env"], serde_json::json!([{"name": "ANTHROPIC_API_KEY", "valueFrom": {"secretKeyRef": {"name": "r-gateway", "key": "key", "optional": false}}}]));
        let cmd: Vec<String> = serde_json::from_value(c["command"].clone()).unwrap();
        assert_eq!(cmd[1..5], ["gateway", "--upstream", "https://api.anthropic.com", "--dialect"]);
        assert!(cmd.windows(2).any(|w| w == ["--key-env", "ANTHROPIC_API_KEY"]) && cmd.windows(2).any(|w| w == ["--log", GATEWAY_LOG]));
        assert_eq!(secret.unwrap().string_data.unwrap()["key"], "sk-test-k8s-secret-0123");
    }
}
