//! A host over real threads: the model of the KMDF glue.
//!
//! The coordinator sits behind one mutex (the spin lock of the kernel version). Actions are
//! executed by whichever thread finds no one else draining; it drops the lock around every
//! callback and hardware step, so a callback may call any bus function, `reset_execute`,
//! `unregister` and `register` included, from its own thread or another, without deadlock:
//! a call made while someone else drains only queues its actions for that drainer (as a
//! kernel would queue a DPC). A timer thread plays the role of the WDFTIMER objects.
//!
//! Nothing here allocates after [`ThreadedHost::start`], except the caller's own
//! `Arc<dyn EventCallback>` built before it registers.

use std::panic::AssertUnwindSafe;
use std::vec::Vec;

use crate::coordinator::*;
use crate::errors::*;
use crate::hca::{execute, Hca, HwError};
use crate::policy::{Policy, PolicyError};
use crate::sim::sync::thread::{self, JoinHandle};
use crate::sim::sync::{Arc, Clock, Condvar, Mutex, MutexGuard, PoisonError};
use crate::sim::verifier::{self, BlockAtDispatch};
use crate::time::Instant;
use crate::timers::TimerTable;
use crate::types::*;

/// The event callback a client gives at register time: the model of the C ABI's
/// `void (*)(void *client_context, const HCABUS_EVENT *event)` (SPEC §3). Called with no
/// bus lock held; must not block. [`crate::sim::Hosted`] makes any [`crate::bus::Client`]
/// one.
pub trait EventCallback: Send + Sync {
    fn on_event(&self, bus: &ThreadedBus, id: ClientId, event: Event);
}

/// Why the threaded host could not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartError {
    Policy(PolicyError),
    /// The device did not give its identity.
    Hardware(HwError),
    /// The timer thread could not be spawned.
    TimerThread,
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Policy(e) => write!(f, "invalid policy: {e}"),
            StartError::Hardware(e) => write!(f, "cannot read the device identity: {e}"),
            StartError::TimerThread => f.write_str("cannot spawn the timer thread"),
        }
    }
}

impl std::error::Error for StartError {}

pub(crate) type Callback = Arc<dyn EventCallback>;

struct Core {
    coord: Coordinator,
    callbacks: Vec<Option<(ClientId, Callback)>>,
    draining: bool,
    timers: TimerTable,
    shutdown: bool,
    pnp_operations: u64,
    callback_panics: u64,
    /// What the timer thread waits for, so that arming a timer wakes it only when it sleeps
    /// past the new deadline (every arm woke it before: futex calls were most of a reset).
    timer_sleep: TimerSleep,
    /// Threads in [`ThreadedBus::wait_idle`]: a drain that ends wakes them only if any.
    idle_waiters: u32,
}

/// The timer thread as the core sees it (both are changed under the core lock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TimerSleep {
    /// Running: it looks at the timers again before it sleeps.
    Awake,
    /// Waiting on `timer_cv` until this deadline, or until notified when `None`.
    Until(Option<Instant>),
}

impl TimerSleep {
    /// Whether a timer due at `at` needs the sleeping thread woken.
    fn must_wake_for(self, at: Instant) -> bool {
        match self {
            TimerSleep::Awake => false,
            TimerSleep::Until(None) => true,
            TimerSleep::Until(Some(deadline)) => at < deadline,
        }
    }
}

struct Shared {
    core: Mutex<Core>,
    hca: Mutex<Box<dyn Hca + Send>>,
    timer_cv: Condvar,
    /// Signalled whenever a drain ends, for [`ThreadedBus::wait_idle`].
    idle_cv: Condvar,
    clock: Clock,
}

/// A handle on the threaded bus, cheap to clone, handed to every callback.
#[derive(Clone)]
pub struct ThreadedBus {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ThreadedBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadedBus").finish_non_exhaustive()
    }
}

/// Owns the timer thread; dropping it stops the thread.
#[derive(Debug)]
pub struct ThreadedHost {
    bus: ThreadedBus,
    timer_thread: Option<JoinHandle<()>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Callbacks never run under these locks, so a poisoned lock means a bug in this file,
    // after which the data is still consistent enough to report from.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ThreadedHost {
    pub fn start<H: Hca + Send + 'static>(config: Config, mut hca: H) -> Result<Self, StartError> {
        let identity = hca.identity().map_err(StartError::Hardware)?;
        let clock = Clock::start();
        let coord =
            Coordinator::new(config, identity, Instant::ZERO).map_err(StartError::Policy)?;
        let max = coord.max_clients();
        let shared = Arc::new(Shared {
            core: Mutex::new(Core {
                coord,
                callbacks: (0..max).map(|_| None).collect(),
                draining: false,
                timers: TimerTable::default(),
                shutdown: false,
                pnp_operations: 0,
                callback_panics: 0,
                timer_sleep: TimerSleep::Awake,
                idle_waiters: 0,
            }),
            hca: Mutex::new(Box::new(hca)),
            timer_cv: Condvar::new(),
            idle_cv: Condvar::new(),
            clock,
        });
        let bus = ThreadedBus { shared };
        bus.drain();
        let timer_bus = bus.clone();
        let timer_thread = thread::Builder::new()
            .name("hcabus-timers".into())
            .spawn(move || timer_bus.timer_loop())
            .map_err(|_| StartError::TimerThread)?;
        Ok(ThreadedHost {
            bus,
            timer_thread: Some(timer_thread),
        })
    }

    pub fn bus(&self) -> &ThreadedBus {
        &self.bus
    }
}

impl Drop for ThreadedHost {
    fn drop(&mut self) {
        lock(&self.bus.shared.core).shutdown = true;
        self.bus.shared.timer_cv.notify_all();
        if let Some(t) = self.timer_thread.take() {
            let _ = t.join();
        }
    }
}

impl ThreadedBus {
    pub fn now(&self) -> Instant {
        self.shared.clock.now()
    }

    pub fn register(
        &self,
        desc: ClientDesc,
        client: Callback,
    ) -> Result<Registration, RegisterError> {
        let reg = self.register_queued(desc, client)?;
        self.drain();
        Ok(reg)
    }

    /// Registers without running what it sets in motion: for a caller that drains later.
    pub(crate) fn register_queued(
        &self,
        desc: ClientDesc,
        client: Callback,
    ) -> Result<Registration, RegisterError> {
        let old;
        let reg = {
            let mut core = lock(&self.shared.core);
            let now = self.now();
            let reg = core.coord.register(now, desc)?;
            old = core.callbacks[usize::from(reg.id.index)].replace((reg.id, client));
            reg
        };
        // A previous occupant's callback is dropped outside the lock: its Drop may do anything.
        drop(old);
        Ok(reg)
    }

    pub fn unregister(&self, id: ClientId) -> Result<(), UnregisterError> {
        self.unregister_queued(id)?;
        self.drain();
        Ok(())
    }

    /// Unregisters without running what it sets in motion.
    pub(crate) fn unregister_queued(&self, id: ClientId) -> Result<(), UnregisterError> {
        let old;
        {
            let mut core = lock(&self.shared.core);
            let now = self.now();
            core.coord.unregister(now, id)?;
            old = core.callbacks[usize::from(id.index)].take();
        }
        drop(old);
        Ok(())
    }

    pub fn reset_request(&self, id: ClientId) -> Result<Epoch, RequestError> {
        self.call(|c, now| c.reset_request(now, id))
    }

    pub fn reset_execute(
        &self,
        id: ClientId,
        epoch: Epoch,
    ) -> Result<ExecuteOutcome, ExecuteError> {
        self.call(|c, now| c.reset_execute(now, id, epoch))
    }

    pub fn reset_consent(&self, id: ClientId, epoch: Epoch) -> Result<(), ConsentError> {
        self.call(|c, now| c.reset_consent(now, id, epoch))
    }

    pub fn reset_veto(
        &self,
        id: ClientId,
        epoch: Epoch,
        reason: VetoReason,
    ) -> Result<(), VetoError> {
        self.call(|c, now| c.reset_veto(now, id, epoch, reason))
    }

    pub fn admin_reset(&self, kind: AdminReset) -> Result<Epoch, AdminResetError> {
        self.call(|c, now| c.admin_reset(now, kind))
    }

    pub fn admin_restart(&self) -> Result<Epoch, RestartError> {
        self.call(|c, now| c.admin_restart(now))
    }

    pub fn surprise_removal(&self) {
        self.call(|c, now| c.surprise_removal(now))
    }

    pub fn command_timeout(&self) {
        self.call(|c, now| c.command_timeout(now))
    }

    /// Reads the coordinator (state, clients, flight recorder) under the lock.
    pub fn inspect<R>(&self, f: impl FnOnce(&Coordinator) -> R) -> R {
        f(&lock(&self.shared.core).coord)
    }

    pub fn state(&self) -> State {
        self.inspect(Coordinator::state)
    }

    pub fn epoch(&self) -> Epoch {
        self.inspect(Coordinator::epoch)
    }

    pub fn policy(&self) -> Policy {
        self.inspect(|c| *c.policy())
    }

    /// Blocks until no reset is in progress and every action has been executed, or until
    /// `timeout`; `Ok(false)` on timeout. A blocking call: refused at DISPATCH_LEVEL (from a
    /// callback, where waiting for the reset would wait for itself).
    pub fn wait_idle(&self, timeout: std::time::Duration) -> Result<bool, BlockAtDispatch> {
        verifier::check_may_block("ThreadedBus::wait_idle")?;
        let until = std::time::Instant::now() + timeout;
        let mut core = lock(&self.shared.core);
        core.idle_waiters += 1;
        let idle = loop {
            if !core.draining
                && core.coord.pending_actions() == 0
                && !core.coord.reset_in_progress()
            {
                break true;
            }
            let left = until.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break false;
            }
            core = self
                .shared
                .idle_cv
                .wait_timeout(core, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        };
        core.idle_waiters -= 1;
        Ok(idle)
    }

    pub fn pnp_operations(&self) -> u64 {
        lock(&self.shared.core).pnp_operations
    }

    /// Callbacks that panicked (contained: the event counts as delivered).
    pub fn callback_panics(&self) -> u64 {
        lock(&self.shared.core).callback_panics
    }

    fn call<R>(&self, f: impl FnOnce(&mut Coordinator, Instant) -> R) -> R {
        let r = self.call_queued(f);
        self.drain();
        r
    }

    /// A call whose actions wait for the next [`ThreadedBus::drain`].
    pub(crate) fn call_queued<R>(&self, f: impl FnOnce(&mut Coordinator, Instant) -> R) -> R {
        let mut core = lock(&self.shared.core);
        let now = self.now();
        f(&mut core.coord, now)
    }

    /// Executes queued actions unless another thread already does (it will see ours).
    pub fn drain(&self) {
        let mut core = lock(&self.shared.core);
        if core.draining {
            return;
        }
        core.draining = true;
        loop {
            let Some(action) = core.coord.pop_action() else {
                core.draining = false;
                if core.idle_waiters > 0 {
                    self.shared.idle_cv.notify_all();
                }
                return;
            };
            match action {
                Action::Deliver { client, event } => {
                    // A client that unregistered after this event was queued has no
                    // callback any more: the event is dropped, still reported delivered.
                    let cb = match &core.callbacks[usize::from(client.index)] {
                        Some((id, cb)) if *id == client => Some(Arc::clone(cb)),
                        _ => None,
                    };
                    drop(core);
                    let mut panicked = false;
                    if let Some(cb) = cb {
                        // Callbacks run under DISPATCH_LEVEL rules: no blocking.
                        let _irql = verifier::raise_to_dispatch();
                        // A client that panics must not stall everyone else: without this the
                        // unwind would leave `draining` set and the delivery unreported.
                        panicked = std::panic::catch_unwind(AssertUnwindSafe(|| {
                            cb.on_event(self, client, event)
                        }))
                        .is_err();
                    }
                    core = lock(&self.shared.core);
                    if panicked {
                        core.callback_panics += 1;
                        log::error!("callback of {client} panicked on {}", event.kind());
                    }
                    let now = self.now();
                    core.coord.event_delivered(now, client, event.kind());
                }
                Action::ArmTimer { at, .. } => {
                    core.timers.apply(&action);
                    if core.timer_sleep.must_wake_for(at) {
                        self.shared.timer_cv.notify_all();
                    }
                }
                Action::CancelTimer { .. } => {
                    core.timers.apply(&action);
                }
                Action::Hw(step) => {
                    drop(core);
                    let done = execute(&mut **lock(&self.shared.hca), step);
                    core = lock(&self.shared.core);
                    let now = self.now();
                    core.coord.hw_complete(now, done);
                }
                Action::Pnp(_) => core.pnp_operations += 1,
                Action::ResetConcluded { .. } => {}
            }
        }
    }

    fn timer_loop(&self) {
        let mut core = lock(&self.shared.core);
        loop {
            if core.shutdown {
                return;
            }
            let now = self.now();
            if let Some((t, token)) = core.timers.take_first_due(now) {
                core.coord.timer_expired(now, t, token);
                drop(core);
                self.drain();
                core = lock(&self.shared.core);
                continue;
            }
            let next = core.timers.next_deadline();
            // Set under the lock the wait releases: an arm after this sees it.
            core.timer_sleep = TimerSleep::Until(next);
            core = match next {
                Some(at) => {
                    let s = &self.shared;
                    s.clock.wait_until(&s.timer_cv, &s.core, core, at)
                }
                None => self
                    .shared
                    .timer_cv
                    .wait(core)
                    .unwrap_or_else(PoisonError::into_inner),
            };
            core.timer_sleep = TimerSleep::Awake;
        }
    }
}
