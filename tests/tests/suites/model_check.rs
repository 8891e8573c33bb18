//! An exhaustive depth-first model check of the real `Coordinator` (not a copy of it).
//!
//! The state is the coordinator, three abstract clients (the third CAN_VETO), the host's
//! queue of deliveries, its armed timers and the hardware steps issued and not completed. A
//! move is any bus call a client may make, the delivery of the next queued event (the host
//! contract: in queue order, with calls interleaving between deliveries), the earliest timer
//! firing, a hardware step completing at once, failing, completing later (after any other
//! moves) or never, a catastrophic health read, a command timeout, surprise removal, an
//! administrator's reset, restart or policy change, port 1 reported Active or Down. Budgets bound it: each client registers at
//! most twice, two faults, two administrator actions, and nothing starts a reset once the
//! epoch is 3 (two resets deep).
//!
//! Hand-rolled rather than stateright: the fingerprint must leave out history (the flight
//! recorder, counters, tokens) that the real coordinator carries, and a search with parent
//! links gives the counterexample trace in ~100 lines; breadth-first makes it shortest.
//!
//! Properties, checked in every state reached: every guarantee of docs/design.md §4 (the invariant
//! checker, strict, with the hardware reset only once no barrier member is quiescing); every
//! state edge is one docs/design.md §5 allows; the epoch only grows, and only on a verified hardware
//! reset; no reset is stuck (in progress with nothing left that could move it: no delivery,
//! no timer, no hardware step to come); the action queue never overflowed.
//! `HCABUS_MODEL_DEPTH=N` explores deeper than the suite's bound. Planted bugs (feature
//! `mutants`) show the properties bite: see the last test.

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::hash::Hasher;

use hcabus::coordinator::*;
use hcabus::hca::{HealthSample, HwCompletion, HwError, HwResult, HwStep, Readiness};
use hcabus::recorder::{HwOutcome, RecordKind};
use hcabus::timers::TimerTable;
use hcabus::types::*;
use hcabus::Instant;
use hcabus_sim::fixtures::{identity, model_policy};
use hcabus_sim::InvariantChecker;
use hcabus_tests::ClientMove;

const CLIENTS: usize = 3;
const MAX_EPOCH: u64 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Move {
    Deliver,
    /// Client `usize` makes the call.
    Client(ClientMove, usize),
    Timer,
    /// The next hardware step fails.
    FailNextStep,
    /// The next hardware step never completes.
    HangNextStep,
    /// The next hardware step completes later, after whatever else happens first (a KMDF
    /// host runs steps in a work item, deliveries in a DPC: either may go first).
    DelayNextStep,
    /// The delayed step completes, successfully.
    CompleteDelayed,
    /// The next health read finds the catastrophic-error buffer set.
    CatastrophicNextRead,
    CommandTimeout,
    Removal,
    AdminForced,
    AdminPlanned,
    AdminRestart,
    PolicyAbortOnUnresponsive,
    /// The hardware reports port 1 Active (with a new LID) or Down.
    PortActive,
    PortDown,
}

#[derive(Debug, Clone, Copy, Default, Hash)]
struct Client {
    id: Option<ClientId>,
    registrations: u8,
    /// RESET heard, not yet executed.
    reset: Option<Epoch>,
    /// RESET_QUERY heard, not yet answered.
    query: Option<Epoch>,
}

#[derive(Debug, Clone)]
struct World {
    c: Coordinator,
    now: Instant,
    timers: TimerTable,
    /// Hardware steps that will never complete.
    hung: Vec<HwStep>,
    /// A step issued and not yet completed, that will complete.
    delayed: Option<HwStep>,
    fail_next: bool,
    hang_next: bool,
    delay_next: bool,
    catastrophic_next: bool,
    /// Deliveries in queue order, each `None` a ResetConcluded between them (the checker
    /// looks at a concluded reset once everything queued before it is delivered).
    inbox: VecDeque<Option<(ClientId, Event)>>,
    clients: [Client; CLIENTS],
    checker: InvariantChecker,
    health_counter: u32,
    faults_left: u8,
    admin_left: u8,
    port_reports_left: u8,
    next_lid: u16,
}

impl World {
    fn new() -> World {
        World::with_mutant(None)
    }

    /// The start state, with `mutant` planted in the coordinator before anyone registers.
    fn with_mutant(mutant: Option<Mutant>) -> World {
        let policy = model_policy();
        let config = Config {
            max_clients: CLIENTS as u16,
            recorder_capacity: 64,
            policy,
        };
        let mut c = Coordinator::new(config, identity(), Instant::ZERO).expect("policy");
        if let Some(m) = mutant {
            c.plant(m);
        }
        let mut w = World {
            checker: InvariantChecker::new(c.max_clients()),
            c,
            now: Instant::ZERO,
            timers: TimerTable::default(),
            hung: Vec::new(),
            delayed: None,
            fail_next: false,
            hang_next: false,
            delay_next: false,
            catastrophic_next: false,
            inbox: VecDeque::new(),
            clients: [Client::default(); CLIENTS],
            health_counter: 0,
            faults_left: 2,
            admin_left: 2,
            port_reports_left: 2,
            next_lid: 1,
        };
        // The adapter's port 1 is up as the bus starts, before anyone registers.
        w.c.port_changed(Instant::ZERO, 1, PortAttrs::bare(PortState::Active, 1))
            .expect("port 1 exists");
        w.drain();
        // Everyone registered; each may leave and come back once.
        for i in 0..CLIENTS {
            w.apply(Move::Client(ClientMove::Register, i));
        }
        w
    }

    fn fingerprint(&self) -> u64 {
        let mut h = hcabus_tests::Fingerprint::default();
        self.c.fingerprint(&mut h);
        self.checker.fingerprint(&mut h);
        let armed: Vec<_> = TimerId::ALL
            .iter()
            .map(|t| self.timers.armed(*t).map(|a| a.0))
            .collect();
        let flags = (
            self.fail_next,
            self.hang_next,
            self.delay_next,
            self.catastrophic_next,
            self.delayed,
        );
        let _ = write!(
            h,
            "{armed:?}{:?}{:?}{:?}{flags:?}{}{}{}{}",
            self.hung,
            self.inbox,
            self.clients,
            self.faults_left,
            self.admin_left,
            self.port_reports_left,
            self.next_lid
        );
        h.finish()
    }

    /// The host: timers into the table, steps to the pending list, events to the inbox.
    fn drain(&mut self) {
        self.checker.sync(&self.c);
        while let Some(a) = self.c.pop_action() {
            match a {
                Action::Deliver { client, event } => self.inbox.push_back(Some((client, event))),
                Action::ArmTimer { .. } | Action::CancelTimer { .. } => {
                    self.timers.apply(&a);
                }
                Action::Hw(step) => self.run_step(step),
                Action::Pnp(_) => {}
                Action::ResetConcluded { .. } => self.inbox.push_back(None),
            }
        }
        self.conclusions();
    }

    /// Concluded resets at the head of the queue: everything before them is delivered.
    fn conclusions(&mut self) {
        while let Some(None) = self.inbox.front() {
            self.inbox.pop_front();
            self.checker.on_reset_concluded(&self.c);
        }
    }

    fn may_start_resets(&self) -> bool {
        self.c.epoch().0 < MAX_EPOCH
    }

    fn moves(&self) -> Vec<Move> {
        let mut m = Vec::new();
        if !self.inbox.is_empty() {
            m.push(Move::Deliver);
        }
        for (i, cl) in self.clients.iter().enumerate() {
            match cl.id {
                None if cl.registrations < 2 => m.push(Move::Client(ClientMove::Register, i)),
                None => {}
                Some(_) => {
                    m.push(Move::Client(ClientMove::Unregister, i));
                    if self.may_start_resets() {
                        m.push(Move::Client(ClientMove::Request, i));
                    }
                }
            }
            if cl.reset.is_some() {
                m.push(Move::Client(ClientMove::Execute, i));
            }
            if cl.query.is_some() {
                m.push(Move::Client(ClientMove::Consent, i));
                if i == CLIENTS - 1 {
                    m.push(Move::Client(ClientMove::Veto, i));
                }
            }
        }
        if self.timers.next_deadline().is_some() {
            m.push(Move::Timer);
        }
        if self.delayed.is_some() {
            m.push(Move::CompleteDelayed);
        }
        let armed = self.fail_next || self.hang_next || self.delay_next || self.catastrophic_next;
        if self.faults_left > 0 && !armed {
            m.extend([Move::FailNextStep, Move::HangNextStep]);
            if self.delayed.is_none() {
                m.push(Move::DelayNextStep);
            }
            if self.may_start_resets() {
                m.extend([
                    Move::CatastrophicNextRead,
                    Move::CommandTimeout,
                    Move::Removal,
                ]);
            }
        }
        if self.admin_left > 0 && self.may_start_resets() {
            m.extend([Move::AdminForced, Move::AdminPlanned, Move::AdminRestart]);
        }
        if self.admin_left > 0 {
            m.push(Move::PolicyAbortOnUnresponsive);
        }
        if self.port_reports_left > 0 {
            m.extend([Move::PortActive, Move::PortDown]);
        }
        m
    }

    fn deliver(&mut self) {
        let Some(Some((client, event))) = self.inbox.pop_front() else {
            return;
        };
        if self.c.client(client).is_ok() {
            self.checker.on_deliver(client, event);
            if let Some(cl) = self.clients.iter_mut().find(|c| c.id == Some(client)) {
                match event {
                    Event::Reset { epoch, .. } => cl.reset = Some(epoch),
                    Event::ResetQuery { epoch, .. } => cl.query = Some(epoch),
                    Event::ResetAborted { .. } => cl.query = None,
                    _ => {}
                }
                if !matches!(event, Event::Reset { .. } | Event::ResetQuery { .. }) {
                    cl.reset = None;
                }
            }
        }
        self.c.event_delivered(self.now, client, event.kind());
        self.conclusions();
    }

    /// A hardware step, at once (the device is fast next to the protocol): it succeeds
    /// unless a fault was armed for it.
    fn run_step(&mut self, step: HwStep) {
        self.checker.on_hw_step(&self.c, step);
        if std::mem::take(&mut self.hang_next) {
            self.hung.push(step);
            return;
        }
        if std::mem::take(&mut self.delay_next) {
            self.delayed = Some(step);
            return;
        }
        self.complete(step);
    }

    fn complete(&mut self, step: HwStep) {
        let fail = std::mem::take(&mut self.fail_next) && step != HwStep::ReadHealth;
        let result = if fail {
            HwResult::Failed(HwError::DeviceError)
        } else {
            match step {
                HwStep::ProbeReady => HwResult::Readiness(Readiness::Ready),
                HwStep::ReadIdentity => HwResult::Identity(identity()),
                HwStep::ReadHealth => {
                    self.health_counter += 1;
                    let catastrophic = std::mem::take(&mut self.catastrophic_next);
                    HwResult::Health(HealthSample {
                        catastrophic: u32::from(catastrophic),
                        counter: self.health_counter,
                    })
                }
                _ => HwResult::Done,
            }
        };
        self.c.hw_complete(self.now, HwCompletion { step, result });
    }

    fn apply(&mut self, mv: Move) {
        match mv {
            Move::Deliver => self.deliver(),
            Move::Client(m, i) => self.apply_client(m, i),
            _ => self.apply_world(mv),
        }
        self.drain();
    }

    /// A client's move: it registers, leaves, asks, executes, consents or vetoes.
    fn apply_client(&mut self, mv: ClientMove, i: usize) {
        let now = self.now;
        let id = |w: &World, i: usize| w.clients[i].id;
        match mv {
            ClientMove::Register => {
                let flags = if i == CLIENTS - 1 {
                    ClientFlags::CAN_VETO
                } else {
                    ClientFlags::empty()
                };
                let desc = ClientDesc::new("c", ClientKind::Custom, flags).expect("fits");
                self.clients[i].registrations += 1;
                if let Ok(r) = self.c.register(now, desc) {
                    self.clients[i] = Client {
                        id: Some(r.id),
                        registrations: self.clients[i].registrations,
                        reset: None,
                        query: None,
                    };
                }
            }
            ClientMove::Unregister => {
                if let Some(cid) = id(self, i) {
                    let _ = self.c.unregister(now, cid);
                }
                self.clients[i] = Client {
                    registrations: self.clients[i].registrations,
                    ..Client::default()
                };
            }
            ClientMove::Request => {
                if let Some(cid) = id(self, i) {
                    let _ = self.c.reset_request(now, cid);
                }
            }
            ClientMove::Execute => {
                if let (Some(cid), Some(e)) = (id(self, i), self.clients[i].reset.take()) {
                    let _ = self.c.reset_execute(now, cid, e);
                }
            }
            ClientMove::Consent => {
                if let (Some(cid), Some(e)) = (id(self, i), self.clients[i].query.take()) {
                    let _ = self.c.reset_consent(now, cid, e);
                }
            }
            ClientMove::Veto => {
                if let (Some(cid), Some(e)) = (id(self, i), self.clients[i].query.take()) {
                    let _ = self.c.reset_veto(now, cid, e, VetoReason::cut("model"));
                }
            }
        }
    }

    /// What the world does: a timer, a fault, the administrator, the fabric.
    fn apply_world(&mut self, mv: Move) {
        let now = self.now;
        match mv {
            Move::Timer => {
                if let Some((at, timer, token)) =
                    self.timers.take_earliest(Instant::from_us(u64::MAX))
                {
                    self.now = self.now.max(at);
                    self.c.timer_expired(self.now, timer, token);
                }
            }
            Move::FailNextStep => {
                self.faults_left -= 1;
                self.fail_next = true;
            }
            Move::HangNextStep => {
                self.faults_left -= 1;
                self.hang_next = true;
            }
            Move::DelayNextStep => {
                self.faults_left -= 1;
                self.delay_next = true;
            }
            Move::CompleteDelayed => {
                if let Some(step) = self.delayed.take() {
                    self.complete(step);
                }
            }
            Move::CatastrophicNextRead => {
                self.faults_left -= 1;
                self.catastrophic_next = true;
            }
            Move::CommandTimeout => {
                self.faults_left -= 1;
                self.c.command_timeout(now);
            }
            Move::Removal => {
                self.faults_left -= 1;
                self.c.surprise_removal(now);
            }
            Move::AdminForced | Move::AdminPlanned => {
                self.admin_left -= 1;
                let kind = if mv == Move::AdminForced {
                    AdminReset::Forced
                } else {
                    AdminReset::Planned
                };
                let _ = self.c.admin_reset(now, kind);
            }
            Move::AdminRestart => {
                self.admin_left -= 1;
                let _ = self.c.admin_restart(now);
            }
            Move::PortActive | Move::PortDown => {
                self.port_reports_left -= 1;
                let (state, lid) = if mv == Move::PortActive {
                    self.next_lid += 1;
                    (PortState::Active, self.next_lid)
                } else {
                    (PortState::Down, 0)
                };
                self.c
                    .port_changed(now, 1, PortAttrs::bare(state, lid))
                    .expect("port 1");
            }
            Move::PolicyAbortOnUnresponsive => {
                self.admin_left -= 1;
                let mut p = *self.c.policy();
                p.abort_on_unresponsive = !p.abort_on_unresponsive;
                let _ = self.c.set_policy(now, p);
            }
            _ => unreachable!("not the world's move: {mv:?}"),
        }
    }

    /// Every property of the module doc, for the step from `before` by `mv`.
    fn check(&self, before: &World, mv: Move) -> Result<(), String> {
        if let Some(v) = self.checker.violations.first() {
            return Err(format!("docs/design.md §4 guarantee broken: {v}"));
        }
        let seen = before.c.recorder().next_seq();
        for r in self.c.recorder().since(seen) {
            if let RecordKind::Transition { from, to } = r.kind {
                if !from.may_become(to) {
                    return Err(format!(
                        "state edge {from} -> {to} is not in docs/design.md §5"
                    ));
                }
            }
        }
        let (e0, e1) = (before.c.epoch(), self.c.epoch());
        if e1 < e0 {
            return Err(format!("epoch went back from {e0} to {e1}"));
        }
        if e1 > e0 {
            // Verified: the last identity read of this step succeeded.
            let verified = self.c.recorder().since(seen).any(|r| {
                r.kind
                    == RecordKind::Hw {
                        step: HwStep::ReadIdentity,
                        outcome: HwOutcome::Done,
                        detail: 0,
                    }
            });
            if !verified {
                return Err(format!(
                    "epoch {e0} -> {e1} without a verified hardware reset ({mv:?})"
                ));
            }
        }
        let stuck = self.c.reset_in_progress()
            && self.inbox.is_empty()
            && self.timers.is_empty()
            && self.delayed.is_none()
            && self.c.state() != State::Failed;
        if stuck {
            return Err("a reset is in progress and nothing can ever move it".into());
        }
        if self.c.counters().actions_overflowed > 0 {
            return Err("the action queue overflowed".into());
        }
        Ok(())
    }
}

/// What a check explored.
struct Explored {
    states: usize,
    transitions: usize,
    max_epoch: u64,
    counterexample: Option<(Vec<Move>, String)>,
}

/// Depth-first to `depth` moves; a state is explored again only when reached in fewer moves
/// than before (so the bound holds for every state), which keeps memory to one fingerprint
/// per state and the current path.
fn explore(depth: usize, mutant: Option<Mutant>) -> Explored {
    let start = World::with_mutant(mutant);
    let mut best: HashMap<u64, usize> = HashMap::new();
    best.insert(start.fingerprint(), 0);
    // Path nodes: (parent, move), for the counterexample.
    let mut nodes: Vec<(usize, Option<Move>)> = vec![(0, None)];
    let mut stack = vec![(start, 0usize, 0usize)];
    let mut out = Explored {
        states: 1,
        transitions: 0,
        max_epoch: 1,
        counterexample: None,
    };
    while let Some((w, node, d)) = stack.pop() {
        if d == depth {
            continue;
        }
        for mv in w.moves() {
            let mut next = w.clone();
            next.apply(mv);
            out.transitions += 1;
            nodes.push((node, Some(mv)));
            let here = nodes.len() - 1;
            if let Err(why) = next.check(&w, mv) {
                let mut trace = Vec::new();
                let mut at = here;
                while let (parent, Some(m)) = nodes[at] {
                    trace.push(m);
                    at = parent;
                }
                trace.reverse();
                out.counterexample = Some((trace, why));
                return out;
            }
            let fp = next.fingerprint();
            let known = best.get(&fp).copied();
            if known.is_none_or(|k| k > d + 1) {
                if known.is_none() {
                    out.states += 1;
                }
                best.insert(fp, d + 1);
                out.max_epoch = out.max_epoch.max(next.c.epoch().0);
                stack.push((next, here, d + 1));
            } else {
                nodes.pop();
            }
        }
    }
    out
}

#[test]
fn the_real_coordinator_keeps_every_guarantee_in_every_reachable_state() {
    let depth = std::env::var("HCABUS_MODEL_DEPTH")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    let started = std::time::Instant::now();
    let found = explore(depth, None);
    eprintln!(
        "model check to depth {depth}: {} states, {} transitions, epochs up to {}, {:.1} s",
        found.states,
        found.transitions,
        found.max_epoch,
        started.elapsed().as_secs_f64()
    );
    if let Some((trace, why)) = found.counterexample {
        panic!("{why}\ncounterexample ({} moves): {trace:?}", trace.len());
    }
    assert!(
        found.states > 1_000,
        "the bound explores something: {}",
        found.states
    );
}

/// The first counterexample the check found, kept as a regression test: with no client, a
/// health read that never answered and then a closing read that never answered held an
/// administrator's reset in Quiescing for ever (nothing was armed to move it). Now the next
/// poll finds the read unanswered and treats the device as unreadable.
#[test]
fn a_health_read_that_never_answers_cannot_hold_a_reset() {
    use Move::*;
    let mut w = World::new();
    for mv in [
        Client(ClientMove::Unregister, 0),
        Client(ClientMove::Unregister, 1),
        Client(ClientMove::Unregister, 2),
        HangNextStep,
        Timer,
        HangNextStep,
        AdminForced,
    ] {
        let before = w.clone();
        w.apply(mv);
        assert_eq!(w.check(&before, mv), Ok(()), "{mv:?}");
    }
    assert!(w.c.reset_in_progress());
    assert!(!w.timers.is_empty(), "something can still move the reset");
    for _ in 0..50 {
        if !w.c.reset_in_progress() {
            break;
        }
        w.apply(Timer);
    }
    assert!(!w.c.reset_in_progress(), "the reset concluded");
    assert_eq!(w.c.epoch(), Epoch(2));
    let r = w.c.last_reset().expect("record");
    assert_eq!(
        r.reason,
        ResetReason::Catastrophic,
        "an unreadable device is a fatal cause"
    );
}

/// How deep the search for a planted bug may go: a veto after RESET needs the query heard, its
/// deadline, the veto and a RESET delivered (7 moves with two clients gone).
const MUTANT_DEPTH: usize = 8;

/// The shortest counterexample to `mutant` within `max_depth` moves, breadth-first: each
/// state is expanded once, at its shortest distance, so the first property broken is at the
/// least depth (iterative deepening explored every shallower depth again first, two thirds of
/// this suite's time). A layer keeps its states as paths, replayed to expand them: a world
/// apiece would hold gigabytes. With the states seen.
fn counterexample_to(mutant: Mutant, max_depth: usize) -> Option<(Vec<Move>, String, usize)> {
    let start = World::with_mutant(Some(mutant));
    let mut seen = std::collections::HashSet::from([start.fingerprint()]);
    // Path nodes: (parent, move); a layer is a list of nodes.
    let mut nodes: Vec<(u32, Option<Move>)> = vec![(0, None)];
    let mut layer = vec![0u32];
    for _ in 0..max_depth {
        let mut next_layer = Vec::new();
        for node in layer {
            let mut w = start.clone();
            for mv in hcabus_tests::path_to(&nodes, node) {
                w.apply(mv);
            }
            for mv in w.moves() {
                let mut next = w.clone();
                next.apply(mv);
                if let Err(why) = next.check(&w, mv) {
                    let mut trace = hcabus_tests::path_to(&nodes, node);
                    trace.push(mv);
                    return Some((trace, why, seen.len()));
                }
                if seen.insert(next.fingerprint()) {
                    nodes.push((node, Some(mv)));
                    next_layer.push(u32::try_from(nodes.len() - 1).expect("nodes fit u32"));
                }
            }
        }
        layer = next_layer;
    }
    None
}

/// Replays `trace` from the start; the first property broken, with the step that broke it.
fn replay(trace: &[Move], mutant: Option<Mutant>) -> Option<(usize, String)> {
    let mut w = World::with_mutant(mutant);
    for (i, mv) in trace.iter().enumerate() {
        let before = w.clone();
        w.apply(*mv);
        if let Err(why) = w.check(&before, *mv) {
            return Some((i, why));
        }
    }
    None
}

/// Each planted protocol bug is caught, with a counterexample trace that breaks a property on
/// the mutant and none on the real coordinator. Each search on its own thread: the deepest
/// alone takes most of this suite's time, and the others need not wait for it.
#[test]
fn every_planted_protocol_bug_is_caught_with_a_counterexample() {
    std::thread::scope(|s| {
        for mutant in Mutant::ALL {
            s.spawn(move || caught_with_a_counterexample(mutant));
        }
    });
}

fn caught_with_a_counterexample(mutant: Mutant) {
    let Some((trace, why, states)) = counterexample_to(mutant, MUTANT_DEPTH) else {
        panic!("{mutant:?} survived the model check to depth {MUTANT_DEPTH}");
    };
    eprintln!(
        "{mutant:?}: caught after {states} states, {} moves: {trace:?}\n  {why}",
        trace.len()
    );
    let broken = replay(&trace, Some(mutant));
    assert_eq!(
        broken.map(|b| b.0),
        Some(trace.len() - 1),
        "{mutant:?}: the trace breaks a property at its last move"
    );
    assert_eq!(
        replay(&trace, None),
        None,
        "{mutant:?}: the real coordinator keeps every property on the same trace"
    );
}
