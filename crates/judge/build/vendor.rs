//! Embeds what a new predicate crate gets beside its own sources (`scaffold::create`), so that
//! `overeager predicate new` works with the binary alone: the predicate SDK and the core crate it
//! depends on (their manifests made standalone, their sources as built), the WIT interfaces, the
//! workspace's lock file (the versions the SDK was tested with) and the example bundles.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Where each embedded tree comes from in the workspace and goes to in a new crate.
const TREES: &[(&str, &str)] = &[("core/src", "vendor/overeager-core/src"), ("predicates/sdk/src", "vendor/overeager-predicate-sdk/src"), ("predicates/wit", "vendor/wit")];

/// Writes `vendored.rs` into `out`: the files of `root` (the workspace) a new crate gets.
pub fn write(root: &Path, out: &Path) {
    let workspace: toml::Table = toml::from_str(&read(&root.join("Cargo.toml"))).unwrap();

    let mut files: Vec<(String, PathBuf)> = Vec::new();
    for (from, to) in TREES {
        let base = root.join(from);
        println!("cargo:rerun-if-changed={}", base.display());
        for file in walk(&base) {
            let rel = file.strip_prefix(&base).unwrap().to_str().unwrap().to_string();
            // Test data of core's own unit tests is not needed to build it.
            if rel.contains("testdata/") {
                continue;
            }
            files.push((format!("{to}/{rel}"), file));
        }
    }
    for (crate_dir, to) in [("core", "vendor/overeager-core"), ("predicates/sdk", "vendor/overeager-predicate-sdk")] {
        let source = root.join(crate_dir).join("Cargo.toml");
        println!("cargo:rerun-if-changed={}", source.display());
        let standalone = standalone_manifest(&read(&source), &workspace, &source);
        let written = out.join(format!("{}.Cargo.toml", to.replace('/', "_")));
        std::fs::write(&written, standalone).unwrap();
        files.push((format!("{to}/Cargo.toml"), written));
    }
    let lock = root.join("Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    files.push(("Cargo.lock".into(), lock));
    let bundles = root.join("bundles");
    println!("cargo:rerun-if-changed={}", bundles.display());
    for file in walk(&bundles).into_iter().filter(|f| f.extension().is_some_and(|e| e == "oeb")) {
        files.push((format!("bundles/{}", file.file_name().unwrap().to_str().unwrap()), file));
    }
    files.sort();

    let mut code = String::from("/// The files a new predicate crate gets besides its own: (path in the crate, contents).\npub const VENDORED: &[(&str, &[u8])] = &[\n");
    for (to, from) in &files {
        writeln!(code, "    ({to:?}, include_bytes!({:?})),", from.display().to_string()).unwrap();
    }
    code.push_str("];\n");
    std::fs::write(out.join("vendored.rs"), code).unwrap();
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}

/// The crate's manifest with every `workspace = true` replaced by the workspace's value, the
/// workspace's own crates by paths beside it, and no dev-dependencies (its tests are not
/// vendored): a manifest that builds outside the workspace.
fn standalone_manifest(text: &str, workspace: &toml::Table, source: &Path) -> String {
    let mut manifest: toml::Table = toml::from_str(text).unwrap_or_else(|e| panic!("{}: {e}", source.display()));
    let ws = workspace["workspace"].as_table().unwrap();
    let package_defaults = ws["package"].as_table().unwrap();
    let ws_deps = ws["dependencies"].as_table().unwrap();
    let package = manifest.get_mut("package").and_then(|p| p.as_table_mut()).unwrap();
    for (key, value) in package.iter_mut() {
        if value.as_table().and_then(|t| t.get("workspace")).and_then(|w| w.as_bool()) == Some(true) {
            *value = package_defaults.get(key).unwrap_or_else(|| panic!("{}: package.{key} is not in [workspace.package]", source.display())).clone();
        }
    }
    package.insert("publish".into(), false.into());
    manifest.remove("dev-dependencies");
    if let Some(deps) = manifest.get_mut("dependencies").and_then(|d| d.as_table_mut()) {
        for (name, value) in deps.iter_mut() {
            let Some(local) = value.as_table().filter(|t| t.get("workspace").and_then(|w| w.as_bool()) == Some(true)).cloned() else { continue };
            let mut resolved = match ws_deps.get(name).unwrap_or_else(|| panic!("{}: dependency {name} is not in [workspace.dependencies]", source.display())) {
                toml::Value::String(version) => toml::Table::from_iter([("version".to_string(), toml::Value::String(version.clone()))]),
                toml::Value::Table(t) => t.clone(),
                other => panic!("[workspace.dependencies] {name}: unexpected {other}"),
            };
            if resolved.contains_key("path") {
                resolved.insert("path".into(), format!("../{name}").into());
            }
            for (k, v) in local {
                match k.as_str() {
                    "workspace" => {}
                    "features" => {
                        let mut features = resolved.get("features").and_then(|f| f.as_array()).cloned().unwrap_or_default();
                        features.extend(v.as_array().cloned().unwrap_or_default());
                        resolved.insert("features".into(), features.into());
                    }
                    _ => {
                        resolved.insert(k, v);
                    }
                }
            }
            *value = toml::Value::Table(resolved);
        }
    }
    format!("# Made standalone from overeager's workspace by `overeager predicate new`; do not edit.\n{}", toml::to_string(&manifest).unwrap())
}
