//! The IOCTL interface of SPEC §8: codes, NTSTATUS values, the `#[repr(C)]` little-endian
//! structures, and the one dispatcher every host uses (the KMDF queue, the simulator's
//! socket server, tests).
//!
//! The structures are the contract with outside tools. Their sizes and field offsets are
//! asserted at compile time, and encoding writes each field at `offset_of!` of its
//! structure, so the bytes on the wire cannot drift from the declared layout. Nothing is
//! transmuted (the crate forbids it): every field is read and written little-endian by
//! hand.
//!
//! A malformed request is refused with its NTSTATUS before anything is done: the
//! dispatcher decodes and validates completely, then acts.

use core::fmt;
use core::mem::{offset_of, size_of};

use bitflags::bitflags;
use static_assertions::const_assert_eq;

use crate::coordinator::{AdminReset, ClientState, Coordinator, ResetResult, State};
use crate::policy::Policy;
use crate::recorder::RECORD_BYTES;
use crate::time::{Duration, Instant};
use crate::types::{AbortCause, ClientName};

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

pub const IOCTL_HCABUS_QUERY_STATE: u32 = code(0x900, FILE_READ_ACCESS);
pub const IOCTL_HCABUS_LIST_CLIENTS: u32 = code(0x901, FILE_READ_ACCESS);
pub const IOCTL_HCABUS_READ_LOG: u32 = code(0x902, FILE_READ_ACCESS);
pub const IOCTL_HCABUS_GET_POLICY: u32 = code(0x903, FILE_READ_ACCESS);
pub const IOCTL_HCABUS_REQUEST_RESET: u32 = code(0x910, RW);
pub const IOCTL_HCABUS_RESTART: u32 = code(0x911, RW);
pub const IOCTL_HCABUS_SET_POLICY: u32 = code(0x912, RW);
pub const IOCTL_HCABUS_INJECT_FAULT: u32 = code(0x9F0, RW);

const_assert_eq!(IOCTL_HCABUS_QUERY_STATE, 0x003B_6400);
const_assert_eq!(IOCTL_HCABUS_REQUEST_RESET, 0x003B_E440);
const_assert_eq!(IOCTL_HCABUS_INJECT_FAULT, 0x003B_E7C0);

/// Every code, with its name (for tools and logs).
pub const CODES: [(u32, &str); 8] = [
    (IOCTL_HCABUS_QUERY_STATE, "IOCTL_HCABUS_QUERY_STATE"),
    (IOCTL_HCABUS_LIST_CLIENTS, "IOCTL_HCABUS_LIST_CLIENTS"),
    (IOCTL_HCABUS_READ_LOG, "IOCTL_HCABUS_READ_LOG"),
    (IOCTL_HCABUS_GET_POLICY, "IOCTL_HCABUS_GET_POLICY"),
    (IOCTL_HCABUS_REQUEST_RESET, "IOCTL_HCABUS_REQUEST_RESET"),
    (IOCTL_HCABUS_RESTART, "IOCTL_HCABUS_RESTART"),
    (IOCTL_HCABUS_SET_POLICY, "IOCTL_HCABUS_SET_POLICY"),
    (IOCTL_HCABUS_INJECT_FAULT, "IOCTL_HCABUS_INJECT_FAULT"),
];

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

/// The only version of every structure so far.
pub const ABI_VERSION: u16 = 1;
/// "None" in a `u64` field (no last reset, no latency yet).
pub const NONE_U64: u64 = u64::MAX;

// ----- structures -----

/// Starts every input buffer.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EmptyIn {
    pub header: InputHeader,
}
const_assert_eq!(size_of::<EmptyIn>(), 8);

/// Output of QUERY_STATE.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StateOut {
    /// `State` as its number (1 Operational .. 6 Removed).
    pub state: u32,
    /// Bit 0: a reset is in progress.
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
}
const_assert_eq!(size_of::<StateOut>(), 160);
const_assert_eq!(offset_of!(StateOut, epoch), 8);
const_assert_eq!(offset_of!(StateOut, vendor_id), 40);
const_assert_eq!(offset_of!(StateOut, clients), 48);
const_assert_eq!(offset_of!(StateOut, resets_started), 56);
const_assert_eq!(offset_of!(StateOut, last_epoch), 104);
const_assert_eq!(offset_of!(StateOut, last_reason), 112);
const_assert_eq!(offset_of!(StateOut, last_quiesce_us), 120);
const_assert_eq!(offset_of!(StateOut, log_next_seq), 152);

/// Input of LIST_CLIENTS.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ListClientsOut {
    /// Clients registered.
    pub total: u32,
    /// Entries that follow (as many as fit the output buffer).
    pub count: u32,
}
const_assert_eq!(size_of::<ListClientsOut>(), 8);

/// One client in LIST_CLIENTS.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClientEntry {
    /// `ClientId::to_raw`.
    pub id: u64,
    /// `ClientKind` number.
    pub kind: u32,
    /// `ClientFlags` bits.
    pub flags: u32,
    /// `ClientState` number.
    pub state: u32,
    pub in_barrier: u32,
    /// Time from RESET to execute in the last reset; `NONE_U64` if none yet.
    pub last_ack_latency_us: u64,
    /// UTF-8, NUL-padded.
    pub name: [u8; 32],
}
const_assert_eq!(size_of::<ClientEntry>(), 64);
const_assert_eq!(offset_of!(ClientEntry, kind), 8);
const_assert_eq!(offset_of!(ClientEntry, state), 16);
const_assert_eq!(offset_of!(ClientEntry, last_ack_latency_us), 24);
const_assert_eq!(offset_of!(ClientEntry, name), 32);

/// Input of READ_LOG.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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

/// Head of READ_LOG's output; `count` records of 64 bytes (`Record::encode`) follow.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReadLogOut {
    pub count: u32,
    pub reserved: u32,
    /// The sequence number to ask for next.
    pub next_seq: u64,
    /// Records the ring has overwritten since the bus started.
    pub dropped: u64,
}
const_assert_eq!(size_of::<ReadLogOut>(), 24);
const_assert_eq!(offset_of!(ReadLogOut, next_seq), 8);
const_assert_eq!(offset_of!(ReadLogOut, dropped), 16);

/// The policy, as GET_POLICY returns it and SET_POLICY takes it.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PolicyAbi {
    pub quiesce_deadline_ms: u64,
    pub hw_ready_timeout_ms: u64,
    pub hw_poll_interval_ms: u64,
    pub auto_restart_window_ms: u64,
    pub storm_window_ms: u64,
    pub io_hold_timeout_ms: u64,
    pub health_poll_interval_ms: u64,
    pub reset_retries: u32,
    pub max_auto_resets: u32,
    /// 0 or 1.
    pub abort_on_unresponsive: u32,
    pub reserved: u32,
}
const_assert_eq!(size_of::<PolicyAbi>(), 72);
const_assert_eq!(offset_of!(PolicyAbi, io_hold_timeout_ms), 40);
const_assert_eq!(offset_of!(PolicyAbi, reset_retries), 56);
const_assert_eq!(offset_of!(PolicyAbi, abort_on_unresponsive), 64);

/// Input of SET_POLICY.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SetPolicyIn {
    pub header: InputHeader,
    pub policy: PolicyAbi,
}
const_assert_eq!(size_of::<SetPolicyIn>(), 80);
const_assert_eq!(offset_of!(SetPolicyIn, policy), 8);

/// How REQUEST_RESET resets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum ResetMode {
    Forced = 0,
    /// Clients with CAN_VETO may refuse it.
    Planned = 1,
    /// The firmware version may change.
    FirmwareActivate = 2,
}

/// Input of REQUEST_RESET.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EpochOut {
    /// The epoch the reset tears down.
    pub epoch: u64,
}
const_assert_eq!(size_of::<EpochOut>(), 8);

/// Faults the simulator can inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum FaultCode {
    Catastrophic = 1,
    CommandTimeout = 2,
    HealthStall = 3,
    Hang = 4,
    /// The next `count` reset assertions fail.
    ResetFails = 5,
    DeviceReplaced = 6,
    NeverReturns = 7,
    SurpriseRemoval = 8,
}

impl FaultCode {
    pub const ALL: [FaultCode; 8] = [
        FaultCode::Catastrophic,
        FaultCode::CommandTimeout,
        FaultCode::HealthStall,
        FaultCode::Hang,
        FaultCode::ResetFails,
        FaultCode::DeviceReplaced,
        FaultCode::NeverReturns,
        FaultCode::SurpriseRemoval,
    ];

    pub fn from_u32(v: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|f| *f as u32 == v)
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            FaultCode::Catastrophic => "catastrophic",
            FaultCode::CommandTimeout => "command_timeout",
            FaultCode::HealthStall => "health_stall",
            FaultCode::Hang => "hang",
            FaultCode::ResetFails => "reset_fails",
            FaultCode::DeviceReplaced => "device_replaced",
            FaultCode::NeverReturns => "never_returns",
            FaultCode::SurpriseRemoval => "surprise_removal",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.as_str() == s)
    }
}

/// Input of INJECT_FAULT.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InjectFaultIn {
    pub header: InputHeader,
    /// `FaultCode` number.
    pub fault: u32,
    /// For `ResetFails`: how many; otherwise 0.
    pub count: u32,
}
const_assert_eq!(size_of::<InjectFaultIn>(), 16);
const_assert_eq!(offset_of!(InjectFaultIn, fault), 8);
const_assert_eq!(offset_of!(InjectFaultIn, count), 12);

/// Result code of a reset in `StateOut::last_result`.
pub fn result_code(r: Option<ResetResult>) -> u32 {
    match r {
        None => 0,
        Some(ResetResult::Restored(o)) => o as u32,
        Some(ResetResult::Failed(e)) => 0x10 | e as u32,
        Some(ResetResult::Aborted {
            cause: AbortCause::Veto,
            ..
        }) => 0x20,
        Some(ResetResult::Aborted {
            cause: AbortCause::Unresponsive,
            ..
        }) => 0x21,
        Some(ResetResult::Removed) => 0x30,
    }
}

// ----- little-endian field access -----

fn put(buf: &mut [u8], at: usize, bytes: &[u8]) {
    if let Some(dst) = buf.get_mut(at..at + bytes.len()) {
        dst.copy_from_slice(bytes);
    }
}

fn put_u16(buf: &mut [u8], at: usize, v: u16) {
    put(buf, at, &v.to_le_bytes());
}

fn put_u32(buf: &mut [u8], at: usize, v: u32) {
    put(buf, at, &v.to_le_bytes());
}

fn put_u64(buf: &mut [u8], at: usize, v: u64) {
    put(buf, at, &v.to_le_bytes());
}

fn get<const N: usize>(buf: &[u8], at: usize) -> Option<[u8; N]> {
    buf.get(at..at + N)?.try_into().ok()
}

fn get_u16(buf: &[u8], at: usize) -> Option<u16> {
    get(buf, at).map(u16::from_le_bytes)
}

fn get_u32(buf: &[u8], at: usize) -> Option<u32> {
    get(buf, at).map(u32::from_le_bytes)
}

fn get_u64(buf: &[u8], at: usize) -> Option<u64> {
    get(buf, at).map(u64::from_le_bytes)
}

fn us(d: Option<Duration>) -> u64 {
    d.map_or(NONE_U64, Duration::as_us)
}

impl InputHeader {
    /// The header a well-formed input of type `T` carries.
    pub const fn for_input<T>() -> Self {
        InputHeader {
            size: size_of::<T>() as u32,
            version: ABI_VERSION,
            reserved: 0,
        }
    }

    pub fn encode(&self, buf: &mut [u8]) {
        put_u32(buf, offset_of!(InputHeader, size), self.size);
        put_u16(buf, offset_of!(InputHeader, version), self.version);
        put_u16(buf, offset_of!(InputHeader, reserved), self.reserved);
    }

    pub fn decode(buf: &[u8]) -> Option<Self> {
        Some(InputHeader {
            size: get_u32(buf, offset_of!(InputHeader, size))?,
            version: get_u16(buf, offset_of!(InputHeader, version))?,
            reserved: get_u16(buf, offset_of!(InputHeader, reserved))?,
        })
    }
}

impl PolicyAbi {
    pub fn from_policy(p: &Policy) -> Self {
        PolicyAbi {
            quiesce_deadline_ms: p.quiesce_deadline_ms,
            hw_ready_timeout_ms: p.hw_ready_timeout_ms,
            hw_poll_interval_ms: p.hw_poll_interval_ms,
            auto_restart_window_ms: p.auto_restart_window_ms,
            storm_window_ms: p.storm_window_ms,
            io_hold_timeout_ms: p.io_hold_timeout_ms,
            health_poll_interval_ms: p.health_poll_interval_ms,
            reset_retries: u32::from(p.reset_retries),
            max_auto_resets: u32::from(p.max_auto_resets),
            abort_on_unresponsive: u32::from(p.abort_on_unresponsive),
            reserved: 0,
        }
    }

    /// The policy this names, or `None` if a field cannot be one (validation of the
    /// values themselves is `Policy::validate`'s).
    pub fn to_policy(&self) -> Option<Policy> {
        Some(Policy {
            quiesce_deadline_ms: self.quiesce_deadline_ms,
            hw_ready_timeout_ms: self.hw_ready_timeout_ms,
            hw_poll_interval_ms: self.hw_poll_interval_ms,
            reset_retries: u8::try_from(self.reset_retries).ok()?,
            auto_restart_window_ms: self.auto_restart_window_ms,
            max_auto_resets: u8::try_from(self.max_auto_resets).ok()?,
            storm_window_ms: self.storm_window_ms,
            io_hold_timeout_ms: self.io_hold_timeout_ms,
            abort_on_unresponsive: match self.abort_on_unresponsive {
                0 => false,
                1 => true,
                _ => return None,
            },
            health_poll_interval_ms: self.health_poll_interval_ms,
        })
        .filter(|_| self.reserved == 0)
    }

    pub fn encode(&self, buf: &mut [u8]) {
        put_u64(
            buf,
            offset_of!(PolicyAbi, quiesce_deadline_ms),
            self.quiesce_deadline_ms,
        );
        put_u64(
            buf,
            offset_of!(PolicyAbi, hw_ready_timeout_ms),
            self.hw_ready_timeout_ms,
        );
        put_u64(
            buf,
            offset_of!(PolicyAbi, hw_poll_interval_ms),
            self.hw_poll_interval_ms,
        );
        put_u64(
            buf,
            offset_of!(PolicyAbi, auto_restart_window_ms),
            self.auto_restart_window_ms,
        );
        put_u64(
            buf,
            offset_of!(PolicyAbi, storm_window_ms),
            self.storm_window_ms,
        );
        put_u64(
            buf,
            offset_of!(PolicyAbi, io_hold_timeout_ms),
            self.io_hold_timeout_ms,
        );
        put_u64(
            buf,
            offset_of!(PolicyAbi, health_poll_interval_ms),
            self.health_poll_interval_ms,
        );
        put_u32(
            buf,
            offset_of!(PolicyAbi, reset_retries),
            self.reset_retries,
        );
        put_u32(
            buf,
            offset_of!(PolicyAbi, max_auto_resets),
            self.max_auto_resets,
        );
        put_u32(
            buf,
            offset_of!(PolicyAbi, abort_on_unresponsive),
            self.abort_on_unresponsive,
        );
        put_u32(buf, offset_of!(PolicyAbi, reserved), self.reserved);
    }

    pub fn decode(buf: &[u8]) -> Option<Self> {
        Some(PolicyAbi {
            quiesce_deadline_ms: get_u64(buf, offset_of!(PolicyAbi, quiesce_deadline_ms))?,
            hw_ready_timeout_ms: get_u64(buf, offset_of!(PolicyAbi, hw_ready_timeout_ms))?,
            hw_poll_interval_ms: get_u64(buf, offset_of!(PolicyAbi, hw_poll_interval_ms))?,
            auto_restart_window_ms: get_u64(buf, offset_of!(PolicyAbi, auto_restart_window_ms))?,
            storm_window_ms: get_u64(buf, offset_of!(PolicyAbi, storm_window_ms))?,
            io_hold_timeout_ms: get_u64(buf, offset_of!(PolicyAbi, io_hold_timeout_ms))?,
            health_poll_interval_ms: get_u64(buf, offset_of!(PolicyAbi, health_poll_interval_ms))?,
            reset_retries: get_u32(buf, offset_of!(PolicyAbi, reset_retries))?,
            max_auto_resets: get_u32(buf, offset_of!(PolicyAbi, max_auto_resets))?,
            abort_on_unresponsive: get_u32(buf, offset_of!(PolicyAbi, abort_on_unresponsive))?,
            reserved: get_u32(buf, offset_of!(PolicyAbi, reserved))?,
        })
    }
}

impl StateOut {
    pub fn encode(&self, buf: &mut [u8]) {
        put_u32(buf, offset_of!(StateOut, state), self.state);
        put_u32(buf, offset_of!(StateOut, flags), self.flags);
        for (at, v) in [
            (offset_of!(StateOut, epoch), self.epoch),
            (offset_of!(StateOut, node_guid), self.node_guid),
            (offset_of!(StateOut, serial), self.serial),
            (offset_of!(StateOut, fw_version), self.fw_version),
            (offset_of!(StateOut, resets_started), self.resets_started),
            (offset_of!(StateOut, resets_restored), self.resets_restored),
            (offset_of!(StateOut, resets_failed), self.resets_failed),
            (offset_of!(StateOut, resets_aborted), self.resets_aborted),
            (offset_of!(StateOut, refusals), self.refusals),
            (offset_of!(StateOut, pnp_operations), self.pnp_operations),
            (offset_of!(StateOut, last_epoch), self.last_epoch),
            (offset_of!(StateOut, last_quiesce_us), self.last_quiesce_us),
            (
                offset_of!(StateOut, last_hw_reset_us),
                self.last_hw_reset_us,
            ),
            (offset_of!(StateOut, last_restore_us), self.last_restore_us),
            (offset_of!(StateOut, last_total_us), self.last_total_us),
            (offset_of!(StateOut, log_next_seq), self.log_next_seq),
        ] {
            put_u64(buf, at, v);
        }
        put_u16(buf, offset_of!(StateOut, vendor_id), self.vendor_id);
        put_u16(buf, offset_of!(StateOut, device_id), self.device_id);
        put_u16(
            buf,
            offset_of!(StateOut, subsys_vendor_id),
            self.subsys_vendor_id,
        );
        put_u16(buf, offset_of!(StateOut, subsys_id), self.subsys_id);
        put_u32(buf, offset_of!(StateOut, clients), self.clients);
        put_u32(buf, offset_of!(StateOut, max_clients), self.max_clients);
        put_u32(buf, offset_of!(StateOut, last_reason), self.last_reason);
        put_u32(buf, offset_of!(StateOut, last_result), self.last_result);
    }

    pub fn decode(buf: &[u8]) -> Option<Self> {
        let u64_at = |at| get_u64(buf, at);
        Some(StateOut {
            state: get_u32(buf, offset_of!(StateOut, state))?,
            flags: get_u32(buf, offset_of!(StateOut, flags))?,
            epoch: u64_at(offset_of!(StateOut, epoch))?,
            node_guid: u64_at(offset_of!(StateOut, node_guid))?,
            serial: u64_at(offset_of!(StateOut, serial))?,
            fw_version: u64_at(offset_of!(StateOut, fw_version))?,
            vendor_id: get_u16(buf, offset_of!(StateOut, vendor_id))?,
            device_id: get_u16(buf, offset_of!(StateOut, device_id))?,
            subsys_vendor_id: get_u16(buf, offset_of!(StateOut, subsys_vendor_id))?,
            subsys_id: get_u16(buf, offset_of!(StateOut, subsys_id))?,
            clients: get_u32(buf, offset_of!(StateOut, clients))?,
            max_clients: get_u32(buf, offset_of!(StateOut, max_clients))?,
            resets_started: u64_at(offset_of!(StateOut, resets_started))?,
            resets_restored: u64_at(offset_of!(StateOut, resets_restored))?,
            resets_failed: u64_at(offset_of!(StateOut, resets_failed))?,
            resets_aborted: u64_at(offset_of!(StateOut, resets_aborted))?,
            refusals: u64_at(offset_of!(StateOut, refusals))?,
            pnp_operations: u64_at(offset_of!(StateOut, pnp_operations))?,
            last_epoch: u64_at(offset_of!(StateOut, last_epoch))?,
            last_reason: get_u32(buf, offset_of!(StateOut, last_reason))?,
            last_result: get_u32(buf, offset_of!(StateOut, last_result))?,
            last_quiesce_us: u64_at(offset_of!(StateOut, last_quiesce_us))?,
            last_hw_reset_us: u64_at(offset_of!(StateOut, last_hw_reset_us))?,
            last_restore_us: u64_at(offset_of!(StateOut, last_restore_us))?,
            last_total_us: u64_at(offset_of!(StateOut, last_total_us))?,
            log_next_seq: u64_at(offset_of!(StateOut, log_next_seq))?,
        })
    }
}

impl ClientEntry {
    pub fn encode(&self, buf: &mut [u8]) {
        put_u64(buf, offset_of!(ClientEntry, id), self.id);
        put_u32(buf, offset_of!(ClientEntry, kind), self.kind);
        put_u32(buf, offset_of!(ClientEntry, flags), self.flags);
        put_u32(buf, offset_of!(ClientEntry, state), self.state);
        put_u32(buf, offset_of!(ClientEntry, in_barrier), self.in_barrier);
        put_u64(
            buf,
            offset_of!(ClientEntry, last_ack_latency_us),
            self.last_ack_latency_us,
        );
        put(buf, offset_of!(ClientEntry, name), &self.name);
    }

    pub fn decode(buf: &[u8]) -> Option<Self> {
        Some(ClientEntry {
            id: get_u64(buf, offset_of!(ClientEntry, id))?,
            kind: get_u32(buf, offset_of!(ClientEntry, kind))?,
            flags: get_u32(buf, offset_of!(ClientEntry, flags))?,
            state: get_u32(buf, offset_of!(ClientEntry, state))?,
            in_barrier: get_u32(buf, offset_of!(ClientEntry, in_barrier))?,
            last_ack_latency_us: get_u64(buf, offset_of!(ClientEntry, last_ack_latency_us))?,
            name: get(buf, offset_of!(ClientEntry, name))?,
        })
    }

    /// The name, up to its first NUL.
    pub fn name(&self) -> &str {
        let end = self.name.iter().position(|b| *b == 0).unwrap_or(32);
        core::str::from_utf8(&self.name[..end]).unwrap_or("?")
    }
}

impl RequestResetIn {
    pub fn new(mode: ResetMode, reason: &str) -> Self {
        let mut r = [0u8; 64];
        // Cut at a character boundary so the field stays valid UTF-8.
        let mut n = reason.len().min(64);
        while !reason.is_char_boundary(n) {
            n -= 1;
        }
        r[..n].copy_from_slice(&reason.as_bytes()[..n]);
        RequestResetIn {
            header: InputHeader::for_input::<Self>(),
            mode: mode as u32,
            reserved: 0,
            reason: r,
        }
    }

    pub fn encode(&self, buf: &mut [u8]) {
        self.header.encode(buf);
        put_u32(buf, offset_of!(RequestResetIn, mode), self.mode);
        put_u32(buf, offset_of!(RequestResetIn, reserved), self.reserved);
        put(buf, offset_of!(RequestResetIn, reason), &self.reason);
    }
}

/// Encodes an input structure whose fields after the header are all `u32`/`u64`.
pub fn encode_list_clients(start: u32, buf: &mut [u8]) {
    InputHeader::for_input::<ListClientsIn>().encode(buf);
    put_u32(buf, offset_of!(ListClientsIn, start), start);
    put_u32(buf, offset_of!(ListClientsIn, reserved), 0);
}

pub fn encode_read_log(since_seq: u64, max_records: u32, buf: &mut [u8]) {
    InputHeader::for_input::<ReadLogIn>().encode(buf);
    put_u64(buf, offset_of!(ReadLogIn, since_seq), since_seq);
    put_u32(buf, offset_of!(ReadLogIn, max_records), max_records);
    put_u32(buf, offset_of!(ReadLogIn, reserved), 0);
}

pub fn encode_set_policy(policy: &PolicyAbi, buf: &mut [u8]) {
    InputHeader::for_input::<SetPolicyIn>().encode(buf);
    policy.encode(&mut buf[offset_of!(SetPolicyIn, policy)..]);
}

pub fn encode_inject_fault(fault: FaultCode, count: u32, buf: &mut [u8]) {
    InputHeader::for_input::<InjectFaultIn>().encode(buf);
    put_u32(buf, offset_of!(InjectFaultIn, fault), fault as u32);
    put_u32(buf, offset_of!(InjectFaultIn, count), count);
}

pub fn encode_empty(buf: &mut [u8]) {
    InputHeader::for_input::<EmptyIn>().encode(buf);
}

/// The input size each code takes (exactly).
pub fn input_size(code: u32) -> Option<usize> {
    Some(match code {
        IOCTL_HCABUS_QUERY_STATE | IOCTL_HCABUS_GET_POLICY | IOCTL_HCABUS_RESTART => {
            size_of::<EmptyIn>()
        }
        IOCTL_HCABUS_LIST_CLIENTS => size_of::<ListClientsIn>(),
        IOCTL_HCABUS_READ_LOG => size_of::<ReadLogIn>(),
        IOCTL_HCABUS_REQUEST_RESET => size_of::<RequestResetIn>(),
        IOCTL_HCABUS_SET_POLICY => size_of::<SetPolicyIn>(),
        IOCTL_HCABUS_INJECT_FAULT => size_of::<InjectFaultIn>(),
        _ => return None,
    })
}

/// The smallest output buffer each code accepts.
pub fn min_output(code: u32) -> usize {
    match code {
        IOCTL_HCABUS_QUERY_STATE => size_of::<StateOut>(),
        IOCTL_HCABUS_LIST_CLIENTS => size_of::<ListClientsOut>(),
        IOCTL_HCABUS_READ_LOG => size_of::<ReadLogOut>(),
        IOCTL_HCABUS_GET_POLICY => size_of::<PolicyAbi>(),
        IOCTL_HCABUS_REQUEST_RESET | IOCTL_HCABUS_RESTART => size_of::<EpochOut>(),
        _ => 0,
    }
}

// ----- the dispatcher -----

/// What the dispatcher acts on: the coordinator, the time, and (in the simulator) the
/// fault injector. A host drains the coordinator's actions after each call.
pub trait IoctlDevice {
    fn coordinator(&mut self) -> &mut Coordinator;
    fn now(&self) -> Instant;
    /// Simulator only: real hardware answers NOT_SUPPORTED.
    fn inject(&mut self, fault: FaultCode, count: u32) -> Result<(), NtStatus> {
        let _ = (fault, count);
        Err(NtStatus::NOT_SUPPORTED)
    }
    /// A reset was requested with this reason text (for the log).
    fn note_reason(&mut self, reason: &str) {
        let _ = reason;
    }
}

/// The outcome of one request: a status and the bytes written to the output buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    pub status: NtStatus,
    pub bytes: usize,
}

impl Reply {
    const fn status(status: NtStatus) -> Self {
        Reply { status, bytes: 0 }
    }

    const fn ok(bytes: usize) -> Self {
        Reply {
            status: NtStatus::SUCCESS,
            bytes,
        }
    }
}

/// A request, decoded and validated: nothing has been done yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decoded<'a> {
    QueryState,
    ListClients { start: u32 },
    ReadLog { since: u64, max: u32 },
    GetPolicy,
    Reset { mode: AdminReset, reason: &'a str },
    Restart,
    SetPolicy(Policy),
    InjectFault { fault: FaultCode, count: u32 },
}

fn decode(code: u32, input: &[u8]) -> Result<Decoded<'_>, NtStatus> {
    let expected = input_size(code).ok_or(NtStatus::INVALID_DEVICE_REQUEST)?;
    let header = InputHeader::decode(input).ok_or(NtStatus::INVALID_BUFFER_SIZE)?;
    if header.version != ABI_VERSION {
        return Err(NtStatus::REVISION_MISMATCH);
    }
    if header.size as usize != expected || input.len() != expected {
        return Err(NtStatus::INVALID_BUFFER_SIZE);
    }
    if header.reserved != 0 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let bad = NtStatus::INVALID_PARAMETER;
    let size = NtStatus::INVALID_BUFFER_SIZE;
    Ok(match code {
        IOCTL_HCABUS_QUERY_STATE => Decoded::QueryState,
        IOCTL_HCABUS_GET_POLICY => Decoded::GetPolicy,
        IOCTL_HCABUS_RESTART => Decoded::Restart,
        IOCTL_HCABUS_LIST_CLIENTS => {
            if get_u32(input, offset_of!(ListClientsIn, reserved)).ok_or(size)? != 0 {
                return Err(bad);
            }
            Decoded::ListClients {
                start: get_u32(input, offset_of!(ListClientsIn, start)).ok_or(size)?,
            }
        }
        IOCTL_HCABUS_READ_LOG => {
            if get_u32(input, offset_of!(ReadLogIn, reserved)).ok_or(size)? != 0 {
                return Err(bad);
            }
            Decoded::ReadLog {
                since: get_u64(input, offset_of!(ReadLogIn, since_seq)).ok_or(size)?,
                max: get_u32(input, offset_of!(ReadLogIn, max_records)).ok_or(size)?,
            }
        }
        IOCTL_HCABUS_REQUEST_RESET => {
            let mode = match get_u32(input, offset_of!(RequestResetIn, mode)).ok_or(size)? {
                0 => AdminReset::Forced,
                1 => AdminReset::Planned,
                2 => AdminReset::FirmwareActivate,
                _ => return Err(bad),
            };
            if get_u32(input, offset_of!(RequestResetIn, reserved)).ok_or(size)? != 0 {
                return Err(bad);
            }
            let at = offset_of!(RequestResetIn, reason);
            let raw = input.get(at..at + 64).ok_or(size)?;
            let end = raw.iter().position(|b| *b == 0).unwrap_or(raw.len());
            if raw[end..].iter().any(|b| *b != 0) {
                return Err(bad);
            }
            let reason = core::str::from_utf8(&raw[..end]).map_err(|_| bad)?;
            Decoded::Reset { mode, reason }
        }
        IOCTL_HCABUS_SET_POLICY => {
            let abi = PolicyAbi::decode(&input[offset_of!(SetPolicyIn, policy)..]).ok_or(size)?;
            let policy = abi.to_policy().ok_or(bad)?;
            policy.validate().map_err(|_| bad)?;
            Decoded::SetPolicy(policy)
        }
        IOCTL_HCABUS_INJECT_FAULT => {
            let raw = get_u32(input, offset_of!(InjectFaultIn, fault)).ok_or(size)?;
            let fault = FaultCode::from_u32(raw).ok_or(bad)?;
            let count = get_u32(input, offset_of!(InjectFaultIn, count)).ok_or(size)?;
            let count_ok = match fault {
                FaultCode::ResetFails => (1..=64).contains(&count),
                _ => count == 0,
            };
            if !count_ok {
                return Err(bad);
            }
            Decoded::InjectFault { fault, count }
        }
        _ => return Err(NtStatus::INVALID_DEVICE_REQUEST),
    })
}

/// Serves one request: decode, validate, act, encode. `rights` are the caller's; `output`
/// is the caller's output buffer (its length is the output capacity).
pub fn dispatch<D: IoctlDevice + ?Sized>(
    dev: &mut D,
    code: u32,
    input: &[u8],
    output: &mut [u8],
    rights: Rights,
) -> Reply {
    if input_size(code).is_none() {
        return Reply::status(NtStatus::INVALID_DEVICE_REQUEST);
    }
    let needed = if needs_write(code) {
        Rights::READ | Rights::WRITE
    } else {
        Rights::READ
    };
    if !rights.contains(needed) {
        return Reply::status(NtStatus::ACCESS_DENIED);
    }
    let request = match decode(code, input) {
        Ok(r) => r,
        Err(s) => return Reply::status(s),
    };
    if output.len() < min_output(code) {
        return Reply::status(NtStatus::BUFFER_TOO_SMALL);
    }
    // A removed device takes no orders: every write code is refused alike (docs/ioctl.md),
    // so no policy or fault lands on a device that is gone.
    if needs_write(code) && dev.coordinator().state() == State::Removed {
        return Reply::status(NtStatus::INVALID_DEVICE_REQUEST);
    }
    act(dev, request, output)
}

fn act<D: IoctlDevice + ?Sized>(dev: &mut D, request: Decoded<'_>, out: &mut [u8]) -> Reply {
    let now = dev.now();
    match request {
        Decoded::QueryState => {
            state_out(dev.coordinator()).encode(out);
            Reply::ok(size_of::<StateOut>())
        }
        Decoded::ListClients { start } => list_clients(dev.coordinator(), start, out),
        Decoded::ReadLog { since, max } => read_log(dev.coordinator(), since, max, out),
        Decoded::GetPolicy => {
            PolicyAbi::from_policy(dev.coordinator().policy()).encode(out);
            Reply::ok(size_of::<PolicyAbi>())
        }
        Decoded::SetPolicy(p) => match dev.coordinator().set_policy(now, p) {
            Ok(()) => Reply::ok(0),
            Err(_) => Reply::status(NtStatus::INVALID_PARAMETER),
        },
        Decoded::Reset { mode, reason } => {
            if !reason.is_empty() {
                dev.note_reason(reason);
            }
            match dev.coordinator().admin_reset(now, mode) {
                Ok(epoch) => {
                    put_u64(out, offset_of!(EpochOut, epoch), epoch.0);
                    Reply::ok(size_of::<EpochOut>())
                }
                Err(_) => Reply::status(NtStatus::INVALID_DEVICE_REQUEST),
            }
        }
        Decoded::Restart => {
            let coord = dev.coordinator();
            let busy = coord.reset_in_progress();
            match coord.admin_restart(now) {
                Ok(epoch) => {
                    put_u64(out, offset_of!(EpochOut, epoch), epoch.0);
                    Reply::ok(size_of::<EpochOut>())
                }
                Err(_) if busy => Reply::status(NtStatus::DEVICE_BUSY),
                Err(_) => Reply::status(NtStatus::INVALID_DEVICE_REQUEST),
            }
        }
        Decoded::InjectFault { fault, count } => match dev.inject(fault, count) {
            Ok(()) => Reply::ok(0),
            Err(s) => Reply::status(s),
        },
    }
}

/// QUERY_STATE's answer for `coord`.
pub fn state_out(coord: &Coordinator) -> StateOut {
    let id = *coord.identity();
    let c = *coord.counters();
    let last = coord.last_reset();
    StateOut {
        state: coord.state() as u32,
        flags: u32::from(coord.reset_in_progress()),
        epoch: coord.epoch().0,
        node_guid: id.node_guid,
        serial: id.serial,
        fw_version: id.fw_version,
        vendor_id: id.vendor_id,
        device_id: id.device_id,
        subsys_vendor_id: id.subsys_vendor_id,
        subsys_id: id.subsys_id,
        clients: coord.client_count() as u32,
        max_clients: coord.max_clients() as u32,
        resets_started: c.resets_started,
        resets_restored: c.resets_restored,
        resets_failed: c.resets_failed,
        resets_aborted: c.resets_aborted,
        refusals: c.refusals,
        pnp_operations: c.pnp_operations,
        last_epoch: last.map_or(NONE_U64, |r| r.epoch.0),
        last_reason: last.map_or(0, |r| r.reason as u32),
        last_result: result_code(last.and_then(|r| r.result)),
        last_quiesce_us: us(last.and_then(|r| r.quiesce())),
        last_hw_reset_us: us(last.and_then(|r| r.hw_reset())),
        last_restore_us: us(last.and_then(|r| r.restore())),
        last_total_us: us(last.and_then(|r| r.total())),
        log_next_seq: coord.recorder().next_seq(),
    }
}

fn list_clients(coord: &Coordinator, start: u32, out: &mut [u8]) -> Reply {
    let head = size_of::<ListClientsOut>();
    let entry = size_of::<ClientEntry>();
    let room = (out.len() - head) / entry;
    let mut count = 0usize;
    for c in coord.clients().skip(start as usize).take(room) {
        let mut name = [0u8; 32];
        let n = c.desc.name.as_str().len().min(ClientName::CAPACITY).min(32);
        name[..n].copy_from_slice(&c.desc.name.as_str().as_bytes()[..n]);
        ClientEntry {
            id: c.id.to_raw(),
            kind: c.desc.kind as u32,
            flags: c.desc.flags.bits(),
            state: c.state as u32,
            in_barrier: u32::from(c.in_barrier),
            last_ack_latency_us: us(c.last_ack_latency),
            name,
        }
        .encode(&mut out[head + count * entry..]);
        count += 1;
    }
    put_u32(
        out,
        offset_of!(ListClientsOut, total),
        coord.client_count() as u32,
    );
    put_u32(out, offset_of!(ListClientsOut, count), count as u32);
    Reply::ok(head + count * entry)
}

fn read_log(coord: &Coordinator, since: u64, max: u32, out: &mut [u8]) -> Reply {
    let head = size_of::<ReadLogOut>();
    let room = (out.len() - head) / RECORD_BYTES;
    let limit = if max == 0 {
        room
    } else {
        room.min(max as usize)
    };
    let rec = coord.recorder();
    let mut count = 0usize;
    let mut next = since.max(rec.next_seq() - rec.len() as u64);
    for r in rec.since(since).take(limit) {
        put(out, head + count * RECORD_BYTES, &r.encode());
        count += 1;
        next = r.seq + 1;
    }
    if count == 0 {
        next = next.min(rec.next_seq());
    }
    put_u32(out, offset_of!(ReadLogOut, count), count as u32);
    put_u32(out, offset_of!(ReadLogOut, reserved), 0);
    put_u64(out, offset_of!(ReadLogOut, next_seq), next);
    put_u64(out, offset_of!(ReadLogOut, dropped), rec.dropped());
    Reply::ok(head + count * RECORD_BYTES)
}

/// Names of `State` numbers, for tools.
pub fn state_name(v: u32) -> &'static str {
    match v {
        1 => State::Operational.as_str(),
        2 => State::Quiescing.as_str(),
        3 => State::Resetting.as_str(),
        4 => State::Restoring.as_str(),
        5 => State::Failed.as_str(),
        6 => State::Removed.as_str(),
        _ => "?",
    }
}

/// Names of `ClientState` numbers, for tools.
pub fn client_state_name(v: u32) -> &'static str {
    [
        ClientState::Active,
        ClientState::Quiescing,
        ClientState::Ready,
        ClientState::Unresponsive,
        ClientState::Late,
        ClientState::Failed,
        ClientState::Fatal,
    ]
    .into_iter()
    .find(|s| *s as u32 == v)
    .map_or("?", |s| s.as_str())
}

#[cfg(all(test, feature = "sim"))]
#[path = "ioctl_tests.rs"]
mod tests;
