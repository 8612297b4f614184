//! Experiment reports, computed from the store and kept until what they are computed from
//! changes.
//!
//! A report has three parts that change for different reasons, each kept apart:
//! - the tables of the results (cells, comparisons, and the leaderboard's bytes): linear in
//!   the runs, retired by a write to the results ([`TopicVersions::results`]);
//! - the agreement with human labels: computed only for the whole report, again when a label
//!   was written since ([`TopicVersions::labels`]); a label leaves the rest, the leaderboard's
//!   bytes and the figures as they were;
//! - the variance decomposition: seconds at ten thousand runs, a function of the runs' grouped
//!   counts only, computed on the first request that needs it (the report itself, the variance
//!   figure) and kept in the store under its input's digest, so neither a label nor a restart
//!   makes it be computed again. The leaderboard and the cells never wait for it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::body::Bytes;
use overeager_core::Variant;
use overeager_report::variance::Decomposition;
use overeager_report::{Report, VarianceInput};

use super::{ApiError, AppState, REPORT_RECHECK};

/// A report of an experiment as of one version of the results.
pub(crate) struct CachedReport {
    experiment: String,
    results: i64,
    /// The labels' version when the store was last asked.
    labels: AtomicI64,
    /// When the store's versions were last compared with these (`None`: at the next request).
    checked: Mutex<Option<Instant>>,
    /// Every table but the variance decomposition and the label agreement (both empty here).
    pub report: Arc<Report>,
    /// Cells of each variant, as the leaderboard endpoint returns them: kept, stripped.
    pub leaderboard: [Bytes; 2],
    variance: Variance,
    /// The whole report and its JSON, with the labels' version its agreement was computed at.
    full: Mutex<Option<(i64, Arc<Report>, Bytes)>>,
    /// Figures by name (they show no labels).
    pub plots: Mutex<BTreeMap<String, Bytes>>,
}

/// The variance decomposition of one set of results: its input, and the decomposition once
/// computed (the lock held while it is, so concurrent requests wait for one computation).
struct Variance {
    input: Option<VarianceInput>,
    decomposition: Mutex<Option<Option<Decomposition>>>,
}

impl CachedReport {
    fn fresh(&self) -> bool {
        self.checked.lock().unwrap_or_else(|p| p.into_inner()).is_some_and(|at| at.elapsed() < REPORT_RECHECK)
    }

    fn touch(&self) {
        *self.checked.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
    }

    /// Asks the next request to compare versions with the store (after this server wrote).
    pub(crate) fn recheck(&self) {
        *self.checked.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// The whole report, if it was made at the labels' version last seen: never waits (the
    /// lock is held for seconds while the report is made, and this runs on the async workers).
    pub(crate) fn full_if_current(&self) -> Option<(Arc<Report>, Bytes)> {
        let full = match self.full.try_lock() {
            Ok(f) => f,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        full.as_ref().filter(|f| f.0 == self.labels.load(Ordering::SeqCst)).map(|f| (f.1.clone(), f.2.clone()))
    }
}

/// Serializes the leaderboard of each variant: kept, stripped.
fn leaderboards(report: &Report) -> Result<[Bytes; 2], ApiError> {
    let board = |v: Variant| -> Result<Bytes, ApiError> {
        let mut cells: Vec<&overeager_report::Cell> = report.cells.iter().filter(|c| c.variant == v).collect();
        cells.sort_by(|a, b| a.rate.total_cmp(&b.rate).then_with(|| a.agent().cmp(&b.agent())));
        let mut submitted: Vec<&overeager_report::SubmittedCell> = report.submitted.iter().filter(|c| c.cell.variant == v).collect();
        submitted.sort_by(|a, b| a.cell.rate.total_cmp(&b.cell.rate).then_with(|| a.provenance.submission.cmp(&b.provenance.submission)));
        let body = serde_json::json!({
            "experiment": report.experiment, "title": report.title, "variant": v, "simulated": report.simulated, "played_by": report.played_by,
            "confidence": report.confidence, "cells": cells, "submitted": submitted,
        });
        Ok(Bytes::from(serde_json::to_vec(&body).map_err(ApiError::internal)?))
    };
    Ok([board(Variant::ConsentKept)?, board(Variant::ConsentStripped)?])
}

impl AppState {
    /// The cached report of an experiment if the store was checked for changes recently: the
    /// fast path, which touches neither the store nor a blocking thread.
    pub(crate) fn recent_report(&self, experiment: &str) -> Option<Arc<CachedReport>> {
        let c = self.reports.lock().unwrap_or_else(|p| p.into_inner()).get(experiment).cloned()?;
        c.fresh().then_some(c)
    }

    /// The report of an experiment without its decomposition and label agreement, recomputed
    /// when the results changed. `None`: no such experiment.
    pub(crate) fn report(&self, experiment: &str) -> Result<Option<Arc<CachedReport>>, ApiError> {
        if let Some(c) = self.recent_report(experiment) {
            return Ok(Some(c));
        }
        let now = Instant::now();
        let cached = self.reports.lock().unwrap_or_else(|p| p.into_inner()).get(experiment).cloned();
        let versions = self.topic_versions()?;
        if let Some(c) = cached.filter(|c| c.results == versions.results) {
            c.labels.store(versions.labels, Ordering::SeqCst);
            c.touch();
            return Ok(Some(c));
        }
        let computed = self.read_here(|s| {
            let Some(e) = s.experiment(experiment)? else {
                return Ok(None);
            };
            let records = s.records(experiment)?;
            let mut report = overeager_report::build_without_variance(&e.id, &e.title, &records, &[]);
            report.submitted = overeager_report::submitted_cells(s.approved_cells(&e.id)?);
            Ok(Some((report, VarianceInput::of(&records))))
        })?;
        let Some((report, input)) = computed else {
            return Ok(None);
        };
        let entry = Arc::new(CachedReport {
            experiment: experiment.to_string(),
            results: versions.results,
            labels: AtomicI64::new(versions.labels),
            checked: Mutex::new(Some(now)),
            leaderboard: leaderboards(&report)?,
            report: Arc::new(report),
            variance: Variance { input, decomposition: Mutex::new(None) },
            full: Mutex::new(None),
            plots: Mutex::new(BTreeMap::new()),
        });
        self.reports.lock().unwrap_or_else(|p| p.into_inner()).insert(experiment.to_string(), entry.clone());
        Ok(Some(entry))
    }

    /// The whole report with its variance decomposition and label agreement, and its JSON.
    /// The decomposition is taken from the store when it kept one for these results, else
    /// computed and kept; the agreement is computed again when labels were written. Blocks.
    pub(crate) fn full_report(&self, c: &CachedReport) -> Result<(Arc<Report>, Bytes), ApiError> {
        let mut full = c.full.lock().unwrap_or_else(|p| p.into_inner());
        let labels_version = c.labels.load(Ordering::SeqCst);
        if let Some(f) = full.as_ref().filter(|f| f.0 == labels_version) {
            return Ok((f.1.clone(), f.2.clone()));
        }
        let decomposition = self.decomposition(&c.variance)?;
        let labels = self.read_here(|s| s.labelled(Some(&c.experiment)))?;
        let report = Arc::new(Report { variance: decomposition, labels: overeager_report::label_agreement(&labels), ..(*c.report).clone() });
        let json = Bytes::from(serde_json::to_vec(&*report).map_err(ApiError::internal)?);
        *full = Some((labels_version, report.clone(), json.clone()));
        Ok((report, json))
    }

    fn decomposition(&self, v: &Variance) -> Result<Option<Decomposition>, ApiError> {
        let mut slot = v.decomposition.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = slot.as_ref() {
            return Ok(d.clone());
        }
        let Some(input) = &v.input else {
            *slot = Some(None);
            return Ok(None);
        };
        let digest = input.digest();
        let kept = self.read_here(|s| s.kept_decomposition(&digest))?.and_then(|json| match serde_json::from_str::<Option<Decomposition>>(&json) {
            Ok(d) => Some(d),
            Err(e) => {
                tracing::warn!("a kept variance decomposition ({digest}) does not read ({e}); computing it again");
                None
            }
        });
        let d = match kept {
            Some(d) => d,
            None => {
                let d = input.decompose();
                let json = serde_json::to_string(&d).map_err(ApiError::internal)?;
                // Keeping it only saves the next computation: a store that refuses the write
                // still gets the figures served.
                if let Err(e) = self.with_store(|s| s.keep_decomposition(&digest, &json)) {
                    tracing::warn!("keeping a variance decomposition: {e:#}");
                }
                d
            }
        };
        *slot = Some(d.clone());
        Ok(d)
    }

    /// Retires nothing, but makes the next request compare every cached report's versions
    /// with the store's (after this server's own writes, which should show at once).
    pub(crate) fn recheck_reports(&self) {
        for c in self.reports.lock().unwrap_or_else(|p| p.into_inner()).values() {
            c.recheck();
        }
    }
}
