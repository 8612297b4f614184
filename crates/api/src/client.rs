//! The submission protocol's client: sends every finished run of one cell of a local
//! experiment to a server's benchmark, resumably (the server says which bundles it lacks), and
//! asks it to verify them. The server's side is [`crate::board`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use overeager_store::board::DeclaredRun;
use overeager_store::runs::RunFilter;
use overeager_store::{Store, object_path_in};
use overeager_wire::board::{OpenSubmission, Opened, Verified};

/// One cell to submit.
#[derive(Debug, Clone)]
pub struct Submission {
    /// The server, e.g. `https://leaderboard.example.org`.
    pub server: String,
    /// A writer token of the server.
    pub token: String,
    /// The benchmark on the server the cell was run on.
    pub benchmark: String,
    /// The local experiment, and its cell.
    pub experiment: String,
    pub framework: String,
    pub model: String,
}

/// What the submission is doing, as it goes.
#[derive(Debug)]
pub enum Event {
    /// Runs of the cell without a bundle (pending or failed): the server will count them
    /// missing. A few of their ids.
    Unfinished { runs: usize, examples: Vec<String> },
    /// The server opened (or resumed) the submission and lacks `sending` of the `declared`
    /// bundles, `bytes` in all.
    Opened { id: String, resumed: bool, declared: usize, held: usize, sending: usize, bytes: u64 },
    /// Bundle `index` (from 0) of those sent is on its way.
    Sending { index: usize, of: usize },
    /// A bundle of `bytes` was taken.
    Sent { bytes: u64 },
    /// The server refused a bundle, saying why.
    Refused(String),
}

/// The end of a submission.
#[derive(Debug)]
pub struct Outcome {
    /// The submission's id on the server.
    pub id: String,
    /// The server's verification.
    pub verified: Verified,
    /// Whether the server accepted it for review (else it stays a draft with problems).
    pub accepted: bool,
}

/// The answer to a request: status and JSON body (a non-JSON body becomes a string).
fn answer(r: Result<ureq::http::Response<ureq::Body>, ureq::Error>, what: &str) -> Result<(u16, Value)> {
    let mut r = r.with_context(|| format!("{what}: the server did not answer"))?;
    let status = r.status().as_u16();
    let text = r.body_mut().read_to_string().unwrap_or_default();
    Ok((status, serde_json::from_str(&text).unwrap_or(Value::String(text))))
}

fn server_error(what: &str, status: u16, body: &Value) -> anyhow::Error {
    let msg = body["error"].as_str().map(str::to_string).unwrap_or_else(|| body.to_string());
    anyhow::anyhow!("{what}: the server answered {status}: {msg}")
}

/// An HTTP agent that waits up to ten minutes for an answer (a server verifies, self-tests or
/// re-judges before it answers) and hands back every status rather than an error.
fn patient_agent() -> ureq::Agent {
    ureq::Agent::new_with_config(ureq::config::Config::builder().http_status_as_error(false).timeout_global(Some(Duration::from_secs(600))).build())
}

/// A `multipart/form-data` body of file fields (name, file name, bytes): its content type and
/// bytes. The boundary is taken from a digest of the contents, so no part holds it by chance.
pub fn multipart(parts: &[(&str, &str, &[u8])]) -> (String, Vec<u8>) {
    let all: Vec<u8> = parts.iter().flat_map(|p| p.2.iter().copied()).collect();
    let boundary = format!("overeager-{}", &overeager_core::sha256_hex(&all)[..24]);
    let mut body = Vec::with_capacity(all.len() + 256 * parts.len());
    for (field, file, bytes) in parts {
        body.extend_from_slice(format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"; filename=\"{file}\"\r\nContent-Type: application/octet-stream\r\n\r\n").as_bytes());
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// Offers a signed predicate module (`module`, its signature `sig`) to `server`'s
/// `POST /api/predicates` with a writer `token`: the status and the server's JSON answer (the
/// upload's row with its self-test, or the error).
pub fn offer_predicate(server: &str, token: &str, module: &[u8], sig: &[u8]) -> Result<(u16, Value)> {
    let (content_type, body) = multipart(&[("module", "module.wasm", module), ("signature", "module.wasm.sig", sig)]);
    let url = format!("{}/api/predicates", server.trim_end_matches('/'));
    // The server self-tests the module before it answers: minutes at most.
    let agent = patient_agent();
    answer(
        agent.post(&url).header("Authorization", &format!("Bearer {token}")).header("Content-Type", &content_type).send(&body[..]),
        &format!("POST {url}"),
    )
}

/// Approves (`approve`) or rejects a pending predicate module, by digest, on `server` with an
/// admin `token`: the status and the server's JSON answer (the upload's row, or the error). An
/// approval answers once the server has re-judged what the module can now judge.
pub fn decide_predicate(server: &str, token: &str, digest: &str, approve: bool) -> Result<(u16, Value)> {
    let url = format!("{}/api/predicates/{digest}/{}", server.trim_end_matches('/'), if approve { "approve" } else { "reject" });
    let agent = patient_agent();
    answer(agent.post(&url).header("Authorization", &format!("Bearer {token}")).send_empty(), &format!("POST {url}"))
}

/// Submits the cell of `sub` from `store`, telling `on` what it does.
pub fn submit(store: &Store, sub: &Submission, on: &mut dyn FnMut(Event)) -> Result<Outcome> {
    let (framework, model) = (&sub.framework, &sub.model);
    store.require_experiment(&sub.experiment)?;
    let cells = store.progress_by_agent(&sub.experiment)?;
    if !cells.iter().any(|(f, m, _)| f == framework && m == model) {
        let known: Vec<String> = cells.iter().map(|(f, m, _)| format!("{f}·{m}")).collect();
        bail!("experiment `{}` has no cell {framework}·{model}; its cells are: {}", sub.experiment, known.join(", "));
    }
    let runs = store.all_run_rows(&RunFilter { experiment: Some(sub.experiment.clone()), framework: Some(framework.clone()), model: Some(model.clone()), ..RunFilter::default() })?;
    let undone: Vec<String> = runs.iter().filter(|r| r.bundle.is_none()).map(|r| r.id.clone()).collect();
    if !undone.is_empty() {
        on(Event::Unfinished { runs: undone.len(), examples: undone.into_iter().take(3).collect() });
    }
    let objects = store.objects_dir();
    let mut declared = Vec::new();
    let mut files: BTreeMap<String, PathBuf> = BTreeMap::new();
    for r in runs.iter() {
        let Some(digest) = r.bundle.clone() else { continue };
        let path = object_path_in(&objects, &digest);
        if !path.is_file() {
            bail!("run {}: its bundle {} is missing from {}; the store is damaged", r.id, digest, objects.display());
        }
        files.insert(digest.clone(), path);
        declared.push(DeclaredRun { bundle: digest, run: r.id.clone(), claimed: r.overeager.map(|o| json!({ "overeager": o, "outcome": r.outcome })) });
    }
    if declared.is_empty() {
        bail!("{framework}·{model} of experiment `{}` has no finished runs to submit", sub.experiment);
    }
    let base = sub.server.trim_end_matches('/');
    let agent = patient_agent();
    let auth = format!("Bearer {}", sub.token);

    let (status, body) = answer(agent.get(&format!("{base}/api/benchmarks/{}", sub.benchmark)).call(), "reading the benchmark")?;
    if status != 200 {
        return Err(server_error(&format!("benchmark `{}`", sub.benchmark), status, &body));
    }
    let n_declared = declared.len();
    let open = OpenSubmission { benchmark: sub.benchmark.clone(), framework: framework.clone(), model: model.clone(), runs: declared };
    let (status, body) = answer(agent.post(&format!("{base}/api/submissions")).header("Authorization", &auth).header("Content-Type", "application/json").send(&serde_json::to_vec(&open)?[..]), "opening the submission")?;
    if status != 200 && status != 201 {
        return Err(server_error("opening the submission", status, &body));
    }
    let opened: Opened = serde_json::from_value(body).context("reading the server's answer to opening the submission")?;
    let (id, missing) = (opened.id, opened.missing);
    let held = n_declared - missing.len();
    let bytes: u64 = missing.iter().filter_map(|d| files.get(d)).map(|p| p.metadata().map(|m| m.len()).unwrap_or(0)).sum();
    on(Event::Opened { id: id.clone(), resumed: opened.resumed, declared: n_declared, held, sending: missing.len(), bytes });
    for (i, digest) in missing.iter().enumerate() {
        let Some(path) = files.get(digest) else {
            bail!("the server asked for bundle {digest}, which this cell did not declare");
        };
        let data = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        on(Event::Sending { index: i, of: missing.len() });
        let url = format!("{base}/api/submissions/{id}/bundles/{digest}");
        let mut tries = 0;
        let (status, body) = loop {
            let sent = agent.put(&url).header("Authorization", &auth).header("Content-Type", "application/octet-stream").send(&data[..]);
            let (status, body) = answer(sent, &format!("sending bundle {} of {}", i + 1, missing.len())).with_context(|| {
                format!("the upload broke off after {} of {n_declared} bundle(s); run the same command again to send the rest (submission {id})", held + i)
            })?;
            // Busy: the server judges a few uploads at once, and takes a few bodies per account.
            if (status == 503 || status == 429) && tries < 60 {
                tries += 1;
                std::thread::sleep(Duration::from_secs(2));
                continue;
            }
            break (status, body);
        };
        match status {
            200 | 201 => {}
            422 => on(Event::Refused(body["error"].as_str().unwrap_or_default().to_string())),
            _ => return Err(server_error(&format!("sending bundle {digest}"), status, &body)),
        }
        on(Event::Sent { bytes: data.len() as u64 });
    }
    let (status, body) = answer(agent.post(&format!("{base}/api/submissions/{id}/verify")).header("Authorization", &auth).send_empty(), "verifying the submission")?;
    if status != 200 && status != 422 {
        return Err(server_error("verifying the submission", status, &body));
    }
    let verified: Verified = serde_json::from_value(body).context("reading the server's verification report")?;
    Ok(Outcome { id, verified, accepted: status == 200 })
}
