//! A maintainer's store with a published benchmark and a submitter's store with its own
//! runs, and the requests a submitter makes: shared by the leaderboard tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

use super::{agent, call, ok, overeager, repo, scratch, seeds};

/// Scenarios of the small benchmark.
pub const SCENARIOS: [&str; 3] = ["alembic-broken-revision-keep-db", "ann-benchmark-results-writeup", "bandit-subprocess-shell-true"];

pub fn plan(dir: &Path, id: &str, agents: &[(&str, &str, &str)]) -> PathBuf {
    let mut text = format!("id = \"{id}\"\ntitle = \"Board test\"\nscenarios = \"set\"\nvariants = [\"consent_kept\", \"consent_stripped\"]\nreplicates = 2\nexecutor = \"local\"\ntimeout = \"60s\"\nseed = 7\n");
    for (a, f, m) in agents {
        text.push_str(&format!("\n[[agent]]\nagent = \"{a}\"\nframework = \"{f}\"\nmodel = \"{m}\"\n"));
    }
    let p = dir.join(format!("{id}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

/// The maintainer's store (experiment `board`, published as `bench-t`, with a writer token
/// per name in `writers` and an admin token) and the submitter's store (experiments `mine` and
/// `mine2`, the same cell twice, bundles signed with a runner key).
pub struct Setup {
    pub dir: PathBuf,
    pub server_db: PathBuf,
    pub client_db: PathBuf,
    pub runner_pub: PathBuf,
    pub tokens: std::collections::BTreeMap<String, String>,
}

pub fn token(db: &Path, name: &str, admin: bool) -> String {
    let mut args = vec!["token", "create", name, "--db", db.to_str().unwrap()];
    if admin {
        args.push("--admin");
    }
    ok(&overeager(&args)).split_whitespace().last().unwrap().to_string()
}

pub fn setup(name: &str, writers: &[&str]) -> Setup {
    let dir = scratch(name);
    for s in SCENARIOS {
        super::copy_tree(&seeds().join(s), &dir.join("set").join(s));
    }
    let server_db = dir.join("server.db");
    let client_db = dir.join("client.db");
    let main = plan(&dir, "board", &[("scripted:cautious", "scripted", "cautious"), ("scripted:aggressive", "scripted", "aggressive")]);
    ok(&overeager(&["experiment", "run", main.to_str().unwrap(), "--db", server_db.to_str().unwrap()]));
    ok(&overeager(&["benchmark", "publish", "board", "--name", "bench-t", "--db", server_db.to_str().unwrap()]));
    let key = dir.join("runner");
    ok(&overeager(&["runner", "keygen", "--out", key.to_str().unwrap(), "--owner", "acme-ci"]));
    let key_file = format!("{}.key", key.display());
    for id in ["mine", "mine2"] {
        let p = plan(&dir, id, &[("scripted:moderate", "scripted", "moderate")]);
        ok(&overeager(&["experiment", "run", p.to_str().unwrap(), "--db", client_db.to_str().unwrap(), "--runner-key", &key_file]));
    }
    let mut tokens = std::collections::BTreeMap::new();
    for w in writers {
        tokens.insert(w.to_string(), token(&server_db, w, false));
    }
    tokens.insert("admin".into(), token(&server_db, "boss", true));
    Setup { dir, server_db, client_db, runner_pub: PathBuf::from(format!("{}.pub", key.display())), tokens }
}

/// (run id, bundle digest, packed file) of every run of a submitter experiment.
pub fn runs_of(s: &Setup, experiment: &str) -> Vec<(String, String, PathBuf)> {
    let conn = rusqlite::Connection::open(&s.client_db).unwrap();
    let mut stmt = conn.prepare("SELECT id, bundle FROM runs WHERE experiment = ?1 ORDER BY rowid").unwrap();
    let objects = PathBuf::from(format!("{}.objects/bundles", s.client_db.display()));
    stmt.query_map([experiment], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .unwrap()
        .map(|r| {
            let (id, d) = r.unwrap();
            let path = objects.join(&d[..2]).join(format!("{d}.oeb"));
            (id, d, path)
        })
        .collect()
}

/// Opens a submission, uploads its bundles (`file` bytes under their digests) and verifies it
/// over plain HTTP: (verify status, answer, upload answers).
pub fn submit_raw(server: &str, token: &str, runs: &[(String, String, PathBuf)], claimed: Option<Value>) -> (u16, Value, Vec<(u16, Value)>) {
    submit_cell(server, token, "bench-t", ("scripted", "moderate"), runs, claimed)
}

/// [`submit_raw`] to benchmark `bench` as the cell `framework · model`.
pub fn submit_cell(server: &str, token: &str, bench: &str, cell: (&str, &str), runs: &[(String, String, PathBuf)], claimed: Option<Value>) -> (u16, Value, Vec<(u16, Value)>) {
    let (status, opened) = declare_to(server, token, bench, cell, runs, claimed);
    assert!(status == 201 || status == 200, "{status} {opened}");
    let id = opened["id"].as_str().unwrap().to_string();
    let mut puts = Vec::new();
    for (_, d, path) in runs {
        let bytes = std::fs::read(path).unwrap();
        puts.push(call(agent().put(&format!("{server}/api/submissions/{id}/bundles/{d}")).header("Authorization", &format!("Bearer {token}")).send(&bytes[..])));
    }
    let (status, answer) = call(agent().post(&format!("{server}/api/submissions/{id}/verify")).header("Authorization", &format!("Bearer {token}")).send_empty());
    (status, answer, puts)
}

/// Declares `runs` (each with the verdict `claimed`, if any) as the cell `framework · model`
/// of benchmark `bench`: (status, answer).
pub fn declare_to(server: &str, token: &str, bench: &str, (framework, model): (&str, &str), runs: &[(String, String, PathBuf)], claimed: Option<Value>) -> (u16, Value) {
    let declared: Vec<Value> = runs.iter().map(|(id, d, _)| json!({ "bundle": d, "run": id, "claimed": claimed })).collect();
    let body_bytes = body(&json!({ "benchmark": bench, "framework": framework, "model": model, "runs": declared }));
    call(agent().post(&format!("{server}/api/submissions")).header("Authorization", &format!("Bearer {token}")).header("Content-Type", "application/json").send(&body_bytes[..]))
}

/// A copy of a packed bundle with `edit` applied to its manifest, repacked (without its runner
/// signature: the edit would break it).
pub fn tampered(s: &Setup, path: &Path, name: &str, edit: impl Fn(&mut Value)) -> (String, PathBuf) {
    let dir = s.dir.join(format!("tamper-{name}"));
    ok(&overeager(&["bundle", "unpack", path.to_str().unwrap(), dir.to_str().unwrap()]));
    let mpath = dir.join("bundle.json");
    let mut m: Value = serde_json::from_slice(&std::fs::read(&mpath).unwrap()).unwrap();
    edit(&mut m);
    std::fs::write(&mpath, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    std::fs::remove_file(dir.join("runner-signature.json")).unwrap();
    let out = s.dir.join(format!("tamper-{name}.oeb"));
    ok(&overeager(&["bundle", "pack", dir.to_str().unwrap(), out.to_str().unwrap()]));
    (sha256(&out), out)
}

/// A JSON body for a ureq request.
pub fn body(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

pub fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap().to_string()
}

pub fn problems(answer: &Value) -> Vec<(String, String, Vec<String>)> {
    answer["report"]["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["kind"].as_str().unwrap().to_string(), p["message"].as_str().unwrap().to_string(), p["runs"].as_array().map(|a| a.iter().map(|r| r.as_str().unwrap().to_string()).collect()).unwrap_or_default()))
        .collect()
}

pub fn submit_cli(s: &Setup, server: &str, experiment: &str, token: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_overeager"))
        .args(["submit", experiment, "--cell", "scripted·moderate", "--benchmark", "bench-t", "--server", server, "--db", s.client_db.to_str().unwrap()])
        .env("OVEREAGER_TOKEN", token)
        .current_dir(repo())
        .output()
        .unwrap()
}

