//! The record kinds, declared once: each kind's tag and name, its fields, and the slot of
//! the wire record each field travels in. From the table come [`RecordKind`], [`RecordTag`],
//! `RecordKind::tag`, `RecordKind::client`, and the wire encoding both ways (`slots`,
//! `from_slots`, which the codec reads); what a kind says, in words and in JSON, is its arm of
//! [`super::Record::describe`].
//!
//! The slots of the wire record (docs/ioctl.md, READ_LOG): `a`, `b`, `c` are bytes
//! ([`WireByte`]); `client` a client id; `client_flag` an optional client id, whose presence
//! is `b`; `value` a 64-bit word ([`WordSlot`]), or its halves `value_lo` and `value_hi`;
//! `text` the 32 bytes of a short text; `text_word` the first 8 of them, as a number, in
//! version 5 only.

use super::HwOutcome;
use crate::errors::RefusalCode;
use crate::fault::FaultCode;
use crate::hca::HwStep;
use crate::policy::Policy;
use crate::types::{Call, ClientId, Epoch, EventKind, FailReason, PnpOp, ResetOutcome};
use crate::types::{PortState, ResetReason, ShortText, State, VetoReason, MAX_PORTS};
use crate::wire::WireByte;

/// A value that travels in a record's 64-bit `value`.
pub(super) trait WordSlot: Sized {
    fn to_word(self) -> u64;
    /// `None` for a word no value of the type encodes to.
    fn from_word(w: u64) -> Option<Self>;
}

impl WordSlot for u64 {
    fn to_word(self) -> u64 {
        self
    }
    fn from_word(w: u64) -> Option<Self> {
        Some(w)
    }
}

impl WordSlot for Epoch {
    fn to_word(self) -> u64 {
        self.0
    }
    fn from_word(w: u64) -> Option<Self> {
        Some(Epoch(w))
    }
}

macro_rules! narrow_word {
    ($($ty:ty),*) => {
        $(impl WordSlot for $ty {
            fn to_word(self) -> u64 {
                u64::from(self)
            }
            fn from_word(w: u64) -> Option<Self> {
                <$ty>::try_from(w).ok()
            }
        })*
    };
}

narrow_word!(u16, u32);

/// The slots of one record as its kind fills them (or as the wire gave them).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Slots<'a> {
    pub a: u8,
    pub b: u8,
    pub c: u8,
    pub client: u64,
    pub value: u64,
    /// Written only by a kind with a text field; read only by one.
    pub text: Option<&'a ShortText>,
    pub text_word: Option<u64>,
}

/// The slots as the wire gave them: the text is decoded (`None` when the bytes are not a
/// text a record holds), and only a kind with a text field asks for it.
#[derive(Debug, Clone, Copy)]
pub(super) struct WireSlots {
    pub a: u8,
    pub b: u8,
    pub c: u8,
    pub client: u64,
    pub value: u64,
    pub text: Option<ShortText>,
    pub text_word: u64,
}

macro_rules! record_kinds {
    (@client $who:ident client $f:ident) => { $who = Some($f); };
    (@client $who:ident client_flag $f:ident) => { $who = $f; };
    (@client $who:ident $slot:ident $f:ident) => { let _ = $f; };

    (@put $s:ident a $f:ident) => { $s.a = WireByte::to_byte(*$f); };
    (@put $s:ident b $f:ident) => { $s.b = WireByte::to_byte(*$f); };
    (@put $s:ident c $f:ident) => { $s.c = WireByte::to_byte(*$f); };
    (@put $s:ident client $f:ident) => { $s.client = $f.to_raw(); };
    (@put $s:ident client_flag $f:ident) => {
        $s.client = $f.map_or(0, ClientId::to_raw);
        $s.b = u8::from($f.is_some());
    };
    (@put $s:ident value $f:ident) => { $s.value = WordSlot::to_word(*$f); };
    (@put $s:ident value_lo $f:ident) => { $s.value |= u64::from(*$f); };
    (@put $s:ident value_hi $f:ident) => { $s.value |= u64::from(*$f) << 32; };
    (@put $s:ident text $f:ident) => { $s.text = Some($f); };
    (@put $s:ident text_word $f:ident) => { $s.text_word = Some(*$f); };

    (@take $w:ident a $ty:ty) => { <$ty as WireByte>::from_byte($w.a) };
    (@take $w:ident b $ty:ty) => { <$ty as WireByte>::from_byte($w.b) };
    (@take $w:ident c $ty:ty) => { <$ty as WireByte>::from_byte($w.c) };
    (@take $w:ident client $ty:ty) => { Some(ClientId::from_raw($w.client)) };
    (@take $w:ident client_flag $ty:ty) => {
        match $w.b {
            0 => Some(None),
            1 => Some(Some(ClientId::from_raw($w.client))),
            _ => None,
        }
    };
    (@take $w:ident value $ty:ty) => { <$ty as WordSlot>::from_word($w.value) };
    (@take $w:ident value_lo $ty:ty) => { Some($w.value as u32) };
    (@take $w:ident value_hi $ty:ty) => { Some(($w.value >> 32) as u32) };
    (@take $w:ident text $ty:ty) => { $w.text };
    (@take $w:ident text_word $ty:ty) => { Some($w.text_word) };

    ($(
        $(#[$m:meta])*
        $kind:ident = $tag:literal => $name:literal {
            $( $(#[$fm:meta])* $field:ident: $ty:ty => $slot:ident ),* $(,)?
        } $(if $guard:expr)?
    ),+ $(,)?) => {
        /// What happened. The client's name, where there is a client, is the record's
        /// [`super::Record::name`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum RecordKind {
            $( $(#[$m])* $kind { $( $(#[$fm])* $field: $ty ),* }, )+
        }

        wire_enum! {
            /// What kind of record it is: its tag on the wire and its name (JSON's `kind`,
            /// `hcactl log --kind`), once.
            #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
            pub enum RecordTag {
                $( $kind = $tag => $name ),+
            }
        }

        impl RecordKind {
            /// Its tag: its number on the wire and its name.
            pub const fn tag(&self) -> RecordTag {
                match self {
                    $( RecordKind::$kind { .. } => RecordTag::$kind, )+
                }
            }

            /// The client the record is about, if any: the field in a client slot.
            #[allow(unused_assignments)]
            pub const fn client(&self) -> Option<ClientId> {
                match *self {
                    $( RecordKind::$kind { $($field),* } => {
                        #[allow(unused_mut)]
                        let mut who = None;
                        $( record_kinds!(@client who $slot $field); )*
                        who
                    } )+
                }
            }

            /// The wire slots this record fills.
            pub(super) fn slots(&self) -> Slots<'_> {
                let mut s = Slots::default();
                match self {
                    $( RecordKind::$kind { $($field),* } => {
                        $( record_kinds!(@put s $slot $field); )*
                    } )+
                }
                s
            }

            /// The record of `tag` the slots hold; `None` for slots no record encodes to.
            pub(super) fn from_slots(tag: RecordTag, w: &WireSlots) -> Option<RecordKind> {
                match tag {
                    $( RecordTag::$kind => {
                        $( let $field: $ty = record_kinds!(@take w $slot $ty)?; )*
                        $( if !($guard) { return None; } )?
                        Some(RecordKind::$kind { $($field),* })
                    } )+
                }
            }
        }
    };
}

record_kinds! {
    Transition = 1 => "transition" { from: State => a, to: State => b },
    ResetStarted = 2 => "reset_started" {
        epoch: Epoch => value,
        reason: ResetReason => a,
        planned: bool => b,
    },
    /// A request or fault met a reset already under way and joined it.
    ResetJoined = 3 => "reset_joined" { reason: ResetReason => a },
    /// A request during restore: exactly one more reset will follow.
    FollowUpScheduled = 4 => "follow_up" { reason: ResetReason => a },
    ResetFinished = 5 => "reset_finished" { epoch: Epoch => value, outcome: ResetOutcome => a },
    ResetFailed = 6 => "reset_failed" { epoch: Epoch => value, error: FailReason => a },
    Event = 7 => "event" {
        client: ClientId => client,
        event: EventKind => a,
        epoch: Epoch => value,
    },
    /// A call; an administrator's reset or restart keeps the reason they gave as the name.
    Call = 8 => "call" { client: Option<ClientId> => client_flag, call: Call => a },
    /// A call refused; an administrator's refused policy keeps the key at fault as the name.
    Refused = 9 => "refused" {
        client: Option<ClientId> => client_flag,
        call: Call => a,
        code: RefusalCode => c,
    },
    /// A barrier member passed its deadline; the name survives the client's unregister.
    /// `aborts`: the policy calls the planned reset off for it (`abort_on_unresponsive`)
    /// instead of forcing it through.
    Unresponsive = 10 => "unresponsive" { client: ClientId => client, aborts: bool => a },
    /// A client's reset request refused by its `client_request_limit`: nothing happened.
    Throttled = 13 => "throttled" { client: ClientId => client },
    /// A queried client refused a planned reset, and why.
    Vetoed = 14 => "vetoed" { client: ClientId => client, reason: VetoReason => text },
    /// A hardware step completed; `detail` is the catastrophic word of a health read, or
    /// the settle time in ms of an asserted reset.
    Hw = 11 => "hw" { step: HwStep => a, outcome: HwOutcome => b, detail: u32 => value },
    Pnp = 12 => "pnp" { op: PnpOp => a },
    /// The hardware reported a port's new state (and, Active, its LID).
    Port = 15 => "port" {
        port: u8 => a,
        state: PortState => b,
        lid: u16 => value,
    } if (1..=MAX_PORTS).contains(&port),
    /// An administrator changed a policy key (its index in `Policy::KEYS`): one record per
    /// key whose value changed.
    PolicyChanged = 16 => "policy_changed" {
        key: u8 => a,
        old: u64 => text_word,
        new: u64 => value,
    } if usize::from(key) < Policy::KEYS.len(),
    /// An administrator injected a fault (the simulator; `accepted` false: the device
    /// refused it, as hardware refuses every one).
    FaultInjected = 17 => "fault_injected" {
        fault: FaultCode => a,
        count: u32 => value_lo,
        port: u8 => b,
        duration_ms: u32 => value_hi,
        accepted: bool => c,
    },
}
