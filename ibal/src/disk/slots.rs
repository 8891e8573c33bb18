//! The command slots of one SRP initiator, without any I/O: which I/O each slot holds, which
//! send of it the target may still answer, and what an answer means. The disk drives it
//! from its completions, its RESET and its fast path failover; the failover model check
//! (tests/tests/suites/failover_model.rs) drives the same table through every interleaving of a
//! late answer, an abort and an adapter's reset.
//!
//! A command's tag is its slot and the generation of its send. A slot is reused only once
//! nothing the target holds can name it: after its answer, after the target answered the
//! ABORT TASK of a command given up, or after the connection went (RESET, a port loss). So a
//! late answer never lands in another command's buffer, and a late write never reads
//! another command's data.

use std::collections::VecDeque;
use std::vec::Vec;

use hcabus::{Duration, Instant};

use crate::io::IoRequest;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotState {
    Free,
    /// Waiting to be sent: new, held during a reset, or taken back for re-issue.
    Queued,
    InFlight,
    /// Given up (fast path failover, or past the command bound): the target was told to
    /// abort it, and the slot waits for that answer. Its I/O is another path's now, or, when
    /// `requeue` says so, still this table's: it goes out again once the abort is answered
    /// or the connection is gone (nothing of the old send can run at the target then).
    Aborting,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    state: SlotState,
    req: IoRequest,
    /// Bumped on every send: an answer carries it, so an answer to an earlier send of the
    /// slot is known for what it is.
    generation: u32,
    /// When its command was last sent.
    sent_at: Instant,
    /// That send completed: the target's side took the command (a reliable connection
    /// completes a send once the responder acknowledged it).
    acked: bool,
    /// When it was given up (its ABORT TASK sent).
    aborted_at: Instant,
    /// A probe of a path given up (one command at a time): its answer, even late, measures
    /// the path.
    probe: bool,
    /// Given up with no other path to take its I/O: this table still owes it, and sends it
    /// again once its abort is answered or the connection is gone.
    requeue: bool,
    /// Times its I/O was given up to be sent again here (past the command bound).
    strikes: u8,
}

impl Slot {
    /// Its I/O is owed by this table.
    fn owes(&self) -> bool {
        match self.state {
            SlotState::Queued | SlotState::InFlight => true,
            SlotState::Aborting => self.requeue,
            SlotState::Free => false,
        }
    }
}

/// The tag of send `generation` of slot `slot`.
pub fn tag(slot: usize, generation: u32) -> u64 {
    ((slot as u64) << 32) | u64::from(generation)
}

fn untag(tag: u64) -> (usize, u32) {
    ((tag >> 32) as usize, tag as u32)
}

/// What an answer from the target means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The answer to the command in flight in `slot`, sent at `sent_at`: `req` completes
    /// upward, once.
    Complete {
        slot: usize,
        req: IoRequest,
        sent_at: Instant,
    },
    /// An answer to a send this disk no longer waits for (taken back at a reset, given up
    /// by failover or the command bound): discarded, for the I/O is re-issued or already
    /// done. The answer to a probe, or to a command given up to be sent again here, still
    /// says when that send went, and so how long the path took (`sent_at`): each send has
    /// its own tag, so it is no ambiguous sample.
    Late { sent_at: Option<Instant> },
    /// The target's answer to the ABORT TASK of a command given up: its slot is free.
    AbortAnswered { req: IoRequest },
    /// A tag no send of this disk ever carried.
    Unknown,
}

/// A take-back bug planted on purpose (feature `mutants`, tests only), to show the
/// failover model check catches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SlotMutant {
    /// A command given up frees its slot at once instead of waiting for its abort's answer:
    /// the slot's buffer is reused while the target may still write or read it.
    FreeOnGiveUp,
    /// An answer to a command given up completes it (its I/O went to another path).
    CompleteGivenUp,
    /// A given-up write fences nothing: a newer write to its block may go out before it is
    /// known dead.
    NoFence,
    /// A command given up to be sent again here is freed when its abort is answered: its
    /// I/O is owed by nobody.
    DropRequeued,
    /// A command given up to be sent again here goes out again at once, while the target
    /// may still run the send it was told to abort.
    ResendAtOnce,
}

impl SlotMutant {
    pub const ALL: [SlotMutant; 5] = [
        SlotMutant::FreeOnGiveUp,
        SlotMutant::CompleteGivenUp,
        SlotMutant::NoFence,
        SlotMutant::DropRequeued,
        SlotMutant::ResendAtOnce,
    ];
}

/// The slots of one initiator: reserved at creation, never grown.
#[derive(Debug, Clone)]
pub struct SlotTable {
    slots: Vec<Slot>,
    /// Queued slots in the order they go out.
    queue: VecDeque<u16>,
    in_flight: u16,
    aborting: u16,
    scratch: Vec<u16>,
    #[cfg(feature = "mutants")]
    mutant: Option<SlotMutant>,
}

impl SlotTable {
    /// `n` slots (at most `u16::MAX`).
    pub fn new(n: usize) -> Self {
        let n = n.min(usize::from(u16::MAX));
        let blank = Slot {
            state: SlotState::Free,
            req: IoRequest {
                id: 0,
                lba: 0,
                write: false,
                blocks: 0,
                checksum: 0,
                submitted_at: Instant::ZERO,
            },
            generation: 0,
            sent_at: Instant::ZERO,
            acked: false,
            aborted_at: Instant::ZERO,
            probe: false,
            requeue: false,
            strikes: 0,
        };
        SlotTable {
            slots: std::vec![blank; n],
            queue: VecDeque::with_capacity(n),
            in_flight: 0,
            aborting: 0,
            scratch: Vec::with_capacity(n),
            #[cfg(feature = "mutants")]
            mutant: None,
        }
    }

    /// Whether the send tagged `tag` may still touch its slot's buffer: it is in flight, or
    /// given up and its abort not answered. What the target runs must always be one of these.
    pub fn holds(&self, tag: u64) -> bool {
        let (i, generation) = untag(tag);
        self.slots.get(i).is_some_and(|s| {
            s.generation == generation
                && matches!(s.state, SlotState::InFlight | SlotState::Aborting)
        })
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    pub fn in_flight(&self) -> u16 {
        self.in_flight
    }

    /// Commands given up whose abort the target has not answered yet.
    pub fn aborting(&self) -> u16 {
        self.aborting
    }

    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Target answers this table may still receive: one per command in flight, two per
    /// command given up (its own late answer and the abort's). The request limit bounds it.
    pub fn answers_owed(&self) -> u32 {
        u32::from(self.in_flight) + 2 * u32::from(self.aborting)
    }

    pub fn has_room(&self) -> bool {
        self.slots.iter().any(|s| s.state == SlotState::Free)
    }

    /// Whether the table still owes `id` a completion (queued, in flight, or given up to be
    /// sent again here; not a command given up to another path).
    pub fn tracks(&self, id: u64) -> bool {
        self.slots.iter().any(|s| s.owes() && s.req.id == id)
    }

    /// Puts `req` in a free slot at the back of the send queue; `None` when every slot is
    /// taken.
    pub fn admit(&mut self, req: IoRequest) -> Option<usize> {
        let i = self.slots.iter().position(|s| s.state == SlotState::Free)?;
        self.slots[i].state = SlotState::Queued;
        self.slots[i].req = req;
        self.slots[i].probe = false;
        self.slots[i].strikes = 0;
        self.queue.push_back(i as u16);
        Some(i)
    }

    /// The command in `slot` is a probe of its path (see [`Answer::Late`]).
    pub fn mark_probe(&mut self, slot: usize) {
        if let Some(s) = self.slots.get_mut(slot) {
            s.probe = true;
        }
    }

    /// The command that goes out next: its slot, the tag its send carries, its I/O.
    pub fn next_send(&self) -> Option<(usize, u64, IoRequest)> {
        let i = usize::from(*self.queue.front()?);
        let s = &self.slots[i];
        Some((i, tag(i, s.generation.wrapping_add(1)), s.req))
    }

    /// The command [`SlotTable::next_send`] named went out at `now`.
    pub fn sent(&mut self, now: Instant) {
        let Some(i) = self.queue.pop_front() else {
            return;
        };
        let s = &mut self.slots[usize::from(i)];
        s.state = SlotState::InFlight;
        s.generation = s.generation.wrapping_add(1);
        s.sent_at = now;
        s.acked = false;
        self.in_flight += 1;
    }

    /// The send of the command in `slot` completed: the target has it.
    pub fn send_completed(&mut self, slot: usize) {
        if let Some(s) = self.slots.get_mut(slot) {
            if matches!(s.state, SlotState::InFlight | SlotState::Aborting) {
                s.acked = true;
            }
        }
    }

    /// What the target's answer tagged `tag` means; `aborts` when it answers an ABORT TASK.
    pub fn answer(&mut self, tag: u64, aborts: bool) -> Answer {
        let complete_given_up = self.planted(SlotMutant::CompleteGivenUp);
        let drop_requeued = self.planted(SlotMutant::DropRequeued);
        let (i, generation) = untag(tag);
        let Some(s) = self.slots.get_mut(i) else {
            return Answer::Unknown;
        };
        if generation == 0 || generation > s.generation {
            return Answer::Unknown;
        }
        let current = generation == s.generation;
        let complete = Answer::Complete {
            slot: i,
            req: s.req,
            sent_at: s.sent_at,
        };
        match (s.state, current, aborts) {
            (SlotState::InFlight, true, false) => {
                s.state = SlotState::Free;
                self.in_flight -= 1;
                complete
            }
            (SlotState::Aborting, true, false) if complete_given_up => {
                self.complete_given_up(i);
                complete
            }
            (SlotState::Aborting, true, true) => {
                self.aborting -= 1;
                let req = s.req;
                if core::mem::take(&mut s.requeue) && !drop_requeued {
                    // Nothing of the old send can run now: it goes out again, first.
                    s.state = SlotState::Queued;
                    self.queue.push_front(i as u16);
                } else {
                    s.state = SlotState::Free;
                }
                Answer::AbortAnswered { req }
            }
            // No abort was sent for that send.
            (_, _, true) => Answer::Unknown,
            (SlotState::Aborting, true, false) => Answer::Late {
                sent_at: (s.probe || s.requeue).then_some(s.sent_at),
            },
            _ => Answer::Late { sent_at: None },
        }
    }

    /// The send time of the newest command `rule` gives up at `now`: every command in
    /// flight sent no later goes with it (they are older, and overtaken too).
    fn give_up_cutoff(&self, now: Instant, rule: &GiveUpRule) -> Option<Instant> {
        self.slots
            .iter()
            .filter(|s| s.state == SlotState::InFlight)
            .filter(|s| self.due_of(s, rule) <= now)
            .map(|s| s.sent_at)
            .max()
    }

    /// When a command in flight can next be given up under `rule` (`None`: none in flight).
    /// Before its bound, only once another path has answered a command as young: a target
    /// slow on every path is not a dead path.
    pub fn next_overdue(&self, rule: &GiveUpRule) -> Option<Instant> {
        self.slots
            .iter()
            .filter(|s| s.state == SlotState::InFlight)
            .map(|s| self.due_of(s, rule))
            .min()
    }

    /// When the command in `s` is due under `rule`, its own path's test included:
    /// failover moves it only once the first command this path sent after it has been out
    /// unanswered too, the path's timeout, or `rule.check_wait` for a check tested by a
    /// check (the path, not only this command, is stuck; one answered would have made it
    /// moving). With nothing sent after it, not before its bound: the path's client checks
    /// itself then (docs/design.md §7 "Evidence on demand"), and that check is the test.
    fn due_of(&self, s: &Slot, rule: &GiveUpRule) -> Instant {
        let due = rule.due(s.sent_at);
        let bound = s.sent_at + rule.bound;
        if due >= bound || !rule.tested {
            return due;
        }
        match self.first_after(s.sent_at) {
            Some(t) => {
                let wait = if s.req.is_check() && t.check {
                    rule.check_wait
                } else {
                    rule.timeout
                };
                due.max(t.at + wait).min(bound)
            }
            None => bound,
        }
    }

    /// Commands in flight sent `age` or more before `now`.
    pub fn out_since(&self, now: Instant, age: Duration) -> u64 {
        self.slots
            .iter()
            .filter(|s| s.state == SlotState::InFlight && now.saturating_since(s.sent_at) >= age)
            .count() as u64
    }

    /// When the first command in flight sent after `t` was sent.
    pub fn first_sent_after(&self, t: Instant) -> Option<Instant> {
        self.first_after(t).map(|s| s.at)
    }

    /// The first command in flight sent after `t`: when, and whether it is a check.
    pub fn first_after(&self, t: Instant) -> Option<Sent> {
        self.in_flight_slots()
            .filter(|s| s.sent_at > t)
            .min_by_key(|s| s.sent_at)
            .map(Sent::of)
    }

    fn in_flight_slots(&self) -> impl Iterator<Item = &Slot> {
        self.slots.iter().filter(|s| s.state == SlotState::InFlight)
    }

    /// The youngest command in flight: when it was sent, and whether it is a check.
    pub fn youngest(&self) -> Option<Sent> {
        self.in_flight_slots()
            .max_by_key(|s| s.sent_at)
            .map(Sent::of)
    }

    /// The oldest command in flight: when it was sent, and whether it is a check.
    pub fn oldest(&self) -> Option<Sent> {
        self.in_flight_slots()
            .min_by_key(|s| s.sent_at)
            .map(Sent::of)
    }

    /// When the youngest command in flight was sent.
    pub fn youngest_sent(&self) -> Option<Instant> {
        self.youngest().map(|s| s.at)
    }

    /// When the oldest command in flight was sent.
    pub fn oldest_sent(&self) -> Option<Instant> {
        self.oldest().map(|s| s.at)
    }

    /// When, after `after`, the adapter's transport (a retry budget of `budget`) may next
    /// fail a send of this table: a command's not acknowledged yet, or an abort's (whose
    /// acknowledgement is not tracked: a look that finds nothing costs nothing).
    pub fn transport_deadline(&self, budget: Duration, after: Instant) -> Option<Instant> {
        let out = |s: &&Slot| matches!(s.state, SlotState::InFlight | SlotState::Aborting);
        let sends = self.slots.iter().filter(out).filter(|s| !s.acked);
        let aborts = self.slots.iter().filter(|s| s.state == SlotState::Aborting);
        sends
            .map(|s| s.sent_at + budget)
            .chain(aborts.map(|s| s.aborted_at + budget))
            .filter(|t| *t > after)
            .min()
    }

    /// Commands out (in flight, or given up and their abort unanswered) sent more than
    /// `limit` before `now`: each should have ended by then (docs/design.md §7 "Every
    /// command ends"). What the report calls overdue.
    pub fn overdue(&self, now: Instant, limit: Duration) -> u64 {
        self.slots
            .iter()
            .filter(|s| matches!(s.state, SlotState::InFlight | SlotState::Aborting))
            .filter(|s| now.saturating_since(s.sent_at) > limit)
            .count() as u64
    }

    /// Gives up every command in flight that `rule` says is overdue at `now`, and every
    /// older one. Each goes to `give` with the tag the target must be told to abort, newest
    /// first (so a taker that puts each at the front of its queue ends with the oldest
    /// first); `give` says whether it took the I/O (another path re-issues it) or leaves it
    /// here (it is sent again once its abort is answered or the connection is gone).
    /// Returns how many.
    pub fn give_up_overdue(
        &mut self,
        now: Instant,
        rule: &GiveUpRule,
        mut give: impl FnMut(u64, IoRequest) -> bool,
    ) -> u32 {
        let Some(cutoff) = self.give_up_cutoff(now, rule) else {
            return 0;
        };
        self.scratch.clear();
        for (i, s) in self.slots.iter().enumerate() {
            if s.state == SlotState::InFlight && s.sent_at <= cutoff {
                self.scratch.push(i as u16);
            }
        }
        let slots = &self.slots;
        self.scratch
            .sort_unstable_by_key(|i| slots[usize::from(*i)].req.id);
        let free = self.planted(SlotMutant::FreeOnGiveUp);
        for k in (0..self.scratch.len()).rev() {
            let i = self.scratch[k];
            let s = &mut self.slots[usize::from(i)];
            s.state = if free {
                SlotState::Free
            } else {
                SlotState::Aborting
            };
            s.aborted_at = now;
            s.requeue = !give(tag(usize::from(i), s.generation), s.req) && !free;
            s.strikes = s.strikes.saturating_add(u8::from(s.requeue));
            if !free && !self.resent_at_once(i) {
                self.aborting += 1;
            }
        }
        let n = self.scratch.len() as u16;
        self.in_flight -= n;
        u32::from(n)
    }

    /// The connection is gone (RESET, a port loss, the transport gave up): commands in
    /// flight, and those given up to be sent again here, go back to the front of the send
    /// queue, oldest first, for re-issue; other slots given up are free (the target drops a
    /// dead connection's commands, and its answers have nowhere to land). Returns how many
    /// were in flight.
    pub fn take_back(&mut self) -> u16 {
        self.scratch.clear();
        for (i, s) in self.slots.iter_mut().enumerate() {
            match s.state {
                SlotState::InFlight => {
                    s.state = SlotState::Queued;
                    self.scratch.push(i as u16);
                }
                SlotState::Aborting if core::mem::take(&mut s.requeue) => {
                    s.state = SlotState::Queued;
                    self.scratch.push(i as u16);
                }
                SlotState::Aborting => s.state = SlotState::Free,
                SlotState::Free | SlotState::Queued => {}
            }
        }
        let slots = &self.slots;
        self.scratch
            .sort_unstable_by_key(|i| slots[usize::from(*i)].req.id);
        for &i in self.scratch.iter().rev() {
            self.queue.push_front(i);
        }
        let n = self.in_flight;
        self.in_flight = 0;
        self.aborting = 0;
        n
    }

    /// The newest I/O waiting to be sent, taken out of the table (for another path).
    pub fn pop_queued_back(&mut self) -> Option<IoRequest> {
        let i = usize::from(self.queue.pop_back()?);
        self.slots[i].state = SlotState::Free;
        Some(self.slots[i].req)
    }

    /// An I/O waiting to be sent that was given up past the command bound `max` times or
    /// more, taken out of the table (a data disk fails it upward, as SCSI gives a command
    /// up after its retries).
    pub fn pop_struck_out(&mut self, max: u8) -> Option<IoRequest> {
        let k = self
            .queue
            .iter()
            .position(|&i| self.slots[usize::from(i)].strikes >= max)?;
        let i = usize::from(self.queue.remove(k)?);
        self.slots[i].state = SlotState::Free;
        Some(self.slots[i].req)
    }

    /// The oldest I/O waiting to be sent, taken out of the table (to fail it).
    pub fn pop_queued_front(&mut self) -> Option<IoRequest> {
        let i = usize::from(self.queue.pop_front()?);
        self.slots[i].state = SlotState::Free;
        Some(self.slots[i].req)
    }

    /// The writes given up whose abort the target has not answered, as (I/O id, block), a
    /// pair for each block a write moves: a
    /// stale copy of each may still run there, so no newer write to those blocks may go out
    /// anywhere. Even one whose send has not completed: a reliable connection may still
    /// deliver it, late, until the connection is gone.
    pub fn fenced_writes(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let none = self.planted(SlotMutant::NoFence);
        self.slots
            .iter()
            .filter(move |s| !none && s.state == SlotState::Aborting && !s.requeue && s.req.write)
            .flat_map(|s| (0..u64::from(s.req.blocks)).map(move |k| (s.req.id, s.req.lba + k)))
    }

    /// When a command out with its send never completed will have been out `limit`.
    pub fn stall_deadline(&self, limit: Duration) -> Option<Instant> {
        self.slots
            .iter()
            .filter(|s| matches!(s.state, SlotState::InFlight | SlotState::Aborting) && !s.acked)
            .map(|s| s.sent_at + limit)
            .min()
    }

    /// When an ABORT TASK sent will have gone `limit` unanswered (the earliest).
    pub fn abort_deadline(&self, limit: Duration) -> Option<Instant> {
        self.slots
            .iter()
            .filter(|s| s.state == SlotState::Aborting)
            .map(|s| s.aborted_at + limit)
            .min()
    }

    /// Whether a command out (in flight or given up) was sent `limit` or more before `now`
    /// and its send never completed: the adapter is not moving this connection's data.
    pub fn stalled_send(&self, now: Instant, limit: Duration) -> bool {
        self.slots.iter().any(|s| {
            matches!(s.state, SlotState::InFlight | SlotState::Aborting)
                && !s.acked
                && now.saturating_since(s.sent_at) >= limit
        })
    }
}

/// A command in flight as its path's failover sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub at: Instant,
    /// A check (TEST UNIT READY): nobody's I/O.
    pub check: bool,
}

impl Sent {
    fn of(s: &Slot) -> Sent {
        Sent {
            at: s.sent_at,
            check: s.req.is_check(),
        }
    }
}

/// How long a check out unanswered waits before its path tests itself with another check,
/// and how long that test is out before it counts against the path (docs/design.md §7
/// "Evidence on demand"; a command of I/O, whose give-up moves it, waits the path's whole
/// `timeout` for each): half the timeout, so that a dead idle path is known within one
/// timeout of the check that met it, not two; but only while half the timeout is at least
/// two of the path's round trips (`srtt`), else the whole timeout. Half a timeout of a
/// path slow by nature (50 ms answers, a 55 ms timeout) is shorter than its round trip: its
/// every check would be late at half, test itself, and the test never answer in time.
/// Rounded up: a check's test is not itself tested before the check is due.
pub fn check_wait(timeout: Duration, srtt: Option<Duration>) -> Duration {
    let half = timeout.as_us().div_ceil(2);
    match srtt {
        Some(rtt) if rtt.as_us().saturating_mul(2) <= half => Duration::from_us(half),
        _ => timeout,
    }
}

/// When a command is given up (docs/design.md §7): past the command bound, whatever the
/// other paths do (every command ends); or, for fast path failover, once it has been out its
/// path's `timeout`, another path answered a command sent no earlier (`overtaken_at`: it
/// was overtaken there), and its own path has answered nothing sent after it (the path,
/// not this one command, is stuck). A command its path keeps behind while answering
/// younger ones is the target's straggler: failover lets it go only at `cap`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GiveUpRule {
    pub timeout: Duration,
    pub cap: Duration,
    /// The send time of the youngest command another path answered promptly (`None`: no
    /// other path did, or there is none).
    pub overtaken_at: Option<Instant>,
    /// The send time of the youngest command this path answered.
    pub own_answered_at: Option<Instant>,
    /// The round trip of the fastest other path that serves: a command is overtaken only
    /// once it has been out twice that long (`None`: no such path known).
    pub overtaker_rtt: Option<Duration>,
    /// The command bound: no command is out longer than this, on any number of paths.
    pub bound: Duration,
    /// Failover also waits for the path's own test: the first command it sent after this
    /// one out the path's timeout unanswered too (off for a path being probed, whose probe
    /// is its test, and for the model checks of the rule alone).
    pub tested: bool,
    /// How long a check's test, a check too, waits instead of `timeout` ([`check_wait`]).
    pub check_wait: Duration,
}

impl GiveUpRule {
    /// When a command sent at `sent_at` is due to be given up: at its bound, or sooner when
    /// failover may move it.
    pub fn due(&self, sent_at: Instant) -> Instant {
        let bound = sent_at + self.bound;
        if self.overtaken_at.is_none_or(|t| sent_at > t) {
            return bound;
        }
        let moving = self.own_answered_at.is_some_and(|t| t > sent_at);
        // Overtaken means by a path clearly faster: a target slow on every path, whose
        // answers spread over tens of milliseconds, answers younger commands sooner on any
        // path now and then, and that is no sign against this one.
        let faster = self.overtaker_rtt.map_or(Duration::ZERO, |rtt| {
            Duration::from_us(rtt.as_us().saturating_mul(2))
        });
        let wait = if moving {
            self.cap.max(self.timeout)
        } else {
            self.timeout.max(faster)
        };
        (sent_at + wait).min(bound)
    }
}

mod planted;
#[cfg(test)]
mod tests;
