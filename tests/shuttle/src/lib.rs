//! The threaded host's own code, the one locked host ([`hcabus::host::Bus`], which the KMDF
//! driver ships) over [`hcabus::host::ThreadPlatform`] (which the threaded host and the C
//! library run), on [`ShuttleThreads`]: shuttle's Mutex, Condvar, threads and thread-locals,
//! and a virtual clock. Shuttle then owns every lock, wait, notification and thread switch,
//! and its schedulers explore the host's interleavings (tests/shuttle.rs).
//!
//! A timed wait is modelled as: the lock is released, any other thread may run (shuttle picks),
//! then the clock reaches the deadline and the lock is taken again, a timeout. That is one of
//! the real wait's behaviours (a timeout racing a notification; the host re-checks its state
//! either way), and it lets a checker put a timer expiry at any point of another thread's work.
//! A deadline further than [`MAX_JUMP_US`] ahead is waited for as an untimed wait: the tests set
//! the health poll far out, so the periodic poll cannot keep the clock running for ever while
//! every bounded deadline (quiesce, query, hardware poll) can still fire.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use hcabus::host::irql::BlockAtDispatch;
use hcabus::host::Bus;
use hcabus::host::{ThreadPlatform, ThreadedHost, Threads};
use hcabus::Instant;
use shuttle::sync::{Condvar, Mutex, MutexGuard};
use shuttle::thread;

/// The longest a single timed wait moves the clock.
pub const MAX_JUMP_US: u64 = 60_000_000;

/// The one host on shuttle.
pub type ShuttleBus = Bus<ThreadPlatform<ShuttleThreads>>;
/// The bus as a client's callback sees it under shuttle.
pub type ShuttleView<'a> = hcabus::host::ClientView<'a, ThreadPlatform<ShuttleThreads>>;
pub type ShuttleHost = ThreadedHost<ShuttleThreads>;

/// Shuttle's primitives and a virtual clock.
#[derive(Debug, Clone, Copy)]
pub struct ShuttleThreads;

/// Virtual bus time, in microseconds.
#[derive(Debug, Default)]
pub struct VirtualClock(AtomicU64);

shuttle::thread_local! {
    static DEFERRING: Cell<u32> = Cell::new(0);
    /// The thread's IRQL: raised in a callback, or by a child holding its own spin lock.
    static RAISED: Cell<bool> = Cell::new(false);
    static CONTEXT: usize = hcabus::host::facade::next_context();
}

/// KeRaiseIrql to DISPATCH_LEVEL for a child on a shuttle thread; returns whether it was
/// raised already (the old IRQL), for [`lower`].
pub fn raise() -> bool {
    RAISED.with(|r| r.replace(true))
}

/// KeLowerIrql back to what [`raise`] returned.
pub fn lower(was_raised: bool) {
    RAISED.with(|r| r.set(was_raised));
}

impl Threads for ShuttleThreads {
    hcabus::threads_primitives!(shuttle::sync);
    type Clock = VirtualClock;
    type Join = thread::JoinHandle<()>;

    /// Shuttle's timed wait never times out: a schedule in which nothing notifies is a
    /// deadlock, which shuttle reports with the schedule.
    fn wait_timeout<'a, T: Send + 'a>(
        cv: &Condvar,
        guard: MutexGuard<'a, T>,
        _wait: std::time::Duration,
    ) -> MutexGuard<'a, T> {
        Self::wait(cv, guard)
    }
    fn clock() -> VirtualClock {
        VirtualClock::default()
    }
    fn now(clock: &VirtualClock) -> Instant {
        Instant::from_us(clock.0.load(Ordering::SeqCst))
    }
    fn wait_until<'a, T: Send + 'a>(
        clock: &VirtualClock,
        cv: &Condvar,
        mutex: &'a Mutex<T>,
        guard: MutexGuard<'a, T>,
        at: Instant,
    ) -> MutexGuard<'a, T> {
        let now = clock.0.load(Ordering::SeqCst);
        if at.as_us().saturating_sub(now) > MAX_JUMP_US {
            return Self::wait(cv, guard);
        }
        drop(guard);
        thread::yield_now();
        clock.0.fetch_max(at.as_us(), Ordering::SeqCst);
        Self::lock(mutex)
    }
    fn spawn(
        name: &str,
        body: impl FnOnce() + Send + 'static,
    ) -> Result<Self::Join, std::io::Error> {
        thread::Builder::new().name(name.into()).spawn(body)
    }
    fn join(handle: Self::Join) {
        let _ = handle.join();
    }
    fn with_deferring<R>(f: impl FnOnce(&Cell<u32>) -> R) -> R {
        DEFERRING.with(f)
    }
    /// The verifier's IRQL is a std thread-local, which shuttle's threads (all on one OS
    /// thread) would share: a shuttle thread-local of its own instead.
    fn at_dispatch<R>(f: impl FnOnce() -> R) -> R {
        let was = raise();
        let r = f();
        lower(was);
        r
    }
    fn may_block(what: &'static str) -> Result<(), BlockAtDispatch> {
        if Self::raised() {
            return Err(BlockAtDispatch { what });
        }
        Ok(())
    }
    fn raised() -> bool {
        RAISED.with(Cell::get)
    }
    fn context() -> usize {
        CONTEXT.with(|c| *c)
    }
}
