//! A trap storm (docs/fleet.md "A trap storm"): a bad cable on a leaf switch bounces, and
//! the switch tells the subnet manager of each change with a trap; what OpenSM does with
//! them decides when the other trained ports of the fabric are swept Active.
//!
//! - A switch latches a port's change in `SwitchInfo:PortStateChange` and sends trap 128
//!   when that bit goes from clear to set; the master clears it as its sweep reads the
//!   switch. A change while it is set sends nothing: the switch's traps come at most one a
//!   sweep (IBA 14.2.5.4, SwitchInfo).
//! - Each trap 128 makes OpenSM ask for a heavy sweep (`sweep_on_trap`, on by default).
//!   Sweeps do not overlap: one asked for during a sweep runs after it, and every request
//!   made meanwhile is that one sweep (`osm_sm_signal`). A sweep takes the fabric's time
//!   ([`crate::SmSetup::sweep`]).
//! - OpenSM counts a trap by its source and content (`osm_trap_rcv.c`: the switch's LID and
//!   the notice's CRC; a trap's toggle and count are 0, so one key a switch), the key aging
//!   out 5 s after its latest (`OSM_DEFAULT_TRAP_SUPRESSION_TIMEOUT`); a trap whose key was
//!   counted more than 10 times is ignored: no sweep, and the switch's bit stays set.
//! - With no request, the master sweeps `sweep_interval` (10 s) after its last sweep: a
//!   light sweep, which reads every switch and sweeps heavily if one has its bit set.
//!
//! So a port that trains on the storm's leaf while the switch's bit is set, or while its
//! traps are ignored, is Init until the next sweep anything makes (the storm, another
//! switch's trap, the timer); a port anywhere that trains during one of the storm's sweeps
//! waits for the next. A fabric event's own traps (a flap's, a leaf's reboot's, heard from
//! other switches) are sweeps too, which find a deaf leaf's ports; their own ports are
//! found by them in turn, as without a storm. Not modelled: the traps of a single port
//! elsewhere (its own sweep is its alone); the routing a sweep changes; a new master during
//! the storm (its count starts empty); the staged power-on's own sweeps (`boot.rs`).

use std::sync::Arc;
use std::vec::Vec;

use hcabus::{Duration, Instant};
use hcabus_sim::hca::SweepSchedule;

use super::recovery::Recovery;
use super::{Fleet, FleetFault, Step};

mod plan;

pub use plan::{Cable, SweepPlan};

/// A key counted more than this many times is ignored (`osm_trap_rcv.c`: `num_received >
/// 10`).
pub const TRAP_THRESHOLD: u32 = 10;
/// A key ages out this long after its latest trap (`OSM_DEFAULT_TRAP_SUPRESSION_TIMEOUT`).
pub const TRAP_AGING: Duration = Duration::from_ms(5_000);
/// The master's own sweep period (OpenSM `sweep_interval`, 10 s).
pub const SWEEP_INTERVAL: Duration = Duration::from_ms(10_000);
/// The most bounces a storm may have: a storm's plan is made at once.
pub const MAX_BOUNCES: u32 = 10_000;

/// What the storm made the subnet manager do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrapFigures {
    /// The cable's changes (down and up), the traps they sent (a change while the switch's
    /// bit was set sends none), and those the master ignored.
    pub changes: u64,
    pub traps: u64,
    pub ignored: u64,
    /// Heavy sweeps the storm made: for a trap of its switch, or by the timer finding the
    /// switch's bit set (another switch's alone not counted).
    pub sweeps: u64,
    /// How long the master was busy with them, and the longest a port on the leaf that
    /// trained at the worst instant waited for its sweep to begin.
    pub busy: Duration,
    pub longest_deaf: Duration,
}

/// A trap storm as the fleet keeps it: its cable's bounces, the other switches' traps the
/// master heard since, and the plan they make.
#[derive(Debug)]
pub(super) struct Storm {
    leaf: u32,
    downs: Vec<Instant>,
    down: Duration,
    /// Whether the cable's link was up as the storm began.
    starts_up: bool,
    /// The storm switch's other changes (a fabric event's on its other ports), and the
    /// other switches' traps the master heard.
    also: Vec<Instant>,
    heard: Vec<Instant>,
    plan: Arc<SweepPlan>,
}

/// One adapter's view of a plan: on the storm's leaf or not.
#[derive(Debug)]
pub struct LeafSweeps {
    pub plan: Arc<SweepPlan>,
    pub on_leaf: bool,
}

impl SweepSchedule for LeafSweeps {
    fn sweep_begins(&self, trained: Instant) -> Instant {
        self.plan.begins(trained, self.on_leaf)
    }
}

impl Fleet {
    /// A trap storm starts now: the master's plan for it reaches every adapter (on the
    /// storm's leaf or not), and the cable's bounces are scheduled. Its row is made at the
    /// last bounce: the host is back once back from that one.
    pub(super) fn start_storm(&mut self, fault: FleetFault) {
        let FleetFault::TrapStorm {
            leaf,
            down,
            every,
            bounces,
        } = fault
        else {
            return;
        };
        let now = self.now;
        // A cable whose host is still off carries no light: no change, no trap.
        let cable = self
            .storm_cable(leaf)
            .filter(|(h, _)| !self.powered_off(*h));
        let downs: Vec<Instant> = match cable {
            Some(_) => (0..bounces)
                .map(|k| now + Duration::from_us(every.as_us() * u64::from(k)))
                .collect(),
            None => Vec::new(),
        };
        let starts_up = cable.is_some_and(|(h, a)| {
            let host = &mut self.hosts[h as usize];
            host.run_until(now);
            host.adapter_mut(a).is_some_and(|adapter| {
                adapter.hca().ports().state(1, now) != hcabus::types::PortState::Down
            })
        });
        let storm = Storm {
            leaf,
            downs: downs.clone(),
            down,
            starts_up,
            also: Vec::new(),
            heard: Vec::new(),
            plan: Arc::new(SweepPlan::default()),
        };
        self.storm = Some(storm);
        self.replan();
        let (Some((host, _)), Some(last)) = (cable, downs.last().copied()) else {
            let r = Recovery::new(fault, now, Vec::new(), self.seen());
            self.recoveries.push(r);
            return;
        };
        for t in downs {
            let step = Step::Bounce {
                host,
                fault,
                last: t == last,
            };
            self.insert_step(t, step);
        }
    }

    /// The storm's bad cable on `leaf`: the first host with an adapter there (a dual-rail
    /// host's second adapter may be a neighbour's), and that adapter.
    fn storm_cable(&self, leaf: u32) -> Option<(u32, usize)> {
        let n = self.hosts.len() as u32;
        let adapters = self
            .hosts
            .first()
            .map_or(1, super::FleetNode::adapter_count);
        let host = *self.topology.hosts_on(leaf, n, adapters).first()?;
        let adapter = (0..adapters).find(|a| self.topology.leaf_of(host, *a) == leaf)?;
        Some((host, adapter))
    }

    /// The master's plan made again from the storm and the traps heard so far, and every
    /// host's adapters given it: it changes nothing before the latest of them.
    fn replan(&mut self) {
        let n = self.hosts.len() as u32;
        let (link_up, sweep) = (self.link_up(), self.sm.sweep(n));
        let Some(s) = &mut self.storm else {
            return;
        };
        let cable = Cable {
            downs: &s.downs,
            down: s.down,
            link_up,
            starts_up: s.starts_up,
            also: &s.also,
        };
        s.plan = Arc::new(SweepPlan::new(cable, sweep, &s.heard));
        for i in 0..n {
            self.install_sweeps(i);
            self.schedule(i);
        }
    }

    /// A fabric event's ports change at each of `at` (going down, then trained), and other
    /// switches trap them (a core switch, the spine above a rebooted leaf): each asks for a
    /// sweep, which finds the storm's leaf too. With `storm_switch`, the storm's own switch
    /// has ports among them: it counts those changes under its key and sets its bit.
    pub(super) fn heard_elsewhere(&mut self, at: &[Instant], storm_switch: bool) {
        if let Some(s) = &mut self.storm {
            if storm_switch {
                s.also.extend_from_slice(at);
            }
            s.heard.extend_from_slice(at);
            self.replan();
        }
    }

    /// Host `i`'s adapters sweep by the storm's plan, those on its leaf as the leaf is heard.
    pub(super) fn install_sweeps(&mut self, i: u32) {
        let Some(Storm { plan, leaf, .. }) = &self.storm else {
            return;
        };
        let node = &mut self.hosts[i as usize];
        for a in 0..node.adapter_count() {
            let view = LeafSweeps {
                plan: plan.clone(),
                on_leaf: self.topology.leaf_of(i, a) == *leaf,
            };
            if let Some(adapter) = node.adapter_mut(a) {
                adapter.hca_mut().set_sweeps(Some(Arc::new(view)));
            }
        }
    }

    /// The storm's cable goes dark now; at its last bounce, the storm's row starts.
    pub(super) fn bounce(&mut self, host: u32, fault: FleetFault, last: bool) {
        let FleetFault::TrapStorm { leaf, down, .. } = fault else {
            return;
        };
        let Some((_, adapter)) = self.storm_cable(leaf) else {
            return;
        };
        if self.powered_off(host) {
            return;
        }
        let now = self.now;
        // As a leaf's reboot: the host at the instant, with what it had due then done.
        self.hosts[host as usize].run_until(now);
        if last {
            let r = Recovery::new(fault, now, std::vec![host], self.seen());
            self.recoveries.push(r);
        }
        self.pull(host, down, |a| a == adapter);
    }

    /// How long after a bounce at `at`, dark for `down`, the storm's port is Active again:
    /// trained, then swept when the master's plan sweeps it (a port on the leaf).
    pub(super) fn storm_port_back(&self, at: Instant, down: Duration) -> Duration {
        let trained = at + down + self.link_up();
        let begins = self
            .storm
            .as_ref()
            .map_or(trained, |s| s.plan.begins(trained, true).max(trained));
        (begins + self.sm.sweep_base).saturating_since(at)
    }

    /// What a trap storm made the master do (`None`: no storm).
    pub fn traps(&self) -> Option<TrapFigures> {
        self.storm.as_ref().map(|s| s.plan.figures())
    }
}
