//! The IOCTL interface of docs/design.md §8: codes, NTSTATUS values, the `#[repr(C)]` little-endian
//! structures, and the one dispatcher every host uses (the KMDF queue, the simulator's
//! socket server, tests).
//!
//! The structures are the contract with outside tools. zerocopy's derives prove each one
//! has no padding and may be read from any bytes, so a structure is its bytes ([`Wire`]):
//! nothing is copied field by field, and nothing in this crate is `unsafe`. Sizes and field
//! offsets are still asserted at compile time: they are the documented ABI, which a derive
//! does not know.
//!
//! A malformed request is refused with its NTSTATUS before anything is done: the
//! dispatcher decodes and validates completely, then acts.

use core::fmt;
use core::mem::{offset_of, size_of};

use bitflags::bitflags;
use static_assertions::const_assert_eq;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::coordinator::ResetResult;
use crate::recorder::RECORD_BYTES;
use crate::time::Instant;

mod bundle_abi;
mod codec;
mod counters;
mod dispatch;
mod fault;
mod history;
mod policy_abi;

pub use crate::client_entry::ClientEntry;
use crate::types::{AbortCause, AdminReset, ClientId, ClientState, FailReason, ResetOutcome};
pub use bundle_abi::*;
pub use codec::*;
pub use counters::*;
pub use dispatch::*;
pub use fault::*;
pub use history::*;
pub use policy_abi::*;

/// `CTL_CODE` of `winioctl.h`.
pub const fn ctl_code(device_type: u32, function: u32, method: u32, access: u32) -> u32 {
    (device_type << 16) | (access << 14) | (function << 2) | method
}

pub const FILE_DEVICE_INFINIBAND: u32 = 0x3B;
pub const METHOD_BUFFERED: u32 = 0;
pub const FILE_READ_ACCESS: u32 = 1;
pub const FILE_WRITE_ACCESS: u32 = 2;
const RW: u32 = FILE_READ_ACCESS | FILE_WRITE_ACCESS;

const fn code(function: u32, access: u32) -> u32 {
    ctl_code(FILE_DEVICE_INFINIBAND, function, METHOD_BUFFERED, access)
}

/// The one table of IOCTL codes: each line is a code (its name, function number and access:
/// the rights a handle needs), the structure it takes and the one it answers with in the
/// current ABI (`()`: no answer needed). The codes, [`CODES`], [`input_size`] and
/// [`min_output`] are made from it; older versions' sizes are [`input_size_of`] and
/// [`min_output_of`]. A new IOCTL is a line here, its structures, its decoding and its
/// handling in the dispatcher (ioctl/dispatch.rs), and its hcactl subcommand. The order is
/// [`CODES`]' (the fuzz corpus names codes by their place in it).
macro_rules! ioctl_codes {
    ($( $(#[$doc:meta])* $variant:ident: $name:ident = ($function:literal, $access:expr), $input:ty => $output:ty; )+) => {
        $( $(#[$doc])* pub const $name: u32 = code($function, $access); )+

        /// Each code, as the dispatcher matches it: exhaustively, so that a code declared
        /// here and not decoded and handled does not compile.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum IoctlCode {
            $( $variant, )+
        }

        impl IoctlCode {
            /// The code a caller sent, if it is one of ours.
            pub fn of(code: u32) -> Option<IoctlCode> {
                match code {
                    $( $name => Some(IoctlCode::$variant), )+
                    _ => None,
                }
            }
        }

        /// Every code, with its name (for tools and logs).
        pub const CODES: [(u32, &str); [$( stringify!($name), )+].len()] =
            [$( ($name, stringify!($name)), )+];

        /// The input size each code takes (exactly) in the current ABI.
        pub fn input_size(code: u32) -> Option<usize> {
            match code {
                $( $name => Some(size_of::<$input>()), )+
                _ => None,
            }
        }

        /// The smallest output buffer each code accepts in the current ABI.
        pub fn min_output(code: u32) -> usize {
            match code {
                $( $name => size_of::<$output>(), )+
                _ => 0,
            }
        }
    };
}

ioctl_codes! {
    QueryState: IOCTL_HCABUS_QUERY_STATE = (0x900, FILE_READ_ACCESS), EmptyIn => StateOut;
    ListClients: IOCTL_HCABUS_LIST_CLIENTS = (0x901, FILE_READ_ACCESS),
        ListClientsIn => ListClientsOut;
    ReadLog: IOCTL_HCABUS_READ_LOG = (0x902, FILE_READ_ACCESS), ReadLogIn => ReadLogOut;
    GetPolicy: IOCTL_HCABUS_GET_POLICY = (0x903, FILE_READ_ACCESS), EmptyIn => PolicyAbi;
    QueryHealth: IOCTL_HCABUS_QUERY_HEALTH = (0x904, FILE_READ_ACCESS), EmptyIn => HealthOut;
    ReadResets: IOCTL_HCABUS_READ_RESETS = (0x905, FILE_READ_ACCESS), EmptyIn => ReadResetsOut;
    RequestReset: IOCTL_HCABUS_REQUEST_RESET = (0x910, RW), RequestResetIn => EpochOut;
    Restart: IOCTL_HCABUS_RESTART = (0x911, RW), EmptyIn => EpochOut;
    /// The answer (which field was refused) is optional: version 5 and later.
    SetPolicy: IOCTL_HCABUS_SET_POLICY = (0x912, RW), SetPolicyIn => ();
    InjectFault: IOCTL_HCABUS_INJECT_FAULT = (0x9F0, RW), InjectFaultIn => ();
    /// Version 7: the stack's counters (a host that hosts no clients answers NOT_SUPPORTED).
    QueryCounters: IOCTL_HCABUS_QUERY_COUNTERS = (0x906, FILE_READ_ACCESS),
        EmptyIn => CountersOut;
    /// Version 9: the diagnostic bundle; the answer is the whole bundle, at most
    /// `BUNDLE_MAX_BYTES` (its header is the smallest room taken).
    ReadBundle: IOCTL_HCABUS_READ_BUNDLE = (0x907, FILE_READ_ACCESS),
        ReadBundleIn => crate::coordinator::bundle::BundleHeader;
}

const_assert_eq!(IOCTL_HCABUS_QUERY_STATE, 0x003B_6400);
const_assert_eq!(IOCTL_HCABUS_QUERY_HEALTH, 0x003B_6410);
const_assert_eq!(IOCTL_HCABUS_REQUEST_RESET, 0x003B_E440);
const_assert_eq!(IOCTL_HCABUS_INJECT_FAULT, 0x003B_E7C0);

/// Whether `code` needs write access (its access bits include FILE_WRITE_ACCESS).
pub const fn needs_write(code: u32) -> bool {
    (code >> 14) & FILE_WRITE_ACCESS != 0
}

/// An NTSTATUS value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NtStatus(pub u32);

impl NtStatus {
    pub const SUCCESS: NtStatus = NtStatus(0);
    pub const INVALID_BUFFER_SIZE: NtStatus = NtStatus(0xC000_0206);
    pub const BUFFER_TOO_SMALL: NtStatus = NtStatus(0xC000_0023);
    pub const INVALID_DEVICE_REQUEST: NtStatus = NtStatus(0xC000_0010);
    pub const REVISION_MISMATCH: NtStatus = NtStatus(0xC000_0059);
    pub const ACCESS_DENIED: NtStatus = NtStatus(0xC000_0022);
    pub const INVALID_PARAMETER: NtStatus = NtStatus(0xC000_000D);
    pub const NOT_SUPPORTED: NtStatus = NtStatus(0xC000_00BB);
    pub const DEVICE_BUSY: NtStatus = NtStatus(0x8000_0011);
    /// The device's FDO is gone; a handle kept open on its control device gets this.
    pub const DEVICE_REMOVED: NtStatus = NtStatus(0xC000_02B6);
    /// The device is stopped (between a PnP stop and its next start).
    pub const DEVICE_NOT_READY: NtStatus = NtStatus(0xC000_00A3);
    /// READ_BUNDLE of the kept bundle when the device has not failed since start.
    pub const NOT_FOUND: NtStatus = NtStatus(0xC000_0225);

    pub const fn is_success(self) -> bool {
        self.0 == 0
    }

    pub const fn name(self) -> &'static str {
        match self.0 {
            0 => "STATUS_SUCCESS",
            0xC000_0206 => "STATUS_INVALID_BUFFER_SIZE",
            0xC000_0023 => "STATUS_BUFFER_TOO_SMALL",
            0xC000_0010 => "STATUS_INVALID_DEVICE_REQUEST",
            0xC000_0059 => "STATUS_REVISION_MISMATCH",
            0xC000_0022 => "STATUS_ACCESS_DENIED",
            0xC000_000D => "STATUS_INVALID_PARAMETER",
            0xC000_00BB => "STATUS_NOT_SUPPORTED",
            0x8000_0011 => "STATUS_DEVICE_BUSY",
            0xC000_02B6 => "STATUS_DEVICE_REMOVED",
            0xC000_00A3 => "STATUS_DEVICE_NOT_READY",
            0xC000_0225 => "STATUS_NOT_FOUND",
            _ => "STATUS_UNKNOWN",
        }
    }
}

impl fmt::Display for NtStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (0x{:08X})", self.name(), self.0)
    }
}

bitflags! {
    /// What the caller's handle was opened for.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Rights: u32 {
        const READ = FILE_READ_ACCESS;
        const WRITE = FILE_WRITE_ACCESS;
    }
}

/// The version of the ABI this build speaks. Version 2 grew the policy structure (RESET_QUERY's
/// deadline, the client request limit, auto_recover, the paging hold); version 3 grew
/// QUERY_STATE's answer by each port's state and LID; version 4 grew INJECT_FAULT's input by
/// a port and a duration (the cable pull) and added QUERY_HEALTH, which any version may
/// call; version 5 gave READ_LOG records of 128 bytes (the client's name, the administrator's
/// reason, a repeat count and its last time, a hardware step's true outcome), gave
/// SET_POLICY an answer that names a refused field, and added READ_RESETS, which any
/// version may call; version 6 appended the administrator's refused requests to QUERY_STATE
/// (`refusals` counts only the clients' since); version 7 appended to QUERY_STATE the
/// wall-clock time of the bus's time zero, each port as `ibstat` shows it ([`PortInfoOut`])
/// and the resets counted by reason, and added QUERY_COUNTERS, which any version may call;
/// version 8 appended to the policy structure the slots that every later key takes (a new
/// key is no new version: [`PolicyAbi`]); version 9 added READ_BUNDLE, which any version may
/// call. Every other structure is the same in all.
pub const ABI_VERSION: u16 = 9;
/// The oldest version still served: a version-1 request gets the version-1 layout.
pub const ABI_VERSION_MIN: u16 = 1;
/// Bytes of QUERY_STATE's answer before version 3 (its first 160 bytes in version 3).
pub const STATE_V2_BYTES: usize = 160;
/// Bytes of QUERY_STATE's answer in versions 3 to 5 (its first 176 bytes in version 6).
pub const STATE_V5_BYTES: usize = 176;
/// Bytes of QUERY_STATE's answer in version 6 (its first 184 bytes in version 7).
pub const STATE_V6_BYTES: usize = 184;
/// "None" in a `u64` field (no last reset, no latency yet).
pub const NONE_U64: u64 = u64::MAX;

// ----- structures -----

// The wire is little-endian and a structure is its bytes in memory: every target this driver
// is built for (x86_64, aarch64 Windows and Linux) is little-endian, and a big-endian build
// is refused here rather than answering with swapped fields.
const _: () = assert!(
    cfg!(target_endian = "little"),
    "the IOCTL ABI is little-endian"
);

/// An ABI structure read from and written to a caller's buffer as it lies in memory.
pub trait Wire: IntoBytes + FromBytes + KnownLayout + Immutable + Sized {
    /// Writes the structure at the start of `buf`; a shorter `buf` gets the bytes that fit
    /// (the dispatcher has checked the room: a caller's short buffer never gets here).
    fn encode(&self, buf: &mut [u8]) {
        let bytes = self.as_bytes();
        let n = bytes.len().min(buf.len());
        buf[..n].copy_from_slice(&bytes[..n]);
    }

    /// The structure at the start of `buf`; `None` when `buf` is shorter.
    fn decode(buf: &[u8]) -> Option<Self> {
        Self::read_from_prefix(buf).ok().map(|(v, _)| v)
    }
}

impl<T: IntoBytes + FromBytes + KnownLayout + Immutable> Wire for T {}

/// Starts every input buffer.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct InputHeader {
    /// Size of the whole input structure, this header included.
    pub size: u32,
    pub version: u16,
    pub reserved: u16,
}
const_assert_eq!(size_of::<InputHeader>(), 8);
const_assert_eq!(offset_of!(InputHeader, version), 4);
const_assert_eq!(offset_of!(InputHeader, reserved), 6);

/// Input of QUERY_STATE, GET_POLICY and RESTART: the header alone.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct EmptyIn {
    pub header: InputHeader,
}
const_assert_eq!(size_of::<EmptyIn>(), 8);

/// `StateOut::flags` bit 0: a reset is in progress.
pub const STATE_RESET_IN_PROGRESS: u32 = 1;
/// `StateOut::flags` bit 1: no reset is in progress and a port that was Active before the
/// last one is not Active again: the adapter is back, the service not yet (docs/design.md §5
/// "Service restored").
pub const STATE_RECOVERING: u32 = 2;
/// `StateOut::flags` bit 2: a PnP stop of the adapter is pending (the driver allowed a
/// query-stop): a reset or restart asked for now is refused busy until the stop and the
/// restart, or the stop's cancel. A caller that predates the bit ignores it.
pub const STATE_STOP_PENDING: u32 = 4;
/// `StateOut::flags` bits 8-15: the ports (bit 8: port 1) that were Active before the last
/// reset and are not Active again.
pub const STATE_AWAITED_PORTS_SHIFT: u32 = 8;

/// Output of QUERY_STATE.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct StateOut {
    /// `State` as its number (1 Operational .. 6 Removed).
    pub state: u32,
    /// [`STATE_RESET_IN_PROGRESS`], [`STATE_RECOVERING`], [`STATE_STOP_PENDING`], and the
    /// ports awaited from
    /// [`STATE_AWAITED_PORTS_SHIFT`].
    pub flags: u32,
    pub epoch: u64,
    pub node_guid: u64,
    pub serial: u64,
    pub fw_version: u64,
    pub vendor_id: u16,
    pub device_id: u16,
    pub subsys_vendor_id: u16,
    pub subsys_id: u16,
    pub clients: u32,
    pub max_clients: u32,
    pub resets_started: u64,
    pub resets_restored: u64,
    pub resets_failed: u64,
    pub resets_aborted: u64,
    /// Clients' bus calls refused (since version 6 without the administrator's).
    pub refusals: u64,
    pub pnp_operations: u64,
    /// The last reset: its epoch, `ResetReason` number, result code (see
    /// [`result_code`]), and phase durations; `NONE_U64` where there is none.
    pub last_epoch: u64,
    pub last_reason: u32,
    pub last_result: u32,
    pub last_quiesce_us: u64,
    pub last_hw_reset_us: u64,
    pub last_restore_us: u64,
    pub last_total_us: u64,
    /// The flight recorder's next sequence number.
    pub log_next_seq: u64,
    /// Version 3: port 1 and port 2.
    pub ports: [PortOut; 2],
    /// Version 6: the administrator's requests refused (policy, restart, reset).
    pub admin_refusals: u64,
    /// Version 7: the wall-clock time of the bus's time zero, in milliseconds since the Unix
    /// epoch (UTC), read when the request is served: every `_us` time of the bus plus this
    /// is the system's time of day. 0 when the host has no wall clock.
    pub time_zero_unix_ms: u64,
    /// Version 7: ports 1 and 2 in full.
    pub port_info: [PortInfoOut; 2],
    /// Version 7: resets started, by `ResetReason` number (index 0: an administrator's
    /// restart of a Failed device).
    pub resets_by_reason: [u64; RESET_REASON_SLOTS],
}
/// Slots of `StateOut::resets_by_reason`: a restart and the seven reasons, with room to grow.
pub const RESET_REASON_SLOTS: usize = 12;
const_assert_eq!(size_of::<StateOut>(), 384);
const_assert_eq!(offset_of!(StateOut, time_zero_unix_ms), STATE_V6_BYTES);
const_assert_eq!(offset_of!(StateOut, port_info), 192);
const_assert_eq!(offset_of!(StateOut, resets_by_reason), 288);
const_assert_eq!(offset_of!(StateOut, admin_refusals), STATE_V5_BYTES);
const_assert_eq!(offset_of!(StateOut, ports), STATE_V2_BYTES);
const_assert_eq!(offset_of!(StateOut, epoch), 8);
const_assert_eq!(offset_of!(StateOut, vendor_id), 40);
const_assert_eq!(offset_of!(StateOut, clients), 48);
const_assert_eq!(offset_of!(StateOut, resets_started), 56);
const_assert_eq!(offset_of!(StateOut, last_epoch), 104);
const_assert_eq!(offset_of!(StateOut, last_reason), 112);
const_assert_eq!(offset_of!(StateOut, last_quiesce_us), 120);
const_assert_eq!(offset_of!(StateOut, log_next_seq), 152);

/// One port in QUERY_STATE (version 3).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct PortOut {
    /// `PortState` as its number (1 Down .. 4 Active); 0: the hardware never reported it.
    pub state: u32,
    /// The LID while Active, else 0.
    pub lid: u32,
}
const_assert_eq!(size_of::<PortOut>(), 8);
const_assert_eq!(offset_of!(PortOut, lid), 4);

/// One port in QUERY_STATE as `ibstat` shows it (version 7).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct PortInfoOut {
    /// `PortState` number; 0: the hardware never reported the port (nothing else is set).
    pub state: u32,
    /// `PhysState` number (IBA PortPhysicalState).
    pub phys_state: u32,
    /// The port's LID while Active, else 0.
    pub lid: u32,
    /// The subnet manager's LID while Active, else 0.
    pub sm_lid: u32,
    /// Lanes in use while the link is up (1, 2, 4, 8, 12), else 0.
    pub width: u32,
    /// `LinkSpeed` number while the link is up, else 0.
    pub speed: u32,
    /// Width times the lane's rate, in Mb/s; 0 while the link is down.
    pub rate_mbps: u32,
    pub reserved: u32,
    /// GID index 0, network byte order.
    pub gid: [u8; 16],
}
const_assert_eq!(size_of::<PortInfoOut>(), 48);
const_assert_eq!(offset_of!(PortInfoOut, rate_mbps), 24);
const_assert_eq!(offset_of!(PortInfoOut, gid), 32);

wire_enum! {
    /// The health reporter's state in QUERY_HEALTH, as devlink health names its own.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ReporterState {
        /// No error, or the last one recovered.
        Healthy = 1 => "healthy",
        /// An error was found and the device has not recovered yet (a reset is under way).
        InError = 2 => "error",
        /// The device is Failed: an error it did not recover from, or auto_recover off.
        Failed = 3 => "failed",
        /// The device is gone.
        Removed = 4 => "removed",
    }
}

/// Output of QUERY_HEALTH (ABI version 4; the input is `EmptyIn`). Times are microseconds
/// of the bus's clock, which `now_us` gives, so that a reader can tell ages.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct HealthOut {
    /// `ReporterState` as its number.
    pub reporter_state: u32,
    /// 1 when a fatal error resets the device, 0 when it leaves it Failed.
    pub auto_recover: u32,
    /// Fatal errors found (catastrophic, command timeout, health stall).
    pub error_count: u64,
    /// Resets that restored the device after an error.
    pub recover_count: u64,
    /// When the last error was found; `NONE_U64` for none.
    pub last_error_us: u64,
    /// Its cause as a `ResetReason` number; 0 for none.
    pub last_error_cause: u32,
    /// The catastrophic-error buffer's word for a catastrophic error the health poll read;
    /// 0 otherwise.
    pub last_syndrome: u32,
    /// The firmware health counter as last read.
    pub health_counter: u32,
    /// Reads in a row that found it unchanged (3 is a stall).
    pub unchanged_polls: u32,
    /// When a read last found the counter moving; `NONE_U64` if never read.
    pub counter_moved_us: u64,
    /// The bus's clock now.
    pub now_us: u64,
    /// The grace period: automatic resets are counted over this window (the storm window),
    /// and at most `max_auto_resets` of them run in it.
    pub grace_period_ms: u64,
    pub max_auto_resets: u32,
    /// How often health is read.
    pub health_poll_ms: u32,
    /// Ports 1 and 2 as in QUERY_STATE.
    pub ports: [PortOut; 2],
}
const_assert_eq!(size_of::<HealthOut>(), 96);
const_assert_eq!(offset_of!(HealthOut, auto_recover), 4);
const_assert_eq!(offset_of!(HealthOut, error_count), 8);
const_assert_eq!(offset_of!(HealthOut, recover_count), 16);
const_assert_eq!(offset_of!(HealthOut, last_error_us), 24);
const_assert_eq!(offset_of!(HealthOut, last_error_cause), 32);
const_assert_eq!(offset_of!(HealthOut, last_syndrome), 36);
const_assert_eq!(offset_of!(HealthOut, health_counter), 40);
const_assert_eq!(offset_of!(HealthOut, unchanged_polls), 44);
const_assert_eq!(offset_of!(HealthOut, counter_moved_us), 48);
const_assert_eq!(offset_of!(HealthOut, now_us), 56);
const_assert_eq!(offset_of!(HealthOut, grace_period_ms), 64);
const_assert_eq!(offset_of!(HealthOut, max_auto_resets), 72);
const_assert_eq!(offset_of!(HealthOut, health_poll_ms), 76);
const_assert_eq!(offset_of!(HealthOut, ports), 80);

/// Input of LIST_CLIENTS.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct ListClientsIn {
    pub header: InputHeader,
    /// Skip this many clients (paging through a long list).
    pub start: u32,
    pub reserved: u32,
}
const_assert_eq!(size_of::<ListClientsIn>(), 16);
const_assert_eq!(offset_of!(ListClientsIn, start), 8);

/// Head of LIST_CLIENTS' output; `count` entries follow.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct ListClientsOut {
    /// Clients registered.
    pub total: u32,
    /// Entries that follow (as many as fit the output buffer).
    pub count: u32,
}
const_assert_eq!(size_of::<ListClientsOut>(), 8);

/// Input of READ_LOG.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct ReadLogIn {
    pub header: InputHeader,
    /// First sequence number wanted.
    pub since_seq: u64,
    /// At most this many records (0: as many as fit).
    pub max_records: u32,
    pub reserved: u32,
}
const_assert_eq!(size_of::<ReadLogIn>(), 24);
const_assert_eq!(offset_of!(ReadLogIn, since_seq), 8);
const_assert_eq!(offset_of!(ReadLogIn, max_records), 16);

/// Head of READ_LOG's output; `count` records of `record_bytes` each follow: 128 in
/// version 5 (`Record::encode`), 64 before (`Record::encode_v4`).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct ReadLogOut {
    pub count: u32,
    /// Version 5; reserved (0) before.
    pub record_bytes: u32,
    /// The sequence number to ask for next.
    pub next_seq: u64,
    /// Records the ring has overwritten since the bus started.
    pub dropped: u64,
}
const_assert_eq!(size_of::<ReadLogOut>(), 24);
const_assert_eq!(offset_of!(ReadLogOut, next_seq), 8);
const_assert_eq!(offset_of!(ReadLogOut, dropped), 16);

/// Input of SET_POLICY.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct SetPolicyIn {
    pub header: InputHeader,
    pub policy: PolicyAbi,
}
const_assert_eq!(
    size_of::<SetPolicyIn>(),
    size_of::<InputHeader>() + size_of::<PolicyAbi>()
);
const_assert_eq!(offset_of!(SetPolicyIn, policy), 8);

wire_enum! {
    /// How REQUEST_RESET resets.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ResetMode {
        Forced = 0 => "forced",
        /// Clients with CAN_VETO may refuse it.
        Planned = 1 => "planned",
        /// The firmware version may change.
        FirmwareActivate = 2 => "fw_activate",
    }
}

impl ResetMode {
    pub const fn admin(self) -> AdminReset {
        match self {
            ResetMode::Forced => AdminReset::Forced,
            ResetMode::Planned => AdminReset::Planned,
            ResetMode::FirmwareActivate => AdminReset::FirmwareActivate,
        }
    }
}

/// Input of REQUEST_RESET.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, IntoBytes, FromBytes, KnownLayout, Immutable)]
pub struct RequestResetIn {
    pub header: InputHeader,
    /// `ResetMode` number.
    pub mode: u32,
    pub reserved: u32,
    /// Why, for the log: UTF-8, NUL-padded.
    pub reason: [u8; 64],
}
const_assert_eq!(size_of::<RequestResetIn>(), 80);
const_assert_eq!(offset_of!(RequestResetIn, mode), 8);
const_assert_eq!(offset_of!(RequestResetIn, reason), 16);

/// Output of REQUEST_RESET and RESTART.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct EpochOut {
    /// The epoch the reset tears down.
    pub epoch: u64,
}
const_assert_eq!(size_of::<EpochOut>(), 8);

/// `StateOut::last_result` of a planned reset a veto called off ([`result_code`]).
pub const RESULT_VETOED: u32 = 0x20 | (AbortCause::Veto as u32 - 1);
/// `StateOut::last_result` of a planned reset called off for an unresponsive client.
pub const RESULT_ABORTED_UNRESPONSIVE: u32 = 0x20 | (AbortCause::Unresponsive as u32 - 1);

/// Result code of a reset in `StateOut::last_result`: 0 none yet, the `ResetOutcome`
/// number, `0x10 |` the `FailReason` number, `0x20 |` the `AbortCause` number less one,
/// 0x30 removed.
pub fn result_code(r: Option<ResetResult>) -> u32 {
    match r {
        None => 0,
        Some(ResetResult::Restored(o)) => o as u32,
        Some(ResetResult::Failed(e)) => 0x10 | e as u32,
        Some(ResetResult::Aborted { cause, .. }) => 0x20 | (cause as u32 - 1),
        Some(ResetResult::Removed) => 0x30,
    }
}

/// The name of a `last_result` code, as reports give it ([`ResetResult::as_str`]); the
/// inverse of [`result_code`]. `None` for a number no result has.
pub fn result_name(code: u32) -> Option<&'static str> {
    let result = match code {
        0 => return Some("unfinished"),
        0x10..=0x1F => ResetResult::Failed(FailReason::try_from(code & 0xF).ok()?),
        0x20..=0x2F => ResetResult::Aborted {
            by: ClientId::from_raw(0),
            cause: AbortCause::try_from((code & 0xF) + 1).ok()?,
        },
        0x30 => ResetResult::Removed,
        _ => ResetResult::Restored(ResetOutcome::try_from(code).ok()?),
    };
    Some(result.as_str())
}
