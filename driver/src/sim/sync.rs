//! The synchronisation the threaded host uses, in one place (tokio's loom facade, in small):
//! std's here; `tests/shuttle` compiles the threaded host's own source a second time against a
//! `sim::sync` of the same shape made of shuttle's primitives and a virtual clock, so a
//! concurrency checker explores its interleavings.

pub use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
pub use std::thread;
pub use std::thread_local;

use crate::time::Instant;

/// The bus clock: microseconds since the host started.
#[derive(Debug)]
pub struct Clock {
    start: std::time::Instant,
}

impl Clock {
    pub fn start() -> Self {
        Clock {
            start: std::time::Instant::now(),
        }
    }

    pub fn now(&self) -> Instant {
        let us = self.start.elapsed().as_micros();
        Instant::from_us(u64::try_from(us).unwrap_or(u64::MAX))
    }

    /// Waits on `cv` until notified or until the clock reads `at`, whichever comes first (or
    /// spuriously: callers re-check). `mutex` is the one `guard` locks: a model of the wait
    /// that cannot time out (shuttle's) releases and retakes it instead.
    pub fn wait_until<'a, T>(
        &self,
        cv: &Condvar,
        mutex: &'a Mutex<T>,
        guard: MutexGuard<'a, T>,
        at: Instant,
    ) -> MutexGuard<'a, T> {
        let _ = mutex;
        let wait = std::time::Duration::from_micros(at.saturating_since(self.now()).as_us());
        cv.wait_timeout(guard, wait)
            .unwrap_or_else(PoisonError::into_inner)
            .0
    }
}
