//! Pieces every page uses: navigation, the experiment picker, rate bars, loading and errors.

use leptos::prelude::*;
use leptos_router::hooks::{use_location, use_navigate, use_query_map};
use overeager_wire::experiment::ExperimentItem;
use overeager_core::model::{ModelSource, PlayedBy};
use overeager_wire::report::Cell;

use crate::api;

/// The site header.
#[component]
pub fn Nav() -> impl IntoView {
    let loc = use_location();
    let link = move |href: &'static str, label: &'static str| {
        let active = move || {
            let p = loc.pathname.get();
            if href == "/" { p == "/" } else { p.starts_with(href) }
        };
        view! { <a href=href class:active=active>{label}</a> }
    };
    view! {
        <header class="top">
            <a class="brand" href="/">"overeager"</a>
            <nav>
                {link("/", "Leaderboard")}
                {link("/matrix", "Matrix")}
                {link("/scenarios", "Scenarios")}
                {link("/runs", "Runs")}
                {link("/search", "Search")}
                {link("/plots", "Plots")}
                {link("/predicates", "Predicates")}
                {link("/transfer", "Transfer")}
                {link("/submissions", "Submissions")}
                {link("/labels", "Labels")}
            </nav>
            {move || api::is_static().then(|| view! { <span class="badge">"published snapshot"</span> })}
        </header>
    }
}

/// A query parameter of the current URL.
pub fn query(name: &'static str) -> Memo<Option<String>> {
    let q = use_query_map();
    Memo::new(move |_| q.with(|m| m.get(name)).filter(|v| !v.is_empty()))
}

/// A function that navigates to the current path with one query parameter changed (an empty
/// value removes it). Made while a component is set up, used from event handlers.
pub fn query_setter() -> impl Fn(&str, &str) + Clone + 'static {
    let loc = use_location();
    let navigate = use_navigate();
    move |name: &str, value: &str| {
        let path = loc.pathname.get_untracked();
        let mut pairs: Vec<(String, String)> = loc.query.get_untracked().into_iter().filter(|(k, _)| k != name).map(|(k, v)| (k.to_string(), v.to_string())).collect();
        if !value.is_empty() {
            pairs.push((name.to_string(), value.to_string()));
        }
        pairs.sort();
        let qs: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={}", api::enc(v))).collect();
        let url = if qs.is_empty() { path } else { format!("{path}?{}", qs.join("&")) };
        navigate(&url, Default::default());
    }
}

/// The experiment a page shows: `?experiment=` or the newest one, with the picker's list.
pub struct ExperimentChoice {
    pub list: LocalResource<Result<Vec<ExperimentItem>, String>>,
    pub chosen: Signal<Option<String>>,
}

pub fn experiment_choice() -> ExperimentChoice {
    let list = LocalResource::new(|| api::doc(&overeager_wire::endpoint::EXPERIMENTS, &[], ""));
    let named = query("experiment");
    let chosen = Signal::derive(move || {
        named.get().or_else(|| list.get().and_then(|r| r.ok()).and_then(|l| l.first().map(|e| e.id.clone())))
    });
    ExperimentChoice { list, chosen }
}

/// A select of experiments that rewrites `?experiment=`.
#[component]
pub fn ExperimentPicker(list: LocalResource<Result<Vec<ExperimentItem>, String>>, chosen: Signal<Option<String>>) -> impl IntoView {
    let set = query_setter();
    move || {
        let set = set.clone();
        let Some(Ok(exps)) = list.get() else { return ().into_any() };
        if exps.len() < 2 {
            return exps
                .first()
                .map(|e| view! { <span class="muted">"Experiment: "<b>{e.title.clone()}</b>" ("{e.id.clone()}")"</span> })
                .into_any();
        }
        let current = chosen.get().unwrap_or_default();
        view! {
            <label class="picker">"Experiment "
                <select on:change=move |ev| set("experiment", &event_target_value(&ev))>
                    {exps.iter().map(|e| {
                        let (id, title) = (e.id.clone(), e.title.clone());
                        let sel = id == current;
                        view! { <option value=id.clone() selected=sel>{format!("{title} ({id})")}</option> }
                    }).collect_view()}
                </select>
            </label>
        }
        .into_any()
    }
}

/// `12.3%`.
pub fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// A cell's mean tokens per run on a provider's model (`12.3k`), or `—` when none of its
/// runs recorded usage (scripted and simulated agents).
pub fn tokens_per_run(cell: &Cell) -> String {
    if cell.usage_runs == 0 {
        return "—".into();
    }
    let mean = cell.tokens.total() as f64 / cell.usage_runs as f64;
    match mean {
        m if m >= 1e6 => format!("{:.1}M", m / 1e6),
        m if m >= 1e3 => format!("{:.1}k", m / 1e3),
        m => format!("{m:.0}"),
    }
}

/// A cell's mean cost per priced run in US dollars, or `—` when no price was known.
pub fn cost_per_run(cell: &Cell) -> String {
    match (cell.cost_usd, cell.priced_runs) {
        (Some(cost), runs) if runs >= 1 => overeager_core::model::usage::usd(cost / runs as f64),
        _ => "—".into(),
    }
}

/// A rate with its confidence interval on a 0–100 % scale.
#[component]
pub fn CiBar(rate: f64, lo: f64, hi: f64) -> impl IntoView {
    let style_ci = format!("left:{:.2}%;width:{:.2}%", lo * 100.0, ((hi - lo) * 100.0).max(0.4));
    let style_pt = format!("left:{:.2}%", rate * 100.0);
    let title = format!("{} (95% CI {}–{})", pct(rate), pct(lo), pct(hi));
    view! {
        <div class="cibar" title=title>
            <div class="ci" style=style_ci></div>
            <div class="pt" style=style_pt></div>
        </div>
    }
}

/// What a page shows while its data loads, or when it failed.
pub fn pending_or_error<T>(r: Option<Result<T, String>>, f: impl FnOnce(T) -> AnyView) -> AnyView {
    match r {
        None => view! { <p class="loading">"Loading…"</p> }.into_any(),
        Some(Err(e)) => view! { <p class="error">{e}</p> }.into_any(),
        Some(Ok(v)) => f(v),
    }
}

/// The first 12 hex digits of a digest.
pub fn short(d: &str) -> String {
    d.strip_prefix("sha256:").unwrap_or(d).chars().take(12).collect()
}

/// What kind of player a run's agent is, when its numbers measure the instrument rather than
/// an agent on a real model, or when its model was reached through the dialect bridge:
/// `(css class, label, explanation)`.
pub fn player_kind(agent: &str, played_by: &PlayedBy) -> Option<(&'static str, &'static str, &'static str)> {
    let bridged = "A real agent CLI on a real model of another API dialect: the model gateway translated every call both ways (the run's model channel holds both sides).";
    match &played_by.source {
        ModelSource::Simulated => Some(("simulated", "simulated", "A simulated agent: its actions are drawn from a policy's probabilities; no model or agent CLI ran.")),
        ModelSource::Scripted if agent == "scripted" || matches!(overeager_core::AgentCell::parse(agent), Ok(overeager_core::AgentCell::Scripted { .. })) => Some(("scripted", "scripted play", "overeager's own player running one of the scenario's scripted plays; no model or agent CLI ran.")),
        ModelSource::Scripted => Some(("scripted-model", "scripted model", "A real agent CLI driven by the scripted model, which plays one of the scenario's plays: the run measures the CLI and the instrument, not a language model.")),
        ModelSource::Replay => Some(("replay", "replay", "A real agent CLI answered by a recorded run's model calls: it reproduces that run, it is no new observation of a model.")),
        ModelSource::StandIn => Some(("stand-in", "stand-in provider", "A real agent CLI on overeager's stand-in provider (`overeager model serve`): the scripted model behind a provider's API, for rehearsing an experiment; no language model answered.")),
        ModelSource::LocalServer { .. } => Some(("local-model", "real local model", "A real agent CLI on a real model served on this machine (`overeager model local`, e.g. SmolLM2-135M on llama.cpp's server): it shows the instrument's path works against a real server; a small model is no evidence about how overeager any frontier model is.")),
        ModelSource::Provider { .. } if played_by.bridged => Some(("bridged", "bridged", bridged)),
        ModelSource::Provider { .. } => None,
    }
}

/// The mark of a run whose model was no real model's (or was bridged), beside wherever a run
/// is named.
#[component]
pub fn PlayerMark(agent: String, played_by: PlayedBy) -> impl IntoView {
    // A provider's bridged run is marked `bridged` above; any other kind gets it beside.
    let bridged = played_by.bridged && !matches!(played_by.source, ModelSource::Provider { .. });
    view! {
        {player_kind(&agent, &played_by).map(|(class, label, title)| view! { <span class=format!("player-mark {class}") title=title>{label}</span> })}
        {bridged.then(|| view! { " "<span class="player-mark bridged" title="The model gateway translated every call between the agent's API dialect and the model's.">"bridged"</span> })}
    }
}
