//! The bundle view: everything a predicate is given about one run, as one JSON document.
//!
//! The judge builds it from a bundle directory and passes the same text to every predicate
//! module, so each module parses a bundle once. It holds the manifest, the scenario (with its
//! scope), the normalized events, both snapshots and the kept text contents. Readers must
//! ignore fields they do not know: later versions add fields, never change existing ones.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::bundle::BundleManifest;
use crate::event::Event;
use crate::scenario::Scenario;
use crate::snapshot::Snapshot;

/// Version of the view layout written by this build.
pub const VIEW_SCHEMA: u32 = 1;

/// The JSON document given to `evaluate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BundleView {
    /// [`VIEW_SCHEMA`] of the writer.
    pub view: u32,
    pub manifest: BundleManifest,
    pub scenario: Scenario,
    /// `events.jsonl`, in `seq` order (`events[i].seq == i`).
    pub events: Vec<Event>,
    pub before: Snapshot,
    pub after: Snapshot,
    /// Text contents kept by the run, by sha256 (see [`crate::bundle::files::BLOBS`]).
    #[serde(default)]
    pub blobs: BTreeMap<String, String>,
}

pub mod compact;
