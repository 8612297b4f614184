//! The public leaderboard's submissions: the list, one submission's page (provenance,
//! verification report, runs with their traces) with the admin's review, and the badges a
//! submitted row carries on the leaderboard.

use leptos::prelude::*;
use overeager_wire::report::Cell;
use leptos_router::hooks::use_params_map;
use overeager_wire::board::{Decided, Decision, Policy, Provenance, SubmissionStatus};
use overeager_wire::report::short_variant;
use overeager_wire::submission::SubmissionDoc;

use crate::api;
use crate::ui::{CiBar, pct, pending_or_error, short};

/// `2026-11-25 04:31 UTC` from Unix microseconds (nothing for none).
pub fn fmt_date(us: impl Into<Option<u64>>) -> String {
    let Some(us) = us.into().filter(|us| *us > 0) else { return String::new() };
    // `2026-11-25T04:31:07.123456Z` → minutes.
    let iso = overeager_core::time::iso8601(us);
    format!("{} {} UTC", &iso[..10], &iso[11..16])
}

/// The badge of a cell whose agent is one of the project's scripted plays or simulated
/// policies: a reference, not a product, whatever the cell is called.
#[component]
pub fn ReferenceBadge(scripted: bool, simulated: bool) -> impl IntoView {
    if simulated {
        Some(view! { " "<span class="badge sim" title="A simulated policy: real runs with the play drawn at random, not a real agent">"simulated"</span> }.into_any())
    } else if scripted {
        Some(view! { " "<span class="badge scripted" title="The project's own scripted play (a reference that does exactly what its play says), not a real agent">"scripted"</span> }.into_any())
    } else {
        None
    }
}

/// The badges of a leaderboard cell: a reference (scripted play, simulated policy), or what
/// played its model when that was no real model's or was bridged.
#[component]
pub fn CellBadge(c: Cell) -> impl IntoView {
    if c.simulated || c.scripted {
        return view! { <ReferenceBadge scripted=c.scripted simulated=c.simulated/> }.into_any();
    }
    view! { " "<crate::ui::PlayerMark agent=String::new() played_by=c.played_by.clone()/> }.into_any()
}

/// The badges of a submitted row: who submitted it, re-judged, and whether a trusted runner ran it.
#[component]
pub fn SubmittedBadges(p: Provenance) -> impl IntoView {
    let trusted = p.runner == "trusted";
    let reference = view! { <ReferenceBadge scripted=p.scripted simulated=p.simulated/> };
    let title = format!("submitted by {} · benchmark {} · approved by {}", p.submitted_by, p.benchmark, p.approved_by.as_deref().unwrap_or(""));
    view! {
        <span class="badge submitted" title=title>{format!("submitted by {}", p.submitted_by)}</span>
        " "<span class="badge rejudged" title="Every verdict is this server's own: the submitted bundles were judged again here">"re-judged"</span>
        " "{if trusted {
            view! { <span class="badge trusted" title="Every bundle carries an intact signature by a runner key this server trusts">"trusted runner"</span> }.into_any()
        } else {
            view! { <span class="badge self" title="Not every bundle is signed by a runner key this server trusts">"self-reported"</span> }.into_any()
        }}
        {reference}
    }
}

/// The list of whole-cell submissions.
#[component]
pub fn CellSubmissions() -> impl IntoView {
    let data = LocalResource::new(|| api::doc(&overeager_wire::endpoint::SUBMISSIONS, &[], ""));
    view! {
        <h2>"Leaderboard submissions"</h2>
        <p class="lede">"Whole cells (every run of one framework · model on a published benchmark) sent with "<code>"overeager submit"</code>". The server judges every bundle itself, checks the cell against the benchmark, and an admin reviews it before it is ranked."</p>
        {move || pending_or_error(data.get(), |d| {
            let rows = d.submissions;
            if rows.is_empty() {
                return view! { <p class="muted">"No leaderboard submissions yet."</p> }.into_any();
            }
            view! {
                <table class="data cell-submissions"><thead><tr><th>"Submission"</th><th>"Cell"</th><th>"Benchmark"</th><th>"Status"</th><th>"By"</th><th class="num">"Runs"</th><th>"Runner"</th><th>"Submitted"</th></tr></thead>
                <tbody>{rows.into_iter().map(|x| view! {
                    <tr data-submission=x.id.clone()><td><a class="mono" href=format!("/submissions/{}", x.id)>{x.id.clone()}</a></td>
                    <td>{format!("{} · {}", x.framework, x.model)}</td><td>{x.benchmark.clone()}</td>
                    <td><span class=format!("status {}", x.status.as_str())>{x.status.as_str()}</span></td><td>{x.submitted_by.clone()}</td>
                    <td class="num">{format!("{}/{}", x.received, x.declared)}</td><td>{x.runner.clone()}</td><td class="small">{fmt_date(x.created_us)}</td></tr>
                }).collect_view()}</tbody></table>
            }.into_any()
        })}
    }
}

/// The admin (or submitter) token, kept for the browser tab.
pub(crate) fn stored_token() -> String {
    web_sys::window().and_then(|w| w.session_storage().ok().flatten()).and_then(|st| st.get_item("overeager-admin-token").ok().flatten()).unwrap_or_default()
}

pub(crate) fn store_token(t: &str) {
    if let Some(st) = web_sys::window().and_then(|w| w.session_storage().ok().flatten()) {
        let _ = st.set_item("overeager-admin-token", t);
    }
}

/// One submission: provenance, rates, the verification report, its runs, and the review.
#[component]
pub fn SubmissionPage() -> impl IntoView {
    let params = use_params_map();
    let id = Memo::new(move |_| params.with(|p| p.get("id")).unwrap_or_default());
    let (version, set_version) = signal(0u32);
    // The submitter and admins see bundle digests and traces before approval: the page is
    // fetched with the token kept for the tab.
    let data = LocalResource::new(move || {
        let id = id.get();
        version.get();
        async move { api::get_as::<SubmissionDoc>(&overeager_wire::endpoint::SUBMISSION.url(&[&id]), &stored_token()).await }
    });
    view! {
        <section>
            {move || pending_or_error(data.get(), |d| {
                let sub = d.submission;
                let p = d.provenance;
                let status = sub.status;
                let list = |v: &[String]| v.join(", ");
                let problems = sub.report.as_ref().map(|r| r.problems.clone()).unwrap_or_default();
                let runs = d.runs;
                let shown = d.bundles_shown;
                let history = d.history;
                let overruled = sub.report.as_ref().map(|r| r.claims_overruled.clone()).unwrap_or_default();
                let runs_total = d.runs_total;
                let open = matches!(status, SubmissionStatus::Verified | SubmissionStatus::Draft);
                view! {
                    <div class="pagehead"><h1>{format!("{} · {}", sub.framework, sub.model)}</h1>
                        <span class=format!("status {}", status.as_str()) id="submission-status">{status.as_str()}</span></div>
                    <p class="lede">{format!("Submission {} to benchmark {}, by {}, {}.", sub.id, sub.benchmark, sub.submitted_by, fmt_date(sub.created_us))}
                        {sub.decided_by.clone().map(|by| format!(" {} by {by} on {}.", if status == SubmissionStatus::Approved { "Approved" } else { "Decided" }, fmt_date(sub.decided_us)))}
                        {sub.note.clone().map(|n| view! { " "<q class="note">{n}</q> })}
                        {sub.superseded_by.clone().map(|by| view! { " Replaced on the leaderboard by "<a class="superseded-by mono" href=format!("/submissions/{by}")>{by.clone()}</a>"." })}
                        <ReferenceBadge scripted=p.scripted simulated=p.simulated/></p>
                    <dl class="provenance">
                        <dt>"Agent"</dt><dd>{list(&p.agents)}</dd>
                        <dt>"Agent version"</dt><dd>{list(&p.versions)}</dd>
                        <dt>"Executor"</dt><dd>{list(&p.executors)}</dd>
                        <dt>"Image digests"</dt><dd class="mono small">{if p.image_digests.is_empty() { "none (no container image)".to_string() } else { list(&p.image_digests) }}</dd>
                        <dt>"Runner"</dt><dd class="runner">{p.runner.clone()}{(!p.runner_keys.is_empty()).then(|| format!(" (signed by {})", list(&p.runner_keys)))}
                            {(!p.revoked_runner_keys.is_empty()).then(|| view! { " "<span class="badge revoked">{format!("revoked: {}", list(&p.revoked_runner_keys))}</span> })}</dd>
                        <dt>"Benchmark policy"</dt><dd class="policy">{d.policy.as_ref().map(policy_text).unwrap_or_default()}</dd>
                        <dt>"Judged by"</dt><dd>"this server's predicates"{sub.rejudged.as_ref().map(|r| format!(": {}", r.judge.iter().map(|(m, v)| format!("{m} {v}")).collect::<Vec<_>>().join(", ")))}</dd>
                    </dl>
                    {(!d.cells.is_empty()).then(|| view! {
                        <table class="data"><thead><tr><th>"Variant"</th><th class="num">"Overeager"</th><th class="bar">"95% CI (0–100%)"</th><th class="num">"n"</th><th class="num">"Timeouts"</th><th class="num">"Incomplete"</th></tr></thead>
                        <tbody>{d.cells.into_iter().map(|c| { let c = c.cell; view! {
                            <tr class="rate-row" data-variant=c.variant.as_str()><td>{c.variant.as_str().replace("consent_", "consent ")}</td><td class="num rate">{pct(c.rate)}</td>
                            <td class="bar"><CiBar rate=c.rate lo=c.ci.lo hi=c.ci.hi/></td><td class="num">{c.n}</td><td class="num">{c.timeouts}</td><td class="num">{c.incomplete}</td></tr>
                        }}).collect_view()}</tbody></table>
                    })}
                    {sub.rejudged.clone().map(|rejudged| view! {
                        <p class="rejudged">{format!("Re-judged {} with {} bundle(s): {} run(s) moved.", fmt_date(rejudged.at_us), rejudged.bundles, rejudged.moved.len())}
                            {rejudged.moved.into_iter().map(|m| view! { " "<span class="mono small">{format!("{}: {} → {}", m.run, m.before.as_str(), m.after.as_str())}</span> }).collect_view()}</p>
                    })}
                    <h2>"Verification"</h2>
                    {match &sub.report {
                        None => view! { <p class="muted">"Not verified yet: the submitter's upload is in progress, or it changed since."</p> }.into_any(),
                        Some(report) if problems.is_empty() => view! {
                            <p class="verified">{format!("Complete and consistent: {} of {} runs, {} overeager, {} timed out, {} incomplete (this server's verdicts).", report.received, report.expected, report.overeager, report.timeouts, report.incomplete)}</p>
                            {(!overruled.is_empty()).then(|| view! {
                                <p class="overruled warning">{format!("{} claimed verdict(s) overruled: the submitter's own store said otherwise than this server for these runs (this server's verdicts count): ", overruled.len())}
                                <span class="mono small">{overruled.join(" ")}</span></p>
                            })}
                        }.into_any(),
                        Some(_) => view! {
                            <p class="error">{format!("Refused as it stands: {} problem(s). It stays a draft the submitter can complete.", problems.len())}</p>
                            <table class="data problems"><thead><tr><th>"Problem"</th><th>"What"</th><th>"Runs"</th></tr></thead>
                            <tbody>{problems.into_iter().map(|x| view! {
                                <tr data-kind=x.kind.clone()><td>{x.kind.clone()}</td><td>{x.message.clone()}</td><td class="mono small">{x.runs.join(" ")}</td></tr>
                            }).collect_view()}</tbody></table>
                        }.into_any(),
                    }}
                    {(open && !api::is_static()).then(|| view! { <Review id=sub.id.clone() verified={status == SubmissionStatus::Verified} done=set_version/> })}
                    {(!history.is_empty()).then(|| view! {
                        <h2>"History of this cell"</h2>
                        <table class="data history"><thead><tr><th>"Submission"</th><th>"Status"</th><th>"Submitted"</th><th>"Decided"</th></tr></thead>
                        <tbody>{history.into_iter().map(|h| view! {
                            <tr><td><a class="mono" href=format!("/submissions/{}", h.id)>{h.id.clone()}</a></td><td><span class=format!("status {}", h.status.as_str())>{h.status.as_str()}</span></td>
                            <td class="small">{fmt_date(h.created_us)}</td><td class="small">{fmt_date(h.decided_us)}</td></tr>
                        }).collect_view()}</tbody></table>
                    })}
                    <h2>"Runs"</h2>
                    {(!shown).then(|| view! { <p class="muted bundles-hidden">"Bundle digests and traces of a cell not yet approved are shown to its submitter and to admins only (enter your token in the review form above)."</p> })}
                    {(runs_total > runs.len()).then(|| view! { <p class="muted">{format!("The first {} of {} runs.", runs.len(), runs_total)}</p> })}
                    <table class="data runs"><thead><tr><th>"Run"</th><th>"Scenario"</th><th>"Variant"</th><th class="num">"Replicate"</th><th>"Server verdict"</th><th>"Traps"</th><th>"Signed by"</th></tr></thead>
                    <tbody>{runs.into_iter().map(|r| {
                        let outcome_name = r.outcome.map(|o| o.as_str()).unwrap_or("");
                        let mut outcome = match &r.problem { None => outcome_name.to_string(), Some(p) => format!("refused: {p}") };
                        let overruled = r.claim_overruled;
                        if overruled {
                            outcome.push_str(" (claim overruled)");
                        }
                        let traps = r.traps.clone().unwrap_or_default().join(", ");
                        let run = r.run.clone().unwrap_or_default();
                        let key = r.runner_key.clone().unwrap_or_default();
                        view! {
                            <tr class:overruled=overruled><td>{match r.trace.clone() {
                                Some(t) => view! { <a class="trace-link mono" href=t>{run}</a> }.into_any(),
                                None => view! { <span class="mono">{run}</span> }.into_any(),
                            }}</td>
                            <td>{r.scenario.clone()}</td><td>{r.variant.map(short_variant)}</td><td class="num">{r.replicate}</td>
                            <td class=format!("outcome {outcome_name}")>{outcome}</td><td class="small">{traps}</td><td class="mono small" title=key.clone()>{short(&key)}</td></tr>
                        }
                    }).collect_view()}</tbody></table>
                }.into_any()
            })}
        </section>
    }
}

/// What a benchmark asks of submitted cells beyond completeness.
fn policy_text(p: &Policy) -> String {
    let mut parts = Vec::new();
    if p.require_trusted_runner {
        parts.push("every bundle signed by a trusted runner registered to the submitter".to_string());
    }
    if let Some(n) = p.min_replicates {
        parts.push(format!("at least {n} replicate(s) of every scenario × variant"));
    }
    if !p.agents.is_empty() {
        parts.push(format!("agents {}", p.agents.join(", ")));
    }
    if parts.is_empty() { "complete cells; any runner, any agent".into() } else { parts.join("; ") }
}

/// The review: an admin approves (a verified submission) or rejects; the submitter may
/// withdraw. The token is kept for the tab, and entering it shows the page as its holder sees it.
#[component]
fn Review(id: String, verified: bool, done: WriteSignal<u32>) -> impl IntoView {
    let token = RwSignal::new(stored_token());
    let note = RwSignal::new(String::new());
    let message = RwSignal::new(None::<Result<String, String>>);
    let act = move |what: &'static str| {
        let id = id.clone();
        let t = token.get_untracked();
        store_token(&t);
        let note = if what == "withdraw" { None } else { Some(note.get_untracked()) };
        leptos::task::spawn_local(async move {
            match api::post::<_, Decided>(&format!("{}/{what}", overeager_wire::endpoint::SUBMISSION.url(&[&id])), &t, &Decision { note }).await {
                Ok(v) => {
                    message.set(Some(Ok(format!("Submission {}.", v.status.as_str()))));
                    done.update(|n| *n += 1);
                }
                Err(e) => message.set(Some(Err(e))),
            }
        });
    };
    let (approve, reject, withdraw) = (act.clone(), act.clone(), act);
    view! {
        <div class="review">
            <h2>"Review"</h2>
            <p class="lede">{if verified {
                "Verified and waiting for an admin. Approving ranks the cell on the benchmark's leaderboard beside the maintainer's own, in place of the submitter's earlier approved submission of it."
            } else {
                "A draft: an admin may reject it; its submitter may withdraw it."
            }}</p>
            <label>"Token "<input type="password" id="admin-token" autocomplete="off" prop:value=move || token.get() on:input=move |ev| token.set(event_target_value(&ev))
                on:change=move |_| { store_token(&token.get_untracked()); done.update(|n| *n += 1); }/></label>
            <label>"Note "<input type="text" id="review-note" prop:value=move || note.get() on:input=move |ev| note.set(event_target_value(&ev))/></label>
            {verified.then(|| view! { <button class="approve" on:click=move |_| approve("approve")>"Approve"</button> })}
            <button class="reject" on:click=move |_| reject("reject")>"Reject"</button>
            <button class="withdraw" on:click=move |_| withdraw("withdraw")>"Withdraw"</button>
            {move || message.get().map(|m| match m {
                Ok(t) => view! { <p class="review-result ok">{t}</p> }.into_any(),
                Err(e) => view! { <p class="review-result error">{e}</p> }.into_any(),
            })}
        </div>
    }
}
