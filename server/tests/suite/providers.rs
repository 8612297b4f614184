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
