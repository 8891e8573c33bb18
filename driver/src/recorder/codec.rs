//! The records' wire encodings (READ_LOG): version 5's 128 bytes, which carry the client's
//! name, the repeat count and the last time, and the 64 bytes every older caller was given.

use super::kinds::{Slots, WireSlots};
use super::{Record, RecordKind, RecordTag};
use crate::time::Instant;
use crate::types::{Actor, ShortText};

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

impl Record {
    /// Version 5, little-endian: `seq u64, at_us u64, tag u8, a u8, b u8, c u8, count u32,
    /// client u64, value u64, last_at_us u64, name [u8; 32], text [u8; 32], actor [u8; 8],
    /// reserved [u8; 8]`. A hardware step's `b` is its [`HwOutcome`] and `value` its detail;
    /// a policy change's old value is the text's first 8 bytes; the actor is who asked
    /// (zero: nobody, as every record before version 7 says).
    pub fn encode(&self) -> [u8; RECORD_BYTES] {
        let mut out = [0u8; RECORD_BYTES];
        let f = self.kind.slots();
        self.put_head(&mut out, &f);
        out[40..48].copy_from_slice(&self.last_at.as_us().to_le_bytes());
        out[NAME_AT..NAME_AT + ShortText::CAPACITY].copy_from_slice(self.name.as_bytes());
        if let Some(text) = f.text {
            out[TEXT_AT..TEXT_AT + ShortText::CAPACITY].copy_from_slice(text.as_bytes());
        }
        if let Some(word) = f.text_word {
            out[TEXT_AT..TEXT_AT + 8].copy_from_slice(&word.to_le_bytes());
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
        let mut f = self.kind.slots();
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

    fn put_head(&self, out: &mut [u8], f: &Slots<'_>) {
        out[0..8].copy_from_slice(&self.seq.to_le_bytes());
        out[8..16].copy_from_slice(&self.at.as_us().to_le_bytes());
        out[16..20].copy_from_slice(&[self.kind.tag() as u8, f.a, f.b, f.c]);
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
    let slots = WireSlots {
        a: b[17],
        b: b[18],
        c: b[19],
        client,
        value,
        text: text_at(b, TEXT_AT),
        text_word: u64::from_le_bytes(b[TEXT_AT..TEXT_AT + 8].try_into().ok()?),
    };
    RecordKind::from_slots(RecordTag::from_u8(b[16])?, &slots)
}
