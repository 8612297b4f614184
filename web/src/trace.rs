//! The trace viewer: one timeline merging the shell, agent and watcher channels, filters by
//! channel and op, fired traps linked to their evidence events, the snapshot diff and the raw
//! channels. Events arrive in chunks; the list renders only the rows in view, so a bundle of
//! 100,000 events scrolls as smoothly as one of ten.

use std::collections::{BTreeMap, BTreeSet};

use leptos::html;
use leptos::prelude::*;
use leptos_router::NavigateOptions;
use leptos_router::hooks::{use_location, use_navigate, use_params_map, use_query_map};
use overeager_core::Event;
use overeager_core::model::conversation::Answer;
use overeager_core::model::usage::Usage;
use overeager_core::snapshot::SnapshotDiff;
use overeager_wire::run::RunDoc;
use overeager_wire::trace::{Conversation, TraceSummary};

use crate::api;
use crate::labels::LabelPanel;
use crate::ui::{PlayerMark, pending_or_error, short};

/// Height of one timeline row, in pixels (must match `.tl-row` in the CSS).
const ROW: f64 = 24.0;
/// Height of the timeline viewport, in pixels (must match `.timeline`).
const VIEW: f64 = 576.0;

/// `/runs/:id`: the run's facts, then its trace.
#[component]
pub fn RunPage() -> impl IntoView {
    let params = use_params_map();
    let query = use_query_map();
    let run = LocalResource::new(move || {
        let id = params.with(|p| p.get("id")).unwrap_or_default();
        async move { api::doc(&overeager_wire::endpoint::RUN, &[&id], "").await }
    });
    view! {
        <section>
            {move || pending_or_error(run.get(), |r| {
                let related = related_links(&r);
                // Untracked: the trace rewrites the query as its state changes.
                let queue = query.with_untracked(|q| q.get("queue")).filter(|q| !q.is_empty());
                let fired: Vec<String> = r.verdict.as_ref().map(|v| v.traps.iter().map(|t| t.id.clone()).collect()).unwrap_or_default();
                let labels = r.labels;
                let row = r.run;
                let id = row.id.clone();
                // Labels are of judged runs.
                let review = r.verdict.is_some().then(|| ViewFn::from(move || view! { <LabelPanel run=id.clone() fired=fired.clone() labels=labels.clone() queue=queue.clone()/> }));
                match row.bundle {
                    Some(d) => view! { {related}<TraceViewer digest=d review=review/> }.into_any(),
                    None => view! { <h1 class="mono">{row.id.clone()}</h1><p class="muted">{format!("This run is {}: it has no bundle yet.", row.status)}</p> }.into_any(),
                }
            })}
        </section>
    }
}

/// Other cells' runs of the same scenario listed inline; more are folded away.
const FEW_CELLS: usize = 4;

/// Links from a run to its consent-pair partner and to the same scenario in the experiment's
/// other cells, each with a side-by-side comparison.
fn related_links(r: &RunDoc) -> AnyView {
    let id = r.run.id.clone();
    let partner = r.partner.clone();
    let cells = r.other_cells.clone();
    if partner.is_none() && cells.is_empty() {
        return ().into_any();
    }
    let other_variant = if r.run.variant == overeager_core::Variant::ConsentKept { "stripped" } else { "kept" };
    view! {
        <div class="related small">
            {partner.map(|p| view! {
                <span class="pair">"Consent pair: "<a class="partner-link mono" href=format!("/runs/{p}")>{format!("{p} ({other_variant})")}</a>" · "
                <a class="compare-link" href=format!("/compare?a={id}&b={p}")>"compare side by side"</a></span>
            })}
            {(!cells.is_empty()).then(|| {
                let n = cells.len();
                let links = cells.into_iter().map(|c| {
                    let other = c.id.clone();
                    view! { <span class="cell-link"><a href=format!("/runs/{other}")>{format!("{} · {}", c.framework, c.model)}</a>" ("<a href=format!("/compare?a={id}&b={other}")>"compare"</a>") "</span> }
                }).collect_view();
                // A few inline; many folded, so the run's own header stays near the top.
                if n <= FEW_CELLS {
                    view! { <span class="cells">" Same scenario in other cells: "{links}</span> }.into_any()
                } else {
                    view! { <details class="cells"><summary>{format!("Same scenario in {n} other cells")}</summary>{links}</details> }.into_any()
                }
            })}
        </div>
    }
    .into_any()
}

/// `/bundles/:digest`: a trace by bundle digest (submissions).
#[component]
pub fn BundlePage() -> impl IntoView {
    let params = use_params_map();
    move || {
        let d = params.with(|p| p.get("digest")).unwrap_or_default();
        view! { <section><TraceViewer digest=d/></section> }
    }
}

fn summary_text(e: &Event) -> String {
    if let Some(argv) = &e.argv {
        return argv.join(" ");
    }
    if let Some(c) = &e.command {
        return c.clone();
    }
    let mut parts = Vec::new();
    if let Some(t) = &e.tool {
        parts.push(format!("[{t}]"));
    }
    if !e.paths.is_empty() {
        parts.push(e.paths.join(" → "));
    }
    // Named through a link: what was named, beside what it reached.
    if !e.via.is_empty() {
        parts.push(format!("(named {})", e.via.join(", ")));
    }
    if let Some(t) = &e.text {
        let t: String = t.chars().take(160).collect();
        parts.push(t);
    }
    parts.join(" ")
}

/// The viewer of one bundle; `review` (the label panel of a run) is shown below the fired traps.
#[component]
pub fn TraceViewer(digest: String, #[prop(optional_no_strip)] review: Option<ViewFn>) -> impl IntoView {
    let d = digest.clone();
    let summary = LocalResource::new(move || {
        let d = d.clone();
        async move { api::doc(&overeager_wire::endpoint::BUNDLE, &[&d], "").await }
    });
    // Events load beside the summary: chunk 0 at once, the rest once the summary says how many.
    let events: RwSignal<Vec<Event>> = RwSignal::new(Vec::new());
    let loaded = RwSignal::new(0usize);
    let load_error = RwSignal::new(None::<String>);
    leptos::task::spawn_local(async move {
        let mut k = 0;
        loop {
            match api::doc(&overeager_wire::endpoint::BUNDLE_EVENTS, &[&digest, &k.to_string()], "").await {
                Ok(c) => {
                    if events.try_update(|v| v.extend(c)).is_none() {
                        return; // the page was left
                    }
                    loaded.set(k + 1);
                }
                Err(e) => {
                    let _ = load_error.try_set(Some(e));
                    return;
                }
            }
            k += 1;
            let total = match summary.await {
                Ok(sm) => sm.chunks,
                Err(_) => return,
            };
            if k >= total {
                return;
            }
        }
    });
    view! {
        {move || pending_or_error(summary.get(), |sm| view! { <Loaded sm=sm events=events loaded=loaded load_error=load_error review=review.clone()/> }.into_any())}
    }
}

/// The tabs of a trace, as `?tab=` names them.
const TABS: [&str; 9] = ["timeline", "conversation", "diff", "prompt", "shell", "agent", "fswatch", "net", "model"];

/// The query parameters the trace viewer keeps its state in.
const TRACE_PARAMS: [&str; 6] = ["event", "ch", "op", "evidence", "framework", "tab"];

/// Evidence links shown per trap; the rest are reached with the n/p keys.
const EVIDENCE_LINKS: usize = 12;

#[component]
fn Loaded(sm: TraceSummary, events: RwSignal<Vec<Event>>, loaded: RwSignal<usize>, load_error: RwSignal<Option<String>>, review: Option<ViewFn>) -> impl IntoView {
    let traps = sm.verdict.as_ref().map(|v| v.traps.clone()).unwrap_or_default();
    let framework_effects = sm.verdict.as_ref().map(|v| v.framework_effects.clone()).unwrap_or_default();
    let framework_paths = sm.framework_paths.clone();
    let n_framework = sm.framework.len();
    let framework = StoredValue::new(sm.framework.iter().copied().collect::<BTreeSet<u64>>());
    // The state starts from the URL (`?event=N&ch=agent,shell&op=write&evidence=1&framework=hide&tab=diff`)
    // and is written back to it, so every view of a trace can be linked.
    let q = use_query_map();
    let param = move |k: &str| q.with_untracked(|m| m.get(k)).filter(|v| !v.is_empty());
    let show_framework = RwSignal::new(param("framework").as_deref() != Some("hide"));
    let mut evidence_of: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for t in &traps {
        for e in &t.evidence {
            evidence_of.entry(*e).or_default().push(t.id.clone());
        }
    }
    let evidence_seqs: Vec<u64> = evidence_of.keys().copied().collect();
    let evidence_of = StoredValue::new(evidence_of);
    let evidence_seqs = StoredValue::new(evidence_seqs);

    let present: BTreeSet<String> = sm.by_channel.iter().filter(|(_, n)| **n > 0).map(|(c, _)| c.clone()).collect();
    let all_channels = || BTreeSet::from(["agent".to_string(), "shell".to_string(), "fswatch".to_string(), "net".to_string()]);
    let channels = RwSignal::new(param("ch").map(|c| c.split(',').map(str::to_string).collect()).unwrap_or_else(all_channels));
    let op = RwSignal::new(param("op").unwrap_or_default());
    let only_evidence = RwSignal::new(param("evidence").as_deref() == Some("1"));
    let filtered = Memo::new(move |_| {
        let ch = channels.get();
        let op = op.get();
        let only = only_evidence.get();
        let fw = show_framework.get();
        events.with(|ev| {
            evidence_of.with_value(|evid| {
                ev.iter()
                    .enumerate()
                    .filter(|(_, e)| ch.contains(e.channel.as_str()) && (op.is_empty() || e.op.as_str() == op) && (!only || evid.contains_key(&e.seq)) && (fw || !framework.with_value(|f| f.contains(&e.seq))))
                    .map(|(i, _)| i as u32)
                    .collect::<Vec<u32>>()
            })
        })
    });
    let scroll = RwSignal::new(0.0f64);
    let selected = RwSignal::new(param("event").and_then(|e| e.parse::<u64>().ok()));
    let tab = RwSignal::new(param("tab").and_then(|t| TABS.iter().copied().find(|k| *k == t)).unwrap_or("timeline"));
    let list: NodeRef<html::Div> = NodeRef::new();

    // Keeps the selected row in view: the list scrolls to it, then the page to the list's row.
    let reveal = move |seq: u64| {
        let pos = filtered.with(|f| f.binary_search(&(seq as u32)).ok());
        if let (Some(pos), Some(el)) = (pos, list.get()) {
            let y = pos as f64 * ROW;
            let top = el.scroll_top() as f64;
            if y < top || y + ROW > top + VIEW {
                let target = (y - VIEW / 2.0).max(0.0);
                el.set_scroll_top(target as i32);
                scroll.set(target);
            }
            // Once the rows in view are drawn.
            request_animation_frame(move || {
                if let Some(row) = list.get().and_then(|l| l.query_selector(&format!(".tl-row[data-seq=\"{seq}\"]")).ok().flatten()) {
                    let opts = web_sys::ScrollIntoViewOptions::new();
                    opts.set_block(web_sys::ScrollLogicalPosition::Nearest);
                    row.scroll_into_view_with_scroll_into_view_options(&opts);
                }
            });
        }
    };
    let select_pos = move |pos: usize| {
        if let Some(seq) = filtered.with(|f| f.get(pos).copied()) {
            selected.set(Some(seq as u64));
            reveal(seq as u64);
        }
    };
    // Jumps to an evidence event, clearing filters that would hide it.
    let jump = move |seq: u64| {
        tab.set("timeline");
        let hidden = filtered.with(|f| f.binary_search(&(seq as u32)).is_err());
        if hidden {
            channels.set(all_channels());
            op.set(String::new());
            only_evidence.set(false);
            show_framework.set(true);
        }
        selected.set(Some(seq));
        // After the list re-renders with the new filters.
        request_animation_frame(move || reveal(seq));
    };
    // A linked event is shown once its chunk has loaded.
    let pending = RwSignal::new(selected.get_untracked());
    Effect::new(move |_| {
        let _ = loaded.get();
        if let Some(seq) = pending.get_untracked()
            && events.with(|ev| (seq as usize) < ev.len())
        {
            pending.set(None);
            jump(seq);
        }
    });
    // The state, written to the URL (replacing the entry: filters are not history).
    let navigate = use_navigate();
    let loc = use_location();
    Effect::new(move |_| {
        let mut pairs: Vec<(&str, String)> = Vec::new();
        if let Some(seq) = selected.get() {
            pairs.push(("event", seq.to_string()));
        }
        // The channels shown, of those the trace has.
        let shown: Vec<String> = channels.get().into_iter().filter(|c| present.contains(c)).collect();
        if shown.len() < present.len() {
            pairs.push(("ch", shown.join(",")));
        }
        let o = op.get();
        if !o.is_empty() {
            pairs.push(("op", o));
        }
        if only_evidence.get() {
            pairs.push(("evidence", "1".into()));
        }
        if !show_framework.get() {
            pairs.push(("framework", "hide".into()));
        }
        let t = tab.get();
        if t != "timeline" {
            pairs.push(("tab", t.to_string()));
        }
        // Parameters the trace does not own (a search's highlight) stay.
        let others: Vec<(String, String)> = loc.query.get_untracked().into_iter().filter(|(k, _)| !TRACE_PARAMS.contains(&k.as_ref())).map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let qs: Vec<String> = others.iter().map(|(k, v)| (k.as_str(), v.clone())).chain(pairs).map(|(k, v)| format!("{k}={}", api::enc(&v))).collect();
        let path = loc.pathname.get_untracked();
        let url = if qs.is_empty() { path } else { format!("{path}?{}", qs.join("&")) };
        let now = format!("{}{}", loc.pathname.get_untracked(), loc.search.get_untracked());
        if url != now {
            navigate(&url, NavigateOptions { replace: true, scroll: false, ..Default::default() });
        }
    });
    // A link to another event of the same trace (back, forward, a link on the page).
    Effect::new(move |_| {
        let linked = q.with(|m| m.get("event")).and_then(|e| e.parse::<u64>().ok());
        if let Some(seq) = linked
            && selected.get_untracked() != Some(seq)
        {
            if events.with_untracked(|ev| (seq as usize) < ev.len()) { jump(seq) } else { pending.set(Some(seq)) }
        }
    });
    let on_key = move |ev: web_sys::KeyboardEvent| {
        let n = filtered.with(Vec::len);
        if n == 0 {
            return;
        }
        let cur = selected.get_untracked().and_then(|s| filtered.with_untracked(|f| f.binary_search(&(s as u32)).ok()));
        let page = (VIEW / ROW) as usize - 1;
        let next = match ev.key().as_str() {
            "ArrowDown" | "j" => Some(cur.map_or(0, |c| (c + 1).min(n - 1))),
            "ArrowUp" | "k" => Some(cur.map_or(0, |c| c.saturating_sub(1))),
            "PageDown" => Some(cur.map_or(0, |c| (c + page).min(n - 1))),
            "PageUp" => Some(cur.map_or(0, |c| c.saturating_sub(page))),
            "Home" | "g" => Some(0),
            "End" | "G" => Some(n - 1),
            "n" | "p" => {
                let forward = ev.key() == "n";
                let from = selected.get_untracked();
                let target = evidence_seqs.with_value(|seqs| if forward { seqs.iter().find(|s| from.is_none_or(|f| **s > f)).copied() } else { seqs.iter().rev().find(|s| from.is_none_or(|f| **s < f)).copied() });
                if let Some(t) = target {
                    ev.prevent_default();
                    jump(t);
                }
                None
            }
            _ => None,
        };
        if let Some(pos) = next {
            ev.prevent_default();
            select_pos(pos);
        }
    };

    let m = sm.manifest.clone();
    let verdict = sm.verdict.clone();
    let run = sm.run.clone();
    let run_id = run.as_ref().map(|r| r.id.clone());
    let start_us = m.started_us;
    let title = run.as_ref().map(|r| r.id.clone()).unwrap_or_else(|| format!("bundle {}", short(&sm.digest)));
    let scenario_link = format!("/scenarios/{}", run.as_ref().map_or(&m.scenario.hash, |r| &r.scenario_hash));
    let ops: Vec<String> = sm.by_op.keys().cloned().collect();
    let by_channel = sm.by_channel.clone();
    let raw_names: Vec<String> = sm.raw.keys().filter(|k| *k != "prompt" && *k != "conversation").cloned().collect();
    let has_conversation = sm.raw.contains_key("conversation");
    let digest = sm.digest.clone();
    let conversation_digest = digest.clone();
    let digest_attr = sm.digest.clone();
    let n_events = sm.n_events;

    // Only runs with network have a net channel.
    let has_net = by_channel.get("net").is_some_and(|n| *n > 0);
    let channel_box = move |name: &'static str| {
        let count = by_channel.get(name).copied().unwrap_or(0);
        view! {
            <label class=format!("chan {name}")>
                <input type="checkbox" prop:checked=move || channels.with(|c| c.contains(name))
                    on:change=move |_| channels.update(|c| { if !c.remove(name) { c.insert(name.to_string()); } })/>
                {format!("{name} ({count})")}
            </label>
        }
    };

    view! {
        <div class="trace" data-digest=digest_attr>
            <div class="pagehead">
                <h1 class="mono">{title}</h1>
                {match &verdict {
                    Some(v) if v.timed_out => view! { <span class="verdict timeout">"timed out"</span> }.into_any(),
                    Some(v) if v.overeager => view! { <span class="verdict overeager">"OVEREAGER"</span> }.into_any(),
                    Some(v) if !v.complete() => view! { <span class="verdict incomplete" title="No trap fired, but a check has no answer: not counted as clean">{format!("incomplete: {} check(s) without an answer", v.errors.len())}</span> }.into_any(),
                    Some(_) => view! { <span class="verdict clean">"no trap fired"</span> }.into_any(),
                    None => view! { <span class="verdict">"not judged"</span> }.into_any(),
                }}
            </div>
            <p class="facts">
                <span>"Agent "<b>{format!("{} · {}", m.agent.framework, m.agent.model)}</b>" "<PlayerMark agent=m.agent.id.clone() played_by=m.agent.played_by()/></span>
                <span>"Scenario "<a href=scenario_link>{m.scenario.id.clone()}</a></span>
                <span>"Variant "<b>{m.variant.as_str()}</b></span>
                <span>"Replicate "{m.replicate}</span>
                <span>{format!("{} events · {:.1} s · exit {}", n_events, m.duration_ms as f64 / 1000.0, m.exit.code.map(|c| c.to_string()).unwrap_or_else(|| "–".into()))}</span>
                <a href=overeager_wire::endpoint::BUNDLE_DOWNLOAD.url(&[&digest])>"download .oeb"</a>
                {run_id.map(|id| view! {
                    <a class="export-link" href=api::export_url(&id, "atif") download="" title="ATIF v1.7 trajectory, for Harbor and Terminal-Bench tools">"ATIF trajectory"</a>
                    <a class="export-link" href=api::export_url(&id, "inspect") download="" title="Inspect eval log: open with inspect view">"Inspect log"</a>
                })}
            </p>
            {sm.upload.as_ref().map(|x| view! { <p class="note">{format!("Uploaded by {}. The server judged it with its own predicates; {}", x.uploaded_by, if x.claimed.is_none() { "no verdict was sent." } else { "the verdict sent with it was ignored." })}</p> })}
            <div class="traps">
                <h2>"Fired traps"</h2>
                {if traps.is_empty() {
                    view! { <p class="muted">"None."</p> }.into_any()
                } else {
                    view! { <ul class="trap-list">{traps.iter().map(|t| {
                        let ev = t.evidence.clone();
                        view! { <li class="trap">
                            <span class=format!("sev {}", format!("{:?}", t.severity).to_lowercase())>{format!("{:?}", t.severity).to_lowercase()}</span>" "
                            <b>{t.id.clone()}</b>" "<span class="mono muted">{t.predicate.clone()}</span>
                            {t.note.clone().map(|n| view! { <span class="muted">" — "{n}</span> })}
                            <span class="evidence-links">" evidence: "{ev.iter().take(EVIDENCE_LINKS).map(|&seq| view! {
                                <a href=format!("?event={seq}") class="evidence-link mono" data-seq=seq on:click=move |e| { e.prevent_default(); jump(seq); }>{format!("#{seq}")}</a>" "
                            }).collect_view()}
                            {(ev.len() > EVIDENCE_LINKS).then(|| view! { <span class="muted">{format!("and {} more (n/p in the timeline, or “evidence only”)", ev.len() - EVIDENCE_LINKS)}</span> })}</span>
                        </li> }
                    }).collect_view()}</ul> }.into_any()
                }}
                {(!framework_effects.is_empty() || !framework_paths.is_empty()).then(|| view! {
                    <div class="framework-effects">
                        <h3>"Framework effects"</h3>
                        <p class="muted small">"What the agent framework did on its own, outside the model's tool calls. Reported here; not counted as the model's overeagerness."</p>
                        <ul>
                            {framework_effects.iter().map(|t| {
                                let first = t.evidence.first().copied();
                                view! { <li>
                                    <b>{t.id.clone()}</b>" "<span class="mono muted">{t.predicate.clone()}</span>
                                    {t.note.clone().map(|n| view! { <span class="muted">" — "{n}</span> })}
                                    {first.map(|seq| view! { " "<a href=format!("?event={seq}") class="evidence-link mono" data-seq=seq on:click=move |e| { e.prevent_default(); jump(seq); }>{format!("#{seq}")}</a> })}
                                </li> }
                            }).collect_view()}
                            {(!framework_paths.is_empty()).then(|| view! { <li>"Files only the framework changed: "<span class="mono">{framework_paths.join(", ")}</span></li> })}
                        </ul>
                    </div>
                })}
            </div>
            {review.map(|r| r.run())}
            <div class="tabs" role="tablist">
                {[("timeline", "Timeline"), ("conversation", "Conversation"), ("diff", "Snapshot diff"), ("prompt", "Prompt")].into_iter().filter(|(k, _)| *k != "conversation" || has_conversation).map(|(k, label)| view! {
                    <button role="tab" class=format!("tab-{k}") class:on=move || tab.get() == k on:click=move |_| tab.set(k)>{label}</button>
                }).collect_view()}
                {raw_names.into_iter().map(|name| {
                    let k: &'static str = match name.as_str() { "shell" => "shell", "agent" => "agent", "net" => "net", "model" => "model", _ => "fswatch" };
                    view! { <button role="tab" class:on=move || tab.get() == k on:click=move |_| tab.set(k)>{format!("raw: {name}")}</button> }
                }).collect_view()}
            </div>
            <div class="tabbody" style:display=move || if tab.get() == "timeline" { "block" } else { "none" }>
                <div class="controls">
                    {channel_box("shell")}{channel_box("agent")}{channel_box("fswatch")}{has_net.then(|| channel_box("net"))}
                    <select class="op-filter" on:change=move |ev| op.set(event_target_value(&ev))>
                        <option value="">"all ops"</option>
                        {ops.into_iter().map(|o| { let v = o.clone(); view! { <option value=o.clone() selected=move || op.get() == v>{o.clone()}</option> } }).collect_view()}
                    </select>
                    <label><input type="checkbox" prop:checked=move || only_evidence.get() on:change=move |_| only_evidence.update(|v| *v = !*v)/>"evidence only"</label>
                    {(n_framework > 0).then(|| view! {
                        <label class="framework-toggle" title="What the agent framework did on its own, outside the model's tool calls: shown, never counted against the model">
                            <input type="checkbox" prop:checked=move || show_framework.get() on:change=move |_| show_framework.update(|v| *v = !*v)/>
                            {format!("framework's own ({n_framework})")}
                        </label>
                    })}
                    <span class="muted">{move || {
                        let shown = filtered.with(Vec::len);
                        let have = events.with(Vec::len);
                        if have < n_events { format!("{shown} shown · loading {have}/{n_events}") } else { format!("{shown} of {n_events} shown") }
                    }}</span>
                    <span class="muted small">"keys: j/k or ↑/↓ move, PgUp/PgDn, g/G ends, n/p next/previous evidence"</span>
                </div>
                {move || load_error.get().map(|e| view! { <p class="error">{e}</p> })}
                <div class="tl-wrap">
                    <div class="timeline" tabindex="0" node_ref=list data-ready=move || (loaded.get() > 0).to_string()
                        on:scroll=move |ev| { let el: web_sys::Element = event_target(&ev); scroll.set(el.scroll_top() as f64); }
                        on:keydown=on_key>
                        <div class="tl-space" style:height=move || format!("{}px", filtered.with(Vec::len) as f64 * ROW)>
                            {move || {
                                let first = (scroll.get() / ROW).floor().max(0.0) as usize;
                                let count = (VIEW / ROW) as usize + 3;
                                let sel = selected.get();
                                filtered.with(|f| {
                                    let end = (first + count).min(f.len());
                                    let first = first.min(end);
                                    events.with(|ev| evidence_of.with_value(|evid| {
                                        f[first..end].iter().enumerate().map(|(k, &i)| {
                                            let e = &ev[i as usize];
                                            let seq = e.seq;
                                            let traps = evid.get(&seq).cloned();
                                            let own = framework.with_value(|f| f.contains(&seq));
                                            let class = format!("tl-row {}{}{}{}", e.channel.as_str(), if traps.is_some() { " evidence" } else { "" }, if sel == Some(seq) { " selected" } else { "" }, if own { " framework" } else { "" });
                                            let t = (e.t_us.saturating_sub(start_us)) as f64 / 1000.0;
                                            view! {
                                                <div class=class data-seq=seq style=format!("top:{}px", (first + k) as f64 * ROW) on:click=move |_| selected.set(Some(seq))>
                                                    <span class="seq">{seq}</span>
                                                    <span class="t">{format!("{t:.1}ms")}</span>
                                                    <span class="ch">{e.channel.as_str()}</span>
                                                    <span class="op">{e.op.as_str()}</span>
                                                    <span class="what">{summary_text(e)}</span>
                                                    <span class="exit">{e.exit.map(|x| format!("exit {x}"))}</span>
                                                    {own.then(|| view! { <span class="by" title="the agent framework's own activity, not a tool call of the model">"framework"</span> })}
                                                    {traps.map(|t| view! { <span class="flag">{t.join(", ")}</span> })}
                                                </div>
                                            }
                                        }).collect_view()
                                    }))
                                })
                            }}
                        </div>
                    </div>
                    <div class="tl-detail">
                        {move || match selected.get() {
                            None => view! { <p class="muted">"Select an event (click, or focus the list and use the keys)."</p> }.into_any(),
                            Some(seq) => events.with(|ev| ev.get(seq as usize).map(|e| {
                                let traps = evidence_of.with_value(|m| m.get(&seq).cloned());
                                view! {
                                    <h3>{format!("Event #{seq}")}</h3>
                                    {framework.with_value(|f| f.contains(&seq)).then(|| view! { <p class="note">"The agent framework did this on its own, outside any tool call of the model: it is reported, and only a trap the scenario declares as counting the framework counts it."</p> })}
                                    {traps.map(|t| view! { <p class="flag">{format!("evidence for {}", t.join(", "))}</p> })}
                                    <pre class="small">{serde_json::to_string_pretty(e).unwrap_or_default()}</pre>
                                }.into_any()
                            }).unwrap_or_else(|| view! { <p class="muted">"Loading…"</p> }.into_any())),
                        }}
                    </div>
                </div>
            </div>
            <div class="tabbody" style:display=move || if tab.get() == "diff" { "block" } else { "none" }>
                <Diff diff=sm.diff.clone()/>
            </div>
            <div class="tabbody" style:display=move || if tab.get() == "prompt" { "block" } else { "none" }>
                <pre class="prompt">{sm.prompt.clone()}</pre>
            </div>
            {move || {
                let k = tab.get();
                (["shell", "agent", "fswatch", "net", "model"].contains(&k)).then(|| view! { <RawTab digest=digest.clone() name=k/> })
            }}
            {move || (tab.get() == "conversation" && has_conversation).then(|| view! { <Conversation digest=conversation_digest.clone()/> })}
        </div>
    }
}

/// A bundle's snapshot diff.
#[component]
pub fn Diff(diff: SnapshotDiff) -> impl IntoView {
    let modes: Vec<String> = diff.mode_changed.iter().map(|m| format!("{}: {:o} → {:o}", m.path, m.before, m.after)).collect();
    let groups = [("created", diff.created), ("deleted", diff.deleted), ("modified", diff.modified), ("kind_changed", diff.kind_changed)];
    let empty = groups.iter().all(|(_, v)| v.is_empty()) && modes.is_empty();
    view! {
        {empty.then(|| view! { <p class="muted">"Nothing changed in the workspace or HOME."</p> })}
        <ul class="diff mono">
            {groups.into_iter().flat_map(|(k, v)| v.into_iter().map(move |p| view! { <li class=k><span class="kind">{k}</span>" "{p}</li> })).collect_view()}
            {modes.into_iter().map(|m| view! { <li class="mode_changed"><span class="kind">"mode"</span>" "{m}</li> }).collect_view()}
        </ul>
    }
}

/// The model calls as a conversation: each call's answer (a tool call and what it gave back,
/// or text), when it came and how long it took, its tokens and cost.
#[component]
fn Conversation(digest: String) -> impl IntoView {
    let doc = LocalResource::new(move || {
        let d = digest.clone();
        async move { api::get_text(&overeager_wire::endpoint::BUNDLE_RAW.url(&[&d, "conversation"])).await.and_then(|t| serde_json::from_str::<Conversation>(&t).map_err(|e| e.to_string())) }
    });
    let tokens = |t: &Usage| format!("{} in · {} out{}", t.input, t.output, if t.cache_read > 0 { format!(" · {} cached", t.cache_read) } else { String::new() });
    let usd = |v: Option<f64>| v.map(overeager_core::model::usage::usd).unwrap_or_else(|| "—".into());
    view! {
        <div class="tabbody conversation">
            {move || pending_or_error(doc.get(), move |d| {
                let calls = d.calls;
                view! {
                    <p class="small conversation-total">{format!("{} model call(s)", calls.len())}
                        {d.provider.map(|p| format!(" to {p}/{}", d.model.unwrap_or_default()))}
                        {d.total.map(|t| format!(" · {} · {}", tokens(&t), usd(d.cost_usd)))}
                    </p>
                    <ol class="calls">
                        {calls.into_iter().map(|c| {
                            let head = if c.side { "side request".to_string() } else { c.step.map(|k| format!("turn {}", k + 1)).unwrap_or_else(|| "call".into()) };
                            view! {
                                <li class="call" class:side=c.side class:failed=c.failure.is_some() data-seq=c.seq.to_string()>
                                    <div class="call-head small">
                                        <b>{head}</b>
                                        <span class="muted">{format!(" · at {:.1} s", c.t_ms / 1000.0)}</span>
                                        {c.duration_ms.map(|ms| view! { <span class="latency">{format!(" · {:.2} s", ms / 1000.0)}</span> })}
                                        {c.tokens.map(|t| view! { <span class="tokens">{format!(" · {}", tokens(&t))}</span> })}
                                        {c.cost_usd.map(|cost| view! { <span class="cost">{format!(" · {}", usd(Some(cost)))}</span> })}
                                        {(c.status >= 400).then(|| view! { <span class="bad">{format!(" · http {}", c.status)}</span> })}
                                    </div>
                                    {c.failure.clone().map(|f| view! { <p class="bad small">{f}</p> })}
                                    {match c.answer {
                                        Answer::ToolCall { name, args, result, error } => view! {
                                            <div class="tool-call"><span class="mono">{name}</span>" "<code class="args">{args.to_string()}</code></div>
                                            {result.map(|r| view! { <pre class="result small" class:error=error>{r}</pre> })}
                                        }.into_any(),
                                        Answer::Text { text } => view! { <pre class="answer-text">{text}</pre> }.into_any(),
                                        Answer::Nothing => view! { <p class="muted small">"(no answer)"</p> }.into_any(),
                                    }}
                                    {c.reply_bytes.map(|n| view! { <p class="muted small">{format!("the record kept the reply's beginning; it was {n} bytes")}</p> })}
                                </li>
                            }
                        }).collect_view()}
                    </ol>
                }.into_any()
            })}
        </div>
    }
}

#[component]
fn RawTab(digest: String, name: &'static str) -> impl IntoView {
    let text = LocalResource::new(move || {
        let d = digest.clone();
        async move { api::get_text(&overeager_wire::endpoint::BUNDLE_RAW.url(&[&d, &name])).await }
    });
    view! {
        <div class="tabbody">
            {move || pending_or_error(text.get(), |t| view! { <pre class="raw small">{if t.is_empty() { "(empty)".to_string() } else { t }}</pre> }.into_any())}
        </div>
    }
}
