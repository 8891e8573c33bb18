//! The virtual-time host: runs the coordinator, a `SimHca` and scripted clients from a seed.
//!
//! Single-threaded and driven by a virtual clock, so a run is a pure function of its
//! scenario and seed: the same inputs give the same flight record, byte for byte. Callbacks
//! run with the coordinator free (they get a [`SimCtx`] on it), so a client may call any bus
//! function from inside its callback, exactly as on the threaded and KMDF hosts.

use std::boxed::Box;
use std::string::String;
use std::vec::Vec;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::agent::{Agent, ScriptedAgent};
use crate::ctx::SimCtx;
use crate::fault::CATASTROPHIC_WORD;
use crate::hca::SimHca;
use crate::invariants::InvariantChecker;
use crate::report::{ResetLog, ResetReport};
use crate::setup::{Fault, SimSetup, COMMAND_TIMEOUT};
use crate::wakes::Wakes;
use hcabus::coordinator::bundle::CONFIG_BYTES;
use hcabus::coordinator::*;
use hcabus::hca::{execute, saved_config_after, HwStep};
use hcabus::host::irql;
use hcabus::ioctl::{self, FaultCode, FaultRequest, IoctlDevice, NtStatus, Reply};
use hcabus::policy::PolicyError;
use hcabus::time::{Duration, Instant};
use hcabus::timers::TimerTable;
use hcabus::types::*;

/// A [`SimCtx`] on the host's parts for `agent`: built from fields, not a method, so that the
/// borrow of the agents themselves stays separate.
macro_rules! bus {
    ($host:expr, $agent:expr, $now:expr) => {
        SimCtx {
            coord: &mut $host.coord,
            bindings: &mut $host.bindings,
            history: &mut $host.history,
            checker: &mut $host.checker,
            rng: &mut $host.rng,
            hca: &mut $host.hca,
            agent: $agent,
            now: $now,
        }
    };
}

mod removal;

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

/// Steps at one instant past which a run is a livelock: something asks to be stepped again
/// and again without time moving (a client whose wake-up lies in the past and never moves).
/// Recorded as a violation and the run stopped, instead of hanging the harness: a test, a
/// hunt or a mutant then fails at once rather than on a timeout. A real run takes a few.
pub const MAX_STEPS_AT_ONE_INSTANT: u32 = 10_000;

/// The deterministic virtual-time host, generic over how it holds its clients: a host of
/// any [`Agent`] by default; a layer above may hold its own kind of agent (the access
/// layer's `StackClient`, which says what it did) so that its reports ask the clients
/// through a trait instead of looking them up by type.
#[derive(Debug)]
pub struct SimHost<A: ?Sized + Agent = dyn Agent> {
    now: Instant,
    end: Instant,
    coord: Coordinator,
    hca: SimHca,
    agents: Vec<Box<A>>,
    bindings: Vec<Option<(ClientId, usize)>>,
    /// Every id ever bound, with its agent: names ids after they were reused.
    history: Vec<(ClientId, usize)>,
    timers: TimerTable,
    faults: Vec<(Instant, Fault)>,
    next_fault: usize,
    rng: ChaCha8Rng,
    stats: HostStats,
    checker: InvariantChecker,
    wakes: Wakes,
    alloc_probe: Option<AllocProbe>,
    window_start: Option<u64>,
    resets: ResetLog,
    name: String,
    seed: u64,
    /// Whether the run models the fabric (link training, the subnet manager, cable pulls):
    /// only then are ports reported to the bus, so a scenario without fabric keys runs as
    /// it always did (docs/design.md §9: ports active at once).
    ports_modelled: bool,
    /// The fabric as the host pulled it, apart from the adapter's model: per port, the
    /// latest plug-back of the pulls made so far. The check that no port is Active with its
    /// cable out reads this, so a model that forgets a pull cannot hide it.
    cable_back_at: [Instant; MAX_PORTS as usize],
    /// The wall clock's Unix milliseconds at the bus's time zero ([`SimHost::use_wall_clock`]):
    /// a live host's virtual clock follows the wall clock; a seeded run's must not read it.
    wall_zero_ms: Option<u64>,
    /// Steps taken since time last moved ([`MAX_STEPS_AT_ONE_INSTANT`]).
    steps_at_now: u32,
    /// The run stopped at a livelock: it goes no further.
    livelocked: bool,
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
}

impl<A: ?Sized + Agent> SimHost<A> {
    /// The virtual clock runs with the wall clock from now on (`hcasim serve`): QUERY_STATE
    /// gives the wall-clock time of the bus's time zero, taken once here so that every answer
    /// gives the same (a host that falls behind real time says so on its own).
    pub fn use_wall_clock(&mut self) {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        let now_ms = since.map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        self.wall_zero_ms = Some(now_ms.saturating_sub(self.now.as_us() / 1000));
    }

    /// Builds the host with any agents (the access layer's clients, for instance).
    pub fn with_agents(setup: &SimSetup, agents: Vec<Box<A>>) -> Result<Self, PolicyError> {
        let mut hca = SimHca::new(setup.hca);
        let identity = hca.current_identity();
        hca.set_now(setup.start);
        let coord = Coordinator::new(
            Config {
                max_clients: setup.max_clients,
                recorder_capacity: setup.recorder_capacity,
                policy: setup.policy,
            },
            identity,
            setup.start,
        )?;
        let max = coord.max_clients();
        let hangs = setup
            .faults
            .iter()
            .filter(|(_, f)| *f == Fault::Hang)
            .count();
        let mut faults = Vec::with_capacity(setup.faults.len() + hangs + setup.derived_faults);
        faults.extend_from_slice(&setup.faults);
        // Stable sort keeps the scenario's order for faults at the same instant.
        faults.sort_by_key(|(at, _)| *at);
        let ports_modelled = setup.hca.link_up > Duration::ZERO
            || setup.hca.sm_sweep > Duration::ZERO
            || setup
                .faults
                .iter()
                .any(|(_, f)| matches!(f, Fault::PortDown { .. }));
        let wakes = Wakes::new(&agents);
        let mut host = SimHost {
            wakes,
            ports_modelled,
            wall_zero_ms: None,
            steps_at_now: 0,
            livelocked: false,
            cable_back_at: [Instant::ZERO; MAX_PORTS as usize],
            now: setup.start,
            end: Instant::ZERO + setup.duration,
            coord,
            hca,
            agents,
            bindings: std::vec![None; max],
            history: hcabus::reserve::touched_vec(64 * max, (ClientId::from_raw(0), 0)),
            timers: TimerTable::default(),
            faults,
            next_fault: 0,
            rng: ChaCha8Rng::seed_from_u64(setup.seed),
            stats: HostStats::default(),
            checker: InvariantChecker::new(max),
            alloc_probe: None,
            window_start: None,
            resets: ResetLog::new(max, setup.reported_resets),
            name: setup.name.clone(),
            seed: setup.seed,
        };
        // The adapter's ports as it starts, before anyone registers.
        host.report_ports();
        for i in 0..host.agents.len() {
            let mut bus = bus!(host, i, host.now);
            host.agents[i].start(&mut bus);
            host.wakes.refresh(i, &host.agents);
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
    /// A new master that reassigns LIDs reaches the adapter at `at`: its ports get new
    /// LIDs then, and the bus hears of them (the fabric is modelled from now on).
    pub fn renumber_ports(&mut self, at: Instant) {
        self.ports_modelled = true;
        self.hca.renumber(at);
    }
    pub fn agents(&self) -> &[Box<A>] {
        &self.agents
    }
    pub fn stats(&self) -> &HostStats {
        &self.stats
    }
    pub fn checker(&self) -> &InvariantChecker {
        &self.checker
    }

    /// Records a violation the host's harness found (a host of several adapters, say).
    pub fn violate(&mut self, what: core::fmt::Arguments<'_>) {
        self.checker.violate(what);
    }

    /// Faults applied so far, in order, with when.
    pub fn faults_applied(&self) -> &[(Instant, Fault)] {
        &self.faults[..self.next_fault]
    }

    /// The first agent of type `T`: for a test that built it and inspects it white-box.
    /// Reports do not look clients up by type; they ask each one ([`Agent`]).
    pub fn agent<T: Agent + 'static>(&self) -> Option<&T> {
        self.agents
            .iter()
            .find_map(|a| a.as_any().downcast_ref::<T>())
    }

    /// Runs `f` on the first agent of type `T` with a bus, as if the agent woke up: the
    /// way a test plays the part of a client's user (a process, the layer above).
    pub fn with_agent<T: Agent + 'static, R>(
        &mut self,
        f: impl FnOnce(&mut T, &mut SimCtx<'_>) -> R,
    ) -> Option<R> {
        let i = self.agents.iter().position(|a| a.as_any().is::<T>())?;
        let mut bus = bus!(self, i, self.now);
        let agent = self.agents[i].as_any_mut().downcast_mut::<T>()?;
        let r = f(agent, &mut bus);
        self.wakes.refresh(i, &self.agents);
        self.checker.sync(&self.coord);
        self.drain();
        Some(r)
    }

    /// Something outside the host moved what its clients wait for (a fleet's new master set
    /// when their ports get ClientReregister): every client is asked for its next wake
    /// again, those whose wakes are their own too.
    pub fn rewake(&mut self) {
        for i in 0..self.agents.len() {
            self.wakes.refresh(i, &self.agents);
        }
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

    /// Serves one IOCTL (docs/design.md §8) as the bus driver would, then executes whatever it set
    /// in motion.
    pub fn ioctl(
        &mut self,
        code: u32,
        input: &[u8],
        output: &mut [u8],
        caller: impl Into<ioctl::Caller>,
    ) -> Reply {
        let reply = ioctl::dispatch(self, code, input, output, caller);
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
            Fault::Catastrophic => self.hca.inject_catastrophic(CATASTROPHIC_WORD),
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
            Fault::PortDown { port, duration } => {
                // A cable pull given by IOCTL to a host whose scenario did not model the
                // fabric starts modelling it: the ports are reported from now on.
                self.ports_modelled = true;
                if !self.hca.pull_cable(port, duration) {
                    log::warn!("[{now}] port_down: the adapter has no port {port}");
                } else if let Some(back) = self.cable_back_at.get_mut(usize::from(port - 1)) {
                    *back = (*back).max(now + duration);
                }
                self.report_ports();
            }
            Fault::TargetBusy(count) => self.hca.refuse_logins(count),
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
    /// A run that livelocks stops where it is, with a violation that names who was due.
    pub fn run_until(&mut self, until: Instant) {
        while !self.livelocked {
            self.drain();
            let Some(next) = self.next_due().filter(|t| *t <= until) else {
                self.set_now(until.max(self.now));
                self.drain();
                return;
            };
            if next > self.now {
                self.steps_at_now = 0;
            } else if self.step_again() {
                return;
            }
            self.set_now(next.max(self.now));
            self.step_due();
        }
    }

    /// Counts a step at the instant of the one before; at the bound, records the livelock
    /// and says so.
    fn step_again(&mut self) -> bool {
        self.steps_at_now += 1;
        if self.steps_at_now < MAX_STEPS_AT_ONE_INSTANT {
            return false;
        }
        self.livelocked = true;
        let now = self.now;
        let due: Vec<&str> = self
            .agents
            .iter()
            .filter(|a| a.next_wake().is_some_and(|t| t <= now))
            .map(|a| a.name())
            .collect();
        let (steps, name) = (self.steps_at_now, self.name.clone());
        self.checker.violate(format_args!(
            "[{now}] {name}: stepped {steps} times without time moving (a livelock); due: {due:?}"
        ));
        log::error!("[{now}] {name}: livelock, the run stops; due: {due:?}");
        true
    }

    /// Whether the run stopped at a livelock ([`MAX_STEPS_AT_ONE_INSTANT`]).
    pub fn livelocked(&self) -> bool {
        self.livelocked
    }

    /// When something is next due (a fault, a timer, an agent's work, a port change), or
    /// `None` when nothing ever will be: what a host of several adapters steps them by.
    pub fn next_due(&self) -> Option<Instant> {
        [
            self.faults.get(self.next_fault).map(|(t, _)| *t),
            self.timers.next_deadline(),
            self.wakes.next(&self.agents),
            self.ports_modelled
                .then(|| self.hca.ports().next_change(self.now))
                .flatten(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn set_now(&mut self, now: Instant) {
        self.now = now;
        self.hca.set_now(now);
    }

    /// Hands the adapter's port changes to the bus, as a driver's port-change event does.
    fn report_ports(&mut self) {
        if !self.ports_modelled {
            return;
        }
        let (coord, now) = (&mut self.coord, self.now);
        self.hca.poll_ports(|port, attrs| {
            // The adapter numbers its ports 1..=MAX_PORTS: a refusal is a bug in SimPorts.
            if let Err(e) = coord.port_changed(now, port, attrs) {
                log::error!("[{now}] port {port} report refused: {e}");
            }
        });
        // The cable is the fabric's (docs/design.md §5 "Ports"): whatever the adapter went through, the
        // bus must never hold a port Active, and so announce it to a disk's path, while its
        // cable is out.
        for (port, back_at) in (1..=MAX_PORTS).zip(self.cable_back_at) {
            let active = self
                .coord
                .port(port)
                .is_some_and(|v| v.state == PortState::Active);
            if active && now < back_at {
                self.checker.violate(format_args!(
                    "[{now}] port {port} is Active on the bus while its cable is out"
                ));
            }
        }
    }

    fn step_due(&mut self) {
        self.report_ports();
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
            if let Some(token) = self.timers.take_if_due(t, now) {
                self.stats.timer_expiries += 1;
                self.coord.timer_expired(now, t, token);
                self.drain();
            }
        }
        // Agents due now, in index order, each asked at its turn.
        self.wakes.begin_step(now);
        let mut after = None;
        while let Some(i) = self.wakes.next_due(after, &self.agents) {
            after = Some(i);
            let mut bus = bus!(self, i, now);
            self.agents[i].wake(&mut bus);
            self.wakes.refresh(i, &self.agents);
            self.checker.sync(&self.coord);
            self.drain();
        }
        self.wakes.end_step();
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
                        let _irql = irql::raise_to_dispatch();
                        let before = self.alloc_probe.map(|p| p());
                        let mut bus = bus!(self, agent, now);
                        self.agents[agent].on_event(&mut bus, id, event);
                        self.wakes.refresh(agent, &self.agents);
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
                Action::ArmTimer { .. } | Action::CancelTimer { .. } => {
                    self.timers.apply(&action);
                }
                Action::Hw(step) => {
                    self.stats.hw_steps += 1;
                    self.checker.on_hw_step(&self.coord, step);
                    let done = execute(&mut self.hca, step);
                    let mut config = [0u8; CONFIG_BYTES];
                    let saved = saved_config_after(&self.hca, &done, &mut config);
                    // A save that failed keeps none: no older one stands in for it.
                    if done.step == HwStep::SaveConfig {
                        self.coord.config_saved(&config[..saved]);
                    }
                    self.coord.hw_complete(now, done);
                }
                Action::Pnp(_) => self.stats.pnp_operations += 1,
                Action::ResetConcluded { .. } => {
                    let allocations = match (self.window_start.take(), self.alloc_probe) {
                        (Some(start), Some(p)) => Some(p().saturating_sub(start)),
                        _ => None,
                    };
                    self.checker.on_reset_concluded(&self.coord);
                    if let Some(r) = self.coord.concluded_reset() {
                        self.resets.record(r, allocations);
                    }
                }
            }
        }
    }

    /// Every finished reset, as the report shows it.
    pub fn resets(&self) -> Vec<ResetReport> {
        self.resets.reports(|id| self.client_name(id))
    }
}

impl<A: ?Sized + Agent> IoctlDevice for SimHost<A> {
    fn coordinator(&mut self) -> &mut Coordinator {
        &mut self.coord
    }

    fn now(&self) -> Instant {
        self.now
    }

    fn can_inject(&self, fault: &FaultRequest) -> Result<(), NtStatus> {
        if fault.code == FaultCode::PortDown && fault.port > self.hca.port_count() {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        Fault::from_request(*fault)
            .map(|_| ())
            .ok_or(NtStatus::INVALID_PARAMETER)
    }

    fn inject(&mut self, fault: FaultRequest) {
        // Taken by `can_inject`: it converts.
        if let Some(fault) = Fault::from_request(fault) {
            SimHost::inject(self, fault);
        }
    }

    fn wall_clock_unix_ms(&self) -> Option<u64> {
        Some(self.wall_zero_ms? + self.now.as_us() / 1000)
    }

    /// Every agent's counters by its kind, and each port's link downs: the host hosts the
    /// clients, so it counts for them.
    fn counters(&self) -> Option<ioctl::CountersOut> {
        let mut out = ioctl::CountersOut {
            source: ioctl::COUNTERS_FROM_HOST,
            ..Default::default()
        };
        for agent in &self.agents {
            let c = agent.counters();
            let k = out.kind_mut(agent.kind());
            k.clients += 1;
            k.submitted += c.submitted;
            k.completed += c.completed;
            k.failed += c.failed;
            k.held += c.held;
            out.logins += c.logins;
            out.logins_refused += c.logins_refused;
            out.failovers += c.failovers;
            out.commands_moved += c.commands_moved;
        }
        for (port, downed) in (1..).zip(out.link_downed.iter_mut()) {
            *downed = self.hca.ports().link_downed(port);
        }
        Some(out)
    }
}
