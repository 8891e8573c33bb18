//! The model's state: KMDF's objects by handle (deleted ones kept as tombstones, so that a
//! use after deletion is seen), the device inits, the mappings, the register files, the
//! registry, the event log and the refusals each DDI made.

use std::collections::BTreeMap;
use std::string::String;
use std::vec::Vec;

use hcabus_sim::FakeConnectX;
use wdk_sys::*;

use super::{violation, Rule};

/// A WDF handle as the model gives them out: distinct, never reused, never 0.
pub(crate) type Handle = usize;
const HANDLE_BASE: usize = 0x7000_0000;
const HANDLE_STEP: usize = 0x40;
const INIT_BASE: usize = 0x6000_0000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Fdo,
    Pdo,
    Control,
}

/// A device's PnP identity (a PDO's ids and text).
#[derive(Debug, Clone, Default)]
pub(crate) struct Identity {
    pub(crate) device_id: Option<String>,
    pub(crate) hardware_ids: Vec<String>,
    pub(crate) instance_id: Option<String>,
    pub(crate) text: Vec<(u32, String, String)>,
    pub(crate) default_locale: Option<u32>,
}

pub(crate) struct Device {
    pub(crate) role: Role,
    pub(crate) pnp: WDF_PNPPOWER_EVENT_CALLBACKS,
    pub(crate) name: Option<String>,
    pub(crate) links: Vec<String>,
    /// The security descriptor a control device was created with.
    #[allow(dead_code)]
    pub(crate) sddl: Option<String>,
    pub(crate) queue: Option<Handle>,
    pub(crate) child_list: Option<Handle>,
    pub(crate) interfaces: Vec<(GUID, Vec<u8>)>,
    pub(crate) finished: bool,
    pub(crate) identity: Identity,
    /// The adapter behind an FDO (index into `Kernel::adapters`).
    pub(crate) adapter: usize,
    /// The PDO an FDO of another driver is stacked on (the child driver's on the bus's
    /// PDO); `None` for the bus's FDO on the PCI function.
    pub(crate) lower_pdo: Option<Handle>,
    /// Its device interfaces (WdfDeviceCreateDeviceInterface), by class.
    pub(crate) device_interfaces: Vec<GUID>,
    /// The WDM device object WdfDeviceWdmGetDeviceObject returns.
    pub(crate) wdm: Box<DEVICE_OBJECT>,
    /// The special files it supports (bit n: WDF_SPECIAL_FILE_TYPE n).
    pub(crate) special_files: u32,
    /// The special files on its path now, by type (KMDF's m_SpecialFileCount).
    pub(crate) special_use: [u32; 8],
    /// Its PnP state-change callbacks (WdfDeviceInitRegisterPnpStateChangeCallback).
    pub(crate) pnp_notify: Vec<super::notify::PnpNotify>,
}

pub(crate) struct Child {
    pub(crate) identification: Vec<u8>,
    pub(crate) present: bool,
    pub(crate) reported: bool,
    pub(crate) pdo: Option<Handle>,
}

pub(crate) enum Kind {
    Driver {
        config: WDF_DRIVER_CONFIG,
    },
    Device(Box<Device>),
    Queue {
        device: Handle,
        config: WDF_IO_QUEUE_CONFIG,
        state: super::queues::QueueState,
    },
    // `running`, `holder`: the thread (`schedule::me`) running the callback or holding the
    // lock; 0 for none.
    Dpc {
        config: WDF_DPC_CONFIG,
        queued: bool,
        running: usize,
    },
    WorkItem {
        config: WDF_WORKITEM_CONFIG,
        queued: bool,
        running: usize,
    },
    Timer {
        config: WDF_TIMER_CONFIG,
        due_us: Option<u64>,
        running: usize,
    },
    SpinLock {
        holder: usize,
        saved_irql: u8,
    },
    WaitLock {
        holder: usize,
    },
    Request(Box<super::machine::Request>),
    Key,
    ChildList {
        device: Handle,
        config: WDF_CHILD_LIST_CONFIG,
        children: Vec<Child>,
        scanning: bool,
    },
    ResourceList {
        descriptors: Vec<CM_PARTIAL_RESOURCE_DESCRIPTOR>,
    },
}

impl Kind {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Kind::Driver { .. } => "WDFDRIVER",
            Kind::Device(d) => match d.role {
                Role::Fdo => "WDFDEVICE (FDO)",
                Role::Pdo => "WDFDEVICE (PDO)",
                Role::Control => "WDFDEVICE (control)",
            },
            Kind::Queue { .. } => "WDFQUEUE",
            Kind::Dpc { .. } => "WDFDPC",
            Kind::WorkItem { .. } => "WDFWORKITEM",
            Kind::Timer { .. } => "WDFTIMER",
            Kind::SpinLock { .. } => "WDFSPINLOCK",
            Kind::WaitLock { .. } => "WDFWAITLOCK",
            Kind::Request(_) => "WDFREQUEST",
            Kind::Key => "WDFKEY",
            Kind::ChildList { .. } => "WDFCHILDLIST",
            Kind::ResourceList { .. } => "WDFCMRESLIST",
        }
    }
}

/// A context KMDF allocated with an object.
pub(crate) struct Context {
    pub(crate) unique: PCWDF_OBJECT_CONTEXT_TYPE_INFO,
    pub(crate) memory: Box<[u128]>,
    /// The bytes the driver asked for (its type's size, or the override).
    pub(crate) size: usize,
}

pub(crate) struct Object {
    pub(crate) kind: Kind,
    pub(crate) parent: Option<Handle>,
    pub(crate) context: Option<Context>,
    pub(crate) cleanup: PFN_WDF_OBJECT_CONTEXT_CLEANUP,
    /// EvtDestroyCallback: run once deleted and unreferenced, as its memory goes.
    pub(crate) destroy: PFN_WDF_OBJECT_CONTEXT_DESTROY,
    pub(crate) deleted: bool,
    /// Deleted, its cleanup callback not yet run: its context is still there.
    pub(crate) disposing: bool,
    pub(crate) references: u32,
    /// The FDO whose prepare hardware created it, if one did (the cycle rule).
    pub(crate) cycle_of: Option<Handle>,
    /// Its attributes' ExecutionLevel (WdfExecutionLevelInheritFromParent when it had none).
    pub(crate) execution_level: WDF_EXECUTION_LEVEL,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InitOrigin {
    /// EvtDriverDeviceAdd's: KMDF's, freed by KMDF whatever happens.
    Pnp,
    /// WdfControlDeviceInitAllocate's: the driver's until a create succeeds.
    Control,
    /// The child list's, for EvtChildListCreateDevice.
    Child,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InitState {
    Open,
    Consumed,
    Freed,
}

pub(crate) struct Init {
    pub(crate) origin: InitOrigin,
    pub(crate) state: InitState,
    pub(crate) pnp: WDF_PNPPOWER_EVENT_CALLBACKS,
    pub(crate) child_list: Option<WDF_CHILD_LIST_CONFIG>,
    pub(crate) name: Option<String>,
    pub(crate) sddl: Option<String>,
    pub(crate) identity: Identity,
    /// What the PCI bus reports of the function, as multi-strings: its hardware ids (most
    /// specific first) and compatible ids.
    pub(crate) hardware_ids: Vec<String>,
    pub(crate) compatible_ids: Vec<String>,
    pub(crate) adapter: usize,
    /// The PDO the device is added on, for a driver above the bus (`two.rs`).
    pub(crate) lower_pdo: Option<Handle>,
    /// A setup call on it that failed (fxdeviceinit: the init is then unusable): a create
    /// from it breaks SDV's InitFreeDeviceCreate.
    pub(crate) failed: Option<&'static str>,
    pub(crate) pnp_notify: Vec<super::notify::PnpNotify>,
}

/// An adapter on the PCI bus: its register file, its BAR and its bus interface references.
pub(crate) struct Adapter {
    pub(crate) hca: FakeConnectX,
    pub(crate) bar_physical: i64,
    pub(crate) bar_length: usize,
    pub(crate) interface_references: i32,
    /// In D0: powered, its registers answer. False between D0Exit and D0Entry.
    pub(crate) d0: bool,
}

/// A live MmMapIoSpaceEx mapping.
pub(crate) struct Mapping {
    /// The mapping's pages: no access, so that a load or store of the image's faults and is
    /// answered by the register file (`image/trap.rs`); the Linux build never touches them.
    #[allow(dead_code)]
    pub(crate) memory: super::image::memory::Region,
    pub(crate) length: usize,
    pub(crate) adapter: usize,
}

/// An event the driver wrote to the System log.
#[derive(Debug, Clone)]
pub(crate) struct LoggedEvent {
    pub(crate) code: u32,
    pub(crate) strings: Vec<String>,
}

#[derive(Default)]
pub(crate) struct Kernel {
    pub(crate) objects: Vec<Object>,
    pub(crate) inits: Vec<Init>,
    pub(crate) adapters: Vec<Adapter>,
    pub(crate) mappings: BTreeMap<usize, Mapping>,
    pub(crate) parameters: BTreeMap<String, u32>,
    pub(crate) events: Vec<LoggedEvent>,
    /// ETW: the providers registered, the session, every event written.
    pub(crate) etw: super::etw::Etw,
    pub(crate) error_log_allocated: usize,
    /// The packets IoAllocateErrorLogEntry gave out and IoWriteErrorLogEntry has not taken.
    pub(crate) error_log_packets: BTreeMap<usize, Box<[u64]>>,
    /// Each refused call: the DDI, its status, why.
    pub(crate) refusals: Vec<(&'static str, NTSTATUS, String)>,
    /// Calls to fail on purpose: (DDI, how many more calls succeed first).
    pub(crate) failures: Vec<(&'static str, u32)>,
    /// Each image slot's WDFDRIVER (`image::BUS`, `image::CHILD`; the Linux build is the
    /// bus's): WdfDriverCreate's, told apart by the globals the call passes.
    pub(crate) drivers: [Option<Handle>; 2],
    pub(crate) now_us: u64,
    /// Windows' clock tick: waits and timers end on one, the interrupt time moves by one.
    pub(crate) tick: ClockTick,
    /// Bytes of contexts KMDF allocated for the driver's objects, live.
    pub(crate) context_bytes: usize,
    /// The FDO whose EvtDevicePrepareHardware is running (the cycle rule).
    pub(crate) preparing: Option<Handle>,
    pub(crate) debug_output: Vec<String>,
    /// What a warning rule of SDV flags and KMDF allows (DriverAttributeChanged): the run
    /// goes on as it would on Windows, and the unload reports it (`leaks::unload`).
    pub(crate) sdv_warnings: Vec<(super::Rule, &'static str, String)>,
    /// Who holds each EX_RUNDOWN_REF now: (its address, the thread, `schedule::me`).
    pub(crate) rundown_holders: Vec<(usize, usize)>,
    /// Every IRP_MN_DEVICE_USAGE_NOTIFICATION a device answered, in order.
    pub(crate) usage: Vec<super::usage::Notified>,
}

// SAFETY: the raw pointers in the kernel's state (handles, WDM structures, type infos) are
// only read or written under the KERNEL mutex, and one scenario runs per process.
unsafe impl Send for Kernel {}

impl Kernel {
    pub(crate) fn handle_of(index: usize) -> Handle {
        HANDLE_BASE + index * HANDLE_STEP
    }

    pub(crate) fn init_handle(index: usize) -> PWDFDEVICE_INIT {
        (INIT_BASE + index * HANDLE_STEP) as PWDFDEVICE_INIT
    }

    pub(crate) fn init_index(init: PWDFDEVICE_INIT) -> usize {
        (init as usize - INIT_BASE) / HANDLE_STEP
    }

    /// The object a handle names; a handle never given out, or one deleted and freed, stops
    /// the machine.
    pub(crate) fn object(&mut self, ddi: &str, handle: *mut core::ffi::c_void) -> &mut Object {
        let h = handle as usize;
        if h == 0 {
            violation(Rule::NullParameter, ddi, "a NULL handle");
        }
        let index = h.wrapping_sub(HANDLE_BASE) / HANDLE_STEP;
        if h < HANDLE_BASE
            || !(h - HANDLE_BASE).is_multiple_of(HANDLE_STEP)
            || index >= self.objects.len()
        {
            violation(
                Rule::InvalidHandle,
                ddi,
                &format!("{h:#x} is not a handle KMDF gave out"),
            );
        }
        let o = &mut self.objects[index];
        if o.deleted && o.references == 0 && !o.disposing {
            let what = o.kind.name();
            violation(
                Rule::UsedAfterDelete,
                ddi,
                &format!("{what} {h:#x} was deleted"),
            );
        }
        o
    }

    /// As [`Kernel::object`], for a live (not deleted) object.
    pub(crate) fn live(&mut self, ddi: &str, handle: *mut core::ffi::c_void) -> &mut Object {
        let o = self.object(ddi, handle);
        if o.deleted {
            let what = o.kind.name();
            violation(
                Rule::UsedAfterDelete,
                ddi,
                &format!("{what} {handle:p} was deleted (only references keep it)"),
            );
        }
        o
    }

    pub(crate) fn index_of(handle: *mut core::ffi::c_void) -> usize {
        (handle as usize - HANDLE_BASE) / HANDLE_STEP
    }

    pub(crate) fn init(&mut self, ddi: &str, init: PWDFDEVICE_INIT) -> &mut Init {
        let h = init as usize;
        if h == 0 {
            violation(Rule::NullParameter, ddi, "a NULL WDFDEVICE_INIT");
        }
        let index = h.wrapping_sub(INIT_BASE) / HANDLE_STEP;
        if h < INIT_BASE || index >= self.inits.len() {
            violation(
                Rule::InvalidHandle,
                ddi,
                &format!("{h:#x} is not a WDFDEVICE_INIT"),
            );
        }
        let i = &mut self.inits[index];
        if i.state != InitState::Open {
            violation(
                Rule::InitMisused,
                ddi,
                &format!("the WDFDEVICE_INIT was already {:?}", i.state),
            );
        }
        i
    }

    /// Whether this call of `ddi` is one the scenario asked to fail.
    pub(crate) fn fails(&mut self, ddi: &'static str) -> bool {
        // Each object KMDF creates is a pool allocation, which a scenario may refuse.
        if crate::model::heap::pool_refuses() {
            return true;
        }
        for (name, after) in &mut self.failures {
            if *name == ddi {
                if *after == 0 {
                    *name = "";
                    return true;
                }
                *after -= 1;
            }
        }
        false
    }

    pub(crate) fn refuse(&mut self, ddi: &'static str, status: NTSTATUS, why: &str) -> NTSTATUS {
        self.refusals.push((ddi, status, why.into()));
        status
    }

    /// Handles of the live objects that are `parent`'s descendants, children first.
    pub(crate) fn descendants(&self, parent: Handle) -> Vec<Handle> {
        let mut out = Vec::new();
        for (i, o) in self.objects.iter().enumerate() {
            if o.parent == Some(parent) && !o.deleted {
                let h = Self::handle_of(i);
                out.extend(self.descendants(h));
                out.push(h);
            }
        }
        out
    }
}

/// Windows' clock tick (KeQueryTimeIncrement: 15.625 ms unless something asked the timer for
/// a finer one). The kernel checks timers at each clock interrupt, so a relative wait or a
/// timer ends at the first tick at or after its due time, and KeQueryUnbiasedInterruptTime
/// is the time of the last tick. A driver that counts the milliseconds it asked for, not the
/// time that passed, overruns its bounds by up to half again (D4).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClockTick(pub(crate) u64);

impl Default for ClockTick {
    fn default() -> Self {
        ClockTick(15_625)
    }
}

impl ClockTick {
    /// The first tick at or after `us` (`us` itself with no tick).
    pub(crate) fn ceil(self, us: u64) -> u64 {
        match self.0 {
            0 => us,
            tick => us.div_ceil(tick) * tick,
        }
    }

    /// The last tick at or before `us`.
    pub(crate) fn floor(self, us: u64) -> u64 {
        match self.0 {
            0 => us,
            tick => us / tick * tick,
        }
    }
}
