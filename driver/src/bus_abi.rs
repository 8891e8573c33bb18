//! The bus interface as a C ABI (docs/design.md §3, "The C ABI"): what a child driver written in C
//! gets through `IRP_MN_QUERY_INTERFACE` with [`GUID_HCABUS_BUS_INTERFACE`].
//!
//! Only the layout and the conversions live here, in the no_std core, so the KMDF glue and
//! the Linux library (`driver/capi`) export the same thing. Every structure is `#[repr(C)]`,
//! its size and every field's offset asserted below for 64-bit targets; `driver/include/hcabus.h`
//! declares the same layout for C, and a test compiles C against it and compares.
//!
//! Conventions, as WDM's: every call returns an NTSTATUS (an `i32`, success when not
//! negative); structures a caller fills start with their size so that a later version can
//! grow them; ids and epochs are `u64`.

use core::ffi::{c_char, c_void};
use core::mem::{offset_of, size_of};

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::errors::RefusalCode;
use crate::ioctl::NtStatus;
use crate::types::*;

/// `{94C1064B-33E7-419F-9DD5-142076BB0D32}`: the interface type a child asks its parent for.
pub const GUID_HCABUS_BUS_INTERFACE: Guid = Guid {
    data1: 0x94C1_064B,
    data2: 0x33E7,
    data3: 0x419F,
    data4: [0x9D, 0xD5, 0x14, 0x20, 0x76, 0xBB, 0x0D, 0x32],
};

/// The one version of [`HcabusBusInterfaceV1`].
pub const HCABUS_BUS_INTERFACE_VERSION: u16 = 1;

/// A GUID as Windows lays it out.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, IntoBytes, FromBytes, KnownLayout, Immutable)]
pub struct Guid {
    pub data1: u32,
    pub data2: u16,
    pub data3: u16,
    pub data4: [u8; 8],
}

/// An NTSTATUS as C sees it.
pub type HcabusStatus = i32;

/// The status of every refusal of docs/design.md §3, and of bad input at the C boundary.
pub mod status {
    use super::*;

    const fn nt(s: NtStatus) -> HcabusStatus {
        s.0 as HcabusStatus
    }

    pub const SUCCESS: HcabusStatus = 0;
    /// Success: `reset_execute` by a client that had already executed (idempotent).
    pub const ALREADY_READY: HcabusStatus = 0x60AB_0001_u32 as HcabusStatus;
    /// Success: `reset_execute` after the client's deadline; the reset went on without it.
    pub const PAST_DEADLINE: HcabusStatus = 0x60AB_0002_u32 as HcabusStatus;
    /// A null pointer, a context that is not this bus's, a name that is not 1..=32 bytes of
    /// text, a kind or flag the ABI does not define.
    pub const INVALID_PARAMETER: HcabusStatus = nt(NtStatus::INVALID_PARAMETER);
    /// A structure whose `size` is not the one this version defines.
    pub const INFO_LENGTH_MISMATCH: HcabusStatus = 0xC000_0004_u32 as HcabusStatus;
    /// An interface buffer smaller than the interface.
    pub const BUFFER_TOO_SMALL: HcabusStatus = nt(NtStatus::BUFFER_TOO_SMALL);
    /// An interface version this bus does not provide (0).
    pub const REVISION_MISMATCH: HcabusStatus = nt(NtStatus::REVISION_MISMATCH);
    /// An interface type other than [`GUID_HCABUS_BUS_INTERFACE`].
    pub const NOT_SUPPORTED: HcabusStatus = nt(NtStatus::NOT_SUPPORTED);
    /// A fault inside the bus, contained before it reached the caller.
    pub const INTERNAL_ERROR: HcabusStatus = 0xC000_00E5_u32 as HcabusStatus;
    /// Refused while someone still holds a reference (an interface, say).
    pub const DEVICE_BUSY: HcabusStatus = nt(NtStatus::DEVICE_BUSY);
    /// A wait ran out first.
    pub const TIMEOUT: HcabusStatus = 0x0000_0102;

    /// Every status the ABI defines besides the refusals (`driver/include/hcabus.h`).
    pub const ALL: [HcabusStatus; 11] = [
        SUCCESS,
        ALREADY_READY,
        PAST_DEADLINE,
        INVALID_PARAMETER,
        INFO_LENGTH_MISMATCH,
        BUFFER_TOO_SMALL,
        REVISION_MISMATCH,
        NOT_SUPPORTED,
        INTERNAL_ERROR,
        DEVICE_BUSY,
        TIMEOUT,
    ];

    /// Error severity, customer bit, facility 0x0AB: `0xE0AB0000 | refusal code`.
    pub const REFUSAL_BASE: u32 = 0xE0AB_0000;

    /// The status of a refusal: `0xE0AB0000` plus its [`RefusalCode`].
    pub const fn of_refusal(code: RefusalCode) -> HcabusStatus {
        (REFUSAL_BASE | code as u32) as HcabusStatus
    }

    /// The refusal a status stands for, if it is one.
    pub fn refusal(status: HcabusStatus) -> Option<RefusalCode> {
        let raw = status as u32;
        if raw & 0xFFFF_0000 != REFUSAL_BASE {
            return None;
        }
        RefusalCode::try_from(raw & 0xFFFF).ok()
    }

    /// A name for a status, for logs and test messages.
    pub fn name(status: HcabusStatus) -> &'static str {
        if let Some(code) = refusal(status) {
            return code.as_str();
        }
        match status {
            SUCCESS => "success",
            ALREADY_READY => "already ready",
            PAST_DEADLINE => "past its deadline: the reset went on without this client",
            INVALID_PARAMETER => "invalid parameter",
            INFO_LENGTH_MISMATCH => "structure size mismatch",
            BUFFER_TOO_SMALL => "buffer too small",
            REVISION_MISMATCH => "revision mismatch",
            NOT_SUPPORTED => "not supported",
            INTERNAL_ERROR => "internal error",
            DEVICE_BUSY => "device busy",
            TIMEOUT => "timeout",
            _ => "unknown status",
        }
    }
}

/// `void (*)(void *client_context, const HCABUS_EVENT *event)`: called with no bus lock held,
/// under DISPATCH_LEVEL rules (must not block; may call any bus function).
pub type HcabusEventCallback = Option<unsafe extern "C" fn(*mut c_void, *const HcabusEvent)>;

/// What a client hands to `register`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct HcabusClientDesc {
    /// `sizeof(HCABUS_CLIENT_DESC)`.
    pub size: u16,
    /// A [`ClientKind`] value.
    pub kind: u16,
    /// [`ClientFlags`] bits.
    pub flags: u32,
    /// NUL-terminated UTF-8, 1..=32 bytes, read during the call only.
    pub name: *const c_char,
    pub event_callback: HcabusEventCallback,
    /// Handed back to every callback; the bus never reads it.
    pub client_context: *mut c_void,
}

/// What `register` returns.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct HcabusRegistration {
    /// The client's id ([`ClientId::to_raw`]): every later call names it.
    pub client_id: u64,
    pub epoch: u64,
    /// A [`State`] value.
    pub state: u32,
    /// 1 when registered while a reset runs: hold nothing until its outcome (RESET_END,
    /// RESET_FAILED or RESET_ABORTED).
    pub late: u32,
}

/// What `query_state` returns.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct HcabusBusState {
    /// `sizeof(HCABUS_BUS_STATE)`, set by the caller.
    pub size: u32,
    /// A [`State`] value.
    pub state: u32,
    pub epoch: u64,
    /// The bus's clock, in microseconds: the time base of every event's deadline.
    pub now_us: u64,
}

/// RESET and RESET_QUERY.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct HcabusResetData {
    pub epoch: u64,
    /// On the bus's clock ([`HcabusBusState::now_us`]).
    pub deadline_us: u64,
    /// A [`ResetReason`] value.
    pub reason: u32,
    /// 1 for a planned reset (RESET_QUERY is only ever planned).
    pub planned: u32,
}

/// RESET_END and RESET_FAILED.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct HcabusResetEndData {
    /// RESET_END: the new epoch; RESET_FAILED: the epoch whose reset failed.
    pub epoch: u64,
    /// A [`ResetOutcome`] (RESET_END) or a [`FailReason`] (RESET_FAILED) value.
    pub result: u32,
    pub reserved: u32,
}

/// RESET_ABORTED.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct HcabusResetAbortedData {
    pub epoch: u64,
    /// The vetoer, or the client that did not answer.
    pub vetoed_by: u64,
    /// An [`AbortCause`] value.
    pub cause: u32,
    pub reserved: u32,
}

/// DEVICE_FATAL.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct HcabusDeviceFatalData {
    /// A [`FatalReason`] value.
    pub reason: u32,
    pub reserved: u32,
}

/// PORT_ACTIVE and PORT_DOWN.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct HcabusPortData {
    pub epoch: u64,
    /// 1 or 2.
    pub port: u32,
    /// PORT_ACTIVE: the LID the subnet manager assigned; PORT_DOWN: 0.
    pub lid: u32,
}

/// What an event carries, chosen by [`HcabusEvent::kind`].
#[repr(C)]
#[derive(Clone, Copy)]
pub union HcabusEventData {
    /// RESET, RESET_QUERY.
    pub reset: HcabusResetData,
    /// RESET_END, RESET_FAILED.
    pub reset_end: HcabusResetEndData,
    pub reset_aborted: HcabusResetAbortedData,
    pub device_fatal: HcabusDeviceFatalData,
    /// PORT_ACTIVE, PORT_DOWN.
    pub port: HcabusPortData,
    /// Room for later events without changing the size.
    pub raw: [u64; 4],
}

impl core::fmt::Debug for HcabusEventData {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("HcabusEventData { .. }")
    }
}

/// One event of docs/design.md §4, tagged by `kind`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct HcabusEvent {
    /// `sizeof(HCABUS_EVENT)`.
    pub size: u16,
    /// An [`EventKind`] value.
    pub kind: u16,
    pub reserved: u32,
    /// The client it is delivered to.
    pub client_id: u64,
    pub data: HcabusEventData,
}

impl HcabusEvent {
    /// The C form of `event`, delivered to `client`.
    pub fn new(client: ClientId, event: Event) -> Self {
        HcabusEvent {
            size: size_of::<HcabusEvent>() as u16,
            kind: event.kind() as u16,
            reserved: 0,
            client_id: client.to_raw(),
            data: HcabusEventData::of(event),
        }
    }
}

impl HcabusResetData {
    fn of(
        epoch: Epoch,
        reason: ResetReason,
        planned: bool,
        deadline: crate::time::Instant,
    ) -> Self {
        HcabusResetData {
            epoch: epoch.0,
            deadline_us: deadline.as_us(),
            reason: reason as u32,
            planned: planned.into(),
        }
    }
}

impl HcabusResetEndData {
    fn of(epoch: Epoch, result: u32) -> Self {
        HcabusResetEndData {
            epoch: epoch.0,
            result,
            reserved: 0,
        }
    }
}

impl HcabusEventData {
    /// What `event` carries, in the member of the union its kind selects.
    fn of(event: Event) -> Self {
        let mut raw = HcabusEventData { raw: [0; 4] };
        match event {
            Event::Reset {
                epoch,
                reason,
                planned,
                deadline,
            } => raw.reset = HcabusResetData::of(epoch, reason, planned, deadline),
            // A query only comes before a planned reset.
            Event::ResetQuery {
                epoch,
                reason,
                deadline,
            } => raw.reset = HcabusResetData::of(epoch, reason, true, deadline),
            Event::ResetEnd { epoch, outcome } => {
                raw.reset_end = HcabusResetEndData::of(epoch, outcome as u32)
            }
            Event::ResetFailed { epoch, error } => {
                raw.reset_end = HcabusResetEndData::of(epoch, error as u32)
            }
            Event::ResetAborted {
                epoch,
                vetoed_by,
                cause,
            } => {
                raw.reset_aborted = HcabusResetAbortedData {
                    epoch: epoch.0,
                    vetoed_by: vetoed_by.to_raw(),
                    cause: cause as u32,
                    reserved: 0,
                }
            }
            Event::PortActive { epoch, port, lid } => {
                raw.port = HcabusPortData {
                    epoch: epoch.0,
                    port: port.into(),
                    lid: lid.into(),
                }
            }
            Event::PortDown { epoch, port } => {
                raw.port = HcabusPortData {
                    epoch: epoch.0,
                    port: port.into(),
                    lid: 0,
                }
            }
            Event::DeviceFatal { reason } => {
                raw.device_fatal = HcabusDeviceFatalData {
                    reason: reason as u32,
                    reserved: 0,
                }
            }
        }
        raw
    }
}

/// The standard INTERFACE header's reference / dereference: `void (*)(PVOID Context)`.
pub type InterfaceRefFn = Option<unsafe extern "C" fn(*mut c_void)>;
pub type RegisterFn = Option<
    unsafe extern "C" fn(*mut c_void, *const HcabusClientDesc, *mut HcabusRegistration) -> i32,
>;
pub type UnregisterFn = Option<unsafe extern "C" fn(*mut c_void, u64) -> i32>;
/// The epoch the request joined is written through the last argument when it is not null.
pub type ResetRequestFn = Option<unsafe extern "C" fn(*mut c_void, u64, *mut u64) -> i32>;
/// `(context, client_id, epoch)`: reset_execute and reset_consent.
pub type EpochCallFn = Option<unsafe extern "C" fn(*mut c_void, u64, u64) -> i32>;
/// `(context, client_id, epoch, reason)`: the reason is NUL-terminated text or null; longer
/// than 32 bytes it is cut, never refused.
pub type ResetVetoFn = Option<unsafe extern "C" fn(*mut c_void, u64, u64, *const c_char) -> i32>;
pub type QueryStateFn = Option<unsafe extern "C" fn(*mut c_void, *mut HcabusBusState) -> i32>;

/// `HCABUS_BUS_INTERFACE_V1`: the INTERFACE header (`size` .. `interface_dereference`), then
/// every call of docs/design.md §3. Each call takes `context` first.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct HcabusBusInterfaceV1 {
    pub size: u16,
    pub version: u16,
    pub context: *mut c_void,
    pub interface_reference: InterfaceRefFn,
    pub interface_dereference: InterfaceRefFn,
    pub register: RegisterFn,
    pub unregister: UnregisterFn,
    pub reset_request: ResetRequestFn,
    pub reset_execute: EpochCallFn,
    pub reset_consent: EpochCallFn,
    pub reset_veto: ResetVetoFn,
    pub query_state: QueryStateFn,
}

impl HcabusBusInterfaceV1 {
    /// Every pointer null: what a caller hands in to be filled.
    pub const EMPTY: HcabusBusInterfaceV1 = HcabusBusInterfaceV1 {
        size: 0,
        version: 0,
        context: core::ptr::null_mut(),
        interface_reference: None,
        interface_dereference: None,
        register: None,
        unregister: None,
        reset_request: None,
        reset_execute: None,
        reset_consent: None,
        reset_veto: None,
        query_state: None,
    };
}

/// Why a C client descriptor was refused, as its status.
pub fn client_desc(
    size: u16,
    kind: u16,
    flags: u32,
    name: &[u8],
) -> Result<ClientDesc, HcabusStatus> {
    if usize::from(size) != size_of::<HcabusClientDesc>() {
        return Err(status::INFO_LENGTH_MISMATCH);
    }
    let kind = u8::try_from(kind)
        .ok()
        .and_then(ClientKind::from_u8)
        .ok_or(status::INVALID_PARAMETER)?;
    let flags = ClientFlags::from_bits(flags).ok_or(status::INVALID_PARAMETER)?;
    let name = core::str::from_utf8(name).map_err(|_| status::INVALID_PARAMETER)?;
    ClientDesc::new(name, kind, flags).ok_or(status::INVALID_PARAMETER)
}

/// The status of a bus call's result.
pub fn status_of<T, E: Into<RefusalCode>>(r: Result<T, E>) -> HcabusStatus {
    match r {
        Ok(_) => status::SUCCESS,
        Err(e) => status::of_refusal(e.into()),
    }
}

/// Declares each ABI structure's C name, size and fields (Rust name, C name, offset): the
/// compile-time asserts of the numbers on 64-bit targets, and [`LAYOUT_TABLE`].
macro_rules! c_layout {
    ($($ty:ident $c:literal $size:literal { $($f:ident $cf:literal $at:literal),* $(,)? })*) => {
        #[cfg(target_pointer_width = "64")]
        mod layout {
            use super::*;
            use static_assertions::const_assert_eq;
            $(
                const_assert_eq!(size_of::<$ty>(), $size);
                $(const_assert_eq!(offset_of!($ty, $f), $at);)*
            )*
        }

        /// Every structure's size and every field's offset, by its C name: what the layout
        /// test compares with the same table computed by a C compiler from `hcabus.h`.
        pub const LAYOUT_TABLE: &[(&str, usize)] = &[
            $(
                (concat!("sizeof(", $c, ")"), size_of::<$ty>()),
                $((concat!($c, ".", $cf), offset_of!($ty, $f)),)*
            )*
        ];
    };
}

// The layout, for 64-bit targets (Windows x64 and arm64, Linux x86_64): the numbers the C
// header asserts too. The standard INTERFACE header is the interface's first 32 bytes.
c_layout! {
    Guid "GUID" 16 {}
    HcabusClientDesc "HCABUS_CLIENT_DESC" 32 {
        size "Size" 0, kind "Kind" 2, flags "Flags" 4, name "Name" 8,
        event_callback "EventCallback" 16, client_context "ClientContext" 24,
    }
    HcabusRegistration "HCABUS_REGISTRATION" 24 {
        client_id "ClientId" 0, epoch "Epoch" 8, state "State" 16, late "Late" 20,
    }
    HcabusBusState "HCABUS_BUS_STATE" 24 {
        size "Size" 0, state "State" 4, epoch "Epoch" 8, now_us "NowUs" 16,
    }
    HcabusResetData "HCABUS_RESET_DATA" 24 {
        epoch "Epoch" 0, deadline_us "DeadlineUs" 8, reason "Reason" 16, planned "Planned" 20,
    }
    HcabusResetEndData "HCABUS_RESET_END_DATA" 16 { epoch "Epoch" 0, result "Result" 8 }
    HcabusResetAbortedData "HCABUS_RESET_ABORTED_DATA" 24 {
        epoch "Epoch" 0, vetoed_by "VetoedBy" 8, cause "Cause" 16,
    }
    HcabusDeviceFatalData "HCABUS_DEVICE_FATAL_DATA" 8 {}
    HcabusPortData "HCABUS_PORT_DATA" 16 { epoch "Epoch" 0, port "Port" 8, lid "Lid" 12 }
    HcabusEvent "HCABUS_EVENT" 48 { kind "Kind" 2, client_id "ClientId" 8, data "Data" 16 }
    HcabusBusInterfaceV1 "HCABUS_BUS_INTERFACE_V1" 88 {
        size "Size" 0, version "Version" 2, context "Context" 8,
        interface_reference "InterfaceReference" 16,
        interface_dereference "InterfaceDereference" 24, register "Register" 32,
        unregister "Unregister" 40, reset_request "ResetRequest" 48,
        reset_execute "ResetExecute" 56, reset_consent "ResetConsent" 64,
        reset_veto "ResetVeto" 72, query_state "QueryState" 80,
    }
}

// The union an event's data is: the C table names its members' structures, not the union.
#[cfg(target_pointer_width = "64")]
static_assertions::const_assert_eq!(size_of::<HcabusEventData>(), 32);

#[cfg(test)]
mod tests;
