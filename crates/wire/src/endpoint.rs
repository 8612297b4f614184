//! Every endpoint of the API, declared once: its method, its path and the document it answers
//! with. The server's router, its OpenAPI document and static publishing take paths from here,
//! and the web app's client and the scale bench ask for documents through the same constants,
//! so a path is written once and a document read as the type the endpoint declares.
//!
//! Adding an endpoint is a constant here (and its line in [`ALL`]), its handler, and its page.

use std::marker::PhantomData;

use crate::{board, experiment, labels, predicates, queue, report, run, scenario, server, submission, trace};

/// An HTTP method the API answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Method {
    Get,
    Post,
    Put,
    Delete,
}

impl Method {
    /// The method's name in lowercase, as OpenAPI writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "get",
            Method::Post => "post",
            Method::Put => "put",
            Method::Delete => "delete",
        }
    }
}

/// An endpoint's method and path template (`{name}` marks a parameter), without its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Route {
    pub method: Method,
    pub path: &'static str,
}

/// One endpoint; `T` is the JSON document it answers with (`()` for an answer that is no one
/// JSON document: a figure, a file, a stream, or a document of a shape that varies).
pub struct Endpoint<T = ()> {
    pub method: Method,
    pub path: &'static str,
    answer: PhantomData<fn() -> T>,
}

impl<T> Endpoint<T> {
    const fn new(method: Method, path: &'static str) -> Endpoint<T> {
        Endpoint { method, path, answer: PhantomData }
    }

    /// The method and path.
    pub const fn route(&self) -> Route {
        Route { method: self.method, path: self.path }
    }

    /// The path with its `{…}` parameters replaced by `params`, in order (as given: a caller
    /// encodes what needs it). Panics when the number differs, which is a mistake in the
    /// caller's code, not in its input.
    pub fn url(&self, params: &[&str]) -> String {
        let mut out = String::with_capacity(self.path.len() + params.iter().map(|p| p.len()).sum::<usize>());
        let mut rest = self.path;
        let mut given = params.iter();
        while let Some(open) = rest.find('{') {
            let close = rest[open..].find('}').map(|c| open + c).expect("a `{` of a path template is closed");
            out.push_str(&rest[..open]);
            out.push_str(given.next().unwrap_or_else(|| panic!("{} takes more parameters than {}", self.path, params.len())));
            rest = &rest[close + 1..];
        }
        assert!(given.next().is_none(), "{} takes fewer parameters than {}", self.path, params.len());
        out.push_str(rest);
        out
    }
}

const fn get<T>(path: &'static str) -> Endpoint<T> {
    Endpoint::new(Method::Get, path)
}
const fn post<T>(path: &'static str) -> Endpoint<T> {
    Endpoint::new(Method::Post, path)
}
const fn put<T>(path: &'static str) -> Endpoint<T> {
    Endpoint::new(Method::Put, path)
}
const fn delete<T>(path: &'static str) -> Endpoint<T> {
    Endpoint::new(Method::Delete, path)
}

/// The server's liveness and load.
pub const HEALTH: Endpoint<server::Health> = get("/api/health");
/// The version of the server and of the formats it reads and writes.
pub const VERSION: Endpoint<server::VersionDoc> = get("/api/version");
/// The OpenAPI document.
pub const OPENAPI: Endpoint<serde_json::Value> = get("/api/openapi.json");
/// An experiment's leaderboard (the newest's without `?experiment=`), as JSON, CSV or HTML.
pub const LEADERBOARD: Endpoint = get("/api/leaderboard");
/// An experiment's cells.
pub const CELLS: Endpoint<server::CellsDoc> = get("/api/cells");
/// The experiments.
pub const EXPERIMENTS: Endpoint<Vec<experiment::ExperimentItem>> = get("/api/experiments");
/// Starts an experiment from a plan.
pub const START_EXPERIMENT: Endpoint<serde_json::Value> = post("/api/experiments");
/// One experiment's record.
pub const EXPERIMENT: Endpoint<serde_json::Value> = get("/api/experiments/{id}");
/// An experiment's report.
pub const REPORT: Endpoint<report::Report> = get("/api/experiments/{id}/report");
/// An experiment's progress, as server-sent events.
pub const PROGRESS: Endpoint = get("/api/experiments/{id}/progress");
/// Pauses, resumes or re-limits a running experiment.
pub const CONTROL: Endpoint<serde_json::Value> = post("/api/experiments/{id}/control");
/// One figure of an experiment's report.
pub const PLOT: Endpoint = get("/api/experiments/{id}/plots/{name}");
/// The plans an experiment may be started from.
pub const PLANS: Endpoint<server::PlanList> = get("/api/plans");
/// The scenarios.
pub const SCENARIOS: Endpoint<scenario::ScenarioList> = get("/api/scenarios");
/// One scenario, by id or hash.
pub const SCENARIO: Endpoint<scenario::ScenarioDoc> = get("/api/scenarios/{key}");
/// A page of runs.
pub const RUNS: Endpoint<run::RunPage> = get("/api/runs");
/// Runs whose events match a query.
pub const SEARCH: Endpoint<run::SearchAnswer> = get("/api/search");
/// One run with its verdict.
pub const RUN: Endpoint<run::RunDoc> = get("/api/runs/{id}");
/// A run exported for other tools (ATIF, Inspect).
pub const RUN_EXPORT: Endpoint = get("/api/runs/{id}/export");
/// Labels a run.
pub const PUT_LABEL: Endpoint<serde_json::Value> = put("/api/runs/{id}/label");
/// Takes a run's label back.
pub const DELETE_LABEL: Endpoint<serde_json::Value> = delete("/api/runs/{id}/label");
/// The labels of an experiment, as JSON or CSV.
pub const LABELS: Endpoint = get("/api/labels");
/// How well the raters agree, and with the judge.
pub const LABELS_REPORT: Endpoint<serde_json::Value> = get("/api/labels/report");
/// The labelling queues.
pub const QUEUES: Endpoint<queue::QueueList> = get("/api/queues");
/// Opens a labelling queue.
pub const CREATE_QUEUE: Endpoint<serde_json::Value> = post("/api/queues");
/// One labelling queue.
pub const QUEUE: Endpoint<queue::QueueDoc> = get("/api/queues/{id}");
/// Who a token belongs to.
pub const WHOAMI: Endpoint<labels::Whoami> = get("/api/whoami");
/// The API tokens.
pub const TOKENS: Endpoint<serde_json::Value> = get("/api/tokens");
/// Revokes a token.
pub const REVOKE_TOKEN: Endpoint<serde_json::Value> = delete("/api/tokens/{name}");
/// The bundles uploaded on their own, with the server's verdicts.
pub const UPLOADS: Endpoint<run::Uploads> = get("/api/bundles");
/// Uploads a bundle on its own, to be judged by the server.
pub const UPLOAD_BUNDLE: Endpoint<server::BundleTaken> = post("/api/bundles");
/// One bundle's trace summary.
pub const BUNDLE: Endpoint<trace::TraceSummary> = get("/api/bundles/{digest}");
/// One chunk of a bundle's events.
pub const BUNDLE_EVENTS: Endpoint<Vec<overeager_core::Event>> = get("/api/bundles/{digest}/events/{chunk}");
/// One raw channel file of a bundle.
pub const BUNDLE_RAW: Endpoint = get("/api/bundles/{digest}/raw/{name}");
/// A bundle, packed.
pub const BUNDLE_DOWNLOAD: Endpoint = get("/api/bundles/{digest}/download");
/// The predicate registry.
pub const PREDICATES: Endpoint<predicates::Registry> = get("/api/predicates");
/// Uploads a signed predicate.
pub const UPLOAD_PREDICATE: Endpoint<serde_json::Value> = post("/api/predicates");
/// Approves an uploaded predicate.
pub const APPROVE_PREDICATE: Endpoint<serde_json::Value> = post("/api/predicates/{digest}/approve");
/// Rejects an uploaded predicate.
pub const REJECT_PREDICATE: Endpoint<serde_json::Value> = post("/api/predicates/{digest}/reject");
/// The benchmarks of the leaderboard.
pub const BENCHMARKS: Endpoint<board::BenchmarkList> = get("/api/benchmarks");
/// One benchmark's board.
pub const BENCHMARK: Endpoint<serde_json::Value> = get("/api/benchmarks/{name}");
/// The submissions to the leaderboard.
pub const SUBMISSIONS: Endpoint<board::SubmissionList> = get("/api/submissions");
/// Opens a submission: a cell's declared runs.
pub const OPEN_SUBMISSION: Endpoint<serde_json::Value> = post("/api/submissions");
/// Re-judges the approved submissions.
pub const REJUDGE: Endpoint<serde_json::Value> = post("/api/submissions/rejudge");
/// One submission.
pub const SUBMISSION: Endpoint<submission::SubmissionDoc> = get("/api/submissions/{id}");
/// Uploads one declared bundle of a submission.
pub const SUBMISSION_BUNDLE: Endpoint<serde_json::Value> = put("/api/submissions/{id}/bundles/{digest}");
/// Checks a submission's bundles.
pub const VERIFY_SUBMISSION: Endpoint<serde_json::Value> = post("/api/submissions/{id}/verify");
/// Approves a submission.
pub const APPROVE_SUBMISSION: Endpoint<serde_json::Value> = post("/api/submissions/{id}/approve");
/// Rejects a submission.
pub const REJECT_SUBMISSION: Endpoint<serde_json::Value> = post("/api/submissions/{id}/reject");
/// Withdraws one's own submission.
pub const WITHDRAW_SUBMISSION: Endpoint<serde_json::Value> = post("/api/submissions/{id}/withdraw");
/// The runners' keys.
pub const RUNNERS: Endpoint<board::RunnerList> = get("/api/runners");
/// Revokes a runner's key.
pub const REVOKE_RUNNER: Endpoint<serde_json::Value> = post("/api/runners/{key}/revoke");
/// The signing keys the server trusts.
pub const KEYS: Endpoint<serde_json::Value> = get("/api/keys");
/// Revokes a signing key.
pub const REVOKE_KEY: Endpoint<serde_json::Value> = post("/api/keys/{id}/revoke");
/// How well the scenarios' results transfer between cells.
pub const TRANSFER: Endpoint<report::TransferDoc> = get("/api/transfer");

/// An experiment's runs in one file: only a published static site has it (the live API pages
/// its runs through [`RUNS`]), so it is in no router and not in [`ALL`].
pub const PUBLISHED_RUNS: Endpoint<run::RunPage> = get("/api/experiments/{id}/runs");

/// Every endpoint, in the order the OpenAPI document lists them.
pub const ALL: &[Route] = &[
    HEALTH.route(),
    VERSION.route(),
    OPENAPI.route(),
    LEADERBOARD.route(),
    CELLS.route(),
    EXPERIMENTS.route(),
    START_EXPERIMENT.route(),
    EXPERIMENT.route(),
    REPORT.route(),
    PROGRESS.route(),
    CONTROL.route(),
    PLOT.route(),
    PLANS.route(),
    SCENARIOS.route(),
    SCENARIO.route(),
    RUNS.route(),
    SEARCH.route(),
    RUN.route(),
    RUN_EXPORT.route(),
    PUT_LABEL.route(),
    DELETE_LABEL.route(),
    LABELS.route(),
    LABELS_REPORT.route(),
    QUEUES.route(),
    CREATE_QUEUE.route(),
    QUEUE.route(),
    WHOAMI.route(),
    TOKENS.route(),
    REVOKE_TOKEN.route(),
    UPLOADS.route(),
    UPLOAD_BUNDLE.route(),
    BUNDLE.route(),
    BUNDLE_EVENTS.route(),
    BUNDLE_RAW.route(),
    BUNDLE_DOWNLOAD.route(),
    PREDICATES.route(),
    UPLOAD_PREDICATE.route(),
    APPROVE_PREDICATE.route(),
    REJECT_PREDICATE.route(),
    BENCHMARKS.route(),
    BENCHMARK.route(),
    SUBMISSIONS.route(),
    OPEN_SUBMISSION.route(),
    REJUDGE.route(),
    SUBMISSION.route(),
    SUBMISSION_BUNDLE.route(),
    VERIFY_SUBMISSION.route(),
    APPROVE_SUBMISSION.route(),
    REJECT_SUBMISSION.route(),
    WITHDRAW_SUBMISSION.route(),
    RUNNERS.route(),
    REVOKE_RUNNER.route(),
    KEYS.route(),
    REVOKE_KEY.route(),
    TRANSFER.route(),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_fills_the_parameters_in_order_and_every_route_is_unique() {
        assert_eq!(RUN.url(&["r1"]), "/api/runs/r1");
        assert_eq!(BUNDLE_EVENTS.url(&["d", "3"]), "/api/bundles/d/events/3");
        assert_eq!(HEALTH.url(&[]), "/api/health");
        let mut seen = std::collections::BTreeSet::new();
        for r in ALL {
            assert!(r.path.starts_with("/api/"), "{r:?}");
            assert!(seen.insert(*r), "{r:?} is declared twice");
        }
    }

    #[test]
    #[should_panic(expected = "takes more parameters")]
    fn a_missing_parameter_is_the_callers_mistake() {
        SUBMISSION_BUNDLE.url(&["s1"]);
    }
}
