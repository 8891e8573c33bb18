//! The flight recorder: a fixed-capacity ring of what the coordinator did and why.
//!
//! Reserved at start and overwritten oldest-first when full, so recording never allocates
//! and never stops the reset path; `dropped` says how much history was overwritten. A record
//! identical to the newest one (the 1 s health poll, the 10 ms readiness probe of a silent
//! device, a client retrying a refused call) is not written again: the newest record counts
//! it and keeps the time it last happened, so polling cannot push a reset out of the ring.

mod codec;

use alloc::vec::Vec;
use core::fmt;

pub use codec::{RECORD_BYTES, RECORD_V4_BYTES};

use crate::errors::RefusalCode;
use crate::fault::FaultCode;
use crate::hca::{HwError, HwResult, HwStep, Readiness};
use crate::time::Instant;
use crate::types::{Actor, PortState, VetoReason};
use crate::types::{Call, PnpOp, ShortText, State};
use crate::types::{ClientId, Epoch, EventKind, FailReason, ResetOutcome, ResetReason};

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

/// What happened. The client's name, where there is a client, is the record's
/// [`Record::name`].
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
    /// A call; an administrator's reset or restart keeps the reason they gave as the name.
    Call {
        client: Option<ClientId>,
        call: Call,
    },
    /// A call refused; an administrator's refused policy keeps the key at fault as the name.
    Refused {
        client: Option<ClientId>,
        call: Call,
        code: RefusalCode,
    },
    /// A barrier member passed its deadline; the name survives the client's unregister.
    /// `aborts`: the policy calls the planned reset off for it (`abort_on_unresponsive`)
    /// instead of forcing it through.
    Unresponsive {
        client: ClientId,
        aborts: bool,
    },
    /// A client's reset request refused by its `client_request_limit`: nothing happened.
    Throttled {
        client: ClientId,
    },
    /// A queried client refused a planned reset, and why.
    Vetoed {
        client: ClientId,
        reason: VetoReason,
    },
    /// A hardware step completed; `detail` is the catastrophic word of a health read, or
    /// the settle time in ms of an asserted reset.
    Hw {
        step: HwStep,
        outcome: HwOutcome,
        detail: u32,
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
    /// An administrator changed a policy key (its index in `Policy::KEYS`): one record per
    /// key whose value changed.
    PolicyChanged {
        key: u8,
        old: u64,
        new: u64,
    },
    /// An administrator injected a fault (the simulator; `accepted` false: the device
    /// refused it, as hardware refuses every one).
    FaultInjected {
        fault: FaultCode,
        count: u32,
        port: u8,
        duration_ms: u32,
        accepted: bool,
    },
}

wire_enum! {
    /// What kind of record it is: its tag on the wire and its name (JSON's `kind`, `hcactl
    /// log --kind`), once. [`RecordKind::tag`] maps each kind to its own, exhaustively.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum RecordTag {
        Transition = 1 => "transition",
        ResetStarted = 2 => "reset_started",
        ResetJoined = 3 => "reset_joined",
        FollowUpScheduled = 4 => "follow_up",
        ResetFinished = 5 => "reset_finished",
        ResetFailed = 6 => "reset_failed",
        Event = 7 => "event",
        Call = 8 => "call",
        Refused = 9 => "refused",
        Unresponsive = 10 => "unresponsive",
        Throttled = 13 => "throttled",
        Vetoed = 14 => "vetoed",
        Hw = 11 => "hw",
        Pnp = 12 => "pnp",
        Port = 15 => "port",
        PolicyChanged = 16 => "policy_changed",
        FaultInjected = 17 => "fault_injected",
    }
}

impl RecordKind {
    /// Its tag: its number on the wire and its name.
    pub const fn tag(&self) -> RecordTag {
        match self {
            RecordKind::Transition { .. } => RecordTag::Transition,
            RecordKind::ResetStarted { .. } => RecordTag::ResetStarted,
            RecordKind::ResetJoined { .. } => RecordTag::ResetJoined,
            RecordKind::FollowUpScheduled { .. } => RecordTag::FollowUpScheduled,
            RecordKind::ResetFinished { .. } => RecordTag::ResetFinished,
            RecordKind::ResetFailed { .. } => RecordTag::ResetFailed,
            RecordKind::Event { .. } => RecordTag::Event,
            RecordKind::Call { .. } => RecordTag::Call,
            RecordKind::Refused { .. } => RecordTag::Refused,
            RecordKind::Unresponsive { .. } => RecordTag::Unresponsive,
            RecordKind::Throttled { .. } => RecordTag::Throttled,
            RecordKind::Vetoed { .. } => RecordTag::Vetoed,
            RecordKind::Hw { .. } => RecordTag::Hw,
            RecordKind::Pnp { .. } => RecordTag::Pnp,
            RecordKind::Port { .. } => RecordTag::Port,
            RecordKind::PolicyChanged { .. } => RecordTag::PolicyChanged,
            RecordKind::FaultInjected { .. } => RecordTag::FaultInjected,
        }
    }

    /// The client the record is about, if any.
    pub const fn client(&self) -> Option<ClientId> {
        match *self {
            RecordKind::Event { client, .. }
            | RecordKind::Unresponsive { client, .. }
            | RecordKind::Throttled { client }
            | RecordKind::Vetoed { client, .. } => Some(client),
            RecordKind::Call { client, .. } | RecordKind::Refused { client, .. } => client,
            _ => None,
        }
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
            } => write!(f, "{event} -> {} ({epoch})", self.who(*client)),
            RecordKind::Call { client, call } => match client {
                Some(c) => write!(f, "{} by {}", call.as_str(), self.who(*c)),
                None if self.name.as_str().is_empty() => write!(f, "{}", call.as_str()),
                None => write!(f, "{}: \"{}\"", call.as_str(), self.name),
            },
            RecordKind::Refused { client, call, code } => match client {
                Some(c) => write!(
                    f,
                    "{} by {} refused: {}",
                    call.as_str(),
                    self.who(*c),
                    code.as_str()
                ),
                None if self.name.as_str().is_empty() => {
                    write!(f, "{} refused: {}", call.as_str(), code.as_str())
                }
                // A refused policy: the key at fault.
                None => write!(
                    f,
                    "{} refused: {} ({})",
                    call.as_str(),
                    code.as_str(),
                    self.name
                ),
            },
            RecordKind::Unresponsive { client, aborts } => write!(
                f,
                "client {} unresponsive at deadline: {}",
                self.who(*client),
                if *aborts {
                    "the planned reset is called off (abort_on_unresponsive)"
                } else {
                    "forced"
                }
            ),
            RecordKind::Throttled { client } => write!(
                f,
                "client {} over its request limit: reset request ignored",
                self.who(*client)
            ),
            RecordKind::Vetoed { client, reason } => write!(
                f,
                "client {} vetoed the planned reset: {reason}",
                self.who(*client)
            ),
            RecordKind::Hw {
                step,
                outcome,
                detail,
            } => {
                write!(f, "hw {} {}", step.as_str(), outcome.as_str())?;
                match outcome {
                    HwOutcome::Catastrophic => write!(f, " (syndrome {detail:#010x})"),
                    HwOutcome::Asserted => write!(f, " (settle {detail} ms)"),
                    _ => Ok(()),
                }
            }
            RecordKind::Pnp { op } => write!(f, "pnp {}", op.as_str()),
            RecordKind::Port { port, state, lid } => match state {
                PortState::Active => write!(f, "port {port} active, lid {lid}"),
                _ => write!(f, "port {port} {}", state.as_str()),
            },
            RecordKind::PolicyChanged { key, old, new } => {
                let name = crate::policy::Policy::KEYS
                    .get(usize::from(*key))
                    .copied()
                    .unwrap_or("?");
                write!(f, "policy {name}: {old} -> {new}")
            }
            RecordKind::FaultInjected {
                fault,
                count,
                port,
                duration_ms,
                accepted,
            } => {
                write!(f, "fault {} injected", fault.as_str())?;
                if *count != 0 {
                    write!(f, ", count {count}")?;
                }
                if *port != 0 {
                    write!(f, ", port {port} for {duration_ms} ms")?;
                }
                if !*accepted {
                    f.write_str(": refused by the device")?;
                }
                Ok(())
            }
        }
    }
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
