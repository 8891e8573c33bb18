//! What the bus driver needs from the kernel, as a trait: KMDF objects (spin lock, DPC, timers,
//! work item, child list), the PCI function's registers, the event log and the clock.
//!
//! The Windows implementation (src/windows/, compiled on Windows only) maps each method onto
//! one or two WDF/WDM calls; the fake (src/fake.rs) records every call with the IRQL it was
//! made at, so the tests can hold the driver to the SPEC's rules.

use hcabus::bus_abi::HcabusEvent;
use hcabus::mmio::RegisterAccess;
use hcabus::types::TimerId;
use hcabus::Instant;

/// Interrupt request levels the driver runs at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Irql {
    /// Threads: PnP callbacks, work items, most IOCTLs.
    Passive = 0,
    /// DPCs, timers, spin-lock holders, client callbacks.
    Dispatch = 2,
}

/// A lock the platform provides: the bus's one spin lock (WDFSPINLOCK, which raises to
/// DISPATCH_LEVEL while held) or the hardware's wait lock (WDFWAITLOCK, PASSIVE_LEVEL, for
/// config-space steps). `with` must not be re-entered on the same thread.
pub trait Lock<T> {
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R;
}

/// A child function the bus enumerates: one PDO each (SPEC §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChildFunction {
    /// IPoIB on one port (1-based).
    Ipoib { port: u8 },
    /// The SRP initiator (the boot disk rides on it).
    Srp,
}

impl ChildFunction {
    /// The PDO's hardware id (the INF of each child driver matches it).
    pub fn hardware_id(self) -> &'static str {
        match self {
            ChildFunction::Ipoib { port: 1 } => "HCABUS\\IPOIB&PORT1",
            ChildFunction::Ipoib { port: 2 } => "HCABUS\\IPOIB&PORT2",
            ChildFunction::Ipoib { .. } => "HCABUS\\IPOIB",
            ChildFunction::Srp => "HCABUS\\SRP",
        }
    }

    /// The child list's identification description: unique per child.
    pub fn serial(self) -> u32 {
        match self {
            ChildFunction::Ipoib { port } => u32::from(port),
            ChildFunction::Srp => 0x100,
        }
    }
}

/// Entries the driver writes to the System event log (IoWriteErrorLogEntry), with the
/// message ids of driver/kmdf/messages.mc.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventLogEntry {
    /// A reset began (epoch, reason as its wire number).
    ResetStarted { epoch: u64, reason: u8 },
    /// The device is back on `epoch`.
    ResetRestored { epoch: u64 },
    /// The reset of `epoch` left the device failed (the failure's wire number).
    ResetFailed { epoch: u64, error: u8 },
    /// Another adapter answered after the reset: PnP re-enumerates the children.
    DeviceReplaced { epoch: u64 },
}

impl EventLogEntry {
    /// The message id in messages.mc: severity (bits 30-31), customer bit, facility 0xAB,
    /// code.
    pub const fn message_id(self) -> u32 {
        match self {
            EventLogEntry::ResetStarted { .. } => 0x60AB_1001,
            EventLogEntry::ResetRestored { .. } => 0x60AB_1002,
            EventLogEntry::ResetFailed { .. } => 0xE0AB_1003,
            EventLogEntry::DeviceReplaced { .. } => 0xE0AB_1004,
        }
    }
}

impl EventLogEntry {
    /// The message's insertion strings after the device name (%2, %3 in messages.mc), as
    /// NUL-terminated UTF-16 in `out`: the epoch (`e4`), then the reason or error's name.
    /// Returns how many strings and how many u16 were written; nothing is cut mid-string.
    pub fn insertion_strings(self, out: &mut [u16]) -> (u8, usize) {
        use hcabus::types::{FailReason, ResetReason};
        let (epoch, name) = match self {
            EventLogEntry::ResetStarted { epoch, reason } => (
                epoch,
                ResetReason::from_u8(reason).map_or("?", ResetReason::as_str),
            ),
            EventLogEntry::ResetFailed { epoch, error } => (
                epoch,
                FailReason::from_u8(error).map_or("?", FailReason::as_str),
            ),
            EventLogEntry::ResetRestored { epoch } | EventLogEntry::DeviceReplaced { epoch } => {
                (epoch, "")
            }
        };
        // "e" and up to 20 digits, written from the end.
        let mut digits = [0u8; 21];
        let mut n = digits.len();
        let mut v = epoch;
        loop {
            n -= 1;
            digits[n] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        n -= 1;
        digits[n] = b'e';
        let strings: [&[u8]; 2] = [&digits[n..], name.as_bytes()];
        let wanted = if name.is_empty() { 1 } else { 2 };
        let mut used = 0;
        let mut count = 0;
        for text in &strings[..wanted] {
            if used + text.len() + 1 > out.len() {
                break;
            }
            for (slot, b) in out[used..].iter_mut().zip(text.iter()) {
                *slot = u16::from(*b);
            }
            used += text.len();
            out[used] = 0;
            used += 1;
            count += 1;
        }
        (count, used)
    }
}

/// The kernel, as the bus driver uses it.
pub trait Platform {
    /// The PCI function's registers (config space through the PCI bus interface, BAR0
    /// through MmMapIoSpaceEx).
    type Regs: RegisterAccess + Send;
    type SpinLock<T>: Lock<T>;
    type WaitLock<T>: Lock<T>;
    /// A client's event callback: the C ABI's function pointer and context on Windows.
    type Callback: Clone + Send;

    /// The IRQL of the calling thread.
    fn irql(&self) -> Irql;
    /// KeQueryInterruptTime, as the coordinator's clock.
    fn now(&self) -> Instant;
    /// WdfSpinLockCreate, at PASSIVE_LEVEL while the device is prepared. A lock KMDF could
    /// not create is an error: a null WDFSPINLOCK bugchecks on its first acquire.
    fn spin_lock<T>(&self, value: T) -> Result<Self::SpinLock<T>, PlatformError>;
    /// WdfWaitLockCreate, likewise.
    fn wait_lock<T>(&self, value: T) -> Result<Self::WaitLock<T>, PlatformError>;
    /// EvtDevicePrepareHardware: map BAR0 from the translated resources and get the PCI bus
    /// interface for config space.
    fn map_registers(&mut self) -> Result<Self::Regs, PlatformError>;
    /// WdfTimerStart on the timer kept for `timer` (due on the coordinator's clock).
    fn arm_timer(&self, timer: TimerId, due: Instant);
    /// WdfTimerStop without waiting: a timer that fires anyway is stale and ignored.
    fn cancel_timer(&self, timer: TimerId);
    /// WdfDpcEnqueue of the delivery DPC (a DPC already queued is not queued twice).
    fn queue_dpc(&self);
    /// WdfWorkItemEnqueue of the PASSIVE_LEVEL hardware work item.
    fn queue_work_item(&self);
    /// Calls a client's callback. Called at DISPATCH_LEVEL with the bus lock released.
    fn deliver(&self, callback: &Self::Callback, event: &HcabusEvent);
    /// WdfChildListAddOrUpdateChildDescriptionAsPresent.
    fn child_present(&mut self, child: ChildFunction) -> Result<(), PlatformError>;
    /// WdfChildListUpdateAllChildDescriptionsAsPresent after marking each child missing: the
    /// PDOs are surprise-removed (a replaced or removed device only).
    fn children_missing(&self);
    /// WdfChildListRetrieveNextDevice after a re-scan: new PDOs for a replacement adapter.
    fn reenumerate_children(&self);
    /// IoWriteErrorLogEntry.
    fn log_event(&self, entry: EventLogEntry);
}

/// A kernel call that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlatformError {
    /// No memory BAR among the translated resources, or mapping it failed.
    NoRegisters,
    /// The PCI bus interface for config space was not given.
    NoConfigSpace,
    /// A WDF call returned this NTSTATUS.
    Status(u32),
}

impl core::fmt::Display for PlatformError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PlatformError::NoRegisters => f.write_str("no memory BAR to map"),
            PlatformError::NoConfigSpace => f.write_str("no PCI bus interface for config space"),
            PlatformError::Status(s) => write!(f, "WDF call failed: 0x{s:08X}"),
        }
    }
}

impl core::error::Error for PlatformError {}
