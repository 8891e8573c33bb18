//! The driver's ETW events: each flight record as one TraceLogging event, self-describing
//! (its metadata travels with it, no manifest), encoded here per TraceLoggingProvider.h's
//! format and written by the FFI layer with EtwWriteTransfer (src/windows/etw.rs).
//!
//! Why not a crate: Microsoft's `tracelogging` (no_std, a `kernel_mode` feature) declares its
//! events at compile time, one macro call per event with its field list, where the driver's
//! events are the recorder's 17 kinds whose fields the records describe themselves
//! ([`Record::describe`]); its kernel path imports EtwSetInformation, which the kit's
//! ntoskrnl export list (mingw's) has not (the driver finds it with MmGetSystemRoutineAddress
//! and sets the provider's traits with it, as TraceLogging does), and it writes nothing off
//! Windows, where the KMDF model runs the layer. `tracelogging_dynamic` builds events in `Vec`s, which the DISPATCH_LEVEL path
//! that writes them must not grow. The KMDF model decodes what this writes with its own
//! reader, the type numbers and the provider's GUID taken from `tracelogging` itself.
//!
//! An event, as EtwWriteTransfer takes it: an EVENT_DESCRIPTOR (channel 11, TraceLogging's;
//! the level and keywords below) and three data blocks: the provider's metadata (type 2), the
//! event's (type 1), the field values (type 0).
//! - provider metadata: u16 size (itself included), the name NUL-terminated, no traits;
//! - event metadata: u16 size, one tag byte (0: no tags), the event's name NUL-terminated,
//!   then per field its name NUL-terminated and its in-type byte, with 0x80 set when an
//!   out-type byte follows;
//! - the values, back to back, little-endian; a string NUL-terminated.
#![forbid(unsafe_code)]

use core::fmt::{self, Write as _};

use bitflags::bitflags;
use hcabus::host::ResetSpan;
use hcabus::recorder::{Describe, HwOutcome, Record, RecordKind};
use hcabus::types::{Actor, ClientId};

/// The provider's name: `wpr -start` and `tracelog -guid` name it `*hcabus`; its GUID is the
/// name's hash ([`PROVIDER_GUID`]).
pub const PROVIDER_NAME: &str = "hcabus";

/// The GUID ETW derives from [`PROVIDER_NAME`] (EventSource's hash: SHA-1 of a fixed
/// namespace and the name upper-cased in UTF-16BE), as (data1, data2, data3, data4): the
/// model's test derives it again with Microsoft's `tracelogging::Guid::from_name`.
/// {54937e12-98bd-563c-6c7c-045621fe1563}.
pub const PROVIDER_GUID: (u32, u16, u16, [u8; 8]) = (
    0x5493_7e12,
    0x98bd,
    0x563c,
    [0x6c, 0x7c, 0x04, 0x56, 0x21, 0xfe, 0x15, 0x63],
);

/// The channel of a TraceLogging event (WINEVENT_CHANNEL_TRACELOGGING): what tells a decoder
/// that the metadata travels in the event.
pub const CHANNEL_TRACELOGGING: u8 = 11;
/// EVENT_DATA_DESCRIPTOR's `Type` of each of the three blocks.
pub const DESCRIPTOR_TYPE_PROVIDER_METADATA: u8 = 2;
pub const DESCRIPTOR_TYPE_EVENT_METADATA: u8 = 1;
pub const DESCRIPTOR_TYPE_DATA: u8 = 0;

/// The provider's metadata block: its size, then its name.
pub static PROVIDER_METADATA: [u8; 2 + PROVIDER_NAME.len() + 1] = provider_metadata();

const fn provider_metadata() -> [u8; 2 + PROVIDER_NAME.len() + 1] {
    let mut out = [0u8; 2 + PROVIDER_NAME.len() + 1];
    let size = out.len() as u16;
    out[0] = size as u8;
    out[1] = (size >> 8) as u8;
    let name = PROVIDER_NAME.as_bytes();
    let mut i = 0;
    while i < name.len() {
        out[2 + i] = name[i];
        i += 1;
    }
    out
}

bitflags! {
    /// The event's keywords: what a session asks for (`-EnableFlags`, WPR's profile).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Keywords: u64 {
        /// A reset's course: its start, joins, follow-ups, end or failure, state changes.
        const RESET = 0x1;
        /// A client: an event delivered, its calls and refusals, its answer, a veto.
        const CLIENT = 0x2;
        /// A hardware step, a port's state.
        const HARDWARE = 0x4;
        /// An administrator's act: a call without a client, a policy change, an injected
        /// fault, anything done while serving an administrator.
        const ADMIN = 0x8;
        /// A PnP operation on the children.
        const PNP = 0x10;
    }
}

/// The levels the events use (TRACE_LEVEL_*).
pub const LEVEL_ERROR: u8 = 2;
pub const LEVEL_WARNING: u8 = 3;
pub const LEVEL_INFO: u8 = 4;
pub const LEVEL_VERBOSE: u8 = 5;

/// The level of `record`'s event: a failed reset is an error; a client that did not answer,
/// refused, was throttled or vetoed, and a failed hardware step, are warnings; the hardware's
/// and the clients' routine is verbose; the rest informational.
pub fn level(record: &Record) -> u8 {
    match record.kind {
        RecordKind::ResetFailed { .. } => LEVEL_ERROR,
        RecordKind::Unresponsive { .. }
        | RecordKind::Throttled { .. }
        | RecordKind::Vetoed { .. }
        | RecordKind::Refused { .. } => LEVEL_WARNING,
        RecordKind::Hw { outcome, .. } if !HwOutcome::is_ok(outcome) => LEVEL_WARNING,
        RecordKind::Hw { .. } | RecordKind::Event { .. } => LEVEL_VERBOSE,
        _ => LEVEL_INFO,
    }
}

/// The keywords of `record`'s event.
pub fn keywords(record: &Record) -> Keywords {
    let own = match record.kind {
        RecordKind::Transition { .. }
        | RecordKind::ResetStarted { .. }
        | RecordKind::ResetJoined { .. }
        | RecordKind::FollowUpScheduled { .. }
        | RecordKind::ResetFinished { .. }
        | RecordKind::ResetFailed { .. } => Keywords::RESET,
        RecordKind::Event { .. }
        | RecordKind::Unresponsive { .. }
        | RecordKind::Throttled { .. }
        | RecordKind::Vetoed { .. } => Keywords::CLIENT,
        RecordKind::Call { client, .. } | RecordKind::Refused { client, .. } => match client {
            Some(_) => Keywords::CLIENT,
            None => Keywords::ADMIN,
        },
        RecordKind::Hw { .. } | RecordKind::Port { .. } => Keywords::HARDWARE,
        RecordKind::Pnp { .. } => Keywords::PNP,
        RecordKind::PolicyChanged { .. } | RecordKind::FaultInjected { .. } => Keywords::ADMIN,
    };
    match record.by {
        Actor::Nobody => own,
        _ => own | Keywords::ADMIN,
    }
}

/// TraceLogging's in-types the events use (TlgIn_t), and the flag that says an out-type
/// follows.
const IN_CSTR8: u8 = 2;
const IN_U8: u8 = 4;
const IN_U32: u8 = 8;
const IN_U64: u8 = 10;
const IN_HEX32: u8 = 20;
const CHAIN: u8 = 0x80;
/// Out-types: a byte shown as a boolean, an 8-bit string as UTF-8.
const OUT_BOOLEAN: u8 = 3;
const OUT_UTF8: u8 = 35;

/// Room for an event's metadata and values: the largest record's (tested for every kind at
/// its widest: 139 and 188 bytes) with margin; on the stack of the DPC that writes it.
pub const METADATA_BYTES: usize = 256;
pub const DATA_BYTES: usize = 256;

/// A record's event did not fit its room: not written, and counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the ETW event of a {kind} record does not fit in {METADATA_BYTES} + {DATA_BYTES} bytes")]
pub struct TooLong {
    pub kind: &'static str,
}

/// One event, encoded in place.
#[derive(Debug)]
pub struct EtwEvent {
    metadata: [u8; METADATA_BYTES],
    metadata_len: usize,
    data: [u8; DATA_BYTES],
    data_len: usize,
    level: u8,
    keywords: Keywords,
}

impl Default for EtwEvent {
    fn default() -> Self {
        EtwEvent {
            metadata: [0; METADATA_BYTES],
            metadata_len: 0,
            data: [0; DATA_BYTES],
            data_len: 0,
            level: 0,
            keywords: Keywords::empty(),
        }
    }
}

impl EtwEvent {
    /// The event's metadata block (type 1).
    pub fn metadata(&self) -> &[u8] {
        &self.metadata[..self.metadata_len]
    }

    /// The field values (type 0).
    pub fn data(&self) -> &[u8] {
        &self.data[..self.data_len]
    }

    pub fn level(&self) -> u8 {
        self.level
    }

    pub fn keywords(&self) -> Keywords {
        self.keywords
    }

    /// Encodes `record`, which falls in `reset`: the event is named after its kind; its
    /// fields are `seq`, `at_us`, `count`; the reset's `reset_epoch`, `reset_reason` and
    /// `reset_elapsed_us` inside one; `by` when an administrator asked; then the kind's own
    /// fields as JSON names them (a client as `client`, `#index.generation`, and
    /// `client_name`), those the record has not this time left out.
    pub fn encode(&mut self, record: &Record, reset: Option<ResetSpan>) -> Result<(), TooLong> {
        let kind = record.kind.tag().as_str();
        self.level = level(record);
        self.keywords = keywords(record);
        let mut w = Writer {
            event: self,
            record,
            full: false,
        };
        w.start(kind);
        w.u64("seq", record.seq);
        w.u64("at_us", record.at.as_us());
        w.field("count", IN_U32, None, &record.count.to_le_bytes());
        if let Some(span) = reset {
            w.u64("reset_epoch", span.epoch.0);
            w.str("reset_reason", span.reason.as_str());
            w.u64("reset_elapsed_us", span.elapsed_us(record));
        }
        if record.by != Actor::Nobody {
            let mut text = Line::default();
            let _ = write!(text, "{}", record.by);
            w.str("by", text.as_str());
        }
        let _ = record.describe(&mut w);
        let full = w.full;
        if full {
            return Err(TooLong { kind });
        }
        let size = self.metadata_len as u16;
        self.metadata[..2].copy_from_slice(&size.to_le_bytes());
        Ok(())
    }
}

/// Appends fields to an event; `full` once a field did not fit (the rest are dropped).
struct Writer<'a> {
    event: &'a mut EtwEvent,
    record: &'a Record,
    full: bool,
}

impl Writer<'_> {
    fn start(&mut self, name: &str) {
        let e = &mut *self.event;
        e.metadata_len = 0;
        e.data_len = 0;
        // The size, written last; no event tags.
        self.meta(&[0, 0, 0]);
        self.meta(name.as_bytes());
        self.meta(&[0]);
    }

    fn meta(&mut self, bytes: &[u8]) {
        let e = &mut *self.event;
        match e
            .metadata
            .get_mut(e.metadata_len..e.metadata_len + bytes.len())
        {
            Some(room) => {
                room.copy_from_slice(bytes);
                e.metadata_len += bytes.len();
            }
            None => self.full = true,
        }
    }

    fn value(&mut self, bytes: &[u8]) {
        let e = &mut *self.event;
        match e.data.get_mut(e.data_len..e.data_len + bytes.len()) {
            Some(room) => {
                room.copy_from_slice(bytes);
                e.data_len += bytes.len();
            }
            None => self.full = true,
        }
    }

    /// A field's metadata (its name, its in-type, its out-type if any) and its value.
    fn field(&mut self, name: &str, in_type: u8, out_type: Option<u8>, value: &[u8]) {
        if self.full {
            return;
        }
        self.meta(name.as_bytes());
        match out_type {
            Some(out) => self.meta(&[0, in_type | CHAIN, out]),
            None => self.meta(&[0, in_type]),
        }
        self.value(value);
    }

    fn u64(&mut self, name: &str, value: u64) {
        self.field(name, IN_U64, None, &value.to_le_bytes());
    }

    fn str(&mut self, name: &str, value: &str) {
        self.field(name, IN_CSTR8, Some(OUT_UTF8), value.as_bytes());
        self.value(&[0]);
    }
}

impl Describe for Writer<'_> {
    fn phrase(&mut self, _: fmt::Arguments<'_>) -> fmt::Result {
        Ok(())
    }
    fn word(&mut self, name: &'static str, value: &'static str) {
        self.str(name, value);
    }
    fn state(&mut self, name: &'static str, value: &'static str) {
        self.str(name, value);
    }
    fn number(&mut self, name: &'static str, value: Option<u64>) {
        if let Some(v) = value {
            self.u64(name, v);
        }
    }
    fn flag(&mut self, name: &'static str, value: bool) {
        self.field(name, IN_U8, Some(OUT_BOOLEAN), &[u8::from(value)]);
    }
    fn client(&mut self, name: &'static str, value: Option<ClientId>) {
        let Some(id) = value else { return };
        let mut text = Line::default();
        let _ = write!(text, "{id}");
        self.str(name, text.as_str());
        let client_name = self.record.name;
        if !client_name.as_str().is_empty() {
            self.str("client_name", client_name.as_str());
        }
    }
    fn text(&mut self, name: &'static str, value: Option<&str>) {
        if let Some(v) = value {
            self.str(name, v);
        }
    }
    fn hex(&mut self, name: &'static str, value: u32) {
        self.field(name, IN_HEX32, None, &value.to_le_bytes());
    }
}

/// A short line formatted in place (a client id, who asked); cut, never grown, if too long.
struct Line {
    bytes: [u8; 48],
    len: usize,
}

impl Default for Line {
    fn default() -> Self {
        Line {
            bytes: [0; 48],
            len: 0,
        }
    }
}

impl Line {
    fn as_str(&self) -> &str {
        core::str::from_utf8(&self.bytes[..self.len]).unwrap_or("?")
    }
}

impl fmt::Write for Line {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = &mut self.bytes[self.len..];
        let n = s.len().min(room.len());
        room[..n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        match n == s.len() {
            true => Ok(()),
            false => Err(fmt::Error),
        }
    }
}

#[cfg(test)]
mod tests;
