//! The reset coordinator: a sans-IO state machine.
//!
//! Inputs are method calls (bus calls, timer expiries, hardware completions, health samples,
//! removal) each carrying `now`; outputs are [`Action`]s the host drains with
//! [`Coordinator::pop_action`] and executes: deliver an event, arm or cancel a timer, run a
//! hardware step, perform a PnP operation. There is no clock, thread or lock in here, so the
//! same code runs in the virtual-time simulator, over real threads, and in the KMDF glue, and
//! any run is replayable from its inputs.
//!
//! Everything the reset path touches (client table, registration order, barrier, action
//! queue, flight recorder, reset record) is reserved in [`Coordinator::new`]; from RESET to the
//! last RESET_END nothing allocates (docs/design.md §6).

use alloc::vec::Vec;

use crate::errors::*;
use crate::hca::{HwStep, Identity};
use crate::policy::{Policy, PolicyError};
use crate::recorder::{FlightRecorder, RecordKind};
use crate::reserve::Fifo;
use crate::time::{Duration, Instant};
use crate::types::*;

mod accessors;
mod build;
pub mod bundle;
mod hardware;
mod health;
mod history;
mod hold;
mod inputs;
mod mutants;
mod order;
mod outputs;
mod ports;
mod reset;
mod reset_query;
mod reset_record;
mod stage;

pub use health::{HealthError, HealthMonitor, HealthReport, HealthVerdict};
pub use history::{ResetHistory, ResetSummary, HISTORY_LEN};
pub use mutants::Mutant;
use order::Order;
pub use ports::PortView;
pub use reset_record::{ResetFacts, ResetRecord, ResetResult, FORCED_NAMES};
use stage::{Entry, FwAllowance, Slot, Stage, Window};

/// What the host must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Invoke the client's callback with no coordinator lock held, then report
    /// [`Coordinator::event_delivered`] (also when the client is gone by then).
    Deliver {
        client: ClientId,
        event: Event,
    },
    /// Arm (or re-arm) a one-shot timer; report its expiry with the same token.
    ArmTimer {
        timer: TimerId,
        at: Instant,
        token: u32,
    },
    CancelTimer {
        timer: TimerId,
    },
    /// Run the step on the device (see [`crate::hca::execute`]) and report the completion.
    Hw(HwStep),
    Pnp(PnpOp),
    /// The current reset's record ([`Coordinator::last_reset`]) is final; every event it
    /// caused was queued before this action.
    ResetConcluded {
        epoch: Epoch,
    },
}

/// `reset_execute` succeeded; says what it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecuteOutcome {
    /// The client is now ready.
    Accepted,
    /// It was already ready: nothing changed (execute is idempotent).
    AlreadyReady,
    /// It passed its deadline and the reset went on without it: nothing changed.
    TooLate,
}

/// What `register` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registration {
    pub id: ClientId,
    pub epoch: Epoch,
    pub state: State,
    /// Registered while a reset runs: hold nothing until RESET_END (or RESET_FAILED).
    pub late: bool,
}

/// A listing row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientInfo {
    pub id: ClientId,
    pub desc: ClientDesc,
    pub state: ClientState,
    pub in_barrier: bool,
    /// Time from RESET to this client's execute, in the last reset it executed in.
    pub last_ack_latency: Option<Duration>,
}

/// Running totals since the bus started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counters {
    /// Resets started by `ResetReason` number; index 0 counts an administrator's restarts
    /// of a Failed device.
    pub by_reason: [u64; 8],
    pub registrations: u64,
    pub unregistrations: u64,
    pub resets_started: u64,
    pub resets_restored: u64,
    pub resets_failed: u64,
    pub resets_aborted: u64,
    pub auto_resets: u64,
    pub admin_resets: u64,
    pub joined_requests: u64,
    pub follow_ups: u64,
    pub unresponsive_clients: u64,
    /// Bus calls of clients refused (an unknown id, a call in the wrong state, a throttled
    /// request, ...).
    pub refusals: u64,
    /// An administrator's requests refused (a policy out of range, a restart of a device that
    /// is not Failed, a reset of a removed one), counted apart from the clients'.
    pub admin_refusals: u64,
    /// Reset requests refused by a client's `client_request_limit` (also in `refusals`).
    pub throttled: u64,
    pub pnp_operations: u64,
    pub hw_steps: u64,
    /// Actions that did not fit the reserved queue: always zero unless the sizing is wrong.
    pub actions_overflowed: u64,
}

/// Sizes reserved at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    pub max_clients: u16,
    pub recorder_capacity: usize,
    pub policy: Policy,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_clients: 64,
            recorder_capacity: 4096,
            policy: Policy::default(),
        }
    }
}

/// The reset coordinator of one HCA.
///
/// `Clone` is for model checking and tests: a clone's queues are not reserved to their
/// capacity again, so a clone is not for the reset path of a host.
#[derive(Debug, Clone)]
pub struct Coordinator {
    stage: Stage,
    policy: Policy,
    now: Instant,
    epoch: Epoch,
    /// Who the device must still be after a reset.
    identity: Identity,
    slots: Vec<Slot>,
    /// Each slot's client's recent reset requests, for `client_request_limit`. Beside the
    /// slots, not in them: read only on a request, and 264 bytes a client that would
    /// otherwise lie between the fields every reset walks.
    requests: Vec<Window>,
    /// Slot indices in registration order; RESET goes out in reverse, RESET_END forward.
    order: Order,
    /// Every slot below it is taken: where the search for a free slot starts, so a client
    /// that leaves and comes back does not scan the whole table.
    free_from: usize,
    actions: Fifo<Action>,
    recorder: FlightRecorder,
    health: HealthMonitor,
    /// A health read was issued and has not answered: the next poll that finds it so treats
    /// the device as unreadable (a read that never returns is a hung device).
    health_outstanding: bool,
    storm: Window,
    timers: [Option<u32>; TimerId::COUNT],
    next_token: u32,
    /// The current reset while one runs (open), else the last one.
    reset: ResetRecord,
    /// A copy of the last reset that concluded: a follow-up may start before a host has
    /// handled the `ResetConcluded` of the one before.
    concluded: ResetRecord,
    /// Summaries of the last resets, which polling cannot evict.
    history: ResetHistory,
    /// Where a requested firmware activation stands (docs/design.md §5 "Firmware activation").
    fw: FwAllowance,
    /// The other adapter found after a reset, once PnP has been told about it.
    replacement: Option<Identity>,
    counters: Counters,
    /// What the health monitor found, for QUERY_HEALTH.
    health_report: HealthReport,
    /// What the hardware last reported of each port (`None`: never reported).
    ports: [Option<PortView>; MAX_PORTS as usize],
    /// Ports that were Active when a hardware reset took them down and are not Active again
    /// yet: the service is back only when this is empty (docs/design.md §5 "Service
    /// restored"). An observer of the port history, not protocol state: no event depends on
    /// it, so the fingerprint leaves it out.
    awaiting_ports: u8,
    /// Resets held while a PnP stop is pending (hold.rs).
    hold: hold::Hold,
    /// The diagnostic bundle the last failure froze (bundle.rs).
    kept: bundle::KeptBundle,
    #[cfg(feature = "mutants")]
    mutant: Option<Mutant>,
}

impl Coordinator {
    // ----- bus calls (docs/design.md §3) -------------------------------------------------------------

    pub fn register(
        &mut self,
        now: Instant,
        desc: ClientDesc,
    ) -> Result<Registration, RegisterError> {
        self.advance(now);
        if self.state() == State::Removed {
            return Err(self.refused(
                None,
                Call::Register,
                RegisterError::DeviceRemoved,
                RegisterError::code,
            ));
        }
        let free = self.slots[self.free_from..]
            .iter()
            .position(|s| s.entry.is_none());
        let Some(index) = free.map(|i| i + self.free_from) else {
            return Err(self.refused(
                None,
                Call::Register,
                RegisterError::CapacityFull,
                RegisterError::code,
            ));
        };
        let id = ClientId {
            index: index as u16,
            generation: self.slots[index].generation,
        };
        let late = matches!(
            self.state(),
            State::Quiescing | State::Resetting | State::Restoring
        );
        let state = match self.state() {
            // A planned reset only being asked about: the newcomer joins its barrier.
            State::Operational | State::Preparing => ClientState::Active,
            State::Failed => ClientState::Failed,
            _ => ClientState::Late,
        };
        self.slots[index].entry = Some(Entry {
            id,
            desc,
            state,
            in_barrier: false,
            queried: false,
            reset_sent_at: now,
            last_ack_latency: None,
            ports: if late { 0 } else { ports::ALL_PORTS },
        });
        self.requests[index] = Window::new();
        self.order.push(index as u16);
        self.free_from = index + 1;
        self.counters.registrations += 1;
        self.record(RecordKind::Call {
            client: Some(id),
            call: Call::Register,
        });
        // During restore the RESET_END fan-out is under way: a late registrant gets its own.
        if self.state() == State::Restoring {
            self.send_reset_end(index);
        }
        // A newcomer on a running bus hears of any port that is not Active.
        self.sync_ports();
        Ok(Registration {
            id,
            epoch: self.epoch,
            state: self.state(),
            late,
        })
    }

    /// Leaves the bus. Safe from inside a callback; during quiesce it counts as ready.
    pub fn unregister(&mut self, now: Instant, id: ClientId) -> Result<(), UnregisterError> {
        self.advance(now);
        let index = self.lookup_for(id, Call::Unregister, UnregisterError::code)?;
        self.record(RecordKind::Call {
            client: Some(id),
            call: Call::Unregister,
        });
        self.counters.unregistrations += 1;
        let entry = self.slots[index].entry.take();
        self.forget_deliveries(id);
        // A free slot holds no history: states that differ only in a departed client's
        // requests are one state to the model check.
        self.requests[index] = Window::new();
        self.slots[index].generation = self.slots[index].generation.wrapping_add(1);
        self.order.remove(index as u16);
        self.free_from = self.free_from.min(index);
        match entry.map(|e| e.state) {
            // Only a quiesce under way has a barrier to leave (the call checks).
            Some(ClientState::Quiescing) => self.barrier_member_done(),
            // Leaving without an answer is not a veto.
            Some(ClientState::Queried) => self.query_answered(),
            _ => {}
        }
        Ok(())
    }

    /// Events queued for a client that left are never delivered (the host has dropped its
    /// callback): they leave the queue now, so that clients coming and going while the
    /// drain is held up cannot fill it. A RESET_END among them counts as delivered, as the
    /// host would have reported it.
    fn forget_deliveries(&mut self, id: ClientId) {
        let mut ends = 0u32;
        self.actions.retain(|a| match a {
            Action::Deliver { client, event } if *client == id => {
                ends += u32::from(event.kind() == EventKind::ResetEnd);
                false
            }
            _ => true,
        });
        for _ in 0..ends {
            self.event_delivered(self.now, id, EventKind::ResetEnd);
        }
    }

    /// A client asks for a reset; it joins a reset under way (docs/design.md §3). Each client may ask
    /// `client_request_limit` times per storm window: one noisy client is throttled, the
    /// device is not failed for it.
    pub fn reset_request(&mut self, now: Instant, id: ClientId) -> Result<Epoch, RequestError> {
        self.advance(now);
        let index = self.lookup_for(id, Call::ResetRequest, RequestError::code)?;
        if self.throttled(index) {
            return Err(RequestError::Throttled);
        }
        self.record(RecordKind::Call {
            client: Some(id),
            call: Call::ResetRequest,
        });
        if self.held_now() {
            return Err(self.refused(
                Some(id),
                Call::ResetRequest,
                RequestError::StopPending,
                RequestError::code,
            ));
        }
        self.start_or_join(ResetReason::ClientRequest)
            .map_err(|e| self.refused(Some(id), Call::ResetRequest, e, RequestError::code))
    }

    /// Counts a request of client `index` against its limit; true (recorded with its name)
    /// when it is over. A device that is Failed or Removed refuses for its own reason.
    fn throttled(&mut self, index: usize) -> bool {
        if matches!(self.state(), State::Failed | State::Removed) {
            return false;
        }
        let (now, window) = (self.now, self.policy.storm_window());
        let limit = usize::from(self.policy.client_request_limit);
        let Some(e) = self.slots[index].entry.as_ref() else {
            return false;
        };
        let requests = &mut self.requests[index];
        if requests.count_within(now, window) < limit {
            requests.push(now);
            return false;
        }
        let (client, name) = (e.id, e.desc.name);
        log::warn!("client {client} '{name}' throttled: over its reset request limit");
        self.counters.refusals += 1;
        self.counters.throttled += 1;
        self.record_named(RecordKind::Throttled { client }, &name);
        true
    }

    /// "I have stopped and released every hardware resource." Idempotent.
    pub fn reset_execute(
        &mut self,
        now: Instant,
        id: ClientId,
        epoch: Epoch,
    ) -> Result<ExecuteOutcome, ExecuteError> {
        self.advance(now);
        match self.check_execute(id, epoch) {
            Err(e) => Err(self.refused(Some(id), Call::ResetExecute, e, ExecuteError::code)),
            Ok(index) => {
                self.record_call_of(index, Call::ResetExecute);
                let Some(e) = self.slots[index].entry.as_mut() else {
                    return Ok(ExecuteOutcome::AlreadyReady);
                };
                match e.state {
                    ClientState::Quiescing => {
                        e.state = ClientState::Ready;
                        e.last_ack_latency = Some(now.saturating_since(e.reset_sent_at));
                        if self.state() == State::Quiescing {
                            self.barrier_member_done();
                        }
                        Ok(ExecuteOutcome::Accepted)
                    }
                    ClientState::Unresponsive => Ok(ExecuteOutcome::TooLate),
                    _ => Ok(ExecuteOutcome::AlreadyReady),
                }
            }
        }
    }

    fn check_execute(&self, id: ClientId, epoch: Epoch) -> Result<usize, ExecuteError> {
        let index = self.lookup(id)?;
        match self.state() {
            State::Removed => return Err(ExecuteError::DeviceRemoved),
            State::Quiescing | State::Resetting => {}
            State::Restoring if epoch == self.reset.epoch => return Err(ExecuteError::StaleEpoch),
            _ => return Err(ExecuteError::NoResetPending),
        }
        if epoch != self.reset.epoch {
            return Err(ExecuteError::StaleEpoch);
        }
        if !self.entry(index).is_some_and(|e| e.in_barrier) {
            return Err(ExecuteError::NotInBarrier);
        }
        Ok(index)
    }

    // ----- internals -----------------------------------------------------------------------

    fn advance(&mut self, now: Instant) {
        // Hosts on real clocks may race; time never goes backwards in the record.
        if now > self.now {
            self.now = now;
        }
    }

    /// Records `kind` under the name of the client it is about, while that client is still
    /// registered (a record outlives the client).
    fn record(&mut self, kind: RecordKind) {
        let name = kind
            .client()
            .map_or(ShortText::EMPTY, |id| self.name_of(id));
        self.recorder.record(self.now, &name, kind);
    }

    /// Records `call` by the client in slot `index` under the name its entry holds: a call
    /// every client makes in every reset, kept off the general path's lookup and copy.
    fn record_call_of(&mut self, index: usize, call: Call) {
        if let Some(e) = self.slots[index].entry.as_ref() {
            self.recorder
                .record_call(self.now, &e.desc.name, e.id, call);
        }
    }

    /// The registered name of `id`; empty for an unknown or stale id.
    fn name_of(&self, id: ClientId) -> ClientName {
        self.lookup(id)
            .ok()
            .and_then(|index| self.entry(index))
            .map_or(ShortText::EMPTY, |e| e.desc.name)
    }

    /// Records `kind` under `name`: a client's name already looked up, or an administrator's
    /// reason.
    fn record_named(&mut self, kind: RecordKind, name: &ShortText) {
        self.recorder.record(self.now, name, kind);
    }

    fn refused<E: Copy>(
        &mut self,
        client: Option<ClientId>,
        call: Call,
        e: E,
        code: impl Fn(E) -> RefusalCode,
    ) -> E {
        let code = code(e);
        if matches!(
            call,
            Call::AdminReset | Call::AdminRestart | Call::SetPolicy
        ) {
            self.counters.admin_refusals += 1;
        } else {
            self.counters.refusals += 1;
        }
        log::debug!("{} refused: {}", call.as_str(), code);
        self.record(RecordKind::Refused { client, call, code });
        e
    }

    /// The slot of `id` for `call`; an unknown or stale id is refused (and recorded).
    fn lookup_for<E: Copy + From<LookupError>>(
        &mut self,
        id: ClientId,
        call: Call,
        code: impl Fn(E) -> RefusalCode,
    ) -> Result<usize, E> {
        self.lookup(id)
            .map_err(|e| self.refused(Some(id), call, e.into(), code))
    }

    /// Ids of a previous coordinator of the same device (the KMDF driver builds a new one at
    /// each start, a rebalance included) are refused as stale rather than taken for a new
    /// client's: every free slot starts its generations at `floor` at least. Slots in use
    /// keep theirs: their clients registered with this coordinator.
    pub fn retire_ids_before(&mut self, floor: u32) {
        for slot in self.slots.iter_mut().filter(|s| s.entry.is_none()) {
            slot.generation = slot.generation.max(floor);
        }
    }

    fn lookup(&self, id: ClientId) -> Result<usize, LookupError> {
        let index = usize::from(id.index);
        let slot = self.slots.get(index).ok_or(LookupError::Unknown)?;
        match &slot.entry {
            Some(e) if e.id == id => Ok(index),
            _ if id.generation < slot.generation => Err(LookupError::Stale),
            _ => Err(LookupError::Unknown),
        }
    }

    fn entry(&self, index: usize) -> Option<&Entry> {
        self.slots.get(index).and_then(|s| s.entry.as_ref())
    }

    fn info(e: &Entry) -> ClientInfo {
        ClientInfo {
            id: e.id,
            desc: e.desc,
            state: e.state,
            in_barrier: e.in_barrier,
            last_ack_latency: e.last_ack_latency,
        }
    }

    /// The one place the state changes: checked against docs/design.md §5, logged, recorded. The new
    /// stage arrives with its data whole; the old stage's data ends here.
    fn transition(&mut self, to: Stage) {
        let (from, to_state) = (self.state(), to.state());
        assert!(
            from.may_become(to_state),
            "illegal transition {from} -> {to_state}"
        );
        log::info!("[{}] {from} -> {to_state}", self.now);
        self.record(RecordKind::Transition { from, to: to_state });
        self.stage = to;
    }
}

/// Feeds everything `fmt::Debug` prints to a hasher, without allocating.
struct HashWriter<'a, H>(&'a mut H);

impl<H: core::hash::Hasher> core::fmt::Write for HashWriter<'_, H> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        self.0.write(s.as_bytes());
        Ok(())
    }
}

impl Coordinator {
    /// Feeds the protocol state to `h`: stage, epoch, clients, queued actions, timers armed,
    /// the reset record, health, storm window, firmware allowance. Not the flight recorder,
    /// the counters or the clock: runs that reach one protocol state by different histories
    /// hash alike (what a model checker needs to stop exploring a state twice).
    pub fn fingerprint(&self, h: &mut impl core::hash::Hasher) {
        use core::fmt::Write;
        let armed = self.timers.map(|t| t.is_some());
        // Tokens count every arm ever made: only whether an action arms matters here.
        let actions = self.actions.iter().map(|a| match *a {
            Action::ArmTimer { timer, at, .. } => Action::ArmTimer {
                timer,
                at,
                token: 0,
            },
            other => other,
        });
        let mut w = HashWriter(h);
        let _ = write!(
            w,
            "{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}",
            self.stage,
            self.epoch,
            self.slots,
            self.requests,
            self.order,
            armed,
            self.reset,
            self.health.unchanged_polls(),
            self.health_outstanding,
            self.storm,
            self.fw,
            self.replacement,
            self.ports,
            self.hold
        );
        for a in actions {
            let _ = write!(w, "{a:?}");
        }
    }
}

#[cfg(test)]
mod tests;
