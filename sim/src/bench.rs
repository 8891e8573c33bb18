//! What a reset costs, measured against what it must cost: the pieces the benches
//! (`driver/benches/reset.rs`, `tools/benches/ratios.rs`) compare side by side.
//!
//! - [`Floor`]: the least work any bus does to reset N clients: N dynamic RESET callbacks,
//!   each acknowledging, then N dynamic RESET_END callbacks. No state machine, no record.
//! - [`MinimalHost`]: the real coordinator driven by the smallest host that works: clients
//!   that execute from inside RESET, hardware on a [`SimHca`], timers in virtual time, and
//!   nothing else (no invariant checker, no agents, no report).
//! - [`bench_setup`]: the virtual-time host ([`crate::SimHost`]) with N clients doing
//!   the same, for the whole simulator's cost.

use crate::report::REPORTED_RESETS;
use crate::setup::DERIVED_FAULTS;
use std::boxed::Box;
use std::format;
use std::vec::Vec;

use crate::agent::Behavior;
use crate::hca::{SimHca, SimHcaConfig};
use crate::setup::SimSetup;
use crate::stepper::StepperError;
use hcabus::coordinator::{Action, Config, Coordinator};
use hcabus::hca::{execute, Hca};
use hcabus::policy::Policy;
use hcabus::time::{Duration, Instant};
use hcabus::timers::TimerTable;
use hcabus::types::*;

/// The most actions one drain runs (a reset of 1,024 clients queues a few thousand).
const DRAIN_BOUND: u32 = 1_000_000;

/// A floor client: one dynamic call per event, as a bus's callback table would make.
pub trait FloorClient {
    fn on_event(&mut self, event: &Event, acks: &mut u64);
}

struct Acker {
    seen: u64,
}

impl FloorClient for Acker {
    fn on_event(&mut self, event: &Event, acks: &mut u64) {
        self.seen += 1;
        if matches!(event, Event::Reset { .. }) {
            *acks += 1;
        }
    }
}

/// N clients behind `dyn` callbacks: the floor of any reset's per-client cost.
pub struct Floor {
    clients: Vec<Box<dyn FloorClient>>,
    acks: u64,
}

impl core::fmt::Debug for Floor {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Floor")
            .field("clients", &self.clients.len())
            .field("acks", &self.acks)
            .finish()
    }
}

impl Floor {
    pub fn new(clients: usize) -> Self {
        Floor {
            clients: (0..clients)
                .map(|_| Box::new(Acker { seen: 0 }) as Box<dyn FloorClient>)
                .collect(),
            acks: 0,
        }
    }

    /// RESET to every client (each acknowledges), then RESET_END to every client; the
    /// acknowledgements counted.
    pub fn reset(&mut self, epoch: Epoch) -> u64 {
        let reset = Event::Reset {
            epoch,
            reason: ResetReason::AdminForced,
            planned: false,
            deadline: Instant::ZERO,
        };
        let end = Event::ResetEnd {
            epoch,
            outcome: ResetOutcome::Restored,
        };
        let before = self.acks;
        for c in &mut self.clients {
            c.on_event(core::hint::black_box(&reset), &mut self.acks);
        }
        for c in &mut self.clients {
            c.on_event(core::hint::black_box(&end), &mut self.acks);
        }
        self.acks - before
    }
}

/// The default policy: an administrator's resets are never throttled as a storm, so
/// back-to-back resets run whole under it.
pub fn bench_policy() -> Policy {
    Policy::default()
}

/// Room for every client count the benches use.
pub const BENCH_MAX_CLIENTS: u16 = 1024;

/// The coordinator with the smallest host that runs a reset.
#[derive(Debug)]
pub struct MinimalHost {
    c: Coordinator,
    hca: SimHca,
    now: Instant,
    timers: TimerTable,
    ids: Vec<ClientId>,
    /// Clients unregister and register again from inside RESET.
    reregister: bool,
}

impl MinimalHost {
    /// A coordinator with `clients` registered clients.
    pub fn new(clients: usize, reregister: bool) -> Result<Self, StepperError> {
        let mut hca = SimHca::new(SimHcaConfig::default());
        hca.set_now(Instant::ZERO);
        let identity = hca.identity().map_err(StepperError::Hardware)?;
        let config = Config {
            max_clients: BENCH_MAX_CLIENTS,
            recorder_capacity: 8192,
            policy: bench_policy(),
        };
        let mut c =
            Coordinator::new(config, identity, Instant::ZERO).map_err(StepperError::Policy)?;
        let ids = (0..clients)
            .filter_map(|i| {
                let desc =
                    ClientDesc::new(&format!("c{i}"), ClientKind::Custom, ClientFlags::empty())?;
                c.register(Instant::ZERO, desc).ok().map(|r| r.id)
            })
            .collect();
        let mut h = MinimalHost {
            c,
            hca,
            now: Instant::ZERO,
            timers: TimerTable::default(),
            ids,
            reregister,
        };
        h.drain();
        Ok(h)
    }

    pub fn coordinator(&self) -> &Coordinator {
        &self.c
    }

    /// Clients registered.
    pub fn clients(&self) -> usize {
        self.ids.len()
    }

    /// One administrator's forced reset, run to its conclusion; the epoch it ended in, or
    /// `None` if it never concluded (refused, or no timer left to move it).
    pub fn reset(&mut self) -> Option<Epoch> {
        self.c.admin_reset(self.now, AdminReset::Forced).ok()?;
        // A reset of the simulated adapter takes a few timer expiries; the bound keeps a
        // broken build from spinning.
        for _ in 0..10_000 {
            if self.drain() {
                return Some(self.c.epoch());
            }
            let (at, timer, token) = self.timers.take_earliest(Instant::from_us(u64::MAX))?;
            self.now = self.now.max(at);
            self.c.timer_expired(self.now, timer, token);
        }
        None
    }

    /// Runs every queued action; whether a reset concluded.
    fn drain(&mut self) -> bool {
        let mut concluded = false;
        // Bounded as `reset` is: a queue that never empties is a broken build.
        for _ in 0..DRAIN_BOUND {
            let Some(a) = self.c.pop_action() else {
                return concluded;
            };
            match a {
                Action::Deliver { client, event } => self.deliver(client, event),
                Action::ArmTimer { .. } | Action::CancelTimer { .. } => {
                    self.timers.apply(&a);
                }
                Action::Hw(step) => {
                    self.hca.set_now(self.now);
                    let done = execute(&mut self.hca, step);
                    self.c.hw_complete(self.now, done);
                }
                Action::Pnp(_) => {}
                Action::ResetConcluded { .. } => concluded = true,
            }
        }
        panic!("{DRAIN_BOUND} actions in one drain: the coordinator feeds itself");
    }

    fn deliver(&mut self, client: ClientId, event: Event) {
        if let Event::Reset { epoch, .. } = event {
            if self.reregister {
                self.reregister_one(client);
            } else {
                let _ = self.c.reset_execute(self.now, client, epoch);
            }
        }
        self.c.event_delivered(self.now, client, event.kind());
    }

    /// Unregisters `client` (which releases it from the barrier) and registers it again.
    fn reregister_one(&mut self, client: ClientId) {
        let Ok(info) = self.c.client(client) else {
            return;
        };
        let desc = info.desc;
        if self.c.unregister(self.now, client).is_ok() {
            if let Ok(r) = self.c.register(self.now, desc) {
                if let Some(slot) = self.ids.iter_mut().find(|i| **i == client) {
                    *slot = r.id;
                }
            }
        }
    }
}

/// The virtual-time host's setup for `clients` clients that execute from inside RESET (or,
/// with `reregister`, unregister and register again there).
pub fn bench_setup(clients: usize, reregister: bool) -> SimSetup {
    let behavior = Behavior {
        reregister_on_reset: reregister,
        ..Behavior::default()
    };
    SimSetup {
        name: "bench".into(),
        duration: Duration::from_ms(3_600_000),
        max_clients: BENCH_MAX_CLIENTS,
        policy: bench_policy(),
        recorder_capacity: 8192,
        reported_resets: REPORTED_RESETS,
        derived_faults: DERIVED_FAULTS,
        clients: (0..clients)
            .map(|i| {
                let d = ClientDesc::new(&format!("c{i}"), ClientKind::Custom, ClientFlags::empty())
                    .expect("a short name fits");
                (d, behavior)
            })
            .collect(),
        ..SimSetup::default()
    }
}

/// A threaded-host client that executes from inside RESET.
struct Executes;

impl hcabus::host::EventCallback for Executes {
    fn on_event(
        &self,
        bus: hcabus::host::ClientView<'_, hcabus::host::StdPlatform>,
        id: ClientId,
        event: Event,
    ) {
        if let Event::Reset { epoch, .. } = event {
            let _ = bus.reset_execute(id, epoch);
        }
    }
}

/// Page faults of the whole process (every thread of the threaded host: the callers', the
/// timer thread) over `resets` reset windows on the threaded host with `clients` clients
/// that execute from inside RESET, after one warm-up reset; with the wall time of a reset.
/// `None` where faults cannot be read or a reset did not end within its bound.
pub fn threaded_faults(clients: usize, resets: usize) -> Option<(u64, std::time::Duration)> {
    use std::sync::Arc;
    let hca = crate::SharedSimHca::new(SimHca::new(SimHcaConfig {
        hw_reset: Duration::from_ms(1),
        ..SimHcaConfig::default()
    }));
    let config = Config {
        max_clients: BENCH_MAX_CLIENTS,
        recorder_capacity: 8192,
        policy: bench_policy(),
    };
    let host = hcabus::host::ThreadedHost::start(config, hca).ok()?;
    let bus = host.bus();
    for i in 0..clients {
        let desc = ClientDesc::new(&format!("c{i}"), ClientKind::Custom, ClientFlags::empty())?;
        bus.register(desc, Arc::new(Executes)).ok()?;
    }
    let bound = std::time::Duration::from_secs(10);
    let reset = || -> Option<()> {
        bus.admin_reset(AdminReset::Forced).ok()?;
        bus.wait_idle(bound).ok()?.then_some(())
    };
    reset()?;
    let mut faults = FaultCounter::new(FaultScope::Process);
    let before = faults.read()?;
    let t = std::time::Instant::now();
    for _ in 0..resets {
        reset()?;
    }
    let wall = t.elapsed() / u32::try_from(resets.max(1)).ok()?;
    Some((faults.read()? - before, wall))
}

/// Whose page faults [`minor_faults`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultScope {
    /// The calling thread (`getrusage(RUSAGE_THREAD)`'s `ru_minflt`).
    Thread,
    /// Every thread of the process.
    Process,
}

/// Reads minor page faults so far from `/proc` (field 10 of `stat`, after the command name)
/// into a buffer reserved and written when it is made, so a reading does not itself fault
/// in a heap page before the kernel writes the figure.
#[derive(Debug)]
pub struct FaultCounter {
    scope: FaultScope,
    buf: std::string::String,
}

impl FaultCounter {
    pub fn new(scope: FaultScope) -> Self {
        let mut buf = std::string::String::with_capacity(4096);
        for _ in 0..buf.capacity() {
            buf.push(' ');
        }
        buf.clear();
        FaultCounter { scope, buf }
    }

    /// The count now; `None` where there is no `/proc` (not Linux) or it cannot be read.
    pub fn read(&mut self) -> Option<u64> {
        use std::io::Read as _;
        let path = match self.scope {
            FaultScope::Thread => "/proc/thread-self/stat",
            FaultScope::Process => "/proc/self/stat",
        };
        self.buf.clear();
        std::fs::File::open(path)
            .ok()?
            .read_to_string(&mut self.buf)
            .ok()?;
        // The command name is in parentheses and may hold spaces: count fields after it.
        let after = &self.buf[self.buf.rfind(')')? + 1..];
        // Fields from 3 (state) on; minflt is field 10.
        after.split_whitespace().nth(7)?.parse().ok()
    }
}

/// Minor page faults so far (see [`FaultCounter`]); this one allocates its buffer, so call
/// it outside a window being measured.
pub fn minor_faults(scope: FaultScope) -> Option<u64> {
    FaultCounter::new(scope).read()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn minor_faults_count_a_fresh_page_touched() {
        let before = minor_faults(FaultScope::Thread).expect("/proc on Linux");
        // Fresh pages, each written once: the kernel maps them on first touch. Above
        // glibc's largest mmap threshold (32 MiB), so a new mapping: heap memory another
        // test freed is already mapped and faults nothing (CI saw 0 -> 0).
        let mut v: Vec<u8> = Vec::with_capacity(64 << 20);
        for i in (0..64 << 12).step_by(4096) {
            v.spare_capacity_mut()[i].write(1);
        }
        // Kept: an optimised build would otherwise drop the writes and the buffer with them.
        core::hint::black_box(&mut v);
        let after = minor_faults(FaultScope::Thread).expect("/proc on Linux");
        // Transparent huge pages may map several pages per fault: at least one is seen.
        assert!(after > before, "{before} -> {after}");
        assert!(minor_faults(FaultScope::Process).expect("process") >= after);
    }

    #[test]
    fn the_floor_acknowledges_every_client_once() {
        let mut f = Floor::new(64);
        assert_eq!(f.reset(Epoch(2)), 64);
        assert_eq!(f.reset(Epoch(3)), 64);
    }

    #[test]
    fn the_minimal_host_runs_resets_back_to_back() {
        let mut h = MinimalHost::new(64, false).expect("host");
        assert_eq!(h.clients(), 64);
        assert_eq!(h.reset(), Some(Epoch(2)));
        assert_eq!(h.reset(), Some(Epoch(3)));
        assert_eq!(h.coordinator().state(), State::Operational);
        assert_eq!(h.coordinator().counters().resets_restored, 2);
    }

    #[test]
    fn re_registering_clients_stay_registered_through_resets() {
        let mut h = MinimalHost::new(16, true).expect("host");
        assert_eq!(h.reset(), Some(Epoch(2)));
        assert_eq!(h.reset(), Some(Epoch(3)));
        assert_eq!(h.coordinator().clients().count(), 16);
    }
}
