//! Vocabulary shared by the coordinator, the events and the flight recorder.

use core::fmt;

use crate::time::Instant;

/// Generation of the hardware: grows by one with every completed hardware reset. A resource
/// handle made in an older epoch is stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Epoch(pub u64);

impl Epoch {
    pub const fn next(self) -> Epoch {
        Epoch(self.0 + 1)
    }
}

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "e{}", self.0)
    }
}

/// A client's handle on the bus: a slot index and the slot's generation at registration.
/// The generation changes at every unregister, so an id kept past its unregister is stale
/// and can never name the slot's next occupant (no ABA).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientId {
    pub index: u16,
    pub generation: u32,
}

impl ClientId {
    /// Packs into the 64-bit form used by the IOCTL ABI and the flight recorder.
    pub const fn to_raw(self) -> u64 {
        ((self.generation as u64) << 16) | self.index as u64
    }

    pub const fn from_raw(raw: u64) -> Self {
        ClientId {
            index: (raw & 0xFFFF) as u16,
            generation: (raw >> 16) as u32,
        }
    }
}

impl fmt::Display for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}.{}", self.index, self.generation)
    }
}

/// What a client is; decides nothing in the protocol but appears in every listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ClientKind {
    Ibal = 1,
    Ipoib = 2,
    Srp = 3,
    BootDisk = 4,
    Uverbs = 5,
    Custom = 6,
}

impl ClientKind {
    pub const ALL: [ClientKind; 6] = [
        ClientKind::Ibal,
        ClientKind::Ipoib,
        ClientKind::Srp,
        ClientKind::BootDisk,
        ClientKind::Uverbs,
        ClientKind::Custom,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            ClientKind::Ibal => "ibal",
            ClientKind::Ipoib => "ipoib",
            ClientKind::Srp => "srp",
            ClientKind::BootDisk => "bootdisk",
            ClientKind::Uverbs => "uverbs",
            ClientKind::Custom => "custom",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "ibal" => ClientKind::Ibal,
            "ipoib" => ClientKind::Ipoib,
            "srp" => ClientKind::Srp,
            "bootdisk" => ClientKind::BootDisk,
            "uverbs" => ClientKind::Uverbs,
            "custom" => ClientKind::Custom,
            _ => return None,
        })
    }
}

bitflags::bitflags! {
    /// Properties a client declares at registration.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct ClientFlags: u32 {
        /// The system cannot run without it (boot disk and everything under it).
        const BOOT_CRITICAL = 1 << 0;
        /// Carries the paging file: must never allocate or fault on the reset path.
        const PAGING_PATH = 1 << 1;
        /// Stands for user-mode contexts (disassociated on RESET).
        const USER_MODE = 1 << 2;
        /// May refuse a planned reset with `reset_veto`.
        const CAN_VETO = 1 << 3;
    }
}

/// A client's name, stored inline so that the client table and the flight recorder never
/// allocate. Longer names are refused at registration rather than silently cut.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientName {
    len: u8,
    bytes: [u8; ClientName::CAPACITY],
}

impl ClientName {
    pub const CAPACITY: usize = 32;

    /// `None` when the name is empty, longer than [`ClientName::CAPACITY`] bytes, or holds
    /// a control character: a NUL would cut it short in the IOCTL listing and a newline
    /// would forge lines in every log and timeline it appears in.
    pub fn new(name: &str) -> Option<Self> {
        let src = name.as_bytes();
        if src.is_empty() || src.len() > Self::CAPACITY || name.chars().any(char::is_control) {
            return None;
        }
        let mut bytes = [0u8; Self::CAPACITY];
        bytes[..src.len()].copy_from_slice(src);
        Some(ClientName {
            len: src.len() as u8,
            bytes,
        })
    }

    pub fn as_str(&self) -> &str {
        // Built only from a &str and cut at its full length, so always valid UTF-8.
        core::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or("?")
    }

    pub fn as_bytes(&self) -> &[u8; Self::CAPACITY] {
        &self.bytes
    }
}

impl fmt::Debug for ClientName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl fmt::Display for ClientName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a client hands to `register`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientDesc {
    pub name: ClientName,
    pub kind: ClientKind,
    pub flags: ClientFlags,
}

impl ClientDesc {
    /// `None` when the name does not fit (see [`ClientName::new`]).
    pub fn new(name: &str, kind: ClientKind, flags: ClientFlags) -> Option<Self> {
        Some(ClientDesc {
            name: ClientName::new(name)?,
            kind,
            flags,
        })
    }
}

/// Why a reset happens. Ordered by severity: when several causes meet in one reset the most
/// severe one is the reset's reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum ResetReason {
    /// An administrator's planned reset (clients with CAN_VETO may refuse it).
    AdminPlanned = 1,
    /// A planned reset that activates new firmware: the firmware version may change.
    FirmwareActivate = 2,
    /// An administrator's forced reset.
    AdminForced = 3,
    /// A client saw the hardware misbehave and asked for a reset.
    ClientRequest = 4,
    /// The firmware health counter stopped advancing (3 polls unchanged).
    HealthStall = 5,
    /// A command to the firmware never completed.
    CommandTimeout = 6,
    /// The catastrophic-error buffer reported an error.
    Catastrophic = 7,
}

impl ResetReason {
    pub const fn is_planned(self) -> bool {
        matches!(
            self,
            ResetReason::AdminPlanned | ResetReason::FirmwareActivate
        )
    }

    /// Automatic resets are the ones storm control may refuse.
    pub const fn is_automatic(self) -> bool {
        !matches!(
            self,
            ResetReason::AdminPlanned | ResetReason::FirmwareActivate | ResetReason::AdminForced
        )
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            ResetReason::AdminPlanned => "admin_planned",
            ResetReason::FirmwareActivate => "fw_activate",
            ResetReason::AdminForced => "admin_forced",
            ResetReason::ClientRequest => "client_request",
            ResetReason::HealthStall => "health_stall",
            ResetReason::CommandTimeout => "command_timeout",
            ResetReason::Catastrophic => "catastrophic",
        }
    }

    pub const fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => ResetReason::AdminPlanned,
            2 => ResetReason::FirmwareActivate,
            3 => ResetReason::AdminForced,
            4 => ResetReason::ClientRequest,
            5 => ResetReason::HealthStall,
            6 => ResetReason::CommandTimeout,
            7 => ResetReason::Catastrophic,
            _ => return None,
        })
    }
}

impl fmt::Display for ResetReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a successful reset ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ResetOutcome {
    Restored = 1,
    FirmwareChanged = 2,
}

impl ResetOutcome {
    pub const fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(ResetOutcome::Restored),
            2 => Some(ResetOutcome::FirmwareChanged),
            _ => None,
        }
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            ResetOutcome::Restored => "Restored",
            ResetOutcome::FirmwareChanged => "FirmwareChanged",
        }
    }
}

/// Why a reset left the device failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FailReason {
    HardwareDead = 1,
    DeviceReplaced = 2,
    StormLimit = 3,
    AutoRestartExpired = 4,
}

impl FailReason {
    pub const fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(FailReason::HardwareDead),
            2 => Some(FailReason::DeviceReplaced),
            3 => Some(FailReason::StormLimit),
            4 => Some(FailReason::AutoRestartExpired),
            _ => None,
        }
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            FailReason::HardwareDead => "HardwareDead",
            FailReason::DeviceReplaced => "DeviceReplaced",
            FailReason::StormLimit => "StormLimit",
            FailReason::AutoRestartExpired => "AutoRestartExpired",
        }
    }
}

/// Why a planned reset was called off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum AbortCause {
    /// A CAN_VETO client refused it.
    Veto = 1,
    /// A client passed its deadline and the policy says `abort_on_unresponsive`.
    Unresponsive = 2,
}

/// Why the device is gone for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FatalReason {
    SurpriseRemoval = 1,
}

/// Events the bus delivers to a client (SPEC §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Stop, release every hardware resource, then `reset_execute(epoch)` before `deadline`.
    Reset {
        epoch: Epoch,
        reason: ResetReason,
        planned: bool,
        deadline: Instant,
    },
    /// The hardware is back in `epoch`: re-create resources and restart.
    ResetEnd { epoch: Epoch, outcome: ResetOutcome },
    /// The reset of `epoch` failed: the device is a zombie.
    ResetFailed { epoch: Epoch, error: FailReason },
    /// The planned reset of `epoch` was called off: restart on the same epoch.
    ResetAborted {
        epoch: Epoch,
        vetoed_by: ClientId,
        cause: AbortCause,
    },
    /// The device is gone: release everything, expect no RESET_END.
    DeviceFatal { reason: FatalReason },
}

impl Event {
    pub const fn kind(&self) -> EventKind {
        match self {
            Event::Reset { .. } => EventKind::Reset,
            Event::ResetEnd { .. } => EventKind::ResetEnd,
            Event::ResetFailed { .. } => EventKind::ResetFailed,
            Event::ResetAborted { .. } => EventKind::ResetAborted,
            Event::DeviceFatal { .. } => EventKind::DeviceFatal,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum EventKind {
    Reset = 1,
    ResetEnd = 2,
    ResetFailed = 3,
    ResetAborted = 4,
    DeviceFatal = 5,
}

impl EventKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            EventKind::Reset => "RESET",
            EventKind::ResetEnd => "RESET_END",
            EventKind::ResetFailed => "RESET_FAILED",
            EventKind::ResetAborted => "RESET_ABORTED",
            EventKind::DeviceFatal => "DEVICE_FATAL",
        }
    }

    pub const fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => EventKind::Reset,
            2 => EventKind::ResetEnd,
            3 => EventKind::ResetFailed,
            4 => EventKind::ResetAborted,
            5 => EventKind::DeviceFatal,
            _ => return None,
        })
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
