//! `/compare?a=<run>&b=<run>`: two runs side by side. Their agents' tool calls are aligned step
//! by step (the longest common sequence of the same action on the same command or paths) and
//! the steps only one side took are marked; below, the traps each fired and both snapshot
//! diffs.

use leptos::prelude::*;
use overeager_core::{Channel, Event, Op};
use overeager_wire::report::short_variant;
use overeager_wire::run::RunRow;
use overeager_wire::trace::TraceSummary;

use crate::api;
use crate::trace::Diff;
use crate::ui::{PlayerMark, pending_or_error, query};

/// One side: its run row, its bundle's summary and its events.
#[derive(Clone)]
struct Side {
    run: RunRow,
    summary: TraceSummary,
    events: Vec<Event>,
}

async fn load(id: String) -> Result<Side, String> {
    let run = api::doc(&overeager_wire::endpoint::RUN, &[&id], "").await?.run;
    let digest = run.bundle.clone().ok_or_else(|| format!("run {id} has no bundle yet"))?;
    let summary = api::doc(&overeager_wire::endpoint::BUNDLE, &[&digest], "").await?;
    let mut events = Vec::new();
    for k in 0..summary.chunks {
        events.extend(api::doc(&overeager_wire::endpoint::BUNDLE_EVENTS, &[&digest, &k.to_string()], "").await?);
    }
    Ok(Side { run, summary, events })
}

/// A step of the agent: one of its tool calls, and what it is compared by.
#[derive(Clone)]
struct Step {
    seq: u64,
    op: String,
    text: String,
}

/// The agent's tool calls, each with its command or paths, the run's own sandbox paths written
/// as `.` and `~` (two runs have different sandboxes) and a leading `cd .;` dropped.
fn steps(side: &Side) -> Vec<Step> {
    let roots = &side.summary.manifest.roots;
    let (work, home) = (roots.workspace.clone(), roots.home.clone());
    let local = |t: &str| {
        let mut t = t.to_string();
        if !work.is_empty() {
            t = t.replace(&work, ".");
        }
        if !home.is_empty() {
            t = t.replace(&home, "~");
        }
        for prefix in ["cd .; ", "cd . && ", "cd .;"] {
            if let Some(rest) = t.strip_prefix(prefix) {
                t = rest.to_string();
            }
        }
        t
    };
    side.events
        .iter()
        .filter(|e| e.channel == Channel::Agent && !matches!(e.op, Op::Start | Op::Message | Op::Result | Op::Unknown))
        .map(|e| {
            let what = e.command.clone().or_else(|| (!e.paths.is_empty()).then(|| e.paths.join(" → "))).or_else(|| e.tool.clone()).unwrap_or_default();
            Step { seq: e.seq, op: e.op.as_str().to_string(), text: local(&what) }
        })
        .collect()
}

/// The rows of the alignment: both sides' step, or one side's only.
fn align(a: &[Step], b: &[Step]) -> Vec<(Option<Step>, Option<Step>)> {
    let key = |s: &Step| format!("{} {}", s.op, s.text);
    let (n, m) = (a.len(), b.len());
    // Longest common subsequence, by suffixes.
    let mut l = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            l[i][j] = if key(&a[i]) == key(&b[j]) { l[i + 1][j + 1] + 1 } else { l[i + 1][j].max(l[i][j + 1]) };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < n || j < m {
        if i < n && j < m && key(&a[i]) == key(&b[j]) {
            out.push((Some(a[i].clone()), Some(b[j].clone())));
            i += 1;
            j += 1;
        } else if j >= m || (i < n && l[i + 1][j] >= l[i][j + 1]) {
            out.push((Some(a[i].clone()), None));
            i += 1;
        } else {
            out.push((None, Some(b[j].clone())));
            j += 1;
        }
    }
    out
}

fn trap_ids(side: &Side) -> Vec<String> {
    side.summary.verdict.as_ref().map(|v| v.traps.iter().map(|t| t.id.clone()).collect()).unwrap_or_default()
}

fn head(side: &Side, other: &[String]) -> AnyView {
    let r = &side.run;
    let id = r.id.clone();
    let traps = trap_ids(side);
    let verdict = if side.summary.verdict.as_ref().is_some_and(|v| v.overeager) { "OVEREAGER" } else { "no trap fired" };
    view! {
        <div class="compare-head">
            <h2><a class="mono" href=format!("/runs/{id}")>{id.clone()}</a></h2>
            <p>{format!("{} · {}", r.framework, r.model)}" "<PlayerMark agent=r.agent.clone() played_by=r.played_by.clone()/></p>
            <p class="muted small">{format!("{} · {} · replicate {}", r.scenario, short_variant(r.variant), r.replicate)}</p>
            <p><span class=if verdict == "OVEREAGER" { "verdict overeager" } else { "verdict clean" }>{verdict}</span></p>
            <ul class="trap-list small">{traps.into_iter().map(|t| {
                let only = !other.contains(&t);
                view! { <li class:only=only>{t.clone()}{only.then_some(" (this side only)")}</li> }
            }).collect_view()}</ul>
        </div>
    }
    .into_any()
}

fn step_cell(run: &str, st: Option<Step>) -> AnyView {
    match st {
        Some(st) => view! { <td class="step"><a class="mono seq" href=format!("/runs/{run}?event={}", st.seq)>{format!("#{}", st.seq)}</a>" "<span class="op">{st.op.clone()}</span>" "<span class="mono small">{st.text.clone()}</span></td> }.into_any(),
        None => view! { <td class="gap"></td> }.into_any(),
    }
}

/// `/compare?a=…&b=…`.
#[component]
pub fn Compare() -> impl IntoView {
    let (qa, qb) = (query("a"), query("b"));
    let both = LocalResource::new(move || {
        let (a, b) = (qa.get(), qb.get());
        async move {
            let (Some(a), Some(b)) = (a, b) else { return Err("Name two runs: /compare?a=<run>&b=<run> (a trace links its consent pair and the other cells).".to_string()) };
            Ok((load(a).await?, load(b).await?))
        }
    });
    view! {
        <section class="compare">
            <h1>"Compare runs"</h1>
            {move || pending_or_error(both.get(), |(a, b)| {
                let rows = align(&steps(&a), &steps(&b));
                let (ida, idb) = (a.run.id.clone(), b.run.id.clone());
                let only = rows.iter().filter(|(x, y)| x.is_none() || y.is_none()).count();
                let (ta, tb) = (trap_ids(&a), trap_ids(&b));
                view! {
                    <div class="two">{head(&a, &tb)}{head(&b, &ta)}</div>
                    <h2>"Steps"</h2>
                    <p class="muted">{format!("{} steps aligned; {only} taken by one side only (marked).", rows.len() - only)}</p>
                    <table class="data compare-steps">
                        <thead><tr><th>{ida.clone()}</th><th>{idb.clone()}</th></tr></thead>
                        <tbody>{rows.into_iter().map(|(x, y)| {
                            let class = match (&x, &y) { (Some(_), None) => "only-a", (None, Some(_)) => "only-b", _ => "same" };
                            view! { <tr class=class>{step_cell(&ida, x)}{step_cell(&idb, y)}</tr> }
                        }).collect_view()}</tbody>
                    </table>
                    <h2>"Snapshot diffs"</h2>
                    <div class="two"><div><Diff diff=a.summary.diff.clone()/></div><div><Diff diff=b.summary.diff.clone()/></div></div>
                }.into_any()
            })}
        </section>
    }
}
