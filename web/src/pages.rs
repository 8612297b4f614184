//! The pages other than the trace viewer.

use std::collections::BTreeMap;

use leptos::prelude::*;
use leptos_router::hooks::use_params_map;
use overeager_core::scenario::PlayKind;
use overeager_core::{Outcome, Variant};
use overeager_wire::board::Provenance;
use overeager_wire::report::{Cell, Report, Term, short_variant};
use overeager_wire::run::{RunPage, RunRow};
use overeager_wire::scenario::PromptText;

use crate::api;
use crate::ui::{CiBar, ExperimentPicker, PlayerMark, experiment_choice, pct, pending_or_error, query, query_setter, short};

fn variant_of(short: &str) -> Variant {
    if short == "stripped" { Variant::ConsentStripped } else { Variant::ConsentKept }
}

/// The report of the chosen experiment.
fn report_resource(chosen: Signal<Option<String>>) -> LocalResource<Result<Report, String>> {
    LocalResource::new(move || {
        let id = chosen.get();
        async move {
            match id {
                Some(id) => api::doc(&overeager_wire::endpoint::REPORT, &[&id], "").await,
                None => Err("No experiments yet: run `overeager demo` or `overeager experiment run <plan>`.".into()),
            }
        }
    })
}

/// Cells with their rate and Wilson interval, per variant, sortable.
#[component]
pub fn Leaderboard() -> impl IntoView {
    let ex = experiment_choice();
    let report = report_resource(ex.chosen);
    let variant = query("variant");
    let sort = query("sort");
    let set = query_setter();
    let (set_v, set_s) = (set.clone(), set.clone());
    let toggle = move |v: &'static str| {
        let set_v = set_v.clone();
        let active = move || variant.get().as_deref().unwrap_or("kept") == v;
        view! { <button class="toggle" class:on=active on:click=move |_| set_v("variant", if v == "kept" { "" } else { v })>{if v == "kept" { "Consent block kept" } else { "Consent block stripped" }}</button> }
    };
    view! {
        <section>
            <div class="pagehead">
                <h1>"Leaderboard"</h1>
                <ExperimentPicker list=ex.list chosen=ex.chosen/>
            </div>
            <p class="lede">"Share of runs in which the agent did something it was not asked to (at least one trap fired), with 95% Wilson intervals. Lower is better. Timed-out runs are excluded from n. Rows marked "<span class="badge submitted">"submitted"</span>" were run by others on the published benchmark and re-judged here with this server's own predicates."</p>
            <div class="controls">
                <span class="seg">{toggle("kept")}{toggle("stripped")}</span>
                <label>"Sort "
                    <select on:change=move |ev| set_s("sort", &event_target_value(&ev))>
                        <option value="" selected=move || sort.get().is_none()>"lowest rate first"</option>
                        <option value="-rate" selected=move || sort.get().as_deref() == Some("-rate")>"highest rate first"</option>
                        <option value="name" selected=move || sort.get().as_deref() == Some("name")>"agent name"</option>
                        <option value="n" selected=move || sort.get().as_deref() == Some("n")>"most runs"</option>
                    </select>
                </label>
            </div>
            {move || pending_or_error(report.get(), |r| {
                let variant = variant_of(variant.get().as_deref().unwrap_or("kept"));
                let v = variant.as_str();
                let exp = r.experiment.clone();
                // The maintainer's cells and the approved submissions, ranked together.
                let mut cells: Vec<(Cell, Option<Provenance>)> = r.cells.iter().filter(|c| c.variant == variant).map(|c| (c.clone(), None)).collect();
                cells.extend(r.submitted.iter().filter(|c| c.cell.variant == variant).map(|c| (c.cell.clone(), Some(c.provenance.clone()))));
                match sort.get().as_deref() {
                    Some("-rate") => cells.sort_by(|(a, _), (b, _)| b.rate.total_cmp(&a.rate)),
                    Some("name") => cells.sort_by(|(a, _), (b, _)| (&a.framework, &a.model).cmp(&(&b.framework, &b.model))),
                    Some("n") => cells.sort_by(|(a, _), (b, _)| b.n.cmp(&a.n)),
                    _ => cells.sort_by(|(a, _), (b, _)| a.rate.total_cmp(&b.rate).then_with(|| a.framework.cmp(&b.framework))),
                }
                let simulated = r.simulated;
                let kinds: Vec<&str> = r.played_by.iter().map(|p| p.kind()).collect();
                let stand_in = kinds.contains(&"stand_in");
                let scripted_model = kinds.contains(&"scripted") && !r.cells.iter().all(|c| c.scripted || c.simulated);
                let replay = kinds.contains(&"replay");
                let bridged = r.played_by.iter().any(|p| p.bridged);
                view! {
                    {simulated.then(|| view! { <p class="note">"Cells marked "<span class="badge sim">"simulated"</span>" come from simulated policies (real runs, with the play drawn at random): they show how the instrument behaves, not how any real agent does."</p> })}
                    {stand_in.then(|| view! { <p class="note stand-in">"Cells marked "<span class="player-mark stand-in">"stand-in provider"</span>" ran real agent CLIs on overeager's stand-in provider, the scripted model behind a provider's API: they rehearse an experiment, no language model answered them."</p> })}
                    {scripted_model.then(|| view! { <p class="note">"Cells marked "<span class="player-mark scripted-model">"scripted model"</span>" ran real agent CLIs on the scripted model: they measure the CLIs and the instrument, not a language model."</p> })}
                    {replay.then(|| view! { <p class="note">"Cells marked "<span class="player-mark replay">"replay"</span>" answered real agent CLIs with recorded runs' model calls: they reproduce those runs."</p> })}
                    {bridged.then(|| view! { <p class="note">"Cells marked "<span class="player-mark bridged">"bridged"</span>" ran an agent on a model of another API dialect: the model gateway translated every call both ways, and each run's model channel holds both sides."</p> })}
                    <table class="board" data-variant=v>
                        <thead><tr><th>"#"</th><th>"Framework · model"</th><th class="num">"Overeager"</th><th class="bar">"95% CI (0–100%)"</th><th class="num">"n"</th><th class="num">"Critical runs"</th><th class="num">"Completed"</th><th class="num">"Timeouts"</th><th class="num" title="No trap fired but a check had no answer: left out of n, never counted as clean">"Incomplete"</th><th class="num" title="Mean tokens per run on a provider's model, as its replies counted them (input, cache and output)">"Tokens/run"</th><th class="num" title="Mean cost per run whose model's price is known (US dollars)">"Cost/run"</th></tr></thead>
                        <tbody>
                        {cells.into_iter().enumerate().map(|(i, (c, prov))| {
                            let href = match &prov {
                                Some(p) => format!("/submissions/{}", p.submission),
                                None => format!("/runs?experiment={}&framework={}&model={}&variant={}", api::enc(&exp), api::enc(&c.framework), api::enc(&c.model), v),
                            };
                            let label = c.agent();
                            let agent_attr = label.clone();
                            let submission = prov.as_ref().map(|p| p.submission.clone());
                            let is_submitted = prov.is_some();
                            view! {
                                <tr class="cell" class:submitted=is_submitted data-agent=agent_attr data-submission=submission>
                                    <td class="muted">{i + 1}</td>
                                    <td><a href=href>{label}</a>
                                        {if is_submitted { None } else { Some(view! { <crate::board::CellBadge c=c.clone()/> }) }}
                                        {prov.map(|p| view! { " " <crate::board::SubmittedBadges p=p/> })}</td>
                                    <td class="num rate">{pct(c.rate)}</td>
                                    <td class="bar"><CiBar rate=c.rate lo=c.ci.lo hi=c.ci.hi/></td>
                                    <td class="num">{c.n}</td>
                                    <td class="num">{c.critical_runs}</td>
                                    <td class="num">{pct(c.completion_rate)}</td>
                                    <td class="num">{c.timeouts}</td>
                                    <td class="num incomplete">{c.incomplete}</td>
                                    <td class="num tokens">{crate::ui::tokens_per_run(&c)}</td>
                                    <td class="num cost">{crate::ui::cost_per_run(&c)}</td>
                                </tr>
                            }
                        }).collect_view()}
                        </tbody>
                    </table>
                    <ConsentTable r=r.clone()/>
                    <VarianceTable r=r.clone()/>
                }.into_any()
            })}
        </section>
    }
}

/// The paired consent ablation (McNemar) under the leaderboard.
#[component]
fn ConsentTable(r: Report) -> impl IntoView {
    let rows = r.consent;
    (!rows.is_empty()).then(|| view! {
        <h2>"Effect of the consent block"</h2>
        <p class="lede">"The same scenarios and seeds with and without the “Scope of consent” block; McNemar's exact test on the discordant pairs (Holm-adjusted)."</p>
        <table class="data">
            <thead><tr><th>"Framework · model"</th><th class="num">"Kept"</th><th class="num">"Stripped"</th><th class="num">"Only kept"</th><th class="num">"Only stripped"</th><th class="num">"p (Holm)"</th></tr></thead>
            <tbody>{rows.into_iter().map(|c| view! {
                <tr><td>{format!("{} · {}", c.framework, c.model)}</td><td class="num">{pct(c.rate_kept)}</td><td class="num">{pct(c.rate_stripped)}</td>
                <td class="num">{c.only_kept}</td><td class="num">{c.only_stripped}</td><td class="num">{fmt_p(c.p_holm)}</td></tr>
            }).collect_view()}</tbody>
        </table>
    })
}

/// What explains the spread between the cells, under the leaderboard, with a link to its
/// figure.
#[component]
fn VarianceTable(r: Report) -> impl IntoView {
    let exp = r.experiment;
    r.variance.map(|v| view! {
        <h2 id="variance">"What explains the spread"</h2>
        <p class="lede">"Share of the deviance of a logistic model of being overeager that each term explains beyond chance (Shapley average over the orders of entry), with 95% intervals over a bootstrap of the scenarios. "
            <a class="figure-link" href=format!("/plots?experiment={}#variance", api::enc(&exp))>"See the figure"</a>"."</p>
        <table class="data variance">
            <thead><tr><th>"Term"</th><th class="num">"Share"</th><th class="num">"95% interval"</th></tr></thead>
            <tbody>
                {v.shares.into_iter().map(|t| view! {
                    <tr><td>{term_label(t.term)}</td><td class="num">{pct(t.share)}</td><td class="num">{format!("{} – {}", pct(t.lo), pct(t.hi))}</td></tr>
                }).collect_view()}
                <tr class="muted"><td>"residual"</td><td class="num">{pct(v.residual)}</td><td></td></tr>
            </tbody>
        </table>
    })
}

/// How the variance table names a term.
fn term_label(term: Term) -> &'static str {
    match term {
        Term::Framework => "Framework",
        Term::Model => "Model",
        Term::Interaction => "Framework × model",
        Term::Scenario => "Scenario",
    }
}

fn fmt_p(p: f64) -> String {
    if p < 1e-4 { format!("{p:.1e}") } else { format!("{p:.4}") }
}

/// Frameworks × models, both variants in each cell.
#[component]
pub fn Matrix() -> impl IntoView {
    let ex = experiment_choice();
    let report = report_resource(ex.chosen);
    view! {
        <section>
            <div class="pagehead"><h1>"Matrix"</h1><ExperimentPicker list=ex.list chosen=ex.chosen/></div>
            <p class="lede">"Overeager rate per framework (rows) and model (columns): consent block kept / stripped."</p>
            {move || pending_or_error(report.get(), |r| {
                let exp = r.experiment.clone();
                let mut grid: BTreeMap<(String, String), BTreeMap<Variant, Cell>> = BTreeMap::new();
                let mut models: Vec<String> = r.cells.iter().map(|c| c.model.clone()).collect();
                models.sort();
                models.dedup();
                let mut frameworks: Vec<String> = r.cells.iter().map(|c| c.framework.clone()).collect();
                frameworks.sort();
                frameworks.dedup();
                for c in r.cells {
                    grid.entry((c.framework.clone(), c.model.clone())).or_default().insert(c.variant, c);
                }
                view! {
                    <table class="data matrix">
                        <thead><tr><th>"framework \\ model"</th>{models.iter().map(|m| view! { <th>{m.clone()}</th> }).collect_view()}</tr></thead>
                        <tbody>{frameworks.iter().map(|fw| view! {
                            <tr><th>{fw.clone()}</th>{models.iter().map(|m| {
                                let cell = grid.get(&(fw.clone(), m.clone()));
                                let show = |v: Variant| cell.and_then(|c| c.get(&v)).map(|c| pct(c.rate)).unwrap_or_else(|| "–".into());
                                let heat = cell.and_then(|c| c.get(&Variant::ConsentStripped)).map(|c| c.rate).unwrap_or(0.0);
                                let href = format!("/runs?experiment={}&framework={}&model={}", api::enc(&exp), api::enc(fw), api::enc(m));
                                let first = cell.and_then(|c| c.values().next().cloned());
                                view! { <td style=format!("background:rgba(220,80,40,{:.2})", heat * 0.55)><a href=href>{show(Variant::ConsentKept)}" / "{show(Variant::ConsentStripped)}</a>
                                    {first.map(|c| view! { <crate::board::CellBadge c=c/> })}</td> }
                            }).collect_view()}</tr>
                        }).collect_view()}</tbody>
                    </table>
                }.into_any()
            })}
        </section>
    }
}

/// The scenario browser with archetype, axis, validator and text filters.
#[component]
pub fn Scenarios() -> impl IntoView {
    let data = LocalResource::new(|| api::doc(&overeager_wire::endpoint::SCENARIOS, &[], ""));
    let archetype = query("archetype");
    let text = query("q");
    let filters = use_query_map_all();
    let set = query_setter();
    view! {
        <section>
            <h1>"Scenarios"</h1>
            <p class="lede">"Each scenario: a benign task, a fixture with lures, the authorized scope, and traps that fire when the agent steps outside it."</p>
            {move || {
                let set = set.clone();
                pending_or_error(data.get(), move |d| {
                let archetypes: Vec<String> = d.archetypes.keys().cloned().collect();
                let axes: BTreeMap<String, Vec<String>> = d.axes.iter().map(|(a, levels)| (a.clone(), levels.keys().cloned().collect())).collect();
                let fq = filters.get();
                let t = text.get().unwrap_or_default().to_lowercase();
                let shown: Vec<_> = d.scenarios.into_iter()
                    .filter(|r| archetype.get().is_none_or(|a| r.archetype == a))
                    .filter(|r| t.is_empty() || r.id.to_lowercase().contains(&t) || r.title.to_lowercase().contains(&t))
                    .filter(|r| axes.keys().all(|a| fq.get(a).is_none_or(|l| l.is_empty() || r.axes.get(a) == Some(l))))
                    .collect();
                let (s1, s2, s3) = (set.clone(), set.clone(), set.clone());
                view! {
                    <div class="controls">
                        <input type="search" placeholder="id or title" prop:value=t.clone() on:change=move |ev| s1("q", &event_target_value(&ev))/>
                        <select on:change=move |ev| s2("archetype", &event_target_value(&ev))>
                            <option value="">"all archetypes"</option>
                            {archetypes.iter().map(|a| view! { <option value=a.clone() selected=archetype.get().as_deref() == Some(a.as_str())>{a.clone()}</option> }).collect_view()}
                        </select>
                        {axes.iter().map(|(axis, levels)| {
                            let s3 = s3.clone();
                            let name = axis.clone();
                            let current = fq.get(axis).cloned().unwrap_or_default();
                            view! {
                                <select on:change=move |ev| s3(&name, &event_target_value(&ev))>
                                    <option value="">{format!("any {axis}")}</option>
                                    {levels.iter().map(|l| view! { <option value=l.clone() selected=current == *l>{l.clone()}</option> }).collect_view()}
                                </select>
                            }
                        }).collect_view()}
                        <span class="muted">{format!("{} shown", shown.len())}</span>
                    </div>
                    <table class="data">
                        <thead><tr><th>"Scenario"</th><th>"Archetype"</th><th>"Axes"</th><th>"Validator"</th><th class="num">"Runs"</th></tr></thead>
                        <tbody>{shown.into_iter().map(|r| {
                            let axes = r.axes.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
                            let admitted = match r.admitted { Some(true) => "admitted", Some(false) => "rejected", None => "–" };
                            view! {
                                <tr><td><a href=format!("/scenarios/{}", r.hash)>{r.id.clone()}</a><div class="muted small">{r.title.clone()}</div></td>
                                <td>{r.archetype.clone()}</td><td class="small mono">{axes}</td><td class=admitted>{admitted}</td><td class="num">{r.runs}</td></tr>
                            }
                        }).collect_view()}</tbody>
                    </table>
                }.into_any()
            })}}
        </section>
    }
}

/// All query parameters, as a map.
fn use_query_map_all() -> Memo<BTreeMap<String, String>> {
    let q = leptos_router::hooks::use_query_map();
    Memo::new(move |_| q.with(|m| m.clone().into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()))
}

/// A prompt with its consent block highlighted.
fn prompt_view(p: &PromptText) -> AnyView {
    let text = p.text.as_str();
    match p.block {
        Some([a, b]) if a <= b && b <= text.len() && text.is_char_boundary(a) && text.is_char_boundary(b) => view! {
            <pre class="prompt">{text[..a].to_string()}<mark class="consent" title="Scope of consent block: the only difference between the two prompts">{text[a..b].to_string()}</mark>{text[b..].to_string()}</pre>
        }
        .into_any(),
        _ => view! { <pre class="prompt">{text.to_string()}</pre> }.into_any(),
    }
}

/// One scenario: prompts side by side, traps, plays, validator, fixture tree.
#[component]
pub fn ScenarioPage() -> impl IntoView {
    let params = use_params_map();
    let data = LocalResource::new(move || {
        let key = params.with(|p| p.get("key")).unwrap_or_default();
        async move { api::doc(&overeager_wire::endpoint::SCENARIO, &[&key], "").await }
    });
    let open_file = RwSignal::new(None::<String>);
    view! {
        <section>
            {move || pending_or_error(data.get(), |d| {
                let sc = d.detail.scenario;
                let fixture = d.detail.fixture;
                let validation = d.detail.validation;
                let listed = |v: &[String], none: &str| if v.is_empty() { none.to_string() } else { v.join(", ") };
                view! {
                    <h1>{sc.title.clone()}</h1>
                    <p class="muted mono">{sc.id.clone()}" · "{sc.archetype.clone()}" · "{short(&d.detail.row.hash)}</p>
                    <div class="axes">{sc.axes.iter().map(|(k, v)| view! { <span class="chip">{format!("{k}: {v}")}</span> }).collect_view()}</div>
                    <h2>"Prompts"</h2>
                    <p class="lede">"Byte-identical except for the highlighted consent block."</p>
                    <div class="two">
                        <div><h3>"consent_kept"</h3>{prompt_view(&d.prompts.consent_kept)}</div>
                        <div><h3>"consent_stripped"</h3>{prompt_view(&d.prompts.consent_stripped)}</div>
                    </div>
                    <h2>"Authorized scope"</h2>
                    <ul class="mono small">{sc.scope.allow.iter().map(|a| view! { <li>{format!("{} {}", format!("{:?}", a.op).to_lowercase(), a.path)}</li> }).collect_view()}</ul>
                    <p class="small">"Sensitive: "<span class="mono">{sc.scope.sensitive.join(", ")}</span></p>
                    <h2>"Traps"</h2>
                    <table class="data"><thead><tr><th>"Trap"</th><th>"Severity"</th><th>"Predicate"</th><th>"Arguments"</th></tr></thead>
                        <tbody>{sc.traps.iter().map(|t| view! {
                            <tr><td><b>{t.id.clone()}</b><div class="muted small">{t.summary.clone()}</div></td><td class=format!("sev {}", t.severity.as_str())>{t.severity.as_str()}</td>
                            <td class="mono">{t.call.predicate.clone()}</td><td class="mono small">{t.call.args.to_string()}</td></tr>
                        }).collect_view()}</tbody></table>
                    <h2>"Validator"</h2>
                    {match validation {
                        None => view! { <p class="muted">"Not validated in this store."</p> }.into_any(),
                        Some(validation) => view! {
                            <p class=if validation.admitted { "admitted" } else { "rejected" }>
                                {if validation.admitted { "Admitted: cautious play completes the task without traps, trap sets grow with eagerness, every trap is observable.".to_string() } else { format!("Rejected: {}", validation.rejection.unwrap_or_default()) }}
                            </p>
                            <table class="data"><thead><tr><th>"Play"</th><th>"Traps fired"</th><th>"Task completed"</th><th>"Run"</th></tr></thead>
                            <tbody>{validation.plays.into_iter().map(|p| view! {
                                <tr><td>{p.play.clone()}</td><td class="mono">{listed(&p.fired, "none")}</td>
                                <td>{match p.success { Some(true) => "yes", Some(false) => "no", None => "unknown" }}</td>
                                <td>{p.run.map(|r| view! { <a href=format!("/runs/{r}")>"trace"</a> })}</td></tr>
                            }).collect_view()}</tbody></table>
                        }.into_any(),
                    }}
                    <h2>"Plays"</h2>
                    <div class="plays">{PlayKind::ALL.into_iter().map(|k| {
                        let p = sc.plays.get(k);
                        view! { <details><summary>{format!("{}: fires {}", k.as_str(), listed(&p.fires, "nothing"))}</summary>
                            <pre class="small">{serde_json::to_string_pretty(&p.steps).unwrap_or_default()}</pre></details> }
                    }).collect_view()}</div>
                    <h2>"Fixture"</h2>
                    {match fixture {
                        None => view! { <p class="muted">"The fixture tree was not recorded for this scenario."</p> }.into_any(),
                        Some(entries) => view! {
                            <div class="fixture">
                                <ul class="tree mono small">{entries.iter().map(|e| {
                                    let path = e.path.clone();
                                    let depth = path.matches('/').count();
                                    let name = path.rsplit('/').next().unwrap_or("").to_string();
                                    let kind = e.kind.clone();
                                    let has_text = e.text.is_some();
                                    let p2 = path.clone();
                                    view! { <li style=format!("padding-left:{}em", depth as f64 * 1.2) class=kind.clone()>
                                        {if has_text { view! { <a href="#" on:click=move |ev| { ev.prevent_default(); open_file.set(Some(p2.clone())); }>{name.clone()}</a> }.into_any() } else { view! { <span>{name.clone()}{if kind == "dir" { "/" } else { "" }}</span> }.into_any() }}
                                        <span class="muted">{if kind == "file" { format!("  {} B", e.size) } else { String::new() }}</span></li> }
                                }).collect_view()}</ul>
                                <div class="filetext">{move || open_file.get().and_then(|p| entries.iter().find(|e| e.path == p).map(|e| view! { <h3 class="mono">{p.clone()}</h3><pre>{e.text.clone().unwrap_or_default()}</pre> }))}</div>
                            </div>
                        }.into_any(),
                    }}
                    <p><a href=format!("/runs?scenario={}", api::enc(&sc.id))>"Runs of this scenario →"</a></p>
                    <ConsentPairs scenario=sc.id.clone()/>
                }.into_any()
            })}
        </section>
    }
}

/// Every cell's runs of a scenario as consent pairs (the same cell and replicate under both
/// prompts), each pair linked to its side-by-side comparison.
#[component]
fn ConsentPairs(scenario: String) -> impl IntoView {
    let runs = LocalResource::new(move || {
        let sc = scenario.clone();
        async move { api::doc(&overeager_wire::endpoint::RUNS, &[], &format!("scenario={}&limit=2000", api::enc(&sc))).await }
    });
    view! {
        {move || pending_or_error(runs.get(), |d| {
            // (experiment, framework, model, replicate) → (kept, stripped) runs.
            let mut pairs: BTreeMap<(String, String, String, u32), (Option<RunRow>, Option<RunRow>)> = BTreeMap::new();
            for r in d.runs {
                let key = (r.experiment.clone(), r.framework.clone(), r.model.clone(), r.replicate);
                let slot = pairs.entry(key).or_default();
                if r.variant == Variant::ConsentKept { slot.0 = Some(r) } else { slot.1 = Some(r) }
            }
            if pairs.is_empty() {
                return ().into_any();
            }
            let cell = |r: &Option<RunRow>| match r {
                Some(r) => {
                    let outcome = if r.timed_out { "timed out".to_string() } else { r.outcome.map(|o| o.as_str().to_string()).unwrap_or_else(|| r.status.clone()) };
                    view! { <td><a class="mono" href=format!("/runs/{}", r.id)>{r.id.clone()}</a>" "<span class=format!("outcome {}", outcome.replace(' ', "_"))>{outcome.clone()}</span></td> }.into_any()
                }
                None => view! { <td class="muted">"–"</td> }.into_any(),
            };
            view! {
                <h2>"Consent pairs"</h2>
                <table class="data consent-pairs">
                    <thead><tr><th>"Cell"</th><th class="num">"Rep."</th><th>"kept"</th><th>"stripped"</th><th></th></tr></thead>
                    <tbody>{pairs.into_iter().map(|((_, fw, model, rep), (k, st))| {
                        let compare = match (&k, &st) {
                            (Some(a), Some(b)) => view! { <a class="compare-link" href=format!("/compare?a={}&b={}", a.id, b.id)>"compare"</a> }.into_any(),
                            _ => ().into_any(),
                        };
                        view! { <tr><td>{format!("{fw} · {model}")}</td><td class="num">{rep}</td>{cell(&k)}{cell(&st)}<td>{compare}</td></tr> }
                    }).collect_view()}</tbody>
                </table>
            }.into_any()
        })}
    }
}

/// The run list, filtered by the URL's query.
#[component]
pub fn Runs() -> impl IntoView {
    let ex = experiment_choice();
    let fq = use_query_map_all();
    let set = query_setter();
    let data = LocalResource::new(move || {
        let mut q = fq.get();
        let exp = ex.chosen.get();
        async move {
            let Some(exp) = exp else { return Err("No experiments yet.".to_string()) };
            q.insert("experiment".into(), exp.clone());
            if api::is_static() {
                // A published site has each experiment's runs in one file; filter here.
                let all = api::doc(&overeager_wire::endpoint::PUBLISHED_RUNS, &[&exp], "").await?;
                let is = |k: &str, v: &str| q.get(k).is_none_or(|want| want.is_empty() || want == v);
                let keep = |r: &RunRow| {
                    is("framework", &r.framework) && is("model", &r.model) && is("agent", &r.agent) && is("variant", r.variant.as_str()) && is("scenario", &r.scenario)
                        && match q.get("outcome").map(String::as_str) {
                            Some("overeager") => r.overeager == Some(true) && !r.timed_out,
                            Some("clean") => r.outcome == Some(Outcome::Clean) && !r.timed_out,
                            Some("incomplete") => r.outcome == Some(Outcome::Incomplete) && !r.timed_out,
                            Some("timed_out") => r.timed_out,
                            _ => true,
                        }
                };
                let runs: Vec<RunRow> = all.runs.into_iter().filter(keep).collect();
                let offset: usize = q.get("offset").and_then(|o| o.parse().ok()).unwrap_or(0);
                let total = runs.len() as u64;
                return Ok(RunPage { total, next: None, runs: runs.into_iter().skip(offset).take(200).collect() });
            }
            let qs: Vec<String> = q.iter().filter(|(_, v)| !v.is_empty()).map(|(k, v)| format!("{k}={}", api::enc(v))).collect();
            api::doc(&overeager_wire::endpoint::RUNS, &[], &qs.join("&")).await
        }
    });
    view! {
        <section>
            <div class="pagehead"><h1>"Runs"</h1><ExperimentPicker list=ex.list chosen=ex.chosen/></div>
            <div class="controls">
                {move || {
                    let q = fq.get();
                    let chips: Vec<(String, String)> = q.into_iter().filter(|(k, v)| k != "experiment" && k != "offset" && !v.is_empty()).collect();
                    let set = set.clone();
                    chips.into_iter().map(|(k, v)| {
                        let set = set.clone();
                        let k2 = k.clone();
                        view! { <span class="chip">{format!("{k}: {v}")}<button class="x" title="remove this filter" on:click=move |_| set(&k2, "")>"×"</button></span> }
                    }).collect_view()
                }}
                {
                    let set = query_setter();
                    let outcome = query("outcome");
                    view! {
                        <select on:change=move |ev| set("outcome", &event_target_value(&ev))>
                            {[("", "any outcome"), ("overeager", "overeager"), ("clean", "clean"), ("incomplete", "incomplete"), ("timed_out", "timed out"), ("failed", "failed")].into_iter().map(|(v, label)| view! {
                                <option value=v selected=move || outcome.get().unwrap_or_default() == v>{label}</option>
                            }).collect_view()}
                        </select>
                    }
                }
            </div>
            {move || pending_or_error(data.get(), |d| {
                let runs = d.runs;
                let total = d.total;
                view! {
                    <p class="muted">{format!("{total} runs match; showing {}", runs.len())}</p>
                    <table class="data runs">
                        <thead><tr><th>"Run"</th><th>"Agent"</th><th>"Scenario"</th><th>"Variant"</th><th class="num">"Rep."</th><th>"Outcome"</th><th>"Traps"</th></tr></thead>
                        <tbody>{runs.into_iter().map(|r| {
                            let outcome = run_outcome(&r);
                            let traps = r.traps.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>().join(", ");
                            view! {
                                <tr class="run"><td><a class="mono run-link" href=format!("/runs/{}", r.id)>{r.id.clone()}</a></td>
                                <td>{format!("{} · {}", r.framework, r.model)}" "<PlayerMark agent=r.agent.clone() played_by=r.played_by.clone()/></td><td class="small">{r.scenario.clone()}</td>
                                <td>{short_variant(r.variant)}</td><td class="num">{r.replicate}</td>
                                <td class=format!("outcome {}", outcome.replace(' ', "_"))>{outcome.clone()}</td><td class="mono small">{traps}</td></tr>
                            }
                        }).collect_view()}</tbody>
                    </table>
                }.into_any()
            })}
        </section>
    }
}

/// What the run list says a run came to: its status until it is done, then timed out,
/// overeager, clean or incomplete.
fn run_outcome(r: &RunRow) -> String {
    if r.status != "done" {
        r.status.clone()
    } else if r.timed_out {
        "timed out".into()
    } else if r.overeager == Some(true) {
        "overeager".into()
    } else if r.outcome == Some(Outcome::Clean) {
        "clean".into()
    } else {
        "incomplete".into()
    }
}

/// The report's figures.
#[component]
pub fn Plots() -> impl IntoView {
    let ex = experiment_choice();
    view! {
        <section>
            <div class="pagehead"><h1>"Plots"</h1><ExperimentPicker list=ex.list chosen=ex.chosen/></div>
            {move || ex.chosen.get().map(|id| view! {
                <figure><img src=overeager_wire::endpoint::PLOT.url(&[&id, "forest.svg"]) alt="Forest plot of overeager rates per cell with 95% intervals"/>
                    <figcaption>"Overeager rate per cell with its 95% Wilson interval."</figcaption></figure>
                <figure><img src=overeager_wire::endpoint::PLOT.url(&[&id, "dumbbell.svg"]) alt="Consent kept vs stripped per agent"/>
                    <figcaption>"Consent block kept vs stripped, per agent (paired)."</figcaption></figure>
                <figure><img src=overeager_wire::endpoint::PLOT.url(&[&id, "heatmap.svg"]) alt="Overeager rate per archetype and cell"/>
                    <figcaption>"Overeager rate per archetype and cell."</figcaption></figure>
                <figure id="variance"><img src=overeager_wire::endpoint::PLOT.url(&[&id, "variance.svg"]) alt="Share of the spread explained by framework, model, their interaction and scenario"/>
                    <figcaption>"What explains the spread: each term's share of the deviance, with its bootstrap interval (experiments of two or more cells)."</figcaption></figure>
            })}
        </section>
    }
}

/// The predicate registry.
#[component]
pub fn Predicates() -> impl IntoView {
    let data = LocalResource::new(|| api::doc(&overeager_wire::endpoint::PREDICATES, &[], ""));
    view! {
        <section>
            <h1>"Predicates"</h1>
            <p class="lede">"Trap predicates are WebAssembly components with no imports, run in a sandbox with fuel, memory and time limits. Uploaded modules are signature-checked against the trust store, self-tested, and used only once an admin approves them."</p>
            {move || pending_or_error(data.get(), |d| view! {
                <h2>"In use"</h2>
                <table class="data"><thead><tr><th>"Module"</th><th>"Digest"</th><th>"Signer"</th><th>"Owner"</th><th>"Predicates"</th></tr></thead>
                <tbody>{d.loaded.into_iter().map(|m| view! {
                    <tr><td><b>{m.id.clone()}</b>" "{m.version.clone()}</td><td class="mono" title=m.digest.clone()>{short(&m.digest)}</td>
                    <td class="mono">{m.key_id.clone().unwrap_or_else(|| "built in".to_string())}</td><td>{m.owner.clone()}</td>
                    <td class="small">{m.predicates.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ")}</td></tr>
                }).collect_view()}</tbody></table>
                <h2>"Uploads"</h2>
                {let ups = d.uploads;
                 if ups.is_empty() { view! { <p class="muted">"No uploads yet. POST a signed component to /api/predicates (see /api/openapi.json)."</p> }.into_any() } else { view! {
                <table class="data"><thead><tr><th>"Module"</th><th>"Digest"</th><th>"Signer"</th><th>"Status"</th><th>"Self-test"</th><th>"Uploaded by"</th></tr></thead>
                <tbody>{ups.into_iter().map(|u| {
                    let (m, t) = (&u.row, &u.row.self_test);
                    let reason = u.revoked_reason.clone().unwrap_or_default();
                    view! {
                    <tr><td><b>{m.id.clone()}</b>" "{m.version.clone()}</td><td class="mono" title=m.digest.clone()>{short(&m.digest)}</td><td class="mono">{m.key_id.clone()}" "{m.owner.clone()}</td>
                    <td class=format!("status {}", m.status) title=reason.clone()>{m.status.clone()}
                        {u.revoked_reason.is_some().then(|| view! { <div class="small revoked-reason">{reason.clone()}</div> })}</td>
                    <td class="small self-test">{format!("{} case(s) on {} bundles, {} calls, {} fired, {} errors", t.cases, t.bundles, t.calls, t.fired, t.errors)}
                        <ul class="cases">{t.results.iter().map(|c| view! {
                            <li>{format!("{} {} — {}: {} bundle(s), {} fired, {} errors", c.predicate, c.args, c.source, c.bundles, c.fired, c.errors)}</li>
                        }).collect_view()}</ul></td>
                    <td>{m.uploaded_by.clone()}</td></tr>
                }}).collect_view()}</tbody></table> }.into_any() }}
            }.into_any())}
        </section>
    }
}

/// AutoElicit transfer rates.
#[component]
pub fn Transfer() -> impl IntoView {
    let data = LocalResource::new(|| api::doc(&overeager_wire::endpoint::TRANSFER, &[], ""));
    view! {
        <section>
            <h1>"Transfer"</h1>
            <p class="lede">"AutoElicit cases run k times on a target agent: a case transfers if at least one run was unsafe."</p>
            {move || pending_or_error(data.get(), |d| {
                let rows = d.rows;
                if rows.is_empty() {
                    return view! { <p class="muted">{format!("{} cases imported, no classified runs yet. Import results with `overeager transfer import <dir>`.", d.cases)}</p> }.into_any();
                }
                view! {
                    <table class="data"><thead><tr><th>"Source → target"</th><th class="num">"k"</th><th class="num">"Cases"</th><th class="num">"Transferred"</th><th class="num">"Rate"</th><th class="bar">"95% CI"</th><th class="num">"All safe"</th><th class="num">"All unsafe"</th><th class="num">"Mixed"</th></tr></thead>
                    <tbody>{rows.into_iter().map(|r| {
                        let t = &r.transfer;
                        view! { <tr><td>{format!("{} → {}", r.source, r.target)}</td><td class="num">{r.k}</td><td class="num">{t.cases}</td><td class="num">{t.transferred}</td>
                        <td class="num">{pct(t.rate)}</td><td class="bar"><CiBar rate=t.rate lo=t.interval.lo hi=t.interval.hi/></td>
                        <td class="num">{t.all_safe}</td><td class="num">{t.all_unsafe}</td><td class="num">{t.mixed}</td></tr> }
                    }).collect_view()}</tbody></table>
                }.into_any()
            })}
        </section>
    }
}

/// Leaderboard submissions (whole cells), then bundles third parties uploaded on their own, with
/// the server's verdicts.
#[component]
pub fn Submissions() -> impl IntoView {
    let data = LocalResource::new(|| api::doc(&overeager_wire::endpoint::UPLOADS, &[], ""));
    view! {
        <section>
            <h1>"Submissions"</h1>
            <crate::board::CellSubmissions/>
            <h2>"Uploaded bundles"</h2>
            <p class="lede">"Bundles uploaded on their own through the API, judged by this server's own predicates against its own copy of the scenario. A verdict sent along is ignored."</p>
            {move || pending_or_error(data.get(), |d| {
                let uploads = d.uploads;
                if uploads.is_empty() {
                    return view! { <p class="muted">"No bundles uploaded yet."</p> }.into_any();
                }
                view! {
                    <table class="data"><thead><tr><th>"Bundle"</th><th>"Agent"</th><th>"Variant"</th><th>"Server verdict"</th><th>"By"</th></tr></thead>
                    <tbody>{uploads.into_iter().map(|x| view! {
                        <tr><td><a class="mono" href=format!("/bundles/{}", x.bundle)>{short(&x.bundle)}</a></td><td>{format!("{} · {}", x.framework, x.model)}</td>
                        <td>{short_variant(x.variant)}</td><td>{if x.overeager { "overeager" } else { x.verdict.outcome.as_str() }}</td><td>{x.uploaded_by.clone()}</td></tr>
                    }).collect_view()}</tbody></table>
                }.into_any()
            })}
        </section>
    }
}
