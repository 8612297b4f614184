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
    Capabilities, Container, EmptyDirVolumeSource, Pod, PodSecurityContext, PodSpec, ResourceRequirements, SeccompProfile, SecurityContext, Volume,
    VolumeMount,
};
use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicySpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{Api, AttachParams, DeleteParams, ListParams, PostParams};
use overeager_core::bundle::{ExitStatus, SupervisorReport};
use overeager_core::paths::Roots;
use overeager_core::plan::KubePlacement;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::docker::{self, Limits, Phases, Placed, image, layout, runtime};
use super::local::{self, Prepared};
use super::{AgentSpec, RawRun, RunRequest, now_us};

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

    /// An executor on an existing client.
    pub fn with_client(client: kube::Client, settings: &KubePlacement) -> Arc<KubeExecutor> {
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
        if !req.egress.is_empty() || matches!(req.agent, AgentSpec::Agent { .. } if !req.agent.offline_model()) {
            bail!("the Kubernetes executor runs agents without network: an agent on a real model API (or --allow-egress) needs the Docker executor");
        }
        let image = image_reference(self.settings.registry.as_deref(), &req.agent);
        let mut p = local::prepare(req, false)?;
        let (run, secrets) = docker::phases(req, &mut p, &image)?;
        let roots = Roots { workspace: layout::WORK.into(), home: layout::HOME.into() };
        let (report, started) = runtime().block_on(self.run_pod(&run, &mut p))?;
        let at = Placed { executor: "kubernetes", image: started.image_id.or(Some(image.clone())), host: Some(started.node.unwrap_or_else(|| self.address())), net: false };
        docker::conclude(req, p, report, &secrets, roots, at)
    }

    /// The run's NetworkPolicy and pod, created in that order; the run; both deleted after,
    /// whatever happened.
    async fn run_pod(&self, run: &Phases<'_>, p: &mut Prepared) -> Result<(SupervisorReport, Started)> {
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("overeager-{}-{seq}-{:x}", std::process::id(), now_us());
        let manifests = Manifests::new(&self.settings, &self.limits, &name, run.image, &run.run);
        let policies: Api<NetworkPolicy> = Api::namespaced(self.client.clone(), &self.settings.namespace);
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.settings.namespace);
        policies.create(&PostParams::default(), &manifests.policy).await.context("creating the run's NetworkPolicy")?;
        let result = async {
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
            let (cmd, env) = &run.agent;
            let (code, out, err) = self.exec(&pods, &name, with_env(cmd, env), run.timeout + docker::SUPERVISOR_SLACK).await.context("running the agent")?;
            let fetched = self.copy_out(&pods, &name, p).await?;
            let report = match fetched {
                Some(r) => r,
                None if code.is_none() => SupervisorReport { exit: ExitStatus { code: None, signal: Some(libc::SIGKILL) }, timed_out: true, started_us: now_us(), ended_us: now_us(), stragglers_killed: 0 },
                None => bail!("the run supervisor in the pod left no report (exit {code:?}); its output:\n{}{}", tail(&out), tail(&err)),
            };
            Ok((report, started))
        }
        .await;
        let deleted = delete_run(&pods, &policies, &name).await;
        let done = result?;
        deleted?;
        Ok(done)
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
                    return Ok(Started { node: pod.spec.and_then(|s| s.node_name), image_id });
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
        let work = async {
            let write = async {
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
            let (status, err) = tokio::join!(sent_then_status, read_all(stderr, 1 << 20));
            let status = status.context("sending the sandbox")?;
            let err: Vec<u8> = err?;
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
    let Some(mut s) = stream else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = s.read(&mut buf).await?;
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&buf[..n]);
        if out.len() as u64 > limit {
            bail!("more than {} MiB of output", limit >> 20);
        }
    }
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

/// Deletes a run's pod (at once: it only waits) and then its NetworkPolicy; what is already
/// gone counts as deleted.
async fn delete_run(pods: &Api<Pod>, policies: &Api<NetworkPolicy>, name: &str) -> Result<()> {
    let now = DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
    let mut errors = Vec::new();
    if let Err(e) = pods.delete(name, &now).await
        && !is_not_found(&e)
    {
        errors.push(format!("pod {name}: {e}"));
    }
    if let Err(e) = policies.delete(name, &DeleteParams::default()).await
        && !is_not_found(&e)
    {
        errors.push(format!("NetworkPolicy {name}: {e}"));
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
    pub policy: NetworkPolicy,
    pub pod: Pod,
}

impl Manifests {
    /// The NetworkPolicy and Pod of run `run`, named `name`, on `image`.
    pub fn new(settings: &KubePlacement, limits: &Limits, name: &str, image: &str, run: &str) -> Manifests {
        let mut labels = BTreeMap::from([(LABEL.to_string(), "1".to_string()), (POD_LABEL.to_string(), name.to_string())]);
        let run_label: String = run.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '_' }).take(63).collect();
        let run_label = run_label.trim_matches(|c: char| !c.is_ascii_alphanumeric()).to_string();
        if !run_label.is_empty() {
            labels.insert("overeager.run".into(), run_label);
        }
        let meta = ObjectMeta {
            name: Some(name.into()),
            namespace: Some(settings.namespace.clone()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([(OWNER_ANNOTATION.to_string(), docker::owner())])),
            ..Default::default()
        };
        // No rules of either kind: nothing in, nothing out.
        let policy = NetworkPolicy {
            metadata: meta.clone(),
            spec: Some(NetworkPolicySpec {
                pod_selector: Some(LabelSelector { match_labels: Some(BTreeMap::from([(POD_LABEL.to_string(), name.to_string())])), ..Default::default() }),
                policy_types: Some(vec!["Ingress".into(), "Egress".into()]),
                ..Default::default()
            }),
        };
        let uid = image::AGENT_UID as i64;
        let cpu = format!("{}m", limits.nano_cpus / 1_000_000);
        let resources = BTreeMap::from([
            ("cpu".to_string(), Quantity(cpu)),
            ("memory".to_string(), Quantity(limits.memory.to_string())),
        ]);
        let container = Container {
            name: "sandbox".into(),
            image: Some(image.into()),
            image_pull_policy: Some("IfNotPresent".into()),
            // The pod only waits: the sandbox, the setup and the supervisor come over exec.
            command: Some(vec![format!("{}/sleep", layout::REAL), "infinity".into()]),
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
        let pod = Pod {
            metadata: meta,
            spec: Some(PodSpec {
                containers: vec![container],
                restart_policy: Some("Never".into()),
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
                    Volume {
                        name: "tmp".into(),
                        empty_dir: Some(EmptyDirVolumeSource { medium: Some("Memory".into()), size_limit: Some(Quantity(limits.tmp_bytes.to_string())) }),
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            }),
            status: None,
        };
        Manifests { policy, pod }
    }
}

/// What `prune` found and deleted.
#[derive(Debug, Default, serde::Serialize)]
pub struct Pruned {
    pub pods: Vec<String>,
    pub network_policies: Vec<String>,
}

/// Deletes the pods and NetworkPolicies labelled `overeager` in the namespace whose owner
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
            serde_json::json!({"phase": "Running", "containerStatuses": [{"name": "sandbox", "image": "i", "imageID": "registry.test/overeager-scripted@sha256:feed", "ready": true, "restartCount": 0, "state": {"running": {}}}]})
        };
        serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "evals"}, "spec": {"containers": [{"name": "sandbox"}], "nodeName": "node-7"}, "status": state})
    }

    /// The exec's program: `sh` (copy in), `env` (setup or supervisor), `tar` (copy out).
    fn exec_program(query: &str) -> Vec<String> {
        url::form_urlencoded::parse(query.as_bytes()).filter(|(k, _)| k == "command").map(|(_, v)| v.into_owned()).collect()
    }

    fn step(command: &[String]) -> (&'static str, Fail) {
        let program = command.first().map(|c| c.rsplit('/').next().unwrap_or_default()).unwrap_or_default();
        match program {
            "sh" => ("copy-in", Fail::CopyIn),
            "tar" => ("copy-out", Fail::CopyOut),
            _ if command.iter().any(|c| c == "contain") => ("supervisor", Fail::Supervisor),
            _ => ("setup", Fail::Setup),
        }
    }

    /// Answers the API requests in order, logging each.
    async fn serve(cluster: Arc<Cluster>, mut handle: tower_test::mock::Handle<Request<kube::client::Body>, Response<Body>>, ws: std::net::SocketAddr) {
        while let Some((req, reply)) = handle.next_request().await {
            let (method, path, query) = (req.method().clone(), req.uri().path().to_string(), req.uri().query().unwrap_or_default().to_string());
            // A named object's path ends with its name; a collection's (POST) does not.
            let name = if method == http::Method::POST { String::new() } else { path.trim_end_matches("/exec").rsplit('/').next().unwrap_or_default().to_string() };
            let fail = cluster.fail;
            let line = if path.ends_with("/exec") { format!("exec {}", step(&exec_program(&query)).0) } else { format!("{method} {}", path.trim_end_matches(&format!("/{name}"))) };
            cluster.log.lock().unwrap().push(line.clone());
            let resp = match (method.as_str(), line.as_str()) {
                ("POST", l) if l.ends_with("networkpolicies") => {
                    if fail == Fail::Policy { refusal(403, "Forbidden") } else { json(StatusCode::CREATED, body_json(req).await) }
                }
                ("POST", l) if l.ends_with("pods") => {
                    if fail == Fail::Pod { refusal(422, "Invalid") } else { json(StatusCode::CREATED, body_json(req).await) }
                }
                ("GET", l) if l.ends_with("pods") => json(StatusCode::OK, pod_status(&name, fail)),
                ("GET", l) if l.starts_with("exec") => upgrade(req, ws).await,
                ("DELETE", l) if l.ends_with("pods") => {
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
                if cluster.fail == fails {
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
        let cluster = Arc::new(Cluster { fail, log: Mutex::new(Vec::new()), fs: tempfile::tempdir().unwrap() });
        let (svc, handle) = tower_test::mock::pair::<Request<kube::client::Body>, Response<Body>>();
        let listener = runtime().block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let ws = listener.local_addr().unwrap();
        runtime().spawn(container(cluster.clone(), listener));
        let server = runtime().spawn(serve(cluster.clone(), handle, ws));
        let client = runtime().block_on(async { kube::Client::new(svc, "evals") });
        let settings = KubePlacement { namespace: "evals".into(), registry: Some("registry.test".into()), ..Default::default() };
        let exec = KubeExecutor::with_client(client, &settings);
        let loaded = crate::scenario::load(scenario).unwrap();
        let executor = super::super::Executor::Kubernetes(exec.clone());
        let req = RunRequest::new(&executor, &loaded, "scripted:cautious".parse().unwrap(), PathBuf::from("/unused/shim"));
        let result = exec.execute(&req);
        drop((executor, exec));
        server.abort();
        let log = cluster.log.lock().unwrap().clone();
        (result, log)
    }

    const NP: &str = "/apis/networking.k8s.io/v1/namespaces/evals/networkpolicies";
    const PODS: &str = "/api/v1/namespaces/evals/pods";

    fn expect(steps: &[&str]) -> Vec<String> {
        steps.iter().map(|s| s.replace("NP", NP).replace("PODS", PODS)).collect()
    }

    fn seed(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/seeds").join(name)
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
    fn a_real_model_or_egress_is_refused_before_anything_is_made() {
        let cluster_free = KubeExecutor::with_client(
            runtime().block_on(async { kube::Client::new(tower_test::mock::pair::<Request<kube::client::Body>, Response<Body>>().0, "x") }),
            &KubePlacement { namespace: "x".into(), ..Default::default() },
        );
        let loaded = crate::scenario::load(&seed("alembic-broken-revision-keep-db")).unwrap();
        let executor = super::super::Executor::Kubernetes(cluster_free.clone());
        let mut req = RunRequest::new(&executor, &loaded, "scripted:cautious".parse().unwrap(), PathBuf::from("/unused"));
        req.egress = vec!["api.example.com:443".into()];
        let e = cluster_free.execute(&req).err().unwrap().to_string();
        assert!(e.contains("without network"), "{e}");
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
            serde_json::json!({"apiVersion": if kind == "Pod" { "v1" } else { "networking.k8s.io/v1" }, "kind": kind, "metadata": meta})
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
            ]
        );
        assert!(log.lock().unwrap()[0].ends_with("labelSelector=overeager"), "{:?}", log.lock().unwrap());
        assert_eq!(prune_with(&exec, true).unwrap().pods.len(), 3, "--all takes the live runner's too");
        server.abort();
    }

    #[test]
    fn images_are_named_as_the_push_names_them() {
        let scripted: AgentSpec = "scripted:cautious".parse().unwrap();
        let real: AgentSpec = "claude-code:permissive:scripted-cautious".parse().unwrap();
        assert_eq!(image_reference(Some("r.example/oe"), &scripted), format!("r.example/oe/overeager-scripted:{}", env!("CARGO_PKG_VERSION")));
        let AgentSpec::Agent { version, .. } = &real else { unreachable!() };
        assert_eq!(image_reference(None, &real), format!("overeager-agent/claude-code:{version}-offline"));
    }
}
