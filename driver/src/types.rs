//! Vocabulary shared by the coordinator, the events and the flight recorder.

use core::fmt;

use crate::time::Instant;

mod actor;
mod port;
pub use actor::Actor;
pub use port::*;

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

wire_enum! {
    /// What a client is; decides nothing in the protocol but appears in every listing.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum ClientKind {
        Ibal = 1 => "ibal",
        Ipoib = 2 => "ipoib",
        Srp = 3 => "srp",
        BootDisk = 4 => "bootdisk",
        Uverbs = 5 => "uverbs",
        Custom = 6 => "custom",
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

/// Short text stored inline so that the client table, the reset record and the flight
/// recorder never allocate: a client's name, or the reason a client gave for a veto.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShortText {
    len: u8,
    bytes: [u8; ShortText::CAPACITY],
}

/// A client's name. Longer names are refused at registration rather than silently cut.
pub type ClientName = ShortText;

/// Why a client vetoed a planned reset (docs/design.md §3), kept for the administrator to read.
pub type VetoReason = ShortText;

impl ShortText {
    pub const CAPACITY: usize = 32;
    /// No text: a record about nobody, a reset nobody gave a reason for.
    pub const EMPTY: ShortText = ShortText {
        len: 0,
        bytes: [0; ShortText::CAPACITY],
    };

    /// `None` when the text is empty, longer than [`ShortText::CAPACITY`] bytes, or holds
    /// a control character: a NUL would cut it short in the IOCTL listing and a newline
    /// would forge lines in every log and timeline it appears in.
    pub fn new(name: &str) -> Option<Self> {
        let src = name.as_bytes();
        if src.is_empty() || src.len() > Self::CAPACITY || name.chars().any(char::is_control) {
            return None;
        }
        let mut bytes = [0u8; Self::CAPACITY];
        bytes[..src.len()].copy_from_slice(src);
        Some(ShortText {
            len: src.len() as u8,
            bytes,
        })
    }

    /// Never refuses: cut at a character boundary to [`ShortText::CAPACITY`] bytes, each
    /// control character made a space. For text whose refusal would cost more than its
    /// shortening: a veto is not refused because its reason is long.
    pub fn cut(text: &str) -> Self {
        Self::cut_parts(&[text])
    }

    /// [`ShortText::cut`] of the parts one after the other, without allocating: a reason
    /// built on a path that must not allocate.
    pub fn cut_parts(parts: &[&str]) -> Self {
        let mut bytes = [0u8; Self::CAPACITY];
        let mut len = 0;
        for ch in parts.iter().flat_map(|p| p.chars()) {
            let ch = if ch.is_control() { ' ' } else { ch };
            let width = ch.len_utf8();
            if len + width > Self::CAPACITY {
                break;
            }
            ch.encode_utf8(&mut bytes[len..len + width]);
            len += width;
        }
        ShortText {
            len: len as u8,
            bytes,
        }
    }

    pub fn as_str(&self) -> &str {
        // Built only from a &str and cut at its full length, so always valid UTF-8.
        core::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or("?")
    }

    pub fn as_bytes(&self) -> &[u8; Self::CAPACITY] {
        &self.bytes
    }
}

impl fmt::Debug for ShortText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl fmt::Display for ShortText {
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

wire_enum! {
    /// Why a reset happens. Ordered by severity: when several causes meet in one reset the
    /// most severe one is the reset's reason.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
    pub enum ResetReason {
        /// An administrator's planned reset (clients with CAN_VETO may refuse it).
        AdminPlanned = 1 => "admin_planned",
        /// A planned reset that activates new firmware: the firmware version may change.
        FirmwareActivate = 2 => "fw_activate",
        /// An administrator's forced reset.
        AdminForced = 3 => "admin_forced",
        /// A client saw the hardware misbehave and asked for a reset.
        ClientRequest = 4 => "client_request",
        /// The firmware health counter stopped advancing (3 polls unchanged).
        HealthStall = 5 => "health_stall",
        /// A command to the firmware never completed.
        CommandTimeout = 6 => "command_timeout",
        /// The catastrophic-error buffer reported an error.
        Catastrophic = 7 => "catastrophic",
    }
}

impl ResetReason {
    pub const fn is_planned(self) -> bool {
        matches!(
            self,
            ResetReason::AdminPlanned | ResetReason::FirmwareActivate
        )
    }

    /// Errors the device itself raised: the causes `auto_recover` decides about.
    pub const fn is_fatal(self) -> bool {
        matches!(
            self,
            ResetReason::Catastrophic | ResetReason::HealthStall | ResetReason::CommandTimeout
        )
    }

    /// Automatic resets are the ones storm control may refuse.
    pub const fn is_automatic(self) -> bool {
        !matches!(
            self,
            ResetReason::AdminPlanned | ResetReason::FirmwareActivate | ResetReason::AdminForced
        )
    }
}

wire_enum! {
    /// How a successful reset ended.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum ResetOutcome {
        Restored = 1 => "Restored",
        FirmwareChanged = 2 => "FirmwareChanged",
    }
}

wire_enum! {
    /// Why a reset left the device failed.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum FailReason {
        HardwareDead = 1 => "HardwareDead",
        DeviceReplaced = 2 => "DeviceReplaced",
        StormLimit = 3 => "StormLimit",
        AutoRestartExpired = 4 => "AutoRestartExpired",
        /// `auto_recover` is off: a fatal error leaves the device to the administrator.
        AutoRecoverOff = 5 => "AutoRecoverOff",
    }
}

wire_enum! {
    /// Why a planned reset was called off.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum AbortCause {
        /// A CAN_VETO client refused it.
        Veto = 1 => "veto",
        /// A client passed its deadline and the policy says `abort_on_unresponsive`.
        Unresponsive = 2 => "unresponsive",
    }
}

wire_enum! {
    /// Why the device is gone for good.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum FatalReason {
        SurpriseRemoval = 1 => "surprise_removal",
    }
}

/// Events the bus delivers to a client (docs/design.md §4).
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
    /// A planned reset asks first (CAN_VETO clients only): answer `reset_consent` or
    /// `reset_veto(epoch)` before `deadline`; silence is consent. Nothing is torn down yet.
    ResetQuery {
        epoch: Epoch,
        reason: ResetReason,
        deadline: Instant,
    },
    /// `port` reached Active: the subnet manager gave it `lid` (which may differ from the
    /// one before a reset). IPoIB and SRP (re)connect only on an Active port. It comes again,
    /// with the new LID, to a client that has the port Active when a new master renumbers
    /// it: what the client addressed by the old LID is gone.
    PortActive { epoch: Epoch, port: u8, lid: u16 },
    /// `port` left Active (cable pulled, link lost, subnet manager gone).
    PortDown { epoch: Epoch, port: u8 },
}

impl Event {
    /// The epoch the event is about; DEVICE_FATAL carries none.
    pub const fn epoch(&self) -> Option<Epoch> {
        match *self {
            Event::Reset { epoch, .. }
            | Event::ResetEnd { epoch, .. }
            | Event::ResetFailed { epoch, .. }
            | Event::ResetAborted { epoch, .. }
            | Event::ResetQuery { epoch, .. }
            | Event::PortActive { epoch, .. }
            | Event::PortDown { epoch, .. } => Some(epoch),
            Event::DeviceFatal { .. } => None,
        }
    }

    pub const fn kind(&self) -> EventKind {
        match self {
            Event::Reset { .. } => EventKind::Reset,
            Event::ResetEnd { .. } => EventKind::ResetEnd,
            Event::ResetFailed { .. } => EventKind::ResetFailed,
            Event::ResetAborted { .. } => EventKind::ResetAborted,
            Event::DeviceFatal { .. } => EventKind::DeviceFatal,
            Event::ResetQuery { .. } => EventKind::ResetQuery,
            Event::PortActive { .. } => EventKind::PortActive,
            Event::PortDown { .. } => EventKind::PortDown,
        }
    }
}

wire_enum! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum EventKind {
        Reset = 1 => "RESET",
        ResetEnd = 2 => "RESET_END",
        ResetFailed = 3 => "RESET_FAILED",
        ResetAborted = 4 => "RESET_ABORTED",
        DeviceFatal = 5 => "DEVICE_FATAL",
        ResetQuery = 6 => "RESET_QUERY",
        PortActive = 7 => "PORT_ACTIVE",
        PortDown = 8 => "PORT_DOWN",
    }
}

impl EventKind {
    /// PORT_ACTIVE and PORT_DOWN: news about the fabric, outside the reset protocol.
    pub const fn is_port(self) -> bool {
        matches!(self, EventKind::PortActive | EventKind::PortDown)
    }
}

wire_enum! {
    /// The coordinator's state (docs/design.md §5). The numbers are those of the IOCTL ABI and the
    /// flight recorder; the data a state carries lives in the coordinator.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum State {
        Operational = 1 => "Operational",
        Quiescing = 2 => "Quiescing",
        Resetting = 3 => "Resetting",
        Restoring = 4 => "Restoring",
        Failed = 5 => "Failed",
        Removed = 6 => "Removed",
        /// A planned reset asks the CAN_VETO clients first; nothing is torn down yet.
        Preparing = 7 => "Preparing",
    }
}

impl State {
    /// The edges of docs/design.md §5, and nothing else.
    pub const fn may_become(self, to: State) -> bool {
        use State::*;
        matches!(
            (self, to),
            (Operational, Quiescing)
                | (Operational, Preparing)
                | (Preparing, Quiescing)
                | (Preparing, Operational)
                | (Quiescing, Resetting)
                | (Quiescing, Operational)
                | (Quiescing, Failed)
                | (Resetting, Restoring)
                | (Resetting, Failed)
                | (Restoring, Operational)
                | (Failed, Resetting)
                | (
                    Operational | Preparing | Quiescing | Resetting | Restoring | Failed,
                    Removed
                )
        )
    }

    /// A reset is under way: it has started (a query or RESET went out) and its outcome is
    /// not final.
    pub const fn in_reset(self) -> bool {
        matches!(
            self,
            State::Preparing | State::Quiescing | State::Resetting | State::Restoring
        )
    }

    /// The hardware is in service: Operational, or Preparing (a planned reset is only being
    /// asked about; nothing is torn down until RESET).
    pub const fn in_service(self) -> bool {
        matches!(self, State::Operational | State::Preparing)
    }
}

wire_enum! {
    /// A client's state as seen by the coordinator.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum ClientState {
        /// Operating on the current epoch.
        Active = 1 => "active",
        /// Received RESET (or is about to), has not executed.
        Quiescing = 2 => "quiescing",
        /// Executed: holds no hardware resource.
        Ready = 3 => "ready",
        /// Passed the quiesce deadline without executing; its old handles are stale.
        Unresponsive = 4 => "unresponsive",
        /// Registered during a reset: not in the barrier, waits for RESET_END.
        Late = 5 => "late",
        /// Received RESET_FAILED: a zombie until an administrator restart.
        Failed = 6 => "failed",
        /// Received DEVICE_FATAL.
        Fatal = 7 => "fatal",
        /// Received RESET_QUERY and has not answered yet.
        Queried = 8 => "queried",
    }
}

wire_enum! {
    /// The coordinator's timers; at most one of each is armed at a time.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum TimerId {
        QuiesceDeadline = 0 => "quiesce_deadline",
        HwPoll = 1 => "hw_poll",
        HwReadyTimeout = 2 => "hw_ready_timeout",
        AutoRestartWindow = 3 => "auto_restart_window",
        HealthPoll = 4 => "health_poll",
        QueryDeadline = 5 => "query_deadline",
    }
}

wire_enum! {
    /// Plug-and-Play operations: only a replaced or removed device causes them.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum PnpOp {
        /// Report the bus's children missing (IoInvalidateDeviceRelations with none of them).
        ReportChildrenMissing = 1 => "report_children_missing",
        /// Enumerate the children again, against the device that is there now.
        ReenumerateChildren = 2 => "reenumerate_children",
    }
}

wire_enum! {
    /// Calls and inputs, as recorded.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Call {
        Register = 1 => "register",
        Unregister = 2 => "unregister",
        ResetRequest = 3 => "reset_request",
        ResetExecute = 4 => "reset_execute",
        ResetVeto = 5 => "reset_veto",
        AdminReset = 6 => "admin_reset",
        AdminRestart = 7 => "admin_restart",
        SetPolicy = 8 => "set_policy",
        SurpriseRemoval = 9 => "surprise_removal",
        CommandTimeout = 10 => "command_timeout",
        Catastrophic = 11 => "catastrophic_error",
        ResetConsent = 12 => "reset_consent",
        /// PnP may stop the adapter (EvtDeviceQueryStop said yes): resets held.
        HoldResets = 13 => "hold_resets",
        /// The stop is over (the adapter started again) or was cancelled: resets released.
        ReleaseResets = 14 => "release_resets",
    }
}

/// An administrator's kind of reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AdminReset {
    Forced,
    Planned,
    FirmwareActivate,
}

impl AdminReset {
    pub const fn reason(self) -> ResetReason {
        match self {
            AdminReset::Forced => ResetReason::AdminForced,
            AdminReset::Planned => ResetReason::AdminPlanned,
            AdminReset::FirmwareActivate => ResetReason::FirmwareActivate,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_that_does_not_fit_is_refused_but_a_reason_is_cut() {
        let long = "a reason far longer than thirty-two bytes";
        assert_eq!(ShortText::new(long), None);
        assert_eq!(ShortText::cut(long).as_str(), &long[..ShortText::CAPACITY]);
        assert_eq!(ShortText::new("two\nlines"), None);
        assert_eq!(ShortText::cut("two\nlines").as_str(), "two lines");
        assert_eq!(ShortText::new(""), None);
        assert_eq!(ShortText::cut("").as_str(), "");
        // 31 ASCII bytes, then a two-byte character that would end past the capacity.
        let edge = format!("{}é", "x".repeat(31));
        assert_eq!(ShortText::cut(&edge).as_str(), "x".repeat(31));
        let fits = format!("{}é", "x".repeat(30));
        assert_eq!(ShortText::cut(&fits).as_str(), fits);
        assert_eq!(ShortText::new(&fits).map(|t| t.to_string()), Some(fits));
        // Parts are cut as their concatenation is.
        let parts = ["last path: ", "hca1", " port ", "1", " resetting, and more"];
        assert_eq!(
            ShortText::cut_parts(&parts),
            ShortText::cut(&parts.concat())
        );
        assert_eq!(
            ShortText::cut_parts(&["a\n", "b"]).as_str(),
            "a b",
            "control characters made spaces in every part"
        );
    }
}
