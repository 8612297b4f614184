//! `overeager-shim`: one static multi-call binary.
//!
//! * Called by another name (`rm`, `git`, `bash`, … — a link to this binary placed in front of
//!   the real programs), it is the **shell channel**: it runs the real program with the same
//!   argv, stdio and exit status and appends one JSON line per invocation to the shim log.
//! * `overeager-shim watch …` is the **watch channel**: inotify over the workspace and `$HOME`.
//! * `overeager-shim play …` is the **scripted agent**: it runs a scenario's play and writes a
//!   Claude Code `stream-json` event stream.
//! * `overeager-shim contain …` is the **run supervisor** every executor runs the agent under.
//! * `overeager-shim install …` wraps an image's real programs, as a step of an image build.
//! * `overeager-shim proxy …` is the egress proxy (the **net channel**) of runs with network.
//! * `overeager-shim model …` is the scripted model endpoint (the **model channel**) real agent
//!   CLIs talk to instead of a model API; `contain` serves it on a thread.
//! * `overeager-shim gateway …` is the model gateway a real agent on a real model talks to:
//!   it holds the key, forwards to the provider and records the model channel.
//! * `overeager-shim acp …` is the client of an agent driven over the Agent Client Protocol:
//!   it records the conversation as the agent channel and answers permission requests.

mod acp;
mod contain;
mod gateway;
mod http;
mod install;
mod model;
mod proxy;
mod play;
mod tls;
mod watch;
mod wrapper;

use std::ffi::OsString;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// Name of the binary itself; any other name means "wrap the program of that name".
const SELF_NAME: &str = "overeager-shim";

/// Unix time in microseconds.
pub(crate) fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

fn usage() -> ! {
    eprintln!(
        "usage:\n  overeager-shim watch --out <fswatch.jsonl> [--sync <socket>] <root>...\n  \
         overeager-shim play --play <play.json>\n  \
         overeager-shim contain --status <file> --channels <dir> --timeout-ms <n> [--sync <socket>]\n      \
         [--model-script <file> (--model-fd <n> | --model-listen <addr>)] --watch <root>... -- <program> [args...]\n  \
         overeager-shim model --script <file> (--listen <addr> | --fd <n>) [--log <model.jsonl>]\n      \
         [--tls-cert <pem> --tls-key <pem>] [--fail-from <n> [--fail-status <code>]]\n  \
         overeager-shim gateway --upstream <url> --dialect <d> (--listen <addr> | --fd <n>) [--prefix /v1]\n      \
         [--key-stdin | --key-env <VAR>] [--ca <pem> | --ca-env <VAR>] [--log <model.jsonl>] [--until-stdin-closes]\n  \
         overeager-shim install [--prefix <dir>] [--bin-dir <dir>]... [--log <file>] [<program>...]\n  \
         overeager-shim proxy [--listen <addr:port>] [--log <net.jsonl>] --allow <host:port>...\n  \
         overeager-shim acp --permissions <allow-all|deny-all|ask> [--mode <id>] --prompt <text> -- <agent> [args...]\n  \
         <program> [args...]   (through a link named after the program)\n\n\
         The shell-channel log is $OVEREAGER_SHIM_LOG; real programs are looked up in\n\
         $OVEREAGER_REAL_DIR first, then in $PATH without the shim's own directory."
    );
    std::process::exit(2);
}

fn main() {
    let mut args: Vec<OsString> = std::env::args_os().collect();
    let argv0 = args.first().cloned().unwrap_or_default();
    let name = Path::new(&argv0).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // A login shell is started as `-bash`.
    let name = name.trim_start_matches('-').to_string();
    if name != SELF_NAME {
        wrapper::run(&name, args);
    }
    args.remove(0);
    let sub = args.first().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let rest: Vec<String> = args.iter().skip(1).map(|s| s.to_string_lossy().into_owned()).collect();
    let code = match sub.as_str() {
        "watch" => watch::main(&rest),
        "play" => play::main(&rest),
        "contain" => contain::main(&rest),
        "install" => install::main(&rest),
        "proxy" => proxy::main(&rest),
        "model" => model::main(&rest),
        "gateway" => gateway::main(&rest),
        "acp" => acp::main(&rest),
        "--version" | "version" => {
            println!("overeager-shim {}", env!("CARGO_PKG_VERSION"));
            0
        }
        _ => usage(),
    };
    std::process::exit(code);
}

/// Appends `record` to `log` as one JSON line, written whole under the lock and flushed, so
/// records of concurrent connections never interleave. A failed write is dropped: the
/// channel's reader sees what was written.
pub(crate) fn append_record<W: std::io::Write>(log: &std::sync::Mutex<W>, record: &impl serde::Serialize) {
    if let Ok(mut line) = serde_json::to_vec(record) {
        line.push(b'\n');
        let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
        let _ = log.write_all(&line).and_then(|()| log.flush());
    }
}

/// Value of `--flag value` in `args`.
pub(crate) fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).map(String::as_str)
}
