//! The threaded host: the one locked host ([`Bus`]) on threads, [`ThreadedBus`] =
//! `Bus<StdPlatform>` on std's (tests/shuttle runs the same code on shuttle's, through
//! [`Threads`]).
//!
//! [`ThreadPlatform`] stands for the kernel: its locks are mutexes, a timer thread plays the
//! WDFTIMERs, and the DPC and the work item run on the thread that queued them at
//! PASSIVE_LEVEL (the bus lets one thread drain at a time; a call made while another drains
//! only queues its actions for that drainer, as a kernel would queue a DPC), or on the timer
//! thread when queued at DISPATCH_LEVEL (a DPC never runs on a processor at DISPATCH_LEVEL:
//! it runs there when the IRQL drops, or on another processor). Callbacks run with the lock dropped, raised
//! to DISPATCH_LEVEL for the verifier, and a callback that panics is contained and counted.
//!
//! Nothing here allocates after [`ThreadedHost::start`], except the caller's own
//! `Arc<dyn EventCallback>` built before it registers.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::coordinator::Config;
use crate::hca::Hca;
use crate::host::facade::{StdThreads, Threads};
use crate::host::irql::BlockAtDispatch;
use crate::host::{
    Bus, ClientView, EventLogEntry, Lock, NewError, Platform, PlatformError, Scheduled,
};
use crate::time::Instant;
use crate::timers::TimerTable;
use crate::types::*;

/// The platform of the threaded host on std.
pub type StdPlatform = ThreadPlatform<StdThreads>;

/// The one host on std.
pub type ThreadedBus = Bus<StdPlatform>;

/// The event callback a client gives at register time: the model of the C ABI's
/// `void (*)(void *client_context, const HCABUS_EVENT *event)` (docs/bus-interface.md).
/// Called with no bus lock held; must not block. It is given the bus as a client sees it
/// ([`ClientView`]: the client calls, no administrative input). `hcabus_sim::Hosted` makes
/// any [`crate::bus::Client`] one.
pub trait EventCallback<S: Threads = StdThreads>: Send + Sync {
    fn on_event(&self, bus: ClientView<'_, ThreadPlatform<S>>, id: ClientId, event: Event);
}

pub type Callback<S = StdThreads> = Arc<dyn EventCallback<S>>;

/// Why the threaded host could not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    /// The bus could not be built on the device (its identity, the policy).
    #[error("{0}")]
    Bus(NewError),
    /// The timer thread could not be spawned.
    #[error("cannot spawn the timer thread")]
    TimerThread,
}

/// A mutex as the bus's spin lock and the hardware's wait lock.
pub struct ThreadLock<S: Threads, T: Send>(S::Mutex<T>);

impl<S: Threads, T: Send> std::fmt::Debug for ThreadLock<S, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadLock").finish_non_exhaustive()
    }
}

impl<S: Threads, T: Send> Lock<T> for ThreadLock<S, T> {
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut S::lock(&self.0))
    }
    fn into_inner(self) -> T {
        S::into_inner(self.0)
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
    /// The DPC or the work item was queued from DISPATCH_LEVEL, where it may not run on the
    /// calling thread: the timer thread, another processor, runs it.
    dpc_queued: bool,
    work_queued: bool,
}

/// Callbacks that returned, for Unregister's rundown.
#[derive(Debug, Default)]
struct Rundown {
    ended: u64,
    /// Threads waiting: a callback's end wakes them only if any.
    waiters: u32,
}

/// Drains that ended, for [`Bus::wait_idle`].
#[derive(Debug, Default)]
struct Idle {
    generation: u64,
    /// Threads waiting: a drain that ends wakes them only if any.
    waiters: u32,
}

/// The kernel, for the threaded host: over std ([`StdPlatform`]) or shuttle (tests/shuttle).
pub struct ThreadPlatform<S: Threads> {
    clock: S::Clock,
    timers: S::Mutex<Timers>,
    timer_cv: S::Condvar,
    idle: S::Mutex<Idle>,
    idle_cv: S::Condvar,
    rundown: S::Mutex<Rundown>,
    rundown_cv: S::Condvar,
    pnp_operations: AtomicU64,
    callback_panics: AtomicU64,
    log_entries: AtomicU64,
}

impl<S: Threads> std::fmt::Debug for ThreadPlatform<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadPlatform").finish_non_exhaustive()
    }
}

impl<S: Threads> ThreadPlatform<S> {
    fn new() -> Self {
        ThreadPlatform {
            clock: S::clock(),
            timers: S::mutex(Timers {
                due: TimerTable::default(),
                sleep: TimerSleep::Awake,
                shutdown: false,
                dpc_queued: false,
                work_queued: false,
            }),
            timer_cv: S::condvar(),
            idle: S::mutex(Idle::default()),
            idle_cv: S::condvar(),
            rundown: S::mutex(Rundown::default()),
            rundown_cv: S::condvar(),
            pnp_operations: AtomicU64::new(0),
            callback_panics: AtomicU64::new(0),
            log_entries: AtomicU64::new(0),
        }
    }

    /// Runs `f` with this thread's drains deferred: the bus queues the DPC instead of running
    /// it here, and the caller kicks the bus once it is safe to be called back.
    pub fn deferring<R>(f: impl FnOnce() -> R) -> R {
        S::with_deferring(|d| d.set(d.get() + 1));
        let r = f();
        S::with_deferring(|d| d.set(d.get() - 1));
        r
    }

    /// Whether the timer thread is waiting on its condition variable, for the tests that
    /// need it asleep before they queue work it must be woken for.
    #[cfg(test)]
    pub(crate) fn timer_thread_asleep(&self) -> bool {
        S::lock(&self.timers).sleep != TimerSleep::Awake
    }

    /// A DPC or work item queued from PASSIVE_LEVEL runs at once on the caller's thread (as
    /// a DPC queued there would); one queued at DISPATCH_LEVEL goes to the timer thread, so
    /// that a child holding its own spin lock across a call is never called back under it.
    fn schedule(&self, work_item: bool) -> Scheduled {
        if S::with_deferring(|d| d.get()) > 0 {
            return Scheduled::Queued;
        }
        if !S::raised() {
            return Scheduled::RunHere;
        }
        let mut t = S::lock(&self.timers);
        if work_item {
            t.work_queued = true;
        } else {
            t.dpc_queued = true;
        }
        if t.sleep != TimerSleep::Awake {
            S::notify_all(&self.timer_cv);
        }
        Scheduled::Queued
    }
}

/// Reservations from the heap, through `Vec`'s fallible reservation.
impl<S: Threads> crate::reserve::Reserve for ThreadPlatform<S> {}

impl<S: Threads> Platform for ThreadPlatform<S> {
    type SpinLock<T: Send> = ThreadLock<S, T>;
    type WaitLock<T: Send> = ThreadLock<S, T>;
    type Hca = Box<dyn Hca + Send>;
    type Callback = Callback<S>;

    fn now(&self) -> Instant {
        S::now(&self.clock)
    }
    fn spin_lock<T: Send>(&self, value: T) -> Result<ThreadLock<S, T>, PlatformError> {
        Ok(ThreadLock(S::mutex(value)))
    }
    fn wait_lock<T: Send>(&self, value: T) -> Result<ThreadLock<S, T>, PlatformError> {
        Ok(ThreadLock(S::mutex(value)))
    }
    fn arm_timer(&self, timer: TimerId, due: Instant) {
        let mut t = S::lock(&self.timers);
        t.due.arm(timer, due, 0);
        if t.sleep.must_wake_for(due) {
            S::notify_all(&self.timer_cv);
        }
    }
    fn cancel_timer(&self, timer: TimerId) {
        S::lock(&self.timers).due.cancel(timer);
    }
    fn queue_dpc(&self) -> Scheduled {
        self.schedule(false)
    }
    fn queue_work_item(&self) -> Scheduled {
        self.schedule(true)
    }
    fn deliver(bus: &Bus<Self>, callback: &Callback<S>, client: ClientId, event: Event) {
        // A client that panics must not stall everyone else: without this the unwind would
        // leave the drain marked running and the delivery unreported.
        let run = || callback.on_event(ClientView::of(bus), client, event);
        let panicked = S::at_dispatch(|| std::panic::catch_unwind(AssertUnwindSafe(run)).is_err());
        if panicked {
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
        let mut idle = S::lock(&self.idle);
        idle.generation += 1;
        if idle.waiters > 0 {
            S::notify_all(&self.idle_cv);
        }
    }
    fn at_dispatch(&self) -> bool {
        S::raised()
    }
    fn context(&self) -> usize {
        S::context()
    }
    fn delivery_ended(&self) {
        let mut r = S::lock(&self.rundown);
        r.ended += 1;
        if r.waiters > 0 {
            S::notify_all(&self.rundown_cv);
        }
    }
    fn deliveries_ended(&self) -> u64 {
        S::lock(&self.rundown).ended
    }
    fn wait_delivery_end(&self, seen: u64) {
        let mut r = S::lock(&self.rundown);
        r.waiters += 1;
        while r.ended == seen {
            r = S::wait(&self.rundown_cv, r);
        }
        r.waiters -= 1;
    }
}

/// Owns the bus and its timer thread; dropping it stops the thread.
pub struct ThreadedHost<S: Threads = StdThreads> {
    bus: Arc<Bus<ThreadPlatform<S>>>,
    timer_thread: Option<S::Join>,
}

impl<S: Threads> std::fmt::Debug for ThreadedHost<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadedHost").finish_non_exhaustive()
    }
}

impl<S: Threads> ThreadedHost<S> {
    pub fn start<H: Hca + Send + 'static>(config: Config, hca: H) -> Result<Self, StartError> {
        let bus =
            Bus::new(ThreadPlatform::new(), config, Box::new(hca)).map_err(StartError::Bus)?;
        let bus = Arc::new(bus);
        let timer_bus = Arc::clone(&bus);
        let timer_thread = S::spawn("hcabus-timers", move || timer_loop(&timer_bus))
            .map_err(|_| StartError::TimerThread)?;
        Ok(ThreadedHost {
            bus,
            timer_thread: Some(timer_thread),
        })
    }

    pub fn bus(&self) -> &Arc<Bus<ThreadPlatform<S>>> {
        &self.bus
    }
}

impl<S: Threads> Drop for ThreadedHost<S> {
    fn drop(&mut self) {
        let p = self.bus.platform();
        S::lock(&p.timers).shutdown = true;
        S::notify_all(&p.timer_cv);
        if let Some(t) = self.timer_thread.take() {
            S::join(t);
        }
    }
}

/// The WDFTIMERs: fires each armed timer when the clock reaches it.
fn timer_loop<S: Threads>(bus: &Bus<ThreadPlatform<S>>) {
    let p = bus.platform();
    let mut t = S::lock(&p.timers);
    loop {
        if t.shutdown {
            return;
        }
        // Deferred calls first: another processor running a DPC queued at DISPATCH_LEVEL.
        if core::mem::take(&mut t.dpc_queued) {
            drop(t);
            bus.dpc();
            t = S::lock(&p.timers);
            continue;
        }
        if core::mem::take(&mut t.work_queued) {
            drop(t);
            bus.work_item();
            t = S::lock(&p.timers);
            continue;
        }
        let now = p.now();
        if let Some((timer, _)) = t.due.take_first_due(now) {
            drop(t);
            bus.timer_fired(timer);
            t = S::lock(&p.timers);
            continue;
        }
        let next = t.due.next_deadline();
        // Set under the lock the wait releases: an arm after this sees it.
        t.sleep = TimerSleep::Until(next);
        t = match next {
            Some(at) => S::wait_until(&p.clock, &p.timer_cv, &p.timers, t, at),
            None => S::wait(&p.timer_cv, t),
        };
        t.sleep = TimerSleep::Awake;
    }
}

/// What the threaded host adds to the bus: waiting for it, and its counters.
impl<S: Threads> Bus<ThreadPlatform<S>> {
    /// Blocks until no reset is in progress and every action has been executed, or until
    /// `timeout`; `Ok(false)` on timeout. A blocking call: refused at DISPATCH_LEVEL (from a
    /// callback, where waiting for the reset would wait for itself).
    pub fn wait_idle(&self, timeout: std::time::Duration) -> Result<bool, BlockAtDispatch> {
        S::may_block("ThreadedBus::wait_idle")?;
        let until = std::time::Instant::now() + timeout;
        let p = self.platform();
        let mut idle = S::lock(&p.idle);
        idle.waiters += 1;
        let done = 'wait: loop {
            let seen = idle.generation;
            drop(idle);
            let now_idle = self.is_idle();
            idle = S::lock(&p.idle);
            if now_idle {
                break true;
            }
            // A drain that ended since the look above changed the generation: look again.
            while idle.generation == seen {
                let left = until.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    break 'wait false;
                }
                idle = S::wait_timeout(&p.idle_cv, idle, left);
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

#[cfg(test)]
mod tests {
    use super::TimerSleep;
    use crate::time::Instant;

    /// The sleeping timer thread is woken for a deadline earlier than the one it sleeps to,
    /// and only then; a thread awake looks at the timers anyway, and one asleep with no
    /// deadline is woken for any.
    #[test]
    fn the_timer_thread_is_woken_only_for_an_earlier_deadline() {
        let at = Instant::from_ms;
        let asleep = TimerSleep::Until(Some(at(10)));
        let woken = [5, 10, 15].map(|ms| asleep.must_wake_for(at(ms)));
        assert_eq!(woken, [true, false, false]);
        assert!(!TimerSleep::Awake.must_wake_for(at(5)));
        assert!(TimerSleep::Until(None).must_wake_for(at(u64::MAX / 1_000)));
    }
}
