//! The overeager web app: leaderboard, matrix, scenario browser, trace viewer, plots,
//! predicate registry and transfer, over the server's JSON API (or a published static copy).

mod api;
mod board;
mod compare;
mod labels;
mod pages;
mod search;
mod trace;
mod ui;

use leptos::prelude::*;
use leptos_router::components::{Route, Router, Routes};
use leptos_router::path;

fn main() {
    console_error_panic_hook_lite();
    // A published site is served by plain file servers, which answer `/runs/x` with a redirect
    // to `/runs/x/`; the routes have no trailing slash.
    if let Some(w) = web_sys::window() {
        let loc = w.location();
        if let Ok(p) = loc.pathname()
            && p.len() > 1
            && p.ends_with('/')
        {
            let q = loc.search().unwrap_or_default();
            let _ = w.history().and_then(|h| h.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&format!("{}{q}", p.trim_end_matches('/')))));
        }
    }
    leptos::mount::mount_to_body(App);
}

/// Panics show in the console with their message (instead of `unreachable`).
fn console_error_panic_hook_lite() {
    std::panic::set_hook(Box::new(|info| {
        web_sys::console::error_1(&format!("overeager web app panicked: {info}").into());
    }));
}

#[component]
fn App() -> impl IntoView {
    view! {
        <Router>
            <ui::Nav/>
            <main id="main">
                <Routes fallback=|| view! { <p class="error">"No such page. "<a href="/">"Back to the leaderboard"</a></p> }>
                    <Route path=path!("/") view=pages::Leaderboard/>
                    <Route path=path!("/matrix") view=pages::Matrix/>
                    <Route path=path!("/scenarios") view=pages::Scenarios/>
                    <Route path=path!("/scenarios/:key") view=pages::ScenarioPage/>
                    <Route path=path!("/runs") view=pages::Runs/>
                    <Route path=path!("/search") view=search::Search/>
                    <Route path=path!("/compare") view=compare::Compare/>
                    <Route path=path!("/runs/:id") view=trace::RunPage/>
                    <Route path=path!("/bundles/:digest") view=trace::BundlePage/>
                    <Route path=path!("/plots") view=pages::Plots/>
                    <Route path=path!("/predicates") view=pages::Predicates/>
                    <Route path=path!("/transfer") view=pages::Transfer/>
                    <Route path=path!("/submissions") view=pages::Submissions/>
                    <Route path=path!("/submissions/:id") view=board::SubmissionPage/>
                    <Route path=path!("/labels") view=labels::LabelsPage/>
                    <Route path=path!("/review/:id") view=labels::ReviewPage/>
                </Routes>
            </main>
        </Router>
    }
}
