//! What an experiment will still use before it runs: each cell's runs to do times what a run
//! of the same agent spec used before in the store, or a stated cost per run.

use std::fmt;
use std::path::Path;

use anyhow::Result;
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use overeager_formats::model::usage::usd;
use overeager_store::Store;

/// One cell's share of an estimate.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CellCost {
    pub agent: String,
    pub framework: String,
    pub model: String,
    /// Runs still to do (all of them for a new experiment).
    pub runs: u64,
    pub tokens_per_run: Option<f64>,
    pub usd_per_run: Option<f64>,
    /// Tokens of the runs to do, rounded.
    pub tokens: Option<f64>,
    pub usd: Option<f64>,
    /// Where the figure per run comes from, in words (measured, stated or unknown).
    pub source: String,
}

/// The estimate of a plan against a store.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CostEstimate {
    pub experiment: String,
    /// The store holds this plan's experiment already; only its runs still to do count.
    pub resumed: bool,
    pub cells: Vec<CellCost>,
    /// Dollars of the cells with a figure.
    pub usd: f64,
    /// Tokens of the cells with a figure, rounded; unknown (not zero) when no cell has one.
    pub tokens: Option<f64>,
    /// Cells without a cost, and without a token figure: not counted in the totals.
    pub cells_unknown: usize,
    pub cells_tokens_unknown: usize,
}

/// Estimates the plan at `plan` against the store at `db` (which may not exist yet);
/// `per_run` is the stated cost of a run of a cell that has no earlier runs.
pub fn estimate(plan: &Path, db: &Path, per_run: Option<f64>) -> Result<CostEstimate> {
    let lp = crate::load_plan(plan)?;
    let store = if db.exists() { Some(Store::open_existing(db)?) } else { None };
    let existing = match &store {
        Some(s) => s.experiment(&lp.plan.id)?.filter(|e| e.plan_hash == lp.hash),
        None => None,
    };
    let per_cell = lp.scenarios.len() as u64 * lp.plan.variants.len() as u64 * lp.plan.replicates as u64;
    let progress = match (&store, &existing) {
        (Some(s), Some(e)) => s.progress_by_agent(&e.id)?,
        _ => Vec::new(),
    };
    let mut cells = Vec::new();
    let (mut total_usd, mut total_tokens, mut unknown, mut tokens_unknown) = (0.0, 0.0, 0usize, 0usize);
    for a in &lp.plan.agents {
        let todo = progress.iter().find(|(f, m, _)| (f, m) == (&a.framework, &a.model)).map_or(per_cell, |(_, _, p)| p.pending + p.failed);
        let earlier = match &store {
            Some(s) => Some(s.usage_of_agent(&a.agent)?),
            None => None,
        };
        let (tokens, usd, source) = match earlier {
            Some((n, tokens, priced, usd)) if n > 0 => (Some(tokens), (priced > 0).then_some(usd), format!("measured: mean of {n} earlier run(s) in this store")),
            _ => match per_run {
                Some(usd) => (None, Some(usd), "stated: --per-run".to_string()),
                None => (None, None, "unknown: no earlier runs of this agent spec; pass --per-run <USD>".to_string()),
            },
        };
        match usd {
            Some(u) => total_usd += u * todo as f64,
            None => unknown += 1,
        }
        match tokens {
            Some(t) => total_tokens += t * todo as f64,
            None => tokens_unknown += 1,
        }
        cells.push(CellCost {
            agent: a.agent.clone(),
            framework: a.framework.clone(),
            model: a.model.clone(),
            runs: todo,
            tokens_per_run: tokens,
            usd_per_run: usd,
            tokens: tokens.map(|t| (t * todo as f64).round()),
            usd: usd.map(|u| u * todo as f64),
            source,
        });
    }
    let all_unknown = !cells.is_empty() && tokens_unknown == cells.len();
    Ok(CostEstimate {
        experiment: lp.plan.id,
        resumed: existing.is_some(),
        cells,
        usd: total_usd,
        tokens: (!all_unknown).then(|| total_tokens.round()),
        cells_unknown: unknown,
        cells_tokens_unknown: tokens_unknown,
    })
}

/// A table of the cells and a line of totals, each figure's source said.
impl fmt::Display for CostEstimate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED).set_header(["cell", "runs to do", "tokens/run", "cost/run", "tokens", "cost", "from"]);
        let dollars = |v: Option<f64>| v.map_or_else(|| "—".to_string(), usd);
        let tokens = |v: Option<f64>| v.map_or_else(|| "—".to_string(), |t| format!("{t:.0}"));
        for c in &self.cells {
            t.add_row([format!("{} · {}", c.framework, c.model), c.runs.to_string(), tokens(c.tokens_per_run), dollars(c.usd_per_run), tokens(c.tokens), dollars(c.usd), c.source.clone()]);
        }
        writeln!(f, "{t}")?;
        let n = self.cells.len();
        let tokens_text = match (self.cells_tokens_unknown, self.tokens) {
            (_, None) => "tokens unknown (no cell has run in this store)".to_string(),
            (0, Some(total)) => format!("about {total} tokens"),
            (k, Some(total)) => format!("about {total} tokens ({k} cell(s) without a measured figure, not counted)"),
        };
        let cost_text = if self.cells_unknown == n && n > 0 {
            "cost unknown (pass --per-run <USD>)".to_string()
        } else {
            format!("{}{}", usd(self.usd), if self.cells_unknown > 0 { format!(" ({} cell(s) without a cost, not counted)", self.cells_unknown) } else { String::new() })
        };
        writeln!(f, "{}: {} to do, {tokens_text} and {cost_text}", self.experiment, if self.resumed { "the runs still" } else { "every run" })
    }
}
