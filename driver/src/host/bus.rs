//! The bus: the coordinator behind the one spin lock, and every input that reaches it.
//!
//! Every input (a client's call, an IOCTL, a timer, a hardware completion, surprise removal)
//! runs under the spin lock and only queues what it sets in motion; then the delivery DPC is
//! queued ([`Bus::kick`]). What the DPC and the work item do with the queue is in drain.rs.

use alloc::vec::Vec;

use crate::bus::{calls_as_inputs, with_client_calls};
use crate::coordinator::{Config, Coordinator, ExecuteOutcome, Registration};
use crate::errors::*;
use crate::hca::{Hca, HwError, HwStep};
use crate::host::{EventLogEntry, Lock, Platform, PlatformError, ResetSpan, Scheduled};
use crate::ioctl::{dispatch, IoctlDevice, Reply, Rights};
use crate::policy::{Policy, PolicyError};
use crate::reserve::Fifo;
use crate::time::Instant;
use crate::timers::TimerTable;
use crate::types::*;

/// Hardware steps waiting for the work item: the coordinator has at most one reset step and
/// one health read outstanding; the rest is margin, and overflow is logged, never silent.
const HW_QUEUE: usize = 8;
/// Event log entries waiting for the work item.
const LOG_QUEUE: usize = 16;

/// Everything under the spin lock.
pub(super) struct Core<C> {
    /// In pool memory, not inline: the coordinator is kilobytes, and a bus that carried it by
    /// value would be copied through every frame that builds it (a kernel stack is 24 KiB,
    /// with PnP and KMDF beneath prepare hardware; `linkcheck.sh` measures each frame).
    pub(super) coord: alloc::boxed::Box<Coordinator>,
    /// Each registered client's callback, by slot.
    pub(super) callbacks: Vec<Option<(ClientId, C)>>,
    pub(super) timers: TimerTable,
    pub(super) hw_queue: Fifo<HwStep>,
    pub(super) log_queue: Fifo<EventLogEntry>,
    /// One drainer at a time: a second DPC (or a second thread, on a host that drains on the
    /// caller's thread) may start while the first has the lock dropped around a callback.
    pub(super) draining: bool,
    /// One runner of the work item at a time, so that hardware steps run in the order the
    /// coordinator asked for them.
    pub(super) stepping: bool,
    /// Where the scan of the flight recorder (the trace, the event log) stopped.
    pub(super) log_seq: u64,
    /// The reset under way as far as the scan has read ([`ResetSpan::follow`]).
    pub(super) traced_reset: Option<ResetSpan>,
    /// Hardware steps or log entries that found their queue full (logged, counted).
    pub(super) overflows: u32,
    /// The callback the drain is running, with the lock released: what Unregister's
    /// rundown waits for. One drainer at a time, so at most one.
    pub(super) running: Option<Running>,
    /// The device is in D0 (power.rs): hardware steps run and timers are armed only then.
    pub(super) powered: bool,
}

/// A callback under way: whose, and in which context ([`Platform::context`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Running {
    pub(super) client: ClientId,
    pub(super) context: usize,
}

/// Why the bus could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NewError {
    /// The device did not give its identity.
    #[error("cannot read the device identity: {0}")]
    Hardware(HwError),
    #[error("invalid policy: {0}")]
    Policy(PolicyError),
    /// A lock the platform could not create.
    #[error("{0}")]
    Platform(PlatformError),
    /// Pool memory for the bus's coordinator or its queues could not be had.
    #[error("no memory for the bus")]
    OutOfMemory,
}

/// What an empty slot of the event log queue holds (never written to the log).
const NO_ENTRY: EventLogEntry = EventLogEntry::ResetRestored { epoch: 0 };

/// The bus of one HCA: on Windows from EvtDevicePrepareHardware to EvtDeviceReleaseHardware.
pub struct Bus<P: Platform> {
    pub(super) platform: P,
    pub(super) core: P::SpinLock<Core<P::Callback>>,
    pub(super) hca: P::WaitLock<P::Hca>,
}

impl<P: Platform> core::fmt::Debug for Bus<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Bus").finish_non_exhaustive()
    }
}

impl<P: Platform> Bus<P> {
    /// Reads the adapter's identity, builds the coordinator and reserves everything it will
    /// ever need; then queues the DPC for the coordinator's first actions (the health poll's
    /// timer). Nothing here allocates afterwards.
    pub fn new(platform: P, config: Config, hca: P::Hca) -> Result<Self, NewError> {
        let (core, hca) = Self::locked_parts(&platform, config, hca)?;
        let bus = Bus {
            core,
            hca,
            platform,
        };
        bus.kick();
        Ok(bus)
    }

    /// [`Bus::new`] written into `room` (a kernel host's pool memory), so that no frame
    /// between prepare hardware and the bus carries it by value (a kernel stack is 24 KiB).
    /// On an error nothing was written to `room`.
    pub fn init_in(
        room: &mut core::mem::MaybeUninit<Self>,
        platform: P,
        config: Config,
        hca: P::Hca,
    ) -> Result<&mut Self, NewError> {
        let (core, hca) = Self::locked_parts(&platform, config, hca)?;
        let bus = room.write(Bus {
            core,
            hca,
            platform,
        });
        bus.kick();
        Ok(bus)
    }

    /// The coordinator and what surrounds it behind the spin lock, and the adapter behind the
    /// wait lock.
    #[allow(clippy::type_complexity)]
    fn locked_parts(
        platform: &P,
        config: Config,
        mut hca: P::Hca,
    ) -> Result<(P::SpinLock<Core<P::Callback>>, P::WaitLock<P::Hca>), NewError> {
        let identity = hca.identity().map_err(NewError::Hardware)?;
        let coord = platform.new_coordinator(config, identity, platform.now())?;
        let max = coord.max_clients();
        let core = Core {
            coord,
            callbacks: platform
                .filled("max_clients", max, None)
                .map_err(|e| NewError::Policy(e.into()))?,
            timers: TimerTable::default(),
            hw_queue: Fifo::reserved(platform, "hardware queue", HW_QUEUE, HwStep::ReadHealth)
                .map_err(|_| NewError::OutOfMemory)?,
            log_queue: Fifo::reserved(platform, "event log queue", LOG_QUEUE, NO_ENTRY)
                .map_err(|_| NewError::OutOfMemory)?,
            draining: false,
            stepping: false,
            log_seq: 0,
            traced_reset: None,
            overflows: 0,
            running: None,
            powered: true,
        };
        Ok((
            platform.spin_lock(core).map_err(NewError::Platform)?,
            platform.wait_lock(hca).map_err(NewError::Platform)?,
        ))
    }

    pub fn platform(&self) -> &P {
        &self.platform
    }

    /// The bus clock.
    pub fn now(&self) -> Instant {
        self.platform.now()
    }

    /// Reads the coordinator (state, clients, flight recorder) under the lock.
    pub fn inspect<R>(&self, f: impl FnOnce(&Coordinator) -> R) -> R {
        self.core.with(|c| f(&c.coord))
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

    /// Hardware steps and log entries that found their queue full.
    pub fn overflows(&self) -> u32 {
        self.core.with(|c| c.overflows)
    }

    /// No reset in progress, and nothing queued or running: what a host waits for.
    pub fn is_idle(&self) -> bool {
        self.core.with(|c| {
            !c.draining
                && !c.stepping
                && c.hw_queue.is_empty()
                && c.log_queue.is_empty()
                && c.coord.pending_actions() == 0
                && !c.coord.reset_in_progress()
        })
    }

    /// Queues the delivery DPC, or drains here on a platform without DPCs.
    pub fn kick(&self) {
        if self.platform.queue_dpc() == Scheduled::RunHere {
            self.dpc();
        }
    }

    /// One input under the lock, then the DPC for what it set in motion.
    pub fn input<R>(&self, f: impl FnOnce(&mut Coordinator, Instant) -> R) -> R {
        let now = self.platform.now();
        let r = self.core.with(|c| f(&mut c.coord, now));
        self.kick();
        r
    }

    // ----- the bus interface (docs/design.md, "The bus interface") -------------------------

    /// Registers `desc`; later events for its id go to `callback`.
    pub fn register(
        &self,
        desc: ClientDesc,
        callback: P::Callback,
    ) -> Result<Registration, RegisterError> {
        let now = self.platform.now();
        let (r, old) = self.core.with(|c| match c.coord.register(now, desc) {
            Ok(reg) => {
                let old = c.callbacks[usize::from(reg.id.index)].replace((reg.id, callback));
                (Ok(reg), old)
            }
            Err(e) => (Err(e), None),
        });
        // A previous occupant's callback is dropped outside the lock: its Drop may do
        // anything.
        drop(old);
        self.kick();
        r
    }

    /// Unregister is a rundown (docs/design.md §3): at PASSIVE_LEVEL, from outside the
    /// client's own callbacks, it returns only once no callback of the client is running and
    /// none will start, so the child may free its context and unload. From inside its own
    /// callback it returns at once (waiting would wait for itself), and nothing follows that
    /// callback. At DISPATCH_LEVEL it cannot wait: no later callback starts, but one already
    /// running on another processor may still be finishing.
    pub fn unregister(&self, id: ClientId) -> Result<(), UnregisterError> {
        let now = self.platform.now();
        let here = self.platform.context();
        let (r, old, elsewhere) = self.core.with(|c| match c.coord.unregister(now, id) {
            Ok(()) => {
                let old = c.callbacks[usize::from(id.index)].take();
                let elsewhere = c
                    .running
                    .is_some_and(|r| r.client == id && r.context != here);
                (Ok(()), old, elsewhere)
            }
            Err(e) => (Err(e), None, false),
        });
        drop(old);
        self.kick();
        if elsewhere {
            self.run_down(id);
        }
        r
    }

    /// Waits until no callback of `id` is running. A callback may not block, so the wait
    /// ends when that callback returns.
    fn run_down(&self, id: ClientId) {
        if self.platform.at_dispatch() {
            log::warn!("unregister of {id} at DISPATCH_LEVEL: its running callback not waited for");
            return;
        }
        loop {
            // Read before looking, so that an end between the look and the wait is seen.
            let seen = self.platform.deliveries_ended();
            if !self
                .core
                .with(|c| c.running.is_some_and(|r| r.client == id))
            {
                return;
            }
            self.platform.wait_delivery_end(seen);
        }
    }

    with_client_calls!(calls_as_inputs pub &self;);

    // ----- the administrator, PnP and power ------------------------------------------------

    pub fn admin_reset(&self, kind: AdminReset) -> Result<Epoch, AdminResetError> {
        self.input(|c, now| c.admin_reset(now, kind))
    }

    pub fn admin_restart(&self) -> Result<Epoch, RestartError> {
        self.input(|c, now| c.admin_restart(now))
    }

    /// A command to the device timed out (the command interface's watchdog).
    pub fn command_timeout(&self) {
        self.input(|c, now| c.command_timeout(now));
    }

    /// EvtDeviceSurpriseRemoval: every wait ends, DEVICE_FATAL to everyone.
    pub fn surprise_removal(&self) {
        self.input(|c, now| c.surprise_removal(now));
    }

    /// EvtIoDeviceControl: METHOD_BUFFERED, so input and output are the one system buffer's
    /// two views, with the lengths the request carries; `rights` come from the handle.
    pub fn device_control(
        &self,
        code: u32,
        input: &[u8],
        output: &mut [u8],
        rights: Rights,
    ) -> Reply {
        struct Device<'a> {
            coord: &'a mut Coordinator,
            now: Instant,
            wall_ms: Option<u64>,
        }
        impl IoctlDevice for Device<'_> {
            fn coordinator(&mut self) -> &mut Coordinator {
                self.coord
            }
            fn now(&self) -> Instant {
                self.now
            }
            fn wall_clock_unix_ms(&self) -> Option<u64> {
                self.wall_ms
            }
        }
        let wall_ms = self.platform.wall_clock_unix_ms();
        self.input(|coord, now| {
            let mut device = Device {
                coord,
                now,
                wall_ms,
            };
            dispatch(&mut device, code, input, output, rights)
        })
    }

    /// The timer kept for `timer` fired (DISPATCH_LEVEL). A timer stopped or re-armed since
    /// it was set is not due in the table: ignored.
    pub fn timer_fired(&self, timer: TimerId) {
        let now = self.platform.now();
        self.core.with(|c| {
            if let Some(token) = c.timers.take_if_due(timer, now) {
                c.coord.timer_expired(now, timer, token);
            }
        });
        self.kick();
    }

    /// The adapter, for a test to look at (the wait lock is taken).
    pub fn with_hca<R>(&self, f: impl FnOnce(&mut P::Hca) -> R) -> R {
        self.hca.with(f)
    }
}
