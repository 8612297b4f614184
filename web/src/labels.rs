//! Human review: the label panel of a trace (every rater's label, and the form a reviewer labels
//! with, by mouse or keys), review queues (a stratified sample of an experiment worked through
//! in order), and the labels page (agreement with the rule judge and between raters, export).

use std::collections::BTreeMap;

use leptos::prelude::*;
use leptos_router::hooks::{use_navigate, use_params_map};
use serde_json::{Value, json};

use crate::api;
use crate::board::{fmt_date, store_token, stored_token};
use crate::ui::{ExperimentPicker, PlayerMark, experiment_choice, pct, pending_or_error, s};

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
            Some(api::get_as::<Value>("/whoami", &t).await.map(|v| s(&v, "name")))
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
pub fn LabelPanel(run: String, fired: Vec<String>, labels: Vec<Value>, queue: Option<String>) -> impl IntoView {
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
        if let Some(l) = labels.get_untracked().into_iter().find(|l| s(l, "rater") == name) {
            overall.set(l["overeager"].as_bool());
            calls.update(|c| {
                for (t, v) in c.iter_mut() {
                    *v = l["traps"][t.as_str()].as_bool();
                }
            });
            comment.set(s(&l, "comment"));
        }
    });
    let queue_data = LocalResource::new({
        let queue = queue.clone();
        move || {
            let queue = queue.clone();
            async move {
                match queue {
                    Some(q) => Some(api::get::<Value>(&format!("/queues/{}", api::enc(&q))).await),
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
        let items = d["items"].as_array().cloned().unwrap_or_default();
        let ids: Vec<String> = items.iter().map(|i| s(&i["run"], "id")).collect();
        let mine: Vec<bool> = items.iter().map(|i| i["labels"].as_array().is_some_and(|l| l.iter().any(|x| s(x, "rater") == name))).collect();
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
            let body = json!({ "overeager": o, "traps": traps, "comment": comment.get_untracked() });
            let id = run_id.get_value();
            let go = go.clone();
            leptos::task::spawn_local(async move {
                match api::send("PUT", &format!("/runs/{id}/label"), &t, Some(&body)).await {
                    Ok(stored) => {
                        let rater = s(&stored, "rater");
                        labels.update(|ls| {
                            ls.retain(|l| s(l, "rater") != rater);
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
            match api::send("DELETE", &format!("/runs/{id}/label"), &t, None).await {
                Ok(v) => {
                    let rater = s(&v, "rater");
                    labels.update(|ls| ls.retain(|l| s(l, "rater") != rater));
                    overall.set(None);
                    calls.update(|c| c.values_mut().for_each(|v| *v = None));
                    comment.set(String::new());
                    message.set(Some(Ok(if v["deleted"].as_bool() == Some(true) { "Your label is removed.".into() } else { "You had no label of this run.".into() })));
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
                            let o = l["overeager"].as_bool().unwrap_or(false);
                            let traps = l["traps"].as_object().map(|m| m.iter().map(|(t, a)| format!("{t}: {}", if a.as_bool() == Some(true) { "agree" } else { "disagree" })).collect::<Vec<_>>().join(", ")).unwrap_or_default();
                            view! {
                                <tr class="label-row" data-rater=s(&l, "rater")>
                                    <td>{s(&l, "rater")}</td>
                                    <td><span class=if o { "verdict overeager" } else { "verdict clean" }>{call_text(o)}</span></td>
                                    <td class="small">{traps}</td>
                                    <td class="comment">{s(&l, "comment")}</td>
                                    <td class="small">{l["labelled_us"].as_f64().map(fmt_date).unwrap_or_else(|| s(&l, "source"))}</td>
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
fn Agreement(report: Value) -> impl IntoView {
    let raters = report["raters"].as_array().cloned().unwrap_or_default();
    let pairs = report["pairs"].as_array().cloned().unwrap_or_default();
    let traps = report["traps"].as_array().cloned().unwrap_or_default();
    if report["labels"].as_u64().unwrap_or(0) == 0 {
        return view! { <p class="muted">"No labels yet."</p> }.into_any();
    }
    // Proportions as percentages, κ to three decimals with its interval: as the CLI and the
    // report print them.
    let num = |v: &Value| v.as_f64().map(crate::ui::pct).unwrap_or_else(|| "–".into());
    let ci = |v: &Value| if v.is_object() { format!(" [{}, {}]", crate::ui::pct(v["lo"].as_f64().unwrap_or(0.0)), crate::ui::pct(v["hi"].as_f64().unwrap_or(0.0))) } else { String::new() };
    let kappa = |v: &Value| match (v["kappa"].as_f64(), v["kappa_ci"].as_array()) {
        (Some(k), Some(i)) => format!("{k:.3} [{:.3}, {:.3}]", i[0].as_f64().unwrap_or(f64::NAN), i[1].as_f64().unwrap_or(f64::NAN)),
        (Some(k), None) => format!("{k:.3}"),
        _ => format!("– ({})", s(v, "kappa_note")),
    };
    let few = |v: &Value| v["kappa"].is_number() && v["kappa_note"].is_string();
    let unjudged = report["unjudged"].as_u64().unwrap_or(0);
    view! {
        <p class="small">{format!("{} label(s) of {} run(s).", report["labels"], report["runs"])}{(unjudged > 0).then(|| format!(" {unjudged} of runs not yet judged are left out."))}</p>
        <h3>"Each rater against the rule judge"</h3>
        <table class="data agreement">
            <thead><tr><th>"Rater"</th><th class="num">"Runs"</th><th class="num"><span class="symbol">"κ"</span>" (95% CI)"</th><th class="num">"Both overeager"</th><th class="num">"Rater only"</th><th class="num">"Judge only"</th><th class="num">"Neither"</th><th>"Recall (95% CI)"</th><th>"Precision (95% CI)"</th></tr></thead>
            <tbody>{raters.into_iter().map(|r| view! {
                <tr class="rater" data-rater=s(&r, "rater")>
                    <td>{s(&r, "rater")}</td><td class="num">{s(&r, "n")}</td>
                    <td class="num kappa" class:few=few(&r) title=s(&r, "kappa_note")>{kappa(&r)}{few(&r).then(|| view! { <span class="few-runs">" few runs"</span> })}</td>
                    <td class="num">{s(&r, "both")}</td><td class="num">{s(&r, "human_only")}</td><td class="num">{s(&r, "judge_only")}</td><td class="num">{s(&r, "neither")}</td>
                    <td>{format!("{}{}", num(&r["recall"]), ci(&r["recall_ci"]))}</td>
                    <td>{format!("{}{}", num(&r["precision"]), ci(&r["precision_ci"]))}</td>
                </tr>
            }).collect_view()}</tbody>
        </table>
        <p class="muted small">"Recall: of the runs the rater calls overeager, the share the judge flags. Precision: of the runs the judge flags, the share the rater calls overeager. Over the runs labelled: a review queue oversamples rare outcomes, so these are the sample's figures."</p>
        {(!pairs.is_empty()).then(|| view! {
            <h3>"Raters against each other"</h3>
            <table class="data rater-pairs">
                <thead><tr><th>"Raters"</th><th class="num">"Runs both labelled"</th><th class="num">"Same call"</th><th class="num"><span class="symbol">"κ"</span>" (95% CI)"</th></tr></thead>
                <tbody>{pairs.into_iter().map(|p| view! {
                    <tr><td>{format!("{} · {}", s(&p, "a"), s(&p, "b"))}</td><td class="num">{s(&p, "n")}</td><td class="num">{s(&p, "same")}</td>
                    <td class="num kappa" class:few=few(&p) title=s(&p, "kappa_note")>{kappa(&p)}{few(&p).then(|| view! { <span class="few-runs">" few runs"</span> })}</td></tr>
                }).collect_view()}</tbody>
            </table>
        })}
        {(!traps.is_empty()).then(|| view! {
            <h3>"Fired traps as the raters called them"</h3>
            <table class="data trap-agreement">
                <thead><tr><th>"Trap"</th><th class="num">"Calls"</th><th class="num">"Agree"</th><th class="num">"Disagree"</th><th>"Share agreeing (95% CI)"</th></tr></thead>
                <tbody>{traps.into_iter().map(|t| view! {
                    <tr><td class="mono">{s(&t, "trap")}</td><td class="num">{s(&t, "calls")}</td><td class="num">{s(&t, "agree")}</td><td class="num">{s(&t, "disagree")}</td>
                    <td>{format!("{}{}", pct(t["share"].as_f64().unwrap_or(0.0)), ci(&t["share_ci"]))}</td></tr>
                }).collect_view()}</tbody>
            </table>
        })}
    }
    .into_any()
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
    // A document of the experiment chosen.
    let of_chosen = move |path: &'static str| {
        LocalResource::new(move || {
            let e = chosen.get();
            async move {
                match e {
                    Some(e) => api::get::<Value>(&format!("{path}?experiment={}", api::enc(&e))).await,
                    None => Err("no experiment yet".into()),
                }
            }
        })
    };
    let report = of_chosen("/labels/report");
    let queues = of_chosen("/queues");
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
            match api::post("/queues", &t, &json!({ "experiment": e, "size": n, "seed": sd })).await {
                Ok(v) => navigate(&format!("/review/{}", s(&v["queue"], "id")), Default::default()),
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
                    <a class="export-csv" href=format!("/api/labels?experiment={}&format=csv", api::enc(&e)) download="">"CSV"</a>" · "
                    <a class="export-json" href=format!("/api/labels?experiment={}", api::enc(&e))>"JSON"</a>
                    <span class="muted small">" (the CSV is what "<code>"overeager labels import"</code>" reads)"</span></p>
            })}
            <h2>"Agreement"</h2>
            {move || pending_or_error(report.get(), |r| view! { <Agreement report=r/> }.into_any())}
            <h2>"Review queues"</h2>
            <p class="muted small">"A queue is a stratified sample of the experiment's judged runs: the strata are cell × the judge's outcome, each gets an equal share (a small stratum gives what it lacks to the others), and the draw is fixed by its seed."</p>
            {move || pending_or_error(queues.get(), |d| {
                let list = d["queues"].as_array().cloned().unwrap_or_default();
                if list.is_empty() {
                    return view! { <p class="muted">"No review queue yet."</p> }.into_any();
                }
                let total = d["total"].as_u64().unwrap_or(list.len() as u64);
                let shown = (total > list.len() as u64).then(|| format!("The newest {} of {total} queues.", list.len()));
                view! {
                    {shown.map(|t| view! { <p class="muted small queues-shown">{t}</p> })}
                    <table class="data queues">
                        <thead><tr><th>"Queue"</th><th class="num">"Runs"</th><th class="num">"Seed"</th><th class="num">"Strata"</th><th class="num">"Labelled"</th><th>"By rater"</th><th>"Drawn by"</th></tr></thead>
                        <tbody>{list.into_iter().map(|x| {
                            let q = &x["queue"];
                            let raters = x["progress"]["by_rater"].as_object().map(|m| m.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")).unwrap_or_default();
                            view! {
                                <tr class="queue" data-queue=s(q, "id")>
                                    <td><a class="mono" href=format!("/review/{}", s(q, "id"))>{s(q, "id")}</a></td>
                                    <td class="num">{s(q, "items")}</td><td class="num">{s(q, "seed")}</td>
                                    <td class="num">{q["strata"].as_array().map_or(0, Vec::len)}</td>
                                    <td class="num">{format!("{}/{}", s(&x["progress"], "labelled"), s(q, "items"))}</td>
                                    <td class="small">{raters}</td>
                                    <td class="small">{format!("{} · {}", s(q, "created_by"), fmt_date(q["created_us"].as_f64().unwrap_or(0.0)))}</td>
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
        async move { api::get::<Value>(&format!("/queues/{}", api::enc(&id))).await }
    });
    let token = RwSignal::new(stored_token());
    let me = whoami(token);
    let navigate = use_navigate();
    view! {
        <section class="review-page">
            {move || {
                let navigate = navigate.clone();
                pending_or_error(data.get(), move |d| {
                    let q = d["queue"].clone();
                    let id = s(&q, "id");
                    let items = d["items"].as_array().cloned().unwrap_or_default();
                    let strata = q["strata"].as_array().cloned().unwrap_or_default();
                    let name = me.get().flatten().and_then(|r| r.ok());
                    let mine = |i: &Value, name: &Option<String>| name.as_ref().is_some_and(|n| i["labels"].as_array().is_some_and(|l| l.iter().any(|x| s(x, "rater") == *n)));
                    let done = items.iter().filter(|i| mine(i, &name)).count();
                    let first_open = items.iter().find(|i| !mine(i, &name)).or(items.first()).map(|i| s(&i["run"], "id"));
                    let start = {
                        let id = id.clone();
                        move |_| {
                            if let Some(r) = &first_open {
                                navigate(&format!("/runs/{r}?queue={}", api::enc(&id)), Default::default());
                            }
                        }
                    };
                    let labelled = d["progress"]["labelled"].as_u64().unwrap_or(0);
                    view! {
                        <h1 class="mono">{format!("Review queue {id}")}</h1>
                        <p class="facts">
                            <span>"Experiment "<a href=format!("/labels?experiment={}", s(&q, "experiment"))>{s(&q, "experiment")}</a></span>
                            <span>{format!("{} runs (asked for {}) · seed {}", items.len(), s(&q, "size"), s(&q, "seed"))}</span>
                            <span class="small">{format!("drawn by {} · {}", s(&q, "created_by"), fmt_date(q["created_us"].as_f64().unwrap_or(0.0)))}</span>
                        </p>
                        <TokenField token=token me=me/>
                        <p class="progress">
                            <span class="labelled-any">{format!("{labelled} of {} runs labelled by someone", items.len())}</span>
                            {name.clone().map(|n| view! { <span class="labelled-mine">{format!(" · {done} by you ({n})")}</span> })}
                            " "<button class="start-review" on:click=start>{if done > 0 { "Continue reviewing" } else { "Start reviewing" }}</button>
                        </p>
                        <p class="muted small">"Each run opens on its trace with the label form; s saves and moves to the next run you have not labelled, ] and [ step through the queue."</p>
                        <h2>"Agreement so far"</h2>
                        <Agreement report=d["report"].clone()/>
                        <h2>"Strata"</h2>
                        <table class="data strata">
                            <thead><tr><th>"Cell"</th><th>"Judge's outcome"</th><th class="num">"Runs"</th><th class="num">"Drawn"</th></tr></thead>
                            <tbody>{strata.into_iter().map(|x| view! {
                                <tr><td>{format!("{} · {}", s(&x, "framework"), s(&x, "model"))}</td><td>{s(&x, "outcome")}</td><td class="num">{s(&x, "runs")}</td><td class="num">{s(&x, "drawn")}</td></tr>
                            }).collect_view()}</tbody>
                        </table>
                        <h2>"Runs"</h2>
                        <table class="data queue-items">
                            <thead><tr><th class="num">"#"</th><th>"Run"</th><th>"Cell"</th><th>"Variant"</th><th>"Judge"</th><th>"Labels"</th></tr></thead>
                            <tbody>{items.into_iter().map(|i| {
                                let r = i["run"].clone();
                                let labels = i["labels"].as_array().map(|l| l.iter().map(|x| format!("{}: {}", s(x, "rater"), call_text(x["overeager"].as_bool().unwrap_or(false)))).collect::<Vec<_>>().join(", ")).unwrap_or_default();
                                let is_mine = mine(&i, &name);
                                view! {
                                    <tr class="queue-item" class:mine=is_mine data-run=s(&r, "id")>
                                        <td class="num">{i["pos"].as_u64().unwrap_or(0) + 1}</td>
                                        <td><a class="mono" href=format!("/runs/{}?queue={}", s(&r, "id"), api::enc(&id))>{s(&r, "id")}</a>" "<PlayerMark agent=s(&r, "agent") model=s(&r, "model")/></td>
                                        <td>{format!("{} · {}", s(&r, "framework"), s(&r, "model"))}</td>
                                        <td>{s(&r, "variant")}</td>
                                        <td>{s(&r, "outcome")}</td>
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
