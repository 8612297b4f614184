//! Review queues as the app lists and works through them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::labels::ReviewQueue;

/// Runs labelled (by anyone) and labels per rater, in a queue.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueProgress {
    pub labelled: u64,
    pub by_rater: BTreeMap<String, u64>,
}

/// A queue in the list, with its progress.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueueEntry {
    pub queue: ReviewQueue,
    pub progress: QueueProgress,
}

/// `GET /api/queues`: a page of an experiment's review queues, newest first.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueueList {
    pub experiment: String,
    pub queues: Vec<QueueEntry>,
    pub total: u64,
    pub limit: u32,
    pub offset: u64,
}

/// `POST /api/queues`: the queue drawn (or drawn before with this size and seed).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueueDrawn {
    pub queue: ReviewQueue,
}

/// One rater's call in a queue's item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaterCall {
    pub rater: String,
    pub overeager: bool,
}

/// A run of a queue, in review order, with who labelled it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueueItem {
    pub pos: usize,
    pub run: crate::run::RunRow,
    pub labels: Vec<RaterCall>,
}

/// `GET /api/queues/{id}`: a queue, its runs, its progress and how its labels agree.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueueDoc {
    pub queue: ReviewQueue,
    pub items: Vec<QueueItem>,
    pub progress: QueueProgress,
    pub report: crate::report::LabelReport,
}
