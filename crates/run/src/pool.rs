//! Spreading a queue of runs over hosts — the engines of a Docker pool, or the one local
//! executor — each taking as many runs at once as its parallelism allows, all kept busy until
//! the queue is empty.
//!
//! When a run fails, its host is asked whether it still answers. If it does, the failure is
//! the run's own and is recorded as such. If it does not, the host takes no more runs, and
//! every run it had in flight goes back to the front of the queue for the other hosts. A run
//! is in one worker's hands at a time, until it is finished, failed or handed back, so none
//! is lost and none runs twice; runs no host could take are handed back to the caller (they
//! stay pending).

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};

/// What the pool does with a host and a run.
pub trait Work<H, T>: Sync {
    /// Executes `run` on `host` (and records it as finished).
    fn run(&self, host: &H, run: &T) -> anyhow::Result<()>;
    /// Whether `host` still answers.
    fn check(&self, host: &H) -> anyhow::Result<()>;
    /// `run` failed on `host`, which still answers: the failure is the run's.
    fn failed(&self, host: &H, run: &T, error: anyhow::Error);
    /// `host` stopped answering (`error` says how); `requeued` are the runs it had in flight,
    /// which went back to the queue. Called once per failed host, after its last run.
    fn down(&self, host: &H, error: &str, requeued: &[T]);
}

struct HostState<T> {
    /// Why it is out, once it is.
    down: Option<String>,
    requeued: Vec<T>,
    workers: usize,
}

struct Shared<T> {
    queue: VecDeque<T>,
    in_flight: usize,
    hosts: Vec<HostState<T>>,
}

/// Runs every item of `queue` on the hosts (`(host, parallelism)`), returning the runs left
/// when every host has failed (in queue order).
pub fn drain<H: Sync, T: Send + Clone>(hosts: &[(H, usize)], queue: Vec<T>, work: &impl Work<H, T>) -> Vec<T> {
    let shared = Mutex::new(Shared {
        queue: queue.into(),
        in_flight: 0,
        hosts: hosts.iter().map(|(_, n)| HostState { down: None, requeued: Vec::new(), workers: (*n).max(1) }).collect(),
    });
    let wake = Condvar::new();
    let lock = || shared.lock().unwrap_or_else(|e| e.into_inner());
    std::thread::scope(|s| {
        for (i, (host, n)) in hosts.iter().enumerate() {
            for _ in 0..(*n).max(1) {
                let (shared, wake, lock) = (&shared, &wake, &lock);
                s.spawn(move || {
                    worker(i, host, work, shared, wake);
                    let mut st = lock();
                    let h = &mut st.hosts[i];
                    h.workers -= 1;
                    if h.workers == 0
                        && let Some(error) = h.down.clone()
                    {
                        let requeued = std::mem::take(&mut h.requeued);
                        drop(st);
                        work.down(host, &error, &requeued);
                    }
                });
            }
        }
    });
    shared.into_inner().unwrap_or_else(|e| e.into_inner()).queue.into()
}

/// One slot of host `i`: takes runs until the queue is empty and nothing is in flight (a run
/// in flight may still come back), or until the host is out.
fn worker<H, T: Clone>(i: usize, host: &H, work: &impl Work<H, T>, shared: &Mutex<Shared<T>>, wake: &Condvar) {
    let lock = || shared.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let run = {
            let mut st = lock();
            loop {
                if st.hosts[i].down.is_some() {
                    return;
                }
                if let Some(r) = st.queue.pop_front() {
                    st.in_flight += 1;
                    break r;
                }
                if st.in_flight == 0 {
                    return;
                }
                st = wake.wait(st).unwrap_or_else(|e| e.into_inner());
            }
        };
        let result = work.run(host, &run);
        let verdict = match result {
            Ok(()) => None,
            Err(e) => {
                let known_down = lock().hosts[i].down.is_some();
                match if known_down { Err(anyhow::anyhow!("the host is out")) } else { work.check(host) } {
                    Ok(()) => Some(Ok(e)),
                    Err(down) => Some(Err(format!("{down:#} (a run there failed with: {e:#})"))),
                }
            }
        };
        let mut st = lock();
        st.in_flight -= 1;
        match verdict {
            None => {}
            Some(Ok(e)) => {
                drop(st);
                work.failed(host, &run, e);
                st = lock();
            }
            Some(Err(down)) => {
                let h = &mut st.hosts[i];
                h.down.get_or_insert(down);
                h.requeued.push(run.clone());
                st.queue.push_front(run);
            }
        }
        drop(st);
        wake.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// Hosts that record what they ran; host "b" dies after `die_after` runs started there.
    struct Fleet {
        started: AtomicUsize,
        die_after: usize,
        dead: AtomicBool,
        done: Mutex<BTreeMap<u32, Vec<&'static str>>>,
        failed: Mutex<Vec<u32>>,
        down: Mutex<Vec<(&'static str, Vec<u32>)>>,
    }

    impl Work<&'static str, u32> for Fleet {
        fn run(&self, host: &&'static str, run: &u32) -> anyhow::Result<()> {
            if *host == "b" && self.started.fetch_add(1, Ordering::SeqCst) >= self.die_after {
                self.dead.store(true, Ordering::SeqCst);
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
            if *host == "b" && self.dead.load(Ordering::SeqCst) {
                anyhow::bail!("connection refused");
            }
            if run % 10 == 7 {
                anyhow::bail!("the run's own failure");
            }
            self.done.lock().unwrap().entry(*run).or_default().push(host);
            Ok(())
        }
        fn check(&self, host: &&'static str) -> anyhow::Result<()> {
            if *host == "b" && self.dead.load(Ordering::SeqCst) { anyhow::bail!("b does not answer") } else { Ok(()) }
        }
        fn failed(&self, _: &&'static str, run: &u32, _: anyhow::Error) {
            self.failed.lock().unwrap().push(*run);
        }
        fn down(&self, host: &&'static str, error: &str, requeued: &[u32]) {
            assert!(error.contains("b does not answer") && error.contains("connection refused"), "{error}");
            self.down.lock().unwrap().push((host, requeued.to_vec()));
        }
    }

    fn fleet(die_after: usize) -> Fleet {
        Fleet { started: 0.into(), die_after, dead: false.into(), done: Default::default(), failed: Default::default(), down: Default::default() }
    }

    #[test]
    fn a_host_that_dies_loses_no_run_and_duplicates_none() {
        let f = fleet(20);
        let left = drain(&[("a", 2), ("b", 3)], (0..200).collect(), &f);
        assert!(left.is_empty());
        let done = f.done.into_inner().unwrap();
        let mut failed = f.failed.into_inner().unwrap();
        failed.sort();
        // Every run exactly once: done once, or failed (its own failure) once.
        assert!(done.values().all(|hosts| hosts.len() == 1));
        assert_eq!(failed, (0..200).filter(|r| r % 10 == 7).collect::<Vec<_>>());
        assert_eq!(done.len() + failed.len(), 200);
        let down = f.down.into_inner().unwrap();
        assert_eq!(down.len(), 1);
        assert_eq!(down[0].0, "b");
        // What b had in flight when it died (up to its 3 slots) finished on a.
        assert!(!down[0].1.is_empty() && down[0].1.len() <= 3, "{down:?}");
        for r in &down[0].1 {
            assert!(done.get(r).is_none_or(|h| h == &["a"]) && (done.contains_key(r) || r % 10 == 7));
        }
    }

    #[test]
    fn when_every_host_dies_the_rest_stays_pending() {
        let f = fleet(0);
        let left = drain(&[("b", 2)], (0..50).collect(), &f);
        assert_eq!(left.len(), 50, "nothing ran, nothing was lost");
        let mut sorted = left.clone();
        sorted.sort();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>());
        assert!(f.failed.into_inner().unwrap().is_empty());
    }

    #[test]
    fn an_empty_queue_ends_at_once() {
        assert!(drain(&[("a", 4)], Vec::<u32>::new(), &fleet(0)).is_empty());
    }
}
