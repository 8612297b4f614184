//! The public leaderboard's submissions: the list, one submission's page (provenance,
//! verification report, runs with their traces) with the admin's review, and the badges a
//! submitted row carries on the leaderboard.

use leptos::prelude::*;
use leptos_router::hooks::use_params_map;
use serde_json::{Value, json};

use crate::api;
use crate::ui::{CiBar, f, pct, pending_or_error, s, short};

/// `2026-11-25 04:31 UTC` from Unix microseconds.
pub fn fmt_date(us: f64) -> String {
    if us <= 0.0 {
        return String::new();
    }
    // `2026-11-25T04:31:07.123456Z` → minutes.
    let iso = overeager_core::time::iso8601(us as u64);
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

/// The badges of a submitted row: who submitted it, re-judged, and whether a trusted runner ran it.
#[component]
pub fn SubmittedBadges(p: Value) -> impl IntoView {
    let trusted = s(&p, "runner") == "trusted";
    let reference = view! { <ReferenceBadge scripted=p["scripted"].as_bool().unwrap_or(false) simulated=p["simulated"].as_bool().unwrap_or(false)/> };
    let title = format!("submitted by {} · benchmark {} · approved by {}", s(&p, "submitted_by"), s(&p, "benchmark"), s(&p, "approved_by"));
    view! {
        <span class="badge submitted" title=title>{format!("submitted by {}", s(&p, "submitted_by"))}</span>
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
    let data = LocalResource::new(|| api::get::<Value>("/submissions"));
    view! {
        <h2>"Leaderboard submissions"</h2>
        <p class="lede">"Whole cells (every run of one framework · model on a published benchmark) sent with "<code>"overeager submit"</code>". The server judges every bundle itself, checks the cell against the benchmark, and an admin reviews it before it is ranked."</p>
        {move || pending_or_error(data.get(), |d| {
            let rows = d["submissions"].as_array().cloned().unwrap_or_default();
            if rows.is_empty() {
                return view! { <p class="muted">"No leaderboard submissions yet."</p> }.into_any();
            }
            view! {
                <table class="data cell-submissions"><thead><tr><th>"Submission"</th><th>"Cell"</th><th>"Benchmark"</th><th>"Status"</th><th>"By"</th><th class="num">"Runs"</th><th>"Runner"</th><th>"Submitted"</th></tr></thead>
                <tbody>{rows.into_iter().map(|x| view! {
                    <tr data-submission=s(&x, "id")><td><a class="mono" href=format!("/submissions/{}", s(&x, "id"))>{s(&x, "id")}</a></td>
                    <td>{format!("{} · {}", s(&x, "framework"), s(&x, "model"))}</td><td>{s(&x, "benchmark")}</td>
                    <td><span class=format!("status {}", s(&x, "status"))>{s(&x, "status")}</span></td><td>{s(&x, "submitted_by")}</td>
                    <td class="num">{format!("{}/{}", f(&x, "received"), f(&x, "declared"))}</td><td>{s(&x, "runner")}</td><td class="small">{fmt_date(f(&x, "created_us"))}</td></tr>
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
        async move { api::get_as::<Value>(&format!("/submissions/{id}"), &stored_token()).await }
    });
    view! {
        <section>
            {move || pending_or_error(data.get(), |d| {
                let sub = d["submission"].clone();
                let p = d["provenance"].clone();
                let status = s(&sub, "status");
                let list = |k: &str| p[k].as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect::<Vec<_>>().join(", ")).unwrap_or_default();
                let judge = p["judge"].as_object().map(|m| m.iter().map(|(k, v)| format!("{k} {}", v.as_str().unwrap_or(""))).collect::<Vec<_>>().join(", ")).unwrap_or_default();
                let report = sub["report"].clone();
                let problems = report["problems"].as_array().cloned().unwrap_or_default();
                let runs = d["runs"].as_array().cloned().unwrap_or_default();
                let cells = d["cells"].as_array().cloned().unwrap_or_default();
                let rejudged = sub["rejudged"].clone();
                let shown = d["bundles_shown"].as_bool().unwrap_or(true);
                let history = d["history"].as_array().cloned().unwrap_or_default();
                let policy = d["policy"].clone();
                let overruled = report["claims_overruled"].as_array().cloned().unwrap_or_default();
                let runs_total = f(&d, "runs_total");
                view! {
                    <div class="pagehead"><h1>{format!("{} · {}", s(&sub, "framework"), s(&sub, "model"))}</h1>
                        <span class=format!("status {status}") id="submission-status">{status.clone()}</span></div>
                    <p class="lede">{format!("Submission {} to benchmark {}, by {}, {}.", s(&sub, "id"), s(&sub, "benchmark"), s(&sub, "submitted_by"), fmt_date(f(&sub, "created_us")))}
                        {(!sub["decided_by"].is_null()).then(|| format!(" {} by {} on {}.", if status == "approved" { "Approved" } else { "Decided" }, s(&sub, "decided_by"), fmt_date(f(&sub, "decided_us"))))}
                        {(!sub["note"].is_null()).then(|| view! { " "<q class="note">{s(&sub, "note")}</q> })}
                        {(!sub["superseded_by"].is_null()).then(|| view! { " Replaced on the leaderboard by "<a class="superseded-by mono" href=format!("/submissions/{}", s(&sub, "superseded_by"))>{s(&sub, "superseded_by")}</a>"." })}
                        <ReferenceBadge scripted=p["scripted"].as_bool().unwrap_or(false) simulated=p["simulated"].as_bool().unwrap_or(false)/></p>
                    <dl class="provenance">
                        <dt>"Agent"</dt><dd>{list("agents")}</dd>
                        <dt>"Agent version"</dt><dd>{list("versions")}</dd>
                        <dt>"Executor"</dt><dd>{list("executors")}</dd>
                        <dt>"Image digests"</dt><dd class="mono small">{let d = list("image_digests"); if d.is_empty() { "none (no container image)".to_string() } else { d }}</dd>
                        <dt>"Runner"</dt><dd class="runner">{s(&p, "runner")}{(!list("runner_keys").is_empty()).then(|| format!(" (signed by {})", list("runner_keys")))}
                            {(!list("revoked_runner_keys").is_empty()).then(|| view! { " "<span class="badge revoked">{format!("revoked: {}", list("revoked_runner_keys"))}</span> })}</dd>
                        <dt>"Benchmark policy"</dt><dd class="policy">{policy_text(&policy)}</dd>
                        <dt>"Judged by"</dt><dd>"this server's predicates: "{judge}</dd>
                    </dl>
                    {(!cells.is_empty()).then(|| view! {
                        <table class="data"><thead><tr><th>"Variant"</th><th class="num">"Overeager"</th><th class="bar">"95% CI (0–100%)"</th><th class="num">"n"</th><th class="num">"Timeouts"</th><th class="num">"Incomplete"</th></tr></thead>
                        <tbody>{cells.into_iter().map(|c| view! {
                            <tr class="rate-row" data-variant=s(&c, "variant")><td>{s(&c, "variant").replace("consent_", "consent ")}</td><td class="num rate">{pct(f(&c, "rate"))}</td>
                            <td class="bar"><CiBar rate=f(&c, "rate") lo=f(&c["ci"], "lo") hi=f(&c["ci"], "hi")/></td><td class="num">{f(&c, "n")}</td><td class="num">{f(&c, "timeouts")}</td><td class="num">{f(&c, "incomplete")}</td></tr>
                        }).collect_view()}</tbody></table>
                    })}
                    {(!rejudged.is_null()).then(|| {
                        let moved = rejudged["moved"].as_array().cloned().unwrap_or_default();
                        view! { <p class="rejudged">{format!("Re-judged {} with {} bundle(s): {} run(s) moved.", fmt_date(f(&rejudged, "at_us")), f(&rejudged, "bundles"), moved.len())}
                            {moved.into_iter().map(|m| view! { " "<span class="mono small">{format!("{}: {} → {}", s(&m, "run"), s(&m, "before"), s(&m, "after"))}</span> }).collect_view()}</p> }
                    })}
                    <h2>"Verification"</h2>
                    {if report.is_null() {
                        view! { <p class="muted">"Not verified yet: the submitter's upload is in progress, or it changed since."</p> }.into_any()
                    } else if problems.is_empty() {
                        view! {
                            <p class="verified">{format!("Complete and consistent: {} of {} runs, {} overeager, {} timed out, {} incomplete (this server's verdicts).", f(&report, "received"), f(&report, "expected"), f(&report, "overeager"), f(&report, "timeouts"), f(&report, "incomplete"))}</p>
                            {(!overruled.is_empty()).then(|| view! {
                                <p class="overruled warning">{format!("{} claimed verdict(s) overruled: the submitter's own store said otherwise than this server for these runs (this server's verdicts count): ", overruled.len())}
                                <span class="mono small">{overruled.iter().filter_map(|r| r.as_str()).collect::<Vec<_>>().join(" ")}</span></p>
                            })}
                        }.into_any()
                    } else {
                        view! {
                            <p class="error">{format!("Refused as it stands: {} problem(s). It stays a draft the submitter can complete.", problems.len())}</p>
                            <table class="data problems"><thead><tr><th>"Problem"</th><th>"What"</th><th>"Runs"</th></tr></thead>
                            <tbody>{problems.into_iter().map(|x| view! {
                                <tr data-kind=s(&x, "kind")><td>{s(&x, "kind")}</td><td>{s(&x, "message")}</td><td class="mono small">{x["runs"].as_array().map(|a| a.iter().filter_map(|r| r.as_str()).collect::<Vec<_>>().join(" ")).unwrap_or_default()}</td></tr>
                            }).collect_view()}</tbody></table>
                        }.into_any()
                    }}
                    {((status == "verified" || status == "draft") && !api::is_static()).then(|| view! { <Review id=s(&sub, "id") verified={status == "verified"} done=set_version/> })}
                    {(!history.is_empty()).then(|| view! {
                        <h2>"History of this cell"</h2>
                        <table class="data history"><thead><tr><th>"Submission"</th><th>"Status"</th><th>"Submitted"</th><th>"Decided"</th></tr></thead>
                        <tbody>{history.into_iter().map(|h| view! {
                            <tr><td><a class="mono" href=format!("/submissions/{}", s(&h, "id"))>{s(&h, "id")}</a></td><td><span class=format!("status {}", s(&h, "status"))>{s(&h, "status")}</span></td>
                            <td class="small">{fmt_date(f(&h, "created_us"))}</td><td class="small">{fmt_date(f(&h, "decided_us"))}</td></tr>
                        }).collect_view()}</tbody></table>
                    })}
                    <h2>"Runs"</h2>
                    {(!shown).then(|| view! { <p class="muted bundles-hidden">"Bundle digests and traces of a cell not yet approved are shown to its submitter and to admins only (enter your token in the review form above)."</p> })}
                    {(runs_total > runs.len() as f64).then(|| view! { <p class="muted">{format!("The first {} of {} runs.", runs.len(), runs_total)}</p> })}
                    <table class="data runs"><thead><tr><th>"Run"</th><th>"Scenario"</th><th>"Variant"</th><th class="num">"Replicate"</th><th>"Server verdict"</th><th>"Traps"</th><th>"Signed by"</th></tr></thead>
                    <tbody>{runs.into_iter().map(|r| {
                        let mut outcome = if r["problem"].is_null() { s(&r, "outcome") } else { format!("refused: {}", s(&r, "problem")) };
                        let overruled = r["claim_overruled"].as_bool().unwrap_or(false);
                        if overruled {
                            outcome.push_str(" (claim overruled)");
                        }
                        let traps = r["traps"].as_array().map(|a| a.iter().filter_map(|t| t.as_str()).collect::<Vec<_>>().join(", ")).unwrap_or_default();
                        view! {
                            <tr class:overruled=overruled><td>{match r["trace"].as_str() {
                                Some(t) => view! { <a class="trace-link mono" href=t.to_string()>{s(&r, "run")}</a> }.into_any(),
                                None => view! { <span class="mono">{s(&r, "run")}</span> }.into_any(),
                            }}</td>
                            <td>{s(&r, "scenario")}</td><td>{s(&r, "variant").replace("consent_", "")}</td><td class="num">{f(&r, "replicate")}</td>
                            <td class=format!("outcome {}", s(&r, "outcome"))>{outcome}</td><td class="small">{traps}</td><td class="mono small" title=s(&r, "runner_key")>{short(&s(&r, "runner_key"))}</td></tr>
                        }
                    }).collect_view()}</tbody></table>
                }.into_any()
            })}
        </section>
    }
}

/// What a benchmark asks of submitted cells beyond completeness.
fn policy_text(p: &Value) -> String {
    let mut parts = Vec::new();
    if p["require_trusted_runner"].as_bool().unwrap_or(false) {
        parts.push("every bundle signed by a trusted runner registered to the submitter".to_string());
    }
    if let Some(n) = p["min_replicates"].as_u64() {
        parts.push(format!("at least {n} replicate(s) of every scenario × variant"));
    }
    if let Some(a) = p["agents"].as_array().filter(|a| !a.is_empty()) {
        parts.push(format!("agents {}", a.iter().filter_map(|x| x.as_str()).collect::<Vec<_>>().join(", ")));
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
        let body = json!({ "note": note.get_untracked() });
        leptos::task::spawn_local(async move {
            let body = if what == "withdraw" { json!({}) } else { body };
            match api::post(&format!("/submissions/{id}/{what}"), &t, &body).await {
                Ok(v) => {
                    message.set(Some(Ok(format!("Submission {}.", s(&v, "status")))));
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
