//! srp_daemon on every host (docs/fleet.md): a Linux initiator's discovery of its SRP
//! targets, as SA load. It rescans the fabric every `rescan` (the shipped unit's `-R 60`),
//! and at once when its port comes up, after a ClientReregister and after a flap; each
//! rescan registers again for the SA's traps (64, a GID in service, and 144, a port's
//! capabilities changed) and asks the SA for every port that manages devices and for a path
//! to each target: `3 + targets` queries, each a MAD waited for 5 s. A rescan with a query
//! unanswered is made again after its timeout, three tries in all.
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

/// srp_daemon on every host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrpDaemonSetup {
    /// How often it rescans on its own.
    pub rescan: Duration,
}

/// What the hosts' srp_daemons did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DaemonFigures {
    /// Rescans made (each try counted), and the SA queries they sent.
    pub rescans: u64,
    pub queries: u64,
    /// Tries with a query the SA did not answer in time, and rescans given up after their
    /// last try.
    pub unanswered: u64,
    pub given_up: u64,
}

/// The hosts' srp_daemons.
#[derive(Debug, Clone)]
pub(super) struct Daemons {
    setup: SrpDaemonSetup,
    /// SA queries a rescan sends.
    per_rescan: u64,
    pub(super) figures: DaemonFigures,
}

/// Why a rescan is made: its own period (which schedules the next), or an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cause {
    Period,
    Event,
}

impl Daemons {
    pub(super) fn new(setup: SrpDaemonSetup, targets: usize) -> Self {
        Daemons {
            setup,
            per_rescan: 3 + targets as u64,
            figures: DaemonFigures::default(),
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
        self.daemons = Some(Daemons::new(setup, self.targets.len()));
        if self.staged.is_some() {
            return;
        }
        for i in 0..self.hosts.len() as u32 {
            let active = Instant::ZERO + self.fabric + self.sm.reaches(i);
            self.rescan_at(i, active, Cause::Period);
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
        d.figures.rescans += 1;
        let mut answered = true;
        for _ in 0..d.per_rescan {
            d.figures.queries += 1;
            answered &= match self.subnet.query(now, DAEMON_MAD_TIMEOUT) {
                SaAnswer::At(t) => t <= now + DAEMON_MAD_TIMEOUT,
                SaAnswer::Busy(_) | SaAnswer::Lost => false,
            };
        }
        let again = period.then_some(now + d.setup.rescan);
        let retry = match answered {
            true => None,
            false => {
                d.figures.unanswered += 1;
                if tries + 1 >= DAEMON_TRIES {
                    d.figures.given_up += 1;
                    None
                } else {
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
