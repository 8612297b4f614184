//! `overeager publish`: the leaderboard, scenarios, runs and traces as a static site. The web
//! app is copied as built; each API document it reads is written as a file at the API's path
//! plus `.json` (`api/experiments/<id>/report.json`), and every page a link can point at gets
//! its own `index.html`, so deep links work from any file server without rewrite rules.

use overeager_wire::endpoint as ep;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, Result, bail};

use super::{read, trace};
use overeager_bundle::files::{check_out_free, staging_dir};
use overeager_store::Store;
use overeager_store::runs::RunFilter;
use overeager_wire::board::SubmissionList;
use overeager_wire::predicates::{Registry, Upload};
use overeager_wire::run::{RunDoc, RunPage, Uploads};

/// What `publish` wrote.
#[derive(Debug, serde::Serialize)]
pub struct Published {
    pub experiments: usize,
    pub scenarios: usize,
    pub runs: usize,
    pub traces: usize,
    /// Runs whose trace was left out (over `max_traces`).
    pub traces_left_out: usize,
    pub files: usize,
}

/// The marker the web app looks for to read files instead of the live API.
const STATIC_META: &str = r#"<meta name="overeager-static" content="true">"#;

struct Site<'a> {
    root: &'a Path,
    index: String,
    files: usize,
}

impl Site<'_> {
    fn write(&mut self, rel: &str, bytes: &[u8]) -> Result<()> {
        let p = self.root.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&p, bytes).with_context(|| format!("writing {}", p.display()))?;
        self.files += 1;
        Ok(())
    }
    /// The document a live server answers at `path` (an endpoint's, from
    /// [`overeager_wire::endpoint`]), as the file the web app reads in its place.
    fn json(&mut self, path: &str, v: &impl serde::Serialize) -> Result<()> {
        self.write(&format!("{}.json", path.trim_start_matches('/')), &serde_json::to_vec(v)?)
    }
    /// A page at `route` (e.g. `runs/<id>`), so a deep link finds the app.
    fn page(&mut self, route: &str) -> Result<()> {
        let index = self.index.clone();
        self.write(&format!("{route}/index.html"), index.as_bytes())
    }
}

/// Writes the static site into `out` (which must not exist, or be empty); it appears complete
/// or not at all.
pub fn publish(db: &Path, dist: &Path, out: &Path, max_traces: usize) -> Result<Published> {
    check_out_free(out)?;
    let index_path = dist.join("index.html");
    let index = std::fs::read_to_string(&index_path).with_context(|| format!("reading {}: build the web app first (./scripts/build.sh)", index_path.display()))?;
    let Some(head) = index.find("<head>") else { bail!("{}: no <head> element to mark as static", index_path.display()) };
    let index = format!("{}{STATIC_META}{}", &index[..head + 6], &index[head + 6..]);
    let store = Store::open_existing(db)?;
    let staging = staging_dir(out)?;
    let mut site = Site { root: staging.path(), index, files: 0 };
    copy_dir(dist, staging.path(), &mut site.files)?;
    site.write("index.html", site.index.clone().as_bytes())?;
    for route in ["matrix", "scenarios", "runs", "plots", "predicates", "transfer", "submissions"] {
        site.page(route)?;
    }

    // Experiments, reports, figures, run lists.
    // Newest first, as listed: the traces of the newest experiment come first under --max-traces.
    let exps = read::newest_first(&store)?;
    site.json(ep::EXPERIMENTS.path, &read::experiment_list(&store, &exps)?)?;
    let mut runs_total = 0;
    let mut traced = 0;
    let mut left_out = 0;
    let mut digests = BTreeSet::new();
    for e in &exps {
        let mut report = overeager_report::build(&e.id, &e.title, &store.records(&e.id)?, &store.labelled(Some(&e.id))?);
        report.submitted = overeager_report::submitted_cells(store.approved_cells(&e.id)?);
        site.json(&ep::REPORT.url(&[&e.id]), &report)?;
        for (name, svg) in read::render_plots(&report)? {
            site.write(ep::PLOT.url(&[&e.id, &format!("{name}.svg")]).trim_start_matches('/'), &svg)?;
        }
        let runs = store.all_run_rows(&RunFilter { experiment: Some(e.id.clone()), ..RunFilter::default() })?;
        let page = RunPage { total: runs.len() as u64, next: None, runs };
        site.json(&ep::PUBLISHED_RUNS.url(&[&e.id]), &page)?;
        runs_total += page.runs.len();
        let objects = store.objects_dir();
        for r in &page.runs {
            let verdict = store.run_verdict(&r.id)?;
            site.json(&ep::RUN.url(&[&r.id]), &RunDoc { run: r.clone(), verdict: verdict.clone(), partner: None, other_cells: Vec::new(), labels: Vec::new() })?;
            site.page(&format!("runs/{}", r.id))?;
            let Some(d) = &r.bundle else { continue };
            if digests.contains(d) {
                continue;
            }
            if traced >= max_traces {
                left_out += 1;
                continue;
            }
            let t = trace::build(d, &overeager_store::object_path_in(&objects, d), Some(r.clone()), None, verdict)?;
            write_trace(&mut site, d, &t)?;
            write_exports(&mut site, &store, &r.id)?;
            digests.insert(d.clone());
            traced += 1;
        }
    }
    // Bundles uploaded on their own, and their traces.
    let uploads = Uploads { uploads: store.uploads(None)? };
    site.json(ep::UPLOADS.path, &uploads)?;
    for s in &uploads.uploads {
        if digests.insert(s.bundle.clone()) {
            let path = overeager_store::object_path_in(&store.objects_dir(), &s.bundle);
            let t = trace::build(&s.bundle, &path, None, Some(s.clone()), Some(s.verdict.clone()))?;
            write_trace(&mut site, &s.bundle, &t)?;
            traced += 1;
        }
    }

    // Approved leaderboard submissions, their pages and traces (drafts and rejected ones are
    // not public).
    let approved = super::board::submission_list(&store, true)?;
    let approved = SubmissionList { submissions: approved, next: None };
    site.json(ep::SUBMISSIONS.path, &approved)?;
    for row in &approved.submissions {
        let id = row.id.as_str();
        let Some(doc) = super::board::submission_doc(&store, id, None, (0, usize::MAX))? else { continue };
        site.json(&ep::SUBMISSION.url(&[&id]), &doc)?;
        site.page(&format!("submissions/{id}"))?;
        for b in &doc.runs {
            let Some(d) = b.bundle.as_deref().filter(|_| b.trace.is_some()) else { continue };
            if digests.insert(d.to_string()) {
                let Some(upload) = store.cell_bundle_as_upload(d)? else { continue };
                let path = overeager_store::object_path_in(&store.objects_dir(), d);
                let t = trace::build(d, &path, None, Some(upload.clone()), Some(upload.verdict.clone()))?;
                write_trace(&mut site, d, &t)?;
                traced += 1;
            }
        }
    }

    // Scenarios.
    let rows = store.scenario_rows()?;
    site.json(ep::SCENARIOS.path, &read::scenario_list(&rows, &BTreeMap::new()).map_err(anyhow::Error::msg)?)?;
    for r in &rows {
        if let Some(d) = store.scenario_detail(&r.hash)? {
            site.json(&ep::SCENARIO.url(&[&r.hash]), &read::scenario_doc(d))?;
            site.page(&format!("scenarios/{}", r.hash))?;
        }
    }
    // Predicates (the built-in library as the server would list it) and transfer.
    let judge = overeager_judge::Judge::new(overeager_judge::JudgeOptions { limits: Default::default(), jobs: 1, cache: overeager_judge::engine::default_cache_dir(), trust: Default::default() })?;
    // A published site has no trust store: each upload stands as it was decided.
    let uploads = store.predicate_rows()?.into_iter().map(|row| Upload { decided_status: row.status.clone(), row, revoked_reason: None }).collect();
    site.json(ep::PREDICATES.path, &Registry { loaded: read::loaded_modules(&judge), uploads })?;
    site.json(ep::TRANSFER.path, &read::transfer_doc(&store.transfer_cases()?, &store.transfer_runs()?))?;
    let files = site.files;
    overeager_bundle::files::publish(staging, out)?;
    Ok(Published { experiments: exps.len(), scenarios: rows.len(), runs: runs_total, traces: traced, traces_left_out: left_out, files })
}

/// A run's ATIF trajectory and Inspect log, where the trace viewer's links find them.
fn write_exports(site: &mut Site<'_>, store: &Store, run: &str) -> Result<()> {
    use overeager_report::export;
    use overeager_report::formats::{self, Format};
    let Some(r) = export::run_from_store(store, run)? else { return Ok(()) };
    for (format, file) in [(Format::Atif, "atif.json"), (Format::Inspect, "inspect.eval")] {
        let (bytes, _, _) = formats::single_file(&r, format)?;
        site.write(&format!("{}/{file}", ep::RUN_EXPORT.url(&[run]).trim_start_matches('/')), &bytes)?;
    }
    Ok(())
}

fn write_trace(site: &mut Site<'_>, digest: &str, t: &trace::Trace) -> Result<()> {
    site.write(&format!("{}.json", ep::BUNDLE.url(&[digest]).trim_start_matches('/')), &t.summary)?;
    for (k, c) in t.chunks.iter().enumerate() {
        site.write(&format!("{}.json", ep::BUNDLE_EVENTS.url(&[digest, &k.to_string()]).trim_start_matches('/')), c)?;
    }
    for (name, body) in &t.raw {
        site.write(&format!("{}.txt", ep::BUNDLE_RAW.url(&[digest, name]).trim_start_matches('/')), body)?;
    }
    site.page(&format!("bundles/{digest}"))
}

fn copy_dir(from: &Path, to: &Path, files: &mut usize) -> Result<()> {
    for entry in walkdir::WalkDir::new(from).min_depth(1) {
        let entry = entry?;
        let rel = entry.path().strip_prefix(from).expect("below its root");
        let dest = to.join(rel);
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&dest)?;
        } else {
            std::fs::copy(entry.path(), &dest).with_context(|| format!("copying {}", entry.path().display()))?;
            *files += 1;
        }
    }
    Ok(())
}
