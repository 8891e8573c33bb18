//! What the one locked host needs from the system it runs on, as a trait: locks, timers,
//! deferred calls, the clock, client callbacks, PnP, the event log and tracing.
//!
//! Three platforms implement it: the KMDF driver's (WDFSPINLOCK, WDFTIMER, WDFDPC,
//! WDFWORKITEM; driver/kmdf/src/windows), the threaded host's on std ([`crate::host::threaded`]:
//! mutexes, a timer thread, deferred calls run by the calling thread) and the shuttle suite's
//! (tests/shuttle: the same on shuttle's primitives and a virtual clock). The kmdf crate's
//! fake kernel is a fourth, which records every call with the IRQL it was made at.

use alloc::boxed::Box;

use crate::coordinator::{Config, Coordinator};
use crate::hca::{Hca, Identity};
use crate::host::{Bus, EventLogEntry, NewError, ResetSpan};
use crate::recorder::Record;
use crate::reserve::Reserve;
use crate::time::Instant;
use crate::types::{ClientId, Event, PnpOp, TimerId};

/// A lock the platform provides: the bus's one spin lock (WDFSPINLOCK, which raises to
/// DISPATCH_LEVEL while held) or the hardware's wait lock (WDFWAITLOCK, PASSIVE_LEVEL, for
/// config-space steps). `with` must not be re-entered on the same thread.
pub trait Lock<T> {
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R;
    /// Deletes the lock and gives back what it guarded: what outlives a PnP stop
    /// ([`Bus::park`]) leaves the locks of that start behind.
    fn into_inner(self) -> T;
}

/// What a platform did with a deferred call ([`Platform::queue_dpc`],
/// [`Platform::queue_work_item`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheduled {
    /// Queued: the platform calls [`Bus::dpc`] or [`Bus::work_item`] later, from its own
    /// context (a DPC, a system worker thread).
    Queued,
    /// Not queued: the caller runs it now, on its own thread (a host with no DPCs). The bus
    /// lets one thread drain at a time, so a second caller returns at once and the first
    /// finds its work.
    RunHere,
}

/// The system the bus runs on; its pool gives the bus's reserved memory ([`Reserve`]: the
/// heap's `Vec` methods by default).
pub trait Platform: Sized + Reserve {
    /// What the locks guard may move between processors: `Send`.
    type SpinLock<T: Send>: Lock<T>;
    type WaitLock<T: Send>: Lock<T>;
    /// The adapter the hardware steps run on, behind the wait lock.
    type Hca: Hca + Send;
    /// A client's event callback: the C ABI's function pointer and context on Windows.
    type Callback: Clone + Send;

    /// The bus clock (KeQueryInterruptTime on Windows).
    fn now(&self) -> Instant;
    /// The system's time of day, in milliseconds since the Unix epoch (KeQuerySystemTimePrecise
    /// on Windows), for QUERY_STATE's wall-clock time of the bus's time zero; `None` where
    /// there is none.
    fn wall_clock_unix_ms(&self) -> Option<u64> {
        None
    }
    /// The coordinator in pool memory. By default `Coordinator::new_boxed`, whose box is
    /// `Box::new`'s (an allocation failure aborts); a kernel allocates the room fallibly and
    /// builds it there with `Coordinator::init_in` ([`NewError::OutOfMemory`] when short).
    fn new_coordinator(
        &self,
        config: Config,
        identity: Identity,
        now: Instant,
    ) -> Result<Box<Coordinator>, NewError> {
        Coordinator::new_boxed(config, identity, now).map_err(NewError::Policy)
    }
    /// WdfSpinLockCreate, at PASSIVE_LEVEL while the device is prepared. A lock the system
    /// could not create is an error: a null WDFSPINLOCK bugchecks on its first acquire.
    fn spin_lock<T: Send>(&self, value: T) -> Result<Self::SpinLock<T>, PlatformError>;
    /// WdfWaitLockCreate, likewise.
    fn wait_lock<T: Send>(&self, value: T) -> Result<Self::WaitLock<T>, PlatformError>;
    /// Starts the timer kept for `timer`, due on the bus clock at `due`; the platform then
    /// calls [`Bus::timer_fired`].
    fn arm_timer(&self, timer: TimerId, due: Instant);
    /// Stops it without waiting: a timer that fires anyway is stale and ignored.
    fn cancel_timer(&self, timer: TimerId);
    /// The delivery DPC (a DPC already queued is not queued twice).
    fn queue_dpc(&self) -> Scheduled;
    /// The PASSIVE_LEVEL hardware work item.
    fn queue_work_item(&self) -> Scheduled;
    /// Calls a client's callback. Called at DISPATCH_LEVEL with the bus lock released; the
    /// bus is given so that the callback may call it.
    fn deliver(bus: &Bus<Self>, callback: &Self::Callback, client: ClientId, event: Event);
    /// A PnP operation on the child list (a replaced or removed device only).
    fn pnp(&self, op: PnpOp);
    /// Writes an entry to the system event log (PASSIVE_LEVEL, from the work item).
    fn log_event(&self, entry: EventLogEntry);
    /// Hands a flight record to the system's tracing (ETW on Windows): each record once, in
    /// order, with the reset it falls in (its repeats after that are the recorder's count;
    /// records the ring overwrote before a drain are logged, not traced). Called at the end of a drain, at DISPATCH_LEVEL with
    /// the bus lock held: it must not block, allocate or call the bus. Nothing by default.
    fn trace(&self, _record: &Record, _reset: Option<ResetSpan>) {}
    /// A drain (the DPC or the work item) has ended: a host that waits for the bus to go
    /// idle looks again. Nothing by default.
    fn settled(&self) {}

    // ----- Unregister's rundown and the caller's IRQL (docs/design.md §3) -----------------

    /// Whether the caller runs at DISPATCH_LEVEL (KeGetCurrentIrql): a call made there
    /// never runs a callback on its own processor, and cannot wait.
    fn at_dispatch(&self) -> bool;
    /// The calling context (a thread, or the DPC running on top of one): equal for two
    /// calls made from one context at once, different for contexts running side by side.
    fn context(&self) -> usize;
    /// A callback returned (the DPC, lock released): wakes the rundowns waiting.
    fn delivery_ended(&self);
    /// How many callbacks have returned: a rundown reads it before it looks at the bus.
    fn deliveries_ended(&self) -> u64;
    /// Blocks the calling PASSIVE_LEVEL thread until [`Platform::deliveries_ended`] is no
    /// longer `seen` (or spuriously: the caller looks again).
    fn wait_delivery_end(&self, seen: u64);

    // ----- device power (docs/design.md, "Device power and PnP stops") --------------------

    /// Blocks the calling PASSIVE_LEVEL thread for about `ms` milliseconds while the rest of
    /// the system runs on (KeDelayExecutionThread): D0Exit waits so for a reset in flight.
    /// `false` where the caller cannot wait (a host that runs everything on one thread): the
    /// reset is then held, not waited for.
    fn delay_ms(&self, _ms: u32) -> bool {
        false
    }
}

/// A system call that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PlatformError {
    /// No memory BAR among the translated resources, or mapping it failed.
    #[error("no memory BAR to map")]
    NoRegisters,
    /// The PCI bus interface for config space was not given.
    #[error("no PCI bus interface for config space")]
    NoConfigSpace,
    /// A system call returned this NTSTATUS.
    #[error("system call failed: 0x{0:08X}")]
    Status(u32),
}
