//! The child's decisions: one state machine, kept under the child's spin lock, that takes
//! the bus's events, its own queue's news and its own I/O, and answers with what the KMDF
//! layer must do next. It holds no lock and calls nothing: each step returns an [`Action`],
//! which the layer carries out once the lock is dropped (a KMDF call made under it could come
//! back into the child on the same processor: WdfIoQueueStop calls its stop callback at once
//! when the queue is already idle). Its queue's changes go through [`QueueBook`].
#![forbid(unsafe_code)]

use crate::abi::{BusEvent, ChildStats, STATS_LATE, STATS_VETO_ARMED};
use crate::queue::{Change, Idle, QueueBook, QueueOp};

/// Where the child is in the reset protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Not registered: before prepare hardware's Register, after release hardware's
    /// Unregister. Its I/O is refused.
    Unbound,
    /// Its I/O runs in `epoch`.
    Running { epoch: u64 },
    /// RESET of `epoch` heard: its I/O queue is stopping; the requests it already owns finish
    /// in `epoch`, new ones wait in the queue.
    Quiescing { epoch: u64 },
    /// ResetExecute of `epoch` called (or it registered late, with nothing to release): it
    /// owns no request and waits for the reset's end.
    Executed { epoch: u64 },
    /// RESET_FAILED or DEVICE_FATAL: the queue is purged, every request fails.
    Failed,
}

impl Phase {
    /// Its number in [`ChildStats::phase`].
    pub fn number(self) -> u32 {
        match self {
            Phase::Unbound => 0,
            Phase::Running { .. } => 1,
            Phase::Quiescing { .. } => 2,
            Phase::Executed { .. } => 3,
            Phase::Failed => 4,
        }
    }

    /// The epoch it holds, 0 when none.
    pub fn epoch(self) -> u64 {
        match self {
            Phase::Running { epoch } | Phase::Quiescing { epoch } | Phase::Executed { epoch } => {
                epoch
            }
            Phase::Unbound | Phase::Failed => 0,
        }
    }
}

/// What the KMDF layer does after a step, with the child's lock dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Nothing,
    /// ResetConsent(epoch).
    Consent(u64),
    /// ResetVeto(epoch, reason).
    Veto(u64),
    /// ResetExecute(epoch).
    Execute(u64),
    /// A change of the I/O queue: [`Child::performing`], the KMDF call, [`Child::applied`].
    Queue(QueueOp),
}

impl Action {
    /// The queue change it asks for, if it is one.
    pub fn change(self) -> Option<Change> {
        match self {
            Action::Queue(op) => Some(op.change),
            _ => None,
        }
    }

    fn of(op: Option<QueueOp>) -> Action {
        op.map_or(Action::Nothing, Action::Queue)
    }
}

/// Why an I/O is not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IoRefused {
    /// The child is not registered.
    #[error("the child is not registered with the bus")]
    Unbound,
    /// The device failed or was removed: nothing runs on it.
    #[error("the adapter failed or is gone")]
    Failed,
    /// The queue dispatched after the child told the bus it was ready: a reset was promised
    /// no I/O of this child's while it runs.
    #[error("a request was dispatched after ResetExecute (the queue was stopped)")]
    AfterExecute,
}

/// The child's state and counters.
#[derive(Debug, Clone)]
pub struct Child {
    phase: Phase,
    queue: QueueBook,
    vetoes: bool,
    client_id: u64,
    late: bool,
    stats: ChildStats,
}

impl Default for Child {
    fn default() -> Self {
        Child::new()
    }
}

impl Child {
    pub const fn new() -> Child {
        Child {
            phase: Phase::Unbound,
            queue: QueueBook::new(),
            vetoes: false,
            client_id: 0,
            late: false,
            stats: ChildStats {
                size: core::mem::size_of::<ChildStats>() as u32,
                phase: 0,
                epoch: 0,
                client_id: 0,
                dispatched: 0,
                completed: 0,
                failed: 0,
                in_progress: 0,
                executed: 0,
                past_deadline: 0,
                consents: 0,
                vetoes: 0,
                events: [0; 9],
                last_refusal: 0,
                flags: 0,
                reserved: 0,
            },
        }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    pub fn client_id(&self) -> u64 {
        self.client_id
    }

    /// Register answered: the child runs in `epoch` (its queue started: a stop of the
    /// child's own device may have come while a reset held it); or, registered while a reset
    /// ran (`late`), holds its queue until the reset's outcome, owing it nothing; or, the
    /// device Failed (`failed`), fails its I/O until RESET_END brings it back.
    pub fn registered(&mut self, client_id: u64, epoch: u64, late: bool, failed: bool) -> Action {
        self.client_id = client_id;
        self.late = late;
        let (phase, change) = match (late, failed) {
            (_, true) => (Phase::Failed, Change::Purge),
            (true, false) => (Phase::Executed { epoch }, Change::Close),
            (false, false) => (Phase::Running { epoch }, Change::Start),
        };
        self.set_phase(phase);
        Action::of(self.queue.want(change))
    }

    /// Unregister returned (or answered DEVICE_REMOVED): no event follows.
    pub fn unregistered(&mut self) {
        self.set_phase(Phase::Unbound);
    }

    /// Whether it refuses planned resets from now on.
    pub fn set_veto(&mut self, veto: bool) {
        self.vetoes = veto;
    }

    /// An event from the bus.
    pub fn on_event(&mut self, event: BusEvent) -> Action {
        self.count(event);
        let (phase, change) = match (event, self.phase) {
            (_, Phase::Unbound) => return Action::Nothing,
            (BusEvent::ResetQuery { epoch }, _) if self.vetoes => {
                self.stats.vetoes += 1;
                return Action::Veto(epoch);
            }
            (BusEvent::ResetQuery { epoch }, _) => {
                self.stats.consents += 1;
                return Action::Consent(epoch);
            }
            // RESET once per reset (the bus's guarantee): a second of the same epoch, were it
            // sent, changes nothing.
            (
                BusEvent::Reset { epoch, .. },
                Phase::Quiescing { epoch: q } | Phase::Executed { epoch: q },
            ) if q == epoch => return Action::Nothing,
            (BusEvent::Reset { epoch, .. }, _) => (Phase::Quiescing { epoch }, Change::Stop),
            (BusEvent::ResetEnd { epoch }, _) => (Phase::Running { epoch }, Change::Start),
            (BusEvent::ResetAborted { epoch }, Phase::Running { .. }) => {
                self.set_phase(Phase::Running { epoch });
                return Action::Nothing;
            }
            (BusEvent::ResetAborted { epoch }, _) => (Phase::Running { epoch }, Change::Start),
            (BusEvent::ResetFailed { .. } | BusEvent::DeviceFatal, _) => {
                (Phase::Failed, Change::Purge)
            }
            (
                BusEvent::PortActive { .. } | BusEvent::PortDown { .. } | BusEvent::Unknown { .. },
                _,
            ) => return Action::Nothing,
        };
        self.set_phase(phase);
        Action::of(self.queue.want(change))
    }

    /// KMDF's stop callback: the queue dispatches nothing more and every request the driver
    /// owned is completed. The quiesce executes if its own stop asked for this callback;
    /// else (a callback left from an aborted reset's stop) it asks again.
    pub fn queue_idle(&mut self) -> Action {
        let quiescing = match self.phase {
            Phase::Quiescing { epoch } => Some(epoch),
            _ => None,
        };
        match self.queue.idle(quiescing) {
            Idle::Nothing => Action::Nothing,
            Idle::Quiet(epoch) => {
                self.set_phase(Phase::Executed { epoch });
                Action::Execute(epoch)
            }
            Idle::StopAgain(op) => Action::of(op),
        }
    }

    /// Right before the KMDF call of `op`: the call to make ([`QueueBook::performing`]).
    pub fn performing(&mut self, op: QueueOp) -> Change {
        let quiescing = match self.phase {
            Phase::Quiescing { epoch } => Some(epoch),
            _ => None,
        };
        self.queue.performing(op, quiescing)
    }

    /// After the KMDF call of `op`: the next change to carry out, decided meanwhile.
    pub fn applied(&mut self, op: QueueOp) -> Action {
        Action::of(self.queue.applied(op))
    }

    /// The layer gave up carrying changes out (its bound spent).
    pub fn abandon(&mut self) {
        self.queue.abandon();
    }

    /// ResetExecute answered `status`; `past_deadline`: it was PAST_DEADLINE.
    pub fn executed(&mut self, status: i32, past_deadline: bool) {
        if status >= 0 {
            self.stats.executed += 1;
            self.stats.past_deadline += u32::from(past_deadline);
        } else {
            self.refused(status);
        }
    }

    /// A call of the interface was refused with `status`.
    pub fn refused(&mut self, status: i32) {
        self.stats.last_refusal = status;
    }

    /// The queue dispatched a request: run it in the epoch returned, or refuse it. A request
    /// dispatched while the queue stops belongs to the old epoch: the stop waits for it.
    pub fn begin_io(&mut self) -> Result<u64, IoRefused> {
        let refused = match self.phase {
            Phase::Running { epoch } | Phase::Quiescing { epoch } => {
                self.stats.dispatched += 1;
                self.stats.in_progress += 1;
                return Ok(epoch);
            }
            Phase::Unbound => IoRefused::Unbound,
            Phase::Failed => IoRefused::Failed,
            Phase::Executed { .. } => IoRefused::AfterExecute,
        };
        self.stats.dispatched += 1;
        self.stats.failed += 1;
        Err(refused)
    }

    /// An I/O [`Child::begin_io`] let run is about to be completed (`ok`: with success).
    pub fn end_io(&mut self, ok: bool) {
        self.stats.in_progress = self.stats.in_progress.saturating_sub(1);
        if ok {
            self.stats.completed += 1;
        } else {
            self.stats.failed += 1;
        }
    }

    /// A request the child owned was completed without being run (cancelled, purged).
    pub fn io_failed_unrun(&mut self) {
        self.stats.dispatched += 1;
        self.stats.failed += 1;
    }

    /// The counters as IOCTL_HCABUS_CHILD_STATS answers them.
    pub fn stats(&self) -> ChildStats {
        let mut s = self.stats;
        s.phase = self.phase.number();
        s.epoch = self.phase.epoch();
        s.client_id = self.client_id;
        s.flags =
            if self.vetoes { STATS_VETO_ARMED } else { 0 } | if self.late { STATS_LATE } else { 0 };
        s
    }

    fn count(&mut self, event: BusEvent) {
        let kind = match event {
            BusEvent::Reset { .. } => 1,
            BusEvent::ResetEnd { .. } => 2,
            BusEvent::ResetFailed { .. } => 3,
            BusEvent::ResetAborted { .. } => 4,
            BusEvent::DeviceFatal => 5,
            BusEvent::ResetQuery { .. } => 6,
            BusEvent::PortActive { .. } => 7,
            BusEvent::PortDown { .. } => 8,
            BusEvent::Unknown { .. } => 0,
        };
        self.stats.events[kind] += 1;
    }

    /// The one place the phase changes: logged, and asserted legal.
    fn set_phase(&mut self, to: Phase) {
        let from = self.phase;
        let legal = match (from, to) {
            (_, Phase::Unbound) | (_, Phase::Failed) => true,
            (Phase::Unbound, Phase::Running { .. } | Phase::Executed { .. }) => true,
            (Phase::Unbound, _) => false,
            (Phase::Running { .. }, Phase::Quiescing { .. }) => true,
            (Phase::Quiescing { epoch: a }, Phase::Executed { epoch: b }) => a == b,
            // Not sent by this bus (a restart of a failed device sends RESET_END alone), but
            // a purged queue stops at once and the reset is answered as any other.
            (Phase::Failed, Phase::Quiescing { .. }) => true,
            (Phase::Executed { .. }, Phase::Quiescing { .. }) => true,
            (_, Phase::Running { .. }) => true,
            _ => false,
        };
        debug_assert!(legal, "child phase {from:?} -> {to:?}");
        if !legal {
            log::error!("child: phase {from:?} -> {to:?} is not one the protocol has");
        }
        log::debug!("child: {from:?} -> {to:?}");
        self.phase = to;
    }
}
