//! Idle checks (docs/design.md §7 "Idle checks"): a path of a multipath disk that has had
//! nothing out for a second sends a check (SCSI's TEST UNIT READY: no data, no block), at
//! most one a second, so that a dead path with no I/O on it is known before I/O needs it,
//! as multipathd's path checkers and MPIO's path verification do. A check is a command like
//! any other to the target and to fast path failover: answered, it is a round trip (the
//! selector's price, the other paths' overtaking evidence); unanswered past the path's
//! timeout while another path answers, it is given up and the path is probed. It is
//! nobody's I/O: never completed upward, never handed to another path.
//!
//! A path also checks on demand: when another path's command is out past that path's
//! timeout and no younger command was answered elsewhere, an idle path sends a check at
//! once, so that a dead path is known within its timeout and a round trip even when I/O is
//! sparse (at 2 IOPS the next I/O on another path is 500 ms away).

use hcabus::{Duration, Instant};

use super::SrpDisk;
use crate::access::FabricBus;
use crate::io::IoRequest;

/// How long a path may have nothing out before it is checked, and so the most checks a
/// second it sends: one.
pub const CHECK_IDLE: Duration = Duration::from_ms(1_000);

impl SrpDisk {
    /// When this path's next idle check is due: a second after it last sent anything (or
    /// logged in), while it is up with nothing out and nothing waiting to be sent.
    pub(super) fn check_due(&self) -> Option<Instant> {
        let idle = self.slots.answers_owed() == 0 && self.slots.queued() == 0;
        let since = self.last_sent.filter(|_| idle && self.is_up())?;
        Some(since + CHECK_IDLE)
    }

    /// Queues the idle check when it is due (the caller's pump sends it).
    pub(super) fn check_if_idle<B: FabricBus + ?Sized>(&mut self, bus: &mut B) {
        let now = bus.now();
        if self.check_due().is_none_or(|t| t > now) {
            return;
        }
        if self.submit(bus, IoRequest::check(now), false).is_ok() {
            self.stats.checks_sent += 1;
            // Counted as sent once it is queued: the next one waits a second from here
            // whether or not the pump could send this one.
            self.last_sent = Some(now);
        }
    }
}

impl SrpDisk {
    /// When this path checks at once to give another path's late command (sent at
    /// `since`) its evidence: it is up with nothing out or waiting, and sent nothing since
    /// then. One check per late command at most: once sent, it has sent after `since`.
    pub(super) fn demand_check_due(&self, since: Instant) -> Option<Instant> {
        let idle = self.slots.answers_owed() == 0 && self.slots.queued() == 0;
        let quiet = self.last_sent.is_none_or(|t| t < since);
        (idle && quiet && self.is_up()).then_some(since)
    }

    /// Checks this path at once: its oldest command is late and it sent nothing after it.
    pub(super) fn check_self<B: FabricBus + ?Sized>(&mut self, bus: &mut B) {
        let now = bus.now();
        if self.submit(bus, IoRequest::check(now), false).is_ok() {
            self.stats.checks_sent += 1;
            self.stats.checks_on_demand += 1;
            self.last_sent = Some(now);
        }
    }

    /// Sends the check another path's late command wants, when due.
    pub(super) fn check_on_demand<B: FabricBus + ?Sized>(&mut self, bus: &mut B, since: Instant) {
        let now = bus.now();
        if self.demand_check_due(since).is_none_or(|t| t > now) {
            return;
        }
        if self.submit(bus, IoRequest::check(now), false).is_ok() {
            self.stats.checks_sent += 1;
            self.stats.checks_on_demand += 1;
            self.last_sent = Some(now);
        }
    }
}
