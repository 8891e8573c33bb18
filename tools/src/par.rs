//! Independent simulations spread over the machine's processors: each job is a run that is
//! deterministic for its own inputs, so spreading them changes the wall time only.

use std::sync::atomic::{AtomicUsize, Ordering};

/// `f` over every job on up to `threads` threads (at least one), the results in the jobs'
/// order whatever order they ran in. A panic in `f` is the caller's, raised again here.
pub fn map<T: Sync, R: Send>(jobs: &[T], threads: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let workers = threads.clamp(1, jobs.len().max(1));
    let mut done: Vec<(usize, R)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(job) = jobs.get(i) else {
                            return mine;
                        };
                        mine.push((i, f(job)));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// The processors this machine offers (one when it cannot tell).
pub fn processors() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

#[cfg(test)]
mod tests {
    #[test]
    fn results_come_back_in_the_jobs_order_on_any_number_of_threads() {
        let jobs: Vec<u64> = (0..100).collect();
        for threads in [0, 1, 2, 7, 500] {
            let out = super::map(&jobs, threads, |x| x * x);
            assert_eq!(
                out,
                jobs.iter().map(|x| x * x).collect::<Vec<_>>(),
                "{threads}"
            );
        }
        assert!(super::map(&[] as &[u64], 4, |x| *x).is_empty());
    }
}
