//! `Stepper`: the coordinator driven by hand, for tests and model checking.
//!
//! No clients run here: the caller makes every bus call itself between steps, and
//! deliveries are collected rather than delivered. Hardware steps run on a [`SimDevice`]
//! (`SimHca`, or `MmioHca` on the fake register file), timers in virtual time, and every
//! delivery goes through the [`InvariantChecker`].

use std::vec::Vec;

use crate::fake_connectx::FakeConnectX;
use crate::hca::SimHca;
use crate::invariants::InvariantChecker;
use hcabus::coordinator::{Action, Config, Coordinator};
use hcabus::hca::{execute, Hca, HwError, HwStep};
use hcabus::mmio::MmioHca;
use hcabus::policy::PolicyError;
use hcabus::time::{Duration, Instant};
use hcabus::timers::TimerTable;
use hcabus::types::{ClientId, Event, EventKind};
use hcabus::types::{PnpOp, State};

/// The most actions one [`Stepper::pump`] runs before it calls the coordinator runaway.
const PUMP_BOUND: u32 = 1_000_000;
/// The most timers one advance fires.
const EXPIRY_BOUND: u32 = 100_000;

/// A device on virtual time: the host tells it the time before each step.
pub trait SimDevice: Hca {
    fn set_now(&mut self, now: Instant);
}

impl SimDevice for SimHca {
    fn set_now(&mut self, now: Instant) {
        SimHca::set_now(self, now);
    }
}

impl SimDevice for MmioHca<FakeConnectX> {
    fn set_now(&mut self, now: Instant) {
        self.regs_mut().set_now(now);
    }
}

/// Why a stepper could not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StepperError {
    #[error("invalid policy: {0}")]
    Policy(PolicyError),
    /// The device did not give its identity.
    #[error("cannot read the device identity: {0}")]
    Hardware(HwError),
}

#[derive(Debug)]
pub struct Stepper<H: SimDevice = SimHca> {
    c: Coordinator,
    hca: H,
    now: Instant,
    /// Armed timers.
    timers: TimerTable,
    /// Every delivery, in order.
    delivered: Vec<(ClientId, Event)>,
    hw_steps: Vec<HwStep>,
    pnp: Vec<PnpOp>,
    /// `ResetConcluded` actions seen.
    concluded: u32,
    checker: InvariantChecker,
    /// Panic at the first violated guarantee (for unit tests) instead of only recording it.
    strict: bool,
    /// What becomes of a health read.
    health_reads: HealthReads,
}

/// How the stepper's device answers health reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HealthReads {
    /// At once, as every other step.
    Answered,
    /// Never (a device that stopped answering them).
    Unanswered,
    /// When the test says, oldest first: this many wait.
    Held(usize),
}

impl Stepper {
    pub fn new(config: Config, hca: SimHca) -> Result<Self, StepperError> {
        Stepper::with_device(config, hca)
    }
}

impl<H: SimDevice> Stepper<H> {
    /// A stepper over any simulated device; its identity is read as a driver reads it at
    /// start.
    pub fn with_device(config: Config, mut hca: H) -> Result<Self, StepperError> {
        hca.set_now(Instant::ZERO);
        let identity = hca.identity().map_err(StepperError::Hardware)?;
        let c = Coordinator::new(config, identity, Instant::ZERO).map_err(StepperError::Policy)?;
        let mut s = Stepper {
            checker: InvariantChecker::new(c.max_clients()),
            c,
            hca,
            now: Instant::ZERO,
            timers: TimerTable::default(),
            delivered: Vec::new(),
            hw_steps: Vec::new(),
            pnp: Vec::new(),
            concluded: 0,
            strict: false,
            health_reads: HealthReads::Answered,
        };
        s.pump();
        Ok(s)
    }

    /// Panics at the first violated event guarantee (for unit tests) instead of only
    /// recording it in [`Stepper::checker`].
    pub fn set_strict(&mut self, strict: bool) {
        self.strict = strict;
    }

    /// From now on the device answers no health read: each is issued and left outstanding.
    pub fn leave_health_reads_unanswered(&mut self) {
        self.health_reads = HealthReads::Unanswered;
    }

    /// From now on health reads wait until [`Stepper::answer_health_read`] answers them, so
    /// that a test can act while one is outstanding.
    pub fn hold_health_reads(&mut self) {
        self.health_reads = HealthReads::Held(0);
    }

    /// Health reads issued and not yet answered since [`Stepper::hold_health_reads`].
    pub fn held_health_reads(&self) -> usize {
        match self.health_reads {
            HealthReads::Held(n) => n,
            HealthReads::Answered | HealthReads::Unanswered => 0,
        }
    }

    /// Answers the oldest held health read with what the device holds now, and pumps.
    /// Panics when none is held: a test that expected one is wrong.
    pub fn answer_health_read(&mut self) {
        let HealthReads::Held(n) = self.health_reads else {
            panic!("health reads are not held");
        };
        assert!(n > 0, "no health read is outstanding");
        self.health_reads = HealthReads::Held(n - 1);
        self.hca.set_now(self.now);
        let done = execute(&mut self.hca, HwStep::ReadHealth);
        self.c.hw_complete(self.now, done);
        self.pump();
    }

    /// One input to the coordinator at the current virtual time. Its actions stay queued
    /// until [`Stepper::pump`], so a test can look between the call and its effects.
    pub fn call<R>(&mut self, input: impl FnOnce(&mut Coordinator, Instant) -> R) -> R {
        input(&mut self.c, self.now)
    }

    pub fn c(&self) -> &Coordinator {
        &self.c
    }

    pub fn now(&self) -> Instant {
        self.now
    }

    pub fn hca(&self) -> &H {
        &self.hca
    }

    /// The adapter, to inject faults into (or to replace before anything ran).
    pub fn hca_mut(&mut self) -> &mut H {
        &mut self.hca
    }

    /// Armed timers.
    pub fn timers(&self) -> &TimerTable {
        &self.timers
    }

    /// Every delivery, in order.
    pub fn delivered(&self) -> &[(ClientId, Event)] {
        &self.delivered
    }

    /// Every hardware step executed, in order.
    pub fn hw_steps(&self) -> &[HwStep] {
        &self.hw_steps
    }

    /// Every PnP operation asked for, in order.
    pub fn pnp(&self) -> &[PnpOp] {
        &self.pnp
    }

    /// `ResetConcluded` actions seen.
    pub fn concluded(&self) -> u32 {
        self.concluded
    }

    pub fn checker(&self) -> &InvariantChecker {
        &self.checker
    }

    /// Executes every queued action; deliveries are recorded, checked and acknowledged.
    pub fn pump(&mut self) {
        self.checker.sync(&self.c);
        // Each action may queue more, at the same instant; a million is far past any reset
        // and makes a coordinator that feeds itself forever a failed test, not a hung one.
        for _ in 0..PUMP_BOUND {
            let Some(a) = self.c.pop_action() else {
                return;
            };
            if let Action::Deliver { client, event } = a {
                self.deliver(client, event);
            } else {
                self.execute(a);
            }
        }
        panic!(
            "{PUMP_BOUND} actions in one pump at {}: the coordinator feeds itself",
            self.now
        );
    }

    /// Delivers one event (recorded, checked, acknowledged) without pumping.
    pub fn deliver(&mut self, client: ClientId, event: Event) {
        // A client that unregistered after the event was queued: dropped, as hosts do.
        if self.c.client(client).is_ok() {
            self.checker.on_deliver(client, event);
            self.delivered.push((client, event));
            self.enforce();
        }
        self.c.event_delivered(self.now, client, event.kind());
    }

    /// Everything but a delivery.
    fn execute(&mut self, a: Action) {
        match a {
            Action::Deliver { .. } => {}
            Action::ArmTimer { .. } | Action::CancelTimer { .. } => {
                self.timers.apply(&a);
            }
            Action::Hw(step) => {
                self.checker.on_hw_step(&self.c, step);
                self.hw_steps.push(step);
                if step == HwStep::ReadHealth {
                    match self.health_reads {
                        HealthReads::Answered => {}
                        HealthReads::Unanswered => return,
                        HealthReads::Held(n) => {
                            self.health_reads = HealthReads::Held(n + 1);
                            return;
                        }
                    }
                }
                self.hca.set_now(self.now);
                let done = execute(&mut self.hca, step);
                self.c.hw_complete(self.now, done);
            }
            Action::Pnp(op) => self.pnp.push(op),
            Action::ResetConcluded { .. } => {
                self.concluded += 1;
                self.checker.on_reset_concluded(&self.c);
                self.enforce();
            }
        }
    }

    /// Fires timers due at or before `until`, in deadline order, moving time with them.
    fn fire_due(&mut self, until: Instant, mut after_each: impl FnMut(&mut Self)) {
        // A timer re-armed for the instant it fired at would spin here forever: the bound
        // makes that a failed test (no reset arms more than a few timers per instant).
        let (mut last_at, mut not_later, mut fired) = (None, 0u32, 0u32);
        while let Some((at, timer, token)) = self.timers.take_earliest(until) {
            assert!(at <= until, "{timer:?} taken at {at}, after {until}");
            // No reset fires more than a few thousand timers in a test's span: a timer
            // re-armed a microsecond on is a spin, made a failed test.
            fired += 1;
            assert!(
                fired <= EXPIRY_BOUND,
                "{EXPIRY_BOUND} timers fired before {until}"
            );
            not_later = if last_at.is_some_and(|l| at <= l) {
                not_later + 1
            } else {
                0
            };
            last_at = Some(at);
            assert!(
                not_later < 1_000,
                "{timer:?} fired 1000 times without time moving past {at}: a timer re-armed \
                 for an instant already passed"
            );
            self.now = self.now.max(at);
            self.c.timer_expired(self.now, timer, token);
            after_each(self);
        }
    }

    fn enforce(&self) {
        if self.strict {
            assert!(
                self.checker.violations.is_empty(),
                "event guarantee violated: {:?}",
                self.checker.violations
            );
        }
    }

    /// Moves time forward by `ms`, firing timers as they come due.
    pub fn advance(&mut self, ms: u64) {
        let end = self.now + Duration::from_ms(ms);
        self.fire_due(end, Self::pump);
        self.now = end;
    }

    /// Runs timers and hardware in 10 ms steps, holding deliveries back, until the bus is
    /// Restoring (RESET_END queued, not yet delivered). Returns the held deliveries, or
    /// `None` if Restoring was not reached within 10 s.
    pub fn drive_to_restoring(&mut self) -> Option<Vec<(ClientId, Event)>> {
        let mut held = Vec::new();
        let mut hold = |s: &mut Self| {
            for _ in 0..PUMP_BOUND {
                match s.c.pop_action() {
                    Some(Action::Deliver { client, event }) => held.push((client, event)),
                    Some(other) => s.execute(other),
                    None => return,
                }
            }
            panic!("{PUMP_BOUND} actions in one pump: the coordinator feeds itself");
        };
        for _ in 0..1_000 {
            let until = self.now + Duration::from_ms(10);
            hold(self);
            self.fire_due(until, &mut hold);
            self.now = until;
            if self.c.state() == State::Restoring {
                return Some(held);
            }
        }
        None
    }

    /// Delivers what [`Stepper::drive_to_restoring`] held back, then pumps.
    pub fn deliver_held(&mut self, held: Vec<(ClientId, Event)>) {
        self.checker.sync(&self.c);
        for (client, event) in held {
            self.deliver(client, event);
        }
        self.pump();
    }

    /// Kinds of the events delivered to `id`, in order.
    pub fn events_of(&self, id: ClientId) -> Vec<EventKind> {
        self.delivered
            .iter()
            .filter(|(c, _)| *c == id)
            .map(|(_, e)| e.kind())
            .collect()
    }
}
