//! The one locked host ([`hcabus::host::Bus`], the code the KMDF driver ships) on a platform
//! of shuttle's primitives: shuttle then owns every lock, wait, notification and thread
//! switch, and its schedulers explore the host's interleavings (tests/shuttle.rs).
//!
//! [`ShuttlePlatform`] is the threaded host's platform in miniature: mutexes for the locks, a
//! timer thread for the WDFTIMERs, deferred calls run by the thread that queued them, and a
//! virtual clock that only moves when the timer thread waits.
//!
//! A timed wait is modelled as: the lock is released, any other thread may run (shuttle picks),
//! then the clock reaches the deadline and the lock is taken again, a timeout. That is one of
//! the real wait's behaviours (a timeout racing a notification; the host re-checks its state
//! either way), and it lets a checker put a timer expiry at any point of another thread's work.
//! A deadline further than [`MAX_JUMP_US`] ahead is waited for as an untimed wait: the tests set
//! the health poll far out, so the periodic poll cannot keep the clock running for ever while
//! every bounded deadline (quiesce, query, hardware poll) can still fire.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};

use hcabus::coordinator::Config;
use hcabus::host::{Bus, EventLogEntry, Lock, Platform, PlatformError, Scheduled};
use hcabus::sim::SimHca;
use hcabus::timers::TimerTable;
use hcabus::types::{ClientId, Event, PnpOp, TimerId};
use hcabus::Instant;
use shuttle::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use shuttle::thread::{self, JoinHandle};

/// The longest a single timed wait moves the clock.
pub const MAX_JUMP_US: u64 = 60_000_000;

/// The one host on shuttle.
pub type ShuttleBus = Bus<ShuttlePlatform>;

/// A client's callback (the model of the C ABI's function and context).
pub trait EventCallback: Send + Sync {
    fn on_event(&self, bus: &ShuttleBus, id: ClientId, event: Event);
}

pub type Callback = std::sync::Arc<dyn EventCallback>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A shuttle mutex as the spin lock and the wait lock.
#[derive(Debug)]
pub struct ShuttleLock<T>(Mutex<T>);

impl<T> Lock<T> for ShuttleLock<T> {
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut lock(&self.0))
    }
}

#[derive(Debug, Default)]
struct Timers {
    due: TimerTable,
    shutdown: bool,
}

/// The kernel under shuttle.
#[derive(Debug, Default)]
pub struct ShuttlePlatform {
    now_us: AtomicU64,
    timers: Mutex<Timers>,
    timer_cv: Condvar,
    /// Drains that ended, for [`wait_idle`].
    settled: Mutex<u64>,
    settled_cv: Condvar,
    callback_panics: AtomicU64,
}

impl Platform for ShuttlePlatform {
    type SpinLock<T> = ShuttleLock<T>;
    type WaitLock<T> = ShuttleLock<T>;
    type Hca = SimHca;
    type Callback = Callback;

    fn now(&self) -> Instant {
        Instant::from_us(self.now_us.load(Ordering::SeqCst))
    }
    fn spin_lock<T>(&self, value: T) -> Result<ShuttleLock<T>, PlatformError> {
        Ok(ShuttleLock(Mutex::new(value)))
    }
    fn wait_lock<T>(&self, value: T) -> Result<ShuttleLock<T>, PlatformError> {
        Ok(ShuttleLock(Mutex::new(value)))
    }
    fn arm_timer(&self, timer: TimerId, due: Instant) {
        lock(&self.timers).due.arm(timer, due, 0);
        self.timer_cv.notify_all();
    }
    fn cancel_timer(&self, timer: TimerId) {
        lock(&self.timers).due.cancel(timer);
    }
    fn queue_dpc(&self) -> Scheduled {
        Scheduled::RunHere
    }
    fn queue_work_item(&self) -> Scheduled {
        Scheduled::RunHere
    }
    fn deliver(bus: &ShuttleBus, callback: &Callback, client: ClientId, event: Event) {
        let run = || callback.on_event(bus, client, event);
        if std::panic::catch_unwind(AssertUnwindSafe(run)).is_err() {
            bus.platform()
                .callback_panics
                .fetch_add(1, Ordering::SeqCst);
        }
    }
    fn pnp(&self, _op: PnpOp) {}
    fn log_event(&self, _entry: EventLogEntry) {}
    fn settled(&self) {
        *lock(&self.settled) += 1;
        self.settled_cv.notify_all();
    }
}

/// Owns the bus and its timer thread; dropping it stops the thread.
#[derive(Debug)]
pub struct ShuttleHost {
    bus: Arc<ShuttleBus>,
    timer_thread: Option<JoinHandle<()>>,
}

impl ShuttleHost {
    pub fn start(config: Config, hca: SimHca) -> Self {
        let bus = Bus::new(ShuttlePlatform::default(), config, hca).expect("the bus starts");
        let bus = Arc::new(bus);
        let timer_bus = Arc::clone(&bus);
        let timer_thread = thread::spawn(move || timer_loop(&timer_bus));
        ShuttleHost {
            bus,
            timer_thread: Some(timer_thread),
        }
    }

    pub fn bus(&self) -> &Arc<ShuttleBus> {
        &self.bus
    }
}

impl Drop for ShuttleHost {
    fn drop(&mut self) {
        let p = self.bus.platform();
        lock(&p.timers).shutdown = true;
        p.timer_cv.notify_all();
        if let Some(t) = self.timer_thread.take() {
            let _ = t.join();
        }
    }
}

fn timer_loop(bus: &ShuttleBus) {
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
        match t.due.next_deadline() {
            Some(at) if at.as_us().saturating_sub(now.as_us()) <= MAX_JUMP_US => {
                drop(t);
                thread::yield_now();
                p.now_us.fetch_max(at.as_us(), Ordering::SeqCst);
                t = lock(&p.timers);
            }
            _ => t = p.timer_cv.wait(t).unwrap_or_else(PoisonError::into_inner),
        }
    }
}

/// Waits until the bus is idle (no reset, nothing queued or running). Untimed: a schedule in
/// which it never goes idle is a deadlock, which shuttle reports with the schedule.
pub fn wait_idle(bus: &ShuttleBus) {
    let p = bus.platform();
    loop {
        let seen = *lock(&p.settled);
        if bus.is_idle() {
            return;
        }
        let mut settled = lock(&p.settled);
        while *settled == seen {
            settled = p
                .settled_cv
                .wait(settled)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Callbacks that panicked (contained: the event counts as delivered).
pub fn callback_panics(bus: &ShuttleBus) -> u64 {
    bus.platform().callback_panics.load(Ordering::SeqCst)
}
