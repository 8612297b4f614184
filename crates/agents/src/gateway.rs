//! The model gateway of a run on a provider's model: what it forwards to and with which key
//! ([`GatewayPlan`]), the process that serves it on this machine, what a failed model API
//! means for the run ([`model_api_failure`]), and a benchmark of what it adds to each call.
//! The gateway itself is `overeager-shim gateway`.

use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use overeager_core::bundle::files;
use overeager_formats::model::ModelRecord;

use super::AgentSpec;
use super::providers::Providers;

/// The model gateway of one run: where it forwards to, with the key.
pub struct GatewayPlan {
    pub route: super::definition::Route,
    /// The provider's key variable and its value (none for a local server).
    pub key: Option<(String, String)>,
    /// The agent calls no tools (its definition has a `reply_format`): each request without
    /// tools is its main loop, not a side request.
    pub text_replies: bool,
}

impl GatewayPlan {
    /// Plans the gateway of a real agent on a real model of `providers`: the provider's route
    /// and key.
    pub fn new(agent: &AgentSpec, providers: &Providers) -> Result<GatewayPlan> {
        let AgentSpec::Agent { recipe, version, model, .. } = agent else { unreachable!("called for real agents") };
        let route = recipe.route(version, model, providers)?;
        let key = match &route.provider.key_env {
            Some(var) => {
                let value = crate::secrets::key(var).with_context(|| {
                    format!("{} on `{}` needs an API key: set {var} in this environment (only the run's model gateway gets it; the agent gets a placeholder)", recipe.name, route.provider.name)
                })?;
                Some((var.clone(), value))
            }
            None => None,
        };
        Ok(GatewayPlan { route, key, text_replies: recipe.reply_format.is_some() })
    }

    /// The gateway's command line after the shim: forwarding to the provider, recording to
    /// `log`, trusting `ca` (as the gateway sees it) besides the public roots, taking the key
    /// from standard input or (`key_stdin` false) from its variable.
    pub fn args(&self, log: &str, ca: Option<&str>, key_stdin: bool) -> Vec<String> {
        let p = &self.route.provider;
        let mut v: Vec<String> = vec!["gateway".into(), "--upstream".into(), p.base_url.clone(), "--dialect".into(), p.dialect.as_str().into()];
        if self.route.bridged() {
            v.extend(["--agent-dialect".into(), self.route.agent_dialect.as_str().into()]);
        }
        if let Some(n) = p.max_output_tokens {
            v.extend(["--max-output-tokens".into(), n.to_string()]);
        }
        v.extend(["--prefix".into(), p.agent_prefix().into(), "--log".into(), log.into()]);
        if self.text_replies {
            v.push("--text-replies".into());
        }
        match &self.key {
            Some(_) if key_stdin => v.push("--key-stdin".into()),
            Some((var, _)) => v.extend(["--key-env".into(), var.clone()]),
            None => {}
        }
        if let Some(ca) = ca {
            v.extend(["--ca".into(), ca.into()]);
        }
        v
    }

    /// The PEM text of the provider's own certificate authority, for a gateway that cannot
    /// read the file (a container's, a pod's).
    pub fn ca_pem(&self) -> Result<Option<String>> {
        let p = &self.route.provider;
        p.ca_file.as_ref().map(|f| std::fs::read_to_string(f).with_context(|| format!("reading the certificate authority {} of the provider `{}`", f.display(), p.name))).transpose()
    }

    /// The key, to keep out of everything the run leaves.
    pub fn secrets(&self) -> Vec<(String, String)> {
        self.key.iter().cloned().collect()
    }
}

/// A model gateway process started for a run on this machine, and the write end of its
/// standard input, whose closing asks it to stop; killed when dropped.
pub struct GatewayProcess(std::process::Child, Option<std::process::ChildStdin>);

impl GatewayProcess {
    /// Starts `shim gateway` on the plan's socket, handing it the key on its standard input
    /// (so it is in no process's environment block), which stays open until [`Self::stop`].
    pub fn start(shim: &Path, plan: &GatewayPlan, listener: &std::net::TcpListener, model_log: &Path, stderr: &Path) -> Result<GatewayProcess> {
        if plan.key.is_some() {
            // The key was in this process's environment too (the user put it there), and is
            // wiped from its environment block (see `secrets`); non-dumpable, an agent running
            // as the same user cannot read this process's memory either.
            // SAFETY: prctl with these arguments only changes this process's dumpable flag.
            if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
                bail!("cannot make overeager non-dumpable, so the API key would be readable from its memory: {}", std::io::Error::last_os_error());
            }
        }
        let mut cmd = Command::new(shim);
        let fd = super::child::hand_down(&mut cmd, listener);
        super::child::end_with_this_process(&mut cmd);
        let ca = plan.route.provider.ca_file.as_ref().map(|c| c.to_string_lossy().into_owned());
        cmd.args(plan.args(&model_log.to_string_lossy(), ca.as_deref(), true))
            .args(["--fd", &fd.to_string(), "--until-stdin-closes"])
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(File::create(stderr)?);
        let mut child = cmd.spawn().context("starting the model gateway (overeager-shim gateway)")?;
        let mut stdin = child.stdin.take();
        let mut gateway = GatewayProcess(child, None);
        if let (Some((_, key)), Some(pipe)) = (&plan.key, stdin.as_mut()) {
            pipe.write_all(format!("{key}\n").as_bytes()).context("handing the model gateway its key")?;
        }
        gateway.1 = stdin;
        Ok(gateway)
    }

    /// Stops it once the calls in flight are relayed and recorded (killing it after six
    /// seconds); what it printed, when it had ended on its own before (a failure).
    pub fn stop(mut self, stderr: &Path) -> Option<String> {
        let ended = matches!(self.0.try_wait(), Ok(Some(_)));
        drop(self.1.take());
        let deadline = Instant::now() + Duration::from_secs(6);
        while !ended && Instant::now() < deadline && matches!(self.0.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
        ended.then(|| std::fs::read_to_string(stderr).unwrap_or_default())
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A run whose model API failed and whose agent did not recover (its last main-loop call
/// failed, or it made none and a call failed) is no observation of the agent: an error
/// starting `errored (model API)`, naming the provider, the failure and the call. An agent
/// that retried and went on is no error.
pub fn model_api_failure(records: &[overeager_formats::model::ModelRecord], provider: &str) -> Option<String> {
    let main: Vec<&overeager_formats::model::ModelRecord> = records.iter().filter(|r| !r.side).collect();
    let failed = match main.last() {
        Some(last) => last.failure.is_some().then_some(*last),
        None => records.iter().rev().find(|r| r.failure.is_some()),
    }?;
    let failure = failed.failure.as_deref().unwrap_or("");
    // A call the run's end caught unanswered: the model, not the agent, was what the run waited on.
    let why = if overeager_formats::model::UNANSWERED_AT_END.iter().any(|p| failure.starts_with(p)) {
        "the run ended while the model was still answering, so it is no observation of the agent. Give the run more time (`--timeout`) or the provider fewer runs at once"
    } else {
        "the agent did not recover, so the run is no observation of it. Run it again later (`overeager experiment run --retry-failed` runs an experiment's again)"
    };
    Some(format!(
        "{}: the provider `{provider}` ({}): {failure} on call {} of {} ({} {}); {why}",
        overeager_formats::model::MODEL_API_ERROR,
        failed.upstream.as_deref().unwrap_or("?"),
        failed.seq + 1,
        records.len(),
        failed.method,
        failed.path
    ))
}


/// The records of a run's model channel.
pub fn model_records(chans: &Path) -> Vec<ModelRecord> {
    model_records_in(&chans.join(files::MODEL))
}


/// What the gateway adds to a call, in milliseconds over the calls replayed: the whole reply
/// and its first byte, each against the same request sent to the provider directly, and the
/// gateway's own account of the time it held each call (`relay_us`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct GatewayLatency {
    /// Calls replayed (the requests of one run, `iterations` times).
    pub calls: usize,
    pub added_total_ms: Percentiles,
    pub added_first_byte_ms: Percentiles,
    pub relay_ms: Percentiles,
    pub direct_total_ms: Percentiles,
}

/// The median and the 99th percentile.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Percentiles {
    pub median: f64,
    pub p99: f64,
}

impl Percentiles {
    /// Of `v` ([`overeager_core::stats::percentile`]).
    pub fn of(mut v: Vec<f64>) -> Percentiles {
        v.sort_by(|a, b| a.total_cmp(b));
        Percentiles { median: overeager_core::stats::percentile(&v, 0.5), p99: overeager_core::stats::percentile(&v, 0.99) }
    }
}

/// [`bench`] on the requests of a real agent's run on the scripted model (`bundle`, a bundle
/// directory of `agent` playing `play` of `scenario`), answered by the same play.
pub fn bench_bundle(shim: &Path, bundle: &Path, agent: &AgentSpec, scenario: &overeager_core::Scenario, play: overeager_core::PlayKind, iterations: usize) -> Result<GatewayLatency> {
    let AgentSpec::Agent { recipe, version, .. } = agent else { bail!("the gateway is benchmarked with a real agent's requests") };
    let manifest: overeager_core::BundleManifest = serde_json::from_slice(&std::fs::read(bundle.join(files::MANIFEST))?)?;
    let records = model_records(bundle);
    let script = overeager_formats::model::Script {
        label: play.as_str().to_string(),
        steps: scenario.plays.get(play).steps.clone(),
        roots: manifest.roots,
        default_shell: recipe.shell_tool().to_string(),
        tools: recipe.tools.clone(),
        replay: None,
        first_delay_ms: 0,
        learn_roots: false,
        finish_command: recipe.finish_command.clone(),
        reply_format: recipe.reply_format,
    };
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("script.json");
    std::fs::write(&path, serde_json::to_vec(&script)?)?;
    bench(shim, &path, recipe.scripted_dialect(version), &records, iterations)
}

/// One request as a client sends it, timed: (first byte of the reply, whole reply).
fn timed_call(addr: &str, path: &str, body: &[u8]) -> Result<(Duration, Duration)> {
    let t = Instant::now();
    let mut s = std::net::TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let head = format!("POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
    s.write_all(head.as_bytes())?;
    s.write_all(body)?;
    let mut first = [0u8; 1];
    s.read_exact(&mut first).with_context(|| format!("no reply from {addr} to {path}"))?;
    let first_byte = t.elapsed();
    let mut rest = Vec::new();
    s.read_to_end(&mut rest)?;
    Ok((first_byte, t.elapsed()))
}

/// Replays the main-loop and side requests of a run's model channel (`records`, answered by
/// the scripted model serving `script`) `iterations` times, each both to a scripted provider
/// directly and through a gateway in front of it, alternating which goes first; the gateway's
/// added latency per call. Both listen on loopback over plain HTTP, so TLS (which the agent
/// would do itself against the provider, and the gateway does in its place) is left out of
/// both sides.
pub fn bench(shim: &Path, script: &Path, dialect: overeager_core::model::Dialect, records: &[ModelRecord], iterations: usize) -> Result<GatewayLatency> {
    let dir = tempfile::tempdir()?;
    let upstream = std::net::TcpListener::bind("127.0.0.1:0")?;
    let up_addr = upstream.local_addr()?.to_string();
    let mut model = Command::new(shim);
    let fd = super::child::hand_down(&mut model, &upstream);
    super::child::end_with_this_process(&mut model);
    model.args(["model", "--script"]).arg(script).args(["--fd", &fd.to_string()]).stdout(Stdio::null()).stderr(Stdio::null());
    let mut model = Killed(model.spawn().context("starting the scripted provider")?);
    let provider = crate::providers::Provider {
        name: "bench".into(),
        dialect,
        base_url: format!("http://{up_addr}{}", dialect.agent_prefix()),
        key_env: None,
        prices: Default::default(),
        ca_file: None,
        max_output_tokens: None,
        source: "bench".into(),
    };
    let plan = GatewayPlan { route: crate::definition::Route { provider, model: "scripted".into(), agent_dialect: dialect }, key: None, text_replies: false };
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let gw_addr = listener.local_addr()?.to_string();
    let log = dir.path().join("model.jsonl");
    let gateway = GatewayProcess::start(shim, &plan, &listener, &log, &dir.path().join("gateway.stderr"))?;
    let (mut total, mut first, mut direct) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..iterations.max(1) {
        for r in records.iter().filter(|r| r.method == "POST") {
            let body = serde_json::to_vec(&r.request)?;
            let mut timed = [(Duration::ZERO, Duration::ZERO); 2];
            for k in 0..2 {
                // Alternate which goes first, so drift in the machine's load hits both alike.
                let via = (k + i) % 2 == 1;
                timed[usize::from(via)] = timed_call(if via { &gw_addr } else { &up_addr }, &r.path, &body)?;
            }
            let ms = |d: Duration| d.as_secs_f64() * 1000.0;
            total.push(ms(timed[1].1) - ms(timed[0].1));
            first.push(ms(timed[1].0) - ms(timed[0].0));
            direct.push(ms(timed[0].1));
        }
    }
    if let Some(e) = gateway.stop(&dir.path().join("gateway.stderr")) {
        bail!("the gateway ended during the benchmark: {e}");
    }
    let _ = model.0.kill();
    // Its record of every call it relayed, written once each reply was passed on.
    let relay: Vec<f64> = model_records_in(&log).iter().filter_map(|r| r.relay_us).map(|us| us as f64 / 1000.0).collect();
    Ok(GatewayLatency { calls: total.len(), added_total_ms: Percentiles::of(total), added_first_byte_ms: Percentiles::of(first), relay_ms: Percentiles::of(relay), direct_total_ms: Percentiles::of(direct) })
}

/// What one tiny request to a provider's model, sent the way a run's are, came to.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ProviderCheck {
    pub provider: String,
    pub model: String,
    /// The provider answered the request with a reply (any 2xx without a failure).
    pub ok: bool,
    /// The HTTP status it answered with (0 when none came).
    pub status: u16,
    pub ms: u64,
    /// The tokens its reply reported, when it did.
    pub tokens: Option<u64>,
    /// How it failed, as a run's model channel would say (with the provider's own text).
    pub error: Option<String>,
}

/// The smallest request of `dialect` asking `model` for one short answer, and the path an agent
/// sends it to.
fn ping_request(dialect: overeager_core::model::Dialect, model: &str) -> (String, serde_json::Value) {
    use overeager_core::model::Dialect;
    let says = "Reply with the word ok.";
    match dialect {
        Dialect::Anthropic => ("/v1/messages".into(), serde_json::json!({ "model": model, "max_tokens": 16, "messages": [{ "role": "user", "content": says }] })),
        Dialect::Chat => ("/v1/chat/completions".into(), serde_json::json!({ "model": model, "max_tokens": 16, "messages": [{ "role": "user", "content": says }] })),
        Dialect::Responses => ("/v1/responses".into(), serde_json::json!({ "model": model, "max_output_tokens": 16, "input": says })),
        Dialect::Gemini => (format!("/v1beta/models/{model}:generateContent"), serde_json::json!({ "contents": [{ "role": "user", "parts": [{ "text": says }] }], "generationConfig": { "maxOutputTokens": 16 } })),
    }
}

/// Sends one tiny request to `model` of `provider` through a model gateway, exactly as a run's
/// agent would reach it (the provider's TLS, certificate authority and key), and says how it
/// went: for checking a provider before a long experiment.
pub fn check_provider(shim: &Path, provider: &crate::providers::Provider, model: &str, timeout: Duration) -> Result<ProviderCheck> {
    let key = match &provider.key_env {
        Some(var) => match crate::secrets::key(var) {
            Some(value) => Some((var.clone(), value)),
            None => {
                return Ok(ProviderCheck { provider: provider.name.clone(), model: model.into(), ok: false, status: 0, ms: 0, tokens: None, error: Some(format!("${var} is not set: set it to the provider's key")) });
            }
        },
        None => None,
    };
    let dir = tempfile::tempdir()?;
    let plan = GatewayPlan { route: crate::definition::Route { provider: provider.clone(), model: model.into(), agent_dialect: provider.dialect }, key: key.clone(), text_replies: false };
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?.to_string();
    let log = dir.path().join("model.jsonl");
    let stderr = dir.path().join("gateway.stderr");
    let gateway = GatewayProcess::start(shim, &plan, &listener, &log, &stderr)?;
    let (path, body) = ping_request(provider.dialect, model);
    let started = Instant::now();
    let sent = (|| -> Result<()> {
        let body = serde_json::to_vec(&body)?;
        let mut s = std::net::TcpStream::connect(&addr)?;
        s.set_read_timeout(Some(timeout))?;
        let head = format!("POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
        s.write_all(head.as_bytes())?;
        s.write_all(&body)?;
        let mut reply = Vec::new();
        s.read_to_end(&mut reply).context("waiting for the reply")?;
        Ok(())
    })();
    let ms = started.elapsed().as_millis() as u64;
    let ended = gateway.stop(&stderr);
    let record = model_records_in(&log).into_iter().next();
    // A provider's error may echo the key it was sent: cleared as a bundle's files are, before
    // any of it is cut short or printed.
    let secrets: Vec<(String, String)> = key.into_iter().collect();
    let clear = |text: &str| crate::secrets::redact_text(text, &secrets);
    let reply = record.as_ref().map(|r| clear(&r.reply)).unwrap_or_default();
    let (status, failure, tokens) = match &record {
        Some(r) => (r.status, r.failure.as_deref().map(|f| format!("{}: {}", clear(f), reply.chars().take(300).collect::<String>())), overeager_formats::model::usage::of_reply(r).map(|u| u.total())),
        None => (0, Some(match (sent, ended) {
            (_, Some(e)) => format!("the gateway stopped: {}", clear(e.trim())),
            (Err(e), None) => format!("no reply within {} s: {e:#}", timeout.as_secs()),
            (Ok(()), None) => "the gateway recorded no call".into(),
        }), None),
    };
    let ok = failure.is_none() && (200..300).contains(&status);
    let error = failure.or_else(|| (!ok).then(|| format!("http {status}: {}", reply.chars().take(300).collect::<String>())));
    Ok(ProviderCheck { provider: provider.name.clone(), model: model.into(), ok, status, ms, tokens, error })
}

/// A child process killed when dropped.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn model_records_in(path: &Path) -> Vec<ModelRecord> {
    std::fs::read_to_string(path).unwrap_or_default().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}
