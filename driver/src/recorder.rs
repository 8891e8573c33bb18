//! The flight recorder: a fixed-capacity ring of what the coordinator did and why.
//!
//! Reserved at start and overwritten oldest-first when full, so recording never allocates
//! and never stops the reset path; `dropped` says how much history was overwritten.

use alloc::vec::Vec;
use core::fmt;

use crate::errors::RefusalCode;
use crate::hca::HwStep;
use crate::time::Instant;
use crate::types::{Call, PnpOp, State};
use crate::types::{ClientId, ClientName, Epoch, EventKind, FailReason, ResetOutcome, ResetReason};
use crate::types::{PortState, ShortText, VetoReason, MAX_PORTS};

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    Transition {
        from: State,
        to: State,
    },
    ResetStarted {
        epoch: Epoch,
        reason: ResetReason,
        planned: bool,
    },
    /// A request or fault met a reset already under way and joined it.
    ResetJoined {
        reason: ResetReason,
    },
    /// A request during restore: exactly one more reset will follow.
    FollowUpScheduled {
        reason: ResetReason,
    },
    ResetFinished {
        epoch: Epoch,
        outcome: ResetOutcome,
    },
    ResetFailed {
        epoch: Epoch,
        error: FailReason,
    },
    Event {
        client: ClientId,
        event: EventKind,
        epoch: Epoch,
    },
    Call {
        client: Option<ClientId>,
        call: Call,
    },
    Refused {
        client: Option<ClientId>,
        call: Call,
        code: RefusalCode,
    },
    /// A barrier member passed its deadline; the name survives the client's unregister.
    Unresponsive {
        client: ClientId,
        name: ClientName,
    },
    /// A client's reset request refused by its `client_request_limit`: nothing happened.
    Throttled {
        client: ClientId,
        name: ClientName,
    },
    /// A queried client refused a planned reset, and why.
    Vetoed {
        client: ClientId,
        reason: VetoReason,
    },
    Hw {
        step: HwStep,
        ok: bool,
    },
    Pnp {
        op: PnpOp,
    },
    /// The hardware reported a port's new state (and, Active, its LID).
    Port {
        port: u8,
        state: PortState,
        lid: u16,
    },
}

/// One timestamped, sequence-numbered record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    pub seq: u64,
    pub at: Instant,
    pub kind: RecordKind,
}

/// Size of one encoded record (see [`Record::encode`]).
pub const RECORD_BYTES: usize = 64;

impl Record {
    /// Little-endian, fixed-size encoding, the same on every host: `seq u64, at_us u64,
    /// tag u8, a u8, b u8, c u8, reserved u32, client u64, value u64, name [u8; 24]`; a
    /// veto's reason takes the 32 bytes of value and name.
    pub fn encode(&self) -> [u8; RECORD_BYTES] {
        let mut out = [0u8; RECORD_BYTES];
        type Text<'a> = Option<(&'a ShortText, usize)>;
        let (tag, a, b, c, client, value, text): (u8, u8, u8, u8, u64, u64, Text<'_>) = match &self
            .kind
        {
            RecordKind::Transition { from, to } => (1, *from as u8, *to as u8, 0, 0, 0, None),
            RecordKind::ResetStarted {
                epoch,
                reason,
                planned,
            } => (2, *reason as u8, *planned as u8, 0, 0, epoch.0, None),
            RecordKind::ResetJoined { reason } => (3, *reason as u8, 0, 0, 0, 0, None),
            RecordKind::FollowUpScheduled { reason } => (4, *reason as u8, 0, 0, 0, 0, None),
            RecordKind::ResetFinished { epoch, outcome } => {
                (5, *outcome as u8, 0, 0, 0, epoch.0, None)
            }
            RecordKind::ResetFailed { epoch, error } => (6, *error as u8, 0, 0, 0, epoch.0, None),
            RecordKind::Event {
                client,
                event,
                epoch,
            } => (7, *event as u8, 0, 0, client.to_raw(), epoch.0, None),
            RecordKind::Call { client, call } => (
                8,
                *call as u8,
                client.is_some() as u8,
                0,
                client.map_or(0, ClientId::to_raw),
                0,
                None,
            ),
            RecordKind::Refused { client, call, code } => (
                9,
                *call as u8,
                client.is_some() as u8,
                *code as u8,
                client.map_or(0, ClientId::to_raw),
                0,
                None,
            ),
            RecordKind::Unresponsive { client, name } => {
                (10, 0, 0, 0, client.to_raw(), 0, Some((name, NAME_AT)))
            }
            RecordKind::Throttled { client, name } => {
                (13, 0, 0, 0, client.to_raw(), 0, Some((name, NAME_AT)))
            }
            RecordKind::Vetoed { client, reason } => {
                (14, 0, 0, 0, client.to_raw(), 0, Some((reason, REASON_AT)))
            }
            RecordKind::Hw { step, ok } => (11, *step as u8, *ok as u8, 0, 0, 0, None),
            RecordKind::Pnp { op } => (12, *op as u8, 0, 0, 0, 0, None),
            RecordKind::Port { port, state, lid } => {
                (15, *port, *state as u8, 0, 0, u64::from(*lid), None)
            }
        };
        out[0..8].copy_from_slice(&self.seq.to_le_bytes());
        out[8..16].copy_from_slice(&self.at.as_us().to_le_bytes());
        out[16] = tag;
        out[17] = a;
        out[18] = b;
        out[19] = c;
        out[24..32].copy_from_slice(&client.to_le_bytes());
        out[32..40].copy_from_slice(&value.to_le_bytes());
        if let Some((text, at)) = text {
            out[at..].copy_from_slice(&text.as_bytes()[..RECORD_BYTES - at]);
        }
        out
    }
}

/// Where a record's client name starts: it keeps the first 24 bytes.
const NAME_AT: usize = 40;
/// Where a veto's reason starts: all 32 bytes fit.
const REASON_AT: usize = 32;

/// The text a record carries from `at` to its end, up to the first NUL.
fn text_at(b: &[u8; RECORD_BYTES], at: usize) -> Option<&str> {
    let raw = &b[at..];
    let end = raw.iter().position(|x| *x == 0).unwrap_or(raw.len());
    core::str::from_utf8(&raw[..end]).ok()
}

fn name_at(b: &[u8; RECORD_BYTES]) -> Option<ClientName> {
    ClientName::new(text_at(b, NAME_AT)?)
}

impl Record {
    /// The inverse of [`Record::encode`]; `None` for bytes no record encodes to. A name
    /// comes back cut to the 24 bytes the encoding keeps.
    pub fn decode(b: &[u8; RECORD_BYTES]) -> Option<Record> {
        let u64_at = |at: usize| {
            let mut v = [0u8; 8];
            v.copy_from_slice(&b[at..at + 8]);
            u64::from_le_bytes(v)
        };
        let (tag, a, bb, c) = (b[16], b[17], b[18], b[19]);
        let client = ClientId::from_raw(u64_at(24));
        // Only calls and refusals say whether they carry a client.
        let some_client = || match bb {
            0 => Some(None),
            1 => Some(Some(client)),
            _ => None,
        };
        let value = u64_at(32);
        let flag = |v: u8| match v {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        };
        let kind = match tag {
            1 => RecordKind::Transition {
                from: State::from_u8(a)?,
                to: State::from_u8(bb)?,
            },
            2 => RecordKind::ResetStarted {
                epoch: Epoch(value),
                reason: ResetReason::from_u8(a)?,
                planned: flag(bb)?,
            },
            3 => RecordKind::ResetJoined {
                reason: ResetReason::from_u8(a)?,
            },
            4 => RecordKind::FollowUpScheduled {
                reason: ResetReason::from_u8(a)?,
            },
            5 => RecordKind::ResetFinished {
                epoch: Epoch(value),
                outcome: ResetOutcome::from_u8(a)?,
            },
            6 => RecordKind::ResetFailed {
                epoch: Epoch(value),
                error: FailReason::from_u8(a)?,
            },
            7 => RecordKind::Event {
                client,
                event: EventKind::from_u8(a)?,
                epoch: Epoch(value),
            },
            8 => RecordKind::Call {
                client: some_client()?,
                call: Call::from_u8(a)?,
            },
            9 => RecordKind::Refused {
                client: some_client()?,
                call: Call::from_u8(a)?,
                code: RefusalCode::from_u8(c)?,
            },
            10 => RecordKind::Unresponsive {
                client,
                name: name_at(b)?,
            },
            13 => RecordKind::Throttled {
                client,
                name: name_at(b)?,
            },
            14 => RecordKind::Vetoed {
                client,
                reason: VetoReason::cut(text_at(b, REASON_AT)?),
            },
            11 => RecordKind::Hw {
                step: HwStep::from_u8(a)?,
                ok: flag(bb)?,
            },
            12 => RecordKind::Pnp {
                op: PnpOp::from_u8(a)?,
            },
            15 if (1..=MAX_PORTS).contains(&a) => RecordKind::Port {
                port: a,
                state: PortState::from_u8(bb)?,
                lid: u16::try_from(value).ok()?,
            },
            _ => return None,
        };
        Some(Record {
            seq: u64_at(0),
            at: Instant::from_us(u64_at(8)),
            kind,
        })
    }
}

impl fmt::Display for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{:<5} {:>14}  ", self.seq, self.at)?;
        match &self.kind {
            RecordKind::Transition { from, to } => write!(f, "state {from} -> {to}"),
            RecordKind::ResetStarted {
                epoch,
                reason,
                planned,
            } => write!(
                f,
                "reset of {epoch} started: {reason}{}",
                if *planned { " (planned)" } else { "" }
            ),
            RecordKind::ResetJoined { reason } => write!(f, "{reason} joined the current reset"),
            RecordKind::FollowUpScheduled { reason } => {
                write!(f, "{reason} during restore: one follow-up reset scheduled")
            }
            RecordKind::ResetFinished { epoch, outcome } => {
                write!(f, "reset finished: {epoch} {}", outcome.as_str())
            }
            RecordKind::ResetFailed { epoch, error } => {
                write!(f, "reset of {epoch} failed: {}", error.as_str())
            }
            RecordKind::Event {
                client,
                event,
                epoch,
            } => write!(f, "{event} -> {client} ({epoch})"),
            RecordKind::Call { client, call } => match client {
                Some(c) => write!(f, "{} by {c}", call.as_str()),
                None => write!(f, "{}", call.as_str()),
            },
            RecordKind::Refused { client, call, code } => match client {
                Some(c) => write!(f, "{} by {c} refused: {}", call.as_str(), code.as_str()),
                None => write!(f, "{} refused: {}", call.as_str(), code.as_str()),
            },
            RecordKind::Unresponsive { client, name } => {
                write!(
                    f,
                    "client {client} '{name}' unresponsive at deadline: forced"
                )
            }
            RecordKind::Throttled { client, name } => write!(
                f,
                "client {client} '{name}' over its request limit: reset request ignored"
            ),
            RecordKind::Vetoed { client, reason } => {
                write!(f, "client {client} vetoed the planned reset: {reason}")
            }
            RecordKind::Hw { step, ok } => write!(
                f,
                "hw {} {}",
                step.as_str(),
                if *ok { "ok" } else { "failed" }
            ),
            RecordKind::Pnp { op } => write!(f, "pnp {}", op.as_str()),
            RecordKind::Port { port, state, lid } => match state {
                PortState::Active => write!(f, "port {port} active, lid {lid}"),
                _ => write!(f, "port {port} {}", state.as_str()),
            },
        }
    }
}

/// Fixed-capacity ring of records.
#[derive(Debug)]
pub struct FlightRecorder {
    ring: Vec<Record>,
    capacity: usize,
    /// Index the next record is written to once the ring is full.
    head: usize,
    next_seq: u64,
    dropped: u64,
}

/// A clone reserves the whole ring again, as [`FlightRecorder::new`] does.
impl Clone for FlightRecorder {
    fn clone(&self) -> Self {
        let mut ring = Vec::with_capacity(self.capacity);
        ring.extend_from_slice(&self.ring);
        FlightRecorder {
            ring,
            capacity: self.capacity,
            head: self.head,
            next_seq: self.next_seq,
            dropped: self.dropped,
        }
    }
}

impl FlightRecorder {
    /// Reserves every slot now; `capacity` of zero is raised to one.
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        FlightRecorder {
            ring: Vec::with_capacity(capacity),
            capacity,
            head: 0,
            next_seq: 0,
            dropped: 0,
        }
    }

    pub fn record(&mut self, at: Instant, kind: RecordKind) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        let rec = Record { seq, at, kind };
        if self.ring.len() < self.capacity {
            // Within the reserved capacity: never reallocates.
            self.ring.push(rec);
        } else {
            self.ring[self.head] = rec;
            self.dropped += 1;
        }
        self.head = (self.head + 1) % self.capacity;
        log::trace!("{rec}");
        seq
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn len(&self) -> usize {
        self.ring.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// Records overwritten because the ring was full.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Sequence number the next record will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Oldest to newest.
    pub fn iter(&self) -> impl Iterator<Item = &Record> + '_ {
        let split = if self.ring.len() < self.capacity {
            0
        } else {
            self.head
        };
        self.ring[split..].iter().chain(self.ring[..split].iter())
    }

    /// Records with `seq >= from`, oldest first; what was overwritten is simply absent.
    pub fn since(&self, from: u64) -> impl Iterator<Item = &Record> + '_ {
        self.iter().filter(move |r| r.seq >= from)
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn every_kind_of_record_decodes_to_itself_and_garbage_does_not_decode() {
        use crate::errors::RefusalCode;
        use crate::hca::HwStep;
        use crate::types::*;
        use crate::types::{Call, PnpOp, State};
        let id = ClientId {
            index: 3,
            generation: 9,
        };
        let kinds = [
            RecordKind::Transition {
                from: State::Operational,
                to: State::Quiescing,
            },
            RecordKind::ResetStarted {
                epoch: Epoch(4),
                reason: ResetReason::Catastrophic,
                planned: false,
            },
            RecordKind::ResetJoined {
                reason: ResetReason::ClientRequest,
            },
            RecordKind::FollowUpScheduled {
                reason: ResetReason::HealthStall,
            },
            RecordKind::ResetFinished {
                epoch: Epoch(5),
                outcome: ResetOutcome::FirmwareChanged,
            },
            RecordKind::ResetFailed {
                epoch: Epoch(5),
                error: FailReason::AutoRestartExpired,
            },
            RecordKind::Event {
                client: id,
                event: EventKind::ResetAborted,
                epoch: Epoch(2),
            },
            RecordKind::Call {
                client: None,
                call: Call::AdminReset,
            },
            RecordKind::Refused {
                client: Some(id),
                call: Call::ResetVeto,
                code: RefusalCode::TooLate,
            },
            RecordKind::Unresponsive {
                client: id,
                name: ClientName::new("wedged").expect("name"),
            },
            RecordKind::Throttled {
                client: id,
                name: ClientName::new("noisy").expect("name"),
            },
            // A reason fills all 32 bytes it is given, the multi-byte character included.
            RecordKind::Vetoed {
                client: id,
                reason: VetoReason::cut("backup running: 4 TB left, né, ok"),
            },
            RecordKind::Vetoed {
                client: id,
                reason: VetoReason::cut(""),
            },
            RecordKind::Hw {
                step: HwStep::FunctionLevelReset,
                ok: false,
            },
            RecordKind::Pnp {
                op: PnpOp::ReenumerateChildren,
            },
            RecordKind::Port {
                port: 2,
                state: PortState::Active,
                lid: 0xBFFF,
            },
            RecordKind::Port {
                port: 1,
                state: PortState::Down,
                lid: 0,
            },
        ];
        for (n, kind) in kinds.into_iter().enumerate() {
            let r = Record {
                seq: n as u64 + 100,
                at: Instant::from_us(1_234_567),
                kind,
            };
            assert_eq!(Record::decode(&r.encode()), Some(r));
        }
        let mut bad = kinds_bytes();
        bad[16] = 99;
        assert_eq!(Record::decode(&bad), None, "unknown tag");
        let mut bad = kinds_bytes();
        bad[17] = 200;
        assert_eq!(Record::decode(&bad), None, "unknown state");
    }

    fn kinds_bytes() -> [u8; RECORD_BYTES] {
        Record {
            seq: 1,
            at: Instant::ZERO,
            kind: RecordKind::Transition {
                from: State::Failed,
                to: State::Resetting,
            },
        }
        .encode()
    }
    use super::*;

    fn hw(ok: bool) -> RecordKind {
        RecordKind::Hw {
            step: HwStep::ProbeReady,
            ok,
        }
    }

    #[test]
    fn keeps_everything_until_full() {
        let mut r = FlightRecorder::new(4);
        for i in 0..3 {
            r.record(Instant::from_ms(i), hw(true));
        }
        assert_eq!(r.len(), 3);
        assert_eq!(r.dropped(), 0);
        let seqs: Vec<u64> = r.iter().map(|x| x.seq).collect();
        assert_eq!(seqs, [0, 1, 2]);
    }

    #[test]
    fn wraps_with_drop_count_and_monotonic_sequence() {
        let mut r = FlightRecorder::new(4);
        for i in 0..11 {
            r.record(Instant::from_ms(i), hw(i % 2 == 0));
        }
        assert_eq!(r.len(), 4);
        assert_eq!(r.dropped(), 7);
        assert_eq!(r.next_seq(), 11);
        let seqs: Vec<u64> = r.iter().map(|x| x.seq).collect();
        assert_eq!(seqs, [7, 8, 9, 10]);
        let times: Vec<u64> = r.iter().map(|x| x.at.as_ms()).collect();
        assert_eq!(times, [7, 8, 9, 10]);
        let since: Vec<u64> = r.since(9).map(|x| x.seq).collect();
        assert_eq!(since, [9, 10]);
        // Asking for overwritten history yields what is left, not an error.
        assert_eq!(r.since(0).count(), 4);
    }

    #[test]
    fn recording_never_grows_the_ring() {
        let mut r = FlightRecorder::new(8);
        let cap_before = r.ring.capacity();
        for i in 0..100 {
            r.record(Instant::from_us(i), hw(true));
        }
        assert_eq!(r.ring.capacity(), cap_before);
    }

    #[test]
    fn encoding_is_fixed_size_and_distinguishes_records() {
        let a = Record {
            seq: 1,
            at: Instant::from_us(5),
            kind: hw(true),
        };
        let b = Record {
            kind: hw(false),
            ..a
        };
        assert_ne!(a.encode(), b.encode());
        assert_eq!(&a.encode()[0..8], &1u64.to_le_bytes());
        let name = ClientName::new("wedged").expect("fits");
        let u = Record {
            seq: 2,
            at: Instant::ZERO,
            kind: RecordKind::Unresponsive {
                client: ClientId {
                    index: 3,
                    generation: 9,
                },
                name,
            },
        };
        assert_eq!(&u.encode()[40..46], b"wedged");
    }
}
