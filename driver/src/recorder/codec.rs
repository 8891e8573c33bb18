//! The records' wire encodings (READ_LOG): version 5's 128 bytes, which carry the client's
//! name, the repeat count and the last time, and the 64 bytes every older caller was given.

use super::{HwOutcome, Record, RecordKind, RecordTag};
use crate::errors::RefusalCode;
use crate::fault::FaultCode;
use crate::hca::HwStep;
use crate::time::Instant;
use crate::types::{Actor, PortState, ResetReason, ShortText, State, MAX_PORTS};
use crate::types::{Call, ClientId, Epoch, EventKind, FailReason, PnpOp, ResetOutcome};

/// Size of one record in version 5 (see [`Record::encode`]).
pub const RECORD_BYTES: usize = 128;
/// Size of one record for callers of versions 1 to 4 (see [`Record::encode_v4`]).
pub const RECORD_V4_BYTES: usize = 64;

/// Version 5: where the client's name (or the administrator's reason) starts.
const NAME_AT: usize = 48;
/// Version 5: where a veto's reason starts (a policy change's old value).
const TEXT_AT: usize = 80;
/// Version 5: who asked ([`Actor::to_bytes`]).
const ACTOR_AT: usize = 112;
/// Versions 1 to 4: a name keeps its first 24 bytes from here.
const V4_NAME_AT: usize = 40;
/// Versions 1 to 4: a veto's reason.
const V4_REASON_AT: usize = 32;

/// The fields every encoding shares.
struct Fields<'a> {
    tag: u8,
    a: u8,
    b: u8,
    c: u8,
    client: u64,
    value: u64,
    /// A veto's reason.
    text: Option<&'a ShortText>,
}

impl Record {
    fn fields(&self) -> Fields<'_> {
        let tag = self.kind.tag() as u8;
        let f = |a, b, c, client, value| Fields {
            tag,
            a,
            b,
            c,
            client,
            value,
            text: None,
        };
        let raw = |c: &Option<ClientId>| c.map_or(0, ClientId::to_raw);
        match &self.kind {
            RecordKind::Transition { from, to } => f(*from as u8, *to as u8, 0, 0, 0),
            RecordKind::ResetStarted {
                epoch,
                reason,
                planned,
            } => f(*reason as u8, *planned as u8, 0, 0, epoch.0),
            RecordKind::ResetJoined { reason } => f(*reason as u8, 0, 0, 0, 0),
            RecordKind::FollowUpScheduled { reason } => f(*reason as u8, 0, 0, 0, 0),
            RecordKind::ResetFinished { epoch, outcome } => f(*outcome as u8, 0, 0, 0, epoch.0),
            RecordKind::ResetFailed { epoch, error } => f(*error as u8, 0, 0, 0, epoch.0),
            RecordKind::Event {
                client,
                event,
                epoch,
            } => f(*event as u8, 0, 0, client.to_raw(), epoch.0),
            RecordKind::Call { client, call } => {
                f(*call as u8, client.is_some() as u8, 0, raw(client), 0)
            }
            RecordKind::Refused { client, call, code } => f(
                *call as u8,
                client.is_some() as u8,
                *code as u8,
                raw(client),
                0,
            ),
            RecordKind::Unresponsive { client, aborts } => {
                f(u8::from(*aborts), 0, 0, client.to_raw(), 0)
            }
            RecordKind::Throttled { client } => f(0, 0, 0, client.to_raw(), 0),
            RecordKind::Vetoed { client, reason } => Fields {
                text: Some(reason),
                ..f(0, 0, 0, client.to_raw(), 0)
            },
            RecordKind::Hw {
                step,
                outcome,
                detail,
            } => f(*step as u8, *outcome as u8, 0, 0, u64::from(*detail)),
            RecordKind::Pnp { op } => f(*op as u8, 0, 0, 0, 0),
            RecordKind::Port { port, state, lid } => f(*port, *state as u8, 0, 0, u64::from(*lid)),
            RecordKind::PolicyChanged { key, new, .. } => f(*key, 0, 0, 0, *new),
            RecordKind::FaultInjected {
                fault,
                count,
                port,
                duration_ms,
                accepted,
            } => f(
                *fault as u8,
                *port,
                u8::from(*accepted),
                0,
                u64::from(*count) | u64::from(*duration_ms) << 32,
            ),
        }
    }

    /// Version 5, little-endian: `seq u64, at_us u64, tag u8, a u8, b u8, c u8, count u32,
    /// client u64, value u64, last_at_us u64, name [u8; 32], text [u8; 32], actor [u8; 8],
    /// reserved [u8; 8]`. A hardware step's `b` is its [`HwOutcome`] and `value` its detail;
    /// a policy change's old value is the text's first 8 bytes; the actor is who asked
    /// (zero: nobody, as every record before version 7 says).
    pub fn encode(&self) -> [u8; RECORD_BYTES] {
        let mut out = [0u8; RECORD_BYTES];
        let f = self.fields();
        self.put_head(&mut out, &f);
        out[40..48].copy_from_slice(&self.last_at.as_us().to_le_bytes());
        out[NAME_AT..NAME_AT + ShortText::CAPACITY].copy_from_slice(self.name.as_bytes());
        if let Some(text) = f.text {
            out[TEXT_AT..TEXT_AT + ShortText::CAPACITY].copy_from_slice(text.as_bytes());
        }
        if let RecordKind::PolicyChanged { old, .. } = self.kind {
            out[TEXT_AT..TEXT_AT + 8].copy_from_slice(&old.to_le_bytes());
        }
        out[ACTOR_AT..ACTOR_AT + 8].copy_from_slice(&self.by.to_bytes());
        out
    }

    /// Versions 1 to 4, unchanged for them: 64 bytes, `seq, at_us, tag, a, b, c, count u32
    /// (reserved before version 5), client, value, name [u8; 24]`. Only a forced or throttled
    /// client's name is kept (its first 24 bytes); a hardware step's `b` is 1 when the step
    /// did what was asked ([`HwOutcome::is_ok`]) and `value` is 0; a veto's reason fills the
    /// 32 bytes from offset 32.
    pub fn encode_v4(&self) -> [u8; RECORD_V4_BYTES] {
        let mut out = [0u8; RECORD_V4_BYTES];
        let mut f = self.fields();
        if let RecordKind::Hw { outcome, .. } = self.kind {
            (f.b, f.value) = (u8::from(outcome.is_ok()), 0);
        }
        self.put_head(&mut out, &f);
        let named = matches!(
            self.kind,
            RecordKind::Unresponsive { .. } | RecordKind::Throttled { .. }
        );
        if named {
            out[V4_NAME_AT..]
                .copy_from_slice(&self.name.as_bytes()[..RECORD_V4_BYTES - V4_NAME_AT]);
        }
        if let Some(text) = f.text {
            out[V4_REASON_AT..].copy_from_slice(text.as_bytes());
        }
        out
    }

    fn put_head(&self, out: &mut [u8], f: &Fields<'_>) {
        out[0..8].copy_from_slice(&self.seq.to_le_bytes());
        out[8..16].copy_from_slice(&self.at.as_us().to_le_bytes());
        out[16..20].copy_from_slice(&[f.tag, f.a, f.b, f.c]);
        out[20..24].copy_from_slice(&self.count.to_le_bytes());
        out[24..32].copy_from_slice(&f.client.to_le_bytes());
        out[32..40].copy_from_slice(&f.value.to_le_bytes());
    }

    /// The inverse of [`Record::encode`]; `None` for bytes no record encodes to.
    pub fn decode(b: &[u8; RECORD_BYTES]) -> Option<Record> {
        let u64_at = |at: usize| {
            let mut v = [0u8; 8];
            v.copy_from_slice(&b[at..at + 8]);
            u64::from_le_bytes(v)
        };
        let mut count = [0u8; 4];
        count.copy_from_slice(&b[20..24]);
        let count = u32::from_le_bytes(count);
        let kind = decode_kind(b, u64_at(24), u64_at(32))?;
        if count == 0 {
            return None;
        }
        let mut actor = [0u8; 8];
        actor.copy_from_slice(&b[ACTOR_AT..ACTOR_AT + 8]);
        Some(Record {
            seq: u64_at(0),
            at: Instant::from_us(u64_at(8)),
            last_at: Instant::from_us(u64_at(40)),
            count,
            name: text_at(b, NAME_AT)?,
            kind,
            by: Actor::from_bytes(actor)?,
        })
    }
}

/// The text from `at` (32 bytes, NUL-padded); `None` when it is not text a record holds.
fn text_at(b: &[u8; RECORD_BYTES], at: usize) -> Option<ShortText> {
    let raw = &b[at..at + ShortText::CAPACITY];
    let end = raw.iter().position(|x| *x == 0).unwrap_or(raw.len());
    if raw[end..].iter().any(|x| *x != 0) {
        return None;
    }
    let text = core::str::from_utf8(&raw[..end]).ok()?;
    let cut = ShortText::cut(text);
    (cut.as_str() == text).then_some(cut)
}

fn decode_kind(b: &[u8; RECORD_BYTES], client: u64, value: u64) -> Option<RecordKind> {
    let (tag, a, bb, c) = (b[16], b[17], b[18], b[19]);
    let client_id = ClientId::from_raw(client);
    // Only calls and refusals say whether they carry a client.
    let some_client = || match bb {
        0 => Some(None),
        1 => Some(Some(client_id)),
        _ => None,
    };
    let flag = |v: u8| match v {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    };
    Some(match RecordTag::from_u8(tag)? {
        RecordTag::Transition => RecordKind::Transition {
            from: State::from_u8(a)?,
            to: State::from_u8(bb)?,
        },
        RecordTag::ResetStarted => RecordKind::ResetStarted {
            epoch: Epoch(value),
            reason: ResetReason::from_u8(a)?,
            planned: flag(bb)?,
        },
        RecordTag::ResetJoined => RecordKind::ResetJoined {
            reason: ResetReason::from_u8(a)?,
        },
        RecordTag::FollowUpScheduled => RecordKind::FollowUpScheduled {
            reason: ResetReason::from_u8(a)?,
        },
        RecordTag::ResetFinished => RecordKind::ResetFinished {
            epoch: Epoch(value),
            outcome: ResetOutcome::from_u8(a)?,
        },
        RecordTag::ResetFailed => RecordKind::ResetFailed {
            epoch: Epoch(value),
            error: FailReason::from_u8(a)?,
        },
        RecordTag::Event => RecordKind::Event {
            client: client_id,
            event: EventKind::from_u8(a)?,
            epoch: Epoch(value),
        },
        RecordTag::Call => RecordKind::Call {
            client: some_client()?,
            call: Call::from_u8(a)?,
        },
        RecordTag::Refused => RecordKind::Refused {
            client: some_client()?,
            call: Call::from_u8(a)?,
            code: RefusalCode::from_u8(c)?,
        },
        RecordTag::Unresponsive => RecordKind::Unresponsive {
            client: client_id,
            aborts: match a {
                0 => false,
                1 => true,
                _ => return None,
            },
        },
        RecordTag::Throttled => RecordKind::Throttled { client: client_id },
        RecordTag::Vetoed => RecordKind::Vetoed {
            client: client_id,
            reason: text_at(b, TEXT_AT)?,
        },
        RecordTag::Hw => RecordKind::Hw {
            step: HwStep::from_u8(a)?,
            outcome: HwOutcome::from_u8(bb)?,
            detail: u32::try_from(value).ok()?,
        },
        RecordTag::Pnp => RecordKind::Pnp {
            op: PnpOp::from_u8(a)?,
        },
        RecordTag::Port if (1..=MAX_PORTS).contains(&a) => RecordKind::Port {
            port: a,
            state: PortState::from_u8(bb)?,
            lid: u16::try_from(value).ok()?,
        },
        RecordTag::PolicyChanged if usize::from(a) < crate::policy::Policy::KEYS.len() => {
            RecordKind::PolicyChanged {
                key: a,
                old: u64::from_le_bytes(b[TEXT_AT..TEXT_AT + 8].try_into().ok()?),
                new: value,
            }
        }
        RecordTag::FaultInjected => RecordKind::FaultInjected {
            fault: FaultCode::try_from(u32::from(a)).ok()?,
            count: value as u32,
            port: bb,
            duration_ms: (value >> 32) as u32,
            accepted: flag(c)?,
        },
        // A port the adapter cannot have, a key the policy does not have.
        RecordTag::Port | RecordTag::PolicyChanged => return None,
    })
}
