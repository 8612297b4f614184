//! The server's limits: sizes, concurrency, waits and timeouts, in one place, so what a client
//! may send and how long anything may take can be read at a glance.

use std::time::Duration;

use overeager_wire::endpoint;

/// Largest packed bundle a client may submit.
pub const MAX_BUNDLE_BYTES: usize = 64 << 20;
/// Bundles received, checked and judged at once; more get 503 with `Retry-After`.
pub const MAX_CONCURRENT_UPLOADS: usize = 2;
/// Largest declaration of a cell's runs (`POST /api/submissions`).
pub const MAX_DECLARATION_BYTES: usize = 32 << 20;
/// Largest predicate component a client may upload.
pub const MAX_MODULE_BYTES: usize = 8 << 20;
/// Largest signature file.
pub const MAX_SIGNATURE_BYTES: usize = 16 << 10;
/// Stored bundles an uploaded predicate is self-tested on.
pub(crate) const SELF_TEST_BUNDLES: usize = 12;
/// Memory the trace viewer's cache of prepared bundles may hold.
pub(crate) const TRACE_CACHE_BYTES: usize = 256 << 20;
/// Read connections kept open between requests.
pub(crate) const MAX_IDLE_READERS: usize = 8;
/// How long a cached report is served before the store is asked whether it changed.
pub const REPORT_RECHECK: Duration = Duration::from_millis(500);
/// List endpoints whose answers are kept while the store is unchanged (see
/// [`crate::state::Bodies`]).
pub(crate) const CACHED_LISTS: [&str; 3] = [endpoint::RUNS.path, endpoint::SCENARIOS.path, endpoint::EXPERIMENTS.path];
/// Most answers, and most bytes, [`crate::state::Bodies`] keeps; and the largest answer it keeps.
pub(crate) const BODIES_MAX_ENTRIES: usize = 512;
pub(crate) const BODIES_MAX_BYTES: usize = 64 << 20;
pub(crate) const BODY_MAX_BYTES: usize = 8 << 20;

/// Bodies one account may be sending at once, and all accounts together.
pub const MAX_RECEIVING_PER_ACCOUNT: usize = 4;
pub const MAX_RECEIVING: usize = 64;
/// How long a received bundle waits for a judging slot before the answer is 503.
pub(crate) const JUDGE_WAIT: Duration = Duration::from_secs(120);
/// Predicate modules self-tested at once.
pub const MAX_CONCURRENT_SELF_TESTS: usize = 1;
/// Searches run at once (each may use a core until its budget): more wait for a slot up to
/// [`SEARCH_WAIT`], then get 503 with `Retry-After`, so searches never crowd out the other
/// pages' reads.
pub const MAX_CONCURRENT_SEARCHES: usize = 1;
/// How long a search waits for a slot.
pub const SEARCH_WAIT: Duration = Duration::from_millis(500);
/// The time a search may take inside the store; one that needs more is refused with advice.
/// A debug build (the tests') runs the store's code unoptimized, many times slower, and gets
/// ten times the release build's two seconds.
pub const SEARCH_BUDGET: Duration = if cfg!(debug_assertions) { Duration::from_secs(20) } else { Duration::from_secs(2) };

/// How long a client may take to send a request's headers, and how long a kept-alive
/// connection may sit idle before its next request.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request body may pause between two pieces (see [`crate::body::PACE`] for its rate and
/// deadline).
pub const BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
