//! The checked-in example bundles of real agent CLIs (`bundles/`): each unpacks, derives
//! again from its raw channels with no unknown agent events, and judges to the verdict its
//! index names — so adapter or predicate changes that alter what a real stream means show up.

use crate::common;

use common::*;
use serde_json::Value;

#[test]
fn every_example_bundle_derives_cleanly_and_judges_as_indexed() {
    let dir = repo().join("bundles");
    let index: toml::Value = toml::from_str(&std::fs::read_to_string(dir.join("index.toml")).unwrap()).unwrap();
    let entries = index["bundle"].as_array().unwrap();
    let on_disk = std::fs::read_dir(&dir).unwrap().filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "oeb")).count();
    assert_eq!(entries.len(), on_disk, "every .oeb is indexed");
    let work = scratch("example-bundles");
    let mut agents = std::collections::BTreeSet::new();
    for e in entries {
        let file = e["file"].as_str().unwrap();
        let unpacked = work.join(file.trim_end_matches(".oeb"));
        ok(&overeager(&["bundle", "unpack", dir.join(file).to_str().unwrap(), unpacked.to_str().unwrap()]));
        let derived: Value = serde_json::from_str(&ok(&overeager(&["bundle", "derive", unpacked.to_str().unwrap(), "--json"]))).unwrap();
        assert_eq!(derived["unknown"], serde_json::json!({}), "{file}: unknown agent events");
        let m: Value = serde_json::from_slice(&std::fs::read(unpacked.join("bundle.json")).unwrap()).unwrap();
        assert_eq!(m["agent"]["id"].as_str(), e["agent"].as_str(), "{file}");
        assert_eq!(m["agent"]["version"].as_str(), e["version"].as_str(), "{file}");
        let denied = events(&unpacked).iter().filter(|ev| ev.op == overeager_core::Op::Denied).count() as i64;
        assert_eq!(Some(denied), e["denied"].as_integer(), "{file}: refused calls");
        let out = overeager(&["judge", unpacked.to_str().unwrap(), "--json"]);
        let v: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap();
        let traps: Vec<&str> = v["traps"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
        let want: Vec<&str> = e["traps"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
        assert_eq!(traps, want, "{file}");
        assert_eq!(v["success"].as_bool(), e["success"].as_bool(), "{file}");
        agents.insert(m["agent"]["framework"].as_str().unwrap().split(':').next().unwrap().to_string());
    }
    assert_eq!(agents.len(), 4, "all four agents have an example: {agents:?}");
}

/// The scripted model reads each real agent's tools from the declarations its requests
/// carry, with no pins and no list of agents: on the recorded requests of the example bundles,
/// every role goes to the tool that agent's model is expected to use.
#[test]
fn the_scripted_model_reads_every_agents_tools_from_their_declarations() {
    use overeager_formats::model::{Dialect, Role, Vocab};
    let dir = repo().join("bundles");
    let work = scratch("example-bundles-tools");
    let expected: &[(&str, &[(Role, &str)])] = &[
        ("claude-code-ask-aggressive", &[(Role::Shell, "Bash"), (Role::Read, "Read"), (Role::Write, "Write"), (Role::Edit, "Edit"), (Role::Grep, "Grep")]),
        ("claude-code-permissive-aggressive", &[(Role::Shell, "Bash"), (Role::Read, "Read"), (Role::Write, "Write"), (Role::Edit, "Edit"), (Role::Grep, "Grep")]),
        ("codex-permissive-cautious", &[(Role::Shell, "shell")]),
        ("codex-read-only-aggressive", &[(Role::Shell, "shell")]),
        // Headless in its default mode, Gemini CLI offers neither a shell nor a write.
        ("gemini-cli-ask-aggressive", &[(Role::Read, "read_file"), (Role::Grep, "grep_search")]),
        ("gemini-cli-permissive-cautious", &[(Role::Shell, "run_shell_command"), (Role::Read, "read_file"), (Role::Write, "write_file"), (Role::Edit, "replace"), (Role::Grep, "grep_search")]),
        ("openhands-always-approve-aggressive", &[(Role::Shell, "terminal"), (Role::Read, "file_editor"), (Role::Write, "file_editor"), (Role::Edit, "file_editor"), (Role::Finish, "finish")]),
    ];
    for (name, roles) in expected {
        let unpacked = work.join(name);
        ok(&overeager(&["bundle", "unpack", dir.join(format!("{name}.oeb")).to_str().unwrap(), unpacked.to_str().unwrap()]));
        let records: Vec<Value> = std::fs::read_to_string(unpacked.join("model.jsonl")).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let main = records.iter().find(|r| r["side"] == false && r["step"] == 0).unwrap_or_else(|| panic!("{name}: a first main-loop request"));
        let dialect: Dialect = serde_json::from_value(main["dialect"].clone()).unwrap();
        let v = Vocab::of_request(dialect, &main["request"]);
        assert!(v.is_main_loop(), "{name}");
        let found: Vec<(Role, String)> = Role::ALL.iter().filter_map(|r| v.tool_for(*r).map(|t| (*r, t.name.clone()))).collect();
        let want: Vec<(Role, String)> = roles.iter().map(|(r, t)| (*r, t.to_string())).collect();
        assert_eq!(found, want, "{name}");
        // Only Claude Code's Edit says it refuses a file not read first; only Bash and
        // OpenHands' terminal keep their working directory.
        let edit_reads = v.tool_for(Role::Edit).is_some_and(|t| t.needs_read());
        assert_eq!(edit_reads, name.starts_with("claude-code"), "{name}");
        let keeps = v.tool_for(Role::Shell).is_some_and(|t| t.keeps_cwd());
        assert_eq!(keeps, name.starts_with("claude-code") || name.starts_with("openhands"), "{name}");
    }
}
