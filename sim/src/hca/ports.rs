//! The simulated adapter's ports: link training and the subnet manager's sweep in virtual
//! time (docs/design.md §2, §5 "Ports").
//!
//! After a hardware reset (or a cable plugged back) a port is Down until its link has
//! trained (`link_up`), Init until the subnet manager has swept and assigned it a LID
//! (`sm_sweep`), then Active. A reset gives the port a new LID, as a subnet manager may; a
//! cable pull keeps it. The cable is the fabric's: a reset darkens the device's side of the
//! link but never plugs a pulled cable back in, so a port trains only once both the device
//! gives light and the cable is in (docs/design.md §5 "Ports"). A new master that reassigns
//! LIDs gives every port a new one at the instant its sweep reaches it, Active or not
//! (`renumber`). Peers ask of past instants too (`carried_at`, `carried_since`): the latest
//! pull and the one before it, the latest light and the LID before the latest renumbering
//! are remembered. The host reads the changes with
//! [`SimPorts::poll`] and hands each to the coordinator, as a driver would from the adapter's
//! port-change event.

use std::sync::Arc;

use hcabus::time::{Duration, Instant};
use hcabus::types::{default_gid, LinkSpeed, PhysState, PortAttrs, PortState, MAX_PORTS};

/// When a fabric's subnet manager begins the sweep that finds a port trained at an instant:
/// at once when it is idle, later when it is busy sweeping or does not hear of the port (a
/// fleet's trap storm, `hcabus-fleet`'s `traps.rs`). Without one, every sweep begins as the
/// port trains.
pub trait SweepSchedule: core::fmt::Debug + Send + Sync {
    fn sweep_begins(&self, trained: Instant) -> Instant;
}

/// LIDs the simulated subnet manager hands out (unicast LIDs start at 1).
const FIRST_LID: u16 = 0x10;
/// The simulated subnet manager's own LID.
const SM_LID: u16 = 1;
/// The link every simulated port trains to: 4X EDR, 100 Gb/s, a ConnectX-4's.
const WIDTH: u8 = 4;
const SPEED: LinkSpeed = LinkSpeed::Edr;

/// The device's side of a port's link: whether its PHY gives light, and since when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Light {
    /// Trained and swept since the start: Active with no training to wait for.
    Up,
    /// Light from `from` on (the device back from a reset): training, then the sweep.
    From(Instant),
    /// No light until something else happens (device held in reset for good, removed).
    Dark,
}

/// The fabric's side: the cable. It belongs to the fabric, not to the adapter, so nothing
/// the device does (a reset, a removal) puts it back; only time does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cable {
    /// Out from this instant...
    out_from: Instant,
    /// ...until this one; pulls that overlap keep it out until the latest plug-back.
    back_at: Instant,
}

#[derive(Debug, Clone, Copy)]
struct Port {
    light: Light,
    /// The latest pull (`None`: never pulled). Once plugged back the link trains from then.
    cable: Option<Cable>,
    /// The pull before the latest one, from its start until the port was Active again: a
    /// peer's transport judges its retransmissions across two flaps close together by both.
    dark_before: Option<(Instant, Instant)>,
    lid: u16,
    /// The LID it had before a new master renumbered it, until that instant.
    lid_before: Option<(Instant, u16)>,
    gid: [u8; 16],
    /// What the host was last told.
    reported: Option<PortAttrs>,
    /// Times the link went from up to down (IBA PortCounters: LinkDownedCounter), as the
    /// host saw it on its polls.
    downed: u64,
}

impl Port {
    fn cable_out(&self, now: Instant) -> bool {
        self.cable
            .is_some_and(|c| c.out_from <= now && now < c.back_at)
    }

    /// When the link last started (or will start) training: light from the device and the
    /// cable in, whichever came last. `None`: Active since the start, never disturbed.
    fn training_from(&self) -> Option<Instant> {
        let light = match self.light {
            Light::From(t) => Some(t),
            Light::Up | Light::Dark => None,
        };
        let plugged = self.cable.map(|c| c.back_at);
        light.max(plugged)
    }
}

/// Every port of one adapter.
#[derive(Debug, Clone)]
pub struct SimPorts {
    ports: [Option<Port>; MAX_PORTS as usize],
    link_up: Duration,
    sm_sweep: Duration,
    next_lid: u16,
    /// No subnet manager sweeps from the first instant to the second (a master failed; its
    /// standby has not taken over and swept yet): a port trained meanwhile waits in Init.
    sm_away: Option<(Instant, Instant)>,
    /// When the sweep that finds a trained port begins (`None`: as it trains).
    sweeps: Option<Arc<dyn SweepSchedule>>,
}

impl SimPorts {
    /// `count` ports (1..=MAX_PORTS) of the adapter whose node GUID is `node_guid`, Active
    /// from the start.
    pub fn new(count: u8, node_guid: u64, link_up: Duration, sm_sweep: Duration) -> Self {
        let mut ports = [None; MAX_PORTS as usize];
        let mut next_lid = FIRST_LID;
        for (p, number) in ports
            .iter_mut()
            .take(usize::from(count.min(MAX_PORTS)))
            .zip(1u8..)
        {
            *p = Some(Port {
                light: Light::Up,
                cable: None,
                dark_before: None,
                lid: next_lid,
                lid_before: None,
                gid: default_gid(node_guid, number),
                reported: None,
                downed: 0,
            });
            next_lid += 1;
        }
        SimPorts {
            ports,
            link_up,
            sm_sweep,
            next_lid,
            sm_away: None,
            sweeps: None,
        }
    }

    /// When a port whose link started training at `from` is swept: after its training and
    /// the sweep, or once a master is back if none is then.
    fn swept_at(&self, from: Instant) -> Instant {
        let trained = from + self.link_up;
        let begins = self
            .sweeps
            .as_ref()
            .map_or(trained, |s| s.sweep_begins(trained).max(trained));
        let swept = begins + self.sm_sweep;
        match self.sm_away {
            Some((gone, back)) if gone <= swept && swept < back => back,
            _ => swept,
        }
    }

    /// No subnet manager sweeps from `from` until `until` (docs/design.md §11): a port that
    /// trains meanwhile stays Init until then. An Active port stays Active: its LID holds.
    pub fn sm_away(&mut self, from: Instant, until: Instant) {
        // Outages that overlap are one: a later one never ends an earlier one sooner.
        self.sm_away = Some(match self.sm_away {
            Some((a, b)) if from <= b => (a.min(from), b.max(until)),
            _ => (from, until),
        });
    }

    /// The subnet manager's sweeps from now on (`None`: each as its port trains).
    pub fn set_sweeps(&mut self, sweeps: Option<Arc<dyn SweepSchedule>>) {
        self.sweeps = sweeps;
    }

    fn state_at(&self, p: &Port, now: Instant) -> PortState {
        if p.light == Light::Dark || p.cable_out(now) {
            return PortState::Down;
        }
        match p.training_from() {
            None => PortState::Active,
            Some(from) if now < from + self.link_up => PortState::Down,
            Some(from) if now < self.swept_at(from) => PortState::Init,
            Some(_) => PortState::Active,
        }
    }

    /// The link's physical state: dark while the device gives no light (in reset, gone),
    /// polling while the cable is out, training from light and cable until the link is up.
    fn phys_at(&self, p: &Port, now: Instant) -> PhysState {
        if p.light == Light::Dark {
            return PhysState::Disabled;
        }
        if p.cable_out(now) {
            return PhysState::Polling;
        }
        match p.training_from() {
            None => PhysState::LinkUp,
            Some(from) if now < from => PhysState::Disabled,
            Some(from) if now < from + self.link_up => PhysState::Training,
            Some(_) => PhysState::LinkUp,
        }
    }

    /// The LID `p` has at `at`.
    fn lid_of(p: &Port, at: Instant) -> u16 {
        match p.lid_before {
            Some((from, old)) if at < from => old,
            _ => p.lid,
        }
    }

    /// Everything an adapter reports of `p` at `now`.
    fn attrs_at(&self, p: &Port, now: Instant) -> PortAttrs {
        PortAttrs {
            state: self.state_at(p, now),
            phys: self.phys_at(p, now),
            lid: Self::lid_of(p, now),
            sm_lid: SM_LID,
            width: WIDTH,
            speed: Some(SPEED),
            gid: p.gid,
        }
        .normalized()
    }

    fn port_mut(&mut self, port: u8) -> Option<&mut Port> {
        port.checked_sub(1)
            .and_then(|i| self.ports.get_mut(usize::from(i)))
            .and_then(Option::as_mut)
    }

    fn port(&self, port: u8) -> Option<&Port> {
        port.checked_sub(1)
            .and_then(|i| self.ports.get(usize::from(i)))
            .and_then(Option::as_ref)
    }

    /// How long a link takes to train, and the subnet manager to sweep a trained port.
    pub fn timings(&self) -> (Duration, Duration) {
        (self.link_up, self.sm_sweep)
    }

    /// The device was reset: every port goes dark, and trains again from `ready_at` (`None`:
    /// the device never comes back) or from its cable's plug-back, whichever is later. Each
    /// gets a new LID when it is swept. A pulled cable stays pulled.
    pub fn reset(&mut self, ready_at: Option<Instant>) {
        for p in self.ports.iter_mut().flatten() {
            p.light = ready_at.map_or(Light::Dark, Light::From);
            p.lid_before = None;
            p.lid = self.next_lid;
            self.next_lid = self.next_lid.wrapping_add(1).max(FIRST_LID);
        }
    }

    /// A new master that reassigns LIDs sweeps the device at `at`: from then on every port
    /// has a new LID, Active or not (an Active port stays Active under it).
    pub fn renumber(&mut self, at: Instant) {
        for p in self.ports.iter_mut().flatten() {
            p.lid_before = Some((at, Self::lid_of(p, at)));
            p.lid = self.next_lid;
            self.next_lid = self.next_lid.wrapping_add(1).max(FIRST_LID);
        }
    }

    /// Whether a transmission at `at` on a connection made at `since` reached `port`: it
    /// carried packets then, under the LID it had at `since` (a renumbered port's old
    /// address reaches nobody).
    pub fn carried_since(&self, port: u8, since: Instant, at: Instant) -> bool {
        self.carried_at(port, at)
            && self
                .port(port)
                .is_some_and(|p| Self::lid_of(p, since) == Self::lid_of(p, at))
    }

    /// The device is gone: no port has light any more.
    pub fn remove(&mut self) {
        for p in self.ports.iter_mut().flatten() {
            p.light = Light::Dark;
        }
    }

    /// A cable pulled at `now` and plugged back `duration` later, whatever the device is
    /// doing; a pull while the cable is already out keeps it out until the later plug-back.
    /// `false` for no such port.
    pub fn pull_cable(&mut self, port: u8, now: Instant, duration: Duration) -> bool {
        let Some(old) = self.port(port).map(|p| p.cable) else {
            return false;
        };
        let active_again = old.map(|c| self.swept_at(c.back_at));
        let Some(p) = self.port_mut(port) else {
            return false;
        };
        let back_at = now + duration;
        if let (Some(c), Some(until)) = (old, active_again) {
            if !p.cable_out(now) {
                p.dark_before = Some((c.out_from, until));
            }
        }
        p.cable = Some(match p.cable {
            Some(c) if p.cable_out(now) => Cable {
                out_from: c.out_from,
                back_at: c.back_at.max(back_at),
            },
            _ => Cable {
                out_from: now,
                back_at,
            },
        });
        true
    }

    /// Whether `port`'s cable is out at `now` (false for a port the adapter does not have).
    pub fn cable_out(&self, port: u8, now: Instant) -> bool {
        self.port(port).is_some_and(|p| p.cable_out(now))
    }

    /// Whether `port` carried packets at `at`, now or in the past: a peer's transport asks
    /// it of each transmission it made. Before the latest pull the port carried (its light
    /// and sweep held then); before the device's latest light it carried nothing (in reset).
    pub fn carried_at(&self, port: u8, at: Instant) -> bool {
        let Some(p) = self.port(port) else {
            return false;
        };
        let dark_before = p
            .dark_before
            .is_some_and(|(from, to)| from <= at && at < to);
        if p.light == Light::Dark || p.cable_out(at) || dark_before {
            return false;
        }
        match p.training_from() {
            None => true,
            Some(from) if at >= from => at >= self.swept_at(from),
            Some(_) => {
                let lit = match p.light {
                    Light::Up => true,
                    Light::From(t) => at >= self.swept_at(t),
                    Light::Dark => false,
                };
                lit && p.cable.is_some_and(|c| at < c.out_from)
            }
        }
    }

    /// The state of `port` now (Down for a port the adapter does not have).
    pub fn state(&self, port: u8, now: Instant) -> PortState {
        self.port(port)
            .map_or(PortState::Down, |p| self.state_at(p, now))
    }

    /// Calls `report(port, attrs)` for every port whose attributes changed since the last
    /// poll (every port on the first).
    pub fn poll(&mut self, now: Instant, mut report: impl FnMut(u8, PortAttrs)) {
        for i in 0..self.ports.len() {
            let Some(p) = self.ports[i] else {
                continue;
            };
            let attrs = self.attrs_at(&p, now);
            if p.reported != Some(attrs) {
                let was_up = p.reported.is_some_and(|r| r.phys == PhysState::LinkUp);
                if let Some(port) = self.ports[i].as_mut() {
                    port.reported = Some(attrs);
                    port.downed += u64::from(was_up && attrs.phys != PhysState::LinkUp);
                }
                report(i as u8 + 1, attrs);
            }
        }
    }

    /// Times `port`'s link went down (0 for a port the adapter does not have).
    pub fn link_downed(&self, port: u8) -> u64 {
        self.port(port).map_or(0, |p| p.downed)
    }

    /// When a port's state next changes on its own (a cable plugged back, training or the
    /// sweep ending, a new master's LID).
    pub fn next_change(&self, now: Instant) -> Option<Instant> {
        let live = || {
            self.ports
                .iter()
                .flatten()
                .filter(|p| p.light != Light::Dark)
        };
        let trained = live().filter_map(|p| {
            let from = p.training_from()?;
            [from + self.link_up, self.swept_at(from)]
                .into_iter()
                .find(|t| *t > now)
        });
        let renumbered = live().filter_map(|p| p.lid_before.map(|(at, _)| at).filter(|t| *t > now));
        trained.chain(renumbered).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The changes a poll at `at_ms` reports, as (port, state, LID): only those of the
    /// logical state or the LID (the physical state's own are the next test's).
    fn changes(p: &mut SimPorts, at_ms: u64) -> std::vec::Vec<(u8, PortState, u16)> {
        let mut out = std::vec::Vec::new();
        let mut last = p.ports.map(|p| p.and_then(|p| p.reported));
        p.poll(Instant::from_ms(at_ms), |port, a| {
            let before = last[usize::from(port - 1)].replace(a);
            if before.map(|b| (b.state, b.lid)) != Some((a.state, a.lid)) {
                out.push((port, a.state, a.lid));
            }
        });
        out
    }

    fn attrs(p: &mut SimPorts, at_ms: u64) -> PortAttrs {
        let mut seen = None;
        p.poll(Instant::from_ms(at_ms), |_, a| seen = Some(a));
        seen.or(p.ports[0].and_then(|p| p.reported))
            .expect("port 1 reported")
    }

    /// A port that trains while no subnet manager is up waits in Init for the new master;
    /// one Active all along stays Active.
    #[test]
    fn a_port_trained_while_no_master_sweeps_waits_in_init_for_the_new_one() {
        let ms = Duration::from_ms;
        let mut p = SimPorts::new(2, 0x10, ms(1_000), ms(2_000));
        p.sm_away(Instant::from_ms(500), Instant::from_ms(10_000));
        // A shorter outage within it does not end it sooner.
        p.sm_away(Instant::from_ms(600), Instant::from_ms(700));
        assert!(p.pull_cable(1, Instant::from_ms(1_000), ms(100)));
        let at = |p: &SimPorts, port, t| p.state(port, Instant::from_ms(t));
        // Trained at 2.1 s, swept at 4.1 s but for the outage: Init until 10 s.
        assert_eq!(at(&p, 1, 2_000), PortState::Down);
        assert_eq!(at(&p, 1, 5_000), PortState::Init);
        assert_eq!(
            p.next_change(Instant::from_ms(5_000)),
            Some(Instant::from_ms(10_000))
        );
        assert_eq!(at(&p, 1, 10_000), PortState::Active);
        assert_eq!(at(&p, 2, 5_000), PortState::Active, "never disturbed");
        // A port whose sweep would end after the master is back is swept as ever.
        assert!(p.pull_cable(2, Instant::from_ms(9_000), ms(100)));
        assert_eq!(at(&p, 2, 12_099), PortState::Init);
        assert_eq!(at(&p, 2, 12_100), PortState::Active);
    }

    /// A subnet manager that only sweeps at whole ten seconds (one deaf to the port's trap).
    #[derive(Debug)]
    struct EveryTen;
    impl SweepSchedule for EveryTen {
        fn sweep_begins(&self, trained: Instant) -> Instant {
            Instant::from_ms(trained.as_ms().div_ceil(10_000) * 10_000)
        }
    }

    /// A port trained while the subnet manager does not sweep it waits in Init for the
    /// sweep its schedule gives, then its own sweep time; without a schedule it is swept as
    /// it trains.
    #[test]
    fn a_trained_port_waits_for_the_sweep_its_schedule_gives() {
        let ms = Duration::from_ms;
        let mut p = SimPorts::new(1, 0x10, ms(1_000), ms(500));
        p.set_sweeps(Some(Arc::new(EveryTen)));
        assert!(p.pull_cable(1, Instant::from_ms(1_000), ms(100)));
        let at = |p: &SimPorts, t| p.state(1, Instant::from_ms(t));
        // Trained at 2.1 s; the sweep begins at 10 s and takes 0.5 s.
        assert_eq!(at(&p, 2_200), PortState::Init);
        assert_eq!(at(&p, 10_499), PortState::Init);
        assert_eq!(
            p.next_change(Instant::from_ms(2_200)),
            Some(Instant::from_ms(10_500))
        );
        assert_eq!(at(&p, 10_500), PortState::Active);
        p.set_sweeps(None);
        assert_eq!(at(&p, 2_600), PortState::Active, "swept as it trains");
    }

    /// What `ibstat` shows through a reset: Disabled while the device is dark, Training
    /// once it is lit, LinkUp at 4X EDR from Init on; the LIDs and the GID while Active.
    #[test]
    fn the_physical_state_width_speed_and_gid_follow_the_link_as_ibstat_shows_them() {
        let guid = 0x0002_c903_0000_1000;
        let mut p = SimPorts::new(1, guid, Duration::from_ms(1_000), Duration::from_ms(2_000));
        let up = attrs(&mut p, 0);
        assert_eq!((up.state, up.phys), (PortState::Active, PhysState::LinkUp));
        assert_eq!((up.lid, up.sm_lid, up.rate_mbps()), (0x10, SM_LID, 100_000));
        assert_eq!(up.gid[..8], [0xfe, 0x80, 0, 0, 0, 0, 0, 0]);
        assert_eq!(
            up.gid[8..],
            (guid + 1).to_be_bytes(),
            "port GUID: node GUID + 1"
        );
        p.reset(Some(Instant::from_ms(500)));
        let dark = attrs(&mut p, 100);
        assert_eq!(
            (dark.state, dark.phys),
            (PortState::Down, PhysState::Disabled)
        );
        assert_eq!((dark.lid, dark.sm_lid, dark.rate_mbps()), (0, 0, 0));
        assert_eq!(dark.gid, up.gid, "the GID is the port's own");
        assert_eq!(attrs(&mut p, 600).phys, PhysState::Training);
        let init = attrs(&mut p, 1_500);
        assert_eq!(
            (init.state, init.phys),
            (PortState::Init, PhysState::LinkUp)
        );
        assert_eq!(
            (init.lid, init.width, init.speed),
            (0, 4, Some(LinkSpeed::Edr))
        );
        assert!(p.pull_cable(1, Instant::from_ms(4_000), Duration::from_ms(10)));
        assert_eq!(attrs(&mut p, 4_000).phys, PhysState::Polling, "no cable");
        // Down by the reset and by the cable: LinkDownedCounter counts both, once each.
        assert_eq!((p.link_downed(1), p.link_downed(2)), (2, 0));
    }

    #[test]
    fn ports_train_then_get_swept_after_a_reset_with_a_new_lid() {
        let mut p = SimPorts::new(2, 0, Duration::from_ms(1_000), Duration::from_ms(2_000));
        assert_eq!(
            changes(&mut p, 0),
            [(1, PortState::Active, 0x10), (2, PortState::Active, 0x11)]
        );
        p.reset(Some(Instant::from_ms(500)));
        assert_eq!(
            changes(&mut p, 100),
            [(1, PortState::Down, 0), (2, PortState::Down, 0)]
        );
        assert_eq!(
            p.next_change(Instant::from_ms(100)),
            Some(Instant::from_ms(1_500))
        );
        assert_eq!(
            changes(&mut p, 1_500),
            [(1, PortState::Init, 0), (2, PortState::Init, 0)]
        );
        assert_eq!(
            p.next_change(Instant::from_ms(1_500)),
            Some(Instant::from_ms(3_500))
        );
        assert_eq!(
            changes(&mut p, 3_500),
            [(1, PortState::Active, 0x12), (2, PortState::Active, 0x13)]
        );
        assert!(changes(&mut p, 9_000).is_empty(), "nothing changed since");
        assert_eq!(p.next_change(Instant::from_ms(3_500)), None);
    }

    #[test]
    fn a_cable_pull_takes_one_port_down_and_keeps_its_lid() {
        let mut p = SimPorts::new(2, 0, Duration::ZERO, Duration::from_ms(100));
        changes(&mut p, 0);
        assert!(p.pull_cable(2, Instant::from_ms(10), Duration::from_ms(50)));
        assert!(!p.pull_cable(3, Instant::from_ms(10), Duration::from_ms(50)));
        assert_eq!(changes(&mut p, 10), [(2, PortState::Down, 0)]);
        assert_eq!(changes(&mut p, 60), [(2, PortState::Init, 0)]);
        assert_eq!(changes(&mut p, 160), [(2, PortState::Active, 0x11)]);
    }

    #[test]
    fn a_device_that_never_returns_or_is_removed_leaves_its_ports_dark() {
        let mut p = SimPorts::new(1, 0, Duration::ZERO, Duration::ZERO);
        changes(&mut p, 0);
        p.reset(None);
        assert_eq!(changes(&mut p, 1), [(1, PortState::Down, 0)]);
        assert_eq!(p.next_change(Instant::from_ms(1)), None);
        assert!(p.pull_cable(1, Instant::from_ms(2), Duration::ZERO));
        assert_eq!(
            p.state(1, Instant::from_ms(5)),
            PortState::Down,
            "still dark"
        );
        let mut q = SimPorts::new(1, 0, Duration::ZERO, Duration::ZERO);
        q.remove();
        assert_eq!(q.state(1, Instant::ZERO), PortState::Down);
    }

    /// The case: a pull at 1000 ms for 4000 ms, a reset at 2000 ms back at 2401 ms.
    /// Before, the reset plugged the cable back and the port was Active at 2601 ms.
    #[test]
    fn a_reset_never_plugs_a_pulled_cable_back_in() {
        let mut p = SimPorts::new(1, 0, Duration::from_ms(200), Duration::from_ms(100));
        changes(&mut p, 0);
        assert!(p.pull_cable(1, Instant::from_ms(1_000), Duration::from_ms(4_000)));
        assert_eq!(changes(&mut p, 1_000), [(1, PortState::Down, 0)]);
        p.reset(Some(Instant::from_ms(2_401)));
        assert!(changes(&mut p, 2_601).is_empty(), "Down: the cable is out");
        assert!(changes(&mut p, 4_999).is_empty());
        assert!(p.cable_out(1, Instant::from_ms(4_999)));
        assert!(!p.cable_out(1, Instant::from_ms(5_000)));
        assert_eq!(
            p.next_change(Instant::from_ms(2_601)),
            Some(Instant::from_ms(5_200)),
            "training starts at the plug-back"
        );
        assert_eq!(changes(&mut p, 5_200), [(1, PortState::Init, 0)]);
        assert_eq!(changes(&mut p, 5_300), [(1, PortState::Active, 0x11)]);
    }

    /// A pull while the device is in reset (dark) is kept: the port trains from whichever
    /// comes last, the device's light or the cable.
    #[test]
    fn a_pull_while_the_device_is_dark_is_kept_and_training_waits_for_both() {
        let mut p = SimPorts::new(1, 0, Duration::from_ms(100), Duration::ZERO);
        changes(&mut p, 0);
        p.reset(Some(Instant::from_ms(1_000)));
        assert!(p.pull_cable(1, Instant::from_ms(500), Duration::from_ms(2_000)));
        assert_eq!(
            p.next_change(Instant::from_ms(500)),
            Some(Instant::from_ms(2_600))
        );
        assert_eq!(p.state(1, Instant::from_ms(2_599)), PortState::Down);
        assert_eq!(p.state(1, Instant::from_ms(2_600)), PortState::Active);
        // The other order: the cable back before the device.
        let mut q = SimPorts::new(1, 0, Duration::from_ms(100), Duration::ZERO);
        assert!(q.pull_cable(1, Instant::from_ms(10), Duration::from_ms(100)));
        q.reset(Some(Instant::from_ms(1_000)));
        assert_eq!(q.state(1, Instant::from_ms(1_099)), PortState::Down);
        assert_eq!(q.state(1, Instant::from_ms(1_100)), PortState::Active);
    }

    /// Overlapping pulls keep the cable out from the first pull to the latest plug-back; a
    /// shorter pull inside a longer one does not bring it back early, and any number of
    /// resets in between change nothing.
    #[test]
    fn overlapping_pulls_keep_the_cable_out_until_the_latest_plug_back() {
        let mut p = SimPorts::new(2, 0, Duration::ZERO, Duration::ZERO);
        changes(&mut p, 0);
        assert!(p.pull_cable(1, Instant::from_ms(100), Duration::from_ms(1_000)));
        assert!(p.pull_cable(1, Instant::from_ms(200), Duration::from_ms(100)));
        for at in [300, 400, 500] {
            p.reset(Some(Instant::from_ms(at + 1)));
        }
        assert!(p.cable_out(1, Instant::from_ms(1_099)));
        assert_eq!(p.state(1, Instant::from_ms(1_099)), PortState::Down);
        assert_eq!(p.state(2, Instant::from_ms(1_099)), PortState::Active);
        assert!(p.pull_cable(1, Instant::from_ms(1_000), Duration::from_ms(500)));
        assert_eq!(p.state(1, Instant::from_ms(1_499)), PortState::Down);
        assert_eq!(p.state(1, Instant::from_ms(1_500)), PortState::Active);
        assert!(!p.cable_out(3, Instant::from_ms(0)), "no such port");
    }

    /// A device removed or held in reset for good stays dark when its cable comes back.
    #[test]
    fn the_cable_coming_back_does_not_light_a_dark_device() {
        let mut p = SimPorts::new(1, 0, Duration::ZERO, Duration::ZERO);
        assert!(p.pull_cable(1, Instant::from_ms(1), Duration::from_ms(10)));
        p.remove();
        assert_eq!(p.state(1, Instant::from_ms(50)), PortState::Down);
        assert_eq!(p.next_change(Instant::from_ms(50)), None);
    }

    /// What a peer's transport asks of past instants: a port carried nothing while its cable
    /// was out, training or waiting for the sweep, in the latest pull and the one before it
    /// (two flaps close together), and carried before and after; a port a new master
    /// renumbered reaches a connection made under its old LID no more.
    #[test]
    fn a_port_carried_nothing_while_dark_in_either_of_two_flaps_or_to_its_old_lid() {
        let mut p = SimPorts::new(1, 0, Duration::from_ms(10), Duration::from_ms(20));
        let at = Instant::from_ms;
        assert!(p.pull_cable(1, at(100), Duration::from_ms(50)));
        // Out 100 to 150, training to 160, swept at 180.
        assert!(p.pull_cable(1, at(200), Duration::from_ms(50)));
        let carried: std::vec::Vec<bool> = [99, 100, 179, 180, 199, 200, 279, 280]
            .into_iter()
            .map(|ms| p.carried_at(1, at(ms)))
            .collect();
        assert_eq!(
            carried,
            [true, false, false, true, true, false, false, true],
            "dark 100..180 and 200..280"
        );
        p.renumber(at(500));
        assert!(p.carried_since(1, at(0), at(499)));
        assert!(!p.carried_since(1, at(0), at(500)), "the old LID is gone");
        assert!(
            p.carried_since(1, at(500), at(600)),
            "a new connection is fine"
        );
        assert_ne!(attrs(&mut p, 499).lid, attrs(&mut p, 500).lid);
        assert_eq!(p.next_change(at(300)), Some(at(500)), "the new LID is news");
    }
}
