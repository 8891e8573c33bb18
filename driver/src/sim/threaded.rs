//! The threaded host: the one locked host ([`Bus`]) on std, [`ThreadedBus`] =
//! `Bus<StdPlatform>`.
//!
//! [`StdPlatform`] stands for the kernel: its locks are mutexes, a timer thread plays the
//! WDFTIMERs, and the DPC and the work item run on the thread that queued them (the bus lets
//! one thread drain at a time; a call made while another drains only queues its actions for
//! that drainer, as a kernel would queue a DPC). Callbacks run with the lock dropped, raised
//! to DISPATCH_LEVEL for the verifier, and a callback that panics is contained and counted.
//!
//! Nothing here allocates after [`ThreadedHost::start`], except the caller's own
//! `Arc<dyn EventCallback>` built before it registers.

use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};

use crate::coordinator::Config;
use crate::hca::Hca;
use crate::host::{Bus, EventLogEntry, Lock, NewError, Platform, PlatformError, Scheduled};
use crate::policy::PolicyError;
use crate::sim::verifier::{self, BlockAtDispatch};
use crate::time::Instant;
use crate::timers::TimerTable;
use crate::types::*;

/// The one host on std.
pub type ThreadedBus = Bus<StdPlatform>;

/// The event callback a client gives at register time: the model of the C ABI's
/// `void (*)(void *client_context, const HCABUS_EVENT *event)` (docs/bus-interface.md).
/// Called with no bus lock held; must not block. [`crate::sim::Hosted`] makes any
/// [`crate::bus::Client`] one.
pub trait EventCallback: Send + Sync {
    fn on_event(&self, bus: &ThreadedBus, id: ClientId, event: Event);
}

pub type Callback = Arc<dyn EventCallback>;

/// Why the threaded host could not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartError {
    Policy(PolicyError),
    /// The device did not give its identity.
    Hardware(crate::hca::HwError),
    /// A lock the platform could not create (std's cannot fail; kept for the mapping).
    Platform(PlatformError),
    /// The timer thread could not be spawned.
    TimerThread,
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Policy(e) => write!(f, "invalid policy: {e}"),
            StartError::Hardware(e) => write!(f, "cannot read the device identity: {e}"),
            StartError::Platform(e) => write!(f, "{e}"),
            StartError::TimerThread => f.write_str("cannot spawn the timer thread"),
        }
    }
}

impl std::error::Error for StartError {}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Callbacks never run under these locks, so a poisoned lock means a bug in the host,
    // after which the data is still consistent enough to report from.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A mutex as the bus's spin lock and the hardware's wait lock.
#[derive(Debug)]
pub struct StdLock<T>(Mutex<T>);

impl<T> Lock<T> for StdLock<T> {
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut lock(&self.0))
    }
}

/// The timer thread as the platform sees it (changed under `timers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TimerSleep {
    /// Running: it looks at the timers again before it sleeps.
    Awake,
    /// Waiting on `timer_cv` until this deadline, or until notified when `None`.
    Until(Option<Instant>),
}

impl TimerSleep {
    /// Whether a timer due at `at` needs the sleeping thread woken (every arm woke it once:
    /// futex calls were most of a reset).
    fn must_wake_for(self, at: Instant) -> bool {
        match self {
            TimerSleep::Awake => false,
            TimerSleep::Until(None) => true,
            TimerSleep::Until(Some(deadline)) => at < deadline,
        }
    }
}

#[derive(Debug)]
struct Timers {
    /// Deadlines only: the bus keeps the tokens.
    due: TimerTable,
    sleep: TimerSleep,
    shutdown: bool,
}

/// Drains that ended, for [`ThreadedBus::wait_idle`].
#[derive(Debug, Default)]
struct Idle {
    generation: u64,
    /// Threads waiting: a drain that ends wakes them only if any.
    waiters: u32,
}

std::thread_local! {
    /// Drains this thread must not run here: it is inside a hosted client, whose own lock a
    /// delivery to it would take again (see [`StdPlatform::deferring`]).
    static DEFERRING: Cell<u32> = const { Cell::new(0) };
}

/// The kernel, for the threaded host.
#[derive(Debug)]
pub struct StdPlatform {
    start: std::time::Instant,
    timers: Mutex<Timers>,
    timer_cv: Condvar,
    idle: Mutex<Idle>,
    idle_cv: Condvar,
    pnp_operations: AtomicU64,
    callback_panics: AtomicU64,
    log_entries: AtomicU64,
}

impl StdPlatform {
    fn new() -> Self {
        StdPlatform {
            start: std::time::Instant::now(),
            timers: Mutex::new(Timers {
                due: TimerTable::default(),
                sleep: TimerSleep::Awake,
                shutdown: false,
            }),
            timer_cv: Condvar::new(),
            idle: Mutex::new(Idle::default()),
            idle_cv: Condvar::new(),
            pnp_operations: AtomicU64::new(0),
            callback_panics: AtomicU64::new(0),
            log_entries: AtomicU64::new(0),
        }
    }

    /// Runs `f` with this thread's drains deferred: the bus queues the DPC instead of running
    /// it here, and the caller kicks the bus once it is safe to be called back.
    pub fn deferring<R>(f: impl FnOnce() -> R) -> R {
        DEFERRING.with(|d| d.set(d.get() + 1));
        let r = f();
        DEFERRING.with(|d| d.set(d.get() - 1));
        r
    }

    fn here_unless_deferred() -> Scheduled {
        if DEFERRING.with(Cell::get) > 0 {
            Scheduled::Queued
        } else {
            Scheduled::RunHere
        }
    }
}

impl Platform for StdPlatform {
    type SpinLock<T> = StdLock<T>;
    type WaitLock<T> = StdLock<T>;
    type Hca = Box<dyn Hca + Send>;
    type Callback = Callback;

    fn now(&self) -> Instant {
        let us = self.start.elapsed().as_micros();
        Instant::from_us(u64::try_from(us).unwrap_or(u64::MAX))
    }
    fn spin_lock<T>(&self, value: T) -> Result<StdLock<T>, PlatformError> {
        Ok(StdLock(Mutex::new(value)))
    }
    fn wait_lock<T>(&self, value: T) -> Result<StdLock<T>, PlatformError> {
        Ok(StdLock(Mutex::new(value)))
    }
    fn arm_timer(&self, timer: TimerId, due: Instant) {
        let mut t = lock(&self.timers);
        t.due.arm(timer, due, 0);
        if t.sleep.must_wake_for(due) {
            self.timer_cv.notify_all();
        }
    }
    fn cancel_timer(&self, timer: TimerId) {
        lock(&self.timers).due.cancel(timer);
    }
    fn queue_dpc(&self) -> Scheduled {
        Self::here_unless_deferred()
    }
    fn queue_work_item(&self) -> Scheduled {
        Self::here_unless_deferred()
    }
    fn deliver(bus: &ThreadedBus, callback: &Callback, client: ClientId, event: Event) {
        // Callbacks run under DISPATCH_LEVEL rules: no blocking.
        let _irql = verifier::raise_to_dispatch();
        // A client that panics must not stall everyone else: without this the unwind would
        // leave the drain marked running and the delivery unreported.
        let run = || callback.on_event(bus, client, event);
        if std::panic::catch_unwind(AssertUnwindSafe(run)).is_err() {
            bus.platform()
                .callback_panics
                .fetch_add(1, Ordering::SeqCst);
            log::error!("callback of {client} panicked on {}", event.kind());
        }
    }
    fn pnp(&self, _op: PnpOp) {
        self.pnp_operations.fetch_add(1, Ordering::SeqCst);
    }
    fn log_event(&self, _entry: EventLogEntry) {
        self.log_entries.fetch_add(1, Ordering::SeqCst);
    }
    fn settled(&self) {
        let mut idle = lock(&self.idle);
        idle.generation += 1;
        if idle.waiters > 0 {
            self.idle_cv.notify_all();
        }
    }
}

/// Owns the bus and its timer thread; dropping it stops the thread.
#[derive(Debug)]
pub struct ThreadedHost {
    bus: Arc<ThreadedBus>,
    timer_thread: Option<JoinHandle<()>>,
}

impl ThreadedHost {
    pub fn start<H: Hca + Send + 'static>(config: Config, hca: H) -> Result<Self, StartError> {
        let bus = Bus::new(StdPlatform::new(), config, Box::new(hca)).map_err(|e| match e {
            NewError::Hardware(e) => StartError::Hardware(e),
            NewError::Policy(e) => StartError::Policy(e),
            NewError::Platform(e) => StartError::Platform(e),
        })?;
        let bus = Arc::new(bus);
        let timer_bus = Arc::clone(&bus);
        let timer_thread = thread::Builder::new()
            .name("hcabus-timers".into())
            .spawn(move || timer_loop(&timer_bus))
            .map_err(|_| StartError::TimerThread)?;
        Ok(ThreadedHost {
            bus,
            timer_thread: Some(timer_thread),
        })
    }

    pub fn bus(&self) -> &Arc<ThreadedBus> {
        &self.bus
    }
}

impl Drop for ThreadedHost {
    fn drop(&mut self) {
        let p = self.bus.platform();
        lock(&p.timers).shutdown = true;
        p.timer_cv.notify_all();
        if let Some(t) = self.timer_thread.take() {
            let _ = t.join();
        }
    }
}

/// The WDFTIMERs: fires each armed timer when the clock reaches it.
fn timer_loop(bus: &ThreadedBus) {
    let p = bus.platform();
    let mut t = lock(&p.timers);
    loop {
        if t.shutdown {
            return;
        }
        let now = p.now();
        if let Some((timer, _)) = t.due.take_first_due(now) {
            drop(t);
            bus.timer_fired(timer);
            t = lock(&p.timers);
            continue;
        }
        let next = t.due.next_deadline();
        // Set under the lock the wait releases: an arm after this sees it.
        t.sleep = TimerSleep::Until(next);
        t = match next {
            Some(at) => {
                let wait = std::time::Duration::from_micros(at.saturating_since(now).as_us());
                p.timer_cv
                    .wait_timeout(t, wait)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
            None => p.timer_cv.wait(t).unwrap_or_else(PoisonError::into_inner),
        };
        t.sleep = TimerSleep::Awake;
    }
}

/// What the threaded host adds to the bus: waiting for it, and its counters.
impl ThreadedBus {
    /// Blocks until no reset is in progress and every action has been executed, or until
    /// `timeout`; `Ok(false)` on timeout. A blocking call: refused at DISPATCH_LEVEL (from a
    /// callback, where waiting for the reset would wait for itself).
    pub fn wait_idle(&self, timeout: std::time::Duration) -> Result<bool, BlockAtDispatch> {
        verifier::check_may_block("ThreadedBus::wait_idle")?;
        let until = std::time::Instant::now() + timeout;
        let p = self.platform();
        let mut idle = lock(&p.idle);
        idle.waiters += 1;
        let done = 'wait: loop {
            let seen = idle.generation;
            drop(idle);
            let now_idle = self.is_idle();
            idle = lock(&p.idle);
            if now_idle {
                break true;
            }
            // A drain that ended since the look above changed the generation: look again.
            while idle.generation == seen {
                let left = until.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    break 'wait false;
                }
                idle = p
                    .idle_cv
                    .wait_timeout(idle, left)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
        };
        idle.waiters -= 1;
        Ok(done)
    }

    pub fn pnp_operations(&self) -> u64 {
        self.platform().pnp_operations.load(Ordering::SeqCst)
    }

    /// Callbacks that panicked (contained: the event counts as delivered).
    pub fn callback_panics(&self) -> u64 {
        self.platform().callback_panics.load(Ordering::SeqCst)
    }

    /// Entries the bus wrote to the (model of the) system event log.
    pub fn event_log_entries(&self) -> u64 {
        self.platform().log_entries.load(Ordering::SeqCst)
    }
}
