//! `overeager agent list` and `overeager agent recipe`: the real agents' recipes.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serde_json::json;

use crate::run::{self, agents};

/// Arguments of `overeager agent list`.
#[derive(Args)]
pub struct ListArgs {
    /// Print the recipes as JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `overeager agent recipe`.
#[derive(Args)]
pub struct RecipeArgs {
    /// The agent: claude-code, codex, gemini-cli or openhands.
    agent: String,
    /// The build context directory to create (new or empty).
    #[arg(long)]
    out: PathBuf,
}

pub fn list(args: &ListArgs) -> Result<ExitCode> {
    if args.json {
        let v: Vec<_> = agents::RECIPES
            .iter()
            .map(|r| json!({"recipe": r, "image": r.image(), "cells": r.policies.iter().map(|p| format!("{}:{}", r.id, p.id)).collect::<Vec<_>>(), "adapter_targets": r.format().target_versions()}))
            .collect();
        super::print_json(&json!(v));
        return Ok(ExitCode::SUCCESS);
    }
    for r in agents::RECIPES {
        let pkg = match r.package {
            agents::Package::Npm { name, version } => format!("npm {name}@{version}"),
            agents::Package::Pip { name, version } => format!("pip {name}=={version}"),
        };
        println!("{:<12} {} — {pkg}, image {}", r.id, r.name, r.image());
        for p in r.policies {
            println!("  {:<28} {:<48} {}", format!("{}:{}{}", r.id, p.id, if p.default { " *" } else { "" }), p.flags.join(" "), p.summary);
        }
        println!("  key: {}   egress: {}", r.key_env.join(" | "), r.api_hosts.join(", "));
    }
    println!("\n* the agent's own default. Run a cell with `--executor docker --agent <cell>:<model>`.");
    Ok(ExitCode::SUCCESS)
}

pub fn recipe(args: &RecipeArgs) -> Result<ExitCode> {
    let r = agents::recipe(&args.agent)?;
    let shim = run::locate_shim().map_err(anyhow::Error::msg)?;
    agents::write_context(r, &shim, &args.out)?;
    println!("wrote the build context of {} {} to {}", r.name, r.package.version(), args.out.display());
    println!("build it with: docker build -t {} {}", r.image(), args.out.display());
    Ok(ExitCode::SUCCESS)
}
