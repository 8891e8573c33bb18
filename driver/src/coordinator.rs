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
//! last RESET_END nothing allocates (SPEC §6).

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use crate::errors::*;
use crate::hca::{
    HealthMonitor, HealthVerdict, HwCompletion, HwResult, HwStep, Identity, Readiness,
};
use crate::policy::{Policy, PolicyError, MAX_AUTO_RESETS_LIMIT};
use crate::recorder::{FlightRecorder, RecordKind};
use crate::time::{Duration, Instant};
use crate::types::*;

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

/// How a reset ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetResult {
    Restored(ResetOutcome),
    Failed(FailReason),
    Aborted {
        by: ClientId,
        cause: AbortCause,
    },
    /// The device was surprise-removed during the reset.
    Removed,
}

/// What one reset did; reused in place, so keeping it costs no allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResetRecord {
    /// Epoch torn down (the one RESET carried).
    pub epoch: Epoch,
    pub reason: ResetReason,
    /// False once a forced cause joined a planned reset.
    pub planned: bool,
    /// An administrator restart of a Failed device (no quiesce).
    pub restart: bool,
    /// Requests and faults served by this reset, the first included.
    pub requests: u32,
    pub barrier_size: u16,
    pub started_at: Instant,
    pub quiesce_done_at: Option<Instant>,
    pub hw_done_at: Option<Instant>,
    pub finished_at: Option<Instant>,
    /// Barrier members forced through their deadline.
    pub forced: Vec<ClientId>,
    /// Soft resets asserted, retries included.
    pub soft_attempts: u8,
    pub flr_used: bool,
    pub pnp_operations: u32,
    pub result: Option<ResetResult>,
    /// Epoch after a successful reset.
    pub new_epoch: Option<Epoch>,
}

impl ResetRecord {
    /// Becomes a copy of `other` within its own reserved capacity: no allocation (a
    /// derived `clone_from` would allocate a new `forced` list).
    fn copy_from(&mut self, other: &ResetRecord) {
        let mut forced = core::mem::take(&mut self.forced);
        forced.clear();
        forced.extend_from_slice(&other.forced[..other.forced.len().min(forced.capacity())]);
        *self = ResetRecord {
            forced: Vec::new(),
            ..*other
        };
        self.forced = forced;
    }

    fn with_capacity(max_clients: usize) -> Self {
        ResetRecord {
            epoch: Epoch(0),
            reason: ResetReason::AdminForced,
            planned: false,
            restart: false,
            requests: 0,
            barrier_size: 0,
            started_at: Instant::ZERO,
            quiesce_done_at: None,
            hw_done_at: None,
            finished_at: None,
            forced: Vec::with_capacity(max_clients),
            soft_attempts: 0,
            flr_used: false,
            pnp_operations: 0,
            result: None,
            new_epoch: None,
        }
    }

    fn begin(&mut self, epoch: Epoch, reason: ResetReason, now: Instant, restart: bool) {
        self.epoch = epoch;
        self.reason = reason;
        self.planned = reason.is_planned() && !restart;
        self.restart = restart;
        self.requests = 1;
        self.barrier_size = 0;
        self.started_at = now;
        self.quiesce_done_at = None;
        self.hw_done_at = None;
        self.finished_at = None;
        self.forced.clear();
        self.soft_attempts = 0;
        self.flr_used = false;
        self.pnp_operations = 0;
        self.result = None;
        self.new_epoch = None;
    }

    /// Quiesce duration (RESET dispatched to barrier complete).
    pub fn quiesce(&self) -> Option<Duration> {
        self.quiesce_done_at
            .map(|t| t.saturating_since(self.started_at))
    }

    /// Hardware reset duration (barrier complete to device verified).
    pub fn hw_reset(&self) -> Option<Duration> {
        Some(self.hw_done_at?.saturating_since(self.quiesce_done_at?))
    }

    /// Restore duration (device verified to last RESET_END delivered).
    pub fn restore(&self) -> Option<Duration> {
        Some(self.finished_at?.saturating_since(self.hw_done_at?))
    }

    pub fn total(&self) -> Option<Duration> {
        self.finished_at
            .map(|t| t.saturating_since(self.started_at))
    }
}

/// Running totals since the bus started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counters {
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
    pub refusals: u64,
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

/// The poll interval once retries are exhausted but the device may still reappear.
const LONG_WAIT_POLL: Duration = Duration::from_ms(1_000);

/// Progress of the hardware reset while in `Resetting`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HwPhase {
    Idle,
    SavingConfig,
    Asserting,
    WaitingReady,
    /// Retries and the FLR are spent on a device that stays silent: keep probing until the
    /// auto-restart window closes, in case it is being re-plugged or re-flashed.
    LongWait,
    RestoringConfig,
    InitCommandInterface,
    ReadingIdentity,
}

impl HwPhase {
    fn expects(self, step: HwStep) -> bool {
        matches!(
            (self, step),
            (HwPhase::SavingConfig, HwStep::SaveConfig)
                | (
                    HwPhase::Asserting,
                    HwStep::AssertReset | HwStep::FunctionLevelReset
                )
                | (
                    HwPhase::WaitingReady | HwPhase::LongWait,
                    HwStep::ProbeReady
                )
                | (HwPhase::RestoringConfig, HwStep::RestoreConfig)
                | (HwPhase::InitCommandInterface, HwStep::InitCommandInterface)
                | (HwPhase::ReadingIdentity, HwStep::ReadIdentity)
        )
    }
}

/// Why one hardware attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AttemptFailure {
    /// The device reported an error.
    Error,
    /// The device did not come back within `hw_ready_timeout`.
    Silent,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    id: ClientId,
    desc: ClientDesc,
    state: ClientState,
    in_barrier: bool,
    reset_sent_at: Instant,
    last_ack_latency: Option<Duration>,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    generation: u32,
    entry: Option<Entry>,
}

/// Start times of recent resets, for storm control; fixed size.
#[derive(Debug, Clone, Copy)]
struct StormWindow {
    starts: [Option<Instant>; MAX_AUTO_RESETS_LIMIT as usize],
    next: usize,
}

impl StormWindow {
    fn new() -> Self {
        StormWindow {
            starts: [None; MAX_AUTO_RESETS_LIMIT as usize],
            next: 0,
        }
    }

    fn count_within(&self, now: Instant, window: Duration) -> usize {
        self.starts
            .iter()
            .flatten()
            .filter(|t| now.saturating_since(**t) < window)
            .count()
    }

    fn push(&mut self, at: Instant) {
        self.starts[self.next] = Some(at);
        self.next = (self.next + 1) % self.starts.len();
    }
}

/// A firmware activation's allowance for a new firmware version: it lasts until a hardware
/// reset asserted after the request has verified the device, whatever happens in between
/// (a failed reset, a restart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FwAllowance {
    None,
    /// Requested; no reset has been asserted since.
    Requested,
    /// A reset was asserted after the request: its verification may see new firmware.
    Asserted,
}

/// How a quiesce ends once the health read that closes it is back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QuiesceEnd {
    /// Barrier complete (or forced through): on to the hardware reset.
    Proceed,
    /// A planned reset's deadline passed with an unresponsive client: abort, unless the
    /// read finds a fatal cause, which makes the reset fatal instead.
    Abort(ClientId),
}

/// The reset coordinator of one HCA.
#[derive(Debug)]
pub struct Coordinator {
    state: State,
    policy: Policy,
    now: Instant,
    epoch: Epoch,
    /// Who the device must still be after a reset.
    identity: Identity,
    slots: Vec<Slot>,
    /// Slot indices in registration order; RESET goes out in reverse, RESET_END forward.
    order: Vec<u16>,
    actions: VecDeque<Action>,
    action_capacity: usize,
    recorder: FlightRecorder,
    health: HealthMonitor,
    storm: StormWindow,
    timers: [Option<u32>; TimerId::COUNT],
    next_token: u32,
    reset: ResetRecord,
    /// A copy of the last reset that concluded: a follow-up may start before a host has
    /// handled the `ResetConcluded` of the one before.
    concluded: ResetRecord,
    reset_active: bool,
    barrier_pending: u16,
    /// This reset quiesces the clients and then fails the device (storm limit).
    storm_fail: bool,
    /// Where a requested firmware activation stands (SPEC §5 "Firmware activation").
    fw: FwAllowance,
    /// The barrier is done; a last health read decides how the quiesce ends.
    quiesce_end: Option<QuiesceEnd>,
    /// The other adapter found after a reset, once PnP has been told about it.
    replacement: Option<Identity>,
    hw: HwPhase,
    /// Resets asserted in this reset, soft and FLR.
    attempts: u8,
    config_saved: bool,
    /// RESET_END events queued in Restoring whose delivery is not yet reported.
    pending_end: u32,
    follow_up: Option<ResetReason>,
    counters: Counters,
}

impl Coordinator {
    /// Reserves everything the reset path will touch and starts health polling.
    pub fn new(config: Config, identity: Identity, now: Instant) -> Result<Self, PolicyError> {
        config.policy.validate()?;
        let max = usize::from(config.max_clients.max(1));
        // Worst case between two drains: a full fan-out of RESET, then a veto's RESET_ABORTED
        // to everyone, then a removal's DEVICE_FATAL to everyone, plus timers and steps.
        let action_capacity = 4 * max + 32;
        let mut c = Coordinator {
            state: State::Operational,
            policy: config.policy,
            now,
            epoch: Epoch(1),
            identity,
            slots: alloc::vec![
                Slot {
                    generation: 0,
                    entry: None
                };
                max
            ],
            order: Vec::with_capacity(max),
            actions: VecDeque::with_capacity(action_capacity),
            action_capacity,
            recorder: FlightRecorder::new(config.recorder_capacity),
            health: HealthMonitor::default(),
            storm: StormWindow::new(),
            timers: [None; TimerId::COUNT],
            next_token: 1,
            reset: ResetRecord::with_capacity(max),
            concluded: ResetRecord::with_capacity(max),
            reset_active: false,
            barrier_pending: 0,
            storm_fail: false,
            fw: FwAllowance::None,
            quiesce_end: None,
            replacement: None,
            hw: HwPhase::Idle,
            attempts: 0,
            config_saved: false,
            pending_end: 0,
            follow_up: None,
            counters: Counters::default(),
        };
        c.arm(TimerId::HealthPoll, now + c.policy.health_poll_interval());
        Ok(c)
    }

    // ----- queries -------------------------------------------------------------------------

    pub fn state(&self) -> State {
        self.state
    }
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }
    pub fn policy(&self) -> &Policy {
        &self.policy
    }
    pub fn identity(&self) -> &Identity {
        &self.identity
    }
    pub fn recorder(&self) -> &FlightRecorder {
        &self.recorder
    }
    pub fn counters(&self) -> &Counters {
        &self.counters
    }
    pub fn max_clients(&self) -> usize {
        self.slots.len()
    }
    /// True from the first RESET of a reset until its outcome is final.
    pub fn reset_in_progress(&self) -> bool {
        self.reset_active
    }
    /// The current reset's record while one runs, else the last one's; `None` before any.
    pub fn last_reset(&self) -> Option<&ResetRecord> {
        (self.reset.requests > 0).then_some(&self.reset)
    }
    /// The last reset whose outcome is final (what `ResetConcluded` announced); `None`
    /// before any.
    pub fn concluded_reset(&self) -> Option<&ResetRecord> {
        (self.concluded.requests > 0).then_some(&self.concluded)
    }
    /// Registered clients in registration order.
    pub fn clients(&self) -> impl Iterator<Item = ClientInfo> + '_ {
        self.order
            .iter()
            .filter_map(|&i| self.slots[usize::from(i)].entry.as_ref())
            .map(Self::info)
    }
    pub fn client(&self, id: ClientId) -> Result<ClientInfo, LookupError> {
        let i = self.lookup(id)?;
        self.entry(i).map(Self::info).ok_or(LookupError::Unknown)
    }
    pub fn client_count(&self) -> usize {
        self.order.len()
    }
    /// Actions queued and not yet taken by the host.
    pub fn pending_actions(&self) -> usize {
        self.actions.len()
    }

    pub fn pop_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    // ----- bus calls (SPEC §3) -------------------------------------------------------------

    pub fn register(
        &mut self,
        now: Instant,
        desc: ClientDesc,
    ) -> Result<Registration, RegisterError> {
        self.advance(now);
        if self.state == State::Removed {
            return Err(self.refused(
                None,
                Call::Register,
                RegisterError::DeviceRemoved,
                RegisterError::code,
            ));
        }
        let Some(index) = self.slots.iter().position(|s| s.entry.is_none()) else {
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
            self.state,
            State::Quiescing | State::Resetting | State::Restoring
        );
        let state = match self.state {
            State::Operational => ClientState::Active,
            State::Failed => ClientState::Failed,
            _ => ClientState::Late,
        };
        self.slots[index].entry = Some(Entry {
            id,
            desc,
            state,
            in_barrier: false,
            reset_sent_at: now,
            last_ack_latency: None,
        });
        self.order.push(index as u16);
        self.counters.registrations += 1;
        self.record(RecordKind::Call {
            client: Some(id),
            call: Call::Register,
        });
        // During restore the RESET_END fan-out is under way: a late registrant gets its own.
        if self.state == State::Restoring {
            self.send_reset_end(index);
        }
        Ok(Registration {
            id,
            epoch: self.epoch,
            state: self.state,
            late,
        })
    }

    /// Leaves the bus. Safe from inside a callback; during quiesce it counts as ready.
    pub fn unregister(&mut self, now: Instant, id: ClientId) -> Result<(), UnregisterError> {
        self.advance(now);
        let index = match self.lookup(id) {
            Ok(i) => i,
            Err(e) => {
                return Err(self.refused(
                    Some(id),
                    Call::Unregister,
                    e.into(),
                    UnregisterError::code,
                ))
            }
        };
        self.record(RecordKind::Call {
            client: Some(id),
            call: Call::Unregister,
        });
        self.counters.unregistrations += 1;
        let entry = self.slots[index].entry.take();
        self.slots[index].generation = self.slots[index].generation.wrapping_add(1);
        if let Some(pos) = self.order.iter().position(|&i| usize::from(i) == index) {
            self.order.remove(pos);
        }
        if let Some(e) = entry {
            if self.state == State::Quiescing && e.in_barrier && e.state == ClientState::Quiescing {
                self.barrier_member_done();
            }
        }
        Ok(())
    }

    /// A client asks for a reset; it joins a reset under way (SPEC §3).
    pub fn reset_request(&mut self, now: Instant, id: ClientId) -> Result<Epoch, RequestError> {
        self.advance(now);
        if let Err(e) = self.lookup(id) {
            return Err(self.refused(Some(id), Call::ResetRequest, e.into(), RequestError::code));
        }
        self.record(RecordKind::Call {
            client: Some(id),
            call: Call::ResetRequest,
        });
        self.start_or_join(ResetReason::ClientRequest)
            .map_err(|e| self.refused(Some(id), Call::ResetRequest, e, RequestError::code))
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
                self.record(RecordKind::Call {
                    client: Some(id),
                    call: Call::ResetExecute,
                });
                let Some(e) = self.slots[index].entry.as_mut() else {
                    return Ok(ExecuteOutcome::AlreadyReady);
                };
                match e.state {
                    ClientState::Quiescing => {
                        e.state = ClientState::Ready;
                        e.last_ack_latency = Some(now.saturating_since(e.reset_sent_at));
                        if self.state == State::Quiescing {
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
        match self.state {
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

    /// Refuses a planned reset (clients with CAN_VETO only).
    pub fn reset_veto(
        &mut self,
        now: Instant,
        id: ClientId,
        epoch: Epoch,
    ) -> Result<(), VetoError> {
        self.advance(now);
        match self.check_veto(id, epoch) {
            Err(e) => Err(self.refused(Some(id), Call::ResetVeto, e, VetoError::code)),
            Ok(()) => {
                self.record(RecordKind::Call {
                    client: Some(id),
                    call: Call::ResetVeto,
                });
                self.abort(id, AbortCause::Veto);
                Ok(())
            }
        }
    }

    fn check_veto(&self, id: ClientId, epoch: Epoch) -> Result<(), VetoError> {
        let index = self.lookup(id)?;
        match self.state {
            State::Removed => return Err(VetoError::DeviceRemoved),
            State::Quiescing => {}
            State::Resetting | State::Restoring => return Err(VetoError::TooLate),
            _ => return Err(VetoError::NoResetPending),
        }
        if epoch != self.reset.epoch {
            return Err(VetoError::StaleEpoch);
        }
        let entry = self.entry(index).ok_or(VetoError::UnknownClient)?;
        if !entry.desc.flags.contains(ClientFlags::CAN_VETO) {
            return Err(VetoError::NotAllowed);
        }
        if !entry.in_barrier {
            return Err(VetoError::NotInBarrier);
        }
        if !self.reset.planned {
            return Err(VetoError::NotPlanned);
        }
        Ok(())
    }

    // ----- administrator -------------------------------------------------------------------

    /// An administrator's reset: counted by storm control, never refused by it. On a Failed
    /// device it restarts it.
    pub fn admin_reset(
        &mut self,
        now: Instant,
        kind: AdminReset,
    ) -> Result<Epoch, AdminResetError> {
        self.advance(now);
        self.record(RecordKind::Call {
            client: None,
            call: Call::AdminReset,
        });
        match self.state {
            State::Removed => Err(self.refused(
                None,
                Call::AdminReset,
                AdminResetError::DeviceRemoved,
                AdminResetError::code,
            )),
            State::Failed => {
                if kind == AdminReset::FirmwareActivate {
                    // The restart carries the allowance: the staged firmware may come up.
                    self.fw = FwAllowance::Requested;
                }
                self.restart(kind.reason());
                Ok(self.epoch)
            }
            _ => {
                self.counters.admin_resets += 1;
                // Administrator reasons are never automatic, so storm control cannot refuse.
                Ok(self.start_or_join(kind.reason()).unwrap_or(self.epoch))
            }
        }
    }

    /// Restart a Failed device: straight to the hardware reset, no quiesce (nobody holds
    /// hardware), RESET_END to every client on success.
    pub fn admin_restart(&mut self, now: Instant) -> Result<Epoch, RestartError> {
        self.advance(now);
        self.record(RecordKind::Call {
            client: None,
            call: Call::AdminRestart,
        });
        match self.state {
            State::Failed => {
                self.restart(ResetReason::AdminForced);
                Ok(self.epoch)
            }
            State::Removed => Err(self.refused(
                None,
                Call::AdminRestart,
                RestartError::DeviceRemoved,
                RestartError::code,
            )),
            _ => Err(self.refused(
                None,
                Call::AdminRestart,
                RestartError::NotFailed,
                RestartError::code,
            )),
        }
    }

    /// Validated; takes effect from the next timer armed.
    pub fn set_policy(&mut self, now: Instant, policy: Policy) -> Result<(), PolicyError> {
        self.advance(now);
        if let Err(e) = policy.validate() {
            self.counters.refusals += 1;
            self.record(RecordKind::Refused {
                client: None,
                call: Call::SetPolicy,
                code: RefusalCode::InvalidPolicy,
            });
            return Err(e);
        }
        self.record(RecordKind::Call {
            client: None,
            call: Call::SetPolicy,
        });
        self.policy = policy;
        Ok(())
    }

    // ----- hardware and host inputs --------------------------------------------------------

    /// A firmware command never completed.
    pub fn command_timeout(&mut self, now: Instant) {
        self.advance(now);
        self.record(RecordKind::Call {
            client: None,
            call: Call::CommandTimeout,
        });
        self.fault(ResetReason::CommandTimeout);
    }

    /// A catastrophic error reported by interrupt rather than by the health poll.
    pub fn catastrophic_error(&mut self, now: Instant) {
        self.advance(now);
        self.record(RecordKind::Call {
            client: None,
            call: Call::Catastrophic,
        });
        self.fault(ResetReason::Catastrophic);
    }

    fn fault(&mut self, reason: ResetReason) {
        if matches!(self.state, State::Failed | State::Removed) {
            return;
        }
        // A refusal here is storm control failing the device; it is recorded and acted on.
        let _ = self.start_or_join(reason);
    }

    /// The device is gone. Every wait ends now; DEVICE_FATAL to everyone; later calls fail.
    pub fn surprise_removal(&mut self, now: Instant) {
        self.advance(now);
        if self.state == State::Removed {
            return;
        }
        self.record(RecordKind::Call {
            client: None,
            call: Call::SurpriseRemoval,
        });
        self.cancel_all_timers();
        self.hw = HwPhase::Idle;
        self.follow_up = None;
        self.quiesce_end = None;
        self.pending_end = 0;
        self.transition(State::Removed);
        self.pnp(PnpOp::ReportChildrenMissing);
        for i in (0..self.order.len()).rev() {
            let index = usize::from(self.order[i]);
            if let Some(e) = self.slots[index].entry.as_mut() {
                e.state = ClientState::Fatal;
                let id = e.id;
                self.deliver(
                    id,
                    Event::DeviceFatal {
                        reason: FatalReason::SurpriseRemoval,
                    },
                );
            }
        }
        if self.reset_active {
            self.conclude(ResetResult::Removed);
        }
    }

    pub fn timer_expired(&mut self, now: Instant, timer: TimerId, token: u32) {
        self.advance(now);
        if self.timers[timer as usize] != Some(token) {
            // Cancelled or re-armed while the expiry was on its way: not ours any more.
            log::debug!("stale expiry of timer {} ignored", timer.as_str());
            return;
        }
        self.timers[timer as usize] = None;
        match (timer, self.state) {
            (TimerId::HealthPoll, State::Operational | State::Quiescing) => {
                self.hw_step(HwStep::ReadHealth)
            }
            (TimerId::QuiesceDeadline, State::Quiescing) => self.deadline_passed(),
            (TimerId::HwPoll, State::Resetting)
                if matches!(self.hw, HwPhase::WaitingReady | HwPhase::LongWait) =>
            {
                self.hw_step(HwStep::ProbeReady)
            }
            (TimerId::HwReadyTimeout, State::Resetting) if self.hw == HwPhase::WaitingReady => {
                self.cancel(TimerId::HwPoll);
                self.attempt_failed(AttemptFailure::Silent);
            }
            (TimerId::AutoRestartWindow, State::Resetting) => {
                self.fail(FailReason::AutoRestartExpired)
            }
            _ => log::debug!("timer {} in {} ignored", timer.as_str(), self.state),
        }
    }

    pub fn hw_complete(&mut self, now: Instant, done: HwCompletion) {
        self.advance(now);
        let ok = !matches!(done.result, HwResult::Failed(_));
        self.record(RecordKind::Hw {
            step: done.step,
            ok,
        });
        if done.step == HwStep::ReadHealth {
            self.health_sample(done.result);
            return;
        }
        if self.state != State::Resetting || !self.hw.expects(done.step) {
            log::debug!(
                "completion of {} in {} ignored",
                done.step.as_str(),
                self.state
            );
            return;
        }
        match (done.step, done.result) {
            (HwStep::SaveConfig, HwResult::Done) => {
                self.config_saved = true;
                self.assert_next();
            }
            // Without saved config space there is nothing to restore the device to.
            (HwStep::SaveConfig, _) => self.fail(FailReason::HardwareDead),
            (HwStep::AssertReset | HwStep::FunctionLevelReset, HwResult::Done) => {
                self.hw = HwPhase::WaitingReady;
                self.arm(
                    TimerId::HwReadyTimeout,
                    self.now + self.policy.hw_ready_timeout(),
                );
                self.arm(TimerId::HwPoll, self.now + self.policy.hw_poll_interval());
            }
            (HwStep::ProbeReady, HwResult::Readiness(Readiness::Ready)) => {
                self.cancel(TimerId::HwReadyTimeout);
                self.cancel(TimerId::HwPoll);
                self.hw = HwPhase::RestoringConfig;
                self.hw_step(HwStep::RestoreConfig);
            }
            // Still in reset: config reads fail or return all-ones until it is back.
            (HwStep::ProbeReady, _) => {
                let interval = if self.hw == HwPhase::LongWait {
                    LONG_WAIT_POLL
                } else {
                    self.policy.hw_poll_interval()
                };
                self.arm(TimerId::HwPoll, self.now + interval);
            }
            (HwStep::RestoreConfig, HwResult::Done) => {
                self.hw = HwPhase::InitCommandInterface;
                self.hw_step(HwStep::InitCommandInterface);
            }
            (HwStep::InitCommandInterface, HwResult::Done) => {
                self.hw = HwPhase::ReadingIdentity;
                self.hw_step(HwStep::ReadIdentity);
            }
            (HwStep::ReadIdentity, HwResult::Identity(found)) => self.verify(found),
            _ => self.attempt_failed(AttemptFailure::Error),
        }
    }

    /// The host delivered (or, for a client gone meanwhile, dropped) an event.
    pub fn event_delivered(&mut self, now: Instant, _client: ClientId, kind: EventKind) {
        self.advance(now);
        if kind == EventKind::ResetEnd && self.state == State::Restoring && self.pending_end > 0 {
            self.pending_end -= 1;
            if self.pending_end == 0 {
                self.finish_restore();
            }
        }
    }

    // ----- internals -----------------------------------------------------------------------

    fn advance(&mut self, now: Instant) {
        // Hosts on real clocks may race; time never goes backwards in the record.
        if now > self.now {
            self.now = now;
        }
    }

    fn record(&mut self, kind: RecordKind) {
        self.recorder.record(self.now, kind);
    }

    fn refused<E: Copy>(
        &mut self,
        client: Option<ClientId>,
        call: Call,
        e: E,
        code: impl Fn(E) -> RefusalCode,
    ) -> E {
        let code = code(e);
        self.counters.refusals += 1;
        log::debug!("{} refused: {}", call.as_str(), code);
        self.record(RecordKind::Refused { client, call, code });
        e
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

    /// The one place the state changes: checked against SPEC §5, logged, recorded.
    fn transition(&mut self, to: State) {
        let from = self.state;
        assert!(from.may_become(to), "illegal transition {from} -> {to}");
        log::info!("[{}] {from} -> {to}", self.now);
        self.record(RecordKind::Transition { from, to });
        self.state = to;
    }

    fn push(&mut self, action: Action) {
        if self.actions.len() >= self.action_capacity {
            // Sized for the worst case in `new`; reaching this is a sizing bug, not input.
            debug_assert!(false, "action queue overflow");
            self.counters.actions_overflowed += 1;
            log::error!("action queue full: {action:?} dropped");
            return;
        }
        self.actions.push_back(action);
    }

    fn deliver(&mut self, client: ClientId, event: Event) {
        let epoch = match event {
            Event::Reset { epoch, .. }
            | Event::ResetEnd { epoch, .. }
            | Event::ResetFailed { epoch, .. }
            | Event::ResetAborted { epoch, .. } => epoch,
            Event::DeviceFatal { .. } => self.epoch,
        };
        self.record(RecordKind::Event {
            client,
            event: event.kind(),
            epoch,
        });
        self.push(Action::Deliver { client, event });
    }

    fn arm(&mut self, timer: TimerId, at: Instant) {
        let token = self.next_token;
        self.next_token = self.next_token.wrapping_add(1).max(1);
        self.timers[timer as usize] = Some(token);
        self.push(Action::ArmTimer { timer, at, token });
    }

    fn cancel(&mut self, timer: TimerId) {
        if self.timers[timer as usize].take().is_some() {
            self.push(Action::CancelTimer { timer });
        }
    }

    fn cancel_all_timers(&mut self) {
        for t in TimerId::ALL {
            self.cancel(t);
        }
    }

    fn hw_step(&mut self, step: HwStep) {
        self.counters.hw_steps += 1;
        self.push(Action::Hw(step));
    }

    fn pnp(&mut self, op: PnpOp) {
        self.counters.pnp_operations += 1;
        if self.reset_active {
            self.reset.pnp_operations += 1;
        }
        self.record(RecordKind::Pnp { op });
        self.push(Action::Pnp(op));
    }

    /// Judges one health read. Health is watched while Operational and while Quiescing
    /// (SPEC §5 "Health"): a fatal cause found during a quiesce joins the reset and makes it
    /// fatal. A read that closes a quiesce ([`QuiesceEnd`]) then decides how it ends.
    fn health_sample(&mut self, result: HwResult) {
        if !matches!(self.state, State::Operational | State::Quiescing) {
            // A sample taken before the hardware reset began: the reset deals with the device.
            return;
        }
        let verdict = match result {
            HwResult::Health(s) => self.health.observe(s),
            // An unreadable health buffer is a device that fell off its PCI link.
            _ => HealthVerdict::Catastrophic,
        };
        let cause = match verdict {
            HealthVerdict::Healthy => None,
            HealthVerdict::Catastrophic => Some(ResetReason::Catastrophic),
            HealthVerdict::Stalled => Some(ResetReason::HealthStall),
        };
        if self.state == State::Operational {
            match cause {
                Some(reason) => self.fault(reason),
                None => self.arm(
                    TimerId::HealthPoll,
                    self.now + self.policy.health_poll_interval(),
                ),
            }
            return;
        }
        if let Some(reason) = cause {
            // Join only what is news: a stalled counter read again changes nothing.
            if reason > self.reset.reason || self.reset.planned {
                log::warn!(
                    "{} found while quiescing: the reset is fatal",
                    reason.as_str()
                );
                let _ = self.start_or_join(reason);
            }
        }
        match self.quiesce_end.take() {
            Some(QuiesceEnd::Abort(by)) if self.reset.planned => {
                self.abort(by, AbortCause::Unresponsive)
            }
            Some(_) => self.quiesce_done(),
            None => {
                if self.timers[TimerId::HealthPoll as usize].is_none() {
                    self.arm(
                        TimerId::HealthPoll,
                        self.now + self.policy.health_poll_interval(),
                    );
                }
            }
        }
    }

    /// Starts a reset, or lets the request join the one under way (SPEC §3 coalescing).
    fn start_or_join(&mut self, reason: ResetReason) -> Result<Epoch, RequestError> {
        match self.state {
            State::Operational => self.start_reset(reason),
            State::Quiescing | State::Resetting => {
                self.counters.joined_requests += 1;
                self.reset.requests += 1;
                if reason > self.reset.reason {
                    self.reset.reason = reason;
                }
                if !reason.is_planned() {
                    // A forced cause met a planned reset: nobody may veto or abort it now.
                    self.reset.planned = false;
                }
                if reason == ResetReason::FirmwareActivate {
                    // Joining after the assert: verification schedules a follow-up.
                    self.fw = FwAllowance::Requested;
                }
                self.record(RecordKind::ResetJoined { reason });
                Ok(self.reset.epoch)
            }
            State::Restoring => {
                if reason == ResetReason::FirmwareActivate {
                    self.fw = FwAllowance::Requested;
                }
                self.counters.joined_requests += 1;
                self.follow_up = Some(self.follow_up.map_or(reason, |r| r.max(reason)));
                self.record(RecordKind::FollowUpScheduled { reason });
                Ok(self.epoch)
            }
            State::Failed => Err(RequestError::DeviceFailed),
            State::Removed => Err(RequestError::DeviceRemoved),
        }
    }

    fn start_reset(&mut self, reason: ResetReason) -> Result<Epoch, RequestError> {
        debug_assert_eq!(self.state, State::Operational);
        let now = self.now;
        self.storm_fail = reason.is_automatic()
            && self.storm.count_within(now, self.policy.storm_window())
                >= usize::from(self.policy.max_auto_resets);
        self.storm.push(now);
        if reason.is_automatic() {
            self.counters.auto_resets += 1;
        }
        self.counters.resets_started += 1;
        self.reset.begin(self.epoch, reason, now, false);
        self.reset_active = true;
        if reason == ResetReason::FirmwareActivate {
            self.fw = FwAllowance::Requested;
        }
        self.config_saved = false;
        self.record(RecordKind::ResetStarted {
            epoch: self.epoch,
            reason,
            planned: self.reset.planned,
        });
        self.transition(State::Quiescing);

        // Snapshot the barrier: everyone registered now, idle or not.
        let deadline = now + self.policy.quiesce_deadline();
        let event = Event::Reset {
            epoch: self.epoch,
            reason,
            planned: self.reset.planned,
            deadline,
        };
        let mut members: u16 = 0;
        for i in (0..self.order.len()).rev() {
            let index = usize::from(self.order[i]);
            if let Some(e) = self.slots[index].entry.as_mut() {
                e.in_barrier = true;
                e.state = ClientState::Quiescing;
                e.reset_sent_at = now;
                let id = e.id;
                members += 1;
                self.deliver(id, event);
            }
        }
        self.reset.barrier_size = members;
        self.barrier_pending = members;
        self.arm(TimerId::QuiesceDeadline, deadline);
        if members == 0 {
            self.barrier_complete();
        }
        if self.storm_fail {
            Err(RequestError::StormLimit)
        } else {
            Ok(self.reset.epoch)
        }
    }

    fn barrier_member_done(&mut self) {
        debug_assert!(self.barrier_pending > 0);
        self.barrier_pending = self.barrier_pending.saturating_sub(1);
        if self.barrier_pending == 0 {
            self.barrier_complete();
        }
    }

    fn deadline_passed(&mut self) {
        let mut first_forced = None;
        for i in 0..self.order.len() {
            let index = usize::from(self.order[i]);
            let Some(e) = self.slots[index].entry.as_mut() else {
                continue;
            };
            if e.in_barrier && e.state == ClientState::Quiescing {
                e.state = ClientState::Unresponsive;
                let (id, name) = (e.id, e.desc.name);
                log::warn!("client {id} '{name}' unresponsive at the quiesce deadline");
                first_forced.get_or_insert(id);
                self.counters.unresponsive_clients += 1;
                // Capacity is max_clients: cannot grow.
                if self.reset.forced.len() < self.reset.forced.capacity() {
                    self.reset.forced.push(id);
                }
                self.record(RecordKind::Unresponsive { client: id, name });
            }
        }
        self.barrier_pending = 0;
        match first_forced {
            Some(by) if self.reset.planned && self.policy.abort_on_unresponsive => {
                self.close_quiesce(QuiesceEnd::Abort(by))
            }
            _ => self.close_quiesce(QuiesceEnd::Proceed),
        }
    }

    fn barrier_complete(&mut self) {
        self.close_quiesce(QuiesceEnd::Proceed);
    }

    /// Ends the quiesce with one last health read: a fatal cause raised since the last poll
    /// (or at the same instant as the reset's own cause) joins this reset instead of being
    /// found after it, and an abort for an unresponsive client stops if one is found.
    fn close_quiesce(&mut self, end: QuiesceEnd) {
        self.cancel(TimerId::QuiesceDeadline);
        if self.quiesce_end.replace(end).is_none() {
            self.hw_step(HwStep::ReadHealth);
        }
    }

    fn quiesce_done(&mut self) {
        self.cancel(TimerId::HealthPoll);
        self.reset.quiesce_done_at = Some(self.now);
        if self.storm_fail {
            self.fail(FailReason::StormLimit);
        } else {
            self.enter_resetting();
        }
    }

    fn restart(&mut self, reason: ResetReason) {
        self.counters.resets_started += 1;
        self.counters.admin_resets += 1;
        self.reset.begin(self.epoch, reason, self.now, true);
        self.reset.quiesce_done_at = Some(self.now);
        self.reset_active = true;
        self.storm_fail = false;
        self.record(RecordKind::ResetStarted {
            epoch: self.epoch,
            reason,
            planned: false,
        });
        self.enter_resetting();
    }

    fn enter_resetting(&mut self) {
        self.transition(State::Resetting);
        self.attempts = 0;
        self.arm(
            TimerId::AutoRestartWindow,
            self.now + self.policy.auto_restart_window(),
        );
        if self.config_saved {
            self.assert_next();
        } else {
            self.hw = HwPhase::SavingConfig;
            self.hw_step(HwStep::SaveConfig);
        }
    }

    /// Soft resets first, `reset_retries` times after the first, then one FLR.
    fn assert_next(&mut self) {
        self.hw = HwPhase::Asserting;
        if self.fw == FwAllowance::Requested {
            self.fw = FwAllowance::Asserted;
        }
        let step = if self.attempts <= self.policy.reset_retries {
            self.reset.soft_attempts += 1;
            HwStep::AssertReset
        } else {
            self.reset.flr_used = true;
            HwStep::FunctionLevelReset
        };
        self.attempts += 1;
        self.hw_step(step);
    }

    fn attempt_failed(&mut self, why: AttemptFailure) {
        log::warn!("hardware reset attempt {} failed: {why:?}", self.attempts);
        if self.attempts <= self.policy.reset_retries + 1 {
            self.assert_next();
        } else if why == AttemptFailure::Silent {
            self.hw = HwPhase::LongWait;
            self.arm(TimerId::HwPoll, self.now + LONG_WAIT_POLL);
        } else {
            self.fail(FailReason::HardwareDead);
        }
    }

    fn verify(&mut self, found: Identity) {
        if !self.identity.same_adapter(&found) {
            log::error!("another device answered after reset: {found:?}");
            self.device_replaced(found);
            return;
        }
        let fw = self.fw;
        if fw == FwAllowance::Requested {
            // The activation came after this reset's assert: the firmware it staged is not
            // running yet, so one more reset is owed (SPEC §5).
            self.follow_up = Some(self.follow_up.map_or(ResetReason::FirmwareActivate, |r| {
                r.max(ResetReason::FirmwareActivate)
            }));
            self.record(RecordKind::FollowUpScheduled {
                reason: ResetReason::FirmwareActivate,
            });
        } else {
            self.fw = FwAllowance::None;
        }
        if found.fw_version == self.identity.fw_version {
            self.hw_done(ResetOutcome::Restored);
        } else if fw != FwAllowance::None {
            self.identity.fw_version = found.fw_version;
            self.hw_done(ResetOutcome::FirmwareChanged);
        } else {
            // New firmware nobody activated: its capabilities cannot be trusted, so it is
            // treated as another device.
            log::error!("firmware changed outside a firmware activation");
            self.device_replaced(found);
        }
    }

    /// Another device answered: PnP takes over, once per replacement. A restart that finds
    /// the same replacement again fails the same way without telling PnP twice.
    fn device_replaced(&mut self, found: Identity) {
        if self.replacement != Some(found) {
            self.replacement = Some(found);
            self.pnp(PnpOp::ReportChildrenMissing);
            self.pnp(PnpOp::ReenumerateChildren);
        }
        self.fail(FailReason::DeviceReplaced);
    }

    fn hw_done(&mut self, outcome: ResetOutcome) {
        self.cancel(TimerId::AutoRestartWindow);
        self.hw = HwPhase::Idle;
        self.reset.hw_done_at = Some(self.now);
        self.reset.result = Some(ResetResult::Restored(outcome));
        self.epoch = self.epoch.next();
        self.reset.new_epoch = Some(self.epoch);
        self.transition(State::Restoring);
        self.pending_end = 0;
        for i in 0..self.order.len() {
            self.send_reset_end(usize::from(self.order[i]));
        }
        if self.pending_end == 0 {
            self.finish_restore();
        }
    }

    fn send_reset_end(&mut self, index: usize) {
        let outcome = match self.reset.result {
            Some(ResetResult::Restored(o)) => o,
            _ => ResetOutcome::Restored,
        };
        let epoch = self.epoch;
        if let Some(e) = self.slots[index].entry.as_mut() {
            e.state = ClientState::Active;
            let id = e.id;
            self.pending_end += 1;
            self.deliver(id, Event::ResetEnd { epoch, outcome });
        }
    }

    fn finish_restore(&mut self) {
        let outcome = match self.reset.result {
            Some(ResetResult::Restored(o)) => o,
            _ => ResetOutcome::Restored,
        };
        self.record(RecordKind::ResetFinished {
            epoch: self.epoch,
            outcome,
        });
        self.counters.resets_restored += 1;
        self.transition(State::Operational);
        for slot in self.slots.iter_mut() {
            if let Some(e) = slot.entry.as_mut() {
                e.in_barrier = false;
            }
        }
        self.conclude(ResetResult::Restored(outcome));
        self.health.rearm();
        self.arm(
            TimerId::HealthPoll,
            self.now + self.policy.health_poll_interval(),
        );
        if let Some(reason) = self.follow_up.take() {
            self.counters.follow_ups += 1;
            // A storm refusal is recorded and acted on inside.
            let _ = self.start_reset(reason);
        }
    }

    fn fail(&mut self, error: FailReason) {
        for t in [
            TimerId::QuiesceDeadline,
            TimerId::HwPoll,
            TimerId::HwReadyTimeout,
            TimerId::AutoRestartWindow,
            TimerId::HealthPoll,
        ] {
            self.cancel(t);
        }
        self.hw = HwPhase::Idle;
        self.follow_up = None;
        self.quiesce_end = None;
        let epoch = self.reset.epoch;
        self.record(RecordKind::ResetFailed { epoch, error });
        self.counters.resets_failed += 1;
        self.transition(State::Failed);
        for i in 0..self.order.len() {
            let index = usize::from(self.order[i]);
            if let Some(e) = self.slots[index].entry.as_mut() {
                e.state = ClientState::Failed;
                e.in_barrier = false;
                let id = e.id;
                self.deliver(id, Event::ResetFailed { epoch, error });
            }
        }
        self.conclude(ResetResult::Failed(error));
    }

    fn abort(&mut self, by: ClientId, cause: AbortCause) {
        self.cancel(TimerId::QuiesceDeadline);
        self.quiesce_end = None;
        self.counters.resets_aborted += 1;
        self.transition(State::Operational);
        let epoch = self.reset.epoch;
        for i in 0..self.order.len() {
            let index = usize::from(self.order[i]);
            if let Some(e) = self.slots[index].entry.as_mut() {
                e.state = ClientState::Active;
                e.in_barrier = false;
                let id = e.id;
                self.deliver(
                    id,
                    Event::ResetAborted {
                        epoch,
                        vetoed_by: by,
                        cause,
                    },
                );
            }
        }
        self.conclude(ResetResult::Aborted { by, cause });
        self.health.rearm();
        self.arm(
            TimerId::HealthPoll,
            self.now + self.policy.health_poll_interval(),
        );
    }

    fn conclude(&mut self, result: ResetResult) {
        self.reset.result = Some(result);
        self.reset.finished_at = Some(self.now);
        self.reset_active = false;
        self.concluded.copy_from(&self.reset);
        self.push(Action::ResetConcluded {
            epoch: self.reset.epoch,
        });
    }
}

#[cfg(all(test, feature = "sim"))]
mod tests;
