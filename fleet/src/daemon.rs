//! srp_daemon on every port of every host (docs/fleet.md; rdma-core runs one a port,
//! `srp_daemon_port@`): a Linux initiator's discovery of its SRP targets, as SA load. It
//! rescans the fabric every `rescan` (the shipped unit's `-R 60`), and at once when a flap or
//! a leaf's reboot brings a port back (every port of the host rescans then: one leaf's
//! reboot of a dual-rail host counts both) and at a ClientReregister; each rescan registers
//! again for the SA's traps (64, a GID in service, and 144, a port's capabilities changed)
//! and asks the SA for every port that manages devices and for a path to each target:
//! `3 + targets` queries a port, each a MAD waited for 5 s. A rescan with a query unanswered
//! is made again after its timeout, three tries in all; a host has one rescan in flight at a
//! time, and one asked for meanwhile is merged into it.
//!
//! Not modelled: the DM queries to the targets themselves; rescans after an adapter reset's
//! port return; the port's own state (a rescan while the port is down is answered as any);
//! an answer a master's failure cut off on its way (counted answered).
//!
//! The product's hosts are Windows ones, which run no srp_daemon: it is off unless a fleet
//! file asks for it (`fleet.srp_daemon_rescan_ms`), to load the SA as a fleet of Linux
//! initiators would. It finds nothing the disks use (their targets are configured), so its
//! cost is the SA's time, shared with every interface's joins and every disk's PathRecords.

use hcabus::{Duration, Instant};
use ibal::ipoib::SaAnswer;

use super::{Fleet, Step};

/// srp_daemon's MAD timeout and tries (rdma-core `srp_daemon.c`: 5 s, 3 tries).
pub const DAEMON_MAD_TIMEOUT: Duration = Duration::from_ms(5_000);
pub const DAEMON_TRIES: u8 = 3;
/// The shortest period: longer than a rescan's three tries, so a period never finds the
/// one before it still trying.
pub const MIN_RESCAN: Duration = Duration::from_ms(15_000);

/// srp_daemon on every host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrpDaemonSetup {
    /// How often it rescans on its own.
    pub rescan: Duration,
}

/// What the hosts' srp_daemons did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DaemonFigures {
    /// How often each rescans on its own.
    pub rescan: Duration,
    /// Rescans made (each try counted), and the SA queries they sent.
    pub rescans: u64,
    pub queries: u64,
    /// Tries with a query the SA did not answer in time, and rescans given up after their
    /// last try.
    pub unanswered: u64,
    pub given_up: u64,
    /// Rescans asked for while one was in flight, merged into it.
    pub merged: u64,
}

/// The hosts' srp_daemons.
#[derive(Debug, Clone)]
pub(super) struct Daemons {
    setup: SrpDaemonSetup,
    /// SA queries a host's rescan sends (its ports' daemons together).
    per_rescan: u64,
    /// Each host's rescan trying again, if one is.
    in_flight: Vec<bool>,
    pub(super) figures: DaemonFigures,
}

/// Why a rescan is made: its own period (which schedules the next), or an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cause {
    Period,
    Event,
}

impl Daemons {
    pub(super) fn new(setup: SrpDaemonSetup, (hosts, ports, targets): (usize, u64, usize)) -> Self {
        Daemons {
            setup,
            per_rescan: ports * (3 + targets as u64),
            in_flight: std::vec![false; hosts],
            figures: DaemonFigures {
                rescan: setup.rescan,
                ..DaemonFigures::default()
            },
        }
    }
}

impl Fleet {
    /// Starts every host's daemon that runs from the start: its first rescan once its port
    /// is Active (a staged power-on starts each with its operating system).
    pub(super) fn start_daemons(&mut self, setup: Option<SrpDaemonSetup>) {
        let Some(setup) = setup else {
            return;
        };
        let ports = self.hosts.first().map_or(1, |h| {
            h.adapters()
                .iter()
                .map(|a| u64::from(a.hca().port_count()))
                .sum()
        });
        let shape = (self.hosts.len(), ports, self.targets.len());
        self.daemons = Some(Daemons::new(setup, shape));
        if self.staged.is_some() {
            return;
        }
        for i in 0..self.hosts.len() as u32 {
            // Its ports are pulled a microsecond past their place in the sweep (`template.rs`).
            let reach = Duration::from_us(1) + self.sm.reaches(i);
            self.rescan_at(i, Instant::ZERO + self.fabric + reach, Cause::Period);
        }
    }

    /// Host `i`'s daemon rescans at `at` (its port up again, a ClientReregister).
    pub(super) fn rescan_at(&mut self, i: u32, at: Instant, cause: Cause) {
        if self.daemons.is_some() {
            let step = Step::Rescan {
                host: i,
                tries: 0,
                period: cause == Cause::Period,
            };
            self.insert_step(at, step);
        }
    }

    /// A rescan of host `i`'s daemon, its try `tries`: every query to the SA now; one not
    /// answered in time makes it try again after the timeout. One of its period schedules
    /// the next.
    pub(super) fn rescan(&mut self, i: u32, tries: u8, period: bool) {
        let now = self.now;
        if self.powered_off(i) {
            return;
        }
        let Some(d) = &mut self.daemons else {
            return;
        };
        let again = period.then_some(now + d.setup.rescan);
        let busy = &mut d.in_flight[i as usize];
        if *busy && tries == 0 {
            // One in flight: this one is merged into it.
            d.figures.merged += 1;
            if let Some(at) = again {
                self.rescan_at(i, at, Cause::Period);
            }
            return;
        }
        *busy = false;
        d.figures.rescans += 1;
        let mut answered = true;
        for _ in 0..d.per_rescan {
            d.figures.queries += 1;
            answered &= match self.subnet.query(now, DAEMON_MAD_TIMEOUT) {
                SaAnswer::At(t) => t <= now + DAEMON_MAD_TIMEOUT,
                SaAnswer::Busy(_) | SaAnswer::Lost => false,
            };
        }
        let retry = match answered {
            true => None,
            false => {
                d.figures.unanswered += 1;
                if tries + 1 >= DAEMON_TRIES {
                    d.figures.given_up += 1;
                    None
                } else {
                    d.in_flight[i as usize] = true;
                    Some(now + DAEMON_MAD_TIMEOUT)
                }
            }
        };
        if let Some(at) = retry {
            let step = Step::Rescan {
                host: i,
                tries: tries + 1,
                period: false,
            };
            self.insert_step(at, step);
        }
        if let Some(at) = again {
            self.rescan_at(i, at, Cause::Period);
        }
    }

    /// What the hosts' srp_daemons did (`None`: none runs).
    pub fn daemons(&self) -> Option<DaemonFigures> {
        self.daemons.as_ref().map(|d| d.figures)
    }
}
