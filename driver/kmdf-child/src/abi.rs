//! What the child reads and answers: the PDO's hardware id, the bus interface it is handed
//! (checked before anything in it is called), the bus's events (decoded from the C union by
//! value, never by pointer), and the child's own IOCTLs, by which a program submits I/O to it
//! and reads its counters.
#![forbid(unsafe_code)]

use hcabus::bus_abi::{
    Guid, HcabusBusInterfaceV1, HcabusPortData, HcabusResetAbortedData, HcabusResetData,
    HcabusResetEndData, HCABUS_BUS_INTERFACE_VERSION,
};
use hcabus::ioctl::{ctl_code, FILE_DEVICE_INFINIBAND, FILE_READ_ACCESS, FILE_WRITE_ACCESS};
use hcabus::types::{ClientFlags, ClientKind, EventKind};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// The child's device interface class: a program opens the child's device through it
/// (SetupDiGetClassDevs / CM_Get_Device_Interface_List), one instance per child function.
pub const GUID_HCABUS_CHILD_INTERFACE: Guid = Guid {
    data1: 0x6f0c_2b1e,
    data2: 0x3d4a,
    data3: 0x4c59,
    data4: [0x9e, 0x21, 0x5a, 0x7b, 0x0d, 0x83, 0x4f, 0x16],
};

const METHOD_BUFFERED: u32 = 0;

/// One I/O: queued while the child holds its I/O across a reset, run in an epoch; answers a
/// [`ChildIoResult`].
pub const IOCTL_HCABUS_CHILD_IO: u32 = ctl_code(
    FILE_DEVICE_INFINIBAND,
    0xC00,
    METHOD_BUFFERED,
    FILE_READ_ACCESS | FILE_WRITE_ACCESS,
);
/// The child's counters, a [`ChildStats`]; answered during a reset too (it is not I/O).
pub const IOCTL_HCABUS_CHILD_STATS: u32 = ctl_code(
    FILE_DEVICE_INFINIBAND,
    0xC01,
    METHOD_BUFFERED,
    FILE_READ_ACCESS,
);
/// Whether the child vetoes the next planned resets: a [`ChildSetVeto`] (an SRP child only;
/// the others register without CAN_VETO and always consent).
pub const IOCTL_HCABUS_CHILD_SET_VETO: u32 = ctl_code(
    FILE_DEVICE_INFINIBAND,
    0xC02,
    METHOD_BUFFERED,
    FILE_WRITE_ACCESS,
);

/// What one I/O answers: the epoch it ran in (the bus's epoch as the child held it) and the
/// bus's state then (a QUERY_STATE through the interface: the I/O's work).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct ChildIoResult {
    pub epoch: u64,
    /// A `hcabus::types::State` value.
    pub bus_state: u32,
    /// QUERY_STATE's status.
    pub bus_status: i32,
}

/// The child's counters. `dispatched = completed + failed + in_progress` always; the requests
/// held in the queue across a reset are KMDF's until dispatched, and a program counts them as
/// its own submitted minus those answered.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct ChildStats {
    /// `sizeof(ChildStats)`.
    pub size: u32,
    /// A [`crate::child::Phase`] number.
    pub phase: u32,
    /// The epoch the child's I/O runs in (the reset's while it holds).
    pub epoch: u64,
    pub client_id: u64,
    pub dispatched: u64,
    pub completed: u64,
    pub failed: u64,
    pub in_progress: u64,
    /// ResetExecute calls that succeeded (ALREADY_READY and PAST_DEADLINE included).
    pub executed: u32,
    /// Of those, the ones answered PAST_DEADLINE: the reset went on without this child.
    pub past_deadline: u32,
    pub consents: u32,
    pub vetoes: u32,
    /// Events heard, by `EventKind` number (index 0: a kind it does not know).
    pub events: [u32; 9],
    /// The last refusal a call of the interface answered (0: none).
    pub last_refusal: i32,
    /// [`STATS_VETO_ARMED`], [`STATS_LATE`].
    pub flags: u32,
    pub reserved: u32,
}

/// [`ChildStats::flags`]: planned resets are vetoed.
pub const STATS_VETO_ARMED: u32 = 1 << 0;
/// [`ChildStats::flags`]: it registered while a reset ran.
pub const STATS_LATE: u32 = 1 << 1;

/// IOCTL_HCABUS_CHILD_SET_VETO's input.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct ChildSetVeto {
    /// 1: veto planned resets; 0: consent.
    pub veto: u32,
}

const _: () = assert!(core::mem::size_of::<ChildIoResult>() == 16);
const _: () = assert!(core::mem::size_of::<ChildStats>() == 120);
const _: () = assert!(core::mem::offset_of!(ChildStats, executed) == 56);
const _: () = assert!(core::mem::offset_of!(ChildStats, events) == 72);
const _: () = assert!(core::mem::offset_of!(ChildStats, last_refusal) == 108);
const _: () = assert!(core::mem::size_of::<ChildSetVeto>() == 4);

/// The function of the PDO the child drives, from the PDO's first hardware id (the bus's
/// `HCABUS\SRP`, `HCABUS\IPOIB&PORT1`, `HCABUS\IPOIB&PORT2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Function {
    Srp,
    Ipoib { port: u8 },
}

impl Function {
    /// The function a hardware id names (case-insensitive, as PnP compares ids); `None` for
    /// one this driver does not take.
    pub fn of_hardware_id(id: &str) -> Option<Function> {
        let rest = strip_prefix_ignore_case(id, "HCABUS\\")?;
        if rest.eq_ignore_ascii_case("SRP") {
            return Some(Function::Srp);
        }
        let port = strip_prefix_ignore_case(rest, "IPOIB&PORT")?;
        match port {
            "1" => Some(Function::Ipoib { port: 1 }),
            "2" => Some(Function::Ipoib { port: 2 }),
            _ => None,
        }
    }

    pub fn kind(self) -> ClientKind {
        match self {
            Function::Srp => ClientKind::Srp,
            Function::Ipoib { .. } => ClientKind::Ipoib,
        }
    }

    /// SRP carries a disk's last path and may refuse a planned reset; IPoIB may not.
    pub fn flags(self) -> ClientFlags {
        match self {
            Function::Srp => ClientFlags::CAN_VETO,
            Function::Ipoib { .. } => ClientFlags::empty(),
        }
    }

    /// The client's name, NUL-terminated (`hcactl clients` shows it).
    pub fn name(self) -> &'static core::ffi::CStr {
        match self {
            Function::Srp => c"child-srp",
            Function::Ipoib { port: 1 } => c"child-ipoib-p1",
            Function::Ipoib { .. } => c"child-ipoib-p2",
        }
    }
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

/// Why the interface a query returned is not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum InterfaceError {
    /// Fewer bytes than version 1's structure: the bus is older than this header.
    #[error("the interface is {size} bytes, below version 1's {}", core::mem::size_of::<HcabusBusInterfaceV1>())]
    TooSmall { size: u16 },
    /// Version 0, or a version this driver was not written for.
    #[error("the interface is version {version}; this driver knows version {HCABUS_BUS_INTERFACE_VERSION}")]
    Version { version: u16 },
    /// A function pointer is null: no call of it could be made.
    #[error("the interface has no {0}")]
    Missing(&'static str),
}

/// Checks what WdfFdoQueryForInterface wrote before anything in it is called: the size and
/// version the bus filled in (KMDF copies the bus's own header, which may be smaller than
/// asked for), and that every function is there.
pub fn check_interface(iface: &HcabusBusInterfaceV1) -> Result<(), InterfaceError> {
    if usize::from(iface.size) < core::mem::size_of::<HcabusBusInterfaceV1>() {
        return Err(InterfaceError::TooSmall { size: iface.size });
    }
    if iface.version != HCABUS_BUS_INTERFACE_VERSION {
        return Err(InterfaceError::Version {
            version: iface.version,
        });
    }
    let functions = [
        ("InterfaceReference", iface.interface_reference.is_some()),
        (
            "InterfaceDereference",
            iface.interface_dereference.is_some(),
        ),
        ("Register", iface.register.is_some()),
        ("Unregister", iface.unregister.is_some()),
        ("ResetRequest", iface.reset_request.is_some()),
        ("ResetExecute", iface.reset_execute.is_some()),
        ("ResetConsent", iface.reset_consent.is_some()),
        ("ResetVeto", iface.reset_veto.is_some()),
        ("QueryState", iface.query_state.is_some()),
    ];
    match functions.iter().find(|(_, present)| !present) {
        Some((name, _)) => Err(InterfaceError::Missing(name)),
        None => Ok(()),
    }
}

/// An event as the child acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BusEvent {
    ResetQuery {
        epoch: u64,
    },
    Reset {
        epoch: u64,
        planned: bool,
    },
    ResetEnd {
        epoch: u64,
    },
    ResetFailed {
        epoch: u64,
    },
    ResetAborted {
        epoch: u64,
    },
    DeviceFatal,
    PortActive {
        port: u32,
        lid: u32,
    },
    PortDown {
        port: u32,
    },
    /// A kind this driver does not know (a later bus's): ignored, counted.
    Unknown {
        kind: u16,
    },
}

impl BusEvent {
    /// The event of kind `kind` whose union holds `raw` (copied out of HCABUS_EVENT during the
    /// callback: the event lives only for the call).
    pub fn decode(kind: u16, raw: [u64; 4]) -> BusEvent {
        let bytes = raw.as_bytes();
        let reset = HcabusResetData::read_from_prefix(bytes).map(|(d, _)| d);
        let end = HcabusResetEndData::read_from_prefix(bytes).map(|(d, _)| d);
        let aborted = HcabusResetAbortedData::read_from_prefix(bytes).map(|(d, _)| d);
        let port = HcabusPortData::read_from_prefix(bytes).map(|(d, _)| d);
        let known = EventKind::from_u8(u8::try_from(kind).unwrap_or(0));
        match (known, reset, end, aborted, port) {
            (Some(EventKind::ResetQuery), Ok(r), ..) => BusEvent::ResetQuery { epoch: r.epoch },
            (Some(EventKind::Reset), Ok(r), ..) => BusEvent::Reset {
                epoch: r.epoch,
                planned: r.planned != 0,
            },
            (Some(EventKind::ResetEnd), _, Ok(e), ..) => BusEvent::ResetEnd { epoch: e.epoch },
            (Some(EventKind::ResetFailed), _, Ok(e), ..) => {
                BusEvent::ResetFailed { epoch: e.epoch }
            }
            (Some(EventKind::ResetAborted), _, _, Ok(a), _) => {
                BusEvent::ResetAborted { epoch: a.epoch }
            }
            (Some(EventKind::DeviceFatal), ..) => BusEvent::DeviceFatal,
            (Some(EventKind::PortActive), .., Ok(p)) => BusEvent::PortActive {
                port: p.port,
                lid: p.lid,
            },
            (Some(EventKind::PortDown), .., Ok(p)) => BusEvent::PortDown { port: p.port },
            _ => BusEvent::Unknown { kind },
        }
    }
}
