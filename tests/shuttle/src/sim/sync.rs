//! `sim::sync` for the threaded host under shuttle: shuttle's Mutex, Condvar, threads and
//! thread-locals, and a virtual clock that only moves when the timer thread waits.
//!
//! A timed wait is modelled as: the lock is released, any other thread may run (shuttle picks),
//! then the clock reaches the deadline and the lock is taken again, a timeout. That is one of
//! the real wait's behaviours (a timeout racing a notification; the host re-checks its state
//! either way), and it lets a checker put a timer expiry at any point of another thread's work.
//! A deadline further than [`MAX_JUMP_US`] ahead is waited for as an untimed wait: the tests set
//! the health poll far out, so the periodic poll cannot keep the clock running for ever while
//! every bounded deadline (quiesce, query, hardware poll) can still fire.

use std::sync::atomic::{AtomicU64, Ordering};

pub use shuttle::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
pub use shuttle::thread;
pub use shuttle::thread_local;

use crate::time::Instant;

/// The longest a single timed wait moves the clock.
pub const MAX_JUMP_US: u64 = 60_000_000;

/// Virtual bus time, in microseconds.
#[derive(Debug)]
pub struct Clock {
    now_us: AtomicU64,
}

impl Clock {
    pub fn start() -> Self {
        Clock {
            now_us: AtomicU64::new(0),
        }
    }

    pub fn now(&self) -> Instant {
        Instant::from_us(self.now_us.load(Ordering::SeqCst))
    }

    /// `mutex` is the one `guard` locks.
    pub fn wait_until<'a, T>(
        &self,
        cv: &Condvar,
        mutex: &'a Mutex<T>,
        guard: MutexGuard<'a, T>,
        at: Instant,
    ) -> MutexGuard<'a, T> {
        let now = self.now_us.load(Ordering::SeqCst);
        if at.as_us().saturating_sub(now) > MAX_JUMP_US {
            return cv.wait(guard).unwrap_or_else(PoisonError::into_inner);
        }
        drop(guard);
        thread::yield_now();
        self.now_us.fetch_max(at.as_us(), Ordering::SeqCst);
        mutex.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
