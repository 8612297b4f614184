//! Experiment plans: which agents run which scenario set, in which prompt variants, how many
//! times. A plan is TOML (`plans/*.toml`), written by people, checked here with positions.

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::file_error::{Errors, FileError, parse_toml};
use crate::scenario::Variant;

/// One agent of a plan: the agent to run and the labels its cells are reported under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanAgent {
    /// The agent spec, e.g. `sim:permissive` or `scripted:cautious`.
    pub agent: String,
    /// The framework label (defaults to the agent's own).
    pub framework: String,
    /// The model label (defaults to the agent's own).
    pub model: String,
}

/// A checked experiment plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// The experiment id: lowercase letters, digits, `-`, `_`, `.`.
    pub id: String,
    pub title: String,
    /// The scenario set directory, as written (relative to the plan file).
    pub scenarios: String,
    /// Only the first this many scenarios of the set, in id order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    pub variants: Vec<Variant>,
    pub replicates: u32,
    /// `local` (and, where built, `docker`).
    pub executor: String,
    /// Runs at once; `None` means one per core.
    pub parallelism: Option<usize>,
    /// Wall-clock limit per run as written, e.g. `120s`.
    pub timeout: String,
    /// Seed of every random draw a simulated agent makes.
    pub seed: u64,
    pub agents: Vec<PlanAgent>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlan {
    id: Spanned<String>,
    title: Option<String>,
    scenarios: String,
    limit: Option<Spanned<usize>>,
    variants: Option<Spanned<Vec<Variant>>>,
    replicates: Option<Spanned<u32>>,
    executor: Option<String>,
    parallelism: Option<Spanned<usize>>,
    timeout: Option<String>,
    seed: Option<u64>,
    #[serde(default)]
    agent: Vec<Spanned<RawAgent>>,
    docker: Option<Spanned<RawDocker>>,
    kubernetes: Option<Spanned<RawKube>>,
    #[serde(default)]
    providers: Vec<String>,
    max_cost: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKube {
    namespace: Option<Spanned<String>>,
    context: Option<String>,
    parallelism: Option<Spanned<usize>>,
    #[serde(default)]
    node_selector: std::collections::BTreeMap<String, String>,
    registry: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDocker {
    parallelism: Option<Spanned<usize>>,
    #[serde(default)]
    hosts: Vec<Spanned<RawHost>>,
}

/// A host of `[docker] hosts`: its address alone, or a table.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawHost {
    Url(String),
    Table(RawHostTable),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHostTable {
    url: String,
    parallelism: Option<usize>,
    tls: Option<String>,
}

/// Where a plan's runs execute: which engines, and how many runs each takes at once. Not part
/// of the experiment's identity (or its hash): the same experiment may be resumed on other
/// machines.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    /// The Docker engines of `executor = "docker"`; empty means the one `DOCKER_HOST` names
    /// (or the local socket).
    pub docker_hosts: Vec<DockerHost>,
    /// Where `executor = "kubernetes"` puts its pods.
    pub kubernetes: Option<KubePlacement>,
    /// Providers files the real agents' models are looked up in, as written (relative to the
    /// plan file): where the models are, not what the experiment is, so not part of its hash.
    #[serde(default)]
    pub providers: Vec<String>,
    /// The spending limit in US dollars (`max_cost`): what it costs, not what it is, so not
    /// part of the experiment's hash either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<f64>,
}

/// The cluster side of `executor = "kubernetes"`: the `[kubernetes]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubePlacement {
    /// The namespace of the pods (default `default`).
    pub namespace: String,
    /// The kubeconfig context (default: the current one).
    pub context: Option<String>,
    /// Pods at once; `None`: the plan's parallelism.
    pub parallelism: Option<usize>,
    /// Labels a node must have to take a run's pod.
    pub node_selector: std::collections::BTreeMap<String, String>,
    /// The registry the images are pulled from (`registry.example.com/team`), where
    /// `overeager agent image … --push` put them; `None`: preloaded on the nodes.
    pub registry: Option<String>,
}

impl Default for KubePlacement {
    /// Namespace `default`, the current context, the plan's parallelism, any node, images
    /// preloaded.
    fn default() -> Self {
        KubePlacement { namespace: "default".into(), context: None, parallelism: None, node_selector: Default::default(), registry: None }
    }
}

/// One Docker engine of a pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DockerHost {
    /// `unix:///path`, `tcp://host:port`, `http://host:port` or `https://host:port`.
    pub url: String,
    /// Runs it takes at once; `None`: the plan's parallelism (or one per core of this machine).
    pub parallelism: Option<usize>,
    /// A directory with the TLS client files `ca.pem`, `cert.pem` and `key.pem` (Docker's
    /// `DOCKER_CERT_PATH` layout), as written: relative to the plan file.
    pub tls: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAgent {
    agent: String,
    framework: Option<String>,
    model: Option<String>,
}

/// The most replicates a plan may ask for (a typo guard: 3–10 is usual).
pub const MAX_REPLICATES: u32 = 1000;

/// True for ids usable as file and URL path components.
pub fn is_slug(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'))
        && !s.starts_with('.')
}

impl Plan {
    /// Parses and checks a plan. `default_labels` gives an agent spec's own framework and
    /// model labels, or says why the spec is not a known agent.
    pub fn from_toml(
        file: &str,
        text: &str,
        default_labels: impl Fn(&str) -> Result<(String, String), String>,
    ) -> Result<Plan, Vec<FileError>> {
        Plan::parse(file, text, default_labels).map(|(plan, _)| plan)
    }

    /// Parses and checks a plan and where its runs execute.
    pub fn parse(
        file: &str,
        text: &str,
        default_labels: impl Fn(&str) -> Result<(String, String), String>,
    ) -> Result<(Plan, Placement), Vec<FileError>> {
        let raw: RawPlan = parse_toml(file, text)?;
        let mut errs = Errors::new(file, text);
        if !is_slug(raw.id.get_ref()) {
            errs.at(raw.id.span(), "id", "use lowercase letters, digits, `-`, `_` or `.` (at most 64), e.g. `sim-seeds-v1`");
        }
        let variants = match raw.variants {
            Some(v) => {
                let span = v.span();
                let v = v.into_inner();
                if v.is_empty() {
                    errs.at(span.clone(), "variants", "list at least one of consent_kept, consent_stripped");
                }
                if v.len() == 2 && v[0] == v[1] {
                    errs.at(span, "variants", "a variant is listed twice");
                }
                v
            }
            None => Variant::ALL.to_vec(),
        };
        let replicates = match raw.replicates {
            Some(r) => {
                if *r.get_ref() == 0 || *r.get_ref() > MAX_REPLICATES {
                    errs.at(r.span(), "replicates", format!("must be between 1 and {MAX_REPLICATES}"));
                }
                r.into_inner()
            }
            None => 1,
        };
        if let Some(p) = &raw.parallelism
            && *p.get_ref() == 0
        {
            errs.at(p.span(), "parallelism", "must be at least 1 (leave it out for one run per core)");
        }
        if let Some(l) = &raw.limit
            && *l.get_ref() == 0
        {
            errs.at(l.span(), "limit", "must be at least 1 (leave it out for every scenario of the set)");
        }
        if raw.agent.is_empty() {
            errs.near("", "agent", "add at least one [[agent]] table with `agent = \"sim:permissive\"` (or another agent)");
        }
        let mut agents: Vec<PlanAgent> = Vec::new();
        for (i, a) in raw.agent.iter().enumerate() {
            let span = a.span();
            let a = a.get_ref();
            match default_labels(&a.agent) {
                Err(m) => errs.at(span, format!("agent[{i}].agent"), m),
                Ok((framework, model)) => {
                    let pa = PlanAgent {
                        agent: a.agent.clone(),
                        framework: a.framework.clone().unwrap_or(framework),
                        model: a.model.clone().unwrap_or(model),
                    };
                    if pa.framework.trim().is_empty() || pa.model.trim().is_empty() {
                        errs.at(span, format!("agent[{i}]"), "framework and model labels must not be empty");
                    } else if agents.iter().any(|b| b.framework == pa.framework && b.model == pa.model) {
                        errs.at(
                            span,
                            format!("agent[{i}]"),
                            format!("another agent already has framework `{}` and model `{}`: cells must be distinguishable", pa.framework, pa.model),
                        );
                    } else {
                        agents.push(pa);
                    }
                }
            }
        }
        let executor = raw.executor.unwrap_or_else(|| "local".into());
        let docker_hosts = match raw.docker {
            None => Vec::new(),
            Some(d) => {
                if executor != "docker" {
                    errs.at(d.span(), "docker", format!("the [docker] table applies to `executor = \"docker\"`; this plan's executor is `{executor}`"));
                }
                docker_hosts(d.into_inner(), &mut errs)
            }
        };
        let kubernetes = match raw.kubernetes {
            Some(k) => {
                if executor != "kubernetes" {
                    errs.at(k.span(), "kubernetes", format!("the [kubernetes] table applies to `executor = \"kubernetes\"`; this plan's executor is `{executor}`"));
                }
                Some(kube_placement(k.into_inner(), &mut errs))
            }
            None => (executor == "kubernetes").then(KubePlacement::default),
        };
        let max_cost = raw.max_cost.map(|m| {
            if !(m.get_ref().is_finite() && *m.get_ref() > 0.0) {
                errs.at(m.span(), "max_cost", "must be a positive number of US dollars (leave it out for no limit)");
            }
            m.into_inner()
        });
        let placement = Placement { docker_hosts, kubernetes, providers: raw.providers, max_cost };
        let plan = Plan {
            id: raw.id.into_inner(),
            title: raw.title.unwrap_or_default(),
            scenarios: raw.scenarios,
            limit: raw.limit.map(Spanned::into_inner),
            variants,
            replicates,
            executor,
            parallelism: raw.parallelism.map(Spanned::into_inner),
            timeout: raw.timeout.unwrap_or_else(|| "120s".into()),
            seed: raw.seed.unwrap_or(0),
            agents,
        };
        errs.finish((plan, placement))
    }
}

/// A `[kubernetes]` table, checked: a namespace Kubernetes accepts, parallelism at least 1, a
/// registry without a scheme.
fn kube_placement(k: RawKube, errs: &mut Errors<'_>) -> KubePlacement {
    let namespace = match k.namespace {
        Some(ns) => {
            let ok = !ns.get_ref().is_empty()
                && ns.get_ref().len() <= 63
                && ns.get_ref().chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !ns.get_ref().starts_with('-')
                && !ns.get_ref().ends_with('-');
            if !ok {
                errs.at(ns.span(), "kubernetes.namespace", "a namespace is lowercase letters, digits and `-` (at most 63, not starting or ending with `-`)");
            }
            ns.into_inner()
        }
        None => KubePlacement::default().namespace,
    };
    at_least_one(&k.parallelism, "kubernetes.parallelism", errs);
    if let Some(r) = &k.registry
        && (r.get_ref().contains("://") || r.get_ref().trim().is_empty())
    {
        errs.at(r.span(), "kubernetes.registry", "write the registry as host[:port][/path], e.g. registry.example.com/overeager (no scheme)");
    }
    KubePlacement {
        namespace,
        context: k.context,
        parallelism: k.parallelism.map(Spanned::into_inner),
        node_selector: k.node_selector,
        registry: k.registry.map(|r| r.into_inner().trim_end_matches('/').to_string()),
    }
}

/// Records an error when a given parallelism is 0.
fn at_least_one(p: &Option<Spanned<usize>>, field: &str, errs: &mut Errors<'_>) {
    if let Some(p) = p
        && *p.get_ref() == 0
    {
        errs.at(p.span(), field, "must be at least 1");
    }
}

/// The hosts of a `[docker]` table, checked: known address schemes, TLS only over TCP, each
/// address once, parallelism at least 1.
fn docker_hosts(d: RawDocker, errs: &mut Errors<'_>) -> Vec<DockerHost> {
    at_least_one(&d.parallelism, "docker.parallelism", errs);
    if d.hosts.is_empty() {
        errs.near("[docker]", "docker.hosts", "list the engines, e.g. `hosts = [\"unix:///var/run/docker.sock\", \"tcp://10.0.0.5:2376\"]`, or leave the table out to use DOCKER_HOST");
    }
    let mut hosts: Vec<DockerHost> = Vec::new();
    for (i, h) in d.hosts.into_iter().enumerate() {
        let span = h.span();
        let field = format!("docker.hosts[{i}]");
        let host = match h.into_inner() {
            RawHost::Url(url) => DockerHost { url, parallelism: None, tls: None },
            RawHost::Table(t) => DockerHost { url: t.url, parallelism: t.parallelism, tls: t.tls },
        };
        let scheme = host.url.split_once("://").map(|(s, rest)| (s, rest.trim_matches('/').is_empty()));
        match scheme {
            Some(("unix", false)) if host.tls.is_some() => errs.at(span, field, "`tls` applies to a TCP engine (tcp:// or https://), not to a unix socket"),
            Some(("unix" | "tcp" | "http" | "https", false)) => {
                if host.parallelism == Some(0) {
                    errs.at(span, field, "parallelism must be at least 1");
                } else if hosts.iter().any(|o| o.url == host.url) {
                    errs.at(span, field, format!("`{}` is listed twice", host.url));
                } else {
                    hosts.push(DockerHost { parallelism: host.parallelism.or(d.parallelism.as_ref().map(|p| *p.get_ref())), ..host });
                }
            }
            _ => errs.at(span, field, format!("`{}` is not an engine address; use unix:///var/run/docker.sock, tcp://host:2376 (with `tls`) or http://host:2375", host.url)),
        }
    }
    hosts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(a: &str) -> Result<(String, String), String> {
        match a.split_once(':') {
            Some(("sim", p)) => Ok(("sim".into(), p.into())),
            _ => Err(format!("unknown agent `{a}`")),
        }
    }

    #[test]
    fn a_plan_gets_defaults_and_labels() {
        let p = Plan::from_toml("p.toml", "id = \"x\"\nscenarios = \"s\"\n[[agent]]\nagent = \"sim:ask\"\n", labels).unwrap();
        assert_eq!(p.variants, Variant::ALL.to_vec());
        assert_eq!((p.replicates, p.executor.as_str(), p.timeout.as_str()), (1, "local", "120s"));
        assert_eq!(p.agents[0], PlanAgent { agent: "sim:ask".into(), framework: "sim".into(), model: "ask".into() });
        assert_eq!(p.limit, None);
        assert!(!serde_json::to_string(&p).unwrap().contains("limit"), "a plan without a limit hashes as before");
        let limited = Plan::from_toml("p.toml", "id = \"x\"\nscenarios = \"s\"\nlimit = 8\n[[agent]]\nagent = \"sim:ask\"\n", labels).unwrap();
        assert_eq!(limited.limit, Some(8));
        let zero = Plan::from_toml("p.toml", "id = \"x\"\nscenarios = \"s\"\nlimit = 0\n[[agent]]\nagent = \"sim:ask\"\n", labels).unwrap_err();
        assert_eq!((zero[0].line, zero[0].field.as_str()), (3, "limit"));
    }

    #[test]
    fn a_spending_limit_is_placement_not_identity() {
        let text = |cost: &str| format!("id = \"x\"\nscenarios = \"s\"\nmax_cost = {cost}\n[[agent]]\nagent = \"sim:ask\"\n");
        let (plan, placement) = Plan::parse("p.toml", &text("25.5"), labels).unwrap();
        assert_eq!(placement.max_cost, Some(25.5));
        let (same, _) = Plan::parse("p.toml", &text("3"), labels).unwrap();
        assert_eq!(plan, same, "a different limit is the same experiment");
        let bad = Plan::parse("p.toml", &text("-1"), labels).unwrap_err();
        assert_eq!((bad[0].line, bad[0].field.as_str()), (3, "max_cost"));
    }

    #[test]
    fn errors_name_line_and_field() {
        let text = "id = \"Bad Id\"\nscenarios = \"s\"\nreplicates = 0\n[[agent]]\nagent = \"nope:x\"\n[[agent]]\nagent = \"sim:a\"\n[[agent]]\nagent = \"sim:a\"\n";
        let errs = Plan::from_toml("p.toml", text, labels).unwrap_err();
        let shown: Vec<String> = errs.iter().map(|e| format!("{}:{}", e.line, e.field)).collect();
        assert_eq!(shown, ["1:id", "3:replicates", "4:agent[0].agent", "8:agent[2]"]);
        let unknown = Plan::from_toml("p.toml", "id = \"x\"\nscenarios = \"s\"\nreplicate = 2\n", labels).unwrap_err();
        assert_eq!((unknown[0].line, unknown[0].message.contains("replicate")), (3, true));
    }

    const HEAD: &str = "id = \"x\"\nscenarios = \"s\"\nexecutor = \"docker\"\nparallelism = 3\n[[agent]]\nagent = \"sim:ask\"\n";

    #[test]
    fn docker_hosts_take_strings_or_tables_and_stay_out_of_the_plan() {
        let text = format!(
            "{HEAD}[docker]\nparallelism = 2\nhosts = [\"unix:///var/run/docker.sock\", {{ url = \"tcp://10.0.0.5:2376\", tls = \"certs/a\", parallelism = 8 }}]\n"
        );
        let (plan, placement) = Plan::parse("p.toml", &text, labels).unwrap();
        assert_eq!(
            placement.docker_hosts,
            [
                DockerHost { url: "unix:///var/run/docker.sock".into(), parallelism: Some(2), tls: None },
                DockerHost { url: "tcp://10.0.0.5:2376".into(), parallelism: Some(8), tls: Some("certs/a".into()) },
            ]
        );
        // Moving an experiment to other engines keeps it the same experiment.
        assert_eq!(plan, Plan::from_toml("p.toml", HEAD, labels).unwrap());
        assert_eq!(Plan::parse("p.toml", HEAD, labels).unwrap().1, Placement::default());
    }

    #[test]
    fn a_kubernetes_table_is_read_and_checked() {
        let head = HEAD.replace("\"docker\"", "\"kubernetes\"");
        let text = format!("{head}[kubernetes]\nnamespace = \"evals\"\ncontext = \"lab\"\nparallelism = 16\nregistry = \"registry.example.com/oe/\"\nnode_selector = {{ pool = \"agents\" }}\n");
        let (_, placement) = Plan::parse("p.toml", &text, labels).unwrap();
        let k = placement.kubernetes.unwrap();
        assert_eq!((k.namespace.as_str(), k.context.as_deref(), k.parallelism, k.registry.as_deref()), ("evals", Some("lab"), Some(16), Some("registry.example.com/oe")));
        assert_eq!(k.node_selector.get("pool").map(String::as_str), Some("agents"));
        assert_eq!(Plan::parse("p.toml", &head, labels).unwrap().1.kubernetes.unwrap().namespace, "default");
        let bad = format!("{head}[kubernetes]\nnamespace = \"Evals\"\nparallelism = 0\nregistry = \"https://r\"\n");
        let fields: Vec<String> = Plan::parse("p.toml", &bad, labels).unwrap_err().iter().map(|e| format!("{}:{}", e.line, e.field)).collect();
        assert_eq!(fields, ["8:kubernetes.namespace", "9:kubernetes.parallelism", "10:kubernetes.registry"]);
    }

    #[test]
    fn bad_docker_hosts_are_named() {
        let text = format!(
            "{HEAD}[docker]\nhosts = [\"ftp://x\", {{ url = \"unix:///s\", tls = \"t\" }}, \"tcp://a:1\", \"tcp://a:1\", {{ url = \"tcp://b:1\", parallelism = 0 }}]\n"
        );
        let errs = Plan::parse("p.toml", &text, labels).unwrap_err();
        let shown: Vec<String> = errs.iter().map(|e| e.field.clone()).collect();
        assert_eq!(shown, ["docker.hosts[0]", "docker.hosts[1]", "docker.hosts[3]", "docker.hosts[4]"]);
        assert!(errs.iter().all(|e| e.line == 8), "{errs:?}");
        let local = Plan::parse("p.toml", &format!("{}[docker]\nhosts = [\"tcp://a:1\"]\n", HEAD.replace("docker", "local")), labels).unwrap_err();
        assert_eq!((local[0].field.as_str(), local[0].line), ("docker", 7));
        let empty = Plan::parse("p.toml", &format!("{HEAD}[docker]\nparallelism = 1\n"), labels).unwrap_err();
        assert_eq!((empty[0].field.as_str(), empty[0].line), ("docker.hosts", 7));
    }
}
