//! The threads, locks, clock and thread-locals the threaded host is built on, as a trait
//! (tokio's loom facade, in small): [`StdThreads`] is std's; tests/shuttle implements it with
//! shuttle's primitives and a virtual clock, so that a concurrency checker explores the very
//! platform code the threaded host and the C library run, over the one locked host.

use core::cell::Cell;
use core::ops::DerefMut;
use std::sync::{Condvar, MutexGuard, PoisonError};

use crate::host::irql::{self, BlockAtDispatch};
use crate::time::Instant;

/// What the threaded host needs of a threading library.
pub trait Threads: Sized + Send + Sync + 'static {
    type Mutex<T: Send>: Send + Sync;
    type Guard<'a, T: Send + 'a>: DerefMut<Target = T>;
    type Condvar: Send + Sync;
    /// The bus clock.
    type Clock: Send + Sync;
    type Join: Send;

    fn mutex<T: Send>(value: T) -> Self::Mutex<T>;
    /// The value a mutex guarded, the mutex gone (a poisoned one's too).
    fn into_inner<T: Send>(m: Self::Mutex<T>) -> T;
    /// Takes the lock; a poisoned one is taken anyway (callbacks never run under these
    /// locks, so the data is still consistent enough to report from).
    fn lock<T: Send>(m: &Self::Mutex<T>) -> Self::Guard<'_, T>;
    fn condvar() -> Self::Condvar;
    fn notify_all(cv: &Self::Condvar);
    fn wait<'a, T: Send + 'a>(cv: &Self::Condvar, guard: Self::Guard<'a, T>) -> Self::Guard<'a, T>;
    /// Waits at most `wait` of real time (or spuriously: callers re-check).
    fn wait_timeout<'a, T: Send + 'a>(
        cv: &Self::Condvar,
        guard: Self::Guard<'a, T>,
        wait: std::time::Duration,
    ) -> Self::Guard<'a, T>;
    fn clock() -> Self::Clock;
    fn now(clock: &Self::Clock) -> Instant;
    /// Waits on `cv` until notified or until the clock reads `at`, whichever comes first (or
    /// spuriously: callers re-check): by default a timed wait of what is left of real time.
    /// `mutex` is the one `guard` locks: a model of a wait that cannot time out (virtual
    /// time) releases and retakes it instead.
    fn wait_until<'a, T: Send + 'a>(
        clock: &Self::Clock,
        cv: &Self::Condvar,
        _mutex: &'a Self::Mutex<T>,
        guard: Self::Guard<'a, T>,
        at: Instant,
    ) -> Self::Guard<'a, T> {
        let wait = at.saturating_since(Self::now(clock)).as_us();
        Self::wait_timeout(cv, guard, std::time::Duration::from_micros(wait))
    }
    fn spawn(
        name: &str,
        body: impl FnOnce() + Send + 'static,
    ) -> Result<Self::Join, std::io::Error>;
    fn join(handle: Self::Join);
    /// This thread's count of deferred drains.
    fn with_deferring<R>(f: impl FnOnce(&Cell<u32>) -> R) -> R;
    /// Runs a client callback at DISPATCH_LEVEL, for the verifier.
    fn at_dispatch<R>(f: impl FnOnce() -> R) -> R;
    /// Whether the calling thread is at DISPATCH_LEVEL (in a callback, or raised by a child
    /// holding its own spin lock).
    fn raised() -> bool;
    /// The calling thread, as a number no other live thread has.
    fn context() -> usize;
    /// Called before a blocking wait: refused at DISPATCH_LEVEL.
    fn may_block(what: &'static str) -> Result<(), BlockAtDispatch>;
}

/// The part of a [`Threads`] implementation that is the same for every library with std's
/// `Mutex`, `MutexGuard`, `Condvar` and `PoisonError` (std's, shuttle's): its lock, guard and
/// condition variable types and their use, given the module that has them.
#[macro_export]
macro_rules! threads_primitives {
    ($($sync:ident)::+) => {
        type Mutex<T: Send> = $($sync)::+::Mutex<T>;
        type Guard<'a, T: Send + 'a> = $($sync)::+::MutexGuard<'a, T>;
        type Condvar = $($sync)::+::Condvar;

        fn mutex<T: Send>(value: T) -> Self::Mutex<T> {
            $($sync)::+::Mutex::new(value)
        }
        fn lock<T: Send>(m: &Self::Mutex<T>) -> Self::Guard<'_, T> {
            m.lock().unwrap_or_else($($sync)::+::PoisonError::into_inner)
        }
        fn into_inner<T: Send>(m: Self::Mutex<T>) -> T {
            m.into_inner().unwrap_or_else($($sync)::+::PoisonError::into_inner)
        }
        fn condvar() -> Self::Condvar {
            $($sync)::+::Condvar::new()
        }
        fn notify_all(cv: &Self::Condvar) {
            cv.notify_all();
        }
        fn wait<'a, T: Send + 'a>(
            cv: &Self::Condvar,
            guard: Self::Guard<'a, T>,
        ) -> Self::Guard<'a, T> {
            cv.wait(guard).unwrap_or_else($($sync)::+::PoisonError::into_inner)
        }
    };
}

/// std's threads, with the verifier watching the IRQL.
#[derive(Debug, Clone, Copy)]
pub struct StdThreads;

std::thread_local! {
    static DEFERRING: Cell<u32> = const { Cell::new(0) };
    static CONTEXT: usize = next_context();
}

/// Numbers threads as they first ask (a thread id that fits a `usize` on stable Rust).
pub fn next_context() -> usize {
    static NEXT: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(1);
    NEXT.fetch_add(1, core::sync::atomic::Ordering::Relaxed)
}

/// The bus clock on std: microseconds since the host started.
#[derive(Debug)]
pub struct StdClock(std::time::Instant);

impl Threads for StdThreads {
    crate::threads_primitives!(std::sync);
    type Clock = StdClock;
    type Join = std::thread::JoinHandle<()>;

    fn wait_timeout<'a, T: Send + 'a>(
        cv: &Condvar,
        guard: MutexGuard<'a, T>,
        wait: std::time::Duration,
    ) -> MutexGuard<'a, T> {
        cv.wait_timeout(guard, wait)
            .unwrap_or_else(PoisonError::into_inner)
            .0
    }
    fn clock() -> StdClock {
        StdClock(std::time::Instant::now())
    }
    fn now(clock: &StdClock) -> Instant {
        let us = clock.0.elapsed().as_micros();
        Instant::from_us(u64::try_from(us).unwrap_or(u64::MAX))
    }
    fn spawn(
        name: &str,
        body: impl FnOnce() + Send + 'static,
    ) -> Result<Self::Join, std::io::Error> {
        std::thread::Builder::new().name(name.into()).spawn(body)
    }
    fn join(handle: Self::Join) {
        // A thread that panicked has already reported it on stderr; the join only collects
        // the thread.
        let _ = handle.join();
    }
    fn with_deferring<R>(f: impl FnOnce(&Cell<u32>) -> R) -> R {
        DEFERRING.with(f)
    }
    fn at_dispatch<R>(f: impl FnOnce() -> R) -> R {
        let _irql = irql::raise_to_dispatch();
        f()
    }
    fn may_block(what: &'static str) -> Result<(), BlockAtDispatch> {
        irql::check_may_block(what)
    }
    fn raised() -> bool {
        irql::current() >= irql::Irql::Dispatch
    }
    fn context() -> usize {
        CONTEXT.with(|c| *c)
    }
}
