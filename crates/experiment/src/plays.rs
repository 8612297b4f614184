//! The validator's plays, really run: each of a scenario's three scripted plays (or a real
//! CLI's runs of them on the scripted model) executed, audited and judged, for the
//! generator's admission decision ([`overeager_gen::validate::decide`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use overeager_core::{PlayKind, Variant, Verdict};
use overeager_scenario::LoadedScenario;
use overeager_gen::validate::{PlayDifference, PlayResult, Rejection, Validation, Validator, decide, play_result};
use overeager_formats::framework::compare;
use overeager_judge::{Judge, input};
use overeager_run::{AgentSpec, Executor};
use overeager_store::Store;
use overeager_store::scenarios::{PlayOutcome, Validation as StoredValidation};

/// The validator the generator is handed: plays run on `executor` with `shim`, judged by
/// `judge`, through `cell` if one is named.
pub struct PlayValidator<'a> {
    pub cell: Option<String>,
    pub judge: &'a Judge,
    pub executor: &'a Executor,
    pub shim: &'a Path,
}

impl Validator for PlayValidator<'_> {
    fn validate(&self, s: &LoadedScenario, workdir: &Path) -> Validation {
        validate_with(s, self.cell.as_deref(), self.judge, self.executor, self.shim, workdir)
    }

    fn cell(&self) -> Option<&str> {
        self.cell.as_deref()
    }

    fn scratch_dir(&self) -> PathBuf {
        overeager_run::scratch_dir()
    }
}

/// The agent that plays `play` for the validator: the scripted reference agent, or the cell
/// `<agent>[@<version>]:<policy>` driven by the scripted model.
pub fn player(cell: Option<&str>, play: PlayKind) -> Result<AgentSpec, String> {
    match cell {
        None => Ok(AgentSpec::Scripted(play)),
        Some(c) => {
            let not_a_cell = || format!("`{c}` is not a real-CLI cell: use <agent>[@<version>]:<policy>, e.g. claude-code:permissive (see `overeager agent list`)");
            match format!("{c}:{}{play}", overeager_agents::SCRIPTED_MODEL).parse::<AgentSpec>() {
                Ok(spec @ AgentSpec::Agent { .. }) => Ok(spec),
                // `scripted:<play>` and `sim:<policy>` are agents, but no CLI to play through.
                Err(_) if overeager_core::AgentCell::parse(c).is_ok_and(|cell| cell.is_harness()) => Err(not_a_cell()),
                Ok(_) => Err(not_a_cell()),
                Err(e) => Err(e),
            }
        }
    }
}

/// Runs `spec` into `out` and judges it, with the merged events the verdict cites.
pub fn run_and_judge(s: &LoadedScenario, spec: AgentSpec, timeout: Duration, judge: &Judge, executor: &Executor, shim: &Path, out: &Path) -> anyhow::Result<(Verdict, Vec<overeager_core::Event>)> {
    let bundle = overeager_audit::run_one(s, spec, Variant::ConsentKept, 0, timeout, executor, shim, out)?;
    let b = input::of_bundle(bundle, out.display().to_string())?;
    Ok((judge.judge(&b), b.events().to_vec()))
}

/// The time limit of one validation run: a real CLI starts slower than the scripted agent.
fn timeout_of(spec: &AgentSpec) -> Duration {
    Duration::from_secs(if matches!(spec, AgentSpec::Agent { .. }) { 150 } else { 120 })
}

/// Runs the three plays of a scenario on `executor` in `workdir`, judges them, and decides.
/// With a `cell` (see [`player`]) the plays go through that real CLI instead of the scripted
/// agent; the scripted plays then run too, and every play whose run differs from its
/// scripted one is listed with whose doing that is.
pub fn validate_with(s: &LoadedScenario, cell: Option<&str>, judge: &Judge, executor: &Executor, shim: &Path, workdir: &Path) -> Validation {
    let mut results = Vec::with_capacity(3);
    let mut failure = None;
    let mut differences = Vec::new();
    for play in PlayKind::ALL {
        let out = workdir.join(play.as_str());
        let designed = &s.scenario.plays.get(play).fires;
        let judged = player(cell, play)
            .map_err(anyhow::Error::msg)
            .and_then(|spec| Ok((spec.attribution_rules(), run_and_judge(s, spec.clone(), timeout_of(&spec), judge, executor, shim, &out)?)));
        match judged {
            Ok((rules, (v, events))) => {
                if let Some(c) = cell {
                    let scripted = AgentSpec::Scripted(play);
                    let reference = run_and_judge(s, scripted.clone(), timeout_of(&scripted), judge, executor, shim, &workdir.join(format!("{play}-scripted")));
                    match reference {
                        Ok((pv, play_events)) => {
                            if let Some(divergence) = compare(c, &rules, (&pv, &play_events), (&v, &events)) {
                                differences.push(PlayDifference { play, divergence });
                            }
                        }
                        Err(e) => {
                            failure = Some(Rejection::RunFailed { play, message: format!("the scripted play, run for comparison: {e:#}") });
                            break;
                        }
                    }
                }
                results.push(play_result(play, designed, &v));
            }
            Err(e) => {
                failure = Some(Rejection::RunFailed { play, message: format!("{e:#}") });
                break;
            }
        }
    }
    let declared: Vec<String> = s.scenario.traps.iter().map(|t| t.id.clone()).collect();
    let decision = match (failure, <[PlayResult; 3]>::try_from(results.clone())) {
        (Some(f), _) => Err(f),
        (None, Ok(plays)) => decide(&declared, &plays),
        (None, Err(_)) => unreachable!("three plays ran"),
    };
    let designed_mismatch = results.iter().filter(|p| p.fired != p.designed).map(|p| p.play).collect();
    let rejection = decision.err();
    Validation {
        scenario: s.scenario.id.clone(),
        admitted: rejection.is_none(),
        reason: rejection.as_ref().map(ToString::to_string),
        rejection,
        plays: results,
        designed_mismatch,
        agent: cell.map(str::to_string),
        differences,
    }
}

/// Records the validator's decision on each scenario of an experiment whose agents include the
/// three scripted plays: their first kept-variant replicate are the plays the validator runs.
/// Returns how many scenarios were decided.
pub fn record_validations(store: &mut Store, experiment: &str) -> anyhow::Result<usize> {
    let records = store.records(experiment)?;
    let mut plays: std::collections::BTreeMap<&str, [Option<&overeager_store::RunRecord>; 3]> = Default::default();
    for r in records.iter().filter(|r| r.variant == overeager_core::Variant::ConsentKept && r.replicate == 0 && r.framework == "scripted") {
        let Some(i) = PlayKind::ALL.iter().position(|k| r.agent == format!("scripted:{}", k.as_str())) else { continue };
        plays.entry(r.scenario_hash.as_str()).or_default()[i] = Some(r);
    }
    let mut n = 0;
    for (hash, found) in plays {
        let [Some(c), Some(m), Some(a)] = found else { continue };
        let Some(detail) = store.scenario_detail(hash)? else { continue };
        let declared: Vec<String> = detail.scenario.traps.iter().map(|t| t.id.clone()).collect();
        let result = |k: PlayKind, r: &overeager_store::RunRecord| PlayResult {
            play: k,
            fired: r.traps.iter().map(|(t, _)| t.clone()).collect::<BTreeSet<_>>(),
            success: r.success,
            errors: if r.complete { Vec::new() } else { vec!["a predicate had no answer".into()] },
            designed: detail.scenario.plays.get(k).fires.iter().cloned().collect(),
        };
        let results = [result(PlayKind::Cautious, c), result(PlayKind::Moderate, m), result(PlayKind::Aggressive, a)];
        let decision = decide(&declared, &results);
        let v = StoredValidation {
            admitted: decision.is_ok(),
            rejection: decision.err().map(|e| e.to_string()),
            plays: results
                .iter()
                .zip([c, m, a])
                .map(|(p, r)| PlayOutcome { play: p.play.as_str().into(), fired: p.fired.iter().cloned().collect(), success: p.success, run: Some(r.run.clone()) })
                .collect(),
            validated_us: overeager_core::now_us(),
        };
        store.put_validation(hash, &v)?;
        n += 1;
    }
    Ok(n)
}
