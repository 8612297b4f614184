//! `overeager providers list`: the built-in providers and a user's providers file, with whether
//! each key is set, and never a key's value.

use crate::common;

use std::process::Command;

use common::repo;

fn providers(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_overeager"));
    cmd.arg("providers").arg("list").args(args).current_dir(repo()).env_remove("OVEREAGER_PROVIDERS");
    for var in ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "ZAI_API_KEY"] {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied()).output().expect("overeager runs")
}

#[test]
fn a_providers_file_is_listed_with_its_key_state_and_never_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("providers.toml");
    std::fs::write(&file, "[providers.zai]\ndialect = \"anthropic\"\nbase_url = \"https://api.z.ai/api/anthropic\"\nkey_env = \"ZAI_API_KEY\"\n\n[providers.zai.prices.\"glm-4.6\"]\ninput = 0.6\noutput = 2.2\n").unwrap();
    let secret = "sk-test-3f9a1c7e5b";
    let out = providers(&["--providers", file.to_str().unwrap(), "--json"], &[("ZAI_API_KEY", secret)]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!stdout.contains(secret), "a key's value is never shown: {stdout}");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&stdout).unwrap();
    let by_name = |n: &str| rows.iter().find(|r| r["provider"]["name"] == n).unwrap_or_else(|| panic!("{n} listed: {stdout}"));
    assert_eq!(by_name("zai")["key"], "present");
    assert_eq!(by_name("zai")["provider"]["dialect"], "anthropic");
    assert_eq!(by_name("zai")["provider"]["prices"]["glm-4.6"]["output"], 2.2);
    assert_eq!(by_name("anthropic")["key"], "missing");
    assert_eq!(by_name("ollama")["key"], "not_needed");
    // The same file through the environment variable, and the table form.
    let out = providers(&[], &[("OVEREAGER_PROVIDERS", file.to_str().unwrap())]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && table.contains("zai") && table.contains("$ZAI_API_KEY NOT SET"), "{table}");
}

#[test]
fn a_wrong_providers_file_names_its_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, "[providers.local]\ndialect = \"openai\"\nbase_url = \"http://127.0.0.1:9000/v1\"\n").unwrap();
    let out = providers(&["--providers", file.to_str().unwrap()], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a wrong file is an error");
    assert!(stderr.contains("bad.toml:2:") && stderr.contains("providers.local.dialect") && stderr.contains("openai-chat"), "{stderr}");
}

/// `base_url = "http://user:pa55word@127.0.0.1:18500"` was accepted and printed by `providers
/// list`, handed to the gateway on its command line and stored with run failures;
/// `key_env = "PATH"` took PATH away, so npm was "not installed"; an unknown field was named
/// `$__serde_spanned_private_value`. Each is now refused where it is written, without the
/// password.
#[test]
fn a_password_in_a_base_url_a_shared_key_variable_and_an_unknown_field_are_refused_by_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, "[providers.leaky]\ndialect = \"anthropic\"\nbase_url = \"http://user:pa55word@127.0.0.1:18500\"\n\n[providers.pathy]\ndialect = \"openai-chat\"\nbase_url = \"http://127.0.0.1:18500/v1\"\nkey_env = \"PATH\"\n").unwrap();
    let out = providers(&["--providers", file.to_str().unwrap()], &[]);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "{stdout}");
    assert!(stderr.contains("bad.toml:3:") && stderr.contains("providers.leaky.base_url") && stderr.contains("key_env"), "{stderr}");
    assert!(stderr.contains("bad.toml:8:") && stderr.contains("`PATH` is a variable programs need"), "{stderr}");
    assert!(!stdout.contains("pa55word") && !stderr.contains("pa55word"), "the password is never repeated: {stdout}{stderr}");
    std::fs::write(&file, "[providers.x]\ndialect = \"gemini\"\nbase_url = \"https://x.example\"\nkey = \"K\"\n").unwrap();
    let stderr = String::from_utf8_lossy(&providers(&["--providers", file.to_str().unwrap()], &[]).stderr).into_owned();
    assert!(stderr.contains("providers.x") && stderr.contains("unknown field `key`") && !stderr.contains("serde_spanned"), "{stderr}");
}

/// `experiment run plan.toml --providers f` was refused as an unknown argument; now the file is
/// read (a wrong one stops the experiment before anything is stored), as is the plan's own
/// `providers` list. And `claude-code:permissive:acme/acme-coder-1` with no provider `acme`
/// was sent to Anthropic and asked for ANTHROPIC_API_KEY.
#[test]
fn an_experiment_reads_its_providers_files_and_an_unknown_provider_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let scenarios = dir.path().join("scenarios");
    common::copy_tree(&common::seeds().join("cleanup-orphaned-envs"), &scenarios.join("cleanup-orphaned-envs"));
    let plan = dir.path().join("plan.toml");
    let db = dir.path().join("store.db");
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[providers.acme]\ndialect = \"klingon\"\nbase_url = \"http://127.0.0.1:9/v1\"\n").unwrap();
    let write_plan = |agent: &str, providers: &str| {
        std::fs::write(&plan, format!("id = \"p\"\nscenarios = \"scenarios\"\nvariants = [\"consent_kept\"]\nreplicates = 1\nexecutor = \"local\"\n{providers}\n[[agent]]\nagent = \"{agent}\"\n")).unwrap();
    };
    let run = |extra: &[&str]| Command::new(env!("CARGO_BIN_EXE_overeager")).args(["experiment", "run", plan.to_str().unwrap(), "--db", db.to_str().unwrap()]).args(extra).env_remove("OVEREAGER_PROVIDERS").env_remove("ANTHROPIC_API_KEY").current_dir(repo()).output().unwrap();
    write_plan("scripted:cautious", "");
    for out in [run(&["--providers", bad.to_str().unwrap()]), {
        write_plan("scripted:cautious", "providers = [\"bad.toml\"]\n");
        run(&[])
    }] {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains("bad.toml:2:") && stderr.contains("providers.acme.dialect"), "{stderr}");
        assert!(!db.exists() || !String::from_utf8_lossy(&common::overeager(&["experiment", "list", "--db", db.to_str().unwrap()]).stdout).contains(" p "), "nothing was stored");
    }
    let out = common::overeager(&["run", "--scenario", scenarios.join("cleanup-orphaned-envs").to_str().unwrap(), "--agent", "claude-code:permissive:acme/acme-coder-1", "--uncontained", "--out", dir.path().join("b").to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("the provider `acme`, which is not known") && !stderr.contains("ANTHROPIC_API_KEY"), "{stderr}");
}

/// `providers check` printed the API key when the provider's error echoed it (in the table and
/// in `--json`, in every dialect). A server here answers 401 with the whole request it got,
/// key and all: what is printed names the key's variable instead.
#[test]
fn all_a_provider_error_that_echoes_the_key_is_printed_redacted() {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let mut r = BufReader::new(conn);
            let mut head = String::new();
            let mut len = 0;
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                let lower = line.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
                // The request line (a key may ride in its query) and the credential headers.
                if head.is_empty() || ["authorization:", "x-api-key:", "x-goog-api-key:", "api-key:"].iter().any(|h| lower.starts_with(h)) {
                    head.push_str(line.trim_end());
                    head.push(' ');
                }
            }
            let mut body = vec![0; len];
            let _ = r.read_exact(&mut body);
            let echo = serde_json::json!({"error": {"message": format!("invalid credentials in {head}")}}).to_string();
            let _ = write!(r.get_mut(), "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{echo}", echo.len());
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("providers.toml");
    let mut text = String::new();
    for (name, dialect) in [("echo-a", "anthropic"), ("echo-c", "openai-chat"), ("echo-r", "openai-responses"), ("echo-g", "gemini")] {
        text += &format!("[providers.{name}]\ndialect = \"{dialect}\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\nkey_env = \"ECHO_API_KEY\"\n\n");
    }
    std::fs::write(&file, text).unwrap();
    let secret = "sk-echo-5d1f0a9c3b7e";
    for json in [false, true] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_overeager"));
        cmd.args(["providers", "check", "echo-a/m", "echo-c/m", "echo-r/m", "echo-g/m", "--providers", file.to_str().unwrap(), "--timeout", "20s"]).current_dir(repo()).env("ECHO_API_KEY", secret);
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(!out.status.success(), "every check failed: {said}");
        assert!(!said.contains(secret) && !said.contains("5d1f0a9c"), "the key is never printed: {said}");
        assert!(said.matches("[redacted:ECHO_API_KEY]").count() >= 4, "each dialect's echo names the key's variable: {said}");
    }
}
