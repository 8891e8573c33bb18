//! The virtual-time host: runs the coordinator, a `SimHca` and scripted clients from a seed.
//!
//! Single-threaded and driven by a virtual clock, so a run is a pure function of its
//! scenario and seed: the same inputs give the same flight record, byte for byte. Callbacks
//! run with the coordinator free (they get a [`Bus`] on it), so a client may call any bus
//! function from inside its callback, exactly as on the threaded and KMDF hosts.

use std::boxed::Box;
use std::fmt;
use std::string::{String, ToString};
use std::vec::Vec;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::coordinator::*;
use crate::hca::execute;
use crate::ioctl::{self, FaultCode, IoctlDevice, NtStatus, Reply, Rights};
use crate::policy::{Policy, PolicyError};
use crate::sim::hca::{SimHca, SimHcaConfig};
use crate::sim::verifier;
use crate::time::{Duration, Instant};
use crate::types::*;

/// A fault or administrator action applied at a point in virtual time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Catastrophic,
    CommandTimeout,
    HealthStall,
    /// Firmware stops: the health counter stalls and commands time out.
    Hang,
    AdminReset,
    PlannedReset,
    FwActivate,
    SurpriseRemoval,
    /// The next `n` reset assertions fail.
    ResetFails(u32),
    DeviceReplaced,
    NeverReturns,
    AdminRestart,
    /// The client of agent `agent` (index in the host's agents) asks for a reset.
    ClientRequest {
        agent: u16,
    },
}

/// How long a hung firmware takes to be noticed by a command that never completes.
pub const COMMAND_TIMEOUT: Duration = Duration::from_ms(2_500);

/// What a client in the simulation can do to the bus from a callback or a wake-up.
#[derive(Debug)]
pub struct Bus<'a> {
    coord: &'a mut Coordinator,
    bindings: &'a mut [Option<(ClientId, usize)>],
    history: &'a mut Vec<(ClientId, usize)>,
    rng: &'a mut ChaCha8Rng,
    hca: &'a mut SimHca,
    agent: usize,
    now: Instant,
}

impl Bus<'_> {
    pub fn now(&self) -> Instant {
        self.now
    }
    /// The run's seeded generator: the only source of randomness an agent may use.
    pub fn rng(&mut self) -> &mut ChaCha8Rng {
        self.rng
    }
    /// Registers; later events for the new id come to the calling agent.
    pub fn register(&mut self, desc: ClientDesc) -> Result<Registration, RegisterError> {
        let reg = self.coord.register(self.now, desc)?;
        self.bindings[usize::from(reg.id.index)] = Some((reg.id, self.agent));
        // Reserved at start; a run that registers more often than that loses only names.
        if self.history.len() < self.history.capacity() {
            self.history.push((reg.id, self.agent));
        }
        Ok(reg)
    }
    pub fn unregister(&mut self, id: ClientId) -> Result<(), UnregisterError> {
        self.coord.unregister(self.now, id)
    }
    pub fn reset_request(&mut self, id: ClientId) -> Result<Epoch, RequestError> {
        self.coord.reset_request(self.now, id)
    }
    pub fn reset_execute(
        &mut self,
        id: ClientId,
        epoch: Epoch,
    ) -> Result<ExecuteOutcome, ExecuteError> {
        self.coord.reset_execute(self.now, id, epoch)
    }
    pub fn reset_veto(&mut self, id: ClientId, epoch: Epoch) -> Result<(), VetoError> {
        self.coord.reset_veto(self.now, id, epoch)
    }
    pub fn state(&self) -> State {
        self.coord.state()
    }
    pub fn epoch(&self) -> Epoch {
        self.coord.epoch()
    }
    pub fn policy(&self) -> &Policy {
        self.coord.policy()
    }
    /// The adapter: its verbs for the access layer, its wire and memory for remote peers.
    /// The bus driver hands its children the same interface.
    pub fn hca(&mut self) -> &mut SimHca {
        self.hca
    }
    /// The adapter and the run's generator at once (a remote peer needs both).
    pub fn hca_and_rng(&mut self) -> (&mut SimHca, &mut ChaCha8Rng) {
        (self.hca, self.rng)
    }
}

/// A [`Bus`] on the host's parts for `agent`: built from fields, not a method, so that the
/// borrow of the agents themselves stays separate.
macro_rules! bus {
    ($host:expr, $agent:expr, $now:expr) => {
        Bus {
            coord: &mut $host.coord,
            bindings: &mut $host.bindings,
            history: &mut $host.history,
            rng: &mut $host.rng,
            hca: &mut $host.hca,
            agent: $agent,
            now: $now,
        }
    };
}

/// A client living in the simulation. `Any` lets a test find its own agent type again
/// ([`SimHost::agent`]).
pub trait Agent: core::any::Any + fmt::Debug {
    fn name(&self) -> &str;
    /// Called once when the host starts (typically: register).
    fn start(&mut self, bus: &mut Bus<'_>);
    fn on_event(&mut self, bus: &mut Bus<'_>, id: ClientId, event: Event);
    /// When the agent next wants [`Agent::wake`]; `None` (the default) for never.
    fn next_wake(&self) -> Option<Instant> {
        None
    }
    fn wake(&mut self, _bus: &mut Bus<'_>) {}
    /// Events received, in order (for reports).
    fn events(&self) -> &[EventKind];
    /// Current id, if registered.
    fn id(&self) -> Option<ClientId>;
    /// What kind of client it registers as.
    fn kind(&self) -> ClientKind {
        ClientKind::Custom
    }
    /// Why the client is not doing its job (it could not start, its login gave up), for
    /// the report; `None` while it is fine. Called after a run, so it may allocate.
    fn error(&self) -> Option<String> {
        None
    }
}

/// How a scripted client behaves (the `[[clients]]` keys of SPEC §9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Behavior {
    /// Execute this long after RESET (zero: from inside the callback).
    pub ack_delay: Duration,
    pub never_ack: bool,
    pub veto_planned: bool,
    pub unregister_on_reset: bool,
    pub reregister_on_reset: bool,
    pub request_reset_at: Option<Instant>,
    pub request_every: Option<Duration>,
    /// Asks for another reset from inside its first RESET_END callback (during Restoring).
    pub request_on_reset_end: bool,
}

/// Events a scripted client keeps; reserved at creation so receiving never allocates.
pub const AGENT_EVENT_CAPACITY: usize = 512;

/// A client driven by a [`Behavior`].
#[derive(Debug, Clone)]
pub struct ScriptedAgent {
    desc: ClientDesc,
    behavior: Behavior,
    id: Option<ClientId>,
    pending_ack: Option<(Instant, Epoch)>,
    next_request: Option<Instant>,
    events: Vec<EventKind>,
    requested_on_end: bool,
    pub refusals: u32,
}

impl ScriptedAgent {
    pub fn new(desc: ClientDesc, behavior: Behavior) -> Self {
        let next_request = match (behavior.request_reset_at, behavior.request_every) {
            (Some(at), _) => Some(at),
            (None, Some(every)) => Some(Instant::ZERO + every),
            (None, None) => None,
        };
        ScriptedAgent {
            desc,
            behavior,
            id: None,
            pending_ack: None,
            next_request,
            events: Vec::with_capacity(AGENT_EVENT_CAPACITY),
            requested_on_end: false,
            refusals: 0,
        }
    }

    pub fn desc(&self) -> &ClientDesc {
        &self.desc
    }

    fn execute(&mut self, bus: &mut Bus<'_>, epoch: Epoch) {
        if let Some(id) = self.id {
            if bus.reset_execute(id, epoch).is_err() {
                self.refusals += 1;
            }
        }
    }
}

impl Agent for ScriptedAgent {
    fn name(&self) -> &str {
        self.desc.name.as_str()
    }

    fn start(&mut self, bus: &mut Bus<'_>) {
        match bus.register(self.desc) {
            Ok(r) => self.id = Some(r.id),
            Err(_) => self.refusals += 1,
        }
    }

    fn on_event(&mut self, bus: &mut Bus<'_>, _id: ClientId, event: Event) {
        // Within the reserved capacity only: receiving must never allocate.
        if self.events.len() < self.events.capacity() {
            self.events.push(event.kind());
        }
        let wants = self.behavior.request_on_reset_end && !self.requested_on_end;
        if let (Event::ResetEnd { .. }, true, Some(id)) = (event, wants, self.id) {
            self.requested_on_end = true;
            if bus.reset_request(id).is_err() {
                self.refusals += 1;
            }
        }
        let Event::Reset { epoch, planned, .. } = event else {
            return;
        };
        let b = self.behavior;
        if b.veto_planned && planned {
            if let Some(id) = self.id {
                if bus.reset_veto(id, epoch).is_ok() {
                    return;
                }
                self.refusals += 1;
            }
        }
        if b.never_ack {
            return;
        }
        if b.unregister_on_reset || b.reregister_on_reset {
            if let Some(id) = self.id.take() {
                if bus.unregister(id).is_err() {
                    self.refusals += 1;
                }
            }
            if b.reregister_on_reset {
                match bus.register(self.desc) {
                    Ok(r) => self.id = Some(r.id),
                    Err(_) => self.refusals += 1,
                }
            }
            return;
        }
        if b.ack_delay == Duration::ZERO {
            self.execute(bus, epoch);
        } else {
            // Up to half again as long: real quiesce work varies, and the seed decides how.
            let jitter_us = bus.rng().gen_range(0..=b.ack_delay.as_us() / 2);
            self.pending_ack = Some((
                bus.now() + b.ack_delay + Duration::from_us(jitter_us),
                epoch,
            ));
        }
    }

    fn next_wake(&self) -> Option<Instant> {
        match (self.pending_ack.map(|(t, _)| t), self.next_request) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn wake(&mut self, bus: &mut Bus<'_>) {
        let now = bus.now();
        if let Some((at, epoch)) = self.pending_ack {
            if at <= now {
                self.pending_ack = None;
                self.execute(bus, epoch);
            }
        }
        if let Some(at) = self.next_request {
            if at <= now {
                self.next_request = self.behavior.request_every.map(|every| now + every);
                if let Some(id) = self.id {
                    if bus.reset_request(id).is_err() {
                        self.refusals += 1;
                    }
                }
            }
        }
    }

    fn events(&self) -> &[EventKind] {
        &self.events
    }

    fn id(&self) -> Option<ClientId> {
        self.id
    }

    fn kind(&self) -> ClientKind {
        self.desc.kind
    }
}

/// Checks the event guarantees of SPEC §4 on every delivery, without allocating.
#[derive(Debug, Clone)]
pub struct InvariantChecker {
    /// Per slot: the client id it tracks, whether a RESET awaits its terminal event, and the
    /// registration sequence (to check fan-out order).
    slots: Vec<SlotWatch>,
    reg_seq: u64,
    last_fanout: Option<(EventKind, Epoch, u64)>,
    /// Registrations + unregistrations last seen, to sync only on change.
    membership_seen: u64,
    pub checked: u64,
    pub violations: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default)]
struct SlotWatch {
    id: Option<ClientId>,
    awaiting_terminal: bool,
    late: bool,
    zombie: bool,
    reg_seq: u64,
}

/// At most this many violation messages are kept (the count keeps going).
const MAX_VIOLATION_TEXTS: usize = 32;

impl InvariantChecker {
    pub fn new(max_clients: usize) -> Self {
        InvariantChecker {
            slots: std::vec![SlotWatch::default(); max_clients],
            reg_seq: 0,
            last_fanout: None,
            membership_seen: 0,
            checked: 0,
            violations: Vec::with_capacity(MAX_VIOLATION_TEXTS),
        }
    }

    /// Records a violation found by the host itself (the verifier, say).
    pub fn violate(&mut self, what: fmt::Arguments<'_>) {
        // Formatting allocates; a violating run is a failing run, so the cost is moot.
        if self.violations.len() < MAX_VIOLATION_TEXTS {
            self.violations.push(what.to_string());
        }
    }

    /// Catches up with registrations and unregistrations made on `coord` since the last
    /// call. Cheap when nothing changed, so hosts call it after every callback.
    pub fn sync(&mut self, coord: &Coordinator) {
        // Only when membership changed: scanning after every callback would make a reset
        // quadratic in the number of clients.
        let c = coord.counters();
        let membership = c.registrations + c.unregistrations;
        if membership == self.membership_seen {
            return;
        }
        self.membership_seen = membership;
        for c in coord.clients() {
            let w = self.slots[usize::from(c.id.index)];
            if w.id != Some(c.id) {
                // Outside the barrier of a reset under way means late, whatever the state
                // (a registrant during restore is already Active: its RESET_END is queued).
                let late = coord.reset_in_progress() && !c.in_barrier;
                self.on_register(c.id, late, c.state == ClientState::Failed);
            }
        }
        for i in 0..self.slots.len() {
            if let Some(id) = self.slots[i].id {
                if coord.client(id).is_err() {
                    self.on_unregister(id);
                }
            }
        }
    }

    /// A client registered; `late` when it registered during a reset.
    fn on_register(&mut self, id: ClientId, late: bool, zombie: bool) {
        self.reg_seq += 1;
        if let Some(w) = self.slots.get_mut(usize::from(id.index)) {
            *w = SlotWatch {
                id: Some(id),
                awaiting_terminal: false,
                late,
                zombie,
                reg_seq: self.reg_seq,
            };
        }
    }

    pub fn on_deliver(&mut self, client: ClientId, event: Event) {
        self.checked += 1;
        let kind = event.kind();
        let Some(w) = self.slots.get(usize::from(client.index)).copied() else {
            return self.violate(format_args!("{kind} to {client}: no such slot"));
        };
        if w.id != Some(client) {
            return self.violate(format_args!(
                "{kind} to {client}: not the registered client"
            ));
        }
        let epoch = match event {
            Event::Reset { epoch, .. }
            | Event::ResetEnd { epoch, .. }
            | Event::ResetFailed { epoch, .. }
            | Event::ResetAborted { epoch, .. } => epoch,
            Event::DeviceFatal { .. } => Epoch(0),
        };
        // RESET in reverse registration order, RESET_END in registration order.
        match (self.last_fanout, kind) {
            (Some((EventKind::Reset, e, seq)), EventKind::Reset)
                if e == epoch && w.reg_seq > seq =>
            {
                self.violate(format_args!(
                    "RESET of {epoch} not in reverse registration order"
                ))
            }
            (Some((EventKind::ResetEnd, e, seq)), EventKind::ResetEnd)
                if e == epoch && w.reg_seq < seq =>
            {
                self.violate(format_args!(
                    "RESET_END of {epoch} not in registration order"
                ))
            }
            _ => {}
        }
        self.last_fanout = Some((kind, epoch, w.reg_seq));
        let mut next = w;
        match kind {
            EventKind::Reset => {
                if w.awaiting_terminal {
                    self.violate(format_args!(
                        "{client} got a second RESET before the outcome"
                    ));
                }
                next.awaiting_terminal = true;
                next.late = false;
            }
            EventKind::ResetEnd | EventKind::ResetFailed | EventKind::ResetAborted => {
                // Without a RESET first, an outcome is only right for a late registrant or
                // for a zombie of a failed device (an administrator restart has no RESET).
                if !w.awaiting_terminal && !w.late && !w.zombie {
                    self.violate(format_args!("{client} got {kind} without RESET"));
                }
                next.awaiting_terminal = false;
                next.late = false;
                next.zombie = kind == EventKind::ResetFailed;
            }
            EventKind::DeviceFatal => next.awaiting_terminal = false,
        }
        self.slots[usize::from(client.index)] = next;
    }

    fn on_unregister(&mut self, id: ClientId) {
        if let Some(w) = self.slots.get_mut(usize::from(id.index)) {
            if w.id == Some(id) {
                *w = SlotWatch::default();
            }
        }
    }

    /// At the end of a reset every barrier member must have had its outcome.
    pub fn on_reset_concluded(&mut self, coord: &Coordinator) {
        self.checked += 1;
        for c in coord.clients() {
            let w = self.slots[usize::from(c.id.index)];
            if w.id == Some(c.id) && w.awaiting_terminal {
                self.violate(format_args!(
                    "{} '{}' got RESET but no outcome",
                    c.id, c.desc.name
                ));
            }
        }
    }
}

/// What one reset did, as the report shows it (SPEC §9 `resets[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResetReport {
    pub epoch: Epoch,
    pub reason: ResetReason,
    pub outcome: String,
    pub restart: bool,
    pub quiesce_us: Option<u64>,
    pub hw_reset_us: Option<u64>,
    pub restore_us: Option<u64>,
    pub total_us: Option<u64>,
    pub started_at: Instant,
    pub forced_clients: Vec<String>,
    pub vetoed_by: Option<String>,
    /// Allocations from the reset's first RESET to its last event; `None` without a probe.
    pub allocations: Option<u64>,
    pub pnp_operations: u32,
    pub requests: u32,
    pub soft_attempts: u8,
    pub flr_used: bool,
}

/// A finished reset as kept during the run: no strings, nothing that allocates.
#[derive(Debug, Clone)]
struct RawReset {
    epoch: Epoch,
    reason: ResetReason,
    result: Option<ResetResult>,
    restart: bool,
    quiesce_us: Option<u64>,
    hw_reset_us: Option<u64>,
    restore_us: Option<u64>,
    total_us: Option<u64>,
    started_at: Instant,
    forced: core::ops::Range<usize>,
    allocations: Option<u64>,
    pnp_operations: u32,
    requests: u32,
    soft_attempts: u8,
    flr_used: bool,
}

/// A scenario the host can run.
#[derive(Debug, Clone)]
pub struct SimSetup {
    pub name: String,
    pub seed: u64,
    pub duration: Duration,
    pub hca: SimHcaConfig,
    pub policy: Policy,
    pub max_clients: u16,
    pub recorder_capacity: usize,
    pub clients: Vec<(ClientDesc, Behavior)>,
    pub faults: Vec<(Instant, Fault)>,
}

impl Default for SimSetup {
    fn default() -> Self {
        SimSetup {
            name: "unnamed".into(),
            seed: 1,
            duration: Duration::from_ms(5_000),
            hca: SimHcaConfig::default(),
            policy: Policy::default(),
            max_clients: 64,
            recorder_capacity: 8192,
            clients: Vec::new(),
            faults: Vec::new(),
        }
    }
}

/// Counts of what the host did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HostStats {
    pub deliveries: u64,
    pub hw_steps: u64,
    pub pnp_operations: u64,
    pub timer_expiries: u64,
    /// Allocations made by callbacks at DISPATCH_LEVEL (needs an allocation probe).
    pub dispatch_allocations: u64,
}

/// Reads a global allocation counter (a counting allocator lives in the binary).
pub type AllocProbe = fn() -> u64;

/// Room for faults the harness adds at run time beyond those of the plan's own hangs: a
/// hang injected by IOCTL adds its command timeout. A run that injects more grows the plan,
/// and a reset that the growth lands in reports the allocation: nothing is hidden.
const DERIVED_FAULTS: usize = 256;

/// Most resets a run reports; reserved so that reporting never grows a vector mid-run.
const MAX_REPORTED_RESETS: usize = 256;

/// The deterministic virtual-time host.
#[derive(Debug)]
pub struct SimHost {
    now: Instant,
    end: Instant,
    coord: Coordinator,
    hca: SimHca,
    agents: Vec<Box<dyn Agent>>,
    bindings: Vec<Option<(ClientId, usize)>>,
    /// Every id ever bound, with its agent: names ids after they were reused.
    history: Vec<(ClientId, usize)>,
    timers: [Option<(Instant, u32)>; TimerId::COUNT],
    faults: Vec<(Instant, Fault)>,
    next_fault: usize,
    rng: ChaCha8Rng,
    stats: HostStats,
    checker: InvariantChecker,
    alloc_probe: Option<AllocProbe>,
    window_start: Option<u64>,
    resets: Vec<RawReset>,
    /// Ids forced through their deadline, for every reset in `resets`.
    forced_log: Vec<ClientId>,
    name: String,
    seed: u64,
}

impl SimHost {
    /// Builds the host with scripted clients from `setup`.
    pub fn new(setup: &SimSetup) -> Result<Self, PolicyError> {
        let agents = setup
            .clients
            .iter()
            .map(|(d, b)| Box::new(ScriptedAgent::new(*d, *b)) as Box<dyn Agent>)
            .collect();
        Self::with_agents(setup, agents)
    }

    /// Builds the host with any agents (the access layer's clients, for instance).
    pub fn with_agents(setup: &SimSetup, agents: Vec<Box<dyn Agent>>) -> Result<Self, PolicyError> {
        let mut hca = SimHca::new(setup.hca);
        let identity = hca.current_identity();
        hca.set_now(Instant::ZERO);
        let coord = Coordinator::new(
            Config {
                max_clients: setup.max_clients,
                recorder_capacity: setup.recorder_capacity,
                policy: setup.policy,
            },
            identity,
            Instant::ZERO,
        )?;
        let max = coord.max_clients();
        let hangs = setup
            .faults
            .iter()
            .filter(|(_, f)| *f == Fault::Hang)
            .count();
        let mut faults = Vec::with_capacity(setup.faults.len() + hangs + DERIVED_FAULTS);
        faults.extend_from_slice(&setup.faults);
        // Stable sort keeps the scenario's order for faults at the same instant.
        faults.sort_by_key(|(at, _)| *at);
        let mut host = SimHost {
            now: Instant::ZERO,
            end: Instant::ZERO + setup.duration,
            coord,
            hca,
            agents,
            bindings: std::vec![None; max],
            history: Vec::with_capacity(64 * max),
            timers: [None; TimerId::COUNT],
            faults,
            next_fault: 0,
            rng: ChaCha8Rng::seed_from_u64(setup.seed),
            stats: HostStats::default(),
            checker: InvariantChecker::new(max),
            alloc_probe: None,
            window_start: None,
            resets: Vec::with_capacity(MAX_REPORTED_RESETS),
            forced_log: Vec::with_capacity(4 * max),
            name: setup.name.clone(),
            seed: setup.seed,
        };
        for i in 0..host.agents.len() {
            let mut bus = bus!(host, i, host.now);
            host.agents[i].start(&mut bus);
        }
        host.checker.sync(&host.coord);
        host.drain();
        Ok(host)
    }

    /// Counts allocations per reset with `probe` (see [`ResetReport::allocations`]).
    pub fn set_alloc_probe(&mut self, probe: AllocProbe) {
        self.alloc_probe = Some(probe);
    }

    pub fn now(&self) -> Instant {
        self.now
    }
    pub fn end(&self) -> Instant {
        self.end
    }
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn seed(&self) -> u64 {
        self.seed
    }
    pub fn coordinator(&self) -> &Coordinator {
        &self.coord
    }
    pub fn hca(&self) -> &SimHca {
        &self.hca
    }
    pub fn hca_mut(&mut self) -> &mut SimHca {
        &mut self.hca
    }
    pub fn agents(&self) -> &[Box<dyn Agent>] {
        &self.agents
    }
    pub fn stats(&self) -> &HostStats {
        &self.stats
    }
    pub fn checker(&self) -> &InvariantChecker {
        &self.checker
    }

    /// Faults applied so far, in order, with when.
    pub fn faults_applied(&self) -> &[(Instant, Fault)] {
        &self.faults[..self.next_fault]
    }

    /// The first agent of type `T`, for tests and reports that know what they built.
    pub fn agent<T: Agent>(&self) -> Option<&T> {
        self.agents
            .iter()
            .find_map(|a| (&**a as &dyn core::any::Any).downcast_ref::<T>())
    }

    /// Every agent of type `T`, in registration order.
    pub fn agents_of<T: Agent>(&self) -> impl Iterator<Item = &T> {
        self.agents
            .iter()
            .filter_map(|a| (&**a as &dyn core::any::Any).downcast_ref::<T>())
    }

    /// Runs `f` on the first agent of type `T` with a bus, as if the agent woke up: the
    /// way a test plays the part of a client's user (a process, the layer above).
    pub fn with_agent<T: Agent, R>(
        &mut self,
        f: impl FnOnce(&mut T, &mut Bus<'_>) -> R,
    ) -> Option<R> {
        let i = self
            .agents
            .iter()
            .position(|a| (&**a as &dyn core::any::Any).is::<T>())?;
        let mut bus = bus!(self, i, self.now);
        let agent = (&mut *self.agents[i] as &mut dyn core::any::Any).downcast_mut::<T>()?;
        let r = f(agent, &mut bus);
        self.checker.sync(&self.coord);
        self.drain();
        Some(r)
    }

    /// Index of the agent a client id belongs (or belonged) to.
    pub fn agent_of(&self, id: ClientId) -> Option<usize> {
        self.history
            .iter()
            .rev()
            .find(|(bound, _)| *bound == id)
            .map(|(_, agent)| *agent)
    }

    /// Name of the agent a client id belongs (or belonged) to.
    pub fn client_name(&self, id: ClientId) -> String {
        match self.agent_of(id) {
            Some(agent) => self.agents[agent].name().to_string(),
            None => id.to_string(),
        }
    }

    /// The flight record, encoded: the byte-for-byte fingerprint of a run.
    pub fn flight_record_bytes(&self) -> Vec<u8> {
        self.coord
            .recorder()
            .iter()
            .flat_map(|r| r.encode())
            .collect()
    }

    /// Runs a call against the coordinator as the host (an administrator, a test).
    pub fn with_coordinator<R>(&mut self, f: impl FnOnce(&mut Coordinator, Instant) -> R) -> R {
        let now = self.now;
        let r = f(&mut self.coord, now);
        self.checker.sync(&self.coord);
        self.drain();
        r
    }

    /// Serves one IOCTL (SPEC §8) as the bus driver would, then executes whatever it set
    /// in motion.
    pub fn ioctl(&mut self, code: u32, input: &[u8], output: &mut [u8], rights: Rights) -> Reply {
        let reply = ioctl::dispatch(self, code, input, output, rights);
        self.checker.sync(&self.coord);
        self.drain();
        reply
    }

    /// Applies a fault now.
    pub fn inject(&mut self, fault: Fault) {
        self.apply(fault);
        self.drain();
    }

    /// Applies a fault without executing what it sets in motion: faults of one instant are
    /// applied together, so a cause that arrives with another is seen with it.
    fn apply(&mut self, fault: Fault) {
        let now = self.now;
        match fault {
            Fault::Catastrophic => self.hca.inject_catastrophic(0x0bad_0001),
            Fault::CommandTimeout => self.coord.command_timeout(now),
            Fault::HealthStall => self.hca.stall_health(),
            Fault::Hang => {
                self.hca.stall_health();
                self.insert_fault(now + COMMAND_TIMEOUT, Fault::CommandTimeout);
            }
            Fault::AdminReset => {
                let _ = self.coord.admin_reset(now, AdminReset::Forced);
            }
            Fault::PlannedReset => {
                let _ = self.coord.admin_reset(now, AdminReset::Planned);
            }
            Fault::FwActivate => {
                let fw = self.hca.current_identity().fw_version + 1;
                self.hca.stage_firmware(fw);
                let _ = self.coord.admin_reset(now, AdminReset::FirmwareActivate);
            }
            Fault::SurpriseRemoval => {
                self.hca.remove();
                self.coord.surprise_removal(now);
            }
            Fault::ResetFails(n) => self.hca.fail_next_resets(n),
            Fault::DeviceReplaced => self.hca.replace_on_next_reset(),
            Fault::NeverReturns => self.hca.never_return(),
            Fault::AdminRestart => {
                let _ = self.coord.admin_restart(now);
            }
            Fault::ClientRequest { agent } => {
                let id = self.agents.get(usize::from(agent)).and_then(|a| a.id());
                if let Some(id) = id {
                    let _ = self.coord.reset_request(now, id);
                }
            }
        }
    }

    /// Schedules a fault the harness derives from another (a hang's command timeout), in
    /// space reserved at start: the harness's own work must not show up as an allocation
    /// of the reset it lands in.
    fn insert_fault(&mut self, at: Instant, fault: Fault) {
        if self.faults.len() >= self.faults.capacity() {
            // Only an unbounded stream of injected hangs gets here; the plan keeps order.
            log::warn!(
                "fault plan grows past its reserve ({})",
                self.faults.capacity()
            );
        }
        let pos = self.faults[self.next_fault..]
            .iter()
            .position(|(t, _)| *t > at)
            .map_or(self.faults.len(), |p| p + self.next_fault);
        self.faults.insert(pos, (at, fault));
    }

    /// Runs to the scenario's end.
    pub fn run(&mut self) {
        let end = self.end;
        self.run_until(end);
    }

    /// Advances virtual time to `until`, processing everything due on the way, in a fixed
    /// order (faults, timers, agents) so that a run is deterministic.
    pub fn run_until(&mut self, until: Instant) {
        loop {
            self.drain();
            let next = [
                self.faults.get(self.next_fault).map(|(t, _)| *t),
                self.timers.iter().flatten().map(|(t, _)| *t).min(),
                self.agents.iter().filter_map(|a| a.next_wake()).min(),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(next) = next.filter(|t| *t <= until) else {
                self.set_now(until.max(self.now));
                self.drain();
                return;
            };
            self.set_now(next.max(self.now));
            self.step_due();
        }
    }

    fn set_now(&mut self, now: Instant) {
        self.now = now;
        self.hca.set_now(now);
    }

    fn step_due(&mut self) {
        let now = self.now;
        while let Some(&(at, fault)) = self.faults.get(self.next_fault) {
            if at > now {
                break;
            }
            self.next_fault += 1;
            log::info!("[{now}] inject {fault:?}");
            self.apply(fault);
        }
        self.drain();
        for t in TimerId::ALL {
            if let Some((at, token)) = self.timers[t as usize] {
                if at <= now {
                    self.timers[t as usize] = None;
                    self.stats.timer_expiries += 1;
                    self.coord.timer_expired(now, t, token);
                    self.drain();
                }
            }
        }
        for i in 0..self.agents.len() {
            if self.agents[i].next_wake().is_some_and(|w| w <= now) {
                let mut bus = bus!(self, i, now);
                self.agents[i].wake(&mut bus);
                self.checker.sync(&self.coord);
                self.drain();
            }
        }
    }

    /// Executes every queued action, in order.
    fn drain(&mut self) {
        let now = self.now;
        loop {
            if self.window_start.is_none() && self.coord.reset_in_progress() {
                self.window_start = Some(self.alloc_probe.map_or(0, |p| p()));
            }
            let Some(action) = self.coord.pop_action() else {
                return;
            };
            match action {
                Action::Deliver { client, event } => {
                    // An event queued for a client that unregistered before its turn (from
                    // an earlier callback, say) has nobody to go to: dropped, as in the
                    // threaded and kernel hosts, but still reported delivered.
                    let live = self.coord.client(client).is_ok();
                    let bound = self.bindings[usize::from(client.index)]
                        .filter(|(id, _)| live && *id == client);
                    if live {
                        self.stats.deliveries += 1;
                        self.checker.on_deliver(client, event);
                    }
                    if let Some((id, agent)) = bound {
                        let _irql = verifier::raise_to_dispatch();
                        let before = self.alloc_probe.map(|p| p());
                        let mut bus = bus!(self, agent, now);
                        self.agents[agent].on_event(&mut bus, id, event);
                        if let (Some(before), Some(p)) = (before, self.alloc_probe) {
                            let n = p().saturating_sub(before);
                            if n > 0 {
                                self.stats.dispatch_allocations += n;
                                let name = self.agents[agent].name();
                                self.checker.violate(format_args!(
                                    "{name} allocated {n} times in its {} callback (DISPATCH_LEVEL)",
                                    event.kind()
                                ));
                            }
                        }
                        self.checker.sync(&self.coord);
                    }
                    self.coord.event_delivered(now, client, event.kind());
                }
                Action::ArmTimer { timer, at, token } => {
                    self.timers[timer as usize] = Some((at, token))
                }
                Action::CancelTimer { timer } => self.timers[timer as usize] = None,
                Action::Hw(step) => {
                    self.stats.hw_steps += 1;
                    let done = execute(&mut self.hca, step);
                    self.coord.hw_complete(now, done);
                }
                Action::Pnp(_) => self.stats.pnp_operations += 1,
                Action::ResetConcluded { .. } => {
                    let allocations = match (self.window_start.take(), self.alloc_probe) {
                        (Some(start), Some(p)) => Some(p().saturating_sub(start)),
                        _ => None,
                    };
                    self.checker.on_reset_concluded(&self.coord);
                    self.report_reset(allocations);
                }
            }
        }
    }

    /// Keeps what the finished reset did, without allocating: names are looked up when
    /// someone asks for [`SimHost::resets`], after the run.
    fn report_reset(&mut self, allocations: Option<u64>) {
        let Some(r) = self.coord.concluded_reset() else {
            return;
        };
        if self.resets.len() >= self.resets.capacity() {
            return;
        }
        let first = self.forced_log.len();
        for id in &r.forced {
            if self.forced_log.len() < self.forced_log.capacity() {
                self.forced_log.push(*id);
            }
        }
        self.resets.push(RawReset {
            epoch: r.epoch,
            reason: r.reason,
            result: r.result,
            restart: r.restart,
            quiesce_us: r.quiesce().map(Duration::as_us),
            hw_reset_us: r.hw_reset().map(Duration::as_us),
            restore_us: r.restore().map(Duration::as_us),
            total_us: r.total().map(Duration::as_us),
            started_at: r.started_at,
            forced: first..self.forced_log.len(),
            allocations,
            pnp_operations: r.pnp_operations,
            requests: r.requests,
            soft_attempts: r.soft_attempts,
            flr_used: r.flr_used,
        });
    }

    /// Every finished reset, as the report shows it.
    pub fn resets(&self) -> Vec<ResetReport> {
        self.resets
            .iter()
            .map(|r| {
                let (outcome, vetoed_by) = match r.result {
                    Some(ResetResult::Restored(o)) => (o.as_str(), None),
                    Some(ResetResult::Failed(e)) => (e.as_str(), None),
                    Some(ResetResult::Aborted { by, cause }) => (
                        match cause {
                            AbortCause::Veto => "Aborted",
                            AbortCause::Unresponsive => "AbortedUnresponsive",
                        },
                        Some(self.client_name(by)),
                    ),
                    Some(ResetResult::Removed) => ("Removed", None),
                    None => ("Unfinished", None),
                };
                ResetReport {
                    epoch: r.epoch,
                    reason: r.reason,
                    outcome: outcome.to_string(),
                    restart: r.restart,
                    quiesce_us: r.quiesce_us,
                    hw_reset_us: r.hw_reset_us,
                    restore_us: r.restore_us,
                    total_us: r.total_us,
                    started_at: r.started_at,
                    forced_clients: self.forced_log[r.forced.clone()]
                        .iter()
                        .map(|id| self.client_name(*id))
                        .collect(),
                    vetoed_by,
                    allocations: r.allocations,
                    pnp_operations: r.pnp_operations,
                    requests: r.requests,
                    soft_attempts: r.soft_attempts,
                    flr_used: r.flr_used,
                }
            })
            .collect()
    }
}

impl IoctlDevice for SimHost {
    fn coordinator(&mut self) -> &mut Coordinator {
        &mut self.coord
    }

    fn now(&self) -> Instant {
        self.now
    }

    fn inject(&mut self, fault: FaultCode, count: u32) -> Result<(), NtStatus> {
        let fault = match fault {
            FaultCode::Catastrophic => Fault::Catastrophic,
            FaultCode::CommandTimeout => Fault::CommandTimeout,
            FaultCode::HealthStall => Fault::HealthStall,
            FaultCode::Hang => Fault::Hang,
            FaultCode::ResetFails => Fault::ResetFails(count),
            FaultCode::DeviceReplaced => Fault::DeviceReplaced,
            FaultCode::NeverReturns => Fault::NeverReturns,
            FaultCode::SurpriseRemoval => Fault::SurpriseRemoval,
        };
        SimHost::inject(self, fault);
        Ok(())
    }

    fn note_reason(&mut self, reason: &str) {
        log::info!("[{}] administrator reset: {reason}", self.now);
    }
}

/// A random scenario from a seed: clients with random behaviours and a random fault plan.
/// Used to hunt for invariant violations; any failure replays from its seed.
pub fn random_setup(seed: u64) -> SimSetup {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n_clients = rng.gen_range(1..=12);
    let kinds = ClientKind::ALL;
    let mut clients = Vec::new();
    for i in 0..n_clients {
        let kind = kinds[rng.gen_range(0..kinds.len())];
        let mut flags = ClientFlags::empty();
        if rng.gen_bool(0.3) {
            flags |= ClientFlags::CAN_VETO;
        }
        let behavior = Behavior {
            ack_delay: Duration::from_ms(if rng.gen_bool(0.5) {
                0
            } else {
                rng.gen_range(1..800)
            }),
            never_ack: rng.gen_bool(0.1),
            veto_planned: rng.gen_bool(0.15),
            unregister_on_reset: rng.gen_bool(0.05),
            reregister_on_reset: rng.gen_bool(0.1),
            request_reset_at: rng
                .gen_bool(0.2)
                .then(|| Instant::from_ms(rng.gen_range(0..20_000))),
            request_every: None,
            request_on_reset_end: false,
        };
        let name = std::format!("{}{}", kind.as_str(), i);
        if let Some(desc) = ClientDesc::new(&name, kind, flags) {
            clients.push((desc, behavior));
        }
    }
    let fault_kinds = [
        Fault::Catastrophic,
        Fault::CommandTimeout,
        Fault::HealthStall,
        Fault::Hang,
        Fault::AdminReset,
        Fault::PlannedReset,
        Fault::FwActivate,
        Fault::ResetFails(1),
        Fault::ResetFails(5),
        Fault::DeviceReplaced,
        Fault::NeverReturns,
        Fault::AdminRestart,
        Fault::SurpriseRemoval,
    ];
    let mut faults = Vec::new();
    for _ in 0..rng.gen_range(1..8) {
        let f = fault_kinds[rng.gen_range(0..fault_kinds.len())];
        // Removal ends everything; make it rare so that the rest gets exercised.
        if f == Fault::SurpriseRemoval && rng.gen_bool(0.7) {
            continue;
        }
        faults.push((Instant::from_ms(rng.gen_range(0..30_000)), f));
    }
    let policy = Policy {
        quiesce_deadline_ms: rng.gen_range(100..3_000),
        hw_ready_timeout_ms: rng.gen_range(500..3_000),
        auto_restart_window_ms: rng.gen_range(3_000..60_000),
        abort_on_unresponsive: rng.gen_bool(0.3),
        storm_window_ms: rng.gen_range(1_000..60_000),
        ..Policy::default()
    };
    SimSetup {
        name: std::format!("random-{seed}"),
        seed,
        duration: Duration::from_ms(40_000),
        hca: SimHcaConfig {
            hw_reset: Duration::from_ms(rng.gen_range(10..2_000)),
            ..SimHcaConfig::default()
        },
        policy,
        max_clients: 16,
        recorder_capacity: 1 << 14,
        clients,
        faults,
    }
}
