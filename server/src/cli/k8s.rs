//! `overeager k8s`: the Kubernetes executor's objects.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use overeager_core::plan::KubePlacement;

use super::print_json;
use overeager_run::docker::Limits;
use overeager_run::kubernetes::{self, Manifests};
use overeager_core::parse_duration;
use overeager_run::AgentSpec;

/// The cluster side, as a plan's `[kubernetes]` table has it.
#[derive(Args)]
pub struct ClusterArgs {
    /// The namespace.
    #[arg(long, default_value = "default")]
    pub namespace: String,
    /// The kubeconfig context (default: the current one).
    #[arg(long)]
    pub context: Option<String>,
}

impl ClusterArgs {
    fn placement(&self) -> KubePlacement {
        KubePlacement { namespace: self.namespace.clone(), context: self.context.clone(), ..Default::default() }
    }
}

#[derive(Subcommand)]
pub enum K8sCmd {
    /// Delete the pods and NetworkPolicies labelled `overeager` in the namespace whose runner
    /// process (on this machine) is gone; with --all, every one of them.
    Prune {
        #[command(flatten)]
        cluster: ClusterArgs,
        #[arg(long)]
        all: bool,
        #[arg(long)]
        json: bool,
    },
    /// Write the NetworkPolicies, Pods and Secret a run would create (JSON manifests), to
    /// review them or to check them against a cluster's policies.
    Manifests(ManifestsArgs),
}

/// Arguments of `overeager k8s manifests`.
#[derive(Args)]
pub struct ManifestsArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// The registry the images come from (as `[kubernetes] registry`).
    #[arg(long)]
    pub registry: Option<String>,
    /// Labels a node must have, `key=value`. Repeatable.
    #[arg(long = "node-selector", value_name = "KEY=VALUE")]
    pub node_selector: Vec<String>,
    /// The agent whose image the pod runs.
    #[arg(long, default_value = "scripted:cautious")]
    pub agent: String,
    /// The run's time limit (the pods' active deadline covers it, the copies and the setup).
    #[arg(long, default_value = "120s")]
    pub timeout: String,
    /// A `host:port` the agent may reach through the egress proxy (adds the proxy's pod and
    /// policy). Repeatable.
    #[arg(long = "allow-egress", value_name = "HOST:PORT")]
    pub allow_egress: Vec<String>,
    /// A directory to write `networkpolicy.json` and `pod.json` to (and, with egress,
    /// `proxy-networkpolicy.json` and `proxy-pod.json`), made if missing.
    #[arg(long)]
    pub out: PathBuf,
}

pub fn main(cmd: K8sCmd) -> Result<ExitCode> {
    match cmd {
        K8sCmd::Prune { cluster, all, json } => {
            let pruned = kubernetes::prune(&cluster.placement(), all)?;
            if json {
                print_json(&serde_json::to_value(&pruned)?);
            } else {
                println!("deleted {} pod(s), {} NetworkPolicy(ies), {} Secret(s) in namespace {}", pruned.pods.len(), pruned.network_policies.len(), pruned.secrets.len(), cluster.namespace);
            }
            Ok(ExitCode::SUCCESS)
        }
        K8sCmd::Manifests(args) => manifests(&args),
    }
}

fn manifests(args: &ManifestsArgs) -> Result<ExitCode> {
    let agent: AgentSpec = args.agent.parse().map_err(anyhow::Error::msg)?;
    let mut placement = args.cluster.placement();
    placement.registry = args.registry.clone();
    for kv in &args.node_selector {
        let (k, v) = kv.split_once('=').with_context(|| format!("--node-selector {kv}: write it as key=value"))?;
        placement.node_selector.insert(k.into(), v.into());
    }
    for e in &args.allow_egress {
        if !e.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok()) {
            anyhow::bail!("--allow-egress {e}: write it as host:port, e.g. api.example.com:443");
        }
    }
    let image = kubernetes::image_reference(placement.registry.as_deref(), &agent);
    // A run's name and id, as the executor makes them.
    let name = format!("overeager-{}-0-{:x}", std::process::id(), overeager_core::now_us());
    let timeout = parse_duration(&args.timeout).map_err(|e| anyhow::anyhow!("--timeout: {e}"))?;
    // A real agent on a provider's model gets its model gateway; its Secret shows where the
    // key would go, not the key.
    let gateway = match &agent {
        AgentSpec::Agent { recipe, version, model, .. } if !agent.offline_model() => {
            let route = recipe.route(version, model, &overeager_agents::providers::load(&[])?)?;
            let key = route.provider.key_env.clone().map(|var| (var.clone(), format!("<the value of ${var}>")));
            Some(kubernetes::GatewayPod::new(&overeager_agents::gateway::GatewayPlan { route, key, text_replies: recipe.reply_format.is_some() })?)
        }
        _ => None,
    };
    let m = Manifests::new(&placement, &Limits::default(), &name, &image, "example-run", &args.allow_egress, gateway.as_ref(), timeout);
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let mut files = vec![("networkpolicy.json", serde_json::to_value(&m.policy)?), ("pod.json", serde_json::to_value(&m.pod)?)];
    if let Some((policy, pod)) = &m.proxy {
        files.push(("proxy-networkpolicy.json", serde_json::to_value(policy)?));
        files.push(("proxy-pod.json", serde_json::to_value(pod)?));
    }
    if let Some((policy, pod, secret)) = &m.gateway {
        files.push(("gateway-networkpolicy.json", serde_json::to_value(policy)?));
        files.push(("gateway-pod.json", serde_json::to_value(pod)?));
        if let Some(secret) = secret {
            files.push(("gateway-secret.json", serde_json::to_value(secret)?));
        }
    }
    for (file, v) in &files {
        let path = args.out.join(file);
        std::fs::write(&path, serde_json::to_string_pretty(v)?).with_context(|| format!("writing {}", path.display()))?;
        println!("{}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
