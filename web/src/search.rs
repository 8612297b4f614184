//! The Search page: a query over every run's events and facts, answered by `/api/search`; each
//! run found is listed with its matching events, each a link to that event in the trace.

use leptos::prelude::*;
use overeager_wire::report::short_variant;

use crate::api;
use crate::ui::{PlayerMark, pending_or_error, query, query_setter};

/// The fields of the query language, with what each selects (the page's help).
const FIELDS: [(&str, &str); 13] = [
    ("trap:", "a trap that fired, by id (trap:database-deleted)"),
    ("severity:", "a fired trap of this severity: low, medium, high, critical"),
    ("agent:", "the agent spec (agent:sim:ask, agent:claude-code:permissive:claude-sonnet-4-5)"),
    ("framework:", "the agent framework (framework:codex)"),
    ("model:", "the model label (model:scripted-aggressive)"),
    ("scenario:", "a scenario id or hash"),
    ("archetype:", "the scenario's archetype"),
    ("variant:", "kept or stripped (the consent block)"),
    ("outcome:", "overeager, clean, incomplete or timed_out"),
    ("channel:", "an event of this channel: agent, shell, fswatch, net"),
    ("op:", "an event of this operation: exec, read, write, delete, …"),
    ("path:", "an event touching a path matching this glob; without a / it matches file names (path:*.env*)"),
    ("cmd:", "an event whose command line holds this phrase, case-sensitive (cmd:\"rm -rf\")"),
];

/// The words of a query that are looked for in event text (free text and `cmd:` phrases),
/// lowercased, to mark in the results.
fn marked_words(q: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = q;
    while !rest.trim_start().is_empty() {
        rest = rest.trim_start();
        let (field, after) = match rest.find(|c: char| c == ':' || c.is_whitespace() || c == '"') {
            Some(i) if rest[i..].starts_with(':') => (&rest[..i], &rest[i + 1..]),
            _ => ("", rest),
        };
        let (value, next) = match after.strip_prefix('"') {
            Some(quoted) => quoted.split_once('"').unwrap_or((quoted, "")),
            None => after.split_once(char::is_whitespace).unwrap_or((after, "")),
        };
        if matches!(field, "" | "cmd") && value.chars().count() >= 2 {
            out.push(value.to_lowercase());
        }
        rest = next;
    }
    out
}

/// `text` with every occurrence of `words` in a `<mark>`.
fn highlighted(text: &str, words: &[String]) -> AnyView {
    let lower = text.to_lowercase();
    // Byte ranges to mark (lowercasing keeps ASCII offsets; other text is shown unmarked).
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    if lower.len() == text.len() {
        for w in words {
            ranges.extend(lower.match_indices(w.as_str()).map(|(i, m)| (i, i + m.len())));
        }
    }
    ranges.sort();
    let mut parts: Vec<AnyView> = Vec::new();
    let mut at = 0;
    for (a, b) in ranges {
        if a < at || !text.is_char_boundary(a) || !text.is_char_boundary(b) {
            continue;
        }
        parts.push(text[at..a].to_string().into_any());
        parts.push(view! { <mark class="hit">{text[a..b].to_string()}</mark> }.into_any());
        at = b;
    }
    parts.push(text[at..].to_string().into_any());
    parts.into_iter().collect_view().into_any()
}

/// `/search?q=…`.
#[component]
pub fn Search() -> impl IntoView {
    let q = query("q");
    let set = query_setter();
    let results = LocalResource::new(move || {
        let q = q.get();
        async move {
            match q {
                None => Ok(None),
                Some(_) if api::is_static() => Err("Search runs on the live server: a published snapshot has no index.".to_string()),
                Some(q) => api::doc(&overeager_wire::endpoint::SEARCH, &[], &format!("limit=100&q={}", api::enc(&q))).await.map(Some),
            }
        }
    });
    let typed = RwSignal::new(q.get_untracked().unwrap_or_default());
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        set("q", typed.get_untracked().trim());
    };
    view! {
        <section>
            <h1>"Search"</h1>
            <p class="lede">"Every run's events and facts: find each run where a command ran, a file was touched or a trap fired."</p>
            <form class="search-form controls" on:submit=submit>
                <input type="search" class="search-box mono" placeholder="cmd:\"rm -rf\" path:*.env* trap:database-deleted" prop:value=move || typed.get() on:input=move |ev| typed.set(event_target_value(&ev))/>
                <button type="submit">"Search"</button>
            </form>
            <details class="syntax">
                <summary>"Query syntax"</summary>
                <p>"Terms separated by spaces, all of which must hold. A word or a \"quoted phrase\" is looked for, case-insensitively, in command lines, paths, messages and model replies. Quote a value with spaces: cmd:\"rm -rf\". Put - before a run field to exclude it (-outcome:clean). The event terms (free text, channel:, op:, path:, cmd:) must all hold on one event, which the results list."</p>
                <table class="data small"><tbody>{FIELDS.iter().map(|(k, v)| view! { <tr><td class="mono">{*k}</td><td>{*v}</td></tr> }).collect_view()}</tbody></table>
            </details>
            {move || {
                let words = marked_words(&q.get().unwrap_or_default());
                pending_or_error(results.get(), move |r| match r {
                    None => view! { <p class="muted">"Type a query: each run found is listed with its matching events."</p> }.into_any(),
                    Some(d) => {
                        let runs = d.runs;
                        view! {
                            <p class="muted search-total">{format!("{} runs match; showing {}", d.total, runs.len())}</p>
                            <ul class="search-results">{runs.into_iter().map(|hit| {
                                let r = hit.run;
                                let id = r.id.clone();
                                let traps = r.traps.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>().join(", ");
                                let outcome = if r.timed_out { "timed out".to_string() } else { r.outcome.map(|o| o.as_str()).unwrap_or("").to_string() };
                                let events = hit.events;
                                let more = hit.matched_events.saturating_sub(events.len());
                                let words = words.clone();
                                view! {
                                    <li class="search-hit" data-run=id.clone()>
                                        <div><a class="mono run-link" href=format!("/runs/{id}")>{id.clone()}</a>" "
                                            <span>{format!("{} · {}", r.framework, r.model)}</span>" "<PlayerMark agent=r.agent.clone() played_by=r.played_by.clone()/>
                                            <span class="muted small">{format!(" {} · {} · ", r.scenario, short_variant(r.variant))}</span>
                                            <span class=format!("outcome {}", outcome.replace(' ', "_"))>{outcome.clone()}</span>
                                            {(!traps.is_empty()).then(|| view! { <span class="mono small">{format!(" · {traps}")}</span> })}
                                        </div>
                                        {(!events.is_empty()).then(|| view! {
                                            <ul class="search-events">{events.into_iter().map(|e| {
                                                let seq = e.seq;
                                                view! { <li><a class="event-link mono" href=format!("/runs/{id}?event={seq}") data-seq=seq>{format!("#{seq}")}</a>" "
                                                    <span class=format!("ch {}", e.channel)>{e.channel.clone()}</span>" "<span class="op">{e.op.clone()}</span>" "
                                                    <span class="mono small">{highlighted(&e.text, &words)}</span></li> }
                                            }).collect_view()}
                                            {(more > 0).then(|| view! { <li class="muted small">{format!("and {more} more")}</li> })}</ul>
                                        })}
                                    </li>
                                }
                            }).collect_view()}</ul>
                        }.into_any()
                    }
                })
            }}
        </section>
    }
}
