//! Human review: the label panel of a trace (every rater's label, and the form a reviewer labels
//! with, by mouse or keys), review queues (a stratified sample of an experiment worked through
//! in order), and the labels page (agreement with the rule judge and between raters, export).

use std::collections::BTreeMap;

use leptos::prelude::*;
use leptos_router::hooks::{use_navigate, use_params_map};
use overeager_core::stats::Interval;
use overeager_wire::labels::{Label, LabelBody, LabelDeleted, NewQueue, Whoami};
use overeager_wire::queue::{QueueDrawn, QueueItem, QueueList};
use overeager_wire::report::LabelReport;

use crate::api;
use crate::board::{fmt_date, store_token, stored_token};
use crate::ui::{ExperimentPicker, PlayerMark, experiment_choice, pct, pending_or_error};

/// `overeager` or `not overeager`.
fn call_text(overeager: bool) -> &'static str {
    if overeager { "overeager" } else { "not overeager" }
}

/// Whether a key press belongs to something else on the page: a form field, or the trace's
/// timeline (whose own keys move between events).
fn key_is_elsewhere(ev: &web_sys::KeyboardEvent) -> bool {
    use wasm_bindgen::JsCast;
    if ev.ctrl_key() || ev.meta_key() || ev.alt_key() {
        return true;
    }
    let Some(el) = ev.target().and_then(|t| t.dyn_into::<web_sys::Element>().ok()) else { return false };
    matches!(el.tag_name().as_str(), "INPUT" | "TEXTAREA" | "SELECT") || el.closest(".timeline").ok().flatten().is_some()
}

/// The token holder's name, once the server has said whose the token is.
fn whoami(token: RwSignal<String>) -> LocalResource<Option<Result<String, String>>> {
    LocalResource::new(move || {
        let t = token.get();
        async move {
            if t.trim().is_empty() {
                return None;
            }
            Some(api::get_as::<Whoami>(overeager_wire::endpoint::WHOAMI.path, &t).await.map(|w| w.name))
        }
    })
}

/// The token field shared by the review pages (kept for the browser tab).
#[component]
fn TokenField(token: RwSignal<String>, me: LocalResource<Option<Result<String, String>>>) -> impl IntoView {
    view! {
        <p class="token-line">
            <label>"Reviewer token "<input type="password" class="reviewer-token" autocomplete="off" prop:value=move || token.get()
                on:change=move |ev| { let t = event_target_value(&ev); store_token(&t); token.set(t); }/></label>
            {move || match me.get().flatten() {
                None => view! { <span class="muted small">" A token from "<code>"overeager token create <name> --reviewer"</code>" (or any writer's): its name is the rater."</span> }.into_any(),
                Some(Ok(name)) => view! { " "<span class="rater-name">"labelling as "<b>{name}</b></span> }.into_any(),
                Some(Err(e)) => view! { " "<span class="error small">{e}</span> }.into_any(),
            }}
        </p>
    }
}

/// The labels of a run and the form to label it, shown on its trace. With `queue`, the bar of
/// that review queue: where the run is in it, the neighbours, and saving moves to the next run
/// the reviewer has not labelled.
#[component]
pub fn LabelPanel(run: String, fired: Vec<String>, labels: Vec<Label>, queue: Option<String>) -> impl IntoView {
    if api::is_static() {
        return ().into_any();
    }
    let labels = RwSignal::new(labels);
    let token = RwSignal::new(stored_token());
    let me = whoami(token);
    let overall = RwSignal::new(None::<bool>);
    let calls = RwSignal::new(fired.iter().map(|t| (t.clone(), None::<bool>)).collect::<BTreeMap<String, Option<bool>>>());
    let comment = RwSignal::new(String::new());
    let message = RwSignal::new(None::<Result<String, String>>);
    let fired = StoredValue::new(fired);
    // The form starts from the reviewer's own label, once it is known whose the token is.
    let prefilled = RwSignal::new(false);
    Effect::new(move |_| {
        let Some(Some(Ok(name))) = me.get() else { return };
        if prefilled.get_untracked() {
            return;
        }
        prefilled.set(true);
        if let Some(l) = labels.get_untracked().into_iter().find(|l| l.rater == name) {
            overall.set(Some(l.overeager));
            calls.update(|c| {
                for (t, v) in c.iter_mut() {
                    *v = l.traps.get(t).copied();
                }
            });
            comment.set(l.comment.unwrap_or_default());
        }
    });
    let queue_data = LocalResource::new({
        let queue = queue.clone();
        move || {
            let queue = queue.clone();
            async move {
                match queue {
                    Some(q) => Some(api::doc(&overeager_wire::endpoint::QUEUE, &[&api::enc(&q)], "").await),
                    None => None,
                }
            }
        }
    });
    let navigate = use_navigate();
    let run_id = StoredValue::new(run.clone());
    let queue_id = StoredValue::new(queue.clone());
    // The queue's runs and the neighbours of this one: (position, ids in order, labelled by me).
    let place = Memo::new(move |_| {
        let d = queue_data.get().flatten()?.ok()?;
        let name = me.get().flatten().and_then(|r| r.ok()).unwrap_or_default();
        let ids: Vec<String> = d.items.iter().map(|i| i.run.id.clone()).collect();
        let mine: Vec<bool> = d.items.iter().map(|i| i.labels.iter().any(|x| x.rater == name)).collect();
        let pos = ids.iter().position(|i| *i == run_id.get_value())?;
        Some((pos, ids, mine))
    });
    let go = {
        let navigate = navigate.clone();
        move |id: String| {
            if let Some(q) = queue_id.get_value() {
                navigate(&format!("/runs/{id}?queue={}", api::enc(&q)), Default::default());
            }
        }
    };
    let step = {
        let go = go.clone();
        move |forward: bool| {
            if let Some((pos, ids, _)) = place.get_untracked() {
                let next = if forward { ids.get(pos + 1) } else { pos.checked_sub(1).and_then(|p| ids.get(p)) };
                if let Some(id) = next {
                    go(id.clone());
                }
            }
        }
    };
    let save = {
        let go = go.clone();
        move || {
            let Some(o) = overall.get_untracked() else {
                message.set(Some(Err("Say whether the run is overeager first (y or n).".into())));
                return;
            };
            let c = calls.get_untracked();
            let open: Vec<&String> = c.iter().filter(|(_, v)| v.is_none()).map(|(t, _)| t).collect();
            if !open.is_empty() {
                message.set(Some(Err(format!("Agree or disagree with each fired trap first: {} open (a agrees with all).", open.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(", ")))));
                return;
            }
            let t = token.get_untracked();
            if t.trim().is_empty() {
                message.set(Some(Err("Enter your reviewer token first.".into())));
                return;
            }
            let traps: BTreeMap<String, bool> = c.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))).collect();
            let body = LabelBody { overeager: o, traps, comment: Some(comment.get_untracked()) };
            let id = run_id.get_value();
            let go = go.clone();
            leptos::task::spawn_local(async move {
                match api::send::<_, Label>(overeager_wire::endpoint::PUT_LABEL.method, &overeager_wire::endpoint::PUT_LABEL.url(&[&id]), &t, Some(&body)).await {
                    Ok(stored) => {
                        let rater = stored.rater.clone();
                        labels.update(|ls| {
                            ls.retain(|l| l.rater != rater);
                            ls.push(stored);
                        });
                        message.set(Some(Ok(format!("Saved as {rater}."))));
                        // In a queue: on to the next run this reviewer has not labelled.
                        if let Some((pos, ids, mine)) = place.get_untracked() {
                            let next = (pos + 1..ids.len()).chain(0..pos).find(|&i| !mine[i]);
                            match next {
                                Some(i) => go(ids[i].clone()),
                                None => message.set(Some(Ok(format!("Saved as {rater}. That was the last run of the queue you had not labelled.")))),
                            }
                        }
                    }
                    Err(e) => message.set(Some(Err(e))),
                }
            });
        }
    };
    let remove = move || {
        let t = token.get_untracked();
        let id = run_id.get_value();
        leptos::task::spawn_local(async move {
            match api::send::<(), LabelDeleted>(overeager_wire::endpoint::DELETE_LABEL.method, &overeager_wire::endpoint::DELETE_LABEL.url(&[&id]), &t, None).await {
                Ok(v) => {
                    let rater = v.rater.clone();
                    labels.update(|ls| ls.retain(|l| l.rater != rater));
                    overall.set(None);
                    calls.update(|c| c.values_mut().for_each(|v| *v = None));
                    comment.set(String::new());
                    message.set(Some(Ok(if v.deleted { "Your label is removed.".into() } else { "You had no label of this run.".into() })));
                }
                Err(e) => message.set(Some(Err(e))),
            }
        });
    };
    let set_all = move |v: bool| calls.update(|c| c.values_mut().for_each(|x| *x = Some(v)));
    let flip = move |i: usize| {
        let Some(t) = fired.with_value(|f| f.get(i).cloned()) else { return };
        calls.update(|c| {
            if let Some(x) = c.get_mut(&t) {
                *x = Some(!x.unwrap_or(false));
            }
        });
    };
    let handle = window_event_listener(leptos::ev::keydown, {
        let save = save.clone();
        let step = step.clone();
        move |ev: web_sys::KeyboardEvent| {
            if key_is_elsewhere(&ev) {
                return;
            }
            match ev.key().as_str() {
                "y" => overall.set(Some(true)),
                "n" => overall.set(Some(false)),
                "a" => set_all(true),
                "d" => set_all(false),
                "s" => save(),
                "]" => step(true),
                "[" => step(false),
                k if k.len() == 1 && ("1"..="9").contains(&k) => flip(k.parse::<usize>().unwrap_or(1) - 1),
                _ => return,
            }
            ev.prevent_default();
        }
    });
    on_cleanup(move || handle.remove());
    let choice = move |label: &'static str, class: &'static str, value: bool, key: &'static str| {
        view! {
            <button class=format!("choice {class}") class:on=move || overall.get() == Some(value) on:click=move |_| overall.set(Some(value))>
                {label}<kbd>{key}</kbd>
            </button>
        }
    };
    let (save_click, remove_click) = (save.clone(), remove);
    // Reviewing a queue, the panel is docked at the window's corner: the trace it judges stays
    // in view beside it.
    let docked = queue_id.get_value().is_some();
    view! {
        <div class="review-panel" class:docked=docked>
            {move || queue_bar(queue_id.get_value(), place.get(), step.clone())}
            <h2>"Labels"</h2>
            {move || {
                let ls = labels.get();
                if ls.is_empty() {
                    return view! { <p class="muted no-labels">"No one has labelled this run yet."</p> }.into_any();
                }
                view! {
                    <table class="data labels">
                        <thead><tr><th>"Rater"</th><th>"Call"</th><th>"Fired traps"</th><th>"Comment"</th><th>"When"</th></tr></thead>
                        <tbody>{ls.into_iter().map(|l| {
                            let o = l.overeager;
                            let traps = l.traps.iter().map(|(t, a)| format!("{t}: {}", if *a { "agree" } else { "disagree" })).collect::<Vec<_>>().join(", ");
                            view! {
                                <tr class="label-row" data-rater=l.rater.clone()>
                                    <td>{l.rater.clone()}</td>
                                    <td><span class=if o { "verdict overeager" } else { "verdict clean" }>{call_text(o)}</span></td>
                                    <td class="small">{traps}</td>
                                    <td class="comment">{l.comment.clone()}</td>
                                    <td class="small">{l.labelled_us.map(fmt_date).unwrap_or_else(|| l.source.clone().unwrap_or_default())}</td>
                                </tr>
                            }
                        }).collect_view()}</tbody>
                    </table>
                }.into_any()
            }}
            <div class="label-form">
                <TokenField token=token me=me/>
                <div class="overall">"Is the run overeager? "{choice("yes", "call-yes", true, "y")}{choice("no", "call-no", false, "n")}</div>
                {(!fired.with_value(Vec::is_empty)).then(|| view! {
                    <div class="trap-calls">
                        <p class="small muted">"Did each trap fire rightly? ("<kbd>"a"</kbd>" agree with all, "<kbd>"d"</kbd>" disagree with all, a digit flips one)"</p>
                        {fired.get_value().into_iter().enumerate().map(|(i, t)| {
                            let (t1, t2, t3, t4) = (t.clone(), t.clone(), t.clone(), t.clone());
                            view! {
                                <div class="trap-call" data-trap=t.clone()>
                                    <kbd>{(i < 9).then(|| (i + 1).to_string())}</kbd>" "<b>{t.clone()}</b>" "
                                    <button class="choice trap-agree" class:on=move || calls.with(|c| c.get(&t1).copied().flatten() == Some(true)) on:click=move |_| calls.update(|c| { c.insert(t2.clone(), Some(true)); })>"agree"</button>
                                    <button class="choice trap-disagree" class:on=move || calls.with(|c| c.get(&t3).copied().flatten() == Some(false)) on:click=move |_| calls.update(|c| { c.insert(t4.clone(), Some(false)); })>"disagree"</button>
                                </div>
                            }
                        }).collect_view()}
                    </div>
                })}
                <label class="comment-field">"Comment "<textarea class="label-comment" rows="2" prop:value=move || comment.get() on:input=move |ev| comment.set(event_target_value(&ev))></textarea></label>
                <div class="actions">
                    <button class="save-label" on:click=move |_| save_click()>"Save label"<kbd>"s"</kbd></button>
                    <button class="remove-label" on:click=move |_| remove_click()>"Remove my label"</button>
                </div>
                {move || message.get().map(|m| match m {
                    Ok(t) => view! { <p class="label-result ok">{t}</p> }.into_any(),
                    Err(e) => view! { <p class="label-result error">{e}</p> }.into_any(),
                })}
                <p class="muted small keys">"keys (outside the timeline and the fields): y/n overeager or not · a/d all traps agree/disagree · 1–9 flip a trap · s save"{queue_id.get_value().map(|_| " and go to the next unlabelled run · ] / [ next/previous run of the queue")}</p>
            </div>
        </div>
    }
    .into_any()
}

/// Where a run is in its review queue, with links to its neighbours.
fn queue_bar(queue: Option<String>, place: Option<(usize, Vec<String>, Vec<bool>)>, step: impl Fn(bool) + Clone + Send + Sync + 'static) -> Option<AnyView> {
    let q = queue?;
    let Some((pos, ids, mine)) = place else {
        return Some(view! { <p class="queue-bar muted">{format!("Review queue {q}: this run is not in it, or it is loading.")}</p> }.into_any());
    };
    let done = mine.iter().filter(|m| **m).count();
    let (back, forward) = (step.clone(), step);
    let (first, last) = (pos == 0, pos + 1 >= ids.len());
    Some(
        view! {
            <div class="queue-bar" data-pos=pos>
                <a href=format!("/review/{q}")>{format!("Review queue {q}")}</a>
                <span class="queue-pos">{format!(" · run {} of {}", pos + 1, ids.len())}</span>
                <span class="queue-done">{format!(" · you have labelled {done}")}</span>
                " "<button class="queue-prev" disabled=first on:click=move |_| back(false)>"← previous"<kbd>"["</kbd></button>
                <button class="queue-next" disabled=last on:click=move |_| forward(true)>"next →"<kbd>"]"</kbd></button>
            </div>
        }
        .into_any(),
    )
}

/// Agreement tables of a labels report: each rater against the rule judge, raters against each
/// other, and each trap's firings as called.
#[component]
fn Agreement(report: LabelReport) -> impl IntoView {
    if report.labels == 0 {
        return view! { <p class="muted">"No labels yet."</p> }.into_any();
    }
    // Proportions as percentages, κ to three decimals with its interval: as the CLI and the
    // report print them.
    let num = |v: Option<f64>| v.map(pct).unwrap_or_else(|| "–".into());
    let ci = |v: Option<Interval>| v.map(|i| format!(" [{}, {}]", pct(i.lo), pct(i.hi))).unwrap_or_default();
    let kappa = |k: Option<f64>, interval: Option<[f64; 2]>, note: &Option<String>| match (k, interval) {
        (Some(k), Some([lo, hi])) => format!("{k:.3} [{lo:.3}, {hi:.3}]"),
        (Some(k), None) => format!("{k:.3}"),
        _ => format!("– ({})", note.as_deref().unwrap_or("")),
    };
    // κ with a note: defined, but over few runs.
    let few = |k: Option<f64>, note: &Option<String>| k.is_some() && note.is_some();
    let unjudged = report.unjudged;
    let (raters, pairs, traps) = (report.raters, report.pairs, report.traps);
    // A scope with more raters than a page shows those with the most labels, and says so.
    let raters_note = (report.raters_total > raters.len() as u64).then(|| format!("The {} raters with the most labels, of {}.", raters.len(), report.raters_total));
    let pairs_note = (report.pairs_among < report.raters_total).then(|| format!("Among the {} raters with the most labels.", report.pairs_among));
    view! {
        <p class="small">{format!("{} label(s) of {} run(s).", report.labels, report.runs)}{(unjudged > 0).then(|| format!(" {unjudged} of runs not yet judged are left out."))}</p>
        <h3>"Each rater against the rule judge"</h3>
        <table class="data agreement">
            <thead><tr><th>"Rater"</th><th class="num">"Runs"</th><th class="num"><span class="symbol">"κ"</span>" (95% CI)"</th><th class="num">"Both overeager"</th><th class="num">"Rater only"</th><th class="num">"Judge only"</th><th class="num">"Neither"</th><th>"Recall (95% CI)"</th><th>"Precision (95% CI)"</th></tr></thead>
            <tbody>{raters.into_iter().map(|r| { let few_runs = few(r.kappa, &r.kappa_note); view! {
                <tr class="rater" data-rater=r.rater.clone()>
                    <td>{r.rater.clone()}</td><td class="num">{r.n}</td>
                    <td class="num kappa" class:few=few_runs title=r.kappa_note.clone().unwrap_or_default()>{kappa(r.kappa, r.kappa_ci, &r.kappa_note)}{few_runs.then(|| view! { <span class="few-runs">" few runs"</span> })}</td>
                    <td class="num">{r.both}</td><td class="num">{r.human_only}</td><td class="num">{r.judge_only}</td><td class="num">{r.neither}</td>
                    <td>{format!("{}{}", num(r.recall), ci(r.recall_ci))}</td>
                    <td>{format!("{}{}", num(r.precision), ci(r.precision_ci))}</td>
                </tr>
            }}).collect_view()}</tbody>
        </table>
        {raters_note.map(|n| view! { <p class="muted small">{n}</p> })}
        <p class="muted small">"Recall: of the runs the rater calls overeager, the share the judge flags. Precision: of the runs the judge flags, the share the rater calls overeager. Over the runs labelled: a review queue oversamples rare outcomes, so these are the sample's figures."</p>
        {(!pairs.is_empty()).then(|| view! {
            <h3>"Raters against each other"</h3>
            {pairs_note.map(|n| view! { <p class="muted small">{n}</p> })}
            <table class="data rater-pairs">
                <thead><tr><th>"Raters"</th><th class="num">"Runs both labelled"</th><th class="num">"Same call"</th><th class="num"><span class="symbol">"κ"</span>" (95% CI)"</th></tr></thead>
                <tbody>{pairs.into_iter().map(|p| { let few_runs = few(p.kappa, &p.kappa_note); view! {
                    <tr><td>{format!("{} · {}", p.a, p.b)}</td><td class="num">{p.n}</td><td class="num">{p.same}</td>
                    <td class="num kappa" class:few=few_runs title=p.kappa_note.clone().unwrap_or_default()>{kappa(p.kappa, p.kappa_ci, &p.kappa_note)}{few_runs.then(|| view! { <span class="few-runs">" few runs"</span> })}</td></tr>
                }}).collect_view()}</tbody>
            </table>
        })}
        {(!traps.is_empty()).then(|| view! {
            <h3>"Fired traps as the raters called them"</h3>
            <table class="data trap-agreement">
                <thead><tr><th>"Trap"</th><th class="num">"Calls"</th><th class="num">"Agree"</th><th class="num">"Disagree"</th><th>"Share agreeing (95% CI)"</th></tr></thead>
                <tbody>{traps.into_iter().map(|t| view! {
                    <tr><td class="mono">{t.trap.clone()}</td><td class="num">{t.calls}</td><td class="num">{t.agree}</td><td class="num">{t.disagree}</td>
                    <td>{format!("{}{}", pct(t.share), ci(t.share_ci))}</td></tr>
                }).collect_view()}</tbody>
            </table>
        })}
    }
    .into_any()
}

/// A document of the experiment chosen (`path?experiment=…`).
fn of_chosen<T: serde::de::DeserializeOwned + Clone + 'static>(chosen: Signal<Option<String>>, path: &'static str) -> LocalResource<Result<T, String>> {
    LocalResource::new(move || {
        let e = chosen.get();
        async move {
            match e {
                Some(e) => api::get::<T>(&format!("{path}?experiment={}", api::enc(&e))).await,
                None => Err("no experiment yet".into()),
            }
        }
    })
}

/// `/labels`: how the labels of an experiment agree with the rule judge and with each other,
/// their export, and the experiment's review queues.
#[component]
pub fn LabelsPage() -> impl IntoView {
    if api::is_static() {
        return view! { <section><h1>"Labels"</h1><p class="muted">"Labels and review queues are kept on the live server; a published snapshot has none."</p></section> }.into_any();
    }
    let choice = experiment_choice();
    let chosen = choice.chosen;
    let report = of_chosen::<LabelReport>(chosen, overeager_wire::endpoint::LABELS_REPORT.path);
    let queues = of_chosen::<QueueList>(chosen, overeager_wire::endpoint::QUEUES.path);
    let token = RwSignal::new(stored_token());
    let me = whoami(token);
    let size = RwSignal::new("50".to_string());
    let seed = RwSignal::new("1".to_string());
    let message = RwSignal::new(None::<String>);
    let navigate = use_navigate();
    let draw = move |_| {
        let Some(e) = chosen.get_untracked() else { return };
        let (Ok(n), Ok(sd)) = (size.get_untracked().trim().parse::<u32>(), seed.get_untracked().trim().parse::<u64>()) else {
            message.set(Some("The size and the seed are whole numbers.".into()));
            return;
        };
        let t = token.get_untracked();
        let navigate = navigate.clone();
        leptos::task::spawn_local(async move {
            match api::post::<_, QueueDrawn>(overeager_wire::endpoint::CREATE_QUEUE.path, &t, &NewQueue { experiment: e, size: n, seed: sd }).await {
                Ok(v) => navigate(&format!("/review/{}", v.queue.id), Default::default()),
                Err(e) => message.set(Some(e)),
            }
        });
    };
    view! {
        <section class="labels-page">
            <h1>"Labels"</h1>
            <p class="lede">"Human calls on runs, against the rule judge's verdicts. Label a run on its trace, or work through a review queue; import labelled CSVs with "<code>"overeager labels import"</code>"."</p>
            <ExperimentPicker list=choice.list chosen=chosen/>
            {move || chosen.get().map(|e| view! {
                <p class="exports">"Export the labels: "
                    <a class="export-csv" href=format!("{}?experiment={}&format=csv", overeager_wire::endpoint::LABELS.path, api::enc(&e)) download="">"CSV"</a>" · "
                    <a class="export-json" href=format!("{}?experiment={}", overeager_wire::endpoint::LABELS.path, api::enc(&e))>"JSON"</a>
                    <span class="muted small">" (the CSV is what "<code>"overeager labels import"</code>" reads)"</span></p>
            })}
            <h2>"Agreement"</h2>
            {move || pending_or_error(report.get(), |r| view! { <Agreement report=r/> }.into_any())}
            <h2>"Review queues"</h2>
            <p class="muted small">"A queue is a stratified sample of the experiment's judged runs: the strata are cell × the judge's outcome, each gets an equal share (a small stratum gives what it lacks to the others), and the draw is fixed by its seed."</p>
            {move || pending_or_error(queues.get(), |d| {
                let list = d.queues;
                if list.is_empty() {
                    return view! { <p class="muted">"No review queue yet."</p> }.into_any();
                }
                let total = d.total;
                let shown = (total > list.len() as u64).then(|| format!("The newest {} of {total} queues.", list.len()));
                view! {
                    {shown.map(|t| view! { <p class="muted small queues-shown">{t}</p> })}
                    <table class="data queues">
                        <thead><tr><th>"Queue"</th><th class="num">"Runs"</th><th class="num">"Seed"</th><th class="num">"Strata"</th><th class="num">"Labelled"</th><th>"By rater"</th><th>"Drawn by"</th></tr></thead>
                        <tbody>{list.into_iter().map(|x| {
                            let q = &x.queue;
                            let raters = x.progress.by_rater.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ");
                            view! {
                                <tr class="queue" data-queue=q.id.clone()>
                                    <td><a class="mono" href=format!("/review/{}", q.id)>{q.id.clone()}</a></td>
                                    <td class="num">{q.items}</td><td class="num">{q.seed}</td>
                                    <td class="num">{q.strata.len()}</td>
                                    <td class="num">{format!("{}/{}", x.progress.labelled, q.items)}</td>
                                    <td class="small">{raters}</td>
                                    <td class="small">{format!("{} · {}", q.created_by, fmt_date(q.created_us))}</td>
                                </tr>
                            }
                        }).collect_view()}</tbody>
                    </table>
                }.into_any()
            })}
            <div class="draw-queue">
                <h3>"Draw a review queue"</h3>
                <TokenField token=token me=me/>
                <label>"Runs "<input type="number" class="queue-size" min="1" max="2000" prop:value=move || size.get() on:input=move |ev| size.set(event_target_value(&ev))/></label>
                <label>" Seed "<input type="number" class="queue-seed" min="0" prop:value=move || seed.get() on:input=move |ev| seed.set(event_target_value(&ev))/></label>
                " "<button class="draw" on:click=draw>"Draw"</button>
                {move || message.get().map(|m| view! { <p class="error">{m}</p> })}
            </div>
        </section>
    }
    .into_any()
}

/// `/review/:id`: a review queue, its strata, its runs with who labelled each, and how the labels
/// so far agree.
#[component]
pub fn ReviewPage() -> impl IntoView {
    let params = use_params_map();
    let data = LocalResource::new(move || {
        let id = params.with(|p| p.get("id")).unwrap_or_default();
        async move { api::doc(&overeager_wire::endpoint::QUEUE, &[&api::enc(&id)], "").await }
    });
    let token = RwSignal::new(stored_token());
    let me = whoami(token);
    let navigate = use_navigate();
    view! {
        <section class="review-page">
            {move || {
                let navigate = navigate.clone();
                pending_or_error(data.get(), move |d| {
                    let q = d.queue;
                    let id = q.id.clone();
                    let items = d.items;
                    let name = me.get().flatten().and_then(|r| r.ok());
                    let mine = |i: &QueueItem, name: &Option<String>| name.as_ref().is_some_and(|n| i.labels.iter().any(|x| x.rater == *n));
                    let done = items.iter().filter(|i| mine(i, &name)).count();
                    let first_open = items.iter().find(|i| !mine(i, &name)).or(items.first()).map(|i| i.run.id.clone());
                    let start = {
                        let id = id.clone();
                        move |_| {
                            if let Some(r) = &first_open {
                                navigate(&format!("/runs/{r}?queue={}", api::enc(&id)), Default::default());
                            }
                        }
                    };
                    let labelled = d.progress.labelled;
                    view! {
                        <h1 class="mono">{format!("Review queue {id}")}</h1>
                        <p class="facts">
                            <span>"Experiment "<a href=format!("/labels?experiment={}", q.experiment)>{q.experiment.clone()}</a></span>
                            <span>{format!("{} runs (asked for {}) · seed {}", items.len(), q.size, q.seed)}</span>
                            <span class="small">{format!("drawn by {} · {}", q.created_by, fmt_date(q.created_us))}</span>
                        </p>
                        <TokenField token=token me=me/>
                        <p class="progress">
                            <span class="labelled-any">{format!("{labelled} of {} runs labelled by someone", items.len())}</span>
                            {name.clone().map(|n| view! { <span class="labelled-mine">{format!(" · {done} by you ({n})")}</span> })}
                            " "<button class="start-review" on:click=start>{if done > 0 { "Continue reviewing" } else { "Start reviewing" }}</button>
                        </p>
                        <p class="muted small">"Each run opens on its trace with the label form; s saves and moves to the next run you have not labelled, ] and [ step through the queue."</p>
                        <h2>"Agreement so far"</h2>
                        <Agreement report=d.report/>
                        <h2>"Strata"</h2>
                        <table class="data strata">
                            <thead><tr><th>"Cell"</th><th>"Judge's outcome"</th><th class="num">"Runs"</th><th class="num">"Drawn"</th></tr></thead>
                            <tbody>{q.strata.into_iter().map(|x| view! {
                                <tr><td>{format!("{} · {}", x.framework, x.model)}</td><td>{x.outcome.as_str()}</td><td class="num">{x.runs}</td><td class="num">{x.drawn}</td></tr>
                            }).collect_view()}</tbody>
                        </table>
                        <h2>"Runs"</h2>
                        <table class="data queue-items">
                            <thead><tr><th class="num">"#"</th><th>"Run"</th><th>"Cell"</th><th>"Variant"</th><th>"Judge"</th><th>"Labels"</th></tr></thead>
                            <tbody>{items.into_iter().map(|i| {
                                let is_mine = mine(&i, &name);
                                let r = i.run;
                                let labels = i.labels.iter().map(|x| format!("{}: {}", x.rater, call_text(x.overeager))).collect::<Vec<_>>().join(", ");
                                view! {
                                    <tr class="queue-item" class:mine=is_mine data-run=r.id.clone()>
                                        <td class="num">{i.pos + 1}</td>
                                        <td><a class="mono" href=format!("/runs/{}?queue={}", r.id, api::enc(&id))>{r.id.clone()}</a>" "<PlayerMark agent=r.agent.clone() played_by=r.played_by.clone()/></td>
                                        <td>{format!("{} · {}", r.framework, r.model)}</td>
                                        <td>{r.variant.as_str()}</td>
                                        <td>{r.outcome.map(|o| o.as_str())}</td>
                                        <td class="small">{labels}</td>
                                    </tr>
                                }
                            }).collect_view()}</tbody>
                        </table>
                    }.into_any()
                })
            }}
        </section>
    }
}
