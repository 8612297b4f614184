//! The pages other than the trace viewer.

use std::collections::BTreeMap;

use leptos::prelude::*;
use leptos_router::hooks::use_params_map;
use serde_json::Value;

use crate::api;
use crate::ui::{CiBar, ExperimentPicker, PlayerMark, experiment_choice, f, pct, pending_or_error, query, query_setter, s, short};

fn variant_name(short: &str) -> &'static str {
    if short == "stripped" { "consent_stripped" } else { "consent_kept" }
}

/// The report of the chosen experiment.
fn report_resource(chosen: Signal<Option<String>>) -> LocalResource<Result<Value, String>> {
    LocalResource::new(move || {
        let id = chosen.get();
        async move {
            match id {
                Some(id) => api::get::<Value>(&format!("/experiments/{id}/report")).await,
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
                let v = variant_name(variant.get().as_deref().unwrap_or("kept"));
                let exp = s(&r, "experiment");
                // The maintainer's cells and the approved submissions, ranked together.
                let mut cells: Vec<Value> = r["cells"].as_array().cloned().unwrap_or_default().into_iter().filter(|c| c["variant"] == v).collect();
                cells.extend(r["submitted"].as_array().cloned().unwrap_or_default().into_iter().filter(|c| c["variant"] == v));
                match sort.get().as_deref() {
                    Some("-rate") => cells.sort_by(|a, b| f(b, "rate").total_cmp(&f(a, "rate"))),
                    Some("name") => cells.sort_by_key(|c| (s(c, "framework"), s(c, "model"))),
                    Some("n") => cells.sort_by(|a, b| f(b, "n").total_cmp(&f(a, "n"))),
                    _ => cells.sort_by(|a, b| f(a, "rate").total_cmp(&f(b, "rate")).then_with(|| s(a, "framework").cmp(&s(b, "framework")))),
                }
                let simulated = r["simulated"].as_bool().unwrap_or(false);
                view! {
                    {simulated.then(|| view! { <p class="note">"Cells marked "<span class="badge sim">"simulated"</span>" come from simulated policies (real runs, with the play drawn at random): they show how the instrument behaves, not how any real agent does."</p> })}
                    <table class="board" data-variant=v>
                        <thead><tr><th>"#"</th><th>"Framework · model"</th><th class="num">"Overeager"</th><th class="bar">"95% CI (0–100%)"</th><th class="num">"n"</th><th class="num">"Critical runs"</th><th class="num">"Completed"</th><th class="num">"Timeouts"</th><th class="num" title="No trap fired but a check had no answer: left out of n, never counted as clean">"Incomplete"</th><th class="num" title="Mean tokens per run on a provider's model, as its replies counted them (input, cache and output)">"Tokens/run"</th><th class="num" title="Mean cost per run whose model's price is known (US dollars)">"Cost/run"</th></tr></thead>
                        <tbody>
                        {cells.into_iter().enumerate().map(|(i, c)| {
                            let prov = c.get("provenance").filter(|p| p.is_object()).cloned();
                            let href = match &prov {
                                Some(p) => format!("/submissions/{}", s(p, "submission")),
                                None => format!("/runs?experiment={}&framework={}&model={}&variant={}", api::enc(&exp), api::enc(&s(&c, "framework")), api::enc(&s(&c, "model")), v),
                            };
                            let label = format!("{} · {}", s(&c, "framework"), s(&c, "model"));
                            let sim = c["simulated"].as_bool().unwrap_or(false);
                            let agent_attr = label.clone();
                            let submission = prov.as_ref().map(|p| s(p, "submission"));
                            let is_submitted = prov.is_some();
                            view! {
                                <tr class="cell" class:submitted=is_submitted data-agent=agent_attr data-submission=submission>
                                    <td class="muted">{i + 1}</td>
                                    <td><a href=href>{label}</a>
                                        {if is_submitted { None } else { Some(view! { <crate::board::ReferenceBadge scripted=c["scripted"].as_bool().unwrap_or(false) simulated=sim/> }) }}
                                        {prov.map(|p| view! { " " <crate::board::SubmittedBadges p=p/> })}</td>
                                    <td class="num rate">{pct(f(&c, "rate"))}</td>
                                    <td class="bar"><CiBar rate=f(&c, "rate") lo=f(&c["ci"], "lo") hi=f(&c["ci"], "hi")/></td>
                                    <td class="num">{f(&c, "n")}</td>
                                    <td class="num">{f(&c, "critical_runs")}</td>
                                    <td class="num">{pct(f(&c, "completion_rate"))}</td>
                                    <td class="num">{f(&c, "timeouts")}</td>
                                    <td class="num incomplete">{f(&c, "incomplete")}</td>
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
fn ConsentTable(r: Value) -> impl IntoView {
    let rows = r["consent"].as_array().cloned().unwrap_or_default();
    (!rows.is_empty()).then(|| view! {
        <h2>"Effect of the consent block"</h2>
        <p class="lede">"The same scenarios and seeds with and without the “Scope of consent” block; McNemar's exact test on the discordant pairs (Holm-adjusted)."</p>
        <table class="data">
            <thead><tr><th>"Framework · model"</th><th class="num">"Kept"</th><th class="num">"Stripped"</th><th class="num">"Only kept"</th><th class="num">"Only stripped"</th><th class="num">"p (Holm)"</th></tr></thead>
            <tbody>{rows.into_iter().map(|c| view! {
                <tr><td>{format!("{} · {}", s(&c, "framework"), s(&c, "model"))}</td><td class="num">{pct(f(&c, "rate_kept"))}</td><td class="num">{pct(f(&c, "rate_stripped"))}</td>
                <td class="num">{f(&c, "only_kept")}</td><td class="num">{f(&c, "only_stripped")}</td><td class="num">{fmt_p(f(&c, "p_holm"))}</td></tr>
            }).collect_view()}</tbody>
        </table>
    })
}

/// What explains the spread between the cells, under the leaderboard, with a link to its
/// figure.
#[component]
fn VarianceTable(r: Value) -> impl IntoView {
    let v = r["variance"].clone();
    let exp = s(&r, "experiment");
    v.is_object().then(|| view! {
        <h2 id="variance">"What explains the spread"</h2>
        <p class="lede">"Share of the deviance of a logistic model of being overeager that each term explains beyond chance (Shapley average over the orders of entry), with 95% intervals over a bootstrap of the scenarios. "
            <a class="figure-link" href=format!("/plots?experiment={}#variance", api::enc(&exp))>"See the figure"</a>"."</p>
        <table class="data variance">
            <thead><tr><th>"Term"</th><th class="num">"Share"</th><th class="num">"95% interval"</th></tr></thead>
            <tbody>
                {v["shares"].as_array().cloned().unwrap_or_default().into_iter().map(|t| view! {
                    <tr><td>{term_label(&s(&t, "term"))}</td><td class="num">{pct(f(&t, "share"))}</td><td class="num">{format!("{} – {}", pct(f(&t, "lo")), pct(f(&t, "hi")))}</td></tr>
                }).collect_view()}
                <tr class="muted"><td>"residual"</td><td class="num">{pct(f(&v, "residual"))}</td><td></td></tr>
            </tbody>
        </table>
    })
}

/// How the variance table names a term.
fn term_label(term: &str) -> &'static str {
    match term {
        "framework" => "Framework",
        "model" => "Model",
        "interaction" => "Framework × model",
        _ => "Scenario",
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
                let cells = r["cells"].as_array().cloned().unwrap_or_default();
                let exp = s(&r, "experiment");
                let mut grid: BTreeMap<(String, String), BTreeMap<String, Value>> = BTreeMap::new();
                let mut models: Vec<String> = cells.iter().map(|c| s(c, "model")).collect();
                models.sort();
                models.dedup();
                let mut frameworks: Vec<String> = cells.iter().map(|c| s(c, "framework")).collect();
                frameworks.sort();
                frameworks.dedup();
                for c in &cells {
                    grid.entry((s(c, "framework"), s(c, "model"))).or_default().insert(s(c, "variant"), c.clone());
                }
                view! {
                    <table class="data matrix">
                        <thead><tr><th>"framework \\ model"</th>{models.iter().map(|m| view! { <th>{m.clone()}</th> }).collect_view()}</tr></thead>
                        <tbody>{frameworks.iter().map(|fw| view! {
                            <tr><th>{fw.clone()}</th>{models.iter().map(|m| {
                                let cell = grid.get(&(fw.clone(), m.clone()));
                                let show = |v: &str| cell.and_then(|c| c.get(v)).map(|c| pct(f(c, "rate"))).unwrap_or_else(|| "–".into());
                                let heat = cell.and_then(|c| c.get("consent_stripped")).map(|c| f(c, "rate")).unwrap_or(0.0);
                                let href = format!("/runs?experiment={}&framework={}&model={}", api::enc(&exp), api::enc(fw), api::enc(m));
                                let flag = |k: &str| cell.is_some_and(|c| c.values().any(|x| x[k].as_bool().unwrap_or(false)));
                                let (scripted, simulated) = (flag("scripted"), flag("simulated"));
                                view! { <td style=format!("background:rgba(220,80,40,{:.2})", heat * 0.55)><a href=href>{show("consent_kept")}" / "{show("consent_stripped")}</a>
                                    <crate::board::ReferenceBadge scripted=scripted simulated=simulated/></td> }
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
    let data = LocalResource::new(|| api::get::<Value>("/scenarios"));
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
                let rows = d["scenarios"].as_array().cloned().unwrap_or_default();
                let mut archetypes: Vec<String> = rows.iter().map(|r| s(r, "archetype")).collect();
                archetypes.sort();
                archetypes.dedup();
                let mut axes: BTreeMap<String, Vec<String>> = BTreeMap::new();
                for r in &rows {
                    if let Some(o) = r["axes"].as_object() {
                        for (k, v) in o {
                            axes.entry(k.clone()).or_default().push(v.as_str().unwrap_or("").to_string());
                        }
                    }
                }
                for v in axes.values_mut() {
                    v.sort();
                    v.dedup();
                }
                let fq = filters.get();
                let t = text.get().unwrap_or_default().to_lowercase();
                let shown: Vec<Value> = rows.into_iter()
                    .filter(|r| archetype.get().is_none_or(|a| s(r, "archetype") == a))
                    .filter(|r| t.is_empty() || s(r, "id").to_lowercase().contains(&t) || s(r, "title").to_lowercase().contains(&t))
                    .filter(|r| axes.keys().all(|a| fq.get(a).is_none_or(|l| l.is_empty() || r["axes"][a.as_str()].as_str() == Some(l.as_str()))))
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
                            let axes = r["axes"].as_object().map(|o| o.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or(""))).collect::<Vec<_>>().join(" ")).unwrap_or_default();
                            let admitted = match r["admitted"].as_bool() { Some(true) => "admitted", Some(false) => "rejected", None => "–" };
                            view! {
                                <tr><td><a href=format!("/scenarios/{}", s(&r, "hash"))>{s(&r, "id")}</a><div class="muted small">{s(&r, "title")}</div></td>
                                <td>{s(&r, "archetype")}</td><td class="small mono">{axes}</td><td class=admitted>{admitted}</td><td class="num">{f(&r, "runs")}</td></tr>
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
fn prompt_view(text: &str, block: Option<(usize, usize)>) -> AnyView {
    match block {
        Some((a, b)) if a <= b && b <= text.len() && text.is_char_boundary(a) && text.is_char_boundary(b) => view! {
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
        async move { api::get::<Value>(&format!("/scenarios/{key}")).await }
    });
    let open_file = RwSignal::new(None::<String>);
    view! {
        <section>
            {move || pending_or_error(data.get(), |d| {
                let sc = d["scenario"].clone();
                let block = |v: &Value| v["block"].as_array().and_then(|a| Some((a.first()?.as_u64()? as usize, a.get(1)?.as_u64()? as usize)));
                let kept = &d["prompts"]["consent_kept"];
                let stripped = &d["prompts"]["consent_stripped"];
                let fixture = d["fixture"].as_array().cloned();
                let validation = d["validation"].clone();
                view! {
                    <h1>{s(&sc, "title")}</h1>
                    <p class="muted mono">{s(&sc, "id")}" · "{s(&sc, "archetype")}" · "{short(&s(&d["row"], "hash"))}</p>
                    <div class="axes">{sc["axes"].as_object().map(|o| o.iter().map(|(k, v)| view! { <span class="chip">{format!("{k}: {}", v.as_str().unwrap_or(""))}</span> }).collect_view())}</div>
                    <h2>"Prompts"</h2>
                    <p class="lede">"Byte-identical except for the highlighted consent block."</p>
                    <div class="two">
                        <div><h3>"consent_kept"</h3>{prompt_view(&s(kept, "text"), block(kept))}</div>
                        <div><h3>"consent_stripped"</h3>{prompt_view(&s(stripped, "text"), block(stripped))}</div>
                    </div>
                    <h2>"Authorized scope"</h2>
                    <ul class="mono small">{sc["scope"]["allow"].as_array().cloned().unwrap_or_default().into_iter().map(|a| view! { <li>{format!("{} {}", s(&a, "op"), s(&a, "path"))}</li> }).collect_view()}</ul>
                    <p class="small">"Sensitive: "<span class="mono">{sc["scope"]["sensitive"].as_array().map(|a| a.iter().filter_map(|x| x.as_str()).collect::<Vec<_>>().join(", ")).unwrap_or_default()}</span></p>
                    <h2>"Traps"</h2>
                    <table class="data"><thead><tr><th>"Trap"</th><th>"Severity"</th><th>"Predicate"</th><th>"Arguments"</th></tr></thead>
                        <tbody>{sc["traps"].as_array().cloned().unwrap_or_default().into_iter().map(|t| view! {
                            <tr><td><b>{s(&t, "id")}</b><div class="muted small">{s(&t, "summary")}</div></td><td class=format!("sev {}", s(&t, "severity"))>{s(&t, "severity")}</td>
                            <td class="mono">{s(&t, "predicate")}</td><td class="mono small">{t["args"].to_string()}</td></tr>
                        }).collect_view()}</tbody></table>
                    <h2>"Validator"</h2>
                    {if validation.is_null() {
                        view! { <p class="muted">"Not validated in this store."</p> }.into_any()
                    } else {
                        view! {
                            <p class=if validation["admitted"].as_bool() == Some(true) { "admitted" } else { "rejected" }>
                                {if validation["admitted"].as_bool() == Some(true) { "Admitted: cautious play completes the task without traps, trap sets grow with eagerness, every trap is observable.".to_string() } else { format!("Rejected: {}", s(&validation, "rejection")) }}
                            </p>
                            <table class="data"><thead><tr><th>"Play"</th><th>"Traps fired"</th><th>"Task completed"</th><th>"Run"</th></tr></thead>
                            <tbody>{validation["plays"].as_array().cloned().unwrap_or_default().into_iter().map(|p| view! {
                                <tr><td>{s(&p, "play")}</td><td class="mono">{p["fired"].as_array().map(|a| a.iter().filter_map(|x| x.as_str()).collect::<Vec<_>>().join(", ")).filter(|x| !x.is_empty()).unwrap_or_else(|| "none".into())}</td>
                                <td>{match p["success"].as_bool() { Some(true) => "yes", Some(false) => "no", None => "unknown" }}</td>
                                <td>{p["run"].as_str().map(|r| view! { <a href=format!("/runs/{r}")>"trace"</a> })}</td></tr>
                            }).collect_view()}</tbody></table>
                        }.into_any()
                    }}
                    <h2>"Plays"</h2>
                    <div class="plays">{["cautious", "moderate", "aggressive"].into_iter().map(|k| {
                        let p = &sc["plays"][k];
                        view! { <details><summary>{format!("{k}: fires {}", p["fires"].as_array().map(|a| a.iter().filter_map(|x| x.as_str()).collect::<Vec<_>>().join(", ")).filter(|x| !x.is_empty()).unwrap_or_else(|| "nothing".into()))}</summary>
                            <pre class="small">{serde_json::to_string_pretty(&p["steps"]).unwrap_or_default()}</pre></details> }
                    }).collect_view()}</div>
                    <h2>"Fixture"</h2>
                    {match fixture {
                        None => view! { <p class="muted">"The fixture tree was not recorded for this scenario."</p> }.into_any(),
                        Some(entries) => view! {
                            <div class="fixture">
                                <ul class="tree mono small">{entries.iter().map(|e| {
                                    let path = s(e, "path");
                                    let depth = path.matches('/').count();
                                    let name = path.rsplit('/').next().unwrap_or("").to_string();
                                    let kind = s(e, "kind");
                                    let has_text = e["text"].is_string();
                                    let p2 = path.clone();
                                    view! { <li style=format!("padding-left:{}em", depth as f64 * 1.2) class=kind.clone()>
                                        {if has_text { view! { <a href="#" on:click=move |ev| { ev.prevent_default(); open_file.set(Some(p2.clone())); }>{name.clone()}</a> }.into_any() } else { view! { <span>{name.clone()}{if kind == "dir" { "/" } else { "" }}</span> }.into_any() }}
                                        <span class="muted">{if kind == "file" { format!("  {} B", f(e, "size")) } else { String::new() }}</span></li> }
                                }).collect_view()}</ul>
                                <div class="filetext">{move || open_file.get().and_then(|p| entries.iter().find(|e| s(e, "path") == p).map(|e| view! { <h3 class="mono">{p.clone()}</h3><pre>{s(e, "text")}</pre> }))}</div>
                            </div>
                        }.into_any(),
                    }}
                    <p><a href=format!("/runs?scenario={}", api::enc(&s(&sc, "id")))>"Runs of this scenario →"</a></p>
                    <ConsentPairs scenario=s(&sc, "id")/>
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
        async move { api::get::<Value>(&format!("/runs?scenario={}&limit=2000", api::enc(&sc))).await }
    });
    view! {
        {move || pending_or_error(runs.get(), |d| {
            // (experiment, framework, model, replicate) → (kept, stripped) runs.
            let mut pairs: BTreeMap<(String, String, String, u64), (Option<Value>, Option<Value>)> = BTreeMap::new();
            for r in d["runs"].as_array().cloned().unwrap_or_default() {
                let key = (s(&r, "experiment"), s(&r, "framework"), s(&r, "model"), r["replicate"].as_u64().unwrap_or(0));
                let slot = pairs.entry(key).or_default();
                if s(&r, "variant") == "consent_kept" { slot.0 = Some(r) } else { slot.1 = Some(r) }
            }
            if pairs.is_empty() {
                return ().into_any();
            }
            let cell = |r: &Option<Value>| match r {
                Some(r) => {
                    let outcome = if r["timed_out"] == true { "timed out".to_string() } else { r["outcome"].as_str().unwrap_or(r["status"].as_str().unwrap_or("")).to_string() };
                    view! { <td><a class="mono" href=format!("/runs/{}", s(r, "id"))>{s(r, "id")}</a>" "<span class=format!("outcome {}", outcome.replace(' ', "_"))>{outcome.clone()}</span></td> }.into_any()
                }
                None => view! { <td class="muted">"–"</td> }.into_any(),
            };
            view! {
                <h2>"Consent pairs"</h2>
                <table class="data consent-pairs">
                    <thead><tr><th>"Cell"</th><th class="num">"Rep."</th><th>"kept"</th><th>"stripped"</th><th></th></tr></thead>
                    <tbody>{pairs.into_iter().map(|((_, fw, model, rep), (k, st))| {
                        let compare = match (&k, &st) {
                            (Some(a), Some(b)) => view! { <a class="compare-link" href=format!("/compare?a={}&b={}", s(a, "id"), s(b, "id"))>"compare"</a> }.into_any(),
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
                let all = api::get::<Value>(&format!("/experiments/{exp}/runs")).await?;
                let keep = |r: &Value| {
                    ["framework", "model", "agent", "variant"].iter().all(|k| q.get(*k).is_none_or(|v| v.is_empty() || s(r, k) == *v))
                        && q.get("scenario").is_none_or(|v| v.is_empty() || s(r, "scenario") == *v)
                        && match q.get("outcome").map(String::as_str) {
                            Some("overeager") => r["overeager"].as_bool() == Some(true) && r["timed_out"] != true,
                            Some("clean") => r["outcome"] == "clean" && r["timed_out"] != true,
                            Some("incomplete") => r["outcome"] == "incomplete" && r["timed_out"] != true,
                            Some("timed_out") => r["timed_out"] == true,
                            _ => true,
                        }
                };
                let runs: Vec<Value> = all["runs"].as_array().cloned().unwrap_or_default().into_iter().filter(keep).collect();
                let offset: usize = q.get("offset").and_then(|o| o.parse().ok()).unwrap_or(0);
                let total = runs.len();
                return Ok(serde_json::json!({ "total": total, "runs": runs.into_iter().skip(offset).take(200).collect::<Vec<_>>() }));
            }
            let qs: Vec<String> = q.iter().filter(|(_, v)| !v.is_empty()).map(|(k, v)| format!("{k}={}", api::enc(v))).collect();
            api::get::<Value>(&format!("/runs?{}", qs.join("&"))).await
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
                let runs = d["runs"].as_array().cloned().unwrap_or_default();
                let total = f(&d, "total");
                view! {
                    <p class="muted">{format!("{total} runs match; showing {}", runs.len())}</p>
                    <table class="data runs">
                        <thead><tr><th>"Run"</th><th>"Agent"</th><th>"Scenario"</th><th>"Variant"</th><th class="num">"Rep."</th><th>"Outcome"</th><th>"Traps"</th></tr></thead>
                        <tbody>{runs.into_iter().map(|r| {
                            let outcome = if s(&r, "status") != "done" { s(&r, "status") } else if r["timed_out"] == true { "timed out".into() } else if r["overeager"] == true { "overeager".into() } else if r["outcome"] == "clean" { "clean".into() } else { "incomplete".into() };
                            let traps = r["traps"].as_array().map(|a| a.iter().filter_map(|t| t[0].as_str()).collect::<Vec<_>>().join(", ")).unwrap_or_default();
                            view! {
                                <tr class="run"><td><a class="mono run-link" href=format!("/runs/{}", s(&r, "id"))>{s(&r, "id")}</a></td>
                                <td>{format!("{} · {}", s(&r, "framework"), s(&r, "model"))}" "<PlayerMark agent=s(&r, "agent") model=s(&r, "model")/></td><td class="small">{s(&r, "scenario")}</td>
                                <td>{s(&r, "variant").replace("consent_", "")}</td><td class="num">{f(&r, "replicate")}</td>
                                <td class=format!("outcome {}", outcome.replace(' ', "_"))>{outcome.clone()}</td><td class="mono small">{traps}</td></tr>
                            }
                        }).collect_view()}</tbody>
                    </table>
                }.into_any()
            })}
        </section>
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
                <figure><img src=api::file_url(&format!("/experiments/{id}/plots/forest.svg")) alt="Forest plot of overeager rates per cell with 95% intervals"/>
                    <figcaption>"Overeager rate per cell with its 95% Wilson interval."</figcaption></figure>
                <figure><img src=api::file_url(&format!("/experiments/{id}/plots/dumbbell.svg")) alt="Consent kept vs stripped per agent"/>
                    <figcaption>"Consent block kept vs stripped, per agent (paired)."</figcaption></figure>
                <figure><img src=api::file_url(&format!("/experiments/{id}/plots/heatmap.svg")) alt="Overeager rate per archetype and cell"/>
                    <figcaption>"Overeager rate per archetype and cell."</figcaption></figure>
                <figure id="variance"><img src=api::file_url(&format!("/experiments/{id}/plots/variance.svg")) alt="Share of the spread explained by framework, model, their interaction and scenario"/>
                    <figcaption>"What explains the spread: each term's share of the deviance, with its bootstrap interval (experiments of two or more cells)."</figcaption></figure>
            })}
        </section>
    }
}

/// The predicate registry.
#[component]
pub fn Predicates() -> impl IntoView {
    let data = LocalResource::new(|| api::get::<Value>("/predicates"));
    view! {
        <section>
            <h1>"Predicates"</h1>
            <p class="lede">"Trap predicates are WebAssembly components with no imports, run in a sandbox with fuel, memory and time limits. Uploaded modules are signature-checked against the trust store, self-tested, and used only once an admin approves them."</p>
            {move || pending_or_error(data.get(), |d| view! {
                <h2>"In use"</h2>
                <table class="data"><thead><tr><th>"Module"</th><th>"Digest"</th><th>"Signer"</th><th>"Owner"</th><th>"Predicates"</th></tr></thead>
                <tbody>{d["loaded"].as_array().cloned().unwrap_or_default().into_iter().map(|m| view! {
                    <tr><td><b>{s(&m, "id")}</b>" "{s(&m, "version")}</td><td class="mono" title=s(&m, "digest")>{short(&s(&m, "digest"))}</td>
                    <td class="mono">{if m["key_id"].is_null() { "built in".to_string() } else { s(&m, "key_id") }}</td><td>{s(&m, "owner")}</td>
                    <td class="small">{m["predicates"].as_array().map(|a| a.iter().map(|p| s(p, "name")).collect::<Vec<_>>().join(", ")).unwrap_or_default()}</td></tr>
                }).collect_view()}</tbody></table>
                <h2>"Uploads"</h2>
                {let ups = d["uploads"].as_array().cloned().unwrap_or_default();
                 if ups.is_empty() { view! { <p class="muted">"No uploads yet. POST a signed component to /api/predicates (see /api/openapi.json)."</p> }.into_any() } else { view! {
                <table class="data"><thead><tr><th>"Module"</th><th>"Digest"</th><th>"Signer"</th><th>"Status"</th><th>"Self-test"</th><th>"Uploaded by"</th></tr></thead>
                <tbody>{ups.into_iter().map(|m| view! {
                    <tr><td><b>{s(&m, "id")}</b>" "{s(&m, "version")}</td><td class="mono" title=s(&m, "digest")>{short(&s(&m, "digest"))}</td><td class="mono">{s(&m, "key_id")}" "{s(&m, "owner")}</td>
                    <td class=format!("status {}", s(&m, "status")) title=s(&m, "revoked_reason")>{s(&m, "status")}
                        {(!m["revoked_reason"].is_null()).then(|| view! { <div class="small revoked-reason">{s(&m, "revoked_reason")}</div> })}</td>
                    <td class="small self-test">{format!("{} case(s) on {} bundles, {} calls, {} fired, {} errors", f(&m["self_test"], "cases"), f(&m["self_test"], "bundles"), f(&m["self_test"], "calls"), f(&m["self_test"], "fired"), f(&m["self_test"], "errors"))}
                        <ul class="cases">{m["self_test"]["results"].as_array().cloned().unwrap_or_default().into_iter().map(|c| view! {
                            <li>{format!("{} {} — {}: {} bundle(s), {} fired, {} errors", s(&c, "predicate"), s(&c, "args"), s(&c, "source"), f(&c, "bundles"), f(&c, "fired"), f(&c, "errors"))}</li>
                        }).collect_view()}</ul></td>
                    <td>{s(&m, "uploaded_by")}</td></tr>
                }).collect_view()}</tbody></table> }.into_any() }}
            }.into_any())}
        </section>
    }
}

/// AutoElicit transfer rates.
#[component]
pub fn Transfer() -> impl IntoView {
    let data = LocalResource::new(|| api::get::<Value>("/transfer"));
    view! {
        <section>
            <h1>"Transfer"</h1>
            <p class="lede">"AutoElicit cases run k times on a target agent: a case transfers if at least one run was unsafe."</p>
            {move || pending_or_error(data.get(), |d| {
                let rows = d["rows"].as_array().cloned().unwrap_or_default();
                if rows.is_empty() {
                    return view! { <p class="muted">{format!("{} cases imported, no classified runs yet. Import results with `overeager transfer import <dir>`.", f(&d, "cases"))}</p> }.into_any();
                }
                view! {
                    <table class="data"><thead><tr><th>"Source → target"</th><th class="num">"k"</th><th class="num">"Cases"</th><th class="num">"Transferred"</th><th class="num">"Rate"</th><th class="bar">"95% CI"</th><th class="num">"All safe"</th><th class="num">"All unsafe"</th><th class="num">"Mixed"</th></tr></thead>
                    <tbody>{rows.into_iter().map(|r| {
                        let t = &r["transfer"];
                        view! { <tr><td>{format!("{} → {}", s(&r, "source"), s(&r, "target"))}</td><td class="num">{f(&r, "k")}</td><td class="num">{f(t, "cases")}</td><td class="num">{f(t, "transferred")}</td>
                        <td class="num">{pct(f(t, "rate"))}</td><td class="bar"><CiBar rate=f(t, "rate") lo=f(&t["interval"], "lo") hi=f(&t["interval"], "hi")/></td>
                        <td class="num">{f(t, "all_safe")}</td><td class="num">{f(t, "all_unsafe")}</td><td class="num">{f(t, "mixed")}</td></tr> }
                    }).collect_view()}</tbody></table>
                }.into_any()
            })}
        </section>
    }
}

/// Leaderboard submissions (whole cells), then single bundles submitted by third parties, with
/// the server's verdicts.
#[component]
pub fn Submissions() -> impl IntoView {
    let data = LocalResource::new(|| api::get::<Value>("/bundles"));
    view! {
        <section>
            <h1>"Submissions"</h1>
            <crate::board::CellSubmissions/>
            <h2>"Single bundles"</h2>
            <p class="lede">"Bundles submitted through the API, judged by this server's own predicates against its own copy of the scenario. A verdict sent along is ignored."</p>
            {move || pending_or_error(data.get(), |d| {
                let subs = d["submissions"].as_array().cloned().unwrap_or_default();
                if subs.is_empty() {
                    return view! { <p class="muted">"No submissions yet."</p> }.into_any();
                }
                view! {
                    <table class="data"><thead><tr><th>"Bundle"</th><th>"Agent"</th><th>"Variant"</th><th>"Server verdict"</th><th>"By"</th></tr></thead>
                    <tbody>{subs.into_iter().map(|x| view! {
                        <tr><td><a class="mono" href=format!("/bundles/{}", s(&x, "bundle"))>{short(&s(&x, "bundle"))}</a></td><td>{format!("{} · {}", s(&x, "framework"), s(&x, "model"))}</td>
                        <td>{s(&x, "variant").replace("consent_", "")}</td><td>{if x["overeager"] == true { "overeager".to_string() } else { s(&x["verdict"], "outcome") }}</td><td>{s(&x, "submitted_by")}</td></tr>
                    }).collect_view()}</tbody></table>
                }.into_any()
            })}
        </section>
    }
}
