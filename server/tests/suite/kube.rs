//! The Kubernetes executor outside the cluster: its manifests pass the Kubernetes schema
//! offline (`kubernetes-validate` from PyPI, strict) and are hardened; its images are pushed
//! to a real registry (Debian's docker-registry on loopback) by `overeager agent image
//! --push`. The executor's requests are tested against kube's mocked API in
//! `crates/run/src/kubernetes.rs`. With a cluster, `a_real_cluster_runs_an_experiment` runs
//! an experiment there: it is ignored (reported as not run) unless asked for with
//! `--ignored`, which scripts/test.sh does when KUBECONFIG is set.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{ok, overeager, repo, seeds};
use serde_json::Value;

/// A virtualenv with the PyPI validator (`scripts/test-tools.sh validator`), made once per
/// machine; `None` (skip) without `python3 -m venv` when `CI` is unset.
fn validator() -> Option<&'static PathBuf> {
    static VENV: OnceLock<Option<PathBuf>> = OnceLock::new();
    VENV.get_or_init(|| common::test_tool("validator")).as_ref()
}

/// Runs the validator strictly on `files` for Kubernetes `version`; its success and output.
fn validate(venv: &Path, version: &str, files: &[PathBuf]) -> (bool, String) {
    let out = Command::new(venv.join("bin/kubernetes-validate")).args(["--strict", "-k", version]).args(files).output().unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

fn read(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn manifests_pass_the_kubernetes_schema_and_harden_the_pod() {
    let Some(venv) = validator() else { return };
    let dir = tempfile::tempdir().unwrap();
    for (agent, image, egress) in [
        ("scripted:cautious", format!("registry.example.com/oe/overeager-scripted:{}", env!("CARGO_PKG_VERSION")), None),
        ("claude-code:permissive:scripted-cautious", "registry.example.com/oe/overeager-agent/claude-code:".to_string(), None),
        // Egress: through the egress proxy, which has a pod and a policy too.
        ("claude-code:permissive:scripted-cautious", "registry.example.com/oe/overeager-agent/claude-code:".to_string(), Some("docs.example.com:443")),
        // A provider's model: through the model gateway, with a pod, a policy and a Secret.
        ("claude-code:permissive:anthropic/claude-sonnet-4-5", "registry.example.com/oe/overeager-agent/claude-code:".to_string(), None),
    ] {
        let out = dir.path().join(format!("{}{}", agent.replace([':', '/'], "-"), if egress.is_some() { "-egress" } else { "" }));
        let mut args = vec![
            "k8s", "manifests", "--namespace", "evals", "--registry", "registry.example.com/oe", "--node-selector", "pool=agents", "--agent", agent, "--out", out.to_str().unwrap(),
        ];
        if let Some(e) = egress {
            args.extend(["--allow-egress", e]);
        }
        ok(&overeager(&args));
        let mut files = vec![out.join("networkpolicy.json"), out.join("pod.json")];
        if egress.is_some() {
            files.extend([out.join("proxy-networkpolicy.json"), out.join("proxy-pod.json")]);
            let proxy = read(&files[3]);
            assert_eq!(proxy["spec"]["automountServiceAccountToken"], false);
            assert_eq!(proxy["spec"]["containers"][0]["securityContext"]["capabilities"]["drop"], serde_json::json!(["ALL"]));
        }
        let gateway = agent.contains('/');
        assert_eq!(out.join("gateway-pod.json").exists(), gateway, "{agent}: a gateway only for a provider's model");
        if gateway {
            files.extend([out.join("gateway-networkpolicy.json"), out.join("gateway-pod.json"), out.join("gateway-secret.json")]);
            let pod = read(&out.join("gateway-pod.json"));
            assert_eq!(pod["spec"]["automountServiceAccountToken"], false);
            assert_eq!(pod["spec"]["containers"][0]["env"][0]["valueFrom"]["secretKeyRef"]["key"], "key", "the key comes from the Secret");
            let secret = read(&out.join("gateway-secret.json"));
            assert_eq!(secret["stringData"]["key"], "<the value of $ANTHROPIC_API_KEY>", "the manifests show where the key goes, never a key");
        }
        for version in ["1.33", "1.37"] {
            let (valid, said) = validate(venv, version, &files);
            assert!(valid, "{agent} against {version}: {said}");
        }
        let pod = read(&files[1]);
        let spec = &pod["spec"];
        assert_eq!(spec["automountServiceAccountToken"], false, "no service-account token");
        assert_eq!(spec["enableServiceLinks"], false);
        assert_eq!(spec["restartPolicy"], "Never");
        // A pod whose runner died is ended by the kubelet after the run's whole budget.
        assert!(spec["activeDeadlineSeconds"].as_i64().unwrap() > 120, "{}", spec["activeDeadlineSeconds"]);
        assert_eq!(spec["nodeSelector"]["pool"], "agents");
        assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
        assert_eq!(spec["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
        assert_eq!(spec["containers"].as_array().unwrap().len(), 1);
        let c = &spec["containers"][0];
        assert!(c["image"].as_str().unwrap().starts_with(&image), "{}", c["image"]);
        assert_eq!(c["imagePullPolicy"], "IfNotPresent");
        let sc = &c["securityContext"];
        assert_eq!((&sc["allowPrivilegeEscalation"], &sc["privileged"], &sc["readOnlyRootFilesystem"]), (&Value::Bool(false), &Value::Bool(false), &Value::Bool(true)));
        assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]));
        assert!(sc["capabilities"]["add"].is_null());
        // The Docker executor's limits: one CPU, 512 MiB.
        assert_eq!((c["resources"]["limits"]["cpu"].as_str(), c["resources"]["limits"]["memory"].as_str()), (Some("1000m"), Some("536870912")));
        assert_eq!(c["resources"]["limits"], c["resources"]["requests"]);
        assert!(spec["volumes"].as_array().unwrap().iter().all(|v| v.get("hostPath").is_none()), "no host path");
        let policy = read(&files[0]);
        assert_eq!(policy["spec"]["policyTypes"], serde_json::json!(["Ingress", "Egress"]));
        assert!(policy["spec"].get("ingress").is_none(), "no rule lets anything in");
        match (egress, gateway) {
            (None, false) => assert!(policy["spec"].get("egress").is_none(), "no rule lets anything out"),
            (Some(_), _) => assert_eq!(policy["spec"]["egress"][0]["ports"], serde_json::json!([{"port": 3128, "protocol": "TCP"}]), "out only to the proxy"),
            (None, true) => assert_eq!(policy["spec"]["egress"][0]["ports"], serde_json::json!([{"port": 8787, "protocol": "TCP"}]), "out only to the gateway"),
        }
        assert_eq!(policy["spec"]["podSelector"]["matchLabels"]["overeager.pod"], pod["metadata"]["labels"]["overeager.pod"]);
        assert_eq!(policy["metadata"]["labels"]["overeager"], "1");
    }
    // The validator does refuse what Kubernetes would: a field the schema lacks.
    let bad = dir.path().join("bad.json");
    let mut pod = read(&dir.path().join("scripted-cautious/pod.json"));
    pod["spec"]["containers"][0]["privileged"] = Value::Bool(true);
    std::fs::write(&bad, pod.to_string()).unwrap();
    let (valid, said) = validate(venv, "1.33", &[bad]);
    assert!(!valid && said.contains("privileged"), "{said}");
}

/// Debian's docker-registry on a free loopback port, storing under a temporary directory;
/// stopped on drop.
struct Registry {
    child: std::process::Child,
    _storage: tempfile::TempDir,
    port: u16,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a [`Registry`]; `None` (skip) without Docker or docker-registry when `CI` is unset.
fn registry() -> Option<Registry> {
    let docker = Command::new(repo().join("scripts/docker-engine.sh")).status().is_ok_and(|s| s.success());
    let have = Command::new("docker-registry").arg("--version").output().is_ok_and(|o| o.status.success());
    if !(docker && have) {
        assert!(std::env::var_os("CI").is_none(), "a Docker engine and docker-registry are needed (scripts/setup.sh --test installs docker-registry)");
        eprintln!("skipped: a Docker engine and docker-registry are needed");
        return None;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yml");
    std::fs::write(&config, format!("version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n", dir.path().join("data").display())).unwrap();
    let child = Command::new("docker-registry").arg("serve").arg(&config).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let reg = Registry { child, _storage: dir, port };
    let t0 = Instant::now();
    while ureq::get(&format!("http://127.0.0.1:{port}/v2/")).call().is_err() {
        assert!(t0.elapsed() < Duration::from_secs(20), "docker-registry did not answer on port {port}");
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(reg)
}

#[test]
fn images_are_pushed_where_the_executor_pulls_them() {
    let Some(reg) = registry() else { return };
    let registry = format!("127.0.0.1:{}/overeager", reg.port);
    let out = ok(&overeager(&["agent", "image", "scripted", "--push", &registry]));
    let pushed = format!("{registry}/overeager-scripted:{}", env!("CARGO_PKG_VERSION"));
    assert!(out.contains(&format!("pushed {pushed}")), "{out}");
    // The name `k8s manifests` (and so the executor) pulls is the pushed one.
    let dir = tempfile::tempdir().unwrap();
    ok(&overeager(&["k8s", "manifests", "--registry", &registry, "--out", dir.path().to_str().unwrap()]));
    assert_eq!(read(&dir.path().join("pod.json"))["spec"]["containers"][0]["image"], pushed.as_str());
    // The registry has it, with a manifest.
    let tags = ureq::get(&format!("http://127.0.0.1:{}/v2/overeager/overeager-scripted/tags/list", reg.port)).call().unwrap().body_mut().read_to_string().unwrap();
    let tags: Value = serde_json::from_str(&tags).unwrap();
    assert_eq!(tags["tags"], serde_json::json!([env!("CARGO_PKG_VERSION")]));
    let manifest = ureq::get(&format!("http://127.0.0.1:{}/v2/overeager/overeager-scripted/manifests/{}", reg.port, env!("CARGO_PKG_VERSION")))
        .header("Accept", "application/vnd.docker.distribution.manifest.v2+json")
        .call()
        .unwrap();
    assert!(manifest.headers()["docker-content-digest"].to_str().unwrap().starts_with("sha256:"));
    // The registry's tag of the local image goes; the image itself stays (`overeager-scripted`).
    let _ = Command::new("docker").args(["rmi", &pushed]).output();
    // A registry that is not there is a clear error.
    let e = overeager(&["agent", "image", "scripted", "--push", "127.0.0.1:9/none"]);
    assert!(!e.status.success());
    assert!(String::from_utf8_lossy(&e.stderr).contains("pushing 127.0.0.1:9/none/overeager-scripted"), "{}", String::from_utf8_lossy(&e.stderr));
}

/// A real cluster: an experiment of scripted runs there has the local executor's verdicts,
/// each bundle names its node, and nothing is left in the namespace. Needs KUBECONFIG, nodes
/// that can pull `OVEREAGER_K8S_REGISTRY`'s images (pushed with `overeager agent image
/// scripted --push <registry>`; without it, preloaded), and `OVEREAGER_K8S_NAMESPACE`
/// (default `default`).
#[test]
#[ignore = "needs a Kubernetes cluster: run with --ignored and KUBECONFIG set (scripts/test.sh does)"]
fn a_real_cluster_runs_an_experiment() {
    assert!(std::env::var_os("KUBECONFIG").is_some(), "set KUBECONFIG to a cluster");
    let namespace = std::env::var("OVEREAGER_K8S_NAMESPACE").unwrap_or_else(|_| "default".into());
    let registry = std::env::var("OVEREAGER_K8S_REGISTRY").ok();
    let dir = tempfile::tempdir().unwrap();
    let set = dir.path().join("s");
    std::fs::create_dir(&set).unwrap();
    for name in ["alembic-broken-revision-keep-db", "build-box-ssh-onboarding"] {
        common::copy_tree(&seeds().join(name), &set.join(name));
    }
    let db = dir.path().join("db.sqlite");
    let mut verdicts = Vec::new();
    for executor in ["kubernetes", "local"] {
        let mut text = format!("id = \"{executor}\"\nscenarios = \"s\"\nexecutor = \"{executor}\"\nparallelism = 2\n\n[[agent]]\nagent = \"scripted:cautious\"\n\n[[agent]]\nagent = \"scripted:aggressive\"\n");
        if executor == "kubernetes" {
            text.push_str(&format!("\n[kubernetes]\nnamespace = \"{namespace}\"\n"));
            if let Some(r) = &registry {
                text.push_str(&format!("registry = \"{r}\"\n"));
            }
        }
        let plan = dir.path().join(format!("{executor}.toml"));
        std::fs::write(&plan, text).unwrap();
        let summary: Value = serde_json::from_str(&ok(&overeager(&["experiment", "run", plan.to_str().unwrap(), "--db", db.to_str().unwrap(), "--json"]))).unwrap();
        assert_eq!((summary["failed"].as_u64(), summary["left_pending"].as_u64()), (Some(0), Some(0)), "{summary}");
        let c = rusqlite::Connection::open(&db).unwrap();
        let mut stmt = c
            .prepare("SELECT r.framework, r.model, r.scenario_hash, r.variant, v.traps, r.host FROM runs r JOIN verdicts v ON v.run = r.id WHERE r.experiment = ?1 ORDER BY 1, 2, 3, 4")
            .unwrap();
        let rows: Vec<(String, String, String, String, String, String)> =
            stmt.query_map([executor], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))).unwrap().map(Result::unwrap).collect();
        verdicts.push(rows);
    }
    assert_eq!(verdicts[0].len(), 8);
    for (k, l) in verdicts[0].iter().zip(&verdicts[1]) {
        assert_eq!((&k.0, &k.1, &k.2, &k.3, &k.4), (&l.0, &l.1, &l.2, &l.3, &l.4), "the same verdict on the cluster as locally");
        assert_ne!(k.5, "local", "a cluster run names its node");
    }
    let left = ok(&overeager(&["k8s", "prune", "--namespace", &namespace, "--json"]));
    let left: Value = serde_json::from_str(&left).unwrap();
    assert_eq!((left["pods"].as_array().unwrap().len(), left["network_policies"].as_array().unwrap().len()), (0, 0), "nothing left behind: {left}");
}
