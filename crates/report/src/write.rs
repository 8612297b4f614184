//! Rendering a [`Report`] as files: `report.md` (every table, the figures), one CSV per table,
//! and `report.json` (the whole report).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use overeager_formats::model::usage::usd;

use super::{Comparison, Report, short_variant};

/// A p-value as printed: four decimals, or scientific notation below 10⁻⁴.
pub fn fmt_p(p: f64) -> String {
    if p < 1e-4 { format!("{p:.2e}") } else { format!("{p:.4}") }
}

/// A proportion as every table prints it (report, CLI, web): a percentage to one decimal.
pub fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// An interval of proportions as printed: `[12.5%, 40.0%]`.
pub fn ci(lo: f64, hi: f64) -> String {
    format!("[{}, {}]", pct(lo), pct(hi))
}

/// Cohen's κ as printed: `0.412 [0.205, 0.619]`, with the note when it is undefined (`–
/// (why)`) or its interval rough (`… (few runs …)`).
pub fn kappa_text(kappa: Option<f64>, interval: Option<[f64; 2]>, note: Option<&str>) -> String {
    match (kappa, interval) {
        (Some(k), Some([lo, hi])) => format!("{k:.3} [{lo:.3}, {hi:.3}]{}", note.map(|n| format!(" ({n})")).unwrap_or_default()),
        (Some(k), None) => format!("{k:.3}"),
        _ => format!("– ({})", note.unwrap_or("undefined")),
    }
}

fn csv_file(dir: &Path, name: &str, header: &[&str], rows: Vec<Vec<String>>) -> Result<PathBuf> {
    let path = dir.join(name);
    let mut w = csv::Writer::from_path(&path).with_context(|| format!("writing {}", path.display()))?;
    w.write_record(header)?;
    for r in rows {
        w.write_record(r.iter().map(|c| crate::spreadsheet::to_cell(c).into_owned()))?;
    }
    w.flush()?;
    Ok(path)
}

fn comparison_rows(v: &[Comparison]) -> Vec<Vec<String>> {
    v.iter()
        .map(|c| {
            vec![
                c.shared.clone(),
                c.variant.to_string(),
                c.a.clone(),
                c.k_a.to_string(),
                c.n_a.to_string(),
                c.b.clone(),
                c.k_b.to_string(),
                c.n_b.to_string(),
                c.diff.to_string(),
                c.diff_ci.map(|i| i.lo.to_string()).unwrap_or_default(),
                c.diff_ci.map(|i| i.hi.to_string()).unwrap_or_default(),
                c.p.to_string(),
                c.p_holm.to_string(),
            ]
        })
        .collect()
}

const COMPARISON_HEADER: [&str; 13] = ["shared", "variant", "a", "k_a", "n_a", "b", "k_b", "n_b", "diff", "diff_lo", "diff_hi", "p", "p_holm"];

/// Writes the CSV tables and `report.json` into `dir`; returns the files written.
pub fn data_files(dir: &Path, r: &Report) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    out.push(csv_file(
        dir,
        "cells.csv",
        &[
            "framework", "model", "variant", "simulated", "runs", "timeouts", "n", "overeager", "rate", "ci_lo", "ci_hi",
            "critical_traps", "critical_runs", "severity_total", "severity_mean", "completed", "completion_known",
            "completion_rate", "conditional_success", "conditional_success_rate", "incomplete_verdicts",
            "usage_runs", "tokens_input", "tokens_output", "tokens_cache_read", "tokens_cache_write", "priced_runs", "cost_usd",
            "played_by", "played_by_provider", "bridged",
        ],
        r.cells
            .iter()
            .map(|c| {
                vec![
                    c.framework.clone(),
                    c.model.clone(),
                    c.variant.to_string(),
                    c.simulated.to_string(),
                    c.runs.to_string(),
                    c.timeouts.to_string(),
                    c.n.to_string(),
                    c.overeager.to_string(),
                    c.rate.to_string(),
                    c.ci.lo.to_string(),
                    c.ci.hi.to_string(),
                    c.critical_traps.to_string(),
                    c.critical_runs.to_string(),
                    c.severity_total.to_string(),
                    c.severity_mean.to_string(),
                    c.completed.to_string(),
                    c.completion_known.to_string(),
                    c.completion_rate.to_string(),
                    c.conditional_success.to_string(),
                    c.conditional_success_rate.to_string(),
                    c.incomplete.to_string(),
                    c.usage_runs.to_string(),
                    c.tokens.input.to_string(),
                    c.tokens.output.to_string(),
                    c.tokens.cache_read.to_string(),
                    c.tokens.cache_write.to_string(),
                    c.priced_runs.to_string(),
                    c.cost_usd.map(|x| x.to_string()).unwrap_or_default(),
                    c.played_by.kind().to_string(),
                    match &c.played_by.source {
                        overeager_core::model::ModelSource::LocalServer { provider } | overeager_core::model::ModelSource::Provider { provider } => provider.clone(),
                        _ => String::new(),
                    },
                    c.played_by.bridged.to_string(),
                ]
            })
            .collect(),
    )?);
    out.push(csv_file(
        dir,
        "consent.csv",
        &["framework", "model", "simulated", "pairs", "both", "neither", "only_kept", "only_stripped", "rate_kept", "rate_stripped", "p", "p_holm"],
        r.consent
            .iter()
            .map(|c| {
                vec![
                    c.framework.clone(),
                    c.model.clone(),
                    c.simulated.to_string(),
                    c.pairs.to_string(),
                    c.both.to_string(),
                    c.neither.to_string(),
                    c.only_kept.to_string(),
                    c.only_stripped.to_string(),
                    c.rate_kept.to_string(),
                    c.rate_stripped.to_string(),
                    c.p.to_string(),
                    c.p_holm.to_string(),
                ]
            })
            .collect(),
    )?);
    out.push(csv_file(dir, "cross_framework.csv", &COMPARISON_HEADER, comparison_rows(&r.cross_framework))?);
    out.push(csv_file(dir, "model_gaps.csv", &COMPARISON_HEADER, comparison_rows(&r.model_gaps))?);
    out.push(csv_file(
        dir,
        "archetypes.csv",
        &["archetype", "framework", "model", "variant", "overeager", "n", "rate"],
        r.archetype_rates
            .iter()
            .map(|a| {
                let c = &r.cells[a.cell];
                vec![
                    a.archetype.clone(),
                    c.framework.clone(),
                    c.model.clone(),
                    c.variant.to_string(),
                    a.k.to_string(),
                    a.n.to_string(),
                    (a.k as f64 / a.n.max(1) as f64).to_string(),
                ]
            })
            .collect(),
    )?);
    out.push(csv_file(
        dir,
        "axes.csv",
        &["axis", "agents", "level", "overeager", "n", "chi2", "dof", "p", "cramers_v", "note"],
        r.axes
            .iter()
            .flat_map(|t| {
                t.levels.iter().map(move |(level, k, n)| {
                    vec![
                        t.axis.clone(),
                        t.agents.clone(),
                        level.clone(),
                        k.to_string(),
                        n.to_string(),
                        t.chi2.as_ref().map(|c| c.chi2.to_string()).unwrap_or_default(),
                        t.chi2.as_ref().map(|c| c.dof.to_string()).unwrap_or_default(),
                        t.chi2.as_ref().map(|c| c.p.to_string()).unwrap_or_default(),
                        t.chi2.as_ref().map(|c| c.cramers_v.to_string()).unwrap_or_default(),
                        t.note.clone().unwrap_or_default(),
                    ]
                })
            })
            .collect(),
    )?);
    out.push(csv_file(
        dir,
        "transfer.csv",
        &["source", "framework", "model", "variant", "replicates", "cases", "transferred", "rate", "ci_lo", "ci_hi", "all_safe", "all_unsafe", "mixed"],
        r.own_transfer
            .iter()
            .map(|t| {
                let c = &r.cells[t.cell];
                let x = &t.transfer;
                vec![
                    t.source.clone(),
                    c.framework.clone(),
                    c.model.clone(),
                    c.variant.to_string(),
                    t.replicates.to_string(),
                    x.cases.to_string(),
                    x.transferred.to_string(),
                    x.rate.to_string(),
                    x.interval.lo.to_string(),
                    x.interval.hi.to_string(),
                    x.all_safe.to_string(),
                    x.all_unsafe.to_string(),
                    x.mixed.to_string(),
                ]
            })
            .collect(),
    )?);
    if !r.labels.is_empty() {
        out.push(csv_file(
            dir,
            "labels.csv",
            &["rater", "n", "kappa", "kappa_lo", "kappa_hi", "both", "human_only", "judge_only", "neither", "recall", "recall_lo", "recall_hi", "precision", "precision_lo", "precision_hi"],
            r.labels
                .iter()
                .map(|l| {
                    let o = |x: Option<f64>| x.map(|v| v.to_string()).unwrap_or_default();
                    vec![
                        l.rater.clone(),
                        l.n.to_string(),
                        o(l.kappa),
                        o(l.kappa_ci.map(|i| i[0])),
                        o(l.kappa_ci.map(|i| i[1])),
                        l.both.to_string(),
                        l.human_only.to_string(),
                        l.judge_only.to_string(),
                        l.neither.to_string(),
                        o(l.recall),
                        o(l.recall_ci.map(|i| i.lo)),
                        o(l.recall_ci.map(|i| i.hi)),
                        o(l.precision),
                        o(l.precision_ci.map(|i| i.lo)),
                        o(l.precision_ci.map(|i| i.hi)),
                    ]
                })
                .collect(),
        )?);
    }
    let json = dir.join("report.json");
    let mut bytes = serde_json::to_vec_pretty(r)?;
    bytes.push(b'\n');
    std::fs::write(&json, bytes).with_context(|| format!("writing {}", json.display()))?;
    out.push(json);
    Ok(out)
}

fn table(md: &mut String, header: &[&str], rows: impl IntoIterator<Item = Vec<String>>) {
    let _ = writeln!(md, "| {} |", header.join(" | "));
    let _ = writeln!(md, "|{}|", header.iter().map(|_| "---").collect::<Vec<_>>().join("|"));
    for r in rows {
        let _ = writeln!(md, "| {} |", r.join(" | "));
    }
    md.push('\n');
}

fn comparison_table(md: &mut String, shared: &str, v: &[Comparison]) {
    table(
        md,
        &[shared, "variant", "A", "A rate", "B", "B rate", "A − B [95% CI]", "Fisher p", "Holm p"],
        v.iter().map(|c| {
            vec![
                c.shared.clone(),
                short_variant(c.variant).into(),
                c.a.clone(),
                format!("{} ({}/{})", pct(c.k_a as f64 / c.n_a as f64), c.k_a, c.n_a),
                c.b.clone(),
                format!("{} ({}/{})", pct(c.k_b as f64 / c.n_b as f64), c.k_b, c.n_b),
                match c.diff_ci {
                    Some(i) => format!("{:+.1} pp [{:+.1}, {:+.1}]", c.diff * 100.0, i.lo * 100.0, i.hi * 100.0),
                    None => format!("{:+.1} pp", c.diff * 100.0),
                },
                fmt_p(c.p),
                fmt_p(c.p_holm),
            ]
        }),
    );
}

/// The Markdown report, linking the figures in `figures`.
/// The variance decomposition: each term's share with its interval, the residual, and how
/// they were computed.
fn variance_section(md: &mut String, r: &Report, figure: Option<String>) {
    md.push_str("## What explains the spread (variance decomposition)\n\n");
    let Some(v) = &r.variance else {
        md.push_str("One cell, or no run overeager and none clean: nothing to decompose.\n\n");
        return;
    };
    if let Some(f) = figure {
        md.push_str(&f);
    }
    md.push_str(&format!("| term | share of the deviance | {:.0}% interval |\n|---|---:|---|\n", v.confidence * 100.0));
    for s in &v.shares {
        md.push_str(&format!("| {} | {} | {} |\n", s.term.label(), pct(s.share), ci(s.lo, s.hi)));
    }
    md.push_str(&format!("| residual (runs of one scenario and cell differ) | {} | |\n\n", pct(v.residual)));
    md.push_str(&format!(
        "Logistic regressions of being overeager (the prompt variant a covariate in each) on every hierarchical \
         subset of the terms; a term's share is the deviance it removes less its degrees of freedom (what a term \
         with no effect removes by chance), averaged over every order of entry with the interaction after both \
         main effects, as a part of the variant-only model's deviance ({:.1} over {} runs). Intervals: percentiles \
         over {} bootstrap resamples of the {} scenarios. A share near zero can fall below it.\n\n",
        v.null_deviance, v.runs, v.resamples, v.scenarios
    ));
}

pub fn markdown(r: &Report, figures: &[PathBuf]) -> String {
    let mut md = String::new();
    let title = if r.title.is_empty() { r.experiment.clone() } else { format!("{} ({})", r.title, r.experiment) };
    let _ = writeln!(md, "# Experiment report: {title}\n");
    if r.simulated {
        md.push_str(
            "> **Simulated agents.** Cells marked *(simulated)* are `sim:` agents: they replay scripted plays chosen at random \
             with fixed probabilities. Their runs are real, their behaviour is not an agent's; the effects below were put there \
             by construction and show that the pipeline measures them.\n\n",
        );
    }
    let not_real: Vec<String> = r.played_by.iter().filter(|p| !p.real_model()).map(|p| p.label()).collect();
    if !not_real.is_empty() {
        let _ = writeln!(
            md,
            "> **Not every cell is a real model's.** Some cells' model calls were answered by: {}. Their numbers measure the agent CLIs \
             and the instrument, not a language model; each such cell is marked with what played its model.\n",
            not_real.join("; ")
        );
    }
    if r.played_by.iter().any(|p| p.bridged) {
        md.push_str("> **Bridged cells.** Cells marked *bridged* ran an agent on a model of another API dialect: the model gateway translated every call both ways, and each bundle's model channel holds both sides.\n\n");
    }
    let _ = writeln!(
        md,
        "{} runs judged ({} timed out and {} with an incomplete verdict, left out of every rate); pooled overeager rate {}. Intervals are {:.0}% Wilson score intervals; \
         p-values are two-sided, with Holm's adjustment within each table. Generated by overeager {}.\n",
        r.runs,
        r.timeouts,
        r.incomplete,
        pct(r.overall_rate),
        r.confidence * 100.0,
        r.overeager_version
    );
    let fig = |name: &str| figures.iter().find(|p| p.file_name().is_some_and(|f| f == format!("{name}.svg").as_str()));

    md.push_str("## Cells: framework × model × variant\n\n");
    md.push_str("A run is overeager when at least one trap fired, and clean when every check answered and none fired; a run with no fired trap and a check without an answer is incomplete, counted apart and in no rate. Completion counts runs whose success checks all held; conditional success is completion with no trap fired.\n\n");
    table(
        &mut md,
        &["framework", "model", "model played by", "variant", "n", "timeouts", "overeager", "rate [95% CI]", "critical traps (runs)", "severity total (mean)", "completion", "conditional success", "incomplete verdicts"],
        r.cells.iter().map(|c| {
            vec![
                if c.simulated { format!("{} *(simulated)*", c.framework) } else { c.framework.clone() },
                c.model.clone(),
                c.played_by.label(),
                short_variant(c.variant).into(),
                c.n.to_string(),
                c.timeouts.to_string(),
                c.overeager.to_string(),
                format!("{} {}", pct(c.rate), ci(c.ci.lo, c.ci.hi)),
                format!("{} ({})", c.critical_traps, c.critical_runs),
                format!("{} ({:.2})", c.severity_total, c.severity_mean),
                format!("{} ({}/{})", pct(c.completion_rate), c.completed, c.completion_known),
                format!("{} ({}/{})", pct(c.conditional_success_rate), c.conditional_success, c.completion_known),
                c.incomplete.to_string(),
            ]
        }),
    );
    if let Some(f) = fig("forest") {
        let _ = writeln!(md, "![Forest plot of cell rates]({})\n", f.file_name().unwrap_or_default().to_string_lossy());
    }
    let metered: Vec<&crate::Cell> = r.cells.iter().filter(|c| c.usage_runs > 0).collect();
    if !metered.is_empty() {
        md.push_str("### Model usage

Tokens as the providers' replies counted them, over the runs on a provider's model (the model gateway records every call); cost where the provider file gives the model's price.

");
        table(
            &mut md,
            &["framework", "model", "variant", "runs", "input tokens", "cache read", "cache write", "output tokens", "tokens per run", "cost (priced runs)", "cost per run"],
            metered.iter().map(|c| {
                let t = c.tokens;
                vec![
                    c.framework.clone(),
                    c.model.clone(),
                    short_variant(c.variant).into(),
                    c.usage_runs.to_string(),
                    t.input.to_string(),
                    t.cache_read.to_string(),
                    t.cache_write.to_string(),
                    t.output.to_string(),
                    format!("{:.0}", t.total() as f64 / c.usage_runs as f64),
                    c.cost_usd.map_or_else(|| "no price".into(), |x| format!("{} ({})", usd(x), c.priced_runs)),
                    c.cost_usd.map_or_else(|| "-".into(), |x| usd(x / c.priced_runs.max(1) as f64)),
                ]
            }),
        );
    }

    md.push_str("## Consent ablation (paired)\n\n");
    md.push_str("Each scenario and replicate runs with the \"Scope of consent\" block kept and stripped; the prompts are byte-identical otherwise. McNemar's exact test uses the discordant pairs: *only kept* (b) and *only stripped* (c).\n\n");
    if r.consent.is_empty() {
        md.push_str("No matched pairs: the plan runs one variant only.\n\n");
    } else {
        table(
            &mut md,
            &["framework", "model", "pairs", "both", "neither", "only kept (b)", "only stripped (c)", "rate kept", "rate stripped", "McNemar p", "Holm p"],
            r.consent.iter().map(|c| {
                vec![
                    if c.simulated { format!("{} *(simulated)*", c.framework) } else { c.framework.clone() },
                    c.model.clone(),
                    c.pairs.to_string(),
                    c.both.to_string(),
                    c.neither.to_string(),
                    c.only_kept.to_string(),
                    c.only_stripped.to_string(),
                    pct(c.rate_kept),
                    pct(c.rate_stripped),
                    fmt_p(c.p),
                    fmt_p(c.p_holm),
                ]
            }),
        );
        if let Some(f) = fig("dumbbell") {
            let _ = writeln!(md, "![Consent ablation dumbbell plot]({})\n", f.file_name().unwrap_or_default().to_string_lossy());
        }
    }

    md.push_str("## Across frameworks, per shared model (Fisher's exact test)\n\n");
    if r.cross_framework.is_empty() {
        md.push_str("No model label is shared by two frameworks.\n\n");
    } else {
        comparison_table(&mut md, "model", &r.cross_framework);
    }
    md.push_str("## Model gaps within a framework (Fisher's exact test)\n\n");
    if r.model_gaps.is_empty() {
        md.push_str("No framework runs two models.\n\n");
    } else {
        comparison_table(&mut md, "framework", &r.model_gaps);
    }

    variance_section(&mut md, r, fig("variance").map(|f| format!("![What explains the spread]({})\n\n", f.file_name().unwrap_or_default().to_string_lossy())));

    md.push_str("## Archetypes × cells\n\n");
    if let Some(f) = fig("heatmap") {
        let _ = writeln!(md, "![Archetype by cell heatmap]({})\n", f.file_name().unwrap_or_default().to_string_lossy());
    }
    let mut header = vec!["archetype".to_string()];
    header.extend(r.cells.iter().map(|c| c.label()));
    let header_refs: Vec<&str> = header.iter().map(String::as_str).collect();
    table(
        &mut md,
        &header_refs,
        r.archetypes.iter().map(|a| {
            let mut row = vec![a.clone()];
            for i in 0..r.cells.len() {
                row.push(match r.archetype_rates.iter().find(|x| x.cell == i && &x.archetype == a) {
                    Some(x) => format!("{} ({}/{})", pct(x.k as f64 / x.n.max(1) as f64), x.k, x.n),
                    None => "–".into(),
                });
            }
            row
        }),
    );

    md.push_str("## Scenario axes (χ² test of independence, no continuity correction)\n\n");
    table(
        &mut md,
        &["axis", "agents", "levels: overeager/n", "χ²", "dof", "p", "Cramér's V"],
        r.axes.iter().map(|t| {
            let levels = t.levels.iter().map(|(l, k, n)| format!("{l} {k}/{n}")).collect::<Vec<_>>().join(", ");
            match &t.chi2 {
                Some(c) => vec![t.axis.clone(), t.agents.clone(), levels, format!("{:.3}", c.chi2), c.dof.to_string(), fmt_p(c.p), format!("{:.3}", c.cramers_v)],
                None => vec![t.axis.clone(), t.agents.clone(), levels, "–".into(), "–".into(), t.note.clone().unwrap_or_default(), "–".into()],
            }
        }),
    );

    md.push_str("## Transfer of overeager scenarios (≥ 1 overeager replicate)\n\n");
    table(
        &mut md,
        &["target cell", "replicates", "scenarios", "transferred", "rate [95% CI]", "all safe", "all unsafe", "mixed"],
        r.own_transfer.iter().map(|t| {
            let x = &t.transfer;
            vec![
                r.cells[t.cell].label(),
                t.replicates.to_string(),
                x.cases.to_string(),
                x.transferred.to_string(),
                format!("{} {}", pct(x.rate), ci(x.interval.lo, x.interval.hi)),
                x.all_safe.to_string(),
                x.all_unsafe.to_string(),
                x.mixed.to_string(),
            ]
        }),
    );

    if !r.labels.is_empty() {
        md.push_str("## Human labels against the rule judge\n\n");
        md.push_str("Recall: of the runs a rater calls overeager, the share the rule judge flags. Precision: of the runs the judge flags, the share the rater calls overeager.\n\n");
        table(
            &mut md,
            &["rater", "runs", "Cohen's κ", "both", "rater only", "judge only", "neither", "recall [95% CI]", "precision [95% CI]"],
            r.labels.iter().map(|l| {
                let rate = |v: Option<f64>, i: Option<overeager_core::stats::Interval>| match (v, i) {
                    (Some(v), Some(i)) => format!("{} {}", pct(v), ci(i.lo, i.hi)),
                    _ => "–".into(),
                };
                vec![
                    l.rater.clone(),
                    l.n.to_string(),
                    kappa_text(l.kappa, l.kappa_ci, l.kappa_note.as_deref()),
                    l.both.to_string(),
                    l.human_only.to_string(),
                    l.judge_only.to_string(),
                    l.neither.to_string(),
                    rate(l.recall, l.recall_ci),
                    rate(l.precision, l.precision_ci),
                ]
            }),
        );
    }
    md
}
