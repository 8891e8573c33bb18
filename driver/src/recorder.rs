//! The flight recorder: a fixed-capacity ring of what the coordinator did and why.
//!
//! Reserved at start and overwritten oldest-first when full, so recording never allocates
//! and never stops the reset path; `dropped` says how much history was overwritten. A record
//! identical to the newest one (the 1 s health poll, the 10 ms readiness probe of a silent
//! device, a client retrying a refused call) is not written again: the newest record counts
//! it and keeps the time it last happened, so polling cannot push a reset out of the ring.

mod codec;
mod kinds;

use alloc::vec::Vec;
use core::fmt;

pub use codec::{RECORD_BYTES, RECORD_V4_BYTES};
pub use kinds::{RecordKind, RecordTag};

use crate::errors::RefusalCode;
use crate::fault::FaultCode;
use crate::hca::{HwError, HwResult, HwStep, Readiness};
use crate::time::Instant;
use crate::types::{
    Actor, Call, ClientId, Epoch, EventKind, PnpOp, PortState, ResetReason, ShortText,
};

wire_enum! {
    /// What a hardware step found, worded as the administrator needs it: a probe that found
    /// the device still in reset is "not ready", not "ok".
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum HwOutcome {
        Done = 1 => "done",
        /// A reset asserted; the device is left alone before it is probed.
        Asserted = 2 => "asserted",
        Ready = 3 => "ready",
        NotReady = 4 => "not ready",
        /// A health read: no catastrophic error and the counter moved.
        Healthy = 5 => "healthy",
        /// A health read: no catastrophic error, but the counter did not move.
        CounterUnchanged = 6 => "counter unchanged",
        /// A health read found the catastrophic-error buffer set (its word is the detail).
        Catastrophic = 7 => "catastrophic error",
        DeviceError = 8 => "failed: device error",
        Absent = 9 => "failed: device absent",
        Unsupported = 10 => "failed: not supported",
        Timeout = 11 => "failed: bounded wait ran out",
    }
}

impl HwOutcome {
    /// The outcome of a completion; `counter_before` is the health counter as last read,
    /// to tell a live counter from a stalled one.
    pub fn of(result: &HwResult, counter_before: Option<u32>) -> (HwOutcome, u32) {
        match result {
            HwResult::Done | HwResult::Identity(_) => (HwOutcome::Done, 0),
            HwResult::Settle(d) => (
                HwOutcome::Asserted,
                u32::try_from(d.as_ms()).unwrap_or(u32::MAX),
            ),
            HwResult::Readiness(Readiness::Ready) => (HwOutcome::Ready, 0),
            HwResult::Readiness(Readiness::NotReady) => (HwOutcome::NotReady, 0),
            HwResult::Health(s) if s.catastrophic != 0 => (HwOutcome::Catastrophic, s.catastrophic),
            HwResult::Health(s) if counter_before == Some(s.counter) => {
                (HwOutcome::CounterUnchanged, 0)
            }
            HwResult::Health(_) => (HwOutcome::Healthy, 0),
            HwResult::Failed(HwError::DeviceError) => (HwOutcome::DeviceError, 0),
            HwResult::Failed(HwError::Absent) => (HwOutcome::Absent, 0),
            HwResult::Failed(HwError::Unsupported) => (HwOutcome::Unsupported, 0),
            HwResult::Failed(HwError::Timeout) => (HwOutcome::Timeout, 0),
        }
    }

    /// The step did what was asked of it (a not-ready probe and a catastrophic health read
    /// did: they read the device).
    pub const fn is_ok(self) -> bool {
        !matches!(
            self,
            HwOutcome::DeviceError
                | HwOutcome::Absent
                | HwOutcome::Unsupported
                | HwOutcome::Timeout
        )
    }
}

/// One timestamped, sequence-numbered record, standing for `count` identical ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    pub seq: u64,
    /// When it (first) happened.
    pub at: Instant,
    /// When it last happened: `at` unless it repeated.
    pub last_at: Instant,
    /// How many identical records this one stands for (at least 1).
    pub count: u32,
    /// The client's name for a record about a client; the administrator's reason for their
    /// reset or restart; the key at fault of a refused policy; empty otherwise.
    pub name: ShortText,
    pub kind: RecordKind,
    /// Who asked: the administrator whose request this record was written while serving.
    pub by: Actor,
}

impl Record {
    /// A record that happened once.
    pub fn once(seq: u64, at: Instant, name: ShortText, kind: RecordKind) -> Self {
        Record {
            seq,
            at,
            last_at: at,
            count: 1,
            name,
            kind,
            by: Actor::Nobody,
        }
    }

    /// The client as a person reads it: `'ipoib' (#3.0)`, or `#3.0` when the name is not
    /// known.
    fn who(&self, client: ClientId) -> Who<'_> {
        Who {
            client,
            name: &self.name,
        }
    }
}

struct Who<'a> {
    client: ClientId,
    name: &'a ShortText,
}

impl fmt::Display for Who<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name.as_str() {
            "" => write!(f, "{}", self.client),
            name => write!(f, "'{name}' ({})", self.client),
        }
    }
}

impl fmt::Display for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{:<5} {:>14}  ", self.seq, self.at)?;
        self.kind_text(f)?;
        if self.by != Actor::Nobody {
            write!(f, "  [by {}]", self.by)?;
        }
        if self.count > 1 {
            write!(f, "  (x{}, last {})", self.count, self.last_at)?;
        }
        Ok(())
    }
}

/// What a record says, without its number, time, actor or repeat count.
#[derive(Debug)]
pub struct What<'a>(&'a Record);

impl fmt::Display for What<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.kind_text(f)
    }
}

impl Record {
    /// What the record says, as its line in the log says it.
    pub fn what(&self) -> What<'_> {
        What(self)
    }

    fn kind_text(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.describe(&mut Phrase(f))
    }

    /// What the record says, to `d`: each field as JSON shows it, and the phrase of its line
    /// in the log. One arm per kind, so a kind's words and its fields are written together.
    pub fn describe<D: Describe>(&self, d: &mut D) -> fmt::Result {
        match &self.kind {
            RecordKind::Transition { from, to } => {
                d.word("from", from.as_str());
                d.word("to", to.as_str());
                d.phrase(format_args!("state {from} -> {to}"))
            }
            RecordKind::ResetStarted {
                epoch,
                reason,
                planned,
            } => describe_started(d, *epoch, *reason, *planned),
            RecordKind::ResetJoined { reason } => {
                d.word("reason", reason.as_str());
                d.phrase(format_args!("{reason} joined the current reset"))
            }
            RecordKind::FollowUpScheduled { reason } => {
                d.word("reason", reason.as_str());
                d.phrase(format_args!(
                    "{reason} during restore: one follow-up reset scheduled"
                ))
            }
            RecordKind::ResetFinished { epoch, outcome } => {
                d.number("epoch", Some(epoch.0));
                d.word("outcome", outcome.as_str());
                d.phrase(format_args!("reset finished: {epoch} {}", outcome.as_str()))
            }
            RecordKind::ResetFailed { epoch, error } => {
                d.number("epoch", Some(epoch.0));
                d.word("error", error.as_str());
                d.phrase(format_args!("reset of {epoch} failed: {}", error.as_str()))
            }
            RecordKind::Event {
                client,
                event,
                epoch,
            } => {
                d.client("client", Some(*client));
                d.word("event", event.as_str());
                d.number("epoch", Some(epoch.0));
                d.phrase(format_args!("{event} -> {} ({epoch})", self.who(*client)))
            }
            RecordKind::Call { client, call } => self.describe_call(d, *client, *call),
            RecordKind::Refused { client, call, code } => {
                self.describe_refused(d, *client, *call, *code)
            }
            RecordKind::Unresponsive { client, aborts } => {
                self.describe_unresponsive(d, *client, *aborts)
            }
            RecordKind::Throttled { client } => {
                d.client("client", Some(*client));
                d.phrase(format_args!(
                    "client {} over its request limit: reset request ignored",
                    self.who(*client)
                ))
            }
            RecordKind::Vetoed { client, reason } => {
                d.client("client", Some(*client));
                d.text("reason", Some(reason.as_str()));
                d.phrase(format_args!(
                    "client {} vetoed the planned reset: {reason}",
                    self.who(*client)
                ))
            }
            RecordKind::Hw {
                step,
                outcome,
                detail,
            } => describe_hw(d, *step, *outcome, *detail),
            RecordKind::Pnp { op } => {
                d.word("op", op.as_str());
                d.phrase(format_args!("pnp {}", op.as_str()))
            }
            RecordKind::Port { port, state, lid } => describe_port(d, *port, *state, *lid),
            RecordKind::PolicyChanged { key, old, new } => describe_policy(d, *key, *old, *new),
            RecordKind::FaultInjected {
                fault,
                count,
                port,
                duration_ms,
                accepted,
            } => describe_fault(d, *fault, *count, (*port, *duration_ms), *accepted),
        }
    }

    /// A barrier member past its deadline: forced, or the planned reset called off.
    fn describe_unresponsive<D: Describe>(
        &self,
        d: &mut D,
        client: ClientId,
        aborts: bool,
    ) -> fmt::Result {
        d.client("client", Some(client));
        d.flag("aborts", aborts);
        let then = match aborts {
            true => "the planned reset is called off (abort_on_unresponsive)",
            false => "forced",
        };
        let who = self.who(client);
        d.phrase(format_args!(
            "client {who} unresponsive at deadline: {then}"
        ))
    }

    /// A call: by its client, or (an administrator's) with the reason given.
    fn describe_call<D: Describe>(
        &self,
        d: &mut D,
        client: Option<ClientId>,
        call: Call,
    ) -> fmt::Result {
        let reason = Some(self.name.as_str()).filter(|n| !n.is_empty());
        match client {
            Some(c) => {
                d.client("client", Some(c));
                d.word("call", call.as_str());
                d.phrase(format_args!("{} by {}", call.as_str(), self.who(c)))
            }
            None => {
                d.word("call", call.as_str());
                d.text("reason", reason);
                match reason {
                    None => d.phrase(format_args!("{}", call.as_str())),
                    Some(why) => d.phrase(format_args!("{}: \"{why}\"", call.as_str())),
                }
            }
        }
    }

    /// A refused call; an administrator's refused policy names the key at fault.
    fn describe_refused<D: Describe>(
        &self,
        d: &mut D,
        client: Option<ClientId>,
        call: Call,
        code: RefusalCode,
    ) -> fmt::Result {
        d.client("client", client);
        d.word("call", call.as_str());
        d.word("code", code.as_str());
        let (call, code) = (call.as_str(), code.as_str());
        match client {
            Some(c) => d.phrase(format_args!("{call} by {} refused: {code}", self.who(c))),
            None if self.name.as_str().is_empty() => {
                d.phrase(format_args!("{call} refused: {code}"))
            }
            None => {
                d.text("key", Some(self.name.as_str()));
                d.phrase(format_args!("{call} refused: {code} ({})", self.name))
            }
        }
    }
}

/// A reset begun, and why.
fn describe_started<D: Describe>(
    d: &mut D,
    epoch: Epoch,
    reason: ResetReason,
    planned: bool,
) -> fmt::Result {
    d.number("epoch", Some(epoch.0));
    d.word("reason", reason.as_str());
    d.flag("planned", planned);
    let planned = if planned { " (planned)" } else { "" };
    d.phrase(format_args!("reset of {epoch} started: {reason}{planned}"))
}

/// A port's new state, and its LID once Active.
fn describe_port<D: Describe>(d: &mut D, port: u8, state: PortState, lid: u16) -> fmt::Result {
    d.number("port", Some(u64::from(port)));
    d.state("state", state.as_str());
    d.number("lid", Some(u64::from(lid)));
    match state {
        PortState::Active => d.phrase(format_args!("port {port} active, lid {lid}")),
        _ => d.phrase(format_args!("port {port} {}", state.as_str())),
    }
}

/// A policy key an administrator changed, by its name.
fn describe_policy<D: Describe>(d: &mut D, key: u8, old: u64, new: u64) -> fmt::Result {
    let name = crate::policy::Policy::KEYS
        .get(usize::from(key))
        .copied()
        .unwrap_or("?");
    d.word("key", name);
    d.number("old", Some(old));
    d.number("new", Some(new));
    d.phrase(format_args!("policy {name}: {old} -> {new}"))
}

/// A hardware step, with the syndrome of a catastrophic read or the settle of an assert.
fn describe_hw<D: Describe>(
    d: &mut D,
    step: HwStep,
    outcome: HwOutcome,
    detail: u32,
) -> fmt::Result {
    d.word("step", step.as_str());
    d.word("outcome", outcome.as_str());
    d.flag("ok", outcome.is_ok());
    d.phrase(format_args!("hw {} {}", step.as_str(), outcome.as_str()))?;
    match outcome {
        HwOutcome::Catastrophic => {
            d.hex("syndrome", detail);
            d.phrase(format_args!(" (syndrome {detail:#010x})"))
        }
        HwOutcome::Asserted => {
            d.number("settle_ms", Some(u64::from(detail)));
            d.phrase(format_args!(" (settle {detail} ms)"))
        }
        _ => Ok(()),
    }
}

/// An injected fault: what it took (a count, a port for how long), and whether the device
/// took it.
fn describe_fault<D: Describe>(
    d: &mut D,
    fault: FaultCode,
    count: u32,
    (port, duration_ms): (u8, u32),
    accepted: bool,
) -> fmt::Result {
    d.word("fault", fault.as_str());
    d.number("fault_count", (count != 0).then_some(u64::from(count)));
    d.number("port", (port != 0).then_some(u64::from(port)));
    d.number("duration_ms", (port != 0).then_some(u64::from(duration_ms)));
    d.flag("accepted", accepted);
    d.phrase(format_args!("fault {} injected", fault.as_str()))?;
    if count != 0 {
        d.phrase(format_args!(", count {count}"))?;
    }
    if port != 0 {
        d.phrase(format_args!(", port {port} for {duration_ms} ms"))?;
    }
    if !accepted {
        d.phrase(format_args!(": refused by the device"))?;
    }
    Ok(())
}

/// What a record says, to whoever reads it ([`Record::describe`]): its fields, named as JSON
/// names them, and the pieces of its phrase, which together are its line in the log.
pub trait Describe {
    /// The next piece of the record's phrase.
    fn phrase(&mut self, text: fmt::Arguments<'_>) -> fmt::Result;
    /// A name from a vocabulary (a state, a reason, a call).
    fn word(&mut self, name: &'static str, value: &'static str);
    /// A port's state (JSON spells states one way everywhere).
    fn state(&mut self, name: &'static str, value: &'static str);
    /// A number; `None` where the record does not have it this time.
    fn number(&mut self, name: &'static str, value: Option<u64>);
    fn flag(&mut self, name: &'static str, value: bool);
    /// The client the record is about (the record's name names it), or none.
    fn client(&mut self, name: &'static str, value: Option<ClientId>);
    fn text(&mut self, name: &'static str, value: Option<&str>);
    /// A 32-bit word best read in hex (a syndrome).
    fn hex(&mut self, name: &'static str, value: u32);
}

/// The phrase alone: the record's line.
struct Phrase<'a, 'b>(&'a mut fmt::Formatter<'b>);

impl Describe for Phrase<'_, '_> {
    fn phrase(&mut self, text: fmt::Arguments<'_>) -> fmt::Result {
        self.0.write_fmt(text)
    }
    fn word(&mut self, _: &'static str, _: &'static str) {}
    fn state(&mut self, _: &'static str, _: &'static str) {}
    fn number(&mut self, _: &'static str, _: Option<u64>) {}
    fn flag(&mut self, _: &'static str, _: bool) {}
    fn client(&mut self, _: &'static str, _: Option<ClientId>) {}
    fn text(&mut self, _: &'static str, _: Option<&str>) {}
    fn hex(&mut self, _: &'static str, _: u32) {}
}

/// Fixed-capacity ring of records.
#[derive(Debug, Clone)]
pub struct FlightRecorder {
    /// Every slot is there from the start (blank until written), so a record is written in
    /// place: no push, no copy through the stack, no page touched for the first time.
    ring: Vec<Record>,
    /// Slots written so far, up to the ring's length.
    len: usize,
    /// Index the next record is written to.
    head: usize,
    next_seq: u64,
    dropped: u64,
    /// Records folded into the newest one because they repeated it.
    coalesced: u64,
    /// Who every record written now is for ([`FlightRecorder::set_actor`]).
    actor: Actor,
}

impl FlightRecorder {
    /// Reserves every slot now and writes each once, so that no page of the ring faults in
    /// later on the reset path (docs/design.md §6); `capacity` of zero is raised to one.
    pub fn new(capacity: usize) -> Self {
        match Self::try_new(capacity) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        }
    }

    /// No ring yet: the coordinator reserves it ([`FlightRecorder::reserve`]) before anything
    /// is recorded (a record written to an empty ring would index past it).
    pub(crate) const fn empty() -> Self {
        FlightRecorder {
            ring: Vec::new(),
            len: 0,
            head: 0,
            next_seq: 0,
            dropped: 0,
            coalesced: 0,
            actor: Actor::Nobody,
        }
    }

    /// The ring of an [`FlightRecorder::empty`] one, reserved in place from `pool`.
    pub(crate) fn reserve(
        &mut self,
        pool: &impl crate::reserve::Reserve,
        capacity: usize,
    ) -> Result<(), crate::reserve::OutOfMemory> {
        let blank = Record::once(
            0,
            Instant::ZERO,
            ShortText::EMPTY,
            RecordKind::Pnp {
                op: PnpOp::ReportChildrenMissing,
            },
        );
        self.ring = pool.filled("recorder_capacity", capacity.max(1), blank)?;
        Ok(())
    }

    /// [`FlightRecorder::new`], its allocation fallible: a refusal names `recorder_capacity`.
    pub fn try_new(capacity: usize) -> Result<Self, crate::reserve::OutOfMemory> {
        let mut r = Self::empty();
        r.reserve(&crate::reserve::Heap, capacity)?;
        Ok(r)
    }

    /// Every record from now on says it was written for `actor`, until set back to
    /// [`Actor::Nobody`]: a host serving an administrator's request sets it for the request.
    pub fn set_actor(&mut self, actor: Actor) {
        self.actor = actor;
    }

    /// Records `kind` about `name` (see [`Record::name`]) and returns its sequence number;
    /// a repeat of the newest record is counted in it and returns its number.
    pub fn record(&mut self, at: Instant, name: &ShortText, kind: RecordKind) -> u64 {
        if let Some(seq) = self.repeat(at, name, |k| *k == kind) {
            return seq;
        }
        let slot = self.next_slot(at, name);
        slot.kind = kind;
        Self::written(slot)
    }

    /// [`FlightRecorder::record`] of an event sent to a client. The reset's fan-out
    /// records one per client: taking the fields, not a [`RecordKind`] built by the caller,
    /// lets them be stored straight into the slot (a kind built on the stack and copied
    /// stalls on store forwarding, which was a third of a reset's cost).
    pub fn record_event(
        &mut self,
        at: Instant,
        name: &ShortText,
        client: ClientId,
        event: EventKind,
        epoch: Epoch,
    ) -> u64 {
        let same = |k: &RecordKind| {
            matches!(*k, RecordKind::Event { client: c, event: e, epoch: p }
                if c == client && e == event && p == epoch)
        };
        if let Some(seq) = self.repeat(at, name, same) {
            return seq;
        }
        let slot = self.next_slot(at, name);
        slot.kind = RecordKind::Event {
            client,
            event,
            epoch,
        };
        Self::written(slot)
    }

    /// [`FlightRecorder::record`] of a call, field by field as [`Self::record_event`].
    pub fn record_call(
        &mut self,
        at: Instant,
        name: &ShortText,
        client: ClientId,
        call: Call,
    ) -> u64 {
        let same = |k: &RecordKind| {
            matches!(*k, RecordKind::Call { client: Some(c), call: l }
                if c == client && l == call)
        };
        if let Some(seq) = self.repeat(at, name, same) {
            return seq;
        }
        let slot = self.next_slot(at, name);
        slot.kind = RecordKind::Call {
            client: Some(client),
            call,
        };
        Self::written(slot)
    }

    /// Counts a repeat of the newest record in it (its sequence number returned).
    #[inline(always)]
    fn repeat(
        &mut self,
        at: Instant,
        name: &ShortText,
        same: impl FnOnce(&RecordKind) -> bool,
    ) -> Option<u64> {
        let newest = self.head.checked_sub(1).unwrap_or(self.ring.len() - 1);
        if self.len == 0 {
            return None;
        }
        let newest = &mut self.ring[newest];
        if !(same(&newest.kind) && newest.name == *name && newest.by == self.actor) {
            return None;
        }
        newest.count = newest.count.saturating_add(1);
        newest.last_at = at;
        self.coalesced += 1;
        Some(newest.seq)
    }

    /// The slot the next record goes to, its head written.
    #[inline(always)]
    fn next_slot(&mut self, at: Instant, name: &ShortText) -> &mut Record {
        let seq = self.next_seq;
        self.next_seq += 1;
        if self.len < self.ring.len() {
            self.len += 1;
        } else {
            self.dropped += 1;
        }
        let head = self.head;
        self.head += 1;
        if self.head == self.ring.len() {
            self.head = 0;
        }
        let slot = &mut self.ring[head];
        slot.seq = seq;
        slot.at = at;
        slot.last_at = at;
        slot.count = 1;
        slot.name = *name;
        slot.by = self.actor;
        slot
    }

    fn written(slot: &Record) -> u64 {
        log::trace!("{slot}");
        slot.seq
    }

    pub fn capacity(&self) -> usize {
        self.ring.len()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Records overwritten because the ring was full.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Records counted in the newest one instead of written, because they repeated it.
    pub fn coalesced(&self) -> u64 {
        self.coalesced
    }

    /// Sequence number the next record will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Oldest to newest.
    pub fn iter(&self) -> impl Iterator<Item = &Record> + '_ {
        // Before the ring first fills, the records are the first `len` slots.
        let (split, end) = if self.len < self.ring.len() {
            (0, self.len)
        } else {
            (self.head, self.ring.len())
        };
        self.ring[split..end]
            .iter()
            .chain(self.ring[..split].iter())
    }

    /// Records with `seq >= from`, oldest first; what was overwritten is simply absent.
    pub fn since(&self, from: u64) -> impl Iterator<Item = &Record> + '_ {
        self.iter().filter(move |r| r.seq >= from)
    }
}

#[cfg(test)]
mod tests;
