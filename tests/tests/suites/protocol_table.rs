//! docs/protocol.md's "The protocol as a table", generated from the real coordinator.
//!
//! A breadth-first walk from a bus with two clients (the second CAN_VETO) and port 1 up tries
//! every input in every state it reaches: each client call, the next delivery, each armed
//! timer, the oldest hardware step completing, failing or a completion nobody asked for, a
//! health read that finds a catastrophic error, each fault and administrative act. What the
//! input did (refused with which error; accepted, the stage it led to and the actions it
//! asked for; deferred, and until what) is kept per stage ([`Coordinator::stage_name`]) and
//! input. The test fails when the document's copy differs from what the code does now:
//! `HCABUS_BLESS=1 cargo test -p hcabus-tests --test suites protocol_table` rewrites it.
//!
//! Two properties are checked on the way: every fault, administrative act, removal, policy
//! change, port change and stray completion has an outcome in every stage reached (those
//! that start a reset, wherever the stage is reached below the epoch bound), and nothing
//! deferred waits forever: from every state where an input was deferred, a host that
//! delivers, answers and completes everything reaches the deferred reset's start (or a
//! Failed or Removed device).

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};

use hcabus::coordinator::*;
use hcabus::hca::{HealthSample, HwCompletion, HwError, HwResult, HwStep, Readiness};
use hcabus::recorder::RecordKind;
use hcabus::timers::TimerTable;
use hcabus::types::*;
use hcabus::{Instant, Policy};
use hcabus_sim::fixtures::{identity, model_policy};
use hcabus_tests::{desc, ClientMove};

const CLIENTS: usize = 2;
/// A bound on the walk, far above the states it finds: a change that makes the abstract
/// state space blow up fails the test instead of running away.
const MAX_STATES: usize = 3_000_000;
/// Steps a stray completion (one nobody issued: a late answer of an attempt given up) may
/// be of: the first not issued now.
const STRAYS: [HwStep; 3] = [
    HwStep::RestoreConfig,
    HwStep::InitCommandInterface,
    HwStep::SaveConfig,
];
/// Deliveries a walked state may have queued.
const MAX_QUEUED: usize = 3;
/// Hardware steps a walked state may have issued and not completed.
const MAX_ISSUED: usize = 2;
/// No input starts another reset once the epoch is this (two resets deep).
const MAX_EPOCH: u64 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Input {
    /// Client `usize` makes the call.
    Client(ClientMove, usize),
    Deliver,
    Timer(TimerId),
    StepDone,
    StepFails,
    StrayCompletion,
    HealthCatastrophic,
    CommandTimeout,
    Catastrophic,
    Removal,
    Admin(AdminReset),
    AdminRestart,
    SetPolicy,
    PortDown,
    PortActive,
}

impl Input {
    /// Its row in the table. Client 1 is the CAN_VETO one: the two differ only in a veto.
    fn label(self) -> String {
        let who = |i: usize| if i == 1 { " (CAN_VETO client)" } else { "" };
        match self {
            Input::Client(m, i) => {
                let who = if m == ClientMove::Veto { who(i) } else { "" };
                format!("client: {}{who}", m.call().as_str())
            }
            Input::Deliver => "host: the next event delivered".into(),
            Input::Timer(t) => format!("timer: {}", t.as_str()),
            Input::StepDone => "hardware: the step issued completes".into(),
            Input::StepFails => "hardware: the step issued fails".into(),
            Input::StrayCompletion => "hardware: a completion of a step not issued".into(),
            Input::HealthCatastrophic => {
                "hardware: a health read finds a catastrophic error".into()
            }
            Input::CommandTimeout => "hardware: command timeout".into(),
            Input::Catastrophic => "hardware: catastrophic interrupt".into(),
            Input::Removal => "PnP: surprise removal".into(),
            Input::Admin(k) => format!("admin: reset {}", admin_name(k)),
            Input::AdminRestart => "admin: restart".into(),
            Input::SetPolicy => "admin: set_policy".into(),
            Input::PortDown => "hardware: port 1 down".into(),
            Input::PortActive => "hardware: port 1 active".into(),
        }
    }
}

fn admin_name(k: AdminReset) -> &'static str {
    match k {
        AdminReset::Forced => "forced",
        AdminReset::Planned => "planned",
        AdminReset::FirmwareActivate => "fw_activate",
    }
}

/// The coordinator and what a host holds for it: queued deliveries, armed timers, hardware
/// steps issued and not completed, and what each client last heard.
#[derive(Clone)]
struct World {
    c: Coordinator,
    now: Instant,
    queue: VecDeque<(ClientId, Event)>,
    timers: TimerTable,
    steps: VecDeque<HwStep>,
    ids: [Option<ClientId>; CLIENTS],
    heard: [Option<Epoch>; CLIENTS],
    health: u32,
    /// Resets asserted (soft or FLR) since the device last left Resetting: a retry and the
    /// FLR are other situations than the first assert.
    asserts: u8,
}

impl World {
    fn new() -> World {
        // One retry: the table shows a retry's assert as well as the FLR.
        let policy = Policy {
            reset_retries: 1,
            ..model_policy()
        };
        let config = Config {
            max_clients: CLIENTS as u16,
            recorder_capacity: 32,
            policy,
        };
        let c = Coordinator::new(config, identity(), Instant::ZERO).expect("policy");
        let mut w = World {
            c,
            now: Instant::ZERO,
            queue: VecDeque::new(),
            timers: TimerTable::default(),
            steps: VecDeque::new(),
            ids: [None; CLIENTS],
            heard: [None; CLIENTS],
            health: 0,
            asserts: 0,
        };
        w.port(PortState::Active).expect("port 1");
        for i in 0..CLIENTS {
            w.apply(Input::Client(ClientMove::Register, i))
                .expect("room for every client");
        }
        w.drain();
        w
    }

    /// The state as far as the table's outcomes can tell it apart: the stage, each
    /// client's state, what the host holds (queued event kinds, which timers are armed,
    /// the steps issued), the port, the policy's one changeable flag, and the epoch up to
    /// the bound. Counters, deadlines and tokens are left out: two states that differ only
    /// there behave alike, and leaving them out keeps the walk finite and small.
    fn key(&self) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.c.stage_name().hash(&mut h);
        self.c.epoch().0.min(MAX_EPOCH).hash(&mut h);
        for info in self.c.clients() {
            (info.id.index, info.state, info.in_barrier).hash(&mut h);
        }
        // What the next delivery and the next completion are, and how many wait.
        let next = self.queue.front().map(|(id, e)| (id.index, e.kind()));
        (next, self.queue.len()).hash(&mut h);
        for t in TimerId::ALL {
            self.timers.armed(t).is_some().hash(&mut h);
        }
        (self.steps.front(), self.steps.len()).hash(&mut h);
        self.ids.map(|id| id.is_some()).hash(&mut h);
        self.heard.map(|e| e.is_some()).hash(&mut h);
        self.asserts.hash(&mut h);
        self.c.port(1).map(|p| p.state).hash(&mut h);
        self.c.policy().abort_on_unresponsive.hash(&mut h);
        h.finish()
    }

    /// Takes the coordinator's actions into the host's queues; what they were, for the table.
    fn drain(&mut self) -> BTreeSet<String> {
        let mut did = BTreeSet::new();
        while let Some(a) = self.c.pop_action() {
            match a {
                Action::Deliver { client, event } => {
                    if let Some(i) = self.ids.iter().position(|id| *id == Some(client)) {
                        if let Event::Reset { epoch, .. } | Event::ResetQuery { epoch, .. } = event
                        {
                            self.heard[i] = Some(epoch);
                        }
                    }
                    self.queue.push_back((client, event));
                    did.insert(format!("deliver {}", event.kind().as_str()));
                }
                Action::ArmTimer { timer, at, token } => {
                    self.timers.arm(timer, at, token);
                    did.insert(format!("arm {}", timer.as_str()));
                }
                Action::CancelTimer { timer } => {
                    self.timers.cancel(timer);
                    did.insert(format!("cancel {}", timer.as_str()));
                }
                Action::Hw(step) => {
                    if matches!(step, HwStep::AssertReset | HwStep::FunctionLevelReset) {
                        self.asserts += 1;
                    }
                    self.steps.push_back(step);
                    did.insert(format!("hw {}", step.as_str()));
                }
                Action::Pnp(op) => {
                    did.insert(format!("PnP {}", op.as_str()));
                }
                Action::ResetConcluded { .. } => {
                    did.insert("reset concluded".into());
                }
            }
        }
        if self.c.state() != State::Resetting {
            self.asserts = 0;
        }
        did
    }

    fn port(&mut self, state: PortState) -> Result<(), String> {
        let lid = if state == PortState::Active { 1 } else { 0 };
        let attrs = PortAttrs::bare(state, lid);
        self.c.port_changed(self.now, 1, attrs).map_err(err)
    }

    fn complete(&mut self, fails: bool, catastrophic: bool) -> Result<(), String> {
        let step = self.steps.pop_front().ok_or("no step issued")?;
        let result = match step {
            _ if fails => HwResult::Failed(HwError::DeviceError),
            HwStep::ProbeReady => HwResult::Readiness(Readiness::Ready),
            HwStep::ReadIdentity => HwResult::Identity(identity()),
            HwStep::ReadHealth => {
                self.health += 1;
                HwResult::Health(HealthSample {
                    catastrophic: u32::from(catastrophic),
                    counter: self.health,
                })
            }
            _ => HwResult::Done,
        };
        self.c.hw_complete(self.now, HwCompletion { step, result });
        Ok(())
    }

    fn stray(&self) -> Option<HwStep> {
        STRAYS.into_iter().find(|s| !self.steps.contains(s))
    }

    /// Whether `input` can be made here at all (a client that exists, a timer armed...).
    fn possible(&self, input: Input) -> bool {
        let starts_reset = matches!(
            input,
            Input::Client(ClientMove::Request, _)
                | Input::CommandTimeout
                | Input::Catastrophic
                | Input::HealthCatastrophic
                | Input::Admin(_)
                | Input::AdminRestart
        );
        if starts_reset && self.c.epoch().0 >= MAX_EPOCH {
            return false;
        }
        match input {
            Input::Client(m, i) => match m {
                ClientMove::Register => self.ids[i].is_none(),
                ClientMove::Unregister | ClientMove::Request => self.ids[i].is_some(),
                ClientMove::Execute | ClientMove::Consent | ClientMove::Veto => {
                    self.ids[i].is_some() && self.heard[i].is_some()
                }
            },
            Input::Deliver => !self.queue.is_empty(),
            Input::Timer(t) => self.timers.armed(t).is_some(),
            Input::StepDone | Input::StepFails => !self.steps.is_empty(),
            Input::HealthCatastrophic => self.steps.front() == Some(&HwStep::ReadHealth),
            Input::StrayCompletion => self.stray().is_some(),
            _ => true,
        }
    }

    /// Makes `input`; what it answered (`Err` for a refusal).
    fn apply(&mut self, input: Input) -> Result<String, String> {
        let now = self.now;
        let epoch = |w: &World, i: usize| w.heard[i].unwrap_or(Epoch(0));
        let id = |w: &World, i: usize| w.ids[i].unwrap_or(ClientId::from_raw(0));
        match input {
            Input::Client(ClientMove::Register, i) => {
                let flags = if i == 1 {
                    ClientFlags::CAN_VETO
                } else {
                    ClientFlags::empty()
                };
                let r = self
                    .c
                    .register(now, desc(&format!("c{i}"), ClientKind::Custom, flags))
                    .map_err(err)?;
                self.ids[i] = Some(r.id);
                return Ok(if r.late { "late" } else { "" }.into());
            }
            Input::Client(ClientMove::Unregister, i) => {
                self.c.unregister(now, id(self, i)).map_err(err)?;
                self.ids[i] = None;
                self.heard[i] = None;
            }
            Input::Client(ClientMove::Request, i) => {
                _ = self.c.reset_request(now, id(self, i)).map_err(err)?
            }
            Input::Client(ClientMove::Execute, i) => {
                let o = self
                    .c
                    .reset_execute(now, id(self, i), epoch(self, i))
                    .map_err(err)?;
                return Ok(match o {
                    ExecuteOutcome::Accepted => "",
                    ExecuteOutcome::AlreadyReady => "already ready",
                    ExecuteOutcome::TooLate => "too late",
                }
                .into());
            }
            Input::Client(ClientMove::Consent, i) => self
                .c
                .reset_consent(now, id(self, i), epoch(self, i))
                .map_err(err)?,
            Input::Client(ClientMove::Veto, i) => {
                let reason = VetoReason::new("busy").expect("fits");
                self.c
                    .reset_veto(now, id(self, i), epoch(self, i), reason)
                    .map_err(err)?
            }
            Input::Deliver => {
                let (client, event) = self.queue.pop_front().ok_or("nothing queued")?;
                self.c.event_delivered(now, client, event.kind());
            }
            Input::Timer(t) => {
                let (at, token) = self.timers.armed(t).ok_or("not armed")?;
                self.timers.cancel(t);
                self.now = self.now.max(at);
                self.c.timer_expired(self.now, t, token);
            }
            Input::StepDone => self.complete(false, false)?,
            Input::StepFails => self.complete(true, false)?,
            Input::HealthCatastrophic => self.complete(false, true)?,
            Input::StrayCompletion => {
                let done = HwCompletion {
                    step: self.stray().ok_or("every step issued")?,
                    result: HwResult::Done,
                };
                self.c.hw_complete(now, done);
            }
            Input::CommandTimeout => self.c.command_timeout(now),
            Input::Catastrophic => self.c.catastrophic_error(now),
            Input::Removal => self.c.surprise_removal(now),
            Input::Admin(k) => _ = self.c.admin_reset(now, k).map_err(err)?,
            Input::AdminRestart => _ = self.c.admin_restart(now).map_err(err)?,
            Input::SetPolicy => {
                let policy = Policy {
                    abort_on_unresponsive: !self.c.policy().abort_on_unresponsive,
                    ..*self.c.policy()
                };
                self.c.set_policy(now, policy).map_err(err)?;
            }
            Input::PortDown => self.port(PortState::Down)?,
            Input::PortActive => self.port(PortState::Active)?,
        }
        Ok(String::new())
    }
}

/// An error's variant, as the table names a refusal.
fn err(e: impl std::fmt::Debug) -> String {
    let text = format!("{e:?}");
    let end = text
        .find(|ch: char| !ch.is_alphanumeric())
        .unwrap_or(text.len());
    text[..end].to_string()
}

/// Every input, in the table's order.
fn inputs() -> Vec<Input> {
    let mut v = Vec::new();
    for i in 0..CLIENTS {
        v.extend(ClientMove::ALL.map(|m| Input::Client(m, i)));
    }
    v.push(Input::Deliver);
    v.extend(TimerId::ALL.map(Input::Timer));
    v.extend([
        Input::StepDone,
        Input::StepFails,
        Input::StrayCompletion,
        Input::HealthCatastrophic,
        Input::CommandTimeout,
        Input::Catastrophic,
        Input::Removal,
        Input::Admin(AdminReset::Forced),
        Input::Admin(AdminReset::Planned),
        Input::Admin(AdminReset::FirmwareActivate),
        Input::AdminRestart,
        Input::SetPolicy,
        Input::PortDown,
        Input::PortActive,
    ]);
    v
}

/// What `input` did to `w` (which it changes): the text of the table's cell for one state.
fn outcome(w: &mut World, input: Input) -> (String, Option<ResetReason>) {
    let before = w.c.stage_name();
    let seq = w.c.recorder().next_seq();
    let answer = w.apply(input);
    let did = w.drain();
    let mut deferred = None;
    let mut notes = Vec::new();
    for r in w.c.recorder().since(seq) {
        match r.kind {
            RecordKind::FollowUpScheduled { reason } => {
                deferred = Some(reason);
                notes.push(format!("deferred: {} after this reset", reason.as_str()));
            }
            RecordKind::ResetJoined { reason } => {
                notes.push(format!("joins the open reset ({})", reason.as_str()));
            }
            _ => {}
        }
    }
    let mut text = match answer {
        Err(e) => format!("refused: {e}"),
        Ok(s) if s.is_empty() => "ok".into(),
        Ok(s) => format!("ok, {s}"),
    };
    let after = w.c.stage_name();
    if after != before {
        let _ = write!(text, " → {after}");
    }
    if !did.is_empty() {
        let _ = write!(text, "; {}", did.into_iter().collect::<Vec<_>>().join(", "));
    }
    for n in notes {
        let _ = write!(text, "; {n}");
    }
    (text, deferred)
}

/// A host that delivers everything, answers every RESET and RESET_QUERY at once, completes
/// every step and fires timers in order, until nothing is left or `limit` inputs: whether
/// the reset deferred with `reason` began (or the device is Failed or Removed).
fn deferred_reset_begins(mut w: World, reason: ResetReason, limit: usize) -> bool {
    for _ in 0..limit {
        let seq = w.c.recorder().next_seq();
        // Each client answers what it heard once; then the host's queues, then time.
        for i in 0..CLIENTS {
            if w.heard[i].is_some() {
                let _ = w.apply(Input::Client(ClientMove::Execute, i));
                let _ = w.apply(Input::Client(ClientMove::Consent, i));
                w.heard[i] = None;
            }
        }
        w.drain();
        let next = [Input::Deliver, Input::StepDone]
            .into_iter()
            .find(|i| w.possible(*i));
        let next = next.or_else(|| {
            let t = TimerId::ALL
                .into_iter()
                .filter(|t| w.timers.armed(*t).is_some())
                .min_by_key(|t| w.timers.armed(*t).map(|(at, _)| at))?;
            Some(Input::Timer(t))
        });
        let Some(next) = next else { break };
        let _ = w.apply(next);
        w.drain();
        let began =
            w.c.recorder().since(seq).any(
                |r| matches!(r.kind, RecordKind::ResetStarted { reason: r, .. } if r == reason),
            );
        if began || matches!(w.c.state(), State::Failed | State::Removed) {
            return true;
        }
    }
    false
}

/// By stage, by the input's place in [`inputs`]: its outcomes.
type Cells = BTreeMap<&'static str, BTreeMap<usize, BTreeSet<String>>>;

/// The walk: every input in every state reachable from the start (states told apart by
/// [`World::key`]), breadth first, so each state is reached by a shortest way.
fn walk() -> (Cells, BTreeSet<&'static str>, BTreeSet<&'static str>) {
    let mut cells = Cells::new();
    let mut stuck = BTreeSet::new();
    let mut below_bound = BTreeSet::new();
    let start = World::new();
    let mut seen = HashSet::from([start.key()]);
    let mut queue = VecDeque::from([start]);
    while let Some(w) = queue.pop_front() {
        assert!(
            seen.len() <= MAX_STATES,
            "the walk passed {MAX_STATES} states"
        );
        let stage = w.c.stage_name();
        if w.c.epoch().0 < MAX_EPOCH {
            below_bound.insert(stage);
        }
        let row = cells.entry(stage).or_default();
        for (n, input) in inputs().into_iter().enumerate() {
            if !w.possible(input) {
                continue;
            }
            let mut after = w.clone();
            let (text, deferred) = outcome(&mut after, input);
            row.entry(n).or_default().insert(text);
            if let Some(reason) = deferred {
                if !deferred_reset_begins(after.clone(), reason, 10_000) {
                    stuck.insert(stage);
                }
            }
            // A host that lets events or steps pile up (port flaps, health polls a device
            // does not answer) adds no new situation past a few: such states are tried
            // but not walked from.
            let walked = after.queue.len() <= MAX_QUEUED && after.steps.len() <= MAX_ISSUED;
            if walked && seen.insert(after.key()) {
                queue.push_back(after);
            }
        }
    }
    (cells, stuck, below_bound)
}

/// The table as docs/protocol.md holds it.
fn render(cells: &Cells) -> String {
    let mut out = String::new();
    for (stage, row) in cells {
        let _ = writeln!(out, "\n#### {stage}\n\n| input | what it does |\n|---|---|");
        // A client's row once: the CAN_VETO client's differs only in a veto.
        let mut rows: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut order = Vec::new();
        let all = inputs();
        for (n, outcomes) in row {
            let label = all[*n].label();
            if !rows.contains_key(&label) {
                order.push(label.clone());
            }
            rows.entry(label)
                .or_default()
                .extend(outcomes.iter().cloned());
        }
        for label in order {
            let texts: Vec<String> = rows[&label].iter().cloned().collect();
            let _ = writeln!(out, "| {label} | {} |", texts.join("<br>"));
        }
    }
    out
}

const BEGIN: &str = "<!-- protocol-table: generated by tests/tests/suites/protocol_table.rs -->";
const END: &str = "<!-- protocol-table: end -->";

#[test]
fn docs_protocol_table_is_what_the_coordinator_does() {
    let (cells, stuck, below_bound) = walk();
    assert!(
        stuck.is_empty(),
        "a deferred reset never began from: {stuck:?}"
    );
    // Every input that does not wait on the host or a client has an outcome in every stage
    // reached (those that start a reset, wherever the stage was reached below the epoch
    // bound).
    for (stage, row) in &cells {
        for (n, input) in inputs().into_iter().enumerate() {
            let applies = match input {
                Input::Removal
                | Input::SetPolicy
                | Input::PortDown
                | Input::PortActive
                | Input::StrayCompletion => true,
                Input::CommandTimeout
                | Input::Catastrophic
                | Input::Admin(_)
                | Input::AdminRestart => below_bound.contains(stage),
                _ => false,
            };
            assert!(
                !applies || row.contains_key(&n),
                "{stage}: no outcome for {}",
                input.label()
            );
        }
    }
    let table = render(&cells);
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/protocol.md");
    let doc = std::fs::read_to_string(path).expect("docs/protocol.md");
    let (Some(b), Some(e)) = (doc.find(BEGIN), doc.find(END)) else {
        panic!("docs/protocol.md has no {BEGIN} ... {END} section");
    };
    let current = &doc[b + BEGIN.len()..e];
    let wanted = format!("{table}\n");
    if current != wanted {
        if std::env::var_os("HCABUS_BLESS").is_some() {
            let new = format!("{}{BEGIN}{wanted}{}", &doc[..b], &doc[e..]);
            std::fs::write(path, new).expect("write docs/protocol.md");
            return;
        }
        panic!(
            "docs/protocol.md's table differs from what the coordinator does; \
             HCABUS_BLESS=1 cargo test -p hcabus-tests --test suites protocol_table rewrites it"
        );
    }
}
