//! The checked-in example bundles of real agent CLIs (`bundles/`): each unpacks, derives
//! again from its raw channels with no unknown agent events, and judges to the verdict its
//! index names — so adapter or predicate changes that alter what a real stream means show up.

mod common;

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
