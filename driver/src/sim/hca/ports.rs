//! The simulated adapter's ports: link training and the subnet manager's sweep in virtual
//! time (SPEC §2, §5 "Ports").
//!
//! After a hardware reset (or a cable plugged back) a port is Down until its link has
//! trained (`link_up`), Init until the subnet manager has swept and assigned it a LID
//! (`sm_sweep`), then Active. A reset gives the port a new LID, as a subnet manager may; a
//! cable pull keeps it. The host reads the changes with [`SimPorts::poll`] and hands each to
//! the coordinator, as a driver would from the adapter's port-change event.

use crate::time::{Duration, Instant};
use crate::types::{PortState, MAX_PORTS};

/// LIDs the simulated subnet manager hands out (unicast LIDs start at 1).
const FIRST_LID: u16 = 0x10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    /// Trained and swept: Active.
    Up,
    /// Light from `from` on: training, then the sweep.
    Training { from: Instant },
    /// No light until something else happens (device held in reset for good, removed).
    Dark,
}

#[derive(Debug, Clone, Copy)]
struct Port {
    link: Link,
    lid: u16,
    /// What the host was last told.
    reported: Option<(PortState, u16)>,
}

/// Every port of one adapter.
#[derive(Debug, Clone)]
pub struct SimPorts {
    ports: [Option<Port>; MAX_PORTS as usize],
    link_up: Duration,
    sm_sweep: Duration,
    next_lid: u16,
}

impl SimPorts {
    /// `count` ports (1..=MAX_PORTS), Active from the start.
    pub fn new(count: u8, link_up: Duration, sm_sweep: Duration) -> Self {
        let mut ports = [None; MAX_PORTS as usize];
        let mut next_lid = FIRST_LID;
        for p in ports.iter_mut().take(usize::from(count.min(MAX_PORTS))) {
            *p = Some(Port {
                link: Link::Up,
                lid: next_lid,
                reported: None,
            });
            next_lid += 1;
        }
        SimPorts {
            ports,
            link_up,
            sm_sweep,
            next_lid,
        }
    }

    fn state_at(&self, link: Link, now: Instant) -> PortState {
        match link {
            Link::Up => PortState::Active,
            Link::Dark => PortState::Down,
            Link::Training { from } if now < from + self.link_up => PortState::Down,
            Link::Training { from } if now < from + self.link_up + self.sm_sweep => PortState::Init,
            Link::Training { .. } => PortState::Active,
        }
    }

    /// The device was reset: every port goes dark, and trains again from `ready_at` (`None`:
    /// the device never comes back). Each gets a new LID when it is swept.
    pub fn reset(&mut self, ready_at: Option<Instant>) {
        for p in self.ports.iter_mut().flatten() {
            p.link = ready_at.map_or(Link::Dark, |from| Link::Training { from });
            p.lid = self.next_lid;
            self.next_lid = self.next_lid.wrapping_add(1).max(FIRST_LID);
        }
    }

    /// The device is gone: no port has light any more.
    pub fn remove(&mut self) {
        for p in self.ports.iter_mut().flatten() {
            p.link = Link::Dark;
        }
    }

    /// A cable pulled at `now` and plugged back `duration` later; `false` for no such port.
    pub fn pull_cable(&mut self, port: u8, now: Instant, duration: Duration) -> bool {
        let Some(Some(p)) = port
            .checked_sub(1)
            .and_then(|i| self.ports.get_mut(usize::from(i)))
        else {
            return false;
        };
        // A dark port (device in reset or gone) stays dark: the reset decides its light.
        if p.link != Link::Dark {
            p.link = Link::Training {
                from: now + duration,
            };
        }
        true
    }

    /// The state of `port` now (Down for a port the adapter does not have).
    pub fn state(&self, port: u8, now: Instant) -> PortState {
        port.checked_sub(1)
            .and_then(|i| self.ports.get(usize::from(i)).copied().flatten())
            .map_or(PortState::Down, |p| self.state_at(p.link, now))
    }

    /// Calls `report(port, state, lid)` for every port whose state changed since the last
    /// poll (every port on the first); the LID is the port's while Active, 0 otherwise.
    pub fn poll(&mut self, now: Instant, mut report: impl FnMut(u8, PortState, u16)) {
        for i in 0..self.ports.len() {
            let Some(p) = self.ports[i] else {
                continue;
            };
            let state = self.state_at(p.link, now);
            let lid = if state == PortState::Active { p.lid } else { 0 };
            if p.reported != Some((state, lid)) {
                if let Some(port) = self.ports[i].as_mut() {
                    port.reported = Some((state, lid));
                }
                report(i as u8 + 1, state, lid);
            }
        }
    }

    /// When a port's state next changes on its own (training or the sweep ending).
    pub fn next_change(&self, now: Instant) -> Option<Instant> {
        self.ports
            .iter()
            .flatten()
            .filter_map(|p| match p.link {
                Link::Training { from } => {
                    [from + self.link_up, from + self.link_up + self.sm_sweep]
                        .into_iter()
                        .find(|t| *t > now)
                }
                _ => None,
            })
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changes(p: &mut SimPorts, at_ms: u64) -> std::vec::Vec<(u8, PortState, u16)> {
        let mut out = std::vec::Vec::new();
        p.poll(Instant::from_ms(at_ms), |port, s, lid| {
            out.push((port, s, lid))
        });
        out
    }

    #[test]
    fn ports_train_then_get_swept_after_a_reset_with_a_new_lid() {
        let mut p = SimPorts::new(2, Duration::from_ms(1_000), Duration::from_ms(2_000));
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
        let mut p = SimPorts::new(2, Duration::ZERO, Duration::from_ms(100));
        changes(&mut p, 0);
        assert!(p.pull_cable(2, Instant::from_ms(10), Duration::from_ms(50)));
        assert!(!p.pull_cable(3, Instant::from_ms(10), Duration::from_ms(50)));
        assert_eq!(changes(&mut p, 10), [(2, PortState::Down, 0)]);
        assert_eq!(changes(&mut p, 60), [(2, PortState::Init, 0)]);
        assert_eq!(changes(&mut p, 160), [(2, PortState::Active, 0x11)]);
    }

    #[test]
    fn a_device_that_never_returns_or_is_removed_leaves_its_ports_dark() {
        let mut p = SimPorts::new(1, Duration::ZERO, Duration::ZERO);
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
        let mut q = SimPorts::new(1, Duration::ZERO, Duration::ZERO);
        q.remove();
        assert_eq!(q.state(1, Instant::ZERO), PortState::Down);
    }
}
