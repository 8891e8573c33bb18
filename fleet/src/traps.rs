//! A trap storm (docs/fleet.md "Traps and sweeps"): a bad cable on a leaf switch bounces, and
//! the switch tells the subnet manager of each change with a trap; what OpenSM does with
//! them decides when every other trained port of the fabric is swept Active.
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
//!   the notice's CRC, whose toggle bit alternates trap by trap, so two keys a switch), each
//!   key aging out 5 s after its latest (`OSM_DEFAULT_TRAP_SUPRESSION_TIMEOUT`); a trap whose
//!   key was counted more than 10 times is ignored: no sweep.
//! - With no request, the master sweeps every `sweep_interval` (10 s) after its last sweep:
//!   a light sweep, which reads every switch and sweeps heavily if one has its bit set.
//!
//! So a port that trains on the storm's leaf while the switch's bit is set, or while its
//! traps are ignored, is Init until the next sweep the storm or the timer makes; a port
//! anywhere that trains during a sweep waits for the next one. Not modelled: the traps of
//! other ports (their sweeps, which would sweep a waiting port sooner, are the ports' own
//! only); the routing a sweep changes.

use std::sync::Arc;
use std::vec::Vec;

use hcabus::{Duration, Instant};
use hcabus_sim::hca::SweepSchedule;

use super::recovery::Recovery;
use super::{Fleet, FleetFault, Step};

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
    /// Heavy sweeps made: for a trap, or by the timer finding the switch's bit set.
    pub sweeps: u64,
    /// How long the master was busy sweeping, and the longest a port on the leaf that
    /// trained at the worst instant waited for its sweep to begin.
    pub busy: Duration,
    pub longest_deaf: Duration,
}

/// The master's sweeps through a storm, and when the storm's leaf was deaf: a change there
/// then sends no trap the master acts on.
#[derive(Debug, Default)]
pub struct SweepPlan {
    /// Each heavy sweep's beginning, in order; each lasts `sweep`.
    sweeps: Vec<Instant>,
    sweep: Duration,
    /// Half-open on the left: a port that trains at `t` with `a < t <= b` is not heard.
    deaf: Vec<(Instant, Instant)>,
    figures: TrapFigures,
}

/// The master as the plan is made.
struct Master {
    sweep: Duration,
    /// The switch's bit, set since this instant.
    latched: Option<Instant>,
    toggle: usize,
    /// Per key: times counted, and its latest.
    counted: [u32; 2],
    latest: [Option<Instant>; 2],
    busy_until: Instant,
    pending: bool,
    sweeps: Vec<Instant>,
    deaf: Vec<(Instant, Instant)>,
    deaf_since: Option<Instant>,
    figures: TrapFigures,
}

impl Master {
    /// The count a trap of `key` would find at `t`, its key aged out or not.
    fn count_at(&self, key: usize, t: Instant) -> u32 {
        match self.latest[key] {
            Some(l) if t <= l + TRAP_AGING => self.counted[key],
            _ => 0,
        }
    }

    /// Whether a change at `t` (before what happens then) would be heard.
    fn hears(&self, t: Instant) -> bool {
        self.latched.is_none() && self.count_at(self.toggle, t) <= TRAP_THRESHOLD
    }

    /// Notes the leaf's deafness as it stands after what happened at `t`.
    fn note_deaf(&mut self, t: Instant) {
        match (self.hears(t), self.deaf_since) {
            (false, None) => self.deaf_since = Some(t),
            (true, Some(a)) => {
                self.deaf_since = None;
                if a < t {
                    self.deaf.push((a, t));
                }
            }
            _ => {}
        }
    }

    fn begin_sweep(&mut self, t: Instant) {
        self.sweeps.push(t);
        self.busy_until = t + self.sweep;
        self.figures.busy = self.figures.busy + self.sweep;
        self.figures.sweeps += 1;
        // The sweep reads the switch and clears its bit.
        self.latched = None;
    }

    fn ask_sweep(&mut self, t: Instant) {
        if t >= self.busy_until {
            self.begin_sweep(t);
        } else {
            self.pending = true;
        }
    }

    /// The cable changes at `t`.
    fn change(&mut self, t: Instant) {
        self.figures.changes += 1;
        if self.latched.is_some() {
            return;
        }
        self.latched = Some(t);
        self.figures.traps += 1;
        let key = self.toggle;
        self.toggle ^= 1;
        let count = self.count_at(key, t);
        self.counted[key] = count + 1;
        self.latest[key] = Some(t);
        if count > TRAP_THRESHOLD {
            self.figures.ignored += 1;
        } else {
            self.ask_sweep(t);
        }
    }

    /// What the master does by itself before `t`: the sweep asked for during the last, its
    /// timer's light sweeps (heavy when the switch's bit is set).
    fn until(&mut self, t: Instant) {
        loop {
            let at = if self.pending {
                self.busy_until
            } else if let Some(since) = self.latched {
                // The first of the timer's light sweeps to find the bit set.
                let every = SWEEP_INTERVAL.as_us();
                let after = since.saturating_since(self.busy_until).as_us();
                self.busy_until + Duration::from_us(after.div_ceil(every).max(1) * every)
            } else {
                Instant::from_us(u64::MAX)
            };
            // A key counted past the threshold ages out: the leaf is heard again then.
            let aged = self.latest[self.toggle]
                .filter(|_| self.counted[self.toggle] > TRAP_THRESHOLD)
                .map(|l| l + TRAP_AGING + Duration::from_us(1))
                .filter(|a| self.deaf_since.is_some() && *a < at.min(t));
            if let Some(a) = aged {
                self.counted[self.toggle] = 0;
                self.note_deaf(a);
                continue;
            }
            if at >= t {
                return;
            }
            debug_assert!(at < Instant::from_us(u64::MAX));
            self.pending = false;
            self.note_deaf(at);
            self.begin_sweep(at);
            self.note_deaf(at);
        }
    }
}

impl SweepPlan {
    /// The plan of a cable that goes dark at each of `downs` for `down`, its link training
    /// in `link_up` once back, on a fabric whose sweep takes `sweep`; `heard` are traps of
    /// other switches (a fabric event's), each asking for a sweep.
    pub fn new(
        downs: &[Instant],
        (down, link_up): (Duration, Duration),
        sweep: Duration,
        heard: &[Instant],
    ) -> Self {
        // (instant, from the storm's switch)
        let mut changes: Vec<(Instant, bool)> = Vec::with_capacity(downs.len() * 2 + heard.len());
        // The switch's port changes state when its link goes down from up, and when it has
        // trained again: a cable out again before its link trained changes nothing.
        let mut up = true;
        for (k, d) in downs.iter().enumerate() {
            if up {
                changes.push((*d, true));
            }
            let trained = *d + down + link_up;
            up = downs.get(k + 1).is_none_or(|next| trained < *next);
            if up {
                changes.push((trained, true));
            }
        }
        changes.extend(heard.iter().map(|t| (*t, false)));
        changes.sort();
        let mut m = Master {
            sweep,
            latched: None,
            toggle: 0,
            counted: [0; 2],
            latest: [None; 2],
            busy_until: Instant::ZERO,
            pending: false,
            sweeps: Vec::new(),
            deaf: Vec::new(),
            deaf_since: None,
            figures: TrapFigures::default(),
        };
        for (t, storm) in changes {
            m.until(t);
            if storm {
                m.change(t);
            } else {
                m.ask_sweep(t);
            }
            m.note_deaf(t);
        }
        // Until the master has heard the last change and the keys aged out.
        let quiet = m
            .latest
            .iter()
            .flatten()
            .max()
            .copied()
            .unwrap_or(Instant::ZERO)
            + TRAP_AGING;
        m.until(quiet + SWEEP_INTERVAL + sweep + Duration::from_us(1));
        let end = quiet.max(m.busy_until);
        m.note_deaf(end);
        if let Some(a) = m.deaf_since.take() {
            m.deaf.push((a, end));
        }
        let mut plan = SweepPlan {
            sweeps: m.sweeps,
            sweep,
            deaf: m.deaf,
            figures: m.figures,
        };
        // A port on the leaf waits the longest when it trains just after the leaf went deaf,
        // or just after a sweep within that began (it finds the port trained too late).
        let starts = plan.deaf.iter().flat_map(|(a, b)| {
            let within = plan.sweeps.iter().filter(move |s| *a < **s && **s < *b);
            core::iter::once(*a).chain(within.copied())
        });
        plan.figures.longest_deaf = starts
            .map(|a| {
                let t = a + Duration::from_us(1);
                plan.begins(t, true).saturating_since(t)
            })
            .max()
            .unwrap_or(Duration::ZERO);
        plan
    }

    pub fn figures(&self) -> TrapFigures {
        self.figures
    }

    fn first_from(sweeps: &[Instant], t: Instant) -> Option<Instant> {
        let k = sweeps.partition_point(|s| *s < t);
        sweeps.get(k).copied()
    }

    /// Whether a change on the leaf at `t` goes unheard.
    fn deaf_at(&self, t: Instant) -> bool {
        let k = self.deaf.partition_point(|(a, _)| *a < t);
        k > 0 && t <= self.deaf[k - 1].1
    }

    /// The sweep in progress at `t`, by its beginning: one that begins at `t` is the one a
    /// trap then asked for, and finds what trained then.
    fn sweeping_at(&self, t: Instant) -> Option<Instant> {
        let k = self.sweeps.partition_point(|s| *s < t);
        let s = *self.sweeps.get(k.checked_sub(1)?)?;
        (t < s + self.sweep).then_some(s)
    }

    /// When the sweep that finds a port trained at `t` begins: its own trap's, at once or
    /// after the sweep in progress; on the storm's leaf while it is deaf, the next the
    /// storm makes or the master's timer.
    pub fn begins(&self, t: Instant, on_leaf: bool) -> Instant {
        if on_leaf && self.deaf_at(t) {
            let after = self.sweeping_at(t).map_or(t, |s| s + self.sweep);
            let k = self.sweeps.partition_point(|s| *s + self.sweep <= after);
            let last_end = k
                .checked_sub(1)
                .map_or(Instant::ZERO, |k| self.sweeps[k] + self.sweep);
            let every = SWEEP_INTERVAL.as_us();
            let waited = after.saturating_since(last_end).as_us().div_ceil(every) * every;
            let timer = last_end + Duration::from_us(waited.max(every));
            let storm = SweepPlan::first_from(&self.sweeps, t);
            return storm.map_or(timer, |s| s.min(timer));
        }
        self.sweeping_at(t).map_or(t, |s| s + self.sweep)
    }
}

/// A trap storm as the fleet keeps it: its cable's bounces, the other switches' traps the
/// master heard since, and the plan they make.
#[derive(Debug)]
pub(super) struct Storm {
    leaf: u32,
    downs: Vec<Instant>,
    down: Duration,
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
        let n = self.hosts.len() as u32;
        let adapters = self
            .hosts
            .first()
            .map_or(1, super::FleetNode::adapter_count);
        let host = self.topology.hosts_on(leaf, n, adapters).first().copied();
        // A cable whose host is still off carries no light: no change, no trap.
        let downs: Vec<Instant> = match host.filter(|h| !self.powered_off(*h)) {
            Some(_) => (0..bounces)
                .map(|k| now + Duration::from_us(every.as_us() * u64::from(k)))
                .collect(),
            None => Vec::new(),
        };
        let storm = Storm {
            leaf,
            downs: downs.clone(),
            down,
            heard: Vec::new(),
            plan: Arc::new(SweepPlan::default()),
        };
        self.storm = Some(storm);
        self.replan();
        let (Some(host), Some(last)) = (host, downs.last().copied()) else {
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

    /// The master's plan made again from the storm and the traps heard so far, and every
    /// host's adapters given it: it changes nothing before the latest of them.
    fn replan(&mut self) {
        let n = self.hosts.len() as u32;
        let (link_up, sweep) = (self.link_up(), self.sm.sweep(n));
        let Some(s) = &mut self.storm else {
            return;
        };
        s.plan = Arc::new(SweepPlan::new(&s.downs, (s.down, link_up), sweep, &s.heard));
        for i in 0..n {
            self.install_sweeps(i);
            self.schedule(i);
        }
    }

    /// Other switches trap at each of `at` (a fabric event's ports going down, then
    /// training): each asks the master for a sweep, which finds the storm's leaf too.
    pub(super) fn heard_elsewhere(&mut self, at: &[Instant]) {
        if let Some(s) = &mut self.storm {
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
        self.flap(host, down, Some(leaf));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Instant {
        Instant::from_ms(v)
    }

    /// A cable bouncing every second, dark 100 ms, on a fabric whose sweep takes 2.5 s.
    fn bouncing(bounces: u64) -> SweepPlan {
        let downs: Vec<Instant> = (0..bounces).map(|k| ms(10_000 + 1_000 * k)).collect();
        let cable = (Duration::from_ms(100), Duration::from_ms(50));
        SweepPlan::new(&downs, cable, Duration::from_ms(2_500), &[])
    }

    #[test]
    fn one_bounce_is_two_changes_one_trap_each_sweep_and_no_port_waits_after() {
        let p = bouncing(1);
        let f = p.figures();
        // Down at 10 s: a trap, a sweep; up at 10.15 s, during that sweep: the bit was
        // cleared as it began, so a trap, and the sweep after.
        assert_eq!((f.changes, f.traps, f.ignored, f.sweeps), (2, 2, 0, 2));
        assert_eq!(p.sweeps, std::vec![ms(10_000), ms(12_500)]);
        // A port elsewhere trained in the first sweep waits for the second; after, none.
        assert_eq!(p.begins(ms(11_000), false), ms(12_500));
        assert_eq!(p.begins(ms(16_000), false), ms(16_000));
        assert_eq!(p.begins(ms(16_000), true), ms(16_000));
    }

    #[test]
    fn a_long_storm_keeps_the_master_sweeping_until_its_traps_are_ignored() {
        let p = bouncing(120);
        let f = p.figures();
        // One trap a sweep (the switch's bit: 45 of 240 changes), each key's 5 s apart: the
        // 23rd is its key's twelfth, ignored, and the bit stays set until the timer's sweep
        // 10 s after the last; the keys aged out by then, 22 more are heard before the end.
        assert_eq!(
            (f.changes, f.traps, f.ignored, f.sweeps),
            (240, 45, 1, 45),
            "{f:?}"
        );
        // Back to back while heard.
        assert_eq!(p.sweeps[..3], [ms(10_000), ms(12_500), ms(15_000)]);
        assert_eq!(p.sweeps[21..23], [ms(62_500), ms(75_000)]);
        // A leaf-mate that trains as the sweep of 62.5 s begins is past it; its own trap
        // would be ignored: it waits for the timer's, 12.4 s.
        assert_eq!(p.begins(ms(62_600), true), ms(75_000));
        assert_eq!(f.longest_deaf, Duration::from_us(12_500_000 - 1));
        // A port elsewhere trained then waits only for the sweep in progress.
        assert_eq!(p.begins(ms(62_600), false), ms(65_000));
    }

    #[test]
    fn without_the_bit_latched_a_quiet_switch_is_heard_at_once() {
        let p = bouncing(3);
        let end = *p.sweeps.last().expect("sweeps") + Duration::from_ms(2_500);
        let t = end + TRAP_AGING + SWEEP_INTERVAL;
        assert_eq!(p.begins(t, true), t);
    }
}
