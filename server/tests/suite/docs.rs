//! The shell blocks of `docs/` run as written. Each block whose commands need nothing beyond
//! this machine runs in bash (`-e`, `-o pipefail`) in a scratch directory holding a copy of what
//! the commands read (scenarios, plans, bundles, agent definitions, scripts), with this build's
//! `overeager` first on the PATH. A block that ends by serving (`serve`, `model serve`) must get
//! that far and accept a connection. A block that needs what a test machine has not is named
//! with what it needs, and the test fails if that leaves fewer blocks run than it expects.

use crate::common;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::documented::{block_commands, blocks, pages};
use common::{copy_tree, engine, repo, scratch};

/// What a block needs that a test machine does not have, recognised by a piece of its text.
const NEEDS: [(&str, &str); 6] = [
    ("plans/crossed-stand-in.toml", "the stand-in the block before serves (the crossed plan's own test runs both)"),
    ("_API_KEY=", "a model provider's API key"),
    ("vllm/", "the reader's own model server (vLLM on port 8000)"),
    ("KUBECONFIG=", "a Kubernetes cluster and a container registry"),
    ("--push ", "a container registry"),
    ("--server https://", "a leaderboard server on the network and the submitter's own plan"),
];

/// The blocks this machine can run, at least: the agents' (install, a local and a Docker run,
/// the scripted model served), the host pool's, the leaderboard maintainer's.
const AT_LEAST: usize = 3;

/// How long a serving block may take to get to its server (the commands before it included).
const SERVING_WITHIN: Duration = Duration::from_secs(900);

#[test]
fn all_the_documented_commands_run_as_written() {
    assert!(engine(), "the documented Docker runs need an engine");
    let bin = scratch("docs-bin");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_overeager"), bin.join("overeager")).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let (mut ran, mut skipped) = (Vec::new(), Vec::new());
    for page in pages(&repo()) {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.file_stem().unwrap().to_string_lossy().into_owned();
        for block in blocks(&text).into_iter().filter(|b| b.lang == "sh") {
            let cmds = block_commands(&block);
            let Some(last) = cmds.last() else { continue };
            let at = format!("{}:{}", page.strip_prefix(repo()).unwrap().display(), block.line);
            if let Some((_, why)) = NEEDS.iter().find(|(needle, _)| block.text.contains(needle)) {
                skipped.push(format!("{at}: needs {why}"));
                continue;
            }
            let dir = scratch(&format!("docs-{name}-{}", block.line));
            for d in ["scenarios", "plans", "bundles", "agents", "scripts"] {
                copy_tree(&repo().join(d), &dir.join(d));
            }
            // What the block writes outside its directory (`/tmp/pool.db`) is left from an
            // earlier run of this test: removed, so the block runs from the start again.
            for word in block.text.split(|c: char| c.is_whitespace() || c == '"') {
                if let Some(name) = word.strip_prefix("/tmp/").filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))) {
                    for leftover in [name.to_string(), format!("{name}-wal"), format!("{name}-shm"), format!("{name}.objects")] {
                        let p = Path::new("/tmp").join(leftover);
                        let _ = std::fs::remove_file(&p).or_else(|_| std::fs::remove_dir_all(&p));
                    }
                }
            }
            let serving = last.words.get(1).map(String::as_str) == Some("serve") || last.words.get(1..3) == Some(&["model".to_string(), "serve".to_string()][..]);
            run_block(&at, &block.text, &dir, &path, serving);
            ran.push(at);
        }
    }
    eprintln!("ran {} block(s): {}", ran.len(), ran.join(", "));
    eprintln!("not run here:\n  {}", skipped.join("\n  "));
    assert!(ran.len() >= AT_LEAST, "only {} documented block(s) ran ({ran:?}); skipped: {skipped:?}", ran.len());
}

/// Runs one block in `dir`. A serving block must print where it serves and accept a
/// connection there; it is then stopped with everything it started.
fn run_block(at: &str, text: &str, dir: &Path, path: &str, serving: bool) {
    let stderr_file = dir.join("stderr.txt");
    let mut child = Command::new("bash")
        .args(["-e", "-o", "pipefail", "-c", text])
        .current_dir(dir)
        .env("PATH", path)
        // A block that builds a predicate crate shares the other predicate tests' target
        // directory: the same dependencies, compiled once.
        .env("CARGO_TARGET_DIR", common::repo().join("target/test-work-scaffold"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr_file).unwrap())
        .process_group(0)
        .spawn()
        .unwrap();
    let stderr = || std::fs::read_to_string(&stderr_file).unwrap_or_default();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    if !serving {
        let mut out = String::new();
        stdout.read_to_string(&mut out).unwrap();
        let status = child.wait().unwrap();
        assert!(status.success(), "{at}: the block failed ({status}):\n{out}\n{}", stderr());
        return;
    }
    // The server announces itself (`overeager serve`: "is serving … at http://…"; `model serve`:
    // its URL, then "Ctrl-C stops it."); the commands before it have all succeeded by then.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + SERVING_WITHIN;
    let mut seen: Vec<String> = Vec::new();
    let mut url = None;
    let addr = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = rx.recv_timeout(left) else {
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let status = child.wait().unwrap();
            panic!("{at}: no server announced ({status}):\n{}\n{}", seen.join("\n"), stderr());
        };
        if let Some(rest) = line.split("http://").nth(1) {
            url = rest.split(['/', ' ']).next().map(str::to_string);
        }
        let ready = line.contains("is serving") || line.contains("Ctrl-C stops it.");
        seen.push(line);
        if ready {
            break url.clone().unwrap_or_else(|| panic!("{at}: the server said it is ready but named no address:\n{}", seen.join("\n")));
        }
    };
    let mut connected = false;
    for _ in 0..50 {
        connected = std::net::TcpStream::connect(&addr).is_ok();
        if connected {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    unsafe { libc::kill(-(child.id() as i32), libc::SIGTERM) };
    let _ = child.wait();
    assert!(connected, "{at}: the server announced {addr} but accepts no connection there:\n{}\n{}", seen.join("\n"), stderr());
}
