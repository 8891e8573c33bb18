//! The bus of one HCA inside the KMDF driver: the coordinator behind the one spin lock, its
//! actions mapped onto KMDF objects.
//!
//! * every input (a client's call through the C ABI, an IOCTL, a timer, a hardware
//!   completion, surprise removal) runs under the spin lock and only queues what it sets in
//!   motion; then the delivery DPC is queued;
//! * the DPC ([`Bus::dpc`], DISPATCH_LEVEL) drains the actions: it delivers each event with
//!   the lock released, arms and stops WDFTIMERs, hands hardware steps to the work item and
//!   PnP operations to the child list;
//! * the work item ([`Bus::work_item`], PASSIVE_LEVEL) runs hardware steps, which touch config
//!   space (not allowed at DISPATCH_LEVEL), under the hardware's wait lock, and writes the
//!   System event log entries the drain left it.
//!
//! Everything is reserved when the device is prepared ([`Bus::prepare`]); nothing here
//! allocates afterwards.

use alloc::vec::Vec;

use hcabus::bus_abi::HcabusEvent;
use hcabus::coordinator::{Action, Config, Coordinator, ExecuteOutcome, Registration};
use hcabus::errors::*;
use hcabus::hca::{execute, Hca, HwError, HwStep};
use hcabus::ioctl::Rights;
use hcabus::ioctl::{dispatch, IoctlDevice, Reply};
use hcabus::mmio::MmioHca;
use hcabus::recorder::RecordKind;
use hcabus::timers::TimerTable;
use hcabus::types::*;
use hcabus::{Instant, PolicyError};

use crate::platform::{ChildFunction, EventLogEntry, Lock, Platform, PlatformError};
use hcabus_cabi::{CBus, CCallback};

/// Hardware steps waiting for the work item: the coordinator has at most one reset step and
/// one health read outstanding; the rest is margin, and overflow is logged, never silent.
const HW_QUEUE: usize = 8;
/// Event log entries waiting for the work item.
const LOG_QUEUE: usize = 16;

/// What the driver is configured with (from the registry's Parameters key on Windows).
#[derive(Debug, Clone, Copy)]
pub struct BusConfig {
    pub coordinator: Config,
    /// IB ports: one IPoIB child each.
    pub ports: u8,
}

/// Why EvtDevicePrepareHardware failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrepareError {
    Platform(PlatformError),
    /// The device did not give its identity.
    Hardware(HwError),
    Policy(PolicyError),
    /// More ports than the child list names (1..=2).
    Ports(u8),
}

impl core::fmt::Display for PrepareError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PrepareError::Platform(e) => write!(f, "{e}"),
            PrepareError::Hardware(e) => write!(f, "cannot read the device identity: {e}"),
            PrepareError::Policy(e) => write!(f, "invalid policy: {e}"),
            PrepareError::Ports(n) => write!(f, "{n} ports: the bus enumerates 1 or 2"),
        }
    }
}

impl core::error::Error for PrepareError {}

/// Everything under the spin lock.
#[derive(Debug)]
struct Core<C> {
    coord: Coordinator,
    /// Each registered client's callback, by slot.
    callbacks: Vec<Option<(ClientId, C)>>,
    timers: TimerTable,
    hw_queue: Vec<HwStep>,
    log_queue: Vec<EventLogEntry>,
    /// One drainer at a time: a DPC runs on one processor, but a second DPC could be queued
    /// while the first has the lock dropped around a callback.
    draining: bool,
    /// Where the event-log scan of the flight recorder stopped.
    log_seq: u64,
    /// Hardware steps or log entries that found their queue full (logged, counted).
    overflows: u32,
}

/// The bus of one HCA, from EvtDevicePrepareHardware to EvtDeviceReleaseHardware.
#[derive(Debug)]
pub struct Bus<P: Platform> {
    platform: P,
    core: P::SpinLock<Core<P::Callback>>,
    hca: P::WaitLock<MmioHca<P::Regs>>,
}

impl<P: Platform> Bus<P> {
    /// EvtDevicePrepareHardware (PASSIVE_LEVEL): map the registers, read the identity, build
    /// the coordinator and reserve everything it will ever need, report the children.
    pub fn prepare(mut platform: P, config: BusConfig) -> Result<Self, PrepareError> {
        if !(1..=2).contains(&config.ports) {
            return Err(PrepareError::Ports(config.ports));
        }
        let regs = platform.map_registers().map_err(PrepareError::Platform)?;
        let mut hca = MmioHca::new(regs);
        let identity = hca.identity().map_err(PrepareError::Hardware)?;
        let now = platform.now();
        let coord =
            Coordinator::new(config.coordinator, identity, now).map_err(PrepareError::Policy)?;
        let max = coord.max_clients();
        let mut core = Core {
            coord,
            callbacks: Vec::with_capacity(max),
            timers: TimerTable::default(),
            hw_queue: Vec::with_capacity(HW_QUEUE),
            log_queue: Vec::with_capacity(LOG_QUEUE),
            draining: false,
            log_seq: 0,
            overflows: 0,
        };
        core.callbacks.resize_with(max, || None);
        for port in 1..=config.ports {
            platform
                .child_present(ChildFunction::Ipoib { port })
                .map_err(PrepareError::Platform)?;
        }
        platform
            .child_present(ChildFunction::Srp)
            .map_err(PrepareError::Platform)?;
        let bus = Bus {
            core: platform.spin_lock(core).map_err(PrepareError::Platform)?,
            hca: platform.wait_lock(hca).map_err(PrepareError::Platform)?,
            platform,
        };
        // The coordinator's first actions (the health poll's timer).
        bus.platform.queue_dpc();
        Ok(bus)
    }

    pub fn platform(&self) -> &P {
        &self.platform
    }

    /// Reads the coordinator under the lock.
    pub fn inspect<R>(&self, f: impl FnOnce(&Coordinator) -> R) -> R {
        self.core.with(|c| f(&c.coord))
    }

    /// Hardware steps and log entries that found their queue full.
    pub fn overflows(&self) -> u32 {
        self.core.with(|c| c.overflows)
    }

    /// One input under the lock, then the DPC is queued for what it set in motion.
    fn input<R>(&self, f: impl FnOnce(&mut Core<P::Callback>, Instant) -> R) -> R {
        let now = self.platform.now();
        let r = self.core.with(|c| f(c, now));
        self.platform.queue_dpc();
        r
    }

    // ----- the bus interface (SPEC §3), as the C ABI's functions call it -------------------

    pub fn register(
        &self,
        desc: ClientDesc,
        callback: P::Callback,
    ) -> Result<Registration, RegisterError> {
        self.input(|c, now| {
            let reg = c.coord.register(now, desc)?;
            // The slot's previous callback (a C function pointer and context) needs no drop.
            c.callbacks[usize::from(reg.id.index)] = Some((reg.id, callback));
            Ok(reg)
        })
    }

    pub fn unregister(&self, id: ClientId) -> Result<(), UnregisterError> {
        self.input(|c, now| {
            c.coord.unregister(now, id)?;
            c.callbacks[usize::from(id.index)] = None;
            Ok(())
        })
    }

    pub fn reset_request(&self, id: ClientId) -> Result<Epoch, RequestError> {
        self.input(|c, now| c.coord.reset_request(now, id))
    }

    pub fn reset_execute(
        &self,
        id: ClientId,
        epoch: Epoch,
    ) -> Result<ExecuteOutcome, ExecuteError> {
        self.input(|c, now| c.coord.reset_execute(now, id, epoch))
    }

    pub fn reset_consent(&self, id: ClientId, epoch: Epoch) -> Result<(), ConsentError> {
        self.input(|c, now| c.coord.reset_consent(now, id, epoch))
    }

    pub fn reset_veto(
        &self,
        id: ClientId,
        epoch: Epoch,
        reason: VetoReason,
    ) -> Result<(), VetoError> {
        self.input(|c, now| c.coord.reset_veto(now, id, epoch, reason))
    }

    /// State and epoch, for the C ABI's QueryState.
    pub fn state(&self) -> (State, Epoch, Instant) {
        let now = self.platform.now();
        self.core.with(|c| (c.coord.state(), c.coord.epoch(), now))
    }

    // ----- PnP and power -------------------------------------------------------------------

    /// EvtDeviceSurpriseRemoval: every wait ends, DEVICE_FATAL to everyone.
    pub fn surprise_removal(&self) {
        self.input(|c, now| c.coord.surprise_removal(now));
    }

    /// EvtDeviceD0Exit. Leaving D0 for good (D3Final: the device is being removed) ends the
    /// bus as a removal does; a sleep transition leaves the coordinator alone, since the
    /// children, powered down first in PnP order, hold nothing by then.
    pub fn d0_exit(&self, final_exit: bool) {
        if final_exit {
            self.surprise_removal();
        }
    }

    // ----- the control device's IOCTL queue ------------------------------------------------

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
        }
        impl IoctlDevice for Device<'_> {
            fn coordinator(&mut self) -> &mut Coordinator {
                self.coord
            }
            fn now(&self) -> Instant {
                self.now
            }
        }
        self.input(|c, now| {
            let mut dev = Device {
                coord: &mut c.coord,
                now,
            };
            dispatch(&mut dev, code, input, output, rights)
        })
    }

    // ----- KMDF callbacks ------------------------------------------------------------------

    /// EvtTimerFunc of the WDFTIMER kept for `timer` (DISPATCH_LEVEL). A timer stopped or
    /// re-armed since it was set is not due in the table: ignored.
    pub fn timer_fired(&self, timer: TimerId) {
        self.input(|c, now| {
            if let Some(token) = c.timers.take_if_due(timer, now) {
                c.coord.timer_expired(now, timer, token);
            }
        });
    }

    /// EvtDpcFunc (DISPATCH_LEVEL): drains the coordinator's actions.
    pub fn dpc(&self) {
        let started = self
            .core
            .with(|c| !core::mem::replace(&mut c.draining, true));
        if !started {
            return;
        }
        let mut work = false;
        loop {
            let next = self.core.with(|c| {
                let action = c.coord.pop_action();
                if action.is_none() {
                    c.draining = false;
                    work |= scan_for_log_entries(c);
                }
                action.map(|a| (a, take_callback(c, &a)))
            });
            let Some((action, callback)) = next else {
                break;
            };
            work |= self.act(action, callback);
        }
        if work {
            self.platform.queue_work_item();
        }
    }

    /// One action; `true` when the work item has something to do.
    fn act(&self, action: Action, callback: Option<P::Callback>) -> bool {
        match action {
            Action::Deliver { client, event } => {
                if let Some(cb) = callback {
                    // Lock released: the callback may call any bus function.
                    self.platform.deliver(&cb, &HcabusEvent::new(client, event));
                }
                let now = self.platform.now();
                self.core
                    .with(|c| c.coord.event_delivered(now, client, event.kind()));
                false
            }
            Action::ArmTimer { timer, at, .. } => {
                self.core.with(|c| c.timers.apply(&action));
                self.platform.arm_timer(timer, at);
                false
            }
            Action::CancelTimer { timer } => {
                self.core.with(|c| c.timers.apply(&action));
                self.platform.cancel_timer(timer);
                false
            }
            Action::Hw(step) => self.core.with(|c| {
                if c.hw_queue.len() < HW_QUEUE {
                    c.hw_queue.push(step);
                } else {
                    c.overflows += 1;
                    log::error!("hardware queue full: {} dropped", step.as_str());
                }
                true
            }),
            Action::Pnp(PnpOp::ReportChildrenMissing) => {
                self.platform.children_missing();
                false
            }
            Action::Pnp(PnpOp::ReenumerateChildren) => {
                self.platform.reenumerate_children();
                false
            }
            Action::ResetConcluded { .. } => false,
        }
    }

    /// EvtWorkItem (PASSIVE_LEVEL): hardware steps in order, each completion fed back; then
    /// the event log.
    pub fn work_item(&self) {
        loop {
            let step = self
                .core
                .with(|c| (!c.hw_queue.is_empty()).then(|| c.hw_queue.remove(0)));
            let Some(step) = step else {
                break;
            };
            let done = self.hca.with(|hca| execute(hca, step));
            let now = self.platform.now();
            self.core.with(|c| c.coord.hw_complete(now, done));
            self.platform.queue_dpc();
        }
        loop {
            let entry = self
                .core
                .with(|c| (!c.log_queue.is_empty()).then(|| c.log_queue.remove(0)));
            let Some(entry) = entry else {
                break;
            };
            self.platform.log_event(entry);
        }
    }

    /// The adapter, for a test to look at (the wait lock is taken).
    pub fn with_hca<R>(&self, f: impl FnOnce(&mut MmioHca<P::Regs>) -> R) -> R {
        self.hca.with(f)
    }
}

/// The callback an action is for, copied out under the lock.
fn take_callback<C: Clone>(c: &Core<C>, action: &Action) -> Option<C> {
    let Action::Deliver { client, .. } = action else {
        return None;
    };
    // A client that unregistered after the event was queued has no callback any more.
    match &c.callbacks[usize::from(client.index)] {
        Some((id, cb)) if id == client => Some(cb.clone()),
        _ => None,
    }
}

/// Finds what the System event log must hear among the records since the last scan; `true`
/// when an entry was queued.
fn scan_for_log_entries<C>(c: &mut Core<C>) -> bool {
    let Core {
        coord,
        log_queue,
        log_seq,
        overflows,
        ..
    } = c;
    let mut queued = false;
    for r in coord.recorder().since(*log_seq) {
        *log_seq = r.seq + 1;
        let entry = match r.kind {
            RecordKind::ResetStarted { epoch, reason, .. } => EventLogEntry::ResetStarted {
                epoch: epoch.0,
                reason: reason as u8,
            },
            RecordKind::ResetFinished { epoch, .. } => {
                EventLogEntry::ResetRestored { epoch: epoch.0 }
            }
            RecordKind::ResetFailed {
                epoch,
                error: FailReason::DeviceReplaced,
            } => EventLogEntry::DeviceReplaced { epoch: epoch.0 },
            RecordKind::ResetFailed { epoch, error } => EventLogEntry::ResetFailed {
                epoch: epoch.0,
                error: error as u8,
            },
            _ => continue,
        };
        if log_queue.len() < LOG_QUEUE {
            log_queue.push(entry);
            queued = true;
        } else {
            *overflows += 1;
            log::error!("event log queue full: {entry:?} dropped");
        }
    }
    queued
}

/// The C ABI's functions drive the bus through the shared marshalling of hcabus-cabi, so the
/// driver's PDOs run exactly what the C tests exercise on Linux.
impl<P: Platform<Callback = CCallback>> CBus for Bus<P> {
    fn register(
        &self,
        desc: ClientDesc,
        callback: CCallback,
    ) -> Result<Registration, RegisterError> {
        Bus::register(self, desc, callback)
    }
    fn unregister(&self, id: ClientId) -> Result<(), UnregisterError> {
        Bus::unregister(self, id)
    }
    fn reset_request(&self, id: ClientId) -> Result<Epoch, RequestError> {
        Bus::reset_request(self, id)
    }
    fn reset_execute(&self, id: ClientId, epoch: Epoch) -> Result<ExecuteOutcome, ExecuteError> {
        Bus::reset_execute(self, id, epoch)
    }
    fn reset_consent(&self, id: ClientId, epoch: Epoch) -> Result<(), ConsentError> {
        Bus::reset_consent(self, id, epoch)
    }
    fn reset_veto(&self, id: ClientId, epoch: Epoch, reason: VetoReason) -> Result<(), VetoError> {
        Bus::reset_veto(self, id, epoch, reason)
    }
    fn state(&self) -> (State, Epoch, Instant) {
        Bus::state(self)
    }
}
