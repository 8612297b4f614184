//! The commands the README and `docs/` show, checked against this binary's command line.

use std::path::{Path, PathBuf};

use clap::Parser;

use super::Cli;

/// The extraction the suite's check that they run reads too (it uses the blocks as well).
#[allow(dead_code)]
#[path = "../tests/suite/common/documented.rs"]
mod documented;

use documented::{Documented, commands};

/// The Markdown pages that show `overeager` commands.
fn pages() -> Vec<PathBuf> {
    documented::pages(Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root"))
}

/// The long flag of the argument, anywhere in the command tree, that reads environment
/// variable `var` (`OVEREAGER_TOKEN` → `token`).
fn flag_of_env(cmd: &clap::Command, var: &str) -> Option<String> {
    cmd.get_arguments()
        .find(|a| a.get_env().is_some_and(|e| e == var))
        .and_then(|a| a.get_long().map(str::to_string))
        .or_else(|| cmd.get_subcommands().find_map(|s| flag_of_env(s, var)))
}

/// The commands the README and `docs/` show parse as this binary's command line: a renamed
/// subcommand or flag fails here, not in a reader's shell. A `VAR=value` before a command
/// counts as the flag that reads `VAR` (the test leaves its own environment alone); one that
/// no flag reads (a provider's key, `KUBECONFIG`) is the command's environment, not its line.
#[test]
fn every_documented_command_parses() {
    let cli = <Cli as clap::CommandFactory>::command();
    let mut failures = Vec::new();
    let mut seen = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("a readable page");
        for Documented { line, env, mut words } in commands(&text) {
            seen += 1;
            let shown = words.join(" ");
            words.extend(env.iter().filter_map(|(var, value)| Some(format!("--{}={value}", flag_of_env(&cli, var)?))));
            match Cli::try_parse_from(&words) {
                Ok(_) => {}
                Err(e) if matches!(e.kind(), clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion) => {}
                Err(e) => failures.push(format!("{}:{line}: `{shown}`: {}", page.display(), e.to_string().lines().take(3).collect::<Vec<_>>().join(" "))),
            }
        }
    }
    assert!(seen >= 10, "only {seen} commands found in the README and docs/: is the extraction broken?");
    assert!(failures.is_empty(), "documented commands that do not parse:\n{}", failures.join("\n"));
}

/// The repository's own files a documented command reads (a plan, a scenario, a bundle, an
/// agent definition) exist: a command naming a plan that is not shipped fails in a reader's
/// shell as surely as a misspelt flag.
#[test]
fn the_files_documented_commands_name_exist() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root");
    let shipped = ["plans/", "scenarios/", "bundles/", "agents/", "predicates/"];
    let mut failures = Vec::new();
    let mut seen = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("a readable page");
        for Documented { line, words, .. } in commands(&text) {
            for w in &words {
                // `--flag=path` names a path as well as `--flag path`.
                let path = w.rsplit_once('=').map_or(w.as_str(), |(_, v)| v);
                if shipped.iter().any(|d| path.starts_with(d)) {
                    seen += 1;
                    if !exists(&repo.join(path)) {
                        failures.push(format!("{}:{line}: `{path}` is not in the repository", page.display()));
                    }
                }
            }
        }
    }
    assert!(seen >= 5, "only {seen} repository files named by documented commands: is the extraction broken?");
    assert!(failures.is_empty(), "documented commands that do not parse:\n{}", failures.join("\n"));
}

/// Whether `path` exists; a `*` in its last part (`bundles/*.oeb`, as a shell expands it)
/// stands for any run of characters, and some file must match.
fn exists(path: &Path) -> bool {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if !name.contains('*') {
        return path.exists();
    }
    let parts: Vec<&str> = name.split('*').collect();
    let matches = |candidate: &str| {
        let (first, last) = (parts[0], parts[parts.len() - 1]);
        if !candidate.starts_with(first) || !candidate.ends_with(last) || candidate.len() < first.len() + last.len() {
            return false;
        }
        let mut rest = &candidate[first.len()..candidate.len() - last.len()];
        parts[1..parts.len() - 1].iter().all(|p| rest.find(p).map(|at| rest = &rest[at + p.len()..]).is_some())
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::read_dir(dir).into_iter().flatten().flatten().any(|e| matches(&e.file_name().to_string_lossy()))
}
