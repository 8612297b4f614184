//! One computation per key at a time. A cold page (a report, a trace) asked for by many
//! requests at once is computed by the first of them; the others wait for that computation and
//! share its answer, so sixteen waiting requests cost one computation, not sixteen.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

use crate::ApiError;

/// Computations under way, by key.
pub(crate) struct Flights<T> {
    running: Mutex<HashMap<String, Arc<OnceCell<Result<T, ApiError>>>>>,
}

impl<T> Default for Flights<T> {
    fn default() -> Self {
        Flights { running: Mutex::new(HashMap::new()) }
    }
}

impl<T: Clone> Flights<T> {
    /// `compute`'s answer for `key`, computed once for every caller that arrives while it runs.
    /// A computation whose caller goes away is taken over by one of those still waiting.
    /// Once it is done the key is free again: what outlives it is the caller's cache.
    pub(crate) async fn run<F, Fut>(&self, key: &str, compute: F) -> Result<T, ApiError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, ApiError>>,
    {
        let cell = self.running.lock().unwrap_or_else(|p| p.into_inner()).entry(key.to_string()).or_default().clone();
        let answer = cell.get_or_init(compute).await.clone();
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if running.get(key).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
            running.remove(key);
        }
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sixteen_waiting_callers_share_one_computation() {
        let flights = Arc::new(Flights::<u64>::default());
        let computed = Arc::new(AtomicUsize::new(0));
        let callers: Vec<_> = (0..16)
            .map(|_| {
                let (flights, computed) = (flights.clone(), computed.clone());
                tokio::spawn(async move {
                    flights
                        .run("board", || async {
                            computed.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(200)).await;
                            Ok(42)
                        })
                        .await
                })
            })
            .collect();
        for c in callers {
            assert_eq!(c.await.unwrap().unwrap(), 42);
        }
        assert_eq!(computed.load(Ordering::SeqCst), 1);
        // Done, the key is free: a later caller computes again (its cache answers before this).
        assert_eq!(flights.run("board", || async { Ok(7) }).await.unwrap(), 7);
        assert!(flights.running.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_caller_that_leaves_hands_the_computation_to_one_still_waiting() {
        let flights = Arc::new(Flights::<u64>::default());
        let f2 = flights.clone();
        let first = tokio::spawn(async move { f2.run("k", || async { std::future::pending::<Result<u64, ApiError>>().await }).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        first.abort();
        assert_eq!(flights.run("k", || async { Ok(3) }).await.unwrap(), 3);
    }
}
