//! Embeds the project's agent definitions (`agents/*.toml`) in the agents crate, so the
//! binary knows the built-in agents wherever it runs.

use std::path::PathBuf;

/// The list of agents that cannot run here: not a definition.
const UNAVAILABLE: &str = "unavailable.toml";

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let dir = manifest_dir.ancestors().nth(2).expect("the agents crate lives in crates/ of the workspace").join("agents");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml") && !p.ends_with(UNAVAILABLE))
        .collect();
    files.sort();
    let mut out = String::from("/// The project's agent definitions: (file name, text).\npub const BUILT_IN: &[(&str, &str)] = &[\n");
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        let name = f.file_name().expect("a file").to_string_lossy();
        out.push_str(&format!("    ({name:?}, include_str!({:?})),\n", f.display().to_string()));
    }
    out.push_str("];\n");
    let unavailable = dir.join(UNAVAILABLE);
    println!("cargo:rerun-if-changed={}", unavailable.display());
    out.push_str(&format!("/// The agents that cannot run here, and why (`agents/{UNAVAILABLE}`).\npub const UNAVAILABLE: &str = include_str!({:?});\n", unavailable.display().to_string()));
    let dest = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("built_in_agents.rs");
    std::fs::write(dest, out).expect("writing the embedded agents' list");
}
