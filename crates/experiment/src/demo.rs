//! The plans of `overeager demo`, the main job: the scripted plays and simulated policies on a
//! small synthesized bench, and the real agent CLIs against the scripted model.

/// The demo's second experiment: real agent CLIs against the scripted model playing the
/// aggressive play, on the kept variant of the bench's first `scenarios` scenarios, one
/// replicate (a real CLI takes seconds a run). Each agent runs the cells its definition's
/// `[demo]` names: usually its own default and its permissive mode, so the effect of the
/// permission gate is visible.
pub fn real_plan(agents: &[&overeager_agents::definition::Recipe], scenarios: usize, seed: u64) -> String {
    let mut plan = format!(
        "# Written by `overeager demo`.\nid = \"demo-real\"\ntitle = \"Demo: real agent CLIs (real CLI · scripted model)\"\nscenarios = \"bench\"\n\
         limit = {scenarios}\nvariants = [\"consent_kept\"]\nreplicates = 1\nexecutor = \"local\"\ntimeout = \"120s\"\nseed = {seed}\n"
    );
    for r in agents {
        for policy in &r.demo.policies {
            plan.push_str(&format!(
                "\n[[agent]]\nagent = \"{id}:{policy}:{model}aggressive\"\nframework = \"{id}:{policy} (real CLI)\"\nmodel = \"scripted model · aggressive\"\n",
                id = r.id,
                model = overeager_agents::SCRIPTED_MODEL,
            ));
        }
    }
    plan
}

/// The agents the demo runs on the real local model by default: one of each way a chat
/// agent talks (a tool-calling loop, Aider's text dialect, Codex CLI's streamed calls).
pub const LOCAL_MODEL_AGENTS: [&str; 3] = ["mini-swe-agent:permissive", "aider:default", "codex:permissive"];

/// The demo's "real CLI · real local model" plan: `agents` (`<agent>:<policy>`) on the
/// model `overeager model local` serves, on the first `scenarios` of the bench, uncontained on
/// the local executor. Each call takes tens of seconds on two cores, so it is small.
pub fn local_model_plan(agents: &[String], scenarios: usize, seed: u64) -> String {
    let model = format!("{}/{}", overeager_agents::local_model::PROVIDER, overeager_agents::local_model::MODEL);
    let mut plan = format!(
        "# Written by `overeager demo --local-model`.\nid = \"demo-local-model\"\ntitle = \"Demo: real agent CLIs on a real local model (SmolLM2-135M)\"\nscenarios = \"bench\"\n\
         limit = {scenarios}\nvariants = [\"consent_kept\"]\nreplicates = 1\nexecutor = \"local\"\ntimeout = \"480s\"\nseed = {seed}\n"
    );
    for agent in agents {
        plan.push_str(&format!("\n[[agent]]\nagent = \"{agent}:{model}\"\nframework = \"{agent} (real CLI)\"\nmodel = \"{model} (real local model)\"\n"));
    }
    plan
}

/// Installs the demo's real CLIs (every agent whose definition does not skip it, or exactly
/// the agents in `only` when it names any; once per machine) and says in one line which it
/// runs and which it skips, and why. An id in `only` that names no agent is an error that
/// lists the agents there are.
pub fn real_agents(only: &[String]) -> anyhow::Result<Vec<&'static overeager_agents::definition::Recipe>> {
    let mut run = Vec::new();
    let mut skipped = Vec::new();
    let all = match overeager_agents::definition::all() {
        Ok(all) => all,
        Err(e) => {
            eprintln!("demo: real CLIs: none; {e:#}");
            return Ok(run);
        }
    };
    if let Some(unknown) = only.iter().find(|id| !all.iter().any(|r| &r.id == *id)) {
        let known: Vec<&str> = all.iter().map(|r| r.id.as_str()).collect();
        anyhow::bail!("--real-agents names `{unknown}`, which is no agent here; the agents are: {}", known.join(", "));
    }
    for r in all {
        if !only.is_empty() {
            if !only.contains(&r.id) {
                continue;
            }
        } else if let Some(why) = &r.demo.skip {
            skipped.push(format!("{} ({why}; try `overeager run --agent {}:{}:{}aggressive`)", r.id, r.id, r.policies[0].id, overeager_agents::SCRIPTED_MODEL));
            continue;
        }
        match overeager_agents::install::ensure(r, r.package.version()) {
            Ok(_) => run.push(r),
            Err(e) => skipped.push(format!("{} ({e:#})", r.id)),
        }
    }
    let names: Vec<&str> = run.iter().map(|r| r.id.as_str()).collect();
    eprintln!("demo: real CLIs: {}; skipped: {}", if names.is_empty() { "none".into() } else { names.join(", ") }, if skipped.is_empty() { "none".into() } else { skipped.join("; ") });
    Ok(run)
}

/// The demo plan: the three scripted plays (which also validate each scenario) and two
/// simulated policies, on both prompt variants.
pub fn plan(replicates: u32, seed: u64) -> String {
    let mut plan = format!(
        "# Written by `overeager demo`.\nid = \"demo\"\ntitle = \"Demo: scripted plays and simulated policies on a small bench\"\nscenarios = \"bench\"\n\
         variants = [\"consent_kept\", \"consent_stripped\"]\nreplicates = {replicates}\nexecutor = \"local\"\ntimeout = \"60s\"\nseed = {seed}\n"
    );
    for (agent, framework, model) in [
        ("scripted:cautious", "scripted", "cautious"),
        ("scripted:moderate", "scripted", "moderate"),
        ("scripted:aggressive", "scripted", "aggressive"),
        ("sim:permissive", "sim-permissive", "sim-base"),
        ("sim:ask", "sim-ask", "sim-base"),
    ] {
        plan.push_str(&format!("\n[[agent]]\nagent = \"{agent}\"\nframework = \"{framework}\"\nmodel = \"{model}\"\n"));
    }
    plan
}
